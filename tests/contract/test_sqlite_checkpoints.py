"""The embedded store's WAL checkpoints run on a thread of their own: a commit that
crossed SQLite's own mark copied the whole log into the main file inline (at 1M
memories a recall's use-count commit took 120-150 ms so, once every few hundred
recalls, and `add_many`'s commits up to 435 ms)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tiered_memory.backends.sqlite import checkpointer
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import Memory

NS = "ns"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TRIGGER = 16  # pages: one batch of `_memories(BATCH)` writes more (~33)
BATCH = 100
BACKSTOP = TRIGGER * checkpointer.BACKSTOP_FACTOR


@pytest.fixture(autouse=True)
def small_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpointer, "CHECKPOINT_PAGES", TRIGGER)
    monkeypatch.setattr(checkpointer, "RETRY_SECONDS", 0.01)


def _memories(n: int, start: int = 0) -> list[Memory]:
    rng = np.random.default_rng(start)
    return [
        Memory(
            id=f"m{start + i:05d}",
            namespace=NS,
            content=f"memory number {start + i} " + "words " * 40,
            embedding=[float(x) for x in rng.normal(size=64)],
            created_at=T0,
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(n)
    ]


@contextlib.asynccontextmanager
async def _opened(
    path: Path,
) -> AsyncIterator[tuple[SQLiteMemoryStore, checkpointer.Checkpointer]]:
    """A store on `path` with its checkpoint thread, closed on the way out."""
    store = await SQLiteMemoryStore.open(path)
    try:
        worker = store.database.checkpointer
        assert worker is not None
        yield store, worker
    finally:
        await store.close()


def _frames(path: Path) -> int:
    """The log's last frame (`mxFrame`), from another connection's view of it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        with open(f"{path}-shm", "rb") as index:
            return int.from_bytes(index.read(20)[16:20], sys.byteorder)
    finally:
        conn.close()


def _within(seconds: float, done: Callable[[], bool]) -> None:
    """Wait until `done()` holds, at most `seconds` (the thread does the work: nothing
    of the event loop's is needed meanwhile)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def _copied(worker: checkpointer.Checkpointer) -> None:
    """Wait (up to 5 s) until the thread has copied the whole log."""
    _within(5.0, lambda: not worker.uncopied())
    assert worker.uncopied() == 0


def _stopped(worker: checkpointer.Checkpointer) -> None:
    """Wait (up to 5 s) until the thread has ended."""
    _within(5.0, lambda: not worker.running)
    assert not worker.running


async def test_a_thread_checkpoints_the_log_and_no_commit_does(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    async with _opened(path) as (store, worker):
        assert worker.running
        with store.database.read() as conn:
            inline = int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        assert inline == BACKSTOP  # SQLite's own: the backstop
        await store.put_many(NS, _memories(BATCH))
        assert TRIGGER <= _frames(path) < BACKSTOP  # past the trigger, not the backstop
        assert worker.wait_idle()
        assert worker.checkpoints == 1
        assert worker.uncopied() == 0  # every frame is in the main file
        await store.put_many(NS, _memories(1, BATCH))  # restarts the log from its start
        assert _frames(path) < TRIGGER
        assert len(await store.list_ids(NS)) == BATCH + 1
    assert not worker.running


async def test_a_reader_holding_the_log_delays_the_checkpoint_and_fails_nothing(
    tmp_path: Path,
) -> None:
    """A reader of another connection on an old snapshot keeps the log's newest pages
    from being copied: the checkpoint is partial, the writes go on, and a later one
    completes once the reader is gone."""
    path = tmp_path / "a.db"
    async with _opened(path) as (store, worker):
        await store.put_many(NS, _memories(5))
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memories").fetchone()  # holds a snapshot
        await store.put_many(NS, _memories(BATCH, 5))
        assert worker.wait_idle()
        assert worker.checkpoints == 0
        assert worker.uncopied() > 0
        reader.execute("COMMIT")
        reader.close()
        await store.put_many(NS, _memories(1, 5 + BATCH))  # short of the backstop
        _copied(worker)
        assert worker.checkpoints == 1
        assert len(await store.list_ids(NS)) == 6 + BATCH


async def test_a_partial_checkpoint_is_finished_without_another_commit(
    tmp_path: Path,
) -> None:
    """A checkpoint left partial (a reader held the log, or commits kept coming) is
    tried again by the thread itself until the log is copied whole. Waiting for the
    next commit past the trigger instead left a log of up to the backstop's size
    behind a burst of writes, and readers then read their pages from it."""
    path = tmp_path / "a.db"
    async with _opened(path) as (store, worker):
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        await store.put_many(NS, _memories(BATCH))
        assert worker.wait_idle()
        assert worker.checkpoints == 0
        reader.execute("COMMIT")
        reader.close()
        _copied(worker)
        assert worker.checkpoints == 1


async def test_a_thread_that_fails_says_so_and_the_backstop_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unexpected error inside the thread ends it with a record in the library's
    log (not a bare traceback on stderr, which a service's logging never sees), and
    the writes go on: SQLite's inline checkpoint, the backstop, copies the log."""

    def broken(self: checkpointer.Checkpointer, conn: sqlite3.Connection) -> bool:
        raise RuntimeError("a bug in the checkpoint thread")

    monkeypatch.setattr(checkpointer.Checkpointer, "_checkpoint", broken)
    path = tmp_path / "a.db"
    async with _opened(path) as (store, worker):
        with caplog.at_level("ERROR", logger=checkpointer.__name__):
            await store.put_many(NS, _memories(BATCH))
            assert worker.wait_idle()
            _stopped(worker)
        failed = [r for r in caplog.records if r.name == checkpointer.__name__]
        assert len(failed) == 1
        assert failed[0].exc_info is not None
        assert "a bug in the checkpoint thread" in str(failed[0].exc_info[1])
        for start in range(BATCH, 5 * BATCH, BATCH):  # past the backstop
            await store.put_many(NS, _memories(BATCH, start))
        uncopied = worker.uncopied()  # of the ~200 frames written since the thread stopped
        assert uncopied is not None
        assert uncopied < BACKSTOP  # SQLite's own checkpoint copied them
        assert len(await store.list_ids(NS)) == 5 * BATCH


async def test_a_thread_that_cannot_connect_warns_once_backs_off_and_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When the thread cannot open its own connection (no file descriptors left, say)
    it says so once and tries again less and less often, while SQLite's backstop
    copies the log; once it can connect, it checkpoints again. Retried every
    RETRY_SECONDS, a lasting failure logged ten warnings a second."""
    tries: list[float] = []
    refuse = threading.Event()
    refuse.set()

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        if refuse.is_set():
            tries.append(time.monotonic())
            raise sqlite3.OperationalError("unable to open database file")
        return sqlite3.connect(*args, **kwargs)

    fake = SimpleNamespace(connect=connect, Error=sqlite3.Error, Connection=sqlite3.Connection)
    monkeypatch.setattr(checkpointer, "sqlite3", fake)
    path = tmp_path / "a.db"
    async with _opened(path) as (store, worker):
        with caplog.at_level("DEBUG", logger=checkpointer.__name__):
            await store.put_many(NS, _memories(BATCH))  # past the trigger
            await asyncio.sleep(0.6)  # 60 tries at RETRY_SECONDS (0.01 here); 6 with backoff
            assert worker.running
            assert 2 <= len(tries) <= 8
            warned = [r for r in caplog.records if r.levelname == "WARNING"]
            assert len(warned) == 1
            assert "retrying with backoff" in warned[0].getMessage()
            refuse.clear()
            _copied(worker)  # the next try connects and copies the log
        assert worker.checkpoints == 1
        assert any("resumed" in r.getMessage() for r in caplog.records)
        assert len(await store.list_ids(NS)) == BATCH


async def test_closing_stops_the_thread_and_checkpoints_what_is_left(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    before = {t.ident for t in threading.enumerate()}
    store = await SQLiteMemoryStore.open(path)
    await store.put_many(NS, _memories(3))
    await store.close()
    left = [
        t
        for t in threading.enumerate()
        if t.ident not in before and t.name == "tiered-memory-checkpoint"
    ]
    assert left == []
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # noqa: ASYNC240
    again = await SQLiteMemoryStore.open(path)
    try:
        assert len(await again.list_ids(NS)) == 3
    finally:
        await again.close()


async def test_an_in_memory_store_has_no_checkpoint_thread() -> None:
    store = await SQLiteMemoryStore.open(":memory:")
    try:
        assert store.database.checkpointer is None
    finally:
        await store.close()
