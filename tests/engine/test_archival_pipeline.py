"""The archival pipeline as one policy (issue 16, item 1): claims, the per-run cap and
quarantine, on the embedded store with a manual clock.

- an explicit `archive()` racing a sweep that archives the same due memory: exactly one
  of them archives it, and the record verifies the bytes it points at;
- `batch_size` caps the memories one run archives;
- a memory that keeps failing is set aside (quarantined) after
  `ArchivalPolicy.quarantine_after` counted failures, reported by `stats()` and
  `maintain()`, and released by archiving it explicitly; the rest proceeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.distinct import distinct_texts
from tests.engine.clusters import open_clustering
from tests.matrix import MemoryFactory
from tiered_memory import (
    ArchivalPolicy,
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    NotFoundError,
    Policy,
    Tier,
    ValidationError,
)
from tiered_memory.archive import original_key, sha256_hex
from tiered_memory.ports import Summary, SummaryRequest
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

NS = "pipeline"
WAIT = 0.5  # seconds a rendezvous waits for the other side before going on alone


async def _due(
    amem: AsyncTieredMemory, clock: ManualClock, texts: Sequence[str], *more: tuple[str, int]
) -> list[str]:
    """Unimportant memories (`texts` in NS, and `n` more in each other namespace of
    `more`), made COLD and then due for archival; the ids of those in NS."""
    added = await amem.add_many(
        [{"content": text, "importance": 0.1} for text in texts], namespace=NS, dedup=False
    )
    for namespace, n in more:
        await amem.add_many(
            [{"content": f"Ticket {i} closed", "importance": 0.1} for i in range(n)],
            namespace=namespace,
            dedup=False,
        )
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    return [m.id for m in added]


async def _engine(
    memories: MemoryFactory, tmp_path: Path, clock: ManualClock, **policy: Any
) -> AsyncTieredMemory:
    return await memories.open(
        tmp_path / "m.db",
        embedder=HashingEmbedder(),
        clock=clock,
        policy=Policy(archival=ArchivalPolicy(**policy)),
    )


class Rendezvous:
    """A summariser that makes two archivals of one memory overlap: the first caller
    waits for a second one; the second waits until the first has committed its record.
    Without a claim both go on to write an original and commit; with one, the second
    never gets here, and the first goes on alone after WAIT seconds."""

    def __init__(self, committed: asyncio.Event) -> None:
        self.inner = ExtractiveSummarizer()
        self.committed = committed
        self.second = asyncio.Event()
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.calls += 1
        if self.calls == 1:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.second.wait(), WAIT)
        else:
            self.second.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.committed.wait(), WAIT)
        return await self.inner.summarize(request)


async def test_archive_racing_the_sweep_archives_once_and_the_record_verifies(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    amem = await _engine(memories, tmp_path, clock)
    try:
        (memory_id,) = await _due(amem, clock, ["Ava's piano lesson moved to Thursday at 5"])
        committed = asyncio.Event()
        amem.archiver.summarizer = Rendezvous(committed)
        store, archive_many = amem.store, amem.store.archive_many

        async def signalling(*args: Any, **kwargs: Any) -> int:
            try:
                return await archive_many(*args, **kwargs)
            finally:
                committed.set()

        store.archive_many = signalling  # type: ignore[method-assign]
        by_call, report = await asyncio.gather(
            amem.archive([memory_id], namespace=NS), amem.maintain()
        )
        store.archive_many = archive_many  # type: ignore[method-assign]

        assert by_call + report.count("cold_to_archived") == 1, (by_call, report.moved)
        assert report.errors == []
        assert (await amem.get(memory_id, namespace=NS)).tier is Tier.ARCHIVED  # type: ignore[union-attr]
        original = await amem.expand(memory_id, namespace=NS)
        assert original["content"] == "Ava's piano lesson moved to Thursday at 5"
        assert await amem.restore_archive([memory_id], namespace=NS) == 1
        back = await amem.get(memory_id, namespace=NS)
        assert back is not None
        assert back.content == original["content"]
    finally:
        await amem.close()


async def test_archive_of_a_memory_another_call_is_archiving_reports_nothing(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """Two explicit archivals of one memory at once: one archives it, the other says 0."""
    amem = await _engine(memories, tmp_path, clock)
    try:
        (memory_id,) = await _due(amem, clock, ["Marco's flight lands at 7:40 on Friday"])
        amem.archiver.summarizer = Rendezvous(asyncio.Event())
        results = await asyncio.gather(
            amem.archive([memory_id], namespace=NS),
            amem.archive([memory_id], namespace=NS),
            return_exceptions=True,
        )
        counted = [r for r in results if isinstance(r, int)]
        assert sum(counted) == 1, results
        for r in results:  # the loser found it archived already, or claimed by the winner
            assert isinstance(r, (int, NotFoundError)), results
        assert (await amem.expand(memory_id, namespace=NS))["content"].startswith("Marco")
    finally:
        await amem.close()


async def test_batch_size_caps_each_run(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    amem = await _engine(memories, tmp_path, clock, batch_size=10)
    try:
        texts = [f"Invoice {1000 + i} was paid late" for i in range(25)]
        ids = await _due(amem, clock, texts, ("other", 6))
        dry = await amem.maintain(dry_run=True)
        assert dry.count("cold_to_archived") == 10
        assert dry.archive_estimate is not None
        assert dry.archive_estimate.candidates == 10
        archived = []
        for _ in range(4):
            report = await amem.maintain()
            assert report.errors == []
            archived.append(report.count("cold_to_archived"))
        assert archived == [10, 10, 10, 1]  # 31 due, in 2 namespaces, 10 a run
        assert (await amem.stats(namespace=NS)).tiers[Tier.ARCHIVED].count == len(ids)
        assert (await amem.stats(namespace="other")).tiers[Tier.ARCHIVED].count == 6
    finally:
        await amem.close()


class Poisoned:
    """A summariser that always rejects the memories `bad` picks (a bad request, not an
    outage) and counts the calls for each."""

    def __init__(self, bad: Callable[[str], bool], error: Exception | None = None) -> None:
        self.bad = bad
        self.error = error or ValidationError("the summariser rejects this memory")
        self.inner = ExtractiveSummarizer()
        self.calls: dict[str, int] = {}

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.calls[request.content] = self.calls.get(request.content, 0) + 1
        if self.bad(request.content):
            raise self.error
        return await self.inner.summarize(request)


async def test_a_memory_that_always_fails_is_quarantined_and_the_rest_proceeds(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    amem = await _engine(memories, tmp_path, clock)  # quarantine_after: 3 by default
    try:
        texts = distinct_texts(60, lambda i: f"Log line {i:02d}:")  # archived one by one
        ids = await _due(amem, clock, texts)
        # The two poisoned ones are the least important: the first the sweep tries.
        for memory_id in ids[:2]:
            await amem.store.patch_many(NS, [memory_id], _importance(0.05))
        poisoned = Poisoned(lambda text: text.startswith(("Log line 00", "Log line 01")))
        amem.archiver.summarizer = poisoned

        first = await amem.maintain()
        assert first.archive_paused  # 2 of the first 20 failed: more than 5 %
        assert first.count("cold_to_archived") == 0

        second = await amem.maintain()  # they go last now: the other 58 are archived
        assert second.count("cold_to_archived") == 58
        assert not second.archive_paused
        assert len([e for e in second.errors if ": archive " in e]) == 2

        third = await amem.maintain()  # their third counted failure sets them aside
        assert third.count("archive_quarantined") == 2
        assert sorted(q.id for q in third.quarantined) == sorted(ids[:2])
        assert all("rejects" in q.error and q.failures == 3 for q in third.quarantined)
        stats = await amem.stats(namespace=NS)
        assert stats.quarantined == 2
        assert stats.tiers[Tier.COLD].count == 2

        calls = dict(poisoned.calls)
        fourth = await amem.maintain()  # set aside: not tried, no errors, still reported
        assert poisoned.calls == calls
        assert fourth.errors == []
        assert not fourth.archive_paused
        assert len(fourth.quarantined) == 2
        assert fourth.count("archive_quarantined") == 0

        # Fixed upstream; an explicit archive releases one and archives it.
        amem.archiver.summarizer = ExtractiveSummarizer()
        assert await amem.archive([ids[0]], namespace=NS) == 1
        assert (await amem.stats(namespace=NS)).quarantined == 1
        assert [q.id for q in await amem.quarantined(namespace=NS)] == [ids[1]]
        assert (await amem.expand(ids[0], namespace=NS))["content"] == texts[0]
    finally:
        await amem.close()


async def test_a_poisoned_memory_in_a_cluster_never_quarantines_its_mates(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """Near-duplicates are archived under one summary, all or none, so one memory the
    summariser always rejects fails its whole cluster. A memory that failed before is
    archived on its own: its mates go the next run, and only it is set aside."""
    amem = await open_clustering(memories, tmp_path / "m.db", clock)
    try:
        texts = [
            "Went for a run in the park on Monday morning",
            "Went for a run in the park on Tuesday morning",
            "Went for a long run in the park on Wednesday morning",
        ]
        ids = await _due(amem, clock, texts)
        amem.archiver.summarizer = Poisoned(lambda text: "Wednesday" in text)
        first = await amem.maintain()  # the cluster fails as one
        assert first.count("cold_to_archived") == 0
        assert len([e for e in first.errors if ": archive " in e]) == 3
        second = await amem.maintain()  # one by one now: the two mates go
        assert second.count("cold_to_archived") == 2
        assert second.count("archive_clusters") == 0
        third = await amem.maintain()
        assert [q.id for q in third.quarantined] == [ids[2]]
        tiers = {i: m.tier for i, m in (await amem.store.get_many(NS, ids)).items()}
        assert tiers == {ids[2]: Tier.COLD}
        assert (await amem.expand(ids[0], namespace=NS))["content"] == texts[0]
    finally:
        await amem.close()


@pytest.mark.slow
@pytest.mark.matrix  # 700 memories: the other combinations run with --matrix
async def test_two_always_failing_memories_among_700_no_longer_stop_the_other_698(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """The issue's case: the two are the least important, so the sweep tries them first;
    before, the pause rule stopped every run right there, forever."""
    amem = await _engine(memories, tmp_path, clock)  # batch_size 500, quarantine_after 3
    try:
        texts = distinct_texts(700, lambda i: f"Build {i:03d}:")  # archived one by one
        ids = await _due(amem, clock, texts)
        for memory_id in ids[:2]:
            await amem.store.patch_many(NS, [memory_id], _importance(0.05))
        amem.archiver.summarizer = Poisoned(
            lambda text: text.startswith(("Build 000", "Build 001"))
        )

        runs = [await amem.maintain() for _ in range(4)]
        assert [r.count("cold_to_archived") for r in runs] == [0, 500, 198, 0]
        # the 4th tries only the two (2 of 2 failed): their third failure sets them aside
        assert [r.archive_paused for r in runs] == [True, False, False, True]
        assert [r.count("archive_quarantined") for r in runs] == [0, 0, 0, 2]
        stats = await amem.stats(namespace=NS)
        assert stats.tiers[Tier.ARCHIVED].count == 698
        assert stats.quarantined == 2
        assert sorted(q.id for q in runs[-1].quarantined) == sorted(ids[:2])
        after = await amem.maintain()  # set aside: no longer tried
        assert (after.errors, after.archive_paused) == ([], False)
    finally:
        await amem.close()


async def test_an_outage_does_not_quarantine(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """A backend that is down fails every memory the same way; that is not the
    memories' fault, so outage failures never count toward quarantine."""
    from tiered_memory import BackendUnavailableError

    amem = await _engine(memories, tmp_path, clock, quarantine_after=1)
    try:
        ids = await _due(amem, clock, [f"Note {i}: the train leaves at {i}" for i in range(5)])
        amem.archiver.summarizer = Poisoned(
            lambda _: True, BackendUnavailableError("the summariser is overloaded (529)")
        )
        for _ in range(3):
            report = await amem.maintain()
            assert report.archive_paused
            assert report.quarantined == []
        amem.archiver.summarizer = ExtractiveSummarizer()
        report = await amem.maintain()
        assert report.count("cold_to_archived") == len(ids)
        assert (await amem.stats(namespace=NS)).quarantined == 0
    finally:
        await amem.close()


def _importance(value: float) -> Any:
    from tiered_memory.ports import MemoryPatch

    return MemoryPatch(importance=value)


async def test_a_dead_claim_is_taken_over(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """A claim whose process is gone (a SIGKILLed sweep) does not block the next run,
    and the original the dead attempt wrote is deleted when the memory is archived."""
    amem = await _engine(memories, tmp_path, clock)
    try:
        (memory_id,) = await _due(amem, clock, ["Kim's passport expires in March 2027"])
        elsewhere = "host-that-is-gone/4242/feedface"
        wall = datetime.now(timezone.utc)  # claims expire by the wall clock
        until = wall + timedelta(days=1)
        claimed = await amem.store.claim_archival(
            NS, [memory_id], claimant=elsewhere, until=until, now=wall
        )
        assert list(claimed) == [memory_id]
        leftover = b'{"an": "original the dead attempt wrote"}'
        checksum = sha256_hex(leftover)
        assert await amem.store.note_archival(NS, elsewhere, {memory_id: checksum})
        await amem.objects.put(NS, original_key(memory_id, checksum), leftover)
        report = await amem.maintain()
        assert report.count("cold_to_archived") == 0  # another host's claim holds (lease)

        here = f"{socket.gethostname()}/{_exited_pid()}/feedface"  # this host, gone
        replacing = {memory_id: elsewhere}
        await amem.store.claim_archival(
            NS, [memory_id], claimant=here, until=until, now=wall, replacing=replacing
        )
        report = await amem.maintain()
        assert report.count("cold_to_archived") == 1
        assert await amem.store.archival_states(NS, [memory_id]) == {}
        record = (await amem.store.get_archives(NS, [memory_id]))[memory_id]
        assert await amem.objects.list(NS) == [original_key(memory_id, record.checksum)]
    finally:
        await amem.close()


def _exited_pid() -> int:
    """The pid of a process of this host that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
