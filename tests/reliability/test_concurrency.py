"""Concurrency (issue 11, part 2): many writers and readers and a sweep on one store.

8 writer and 8 reader threads share one `TieredMemory` (and 8 + 8 tasks one
`AsyncTieredMemory`) for a bounded time while a sweep archives what the writers add;
then two processes share one SQLite file the same way. Afterwards every memory handed
out is exactly once live or archived with a verified original, nothing else exists,
links touch only live memories, and the counts are exact (`invariants.check_store`).
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tiered_memory import (
    AsyncTieredMemory,
    BackendUnavailableError,
    EmbedderError,
    HashingEmbedder,
    ManualClock,
    Memory,
    Tier,
    TieredMemory,
)
from tiered_memory.ports import Matrix, Vector

from .harness import T0, WORDS
from .invariants import Snapshot, check_store
from .workload import (
    NAMESPACES,
    SWEEP_NOW,
    Ledger,
    batch_for,
    check_get,
    check_hits,
    check_report,
    run_threads,
)

WRITERS = 8
READERS = 8
DURATION = 2.0  # seconds of concurrent work
ROOT = Path(__file__).resolve().parents[2]


def _finish(ledger: Ledger, snap: Snapshot, label: str) -> None:
    added = sum(len(ids) for ids in ledger.added.values())
    print(
        f"\n[concurrency/{label}] {ledger.total()} operations ({dict(ledger.ops)}), "
        f"{added} memories added, {ledger.archived_while_writing} archived while writers "
        f"wrote ({len(snap.archived)} in the end), lost=0, duplicated=0"
    )
    assert ledger.errors == []
    assert ledger.ops["add_many"] >= WRITERS
    assert ledger.ops["maintain"] >= 1
    assert ledger.archived_while_writing > 0, "no sweep archived while the writers wrote"
    assert not snap.orphans
    for ns in NAMESPACES:
        assert snap.ids(ns) == set(ledger.added[ns])


# -- threads on one TieredMemory ---------------------------------------------------------


@pytest.mark.slow
def test_threads_share_one_memory_with_a_sweep_running(tmp_path: Path) -> None:
    ledger = Ledger()
    mem = TieredMemory.embedded(
        tmp_path / "t.db", embedder=HashingEmbedder(), clock=ManualClock(T0)
    )
    try:
        run_threads(mem, ledger, "threads", WRITERS, READERS, DURATION)
        for _ in range(2):  # the last additions become due too; then nothing moves
            check_report(mem.maintain(now=SWEEP_NOW))
        assert mem.maintain(now=SWEEP_NOW).moved == {}
        snap = mem.run(check_store(mem.aio, ledger.added))
    finally:
        mem.close()
    _finish(ledger, snap, "threads")


# -- tasks on one AsyncTieredMemory ------------------------------------------------------


async def _tasks(amem: AsyncTieredMemory, ledger: Ledger, seed: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DURATION

    async def writer(i: int) -> None:
        ns = NAMESPACES[i % len(NAMESPACES)]
        rng = random.Random(f"{seed}-writer-{i}")
        n = 0
        while loop.time() < deadline:
            batch = batch_for(f"{seed}-{i}", n, rng)
            n += len(batch)
            ledger.record(ns, await amem.add_many(batch, namespace=ns, dedup=False), batch)
            await asyncio.sleep(0)  # SQLite calls run inline and never suspend: take turns

    async def reader(i: int) -> None:
        ns = NAMESPACES[i % len(NAMESPACES)]
        rng = random.Random(f"{seed}-reader-{i}")
        while loop.time() < deadline:
            op = rng.choice(("search", "recall", "list", "get", "stats"))
            if op == "search":
                check_hits(ns, await amem.search("writer item coffee", namespace=ns, k=5))
            elif op == "recall":
                injection = await amem.recall("budget meeting", namespace=ns, budget_tokens=300)
                check_hits(ns, injection)
            elif op == "list":
                check_hits(ns, await amem.list(namespace=ns, limit=50))
            elif op == "stats":
                assert (await amem.stats(namespace=ns)).namespace == ns
            else:
                memory_id = ledger.known(ns, rng)
                if memory_id is None:
                    await asyncio.sleep(0)
                    continue
                check_get(ns, memory_id, await amem.get(memory_id, namespace=ns))
            ledger.count(op)
            await asyncio.sleep(0)

    async def sweeper() -> None:
        while loop.time() < deadline:
            report = await amem.maintain(now=SWEEP_NOW)
            if not report.skipped:
                check_report(report)
                ledger.swept(report)
            await asyncio.sleep(0)

    await asyncio.wait_for(
        asyncio.gather(
            *(writer(i) for i in range(WRITERS)),
            *(reader(i) for i in range(READERS)),
            sweeper(),
        ),
        timeout=DURATION + 60,
    )


@pytest.mark.slow
async def test_tasks_share_one_async_memory_with_a_sweep_running(tmp_path: Path) -> None:
    ledger = Ledger()
    amem = await AsyncTieredMemory.embedded(
        tmp_path / "a.db", embedder=HashingEmbedder(), clock=ManualClock(T0)
    )
    try:
        await _tasks(amem, ledger, "tasks")
        for _ in range(2):
            check_report(await amem.maintain(now=SWEEP_NOW))
        assert (await amem.maintain(now=SWEEP_NOW)).moved == {}
        snap = await check_store(amem, ledger.added)
    finally:
        await amem.close()
    _finish(ledger, snap, "async")


# -- two processes on one SQLite file ----------------------------------------------------


@pytest.mark.slow
def test_two_processes_share_one_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0)).close()
    children: list[subprocess.Popen[bytes]] = []
    try:
        for name in ("p1", "p2"):
            children.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.reliability.concurrent_child",
                        str(db),
                        name,
                        str(DURATION),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                )
            )
        outputs = [child.communicate(timeout=DURATION + 120) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
    ledger = Ledger()
    for child, (out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err.decode()[-3000:]
        result = json.loads(out.decode().strip().splitlines()[-1])
        assert result["errors"] == []
        for ns, ids in result["added"].items():
            clash = set(ids) & set(ledger.added[ns])
            assert not clash, f"ids handed out by both processes: {sorted(clash)[:3]}"
            ledger.added[ns].update(ids)
        ledger.ops.update(result["ops"])
        ledger.archived_while_writing += result["archived_while_writing"]
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0))
    try:
        for _ in range(2):
            check_report(mem.maintain(now=SWEEP_NOW))
        assert mem.maintain(now=SWEEP_NOW).moved == {}
        snap = mem.run(check_store(mem.aio, ledger.added))
    finally:
        mem.close()
    _finish(ledger, snap, "processes")


# -- a link written while its target is being archived ----------------------------------


@pytest.mark.parametrize("window", ["archived-before-the-link", "linked-before-the-record"])
async def test_a_link_racing_an_archival_never_dangles(tmp_path: Path, window: str) -> None:
    """Two interleavings of an add (which links the new memory to its neighbours) and
    the archival of one of those neighbours, as two processes on one file can produce
    them: the archival runs entirely between the add's neighbour search and its link
    write; or the add runs entirely between the archival's link drop and its record."""
    clock = ManualClock(T0)
    amem = await AsyncTieredMemory.embedded(
        tmp_path / "race.db", embedder=HashingEmbedder(), clock=clock
    )
    ns = NAMESPACES[0]
    text = "Ava's school play is on the 12th of June, Ava will be a tree"
    try:
        target = await amem.add(text, namespace=ns, importance=0.1)
        clock.advance(days=4)
        await amem.maintain()
        clock.advance(days=200)  # the target is COLD and due for archival
        added: dict[str, str] = {target.id: target.content}
        if window == "archived-before-the-link":
            graph, upsert = amem.graph, amem.graph.upsert_links

            async def archive_first(namespace: str, links: Any) -> None:
                graph.upsert_links = upsert  # type: ignore[method-assign]
                assert await amem.archiver.archive_one(
                    namespace, target.id, now=clock.now(), reason="race"
                )
                await upsert(namespace, links)

            graph.upsert_links = archive_first  # type: ignore[method-assign]
            (newcomer,) = await amem.add_many([f"{text}!"], namespace=ns, dedup=False)
        else:
            store, archive_many = amem.store, amem.store.archive_many
            newcomers: list[Memory] = []

            async def link_first(namespace: str, records: Any) -> int:
                store.archive_many = archive_many  # type: ignore[method-assign]
                newcomers.extend(await amem.add_many([f"{text}!"], namespace=ns, dedup=False))
                assert await amem.links(newcomers[0].id, namespace=ns)
                return await archive_many(namespace, records)

            store.archive_many = link_first  # type: ignore[method-assign]
            report = await amem.maintain()
            assert report.errors == []
            assert report.count("cold_to_archived") == 1
            (newcomer,) = newcomers
        added[newcomer.id] = newcomer.content
        assert await amem.get(target.id, namespace=ns) is not None
        assert (await amem.get(target.id, namespace=ns)).tier is Tier.ARCHIVED  # type: ignore[union-attr]
        snap = await check_store(amem, {ns: added})  # no link touches the archived target
        assert snap.archived
    finally:
        await amem.close()


# -- replaces racing failures (issue 16, item 2) -----------------------------------------


class FailingEmbedder:
    """The hashing embedder, down for any text holding "boom" (an outage that hits one
    request of many)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.dimension = self.inner.dimension

    async def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if any("boom" in t for t in texts):
            raise BackendUnavailableError("the embedding service is down")
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        return await self.inner.embed_query(text)


KEYS_PER_WRITER = 6


async def test_replaces_racing_failures_and_a_sweep_lose_nothing(tmp_path: Path) -> None:
    """8 writers keep replacing their own keys (`upsert`); a quarter of the new values
    fail to embed and a tenth fail inside the store's transaction (the insert after the
    old row's removal). 8 readers read every key meanwhile, and a sweep moves them
    through the tiers. A key is never missing, always holds a value that was written,
    and ends with the last value whose replace succeeded.

    The memories are important enough never to be archived: an archival that read a
    value before a replace and commits after it still replaces the new value by the
    old one's record (the archival pipeline's own claim must guard that)."""
    amem = await AsyncTieredMemory.embedded(
        tmp_path / "replace.db", embedder=FailingEmbedder(), clock=ManualClock(T0)
    )
    store = amem.store
    insert = store._insert_memories  # type: ignore[attr-defined]

    def failing_insert(conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        if any("disk" in str(row[2]) for row in rows):  # row[2] is the content
            raise BackendUnavailableError("the disk is full")
        insert(conn, rows)

    store._insert_memories = failing_insert  # type: ignore[attr-defined]
    ns = NAMESPACES[1]
    written: dict[str, list[str]] = {}  # key -> every value a replace was asked to write
    final: dict[str, str] = {}  # key -> the value of its last successful replace
    counts: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    try:
        for w in range(WRITERS):
            for k in range(KEYS_PER_WRITER):
                key = f"w{w}-k{k}"
                first = f"{key} version 0 about the garden"
                await amem.upsert(first, id=key, namespace=ns, importance=0.8)
                written[key], final[key] = [first], first
        deadline = loop.time() + DURATION

        async def writer(w: int) -> None:
            rng = random.Random(f"replace-writer-{w}")
            version = 0
            while loop.time() < deadline:
                key = f"w{w}-k{rng.randrange(KEYS_PER_WRITER)}"
                version += 1
                fate = rng.random()
                word = "boom" if fate < 0.25 else "disk" if fate < 0.35 else "fine"
                value = f"{key} version {version} {word} " + " ".join(rng.sample(WORDS, 4))
                written[key].append(value)
                try:
                    await amem.upsert(value, id=key, namespace=ns, importance=0.8)
                except EmbedderError:  # the outage, wrapped by the embedder's guard
                    assert word == "boom", value
                    counts["failed"] += 1
                except BackendUnavailableError:
                    assert word == "disk", value
                    counts["failed"] += 1
                else:
                    assert word == "fine", value
                    final[key] = value
                    counts["replaced"] += 1
                await asyncio.sleep(0)

        async def reader(r: int) -> None:
            rng = random.Random(f"replace-reader-{r}")
            while loop.time() < deadline:
                key = rng.choice(sorted(written))
                found = await amem.get(key, namespace=ns)
                assert found is not None, f"{key} vanished"
                if found.tier is not Tier.ARCHIVED:  # an archived one reads as its summary
                    assert found.content in written[key], found.content
                counts["read"] += 1
                await asyncio.sleep(0)

        async def sweeper() -> None:
            while loop.time() < deadline:
                report = await amem.maintain(now=SWEEP_NOW)
                if not report.skipped:
                    check_report(report)
                    counts["moved"] += sum(report.moved.values())
                await asyncio.sleep(0)

        await asyncio.wait_for(
            asyncio.gather(
                *(writer(w) for w in range(WRITERS)),
                *(reader(r) for r in range(READERS)),
                sweeper(),
            ),
            timeout=DURATION + 60,
        )
        store._insert_memories = insert  # type: ignore[attr-defined]
        snap = await check_store(amem, {ns: final})
    finally:
        await amem.close()
    print(f"\n[concurrency/replace] {dict(counts)}, lost=0")
    assert counts["replaced"] > 0
    assert counts["failed"] > 0
    assert counts["read"] > 0
    assert snap.ids(ns) == set(final)
