"""The scale benchmark's memory figures: the pages of a memory-mapped file count in RSS
but not in the process's private memory (the SQLite file is read through its map);
bytes written are counted by the kernel."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

import pytest

from benchmarks.common import private_mb, rss_mb, settle_writes, written_bytes

MB = 2**20


@pytest.mark.skipif(sys.platform != "linux", reason="psutil reports shared pages on Linux")
def test_mapped_file_pages_count_in_rss_not_in_private_memory(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"\x01" * (64 * MB))
    rss0, private0 = rss_mb(), private_mb()
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        touched = sum(mapped[i] for i in range(0, len(mapped), mmap.PAGESIZE))
        rss, private = rss_mb(), private_mb()
    assert touched == 64 * MB // mmap.PAGESIZE
    assert rss - rss0 >= 48
    assert private - private0 < 16
    assert private <= rss


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel counts written bytes on Linux")
def test_bytes_written_count_a_file_written_and_synced(tmp_path: Path) -> None:
    """The add_many row's KiB per memory: what the process had written to storage."""
    before = written_bytes()
    with (tmp_path / "file").open("wb") as f:
        f.write(b"\x02" * (4 * MB))
        f.flush()
        os.fsync(f.fileno())
    assert written_bytes() - before >= 4 * MB


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel counts written bytes on Linux")
def test_bytes_written_leave_out_a_file_deleted_before_it_was_written_back(
    tmp_path: Path,
) -> None:
    """SQLite's temporary journals: dirtied in the page cache, deleted at the commit,
    never written; the kernel counts them as written, then as cancelled."""
    before = written_bytes()
    path = tmp_path / "journal"
    with path.open("wb") as f:
        f.write(b"\x03" * (4 * MB))
        f.flush()
        path.unlink()  # the open file goes with its last descriptor, unwritten
    assert written_bytes() - before < 1 * MB


def test_the_writes_before_a_timed_sweep_are_synced_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`settle_writes` syncs (so a sweep's own sync does not wait behind the writeback of
    the index saved just before it) and says how long that took."""
    calls: list[int] = []
    monkeypatch.setattr(os, "sync", lambda: calls.append(1))
    took = settle_writes()
    assert calls == [1]
    assert took >= 0.0
