"""The whole persistent state of a memory, to compare before and after a call.

A call that fails with a typed error must have written nothing: no row of any table
(memories, vectors, archive records, links, meta), no archived original, and nothing
on a graph or object server (`MemoryFactory.elsewhere`, tests/matrix.py). Comparing
full snapshots catches what a change counter would miss (a write undone by a second
write), and names what changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiered_memory import AsyncTieredMemory

from .invariants import sqlite_store

TABLES = ("meta", "memories", "memory_vectors", "archives", "archives_strings", "links")


@dataclass(frozen=True)
class State:
    rows: dict[str, frozenset[tuple[Any, ...]]]
    files: dict[str, str]  # path under the archive folder -> sha256 of its bytes
    elsewhere: frozenset[tuple[Any, ...]] = frozenset()  # on a graph or object server

    def diff(self, other: State) -> str:
        """What differs, in a few words (for an assertion message)."""
        parts = [
            f"{table}: {len(other.rows[table] - rows)} new, {len(rows - other.rows[table])} gone"
            for table, rows in self.rows.items()
            if rows != other.rows[table]
        ]
        if self.files != other.files:
            parts.append(f"files: {sorted(set(self.files) ^ set(other.files))[:3]} or contents")
        if self.elsewhere != other.elsewhere:
            parts.append(f"servers: {sorted(self.elsewhere ^ other.elsewhere, key=str)[:3]}")
        return "; ".join(parts) or "nothing"


def state_of(
    engine: AsyncTieredMemory,
    archive: Path,
    elsewhere: Callable[[], frozenset[tuple[Any, ...]]] | None = None,
) -> State:
    with sqlite_store(engine).database.read() as conn:
        rows = {
            table: frozenset(tuple(row) for row in conn.execute(f"SELECT * FROM {table}"))
            for table in TABLES
        }
    files = (
        {
            str(p.relative_to(archive)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in archive.rglob("*")
            if p.is_file()
        }
        if archive.exists()
        else {}
    )
    return State(rows, files, elsewhere() if elsewhere is not None else frozenset())
