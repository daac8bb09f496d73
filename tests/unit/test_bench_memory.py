"""The scale benchmark's memory figures: the pages of a memory-mapped file count in RSS
but not in the process's private memory (the SQLite file is read through its map)."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from benchmarks.common import private_mb, rss_mb

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
