"""Writers, readers and sweeps for the concurrency tests, and what each checks.

Writers add batches of unique memories (dedup off, so every item is a new memory and
the counts are exact) and remember the ids they got back; readers search, recall,
list, get and count, and check that whatever they see belongs to their namespace and
that no memory already handed out ever reads as missing; a sweeper runs `maintain`
at a `now` far enough ahead that everything the writers add is due (HOT -> COLD, and
the unimportant ones archived) while the writers are still writing; an archiver
archives memories already handed out with an explicit `archive()`, racing the sweep
for the same due memories (each memory must be archived, and reported, exactly once).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from tiered_memory import (
    Injection,
    MaintenanceReport,
    Memory,
    MemoryInput,
    NotFoundError,
    SearchResults,
    Tier,
    TieredMemory,
)
from tiered_memory.models import LIVE_TIERS

from .harness import T0, WORDS

SWEEP_NOW = T0 + timedelta(days=300)  # short of forced archival: important ones stay
NAMESPACES = ("alpha", "beta'; DROP TABLE memories; --")


@dataclass
class Ledger:
    """What every worker did; shared by threads (hence the lock)."""

    added: dict[str, dict[str, str]] = field(default_factory=lambda: {ns: {} for ns in NAMESPACES})
    ops: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    archived_while_writing: int = 0  # by the sweeps that ran alongside the writers
    archived_explicitly: int = 0  # by the archiver's archive() calls
    lock: threading.Lock = field(default_factory=threading.Lock)

    def known(self, ns: str, rng: random.Random) -> str | None:
        with self.lock:
            ids = self.added[ns]
            return rng.choice(list(ids)) if ids else None

    def record(self, ns: str, memories: list[Memory], batch: list[MemoryInput]) -> None:
        with self.lock:
            for memory, item in zip(memories, batch, strict=True):
                assert memory.content == item.content
                assert memory.id not in self.added[ns], f"id {memory.id} handed out twice"
                self.added[ns][memory.id] = memory.content
            self.ops["add_many"] += 1

    def count(self, op: str) -> None:
        with self.lock:
            self.ops[op] += 1

    def swept(self, report: MaintenanceReport) -> None:
        with self.lock:
            self.ops["maintain"] += 1
            self.archived_while_writing += report.count("cold_to_archived")

    def archived(self, n: int) -> None:
        with self.lock:
            self.ops["archive"] += 1
            self.archived_explicitly += n

    def total(self) -> int:
        return sum(self.ops.values())


def batch_for(writer: str, n: int, rng: random.Random) -> list[MemoryInput]:
    return [
        MemoryInput(
            content=f"writer {writer} item {n + j}: " + " ".join(rng.sample(WORDS, 6)),
            importance=rng.choice((0.1, 0.1, 0.8)),
        )
        for j in range(rng.randint(1, 4))
    ]


def check_hits(ns: str, hits: SearchResults | list[Memory] | Injection) -> None:
    if isinstance(hits, Injection):
        assert hits.tokens <= hits.budget_tokens
        memories = [h.memory for h in hits.items]
    elif isinstance(hits, SearchResults):
        assert not hits.degraded, hits.reasons
        memories = [h.memory for h in hits]
    else:
        memories = hits
    for memory in memories:
        assert memory.namespace == ns, f"{memory.id} of {memory.namespace!r} seen from {ns!r}"


def check_get(ns: str, memory_id: str, found: Memory | None) -> None:
    """An id once handed out is live or archived: never missing, not even mid-archival."""
    assert found is not None, f"{ns}/{memory_id} vanished"
    assert found.namespace == ns
    assert found.tier in LIVE_TIERS or found.tier is Tier.ARCHIVED


def check_report(report: MaintenanceReport) -> None:
    assert report.errors == [], report.errors
    assert not report.archive_paused


def archive_one(archive: Callable[[], int]) -> int:
    """An explicit archival of a memory handed out earlier: 0 when the sweep (or another
    process) has archived it already, or is archiving it right now."""
    try:
        return archive()
    except NotFoundError as e:  # "... is archived": the sweep got there first
        if "archived" not in str(e):
            raise
        return 0


def run_threads(
    mem: TieredMemory, ledger: Ledger, seed: str, writers: int, readers: int, duration: float
) -> None:
    """`writers` + `readers` threads, one sweeper and one archiver thread on `mem` for
    `duration` s."""
    deadline = time.monotonic() + duration
    stop = threading.Event()

    def guarded(name: str, body: Callable[[random.Random], None]) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(f"{seed}-{name}")
            try:
                while time.monotonic() < deadline and not stop.is_set():
                    body(rng)
            except BaseException as e:  # reported by the test, never swallowed
                with ledger.lock:
                    ledger.errors.append(f"{name}: {type(e).__name__}: {e}")
                stop.set()

        return run

    def writer(i: int) -> Callable[[random.Random], None]:
        ns = NAMESPACES[i % len(NAMESPACES)]
        counter = iter(range(10**9))

        def body(rng: random.Random) -> None:
            batch = batch_for(f"{seed}-{i}", next(counter) * 4, rng)
            ledger.record(ns, mem.add_many(batch, namespace=ns, dedup=False), batch)

        return body

    def reader(i: int) -> Callable[[random.Random], None]:
        ns = NAMESPACES[i % len(NAMESPACES)]

        def body(rng: random.Random) -> None:
            op = rng.choice(("search", "recall", "list", "get", "stats", "links"))
            if op == "search":
                check_hits(ns, mem.search("writer item coffee", namespace=ns, k=5))
            elif op == "recall":
                check_hits(ns, mem.recall("budget meeting", namespace=ns, budget_tokens=300))
            elif op == "list":
                check_hits(ns, mem.list(namespace=ns, limit=50))
            elif op == "stats":
                assert mem.stats(namespace=ns).namespace == ns
            else:
                memory_id = ledger.known(ns, rng)
                if memory_id is None:
                    return
                if op == "get":
                    check_get(ns, memory_id, mem.get(memory_id, namespace=ns))
                else:
                    for link in mem.links(memory_id, namespace=ns):
                        assert memory_id in (link.source, link.target)
            ledger.count(op)

        return body

    def sweeper(rng: random.Random) -> None:
        report = mem.maintain(now=SWEEP_NOW)
        if not report.skipped:
            check_report(report)
            ledger.swept(report)

    def archiver(rng: random.Random) -> None:
        ns = rng.choice(NAMESPACES)
        memory_id = ledger.known(ns, rng)
        if memory_id is None:
            time.sleep(0.001)
            return
        ledger.archived(archive_one(lambda: mem.archive([memory_id], namespace=ns)))

    threads = [threading.Thread(target=guarded(f"writer-{i}", writer(i))) for i in range(writers)]
    threads += [threading.Thread(target=guarded(f"reader-{i}", reader(i))) for i in range(readers)]
    threads.append(threading.Thread(target=guarded("sweeper", sweeper)))
    threads.append(threading.Thread(target=guarded("archiver", archiver)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=duration + 60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
