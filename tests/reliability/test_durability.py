"""Durability you can operate (issue 16, item 9).

- Commits reach the main file at sensible points, not only every 10,000 WAL pages:
  when a store closes while another process keeps the file open, and after a sweep.
  A copy of the main file alone, or a lost `-wal`, then loses nothing.
- An empty (0-byte) file is refused with a typed error, never opened as a new store;
  and processes creating a new store at once never see one another's half-made file.
- `backup` copies the file and the archived originals into a folder that opens as
  the same store, consistently while another process sweeps; `verify` finds damage
  in either.

One backend (not on tests/matrix.py): checkpoints, backups and verification are of
the SQLite file and the archive folder beside it.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tiered_memory import (
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    MemoryInput,
    Tier,
    TieredMemory,
)
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.backup import backup, verify
from tiered_memory.errors import BackendUnavailableError, ValidationError

from .harness import NOW, T0
from .sweep_child import POLICY

ROOT = Path(__file__).resolve().parents[2]
NS = "durable"


def _open(db: Path) -> TieredMemory:
    return TieredMemory.embedded(
        db, embedder=HashingEmbedder(), clock=ManualClock(T0), policy=POLICY
    )


def _add(mem: TieredMemory, n: int, importance: float = 0.1) -> list[str]:
    items = [MemoryInput(content=f"note {i}: kept", importance=importance) for i in range(n)]
    return [m.id for m in mem.add_many(items, namespace=NS, dedup=False)]


def _main_file_alone(db: Path, folder: Path) -> Path:
    """A copy of the main file without its `-wal`: what a file-level backup that
    forgot the WAL, or a lost WAL, leaves."""
    folder.mkdir()
    copy = folder / db.name
    shutil.copyfile(db, copy)
    return copy


def _holder(db: Path) -> subprocess.Popen[bytes]:
    """Another process holding the file open (as a long-running `maintain --every`
    would), so closing ours is not the last close that SQLite checkpoints itself."""
    code = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r})\n"
        "c.execute('SELECT count(*) FROM sqlite_master').fetchone()\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"ready"
    return child


def _kill(child: subprocess.Popen[bytes]) -> None:
    child.send_signal(signal.SIGKILL)  # no close, so no checkpoint of its own
    child.wait(timeout=30)


def test_closing_checkpoints_while_another_process_holds_the_file(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _open(db).close()
    holder = _holder(db)
    try:
        mem = _open(db)
        ids = _add(mem, 200)
        mem.close()
        copy = _main_file_alone(db, tmp_path / "copy")
    finally:
        _kill(holder)
    # ... and deleting the -wal after close loses nothing
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    for path in (db, copy):
        again = _open(path)
        try:
            assert again.stats(namespace=NS).total == 200
            assert {m.id for m in again.list(namespace=NS, limit=500)} == set(ids)
        finally:
            again.close()


def test_a_sweep_is_checkpointed_when_it_ends(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    first = _open(db)
    _add(first, 300)
    first.close()
    mem = _open(db)
    try:
        report = mem.maintain(now=NOW)
        assert report.count("cold_to_archived") == 300
        copy = _main_file_alone(db, tmp_path / "copy")  # the store is still open
    finally:
        mem.close()
    again = _open(copy)
    try:
        stats = again.stats(namespace=NS)
        assert stats.tiers[Tier.ARCHIVED].count == 300
        assert stats.total == 300
    finally:
        again.close()


async def test_an_empty_file_is_refused_not_opened_as_a_new_store(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    db.write_bytes(b"")
    with pytest.raises(BackendUnavailableError, match="empty file"):
        await SQLiteMemoryStore.open(db)
    with pytest.raises(BackendUnavailableError, match="restore it from a backup"):
        TieredMemory.embedded(db, embedder=HashingEmbedder()).close()
    assert db.stat().st_size == 0
    assert not db.with_name(db.name + "-wal").exists()
    fresh = await SQLiteMemoryStore.open(tmp_path / "new.db")  # a missing file is a new store
    await fresh.close()


_OPEN_NEW = """
import asyncio, sys
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore

async def main() -> None:
    store = await SQLiteMemoryStore.open(sys.argv[1])
    await store.close()

asyncio.run(main())
"""


def test_processes_creating_one_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    """Workers of one app started together open a path that does not exist yet. The
    first SQLite connection creates the file empty and writes its header a moment
    later; another process that looked in between saw an empty file and was refused
    (the concurrent ANN writers failed so now and then). A new store now appears at
    its path complete or not at all."""
    for attempt in range(12):
        db = tmp_path / f"new-{attempt}.db"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_NEW, str(db)],
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for _ in range(6)
        ]
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err.decode()[-600:]
        assert db.read_bytes().startswith(b"SQLite format 3\x00")
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


# -- backup and verify ---------------------------------------------------------------------


async def _seeded(folder: Path) -> tuple[AsyncTieredMemory, list[str]]:
    mem = await AsyncTieredMemory.embedded(
        folder / "memory.db", embedder=HashingEmbedder(), clock=ManualClock(T0), policy=POLICY
    )
    added = await mem.add_many(
        [MemoryInput(content=f"fact {i}", importance=0.1) for i in range(40)],
        namespace=NS,
        dedup=False,
    )
    await mem.add("in another namespace", namespace="other")
    ids = [m.id for m in added]
    assert await mem.archive(ids[:10], namespace=NS) == 10
    return mem, ids


async def test_a_backup_opens_as_the_same_store_and_verifies(tmp_path: Path) -> None:
    mem, ids = await _seeded(tmp_path)
    try:
        report = await backup(mem, tmp_path / "backup")
        assert (report.archives, report.namespaces) == (10, 2)
        assert report.database == tmp_path / "backup" / "memory.db"
        assert report.archive == tmp_path / "backup" / "memory.db.archive"
        original = await mem.expand(ids[0], namespace=NS)
    finally:
        await mem.close()
    copy = await AsyncTieredMemory.embedded(
        report.database, embedder=HashingEmbedder(), clock=ManualClock(T0), policy=POLICY
    )
    try:
        assert (await copy.stats(namespace=NS)).total == 40
        assert (await copy.stats(namespace="other")).total == 1
        assert await copy.expand(ids[0], namespace=NS) == original  # verified from the copy
        checked = await verify(copy, report.database)
        assert checked.ok, checked.problems
        assert checked.archives == 10
    finally:
        await copy.close()


async def test_verify_finds_a_damaged_or_missing_original(tmp_path: Path) -> None:
    mem, _ids = await _seeded(tmp_path)
    try:
        archive = tmp_path / "memory.db.archive"
        files = sorted(archive.rglob("*.json"))
        assert len(files) == 10
        files[0].write_bytes(files[0].read_bytes().replace(b"fact", b"fake"))
        files[1].unlink()
        report = await verify(mem, tmp_path / "memory.db")
        assert not report.ok
        assert len(report.problems) == 2
        assert sum("missing" in p for p in report.problems) == 1
        assert sum("does not match" in p for p in report.problems) == 1
        with pytest.raises(Exception, match="run `tiered-memory verify`"):
            await backup(mem, tmp_path / "backup")
        assert list((tmp_path / "backup").iterdir()) == []  # nothing half-made is left
    finally:
        await mem.close()


async def test_a_backup_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    mem, _ = await _seeded(tmp_path)
    try:
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        with pytest.raises(ValidationError, match="not an empty folder"):
            await backup(mem, tmp_path / "full")
    finally:
        await mem.close()


async def test_a_memory_restored_during_a_backup_is_backed_up_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restore lands between the copy of the file and the copy of the originals:
    the first copy has a record whose original is gone. The backup is taken again."""
    mem, ids = await _seeded(tmp_path)
    copy_file = SQLiteMemoryStore.backup
    taken: list[Path] = []

    async def then_restore(store: SQLiteMemoryStore, target: Path) -> None:
        await copy_file(store, target)
        taken.append(target)
        if len(taken) == 1:
            assert await mem.restore_archive([ids[0]], namespace=NS) == 1

    monkeypatch.setattr(SQLiteMemoryStore, "backup", then_restore)
    try:
        report = await backup(mem, tmp_path / "backup")
    finally:
        await mem.close()
    assert len(taken) == 2
    assert report.archives == 9


@pytest.mark.slow
def test_a_backup_taken_during_a_sweep_of_another_process_verifies(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    mem = _open(db)
    _add(mem, 1500)
    mem.close()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.sweep_child", str(db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    reader = _open(db)
    archived_in_backups: list[int] = []
    try:
        n = 0
        while child.poll() is None:
            n += 1
            report = reader.run(backup(reader.aio, tmp_path / f"backup-{n}"))
            copy = _open(report.database)
            try:
                stats = copy.stats(namespace=NS)
                assert stats.total == 1500
                checked = copy.run(verify(copy.aio, report.database))
                assert checked.ok, checked.problems
                archived_in_backups.append(stats.tiers[Tier.ARCHIVED].count)
            finally:
                copy.close()
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        reader.close()
    assert child.returncode == 0, err.decode()[-3000:]
    assert json.loads(out.decode().strip().splitlines()[-1])["errors"] == []
    print(f"\n[backup during a sweep] archived counts in the backups: {archived_in_backups}")
    assert any(0 < n < 1500 for n in archived_in_backups), "no backup landed mid-archival"


def _damaged(folder: Path) -> Path:
    """A store whose file passes the header check but not SQLite's quick_check: a page
    in the middle (a B-tree page of the memories or an index) overwritten."""
    db = folder / "damaged.db"
    mem = _open(db)
    _add(mem, 300)
    mem.close()
    for suffix in ("-wal", "-shm"):
        assert not db.with_name(db.name + suffix).exists()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    middle = (len(data) // page // 2) * page
    data[middle : middle + page] = bytes([0x0D]) + b"\xff" * (page - 1)
    db.write_bytes(bytes(data))
    return db


async def test_a_damaged_file_is_refused_at_open_up_to_the_check_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tiered_memory.backends.sqlite import database

    db = _damaged(tmp_path)
    refused = "integrity check|malformed"  # quick_check lists the damage, or fails on it
    with pytest.raises(BackendUnavailableError, match=refused):
        await SQLiteMemoryStore.open(db)
    # Above the size, the open does not read the whole file (the damaged page is not
    # one the opening reads), and says so
    monkeypatch.setattr(database, "VERIFY_MAX_BYTES", 1024)
    with caplog.at_level("INFO", logger=database.__name__):
        store = await SQLiteMemoryStore.open(db)
        await store.close()
    assert "left to `tiered-memory verify`" in caplog.text
    with pytest.raises(BackendUnavailableError, match=refused):
        await SQLiteMemoryStore.open(db, verify=True)  # forced: checked whatever the size
