"""The crash harness: SIGKILL a sweep at random moments, reopen, check, repeat.

The child also archives every memory the sweep will archive with explicit `archive()`
calls, racing the sweep for them (`race=False` leaves the sweep alone): after each
kill, nothing is lost and every archive record verifies its original.

A seed store holds memories created at `T0`; at `NOW` (300 days later) a sweep moves
them HOT -> WARM/COLD and archives the unimportant ones. Each trial starts
`crash_child.py` on the current copy of the store, waits until its progress log has
reached a random number of pipeline events (plus a random sub-millisecond delay, so
kills land inside calls as well as between them), SIGKILLs it and checks every
invariant of `invariants.check_store` on the reopened store. The next trial continues
on the same files, so the (up to 20) kills of one round are spread over one whole
sweep. Then a child runs to the end: the round has converged, which is checked (it
archived exactly what an uninterrupted sweep archives, and a further sweep moves
nothing), and a fresh copy of the seed starts the next round, if more kills are due.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tiered_memory import (
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    MemoryInput,
    Tier,
)
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.ports import ObjectStore
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

from .invariants import Snapshot, check_store

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
# Past the tier rules and low-salience archival (90 days), short of forced archival
# (365 days, seed 001), which would archive the important ones too.
NOW = T0 + timedelta(days=300)
CHILD = Path(__file__).with_name("crash_child.py")
CHILD_TIMEOUT = 120.0  # a child that neither progresses nor exits in this long has hung
KILLS_PER_ROUND = 20
TIER_MOVE_EVENTS = 6  # set_tier > and < for hot_to_warm, hot_to_cold and warm_to_cold
# Calls traced per archived memory, each > and <: summarize, note, put and head for
# each; claim, drop_nodes twice, archive_many and release per group (of one for an
# explicit archive(), up to 64 for the sweep). Measured with the race: ~13.5.
EVENTS_PER_ARCHIVAL = 14

_VOCABULARY = (
    "ava school play june tree garden dog walk budget rent coffee meeting project deadline "
    "trip paris train ticket doctor blood test piano lesson invoice server restart backup "
    "laptop birthday cake recipe flight hotel"
)
WORDS = tuple(_VOCABULARY.split())
# Hostile names too: the archive key encoding and every WHERE clause are under test.
NAMESPACES = ("user-1", "tenant/../2", "ns' OR '1'='1", "日本語 ‮rtl")


@dataclass(frozen=True)
class Seed:
    """A closed store to copy for each round, and what it holds."""

    db: Path
    manifest: dict[str, dict[str, str]]
    archivable: frozenset[tuple[str, str]]  # what a completed sweep at NOW archives

    @property
    def size(self) -> int:
        return sum(len(ids) for ids in self.manifest.values())


async def build_seed(folder: Path, per_namespace: int, rng: random.Random) -> Seed:
    """Memories of every kind the sweep treats differently, with autolinks and
    explicit links: unimportant ones (archived at NOW), important ones (they stay
    COLD), pinned ones (they stay WARM)."""
    db = folder / "seed.db"
    engine = await AsyncTieredMemory.embedded(
        db, embedder=HashingEmbedder(), clock=ManualClock(T0), archive_dir=folder / "unused"
    )
    manifest: dict[str, dict[str, str]] = {}
    archivable: set[tuple[str, str]] = set()
    try:
        for ns in NAMESPACES:
            items: list[MemoryInput] = []
            kinds: list[str] = []
            for i in range(per_namespace):
                kind = rng.choices(["low", "high", "pinned"], weights=[30, 62, 8])[0]
                words = " ".join(rng.choice(WORDS) for _ in range(8))
                items.append(
                    MemoryInput(
                        content=f"{ns} note {i}: {words}",
                        importance=0.1 if kind == "low" else 0.8,
                        pinned=kind == "pinned",
                        metadata={"n": i, "kind": kind},
                    )
                )
                kinds.append(kind)
            added = await engine.add_many(items, namespace=ns, dedup=False)
            manifest[ns] = {m.id: m.content for m in added}
            archivable.update((ns, m.id) for m, k in zip(added, kinds, strict=True) if k == "low")
            ids = [m.id for m in added]
            for _ in range(per_namespace // 10):
                a, b = rng.sample(ids, 2)
                await engine.link(a, b, namespace=ns, weight=0.9)
    finally:
        await engine.close()
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the seed must be checkpointed"
    return Seed(db, manifest, frozenset(archivable))


@dataclass
class Backend:
    """Where the child writes originals, and how the parent reads them back."""

    name: str
    child_spec: Callable[[Path], str]  # the round's folder -> --objects argument
    objects: Callable[[Path], ObjectStore]  # the round's folder -> a store to check with
    reset: Callable[[Path], Awaitable[None]]  # empty the object store for a new round


def local_backend() -> Backend:
    async def reset(folder: Path) -> None:
        shutil.rmtree(folder / "archive", ignore_errors=True)

    return Backend(
        "local",
        lambda folder: f"local:{folder / 'archive'}",
        lambda folder: LocalFolderObjectStore(folder / "archive"),
        reset,
    )


@dataclass
class CrashStats:
    trials: int = 0  # children killed
    kill_points: Counter[str] = field(default_factory=Counter)
    rounds_completed: int = 0  # sweeps that ran to the end after earlier kills
    checks: int = 0
    orphans_seen: int = 0  # originals written whose record had not landed yet
    max_orphans: int = 0
    memories: int = 0
    lost: int = 0
    seconds: float = 0.0
    child_seconds: float = 0.0
    check_seconds: float = 0.0

    def summary(self) -> str:
        points = ", ".join(f"{k}={v}" for k, v in sorted(self.kill_points.items()))
        return (
            f"{self.trials} kills over {self.rounds_completed} completed rounds of "
            f"{self.memories} memories, {self.checks} invariant checks, lost={self.lost}, "
            f"orphan originals seen={self.orphans_seen} (max {self.max_orphans} at once), "
            f"{self.seconds:.1f}s ({self.child_seconds:.1f}s in children, "
            f"{self.check_seconds:.1f}s checking); kill points: {points}"
        )


class ProgressLog:
    """Reads a child's progress log incrementally (the parent polls it every 0.5 ms)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.events = 0
        self.last = ""
        self._partial = b""

    def poll(self) -> int:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        self.offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            line = raw.decode()
            self.last = line
            if line not in ("ready", "done"):
                self.events += 1
        return self.events

    def kill_point(self) -> str:
        """Where the child was: inside a call ("put>"), just after one ("put<"), in the
        sweep's scans ("ready"), or before the store was open ("startup")."""
        self.poll()
        return self.last or "startup"


class CrashHarness:
    def __init__(
        self,
        seed: Seed,
        workdir: Path,
        backend: Backend,
        rng: random.Random,
        env: dict[str, str] | None = None,
        *,
        race: bool = True,
    ) -> None:
        self.seed, self.workdir, self.backend, self.rng = seed, workdir, backend, rng
        self.race = race
        self.env = env if env is not None else dict(os.environ)
        self.stats = CrashStats(memories=seed.size)
        self.round = 0
        self.folder = workdir
        self.verified: dict[tuple[str, str], str] = {}
        self.last_snapshot: Snapshot | None = None

    @property
    def db(self) -> Path:
        return self.folder / "memory.db"

    def new_round(self) -> None:
        self.round += 1
        self.folder = self.workdir / f"round-{self.round}"
        self.folder.mkdir(parents=True)
        shutil.copyfile(self.seed.db, self.db)
        self.verified = {}
        asyncio.run(self.backend.reset(self.folder))

    def run(self, trials: int) -> CrashStats:
        started = time.perf_counter()
        total_events = EVENTS_PER_ARCHIVAL * len(self.seed.archivable) + 20
        attempt = 0
        while self.stats.trials < trials:
            # One round: up to KILLS_PER_ROUND kills at random points of one sweep
            # (uniform over its first 90 %), then a child that runs to the end.
            self.new_round()
            kills = min(KILLS_PER_ROUND, trials - self.stats.trials)
            # The first kill lands in the sweep's big tier moves (HOT -> WARM/COLD, WARM ->
            # COLD: one transaction each over thousands of rows), before any archival.
            first = self.rng.randint(1, TIER_MOVE_EVENTS)
            rest = [self.rng.randint(1, int(0.9 * total_events)) for _ in range(kills - 1)]
            points = sorted([first, *rest])
            gaps = [max(1, b - a) for a, b in zip([0, *points], points, strict=False)]
            for gap in [*gaps, sys.maxsize]:
                attempt += 1
                progress = ProgressLog(self.folder / f"progress-{attempt}.log")
                killed = self._one_child(progress, target=gap)
                snap = self.check()
                if not killed:  # the sweep ran to its end: the round has converged
                    self.assert_final(snap)
                    break
                self.stats.trials += 1
                self.stats.kill_points[progress.kill_point()] += 1
                self.stats.orphans_seen += len(snap.orphans)
                self.stats.max_orphans = max(self.stats.max_orphans, len(snap.orphans))
        self.stats.seconds = time.perf_counter() - started
        return self.stats

    def _command(self, progress: Path) -> list[str]:
        command = [
            sys.executable,
            str(CHILD),
            "--db",
            str(self.db),
            "--now",
            NOW.isoformat(),
            "--progress",
            str(progress),
            "--objects",
            self.backend.child_spec(self.folder),
        ]
        if self.race:  # archive() of every archivable memory, racing the sweep
            targets = self.workdir / "archivable.json"
            if not targets.exists():
                targets.write_text(json.dumps(sorted(self.seed.archivable)), encoding="utf-8")
            command += ["--race", str(targets)]
        return command

    def _one_child(self, progress: ProgressLog, *, target: int) -> bool:
        """Run a child until `target` events (then SIGKILL it) or its end; True if killed."""
        errors = progress.path.with_suffix(".stderr")
        started = time.perf_counter()
        try:
            return self._run_child(progress, target, errors)
        finally:
            self.stats.child_seconds += time.perf_counter() - started

    def _run_child(self, progress: ProgressLog, target: int, errors: Path) -> bool:
        with errors.open("wb") as stderr:
            child = subprocess.Popen(
                self._command(progress.path),
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env=self.env,
            )
            try:
                deadline = time.monotonic() + CHILD_TIMEOUT
                while child.poll() is None and progress.poll() < target:
                    assert time.monotonic() < deadline, "the child hung"
                    time.sleep(0.0005)
                time.sleep(self.rng.uniform(0.0, 0.002))
                if child.poll() is None:
                    os.kill(child.pid, signal.SIGKILL)
                    child.wait(timeout=30)
                    return True
                out, _ = child.communicate(timeout=30)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait(timeout=30)
                if child.stdout is not None:
                    child.stdout.close()
        assert child.returncode == 0, f"the sweep failed:\n{errors.read_text()[-3000:]}"
        report = json.loads(out.decode().strip().splitlines()[-1])
        assert report["errors"] == [], report["errors"]
        assert not report["skipped"], "a dead child's sweep lock was still held"
        return False

    def check(self) -> Snapshot:
        self.stats.checks += 1
        started = time.perf_counter()
        self.last_snapshot = None
        try:
            # The coroutine keeps its result on self: on Python 3.11, asyncio.run formats
            # the repr of the finished task (result included) while it exits.
            asyncio.run(self._check())
        finally:
            self.stats.check_seconds += time.perf_counter() - started
        assert self.last_snapshot is not None
        return self.last_snapshot

    async def _check(self) -> None:
        engine = await self._open()
        try:
            snap = await check_store(engine, self.seed.manifest, verified=self.verified)
        finally:
            await engine.close()
        lost = self.seed.size - sum(
            1 for key in (*snap.live, *snap.archived) if key not in snap.extras
        )
        self.stats.lost += lost
        assert lost == 0
        self.last_snapshot = snap

    async def _open(self) -> AsyncTieredMemory:
        """Reopen the store the way an application would after the crash."""
        store = await SQLiteMemoryStore.open(self.db)
        return AsyncTieredMemory(
            store=store,
            graph=SQLiteAssociationGraph(store.database),
            objects=self.backend.objects(self.folder),
            summarizer=ExtractiveSummarizer(),
            embedder=HashingEmbedder(),
            clock=ManualClock(NOW),
        )

    def assert_final(self, snap: Snapshot) -> None:
        """A completed sweep archived exactly the unimportant memories, left no
        original without its record, and a further sweep changes nothing."""
        archived = {key for key in snap.archived if key not in snap.extras}
        assert archived == set(self.seed.archivable)
        assert not snap.orphans
        assert not snap.claims, "a claim outlived the run that converged"
        for (ns, memory_id), memory in snap.live.items():
            if (ns, memory_id) in snap.extras:
                continue
            expected = Tier.WARM if memory.pinned else Tier.COLD
            assert memory.tier is expected, f"{ns}/{memory_id} ended in {memory.tier}"
        report = asyncio.run(self._maintain())
        assert report.errors == []
        assert not report.skipped
        assert report.moved == {}, f"a converged sweep moved {report.moved}"
        self.stats.rounds_completed += 1

    async def _maintain(self) -> Any:
        engine = await self._open()
        try:
            return await engine.maintain(now=NOW)
        finally:
            await engine.close()
