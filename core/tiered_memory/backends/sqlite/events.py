"""The operations log of the embedded store (`ports.SupportsOperationsLog`): one row per
sweep, expansion, restore or summariser spending, so `stats()` reads the last sweep,
the expansions of the last 30 days and what the summariser cost after a restart.

The table came after schema version 5 and is created by presence (CREATE TABLE IF NOT
EXISTS, like `migrations.add_columns`): an older library opening the file ignores it.
Rows are few (a sweep every few hours, an expansion when someone reads an original).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from tiered_memory.epoch import from_micros, to_micros
from tiered_memory.ports import EventTotals, OperationEvent

EVENTS = """CREATE TABLE IF NOT EXISTS operations (
        pk INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        at INTEGER NOT NULL,
        count INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        detail TEXT
    )"""
EVENTS_INDEX = "CREATE INDEX IF NOT EXISTS operations_by_kind ON operations (kind, namespace, at)"


def record(conn: sqlite3.Connection, events: Sequence[OperationEvent]) -> None:
    conn.executemany(
        "INSERT INTO operations (kind, namespace, at, count, input_tokens, output_tokens, "
        "cost_usd, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                e.kind,
                e.namespace,
                to_micros(e.at),
                e.count,
                e.input_tokens,
                e.output_tokens,
                e.cost_usd,
                e.detail,
            )
            for e in events
        ],
    )


def totals(
    conn: sqlite3.Connection, kind: str, namespace: str | None, since: datetime | None
) -> EventTotals:
    sql = (
        "SELECT count(*), sum(count), sum(input_tokens), sum(output_tokens), sum(cost_usd) "
        "FROM operations WHERE kind = ?"
    )
    args: list[object] = [kind]
    if namespace is not None:
        sql += " AND namespace = ?"
        args.append(namespace)
    if since is not None:
        sql += " AND at >= ?"
        args.append(to_micros(since))
    row = conn.execute(sql, args).fetchone()
    return EventTotals(
        events=row[0] or 0,
        count=row[1] or 0,
        input_tokens=row[2] or 0,
        output_tokens=row[3] or 0,
        cost_usd=row[4] or 0.0,
    )


def last(conn: sqlite3.Connection, kind: str, namespaces: Sequence[str]) -> OperationEvent | None:
    if not namespaces:
        return None
    marks = ", ".join("?" for _ in namespaces)
    row = conn.execute(
        "SELECT kind, namespace, at, count, input_tokens, output_tokens, cost_usd, detail "
        f"FROM operations WHERE kind = ? AND namespace IN ({marks}) "
        "ORDER BY at DESC, pk DESC LIMIT 1",
        [kind, *namespaces],
    ).fetchone()
    if row is None:
        return None
    return OperationEvent(
        kind=row[0],
        namespace=row[1],
        at=from_micros(row[2]),
        count=row[3],
        input_tokens=row[4],
        output_tokens=row[5],
        cost_usd=row[6],
        detail=row[7],
    )


def clear(conn: sqlite3.Connection, namespace: str | None) -> None:
    if namespace is None:
        conn.execute("DELETE FROM operations")
    else:
        conn.execute("DELETE FROM operations WHERE namespace = ?", (namespace,))
