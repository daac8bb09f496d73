"""How many memories each (namespace, tier) holds, kept by triggers: one read of a
two-column key instead of counting an index.

Why: a vector search asks for the tiers of one phase (HOT + WARM, then COLD), and one
HNSW graph holds every live tier of a namespace (`ann`). How many of the graph's rows
can pass decides how to search: none (the COLD phase of a store whose sweep never ran)
means no search at all; a small share means the graph would have to return thousands
of candidates for a few to pass, so the tier's rows are scanned instead; a large share
sizes the graph's candidate list. Counting the rows of a tier through the
`(namespace, tier, id)` index took 1.3 ms per 20k rows, as long as the graph search
it is meant to steer, and growing with the store; the triggers cost a tier move about
1 us (100k moves: 1.17-1.46 s without them, 1.24-1.28 s with them).

The triggers live in the file, so every writer keeps the counts, this library's older
versions included. The sweep's bulk HOT expiry, which moves up to every row of a
namespace in one statement, counts its moves itself (`counted_by_statement`, `move`).
A file without the table gets it filled from `memories` when opened (`ensure`), inside
the opening transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence

from .sql import placeholders

_MARK = "tier_rows"  # the `meta` key saying the counts were filled from `memories`
UPDATE_TRIGGER = "memories_tier_rows_update"
BULK_MOVE_ROWS = 10_000
"""A move of more than this many rows counts them once (`counted_by_statement`)
instead of row by row in the trigger."""

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS tier_rows (
        namespace TEXT NOT NULL,
        tier TEXT NOT NULL,
        rows INTEGER NOT NULL,
        PRIMARY KEY (namespace, tier)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER IF NOT EXISTS memories_tier_rows_insert AFTER INSERT ON memories BEGIN
        INSERT INTO tier_rows (namespace, tier, rows) VALUES (new.namespace, new.tier, 1)
        ON CONFLICT (namespace, tier) DO UPDATE SET rows = rows + 1;
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_tier_rows_delete AFTER DELETE ON memories BEGIN
        UPDATE tier_rows SET rows = rows - 1
        WHERE namespace = old.namespace AND tier = old.tier;
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {UPDATE_TRIGGER}
        AFTER UPDATE OF tier, namespace ON memories
        WHEN old.tier IS NOT new.tier OR old.namespace IS NOT new.namespace BEGIN
        UPDATE tier_rows SET rows = rows - 1
        WHERE namespace = old.namespace AND tier = old.tier;
        INSERT INTO tier_rows (namespace, tier, rows) VALUES (new.namespace, new.tier, 1)
        ON CONFLICT (namespace, tier) DO UPDATE SET rows = rows + 1;
    END""",
]


def ensure(conn: sqlite3.Connection) -> None:
    """Fill the counts from `memories` once per file (a file from before the table);
    call inside the opening transaction, after `SCHEMA` ran."""
    if conn.execute("SELECT 1 FROM meta WHERE key = ?", (_MARK,)).fetchone() is not None:
        return
    conn.execute("DELETE FROM tier_rows")
    conn.execute(
        "INSERT INTO tier_rows (namespace, tier, rows) "
        "SELECT namespace, tier, count(*) FROM memories GROUP BY namespace, tier"
    )
    conn.execute("INSERT INTO meta (key, value) VALUES (?, '1')", (_MARK,))


def rows(conn: sqlite3.Connection, namespace: str, tiers: Sequence[str]) -> int:
    """Memories of `namespace` in `tiers` (forgotten and superseded ones included)."""
    if not tiers:
        return 0
    row = conn.execute(
        "SELECT coalesce(sum(rows), 0) FROM tier_rows "
        f"WHERE namespace = ? AND tier IN ({placeholders(len(tiers))})",
        (namespace, *tiers),
    ).fetchone()
    return int(row[0])


def total(conn: sqlite3.Connection) -> int:
    """Memories in the file, every namespace and tier (a read of a few rows)."""
    return int(conn.execute("SELECT coalesce(sum(rows), 0) FROM tier_rows").fetchone()[0])


@contextlib.contextmanager
def counted_by_statement(conn: sqlite3.Connection, moving: int) -> Iterator[bool]:
    """Without the update trigger for the bulk tier move inside, when more than
    `BULK_MOVE_ROWS` rows move; the caller then counts the move once (`move`).

    Why: the trigger runs two statements per moved row, about 1.3 us (1M rows moved
    out of HOT: 1.3 s of CPU for three numbers). Dropped and created again inside the
    caller's transaction, which holds the write lock: no other writer can change a
    tier meanwhile, and a reader or a rollback never sees the file without it.
    Yields whether the trigger is off (then the caller counts)."""
    if moving <= BULK_MOVE_ROWS:
        yield False
        return
    conn.execute(f"DROP TRIGGER {UPDATE_TRIGGER}")
    yield True
    conn.execute(SCHEMA[3])


def move(conn: sqlite3.Connection, namespace: str, source: str, moved: Mapping[str, int]) -> None:
    """Count `moved[tier]` rows of `namespace` gone from `source` to each tier, as the
    update trigger would have row by row."""
    out = sum(n for tier, n in moved.items() if tier != source)
    if not out:
        return
    conn.execute(
        "UPDATE tier_rows SET rows = rows - ? WHERE namespace = ? AND tier = ?",
        (out, namespace, source),
    )
    for tier, n in moved.items():
        if n and tier != source:
            conn.execute(
                "INSERT INTO tier_rows (namespace, tier, rows) VALUES (?, ?, ?) "
                "ON CONFLICT (namespace, tier) DO UPDATE SET rows = rows + excluded.rows",
                (namespace, tier, n),
            )
