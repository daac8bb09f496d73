"""Writes that land while an archival of the same memory is under way (drafted, its
original written, its record not yet committed), on every backend combination.

- a `replace` (upsert) racing an archival: whichever commits first, nothing points at
  a deleted original and nothing is left behind; a replace that fails keeps the old
  memory whole, the original the archival wrote included;
- a hard delete racing an archival: the memory goes, its record and originals with it,
  whichever commits first;
- a `forget()` (or pin, or supersession) between the draft and the commit: the
  archival does not commit a record and an original that lack it; the memory stays
  live with the change, and a later archival carries it.

Interleavings are made deterministic with hooks: a summariser that runs the other
write while the archival drafts, or events that hold the archival before its commit
and let it commit mid-write (`WHERE`: before the write's transaction opens, or inside
its store call on a store without transactions, as Weaviate's).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.engine.clusters import due_cluster, open_clustering
from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    BackendUnavailableError,
    ManualClock,
    Memory,
    Tier,
)
from tiered_memory.ports import Summary, SummaryRequest
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

NS = "races"
OLD = "Parked on level 3, bay C12"
NEW = "Parked on level 1, bay A2"


class Meanwhile:
    """A summariser that runs `write` once, while the archival drafts: after the
    archival read the memory, before anything of it is written or committed."""

    def __init__(self, write: Callable[[], Awaitable[object]]) -> None:
        self.write = write
        self.inner = ExtractiveSummarizer()
        self.done = False

    async def summarize(self, request: SummaryRequest) -> Summary:
        if not self.done:
            self.done = True
            await self.write()
        return await self.inner.summarize(request)


async def _keys(amem: AsyncTieredMemory) -> list[str]:
    return sorted(await amem.objects.list(NS))


async def _held_before_commit(
    amem: AsyncTieredMemory, memory_id: str
) -> tuple[asyncio.Task[int], asyncio.Event, asyncio.Event]:
    """An explicit archive() of `memory_id`, started and held just before its commit
    (its original written and verified): returns the task, the event it sets on
    arriving there, and the event that lets it commit."""
    arrived, go = asyncio.Event(), asyncio.Event()
    commit = amem.archiver.commit

    async def held(*args: Any, **kwargs: Any) -> set[str]:
        arrived.set()
        await go.wait()
        return await commit(*args, **kwargs)

    amem.archiver.commit = held  # type: ignore[method-assign]
    task = asyncio.create_task(amem.archive([memory_id], namespace=NS))
    await arrived.wait()
    return task, arrived, go


async def _live_with_the_new_value(amem: AsyncTieredMemory) -> None:
    live = await amem.get("car", namespace=NS)
    assert live is not None
    assert live.content == NEW
    assert live.tier is not Tier.ARCHIVED


BEFORE, INSIDE = "before-its-transaction", "inside-its-write-no-transactions"
WHERE = [BEFORE, INSIDE]
"""Where the held archival commits in a write that found the memory live and not
archived. BEFORE: right after the write's first read of the store, before the write
opens its transaction, the only point between the two where an archival can commit
on a store with transactions (it waits for the write's transaction otherwise, from
this process or another). INSIDE: in the write's store call itself, on a store whose
transactions are a no-op (Weaviate's: simulated by making the SQLite store's one)."""


@asynccontextmanager
async def _no_transaction() -> AsyncIterator[None]:
    yield


def _archival_commits_mid_write(
    amem: AsyncTieredMemory,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    *,
    read: str,
    write: str,
    archival: asyncio.Task[int],
    go: asyncio.Event,
    fail: bool = False,
) -> None:
    """The racing write makes its first read of the store (`read`: it finds the memory
    live and not archived), the held archival commits (`where`), and the write goes on
    to its store call `write`, which fails as a store that went away would when
    `fail`."""
    committed = False

    async def commit_once() -> None:
        nonlocal committed
        if not committed:  # the archival's own commit may make the same call
            committed = True
            go.set()
            assert await archival == 1  # the archival commits first

    first_read, store_write = getattr(amem.store, read), getattr(amem.store, write)

    async def read_then_commit(*args: Any, **kwargs: Any) -> Any:
        result = await first_read(*args, **kwargs)
        if where == BEFORE:
            await commit_once()
        return result

    async def commit_then_write(*args: Any, **kwargs: Any) -> Any:
        if where == INSIDE:
            await commit_once()
        if fail:
            raise BackendUnavailableError(f"the store went away mid-{write}")
        return await store_write(*args, **kwargs)

    if where == INSIDE:
        monkeypatch.setattr(amem.store, "transaction", _no_transaction)
    monkeypatch.setattr(amem.store, read, read_then_commit)
    monkeypatch.setattr(amem.store, write, commit_then_write)


@pytest.mark.parametrize("where", WHERE)
async def test_a_replace_that_fails_after_an_archival_committed_keeps_the_original(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The archival wrote the original; the replace starts, the archival commits its
    record, then the replace fails in the store. The old memory must be whole: archived,
    with the original its record verifies (the replace used to delete it up front, as a
    leftover of an unfinished archival)."""
    await amem.add(OLD, namespace=NS, id="car")
    archival, _, go = await _held_before_commit(amem, "car")
    _archival_commits_mid_write(
        amem,
        monkeypatch,
        where,
        read="get_archives",
        write="replace_many",
        archival=archival,
        go=go,
        fail=True,
    )
    with pytest.raises(BackendUnavailableError):
        await amem.upsert(NEW, id="car", namespace=NS)
    assert (await amem.get("car", namespace=NS)).tier is Tier.ARCHIVED  # type: ignore[union-attr]
    assert (await amem.expand("car", namespace=NS))["content"] == OLD  # verified


@pytest.mark.parametrize("where", WHERE)
async def test_a_replace_after_an_archival_committed_mid_replace_leaves_nothing_behind(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Same interleaving, the replace succeeding: the new value is live, and the
    original the archival wrote goes with the record it replaced."""
    await amem.add(OLD, namespace=NS, id="car")
    archival, _, go = await _held_before_commit(amem, "car")
    _archival_commits_mid_write(
        amem,
        monkeypatch,
        where,
        read="get_archives",
        write="replace_many",
        archival=archival,
        go=go,
    )
    await amem.upsert(NEW, id="car", namespace=NS)
    await _live_with_the_new_value(amem)
    assert await amem.store.get_archives(NS, ["car"]) == {}
    assert await _keys(amem) == []


async def test_a_replace_before_an_archival_commits_wins_and_the_archival_aborts(
    amem: AsyncTieredMemory,
) -> None:
    """The replace lands after the archival wrote its original and before it commits:
    the replacement stays live (the archival's draft is of the old value), and the
    original the archival wrote is deleted, by one side or the other."""
    await amem.add(OLD, namespace=NS, id="car")
    archival, _, go = await _held_before_commit(amem, "car")
    await amem.upsert(NEW, id="car", namespace=NS)
    go.set()
    assert await archival == 0
    await _live_with_the_new_value(amem)
    assert await amem.store.archival_states(NS, ["car"]) == {}
    assert await _keys(amem) == []
    assert await amem.archive(["car"], namespace=NS) == 1  # a later archival: the new value
    assert (await amem.expand("car", namespace=NS))["content"] == NEW


async def test_an_archival_whose_claim_outlived_a_replace_does_not_commit_the_old_value(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store without transactions (Weaviate) can leave the claim in place when the
    replace lands between its journal read and its write: simulated here by claiming
    the memory back for the archival right after the swap. The commit still sees that
    the memory is not the one it drafted, and leaves it live with the new value."""
    await amem.add(OLD, namespace=NS, id="car")
    archival, _, go = await _held_before_commit(amem, "car")
    (state,) = (await amem.store.archival_states(NS, ["car"])).values()
    assert state.claimant is not None
    assert state.claimed_until is not None
    replace_many = amem.store.replace_many

    async def claim_survives(namespace: str, memories: Sequence[Any]) -> object:
        replaced = await replace_many(namespace, memories)
        assert state.claimant is not None
        assert state.claimed_until is not None
        await amem.store.claim_archival(
            namespace,
            ["car"],
            claimant=state.claimant,
            until=state.claimed_until,
            now=state.claimed_until - timedelta(seconds=1),
        )
        return replaced

    monkeypatch.setattr(amem.store, "replace_many", claim_survives)
    await amem.upsert(NEW, id="car", namespace=NS)
    go.set()
    assert await archival == 0
    await _live_with_the_new_value(amem)
    assert await _keys(amem) == []


async def test_a_replace_while_the_archival_drafts_wins(amem: AsyncTieredMemory) -> None:
    await amem.add(OLD, namespace=NS, id="car")
    amem.archiver.summarizer = Meanwhile(lambda: amem.upsert(NEW, id="car", namespace=NS))
    assert await amem.archive(["car"], namespace=NS) == 0
    await _live_with_the_new_value(amem)
    assert await _keys(amem) == []


async def _changed_while_drafted(
    amem: AsyncTieredMemory, change: Callable[[], Awaitable[object]]
) -> Memory:
    """Archive a memory while `change` lands during its draft: nothing commits, the
    memory stays live, and the aborted attempt's original is gone. Returns it."""
    await amem.add(OLD, namespace=NS, id="car")
    amem.archiver.summarizer = Meanwhile(change)
    assert await amem.archive(["car"], namespace=NS) == 0
    live = await amem.get("car", namespace=NS)
    assert live is not None
    assert live.tier is not Tier.ARCHIVED
    assert await _keys(amem) == []
    return live


async def test_a_forget_between_the_draft_and_the_commit_is_not_lost(
    amem: AsyncTieredMemory,
) -> None:
    """The archival drafted the memory before the forget: committing that draft would
    archive it as not forgotten (record and original), so it does not commit; the
    memory stays live and forgotten, and the next archival carries the forget."""
    live = await _changed_while_drafted(amem, lambda: amem.forget("car", namespace=NS))
    assert live.do_not_inject

    assert await amem.archive(["car"], namespace=NS) == 1
    (record,) = (await amem.store.get_archives(NS, ["car"])).values()
    assert record.do_not_inject is True
    assert (await amem.expand("car", namespace=NS))["memory"]["do_not_inject"] is True
    await amem.restore_archive(["car"], namespace=NS)
    back = await amem.get("car", namespace=NS)
    assert back is not None
    assert back.do_not_inject


async def test_a_pin_between_the_draft_and_the_commit_keeps_the_memory_live(
    amem: AsyncTieredMemory,
) -> None:
    """A pinned memory is never archived; one pinned while its archival drafts is not
    either."""
    live = await _changed_while_drafted(amem, lambda: amem.pin("car", namespace=NS))
    assert live.pinned


async def test_a_forget_during_a_sweep_is_not_lost_and_not_a_failure(
    amem: AsyncTieredMemory, clock: ManualClock
) -> None:
    """The sweep's path: the memory stays COLD and forgotten, no error is reported, no
    failure counted toward its quarantine; the next sweep archives it forgotten."""
    (m,) = await amem.add_many([{"content": OLD, "importance": 0.1}], namespace=NS, dedup=False)
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    amem.archiver.summarizer = Meanwhile(lambda: amem.forget(m.id, namespace=NS))
    report = await amem.maintain()
    assert report.errors == []
    assert report.count("cold_to_archived") == 0
    live = await amem.get(m.id, namespace=NS)
    assert live is not None
    assert live.do_not_inject
    assert live.tier is Tier.COLD
    assert await amem.quarantined(namespace=NS) == []
    states = await amem.store.archival_states(NS, [m.id])
    assert all(s.failures == 0 and s.claimant is None for s in states.values())

    report = await amem.maintain()
    assert report.count("cold_to_archived") == 1
    (record,) = (await amem.store.get_archives(NS, [m.id])).values()
    assert record.do_not_inject is True


@pytest.mark.parametrize("where", WHERE)
async def test_a_hard_delete_racing_an_archival_deletes_the_memory_and_its_original(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The delete finds the memory live; the archival commits its record before the
    live row goes. The memory must still be gone, with every original of it (the delete
    used to delete the archival's original first and then find nothing live to delete,
    leaving an archived memory without its original)."""
    await amem.add(OLD, namespace=NS, id="car")
    archival, _, go = await _held_before_commit(amem, "car")
    _archival_commits_mid_write(
        amem, monkeypatch, where, read="get_many", write="delete_many", archival=archival, go=go
    )
    await amem.forget("car", namespace=NS, hard=True)
    assert await amem.get("car", namespace=NS) is None
    assert await amem.store.get_archives(NS, ["car"]) == {}
    assert await _keys(amem) == []


async def test_a_hard_delete_before_an_archival_commits_wins(amem: AsyncTieredMemory) -> None:
    await amem.add(OLD, namespace=NS, id="car")
    archival, _, go = await _held_before_commit(amem, "car")
    assert await amem.forget_many(["car"], namespace=NS, hard=True) == 1
    go.set()
    assert await archival == 0
    assert await amem.get("car", namespace=NS) is None
    assert await _keys(amem) == []


async def test_a_forget_of_one_member_keeps_its_whole_cluster_live(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """A cluster commits whole or not at all: its summary is on one member's record, so
    committing the others without the changed one would leave it, or them, unfound.
    The next sweep archives the cluster again, the forget included."""
    amem = await open_clustering(memories, tmp_path / "c.db", clock)
    try:
        added = await due_cluster(amem, clock, NS)
        ids = [m.id for m in added]
        amem.archiver.summarizer = Meanwhile(lambda: amem.forget(ids[1], namespace=NS))
        first = await amem.maintain()
        assert first.errors == []
        assert first.count("cold_to_archived") == 0
        live = await amem.store.get_many(NS, ids)
        assert {m.tier for m in live.values()} == {Tier.COLD}
        assert live[ids[1]].do_not_inject
        assert sorted(await amem.objects.list(NS)) == []
        second = await amem.maintain()
        assert second.count("cold_to_archived") == 2
        assert second.count("archive_clusters") == 1
        records = await amem.store.get_archives(NS, ids)
        assert records[ids[1]].do_not_inject is True
        assert records[ids[0]].do_not_inject is False
    finally:
        await amem.close()


@pytest.mark.parametrize("where", WHERE)
async def test_a_cluster_archived_mid_replace_of_its_summary_holder_stays_found(
    tmp_path: Path,
    clock: ManualClock,
    memories: MemoryFactory,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    """A sweep archives a cluster while its summary's holder is replaced, committing
    after the replace found the holder live. The holder's record goes with the replace,
    and its cluster's summary must pass to the member that stays archived (from the
    queue: the original that lists the members goes after it): on a store without
    transactions the replace read the archival's original in the journal before the
    record existed, and queued it without the hand-on."""
    amem = await open_clustering(memories, tmp_path / "c.db", clock)
    try:
        added = await due_cluster(amem, clock, NS)
        arrived, go = asyncio.Event(), asyncio.Event()
        drafted: list[Any] = []
        commit = amem.archiver.commit

        async def held(ns: str, drafts: Sequence[Any], **kwargs: Any) -> set[str]:
            drafted.extend(drafts)
            arrived.set()
            await go.wait()
            return await commit(ns, drafts, **kwargs)

        async def clusters_archived() -> int:
            return (await amem.maintain()).count("archive_clusters")

        amem.archiver.commit = held  # type: ignore[method-assign]
        sweep = asyncio.create_task(clusters_archived())
        await arrived.wait()
        (holder,) = [d.id for d in drafted if d.record.summary_embedding is not None]
        (mate,) = [m.id for m in added if m.id != holder]
        _archival_commits_mid_write(
            amem,
            monkeypatch,
            where,
            read="get_archives",
            write="replace_many",
            archival=sweep,
            go=go,
        )
        await amem.upsert(NEW, id=holder, namespace=NS)
        assert (await amem.store.get_archives(NS, [holder])) == {}
        kept = (await amem.store.get_archives(NS, [mate]))[mate]
        assert kept.summary_embedding is not None  # the cluster is found
        assert await amem.store.pending_originals(NS) == []
        assert [k.split("@")[0] for k in await amem.objects.list(NS)] == [mate]
    finally:
        await amem.close()
