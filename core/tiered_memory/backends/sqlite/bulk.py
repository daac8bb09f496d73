"""Many rows into one table in a few statements: `INSERT ... VALUES (...), (...), ...`.

`executemany` runs the statement once per row, and each run of an INSERT on `memories`
(which has AFTER INSERT triggers) opens and closes a statement transaction of its own:
a batch of 500 memory rows took 8.2 ms that way and 3.5 ms as multi-row statements;
the ~11,000 postings of 500 memories 15 against 9 ms. The statements come in a few
fixed sizes (`_SIZES`), so SQLite's statement cache holds a handful of texts per table
instead of one per batch size, and no statement is long enough for its compilation to
count (4,000 rows of 4 values took 9-25 ms to compile, 256 rows 0.3 ms).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

_SIZES = (256, 32, 4, 1)
# Where the sqlite3 module cannot say (Python 3.10): the smallest limit a build may set.
_FALLBACK_VARIABLES = 999


def _variables(conn: sqlite3.Connection) -> int:
    getlimit = getattr(conn, "getlimit", None)
    if getlimit is None:
        return _FALLBACK_VARIABLES
    return int(getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))


def insert_rows(
    conn: sqlite3.Connection,
    head: str,
    rows: Iterable[Sequence[Any]],
    width: int,
    tail: str = "",
) -> None:
    """Run `head VALUES (?, ...), ... tail` over `rows` (each of `width` values), in
    order: as one statement each of `width` * size values, sizes from `_SIZES`."""
    insert_flat(conn, head, [value for row in rows for value in row], width, tail)


def insert_flat(
    conn: sqlite3.Connection,
    head: str,
    values: Sequence[Any],
    width: int,
    tail: str = "",
) -> None:
    """`insert_rows` over rows given as one flat sequence of their values, row after
    row (a caller that makes many rows can append their values instead of a tuple
    each)."""
    if len(values) % width:
        raise ValueError(f"rows of {width} values expected")
    limit = _variables(conn)
    sizes = [s for s in _SIZES if s * width <= limit] or [1]
    one = "(" + ", ".join("?" * width) + ")"
    start, count = 0, len(values) // width
    for size in sizes:
        if count < size:
            continue
        sql = f"{head} VALUES {', '.join([one] * size)} {tail}"
        step = size * width
        while count >= size:
            conn.execute(sql, values[start : start + step])
            start += step
            count -= size
