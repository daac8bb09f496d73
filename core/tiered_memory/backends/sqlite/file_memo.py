"""Small reads of the file that every search repeats, kept while the file is unchanged.

Why: a vector search asked the file, each time, for its dimension, the namespace's tier
counts and the delete log's position (a statement each, 6-12 us), and its kept
candidates checked `PRAGMA data_version` twice more; a recall searches in several
phases and repeated them all. At 100k memories those statements were ~40 us of a
0.7 ms vector search. They change only when someone writes to the file, which
`file_state` shows: one `PRAGMA data_version` per search now stands for all of them.

A value is kept under the state taken *before* it was read. A write that lands between
that state and the read changes the state, so the next search reads the value again;
a value can be read too often, never reused after the file changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from .database import file_state

T = TypeVar("T")

FileState = tuple[int, int, int]


class FileMemo:
    """Values read from one connection's view of the file, for as long as it is
    unchanged (`file_state`)."""

    def __init__(self) -> None:
        # The connection itself, not only its id (`file_state`): a new connection can
        # reuse a closed one's id and start from the same counts.
        self._conn: sqlite3.Connection | None = None
        self._state: FileState | None = None
        self._values: dict[Hashable, Any] = {}

    def state(self, conn: sqlite3.Connection) -> FileState:
        """The file's state now, for `get` during this call; what was kept in any
        other state (or for another connection) is forgotten."""
        state = file_state(conn)
        if conn is not self._conn or state != self._state:
            self._conn, self._state, self._values = conn, state, {}
        return state

    def last(self) -> FileState | None:
        """The state the latest `state()` took, without asking the file again: for a
        step of the same call that must see what that call saw."""
        return self._state

    def get(self, state: FileState, key: Hashable, read: Callable[[], T]) -> T:
        """`read()`, kept under `key` while the file stays in `state` (a `state()` of
        the caller's own call); read afresh when the memo has moved to another."""
        if state != self._state:
            return read()
        try:
            return cast(T, self._values[key])
        except KeyError:
            value = self._values[key] = read()
            return value
