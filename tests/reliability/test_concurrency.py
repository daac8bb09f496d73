"""Concurrency (issue 11, part 2): many writers and readers and a sweep on one store.

8 writer and 8 reader threads share one `TieredMemory` (and 8 + 8 tasks one
`AsyncTieredMemory`) for a bounded time while a sweep archives what the writers add and
an archiver archives memories explicitly, racing the sweep; then two processes share
one SQLite file the same way. The tests in one process run on every backend combination
(tests/matrix.py). Afterwards every memory handed out is exactly once live or
archived with a verified original, nothing else exists, links touch only live memories,
the counts are exact (`invariants.check_store`), and every archival was reported once.

Issue 16: an explicit `archive()` racing a sweep for the same due memory, in one
process (tasks) and in two processes on one file, archives it once, and its record
verifies the bytes it points at.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    BackendUnavailableError,
    EmbedderError,
    HashingEmbedder,
    MaintenanceReport,
    ManualClock,
    Memory,
    Tier,
    TieredMemory,
)
from tiered_memory.errors import ArchiveIntegrityError, NotFoundError
from tiered_memory.ports import Matrix, Summary, SummaryRequest, Vector
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

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


def _settle(reports: list[MaintenanceReport]) -> int:
    """The sweeps after the workers stopped: the last additions become due too, then
    nothing moves. Returns how many they archived."""
    for report in reports[:-1]:
        check_report(report)
    assert reports[-1].moved == {}
    return sum(r.count("cold_to_archived") for r in reports)


def _finish(ledger: Ledger, snap: Snapshot, label: str, settled: int) -> None:
    added = sum(len(ids) for ids in ledger.added.values())
    reported = ledger.archived_while_writing + ledger.archived_explicitly + settled
    print(
        f"\n[concurrency/{label}] {ledger.total()} operations ({dict(ledger.ops)}), "
        f"{added} memories added, {ledger.archived_while_writing} archived by sweeps and "
        f"{ledger.archived_explicitly} by archive() while writers wrote "
        f"({len(snap.archived)} in the end, {reported} archivals reported), "
        "lost=0, duplicated=0, unverifiable=0"
    )
    assert ledger.errors == []
    assert ledger.ops["add_many"] >= WRITERS
    assert ledger.ops["maintain"] >= 1
    assert ledger.ops["archive"] >= 1
    assert ledger.archived_while_writing > 0, "no sweep archived while the writers wrote"
    assert ledger.archived_explicitly > 0, "no archive() call archived anything"
    assert reported == len(snap.archived), "an archival reported twice (or never)"
    assert not snap.orphans
    for ns in NAMESPACES:
        assert snap.ids(ns) == set(ledger.added[ns])


# -- threads on one TieredMemory ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.matrix(diagonal=True)
def test_threads_share_one_memory_with_a_sweep_running(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    ledger = Ledger()
    mem = memories.open_sync(tmp_path / "t.db", embedder=HashingEmbedder(), clock=ManualClock(T0))
    try:
        run_threads(mem, ledger, "threads", WRITERS, READERS, DURATION)
        settled = _settle([mem.maintain(now=SWEEP_NOW) for _ in range(3)])
        snap = mem.run(check_store(mem.aio, ledger.added))
    finally:
        mem.close()
    _finish(ledger, snap, "threads", settled)


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

    async def archiver() -> None:
        """Explicit archivals of memories handed out, racing the sweeper for them."""
        rng = random.Random(f"{seed}-archiver")
        while loop.time() < deadline:
            ns = rng.choice(NAMESPACES)
            memory_id = ledger.known(ns, rng)
            if memory_id is not None:
                try:
                    n = await amem.archive([memory_id], namespace=ns)
                except NotFoundError as e:  # the sweep archived it first
                    if "archived" not in str(e):
                        raise
                    n = 0
                ledger.archived(n)
            await asyncio.sleep(0)

    await asyncio.wait_for(
        asyncio.gather(
            *(writer(i) for i in range(WRITERS)),
            *(reader(i) for i in range(READERS)),
            sweeper(),
            archiver(),
        ),
        timeout=DURATION + 60,
    )


@pytest.mark.slow
@pytest.mark.matrix(diagonal=True)
async def test_tasks_share_one_async_memory_with_a_sweep_running(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    ledger = Ledger()
    amem = await memories.open(tmp_path / "a.db", embedder=HashingEmbedder(), clock=ManualClock(T0))
    try:
        await _tasks(amem, ledger, "tasks")
        settled = _settle([await amem.maintain(now=SWEEP_NOW) for _ in range(3)])
        snap = await check_store(amem, ledger.added)
    finally:
        await amem.close()
    _finish(ledger, snap, "async", settled)


# -- two processes on one SQLite file ----------------------------------------------------


@pytest.mark.slow
def test_two_processes_share_one_sqlite_file(tmp_path: Path) -> None:
    # One backend: two processes on one SQLite file (the children open it embedded).
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
        ledger.archived_explicitly += result["archived_explicitly"]
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0))
    try:
        settled = _settle([mem.maintain(now=SWEEP_NOW) for _ in range(3)])
        snap = mem.run(check_store(mem.aio, ledger.added))
    finally:
        mem.close()
    _finish(ledger, snap, "processes", settled)


# -- a link written while its target is being archived ----------------------------------


@pytest.mark.parametrize("window", ["archived-before-the-link", "linked-before-the-record"])
async def test_a_link_racing_an_archival_never_dangles(
    tmp_path: Path, memories: MemoryFactory, window: str
) -> None:
    """Two interleavings of an add (which links the new memory to its neighbours) and
    the archival of one of those neighbours, as two processes on one file can produce
    them: the archival runs entirely between the add's neighbour search and its link
    write; or the add runs entirely between the archival's link drop and its record."""
    clock = ManualClock(T0)
    amem = await memories.open(tmp_path / "race.db", embedder=HashingEmbedder(), clock=clock)
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
                assert await amem.archive([target.id], namespace=namespace, reason="race") == 1
                await upsert(namespace, links)

            graph.upsert_links = archive_first  # type: ignore[method-assign]
            (newcomer,) = await amem.add_many([f"{text}!"], namespace=ns, dedup=False)
        else:
            store, archive_many = amem.store, amem.store.archive_many
            newcomers: list[Memory] = []

            async def link_first(namespace: str, records: Any, **kwargs: Any) -> int:
                store.archive_many = archive_many  # type: ignore[method-assign]
                newcomers.extend(await amem.add_many([f"{text}!"], namespace=ns, dedup=False))
                assert await amem.links(newcomers[0].id, namespace=ns)
                return await archive_many(namespace, records, **kwargs)

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


# -- an explicit archive() racing the sweep for the same due memory (issue 16) ----------

RACE_MEMORIES = 300
RACE_TRIALS = 50


async def _due_memories(amem: AsyncTieredMemory, ns: str, n: int, seed: str) -> dict[str, str]:
    """`n` unimportant memories added at T0 and made COLD: due for archival at SWEEP_NOW."""
    rng = random.Random(seed)
    added = await amem.add_many(
        [
            {"content": f"{ns} {i}: " + " ".join(rng.sample(WORDS, 6)), "importance": 0.1}
            for i in range(n)
        ],
        namespace=ns,
        dedup=False,
    )
    await amem.maintain(now=T0 + timedelta(days=4), namespace=ns)
    return {m.id: m.content for m in added}


class RemoteSummarizer:
    """The extractive summariser behind a few milliseconds of (simulated) network: the
    archivals that overlap in a process are the ones that wait on a remote call."""

    def __init__(self, rng: random.Random) -> None:
        self.inner = ExtractiveSummarizer()
        self.rng = rng

    async def summarize(self, request: SummaryRequest) -> Summary:
        await asyncio.sleep(self.rng.uniform(0.0, 0.004))
        return await self.inner.summarize(request)


@pytest.mark.matrix(diagonal=True)
async def test_archive_racing_the_sweep_in_one_process(
    tmp_path: Path, memories: MemoryFactory, rng: random.Random
) -> None:
    """RACE_TRIALS times: `archive()` and a sweep, as two tasks, for one due memory."""
    amem = await memories.open(
        tmp_path / "race.db",
        embedder=HashingEmbedder(),
        summarizer=RemoteSummarizer(rng),
        clock=ManualClock(T0),
    )
    manifest: dict[str, dict[str, str]] = {}
    reported = doubled = unverifiable = 0
    try:
        for trial in range(RACE_TRIALS):
            ns = f"trial-{trial}"
            manifest[ns] = await _due_memories(amem, ns, 1, ns)
            (memory_id,) = manifest[ns]
            by_call, report = await asyncio.gather(
                amem.archive([memory_id], namespace=ns),
                amem.maintain(now=SWEEP_NOW, namespace=ns),
            )
            check_report(report)
            archivals = by_call + report.count("cold_to_archived")
            reported += archivals
            doubled += archivals > 1
            try:
                original = await amem.expand(memory_id, namespace=ns)
            except ArchiveIntegrityError:
                unverifiable += 1
            else:
                assert original["content"] == manifest[ns][memory_id]
        print(
            f"\n[concurrency/archival-race-tasks] {RACE_TRIALS} trials, {reported} "
            f"archivals reported, doubled={doubled}, unverifiable={unverifiable}"
        )
        assert (doubled, unverifiable) == (0, 0)
        snap = await check_store(amem, manifest)
        assert len(snap.archived) == reported == RACE_TRIALS
        assert not snap.orphans
        assert not snap.claims
    finally:
        await amem.close()


@pytest.mark.slow
def test_two_processes_archive_the_same_due_memories_once(tmp_path: Path) -> None:
    """Two processes on one file each `archive()` every due memory, in the same order,
    while their sweeps archive the same memories: each memory is archived and reported
    exactly once, and every record verifies (expand and restore work)."""
    # One backend: two processes on one SQLite file (the children open it embedded).
    db = tmp_path / "race.db"
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0))
    try:
        contents = mem.run(_due_memories(mem.aio, "race", RACE_MEMORIES, "race"))
    finally:
        mem.close()
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.archival_child", str(db), name],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        for name in ("p1", "p2")
    ]
    try:
        outputs = [child.communicate(timeout=300) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
    by_archive: list[str] = []
    by_sweeps = 0
    errors: list[str] = []
    for child, (out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err.decode()[-3000:]
        result = json.loads(out.decode().strip().splitlines()[-1])
        errors += result["errors"]
        by_archive += result["by_archive"]
        by_sweeps += result["by_sweeps"]
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(SWEEP_NOW))
    try:
        stats = mem.stats(namespace="race")
        lost = RACE_MEMORIES - stats.total
        unverifiable = 0
        for memory_id in contents:
            try:
                mem.expand(memory_id, namespace="race")
            except ArchiveIntegrityError:
                unverifiable += 1
        print(
            f"\n[concurrency/archival-race] {RACE_MEMORIES} memories, "
            f"{stats.tiers[Tier.ARCHIVED].count} archived, {len(by_archive)} archivals "
            f"reported by archive() and {by_sweeps} by sweeps, lost={lost}, "
            f"unverifiable={unverifiable}"
        )
        assert (lost, unverifiable) == (0, 0)
        assert errors == []
        assert len(set(by_archive)) == len(by_archive), "archive() reported one memory twice"
        assert len(by_archive) + by_sweeps == RACE_MEMORIES, "an archival reported twice"
        snap = mem.run(check_store(mem.aio, {"race": contents}))  # every original verifies
        assert len(snap.archived) == RACE_MEMORIES
        assert not snap.orphans
        assert not snap.claims
        assert mem.maintain(now=SWEEP_NOW).moved == {}
        assert mem.restore_archive(namespace="race") == RACE_MEMORIES
    finally:
        mem.close()


# -- replaces racing failures (issue 16, item 2) -----------------------------------------


class FailingEmbedder:
    """The hashing embedder, down for any text holding "boom" (an outage that hits one
    request of many)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.dimension = self.inner.dimension

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        if any("boom" in t for t in texts):
            raise BackendUnavailableError("the embedding service is down")
        return await self.inner.aembed_documents(texts)

    async def aembed_query(self, text: str) -> Vector:
        return await self.inner.aembed_query(text)


KEYS_PER_WRITER = 6


@pytest.mark.matrix(diagonal=True)
async def test_replaces_racing_failures_and_a_sweep_lose_nothing(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    """8 writers keep replacing their own keys (`upsert`); a quarter of the new values
    fail to embed and a tenth fail inside the store's transaction (the insert after the
    old row's removal). 8 readers read every key meanwhile, and a sweep moves them
    through the tiers. A key is never missing, always holds a value that was written,
    and ends with the last value whose replace succeeded.

    The memories are important enough never to be archived: an archival that read a
    value before a replace and commits after it still replaces the new value by the
    old one's record (the archival pipeline's own claim must guard that)."""
    amem = await memories.open(
        tmp_path / "replace.db", embedder=FailingEmbedder(), clock=ManualClock(T0)
    )
    table = amem.store._memories  # type: ignore[attr-defined]
    insert = table.insert

    def failing_insert(conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        if any("disk" in str(row[2]) for row in rows):  # row[2] is the content
            raise BackendUnavailableError("the disk is full")
        insert(conn, rows)

    table.insert = failing_insert
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
        table.insert = insert
        snap = await check_store(amem, {ns: final})
    finally:
        await amem.close()
    print(f"\n[concurrency/replace] {dict(counts)}, lost=0")
    assert counts["replaced"] > 0
    assert counts["failed"] > 0
    assert counts["read"] > 0
    assert snap.ids(ns) == set(final)
