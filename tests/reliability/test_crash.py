"""Crash safety (issue 11, part 1): SIGKILL a sweep with archival at random moments.

DESIGN.md section 6: a crash at any step leaves each memory COLD with its content or
ARCHIVED with a verified original; never lost, never both; a rerun resumes. The
harness (`harness.py`) kills `crash_child.py` mid-sweep, reopens the store and checks
every invariant of `invariants.py` after each kill, then checks that the sweep, rerun,
archives exactly what an uninterrupted sweep would and then changes nothing.

Issue 16: each child also `archive()`s every memory the sweep will archive, racing the
sweep for them, so kills land in claims, in the journal notes and in either archival's
commit; after each, nothing is lost, every record verifies, and only the killed
child's claims remain (taken over by the next child at once).

Not on the backend matrix (tests/matrix.py): the guarantee is the SQLite file's (the
graph lives in it, and commits with the records). The originals go to the local folder
and to S3, both by default; a Bolt graph has no durability to test this way (the test
server keeps nothing on disk).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pytest

from tests.integration.s3.conftest import FAST
from tiered_memory.backends.s3.objects import S3ObjectStore
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.ports import ObjectStore

from .harness import Backend as CrashBackend
from .harness import CrashHarness, CrashStats, Seed, build_seed, local_backend

DEFAULT_TRIALS = 20
SOAK_TRIALS = 200


@pytest.fixture(scope="session")
def embedded_seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    """2,400 memories in 4 namespaces (about 1,800 of them archived by the sweep)."""
    folder = tmp_path_factory.mktemp("crash-seed")
    return asyncio.run(build_seed(folder, 600, random.Random(11)))


@pytest.fixture(scope="session")
def s3_seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    """Fewer memories over HTTP: each archival is two round trips to the server."""
    folder = tmp_path_factory.mktemp("crash-seed-s3")
    return asyncio.run(build_seed(folder, 100, random.Random(12)))


def s3_backend(endpoint: str) -> CrashBackend:
    """One bucket per round, on the session's moto server."""
    buckets: dict[Path, str] = {}

    def bucket(folder: Path) -> str:
        return buckets.setdefault(folder, f"crash-{uuid.uuid4().hex[:20]}")

    def objects(folder: Path) -> ObjectStore:
        return S3ObjectStore(bucket(folder), **{**FAST, "endpoint_url": endpoint})

    async def reset(folder: Path) -> None:
        store = S3ObjectStore(bucket(folder), **{**FAST, "endpoint_url": endpoint})
        try:
            await store.create_bucket_if_missing()
        finally:
            await store.close()

    return CrashBackend("s3", lambda folder: f"s3:{endpoint}:{bucket(folder)}", objects, reset)


def _report(name: str, stats: CrashStats) -> None:
    print(f"\n[crash/{name}] {stats.summary()}")
    assert stats.lost == 0
    # Kills must land in the archival pipeline itself, not only around it.
    inside = {point for point in stats.kill_points if point.rstrip("<>") != point}
    assert len(inside) >= 3, stats.kill_points


async def test_the_sqlite_file_is_opened_for_durability(tmp_path: Path) -> None:
    """WAL, fsync at every commit, and a busy timeout for other processes."""
    store = await SQLiteMemoryStore.open(tmp_path / "durable.db")
    try:
        with store.database.read() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    finally:
        await store.close()


@pytest.mark.slow
def test_sigkill_during_embedded_sweeps_loses_nothing(
    embedded_seed: Seed, tmp_path: Path, rng: random.Random
) -> None:
    harness = CrashHarness(embedded_seed, tmp_path, local_backend(), rng)
    stats = harness.run(DEFAULT_TRIALS)
    _report("embedded", stats)
    assert stats.trials >= DEFAULT_TRIALS
    assert stats.rounds_completed >= 1


@pytest.mark.slow
@pytest.mark.s3
def test_sigkill_during_sweeps_to_s3_loses_nothing(
    s3_seed: Seed, s3_endpoint: str, tmp_path: Path, rng: random.Random
) -> None:
    harness = CrashHarness(s3_seed, tmp_path, s3_backend(s3_endpoint), rng)
    stats = harness.run(DEFAULT_TRIALS)
    _report("s3", stats)
    assert stats.trials >= DEFAULT_TRIALS


@pytest.mark.soak
def test_soak_sigkill_embedded(embedded_seed: Seed, tmp_path: Path, rng: random.Random) -> None:
    stats = CrashHarness(embedded_seed, tmp_path, local_backend(), rng).run(SOAK_TRIALS)
    _report("embedded-soak", stats)
    assert stats.trials >= SOAK_TRIALS


@pytest.mark.soak
@pytest.mark.s3
def test_soak_sigkill_s3(
    s3_seed: Seed, s3_endpoint: str, tmp_path: Path, rng: random.Random
) -> None:
    stats = CrashHarness(s3_seed, tmp_path, s3_backend(s3_endpoint), rng).run(SOAK_TRIALS)
    _report("s3-soak", stats)
    assert stats.trials >= SOAK_TRIALS
