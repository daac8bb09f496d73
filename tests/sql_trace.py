"""The SQL statements a store's connection runs, for tests that count or inspect the
reads a search or a sweep makes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tiered_memory.backends.sqlite.store import SQLiteMemoryStore


@contextlib.contextmanager
def traced(store: SQLiteMemoryStore) -> Iterator[list[str]]:
    """The statements the store's connection runs inside the block, in order."""
    statements: list[str] = []
    with store.database.read() as conn:
        conn.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        with store.database.read() as conn:
            conn.set_trace_callback(None)
