"""The embedded store's read settings: a search reads a few hundred rows spread over a
file of gigabytes, so the file is mapped as far as SQLite allows and the inner pages
of its trees stay in a page cache larger than SQLite's 2 MB default."""

from __future__ import annotations

from pathlib import Path

from tiered_memory.backends.sqlite import database
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore


async def test_the_file_is_mapped_as_far_as_the_sqlite_build_allows(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        with store.database.read() as conn:
            options = [str(r[0]) for r in conn.execute("PRAGMA compile_options")]
            mapped = int(conn.execute("PRAGMA mmap_size").fetchone()[0])
            cache = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    finally:
        await store.close()
    limit = next(
        (int(o.split("=")[1], 0) for o in options if o.startswith("MAX_MMAP_SIZE=")),
        0x7FFF0000,  # SQLite's default limit
    )
    # before: 1 GB, a third of a million memories' file
    assert mapped == min(limit, database.MMAP_BYTES)
    assert mapped >= min(limit, 2**31 - 2**16)
    assert cache == -database.READ_CACHE_KIB
    assert database.READ_CACHE_KIB >= 32_768
