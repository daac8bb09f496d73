"""The SQLite store's archival journal: one row per live memory being archived or
that failed to be (`tiered_memory.archival` explains the protocol).

A row holds the claim (claimant and wall-clock expiry, in microseconds), the checksums
of the originals attempts wrote (a JSON list), and the failures. Every write here is
one transaction, so a claim is a compare-and-set: two processes on the file never both
hold one memory. The row goes with its memory: a trigger deletes it when the live row
is deleted (`schema.ARCHIVAL`), which is what committing the archive record does
(`archive_many`), and what `delete_many` and `clear` do. The rules (who may claim, when
a memory is quarantined) are `tiered_memory.journal`'s; this module keeps the rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from tiered_memory import journal
from tiered_memory.epoch import from_micros_or_none, to_micros_or_none
from tiered_memory.errors import ValidationError
from tiered_memory.ports import ArchivalFailure, ArchivalState
from tiered_memory.validation import check_id, check_namespace

from .database import SQLiteDatabase
from .memories import ids_in
from .sql import IN_JSON, json_list

_COLUMNS = "id, claimant, claimed_until, written, failures, error, failed_at, quarantined"
_UPSERT = (
    "INSERT INTO archival (namespace, id, claimant, claimed_until, written, failures, error, "
    "failed_at, quarantined) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (namespace, id) DO UPDATE SET claimant = excluded.claimant, "
    "claimed_until = excluded.claimed_until, written = excluded.written, "
    "failures = excluded.failures, error = excluded.error, failed_at = excluded.failed_at, "
    "quarantined = excluded.quarantined"
)


def _state(row: sqlite3.Row) -> ArchivalState:
    return ArchivalState(
        id=str(row["id"]),
        claimant=row["claimant"],
        claimed_until=from_micros_or_none(row["claimed_until"]),
        written=tuple(json.loads(row["written"])) if row["written"] else (),
        failures=int(row["failures"]),
        error=row["error"],
        failed_at=from_micros_or_none(row["failed_at"]),
        quarantined=bool(row["quarantined"]),
    )


def _row(ns: str, s: ArchivalState) -> tuple[Any, ...]:
    return (
        ns,
        s.id,
        s.claimant,
        to_micros_or_none(s.claimed_until),
        json.dumps(list(s.written)) if s.written else None,
        s.failures,
        s.error,
        to_micros_or_none(s.failed_at),
        int(s.quarantined),
    )


def _claimant(claimant: str) -> str:
    if not isinstance(claimant, str) or not claimant:
        raise ValidationError("a claimant must be a non-empty string")
    return claimant


class ArchivalJournal:
    """The `archival` table of one open file (the MemoryStore port's journal calls)."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self._db = database

    @staticmethod
    def _states(
        conn: sqlite3.Connection, ns: str, ids: Sequence[str] | None
    ) -> dict[str, ArchivalState]:
        if ids is None:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM archival WHERE namespace = ?", (ns,))
        else:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM archival WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(ids)),
            )
        return {s.id: s for s in map(_state, rows.fetchall())}

    @staticmethod
    def _apply(conn: sqlite3.Connection, ns: str, changes: journal.Changes) -> None:
        conn.executemany(_UPSERT, [_row(ns, s) for s in changes.write])
        if changes.delete:
            conn.execute(
                f"DELETE FROM archival WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(changes.delete)),
            )

    async def archival_states(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, ArchivalState]:
        ns = check_namespace(namespace)
        if ids is not None and not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            return self._states(conn, ns, None if ids is None else list(ids))

    async def claim_archival(
        self,
        namespace: str,
        ids: Sequence[str],
        *,
        claimant: str,
        until: datetime,
        now: datetime,
        replacing: Mapping[str, str] | None = None,
        release_quarantine: bool = False,
    ) -> dict[str, ArchivalState]:
        ns = check_namespace(namespace)
        who = _claimant(claimant)
        wanted = list(dict.fromkeys(check_id(i) for i in ids))
        if not wanted:
            return {}
        await self._db.gate()
        with self._db.write() as conn:
            live = ids_in(conn, "memories", ns, wanted)
            before, changes = journal.claim(
                self._states(conn, ns, wanted),
                [i for i in wanted if i in live],
                who=who,
                until=until,
                now=now,
                replacing=replacing,
                release_quarantine=release_quarantine,
            )
            self._apply(conn, ns, changes)
        return before

    async def note_archival(
        self, namespace: str, claimant: str, written: Mapping[str, str]
    ) -> set[str]:
        ns = check_namespace(namespace)
        who = _claimant(claimant)
        if not written:
            return set()
        await self._db.gate()
        with self._db.write() as conn:
            changes = journal.note(self._states(conn, ns, list(written)), who, written)
            self._apply(conn, ns, changes)
        return {s.id for s in changes.write}

    async def release_archival(
        self,
        namespace: str,
        claimant: str,
        ids: Sequence[str],
        *,
        failures: Mapping[str, ArchivalFailure] | None = None,
        now: datetime,
        quarantine_after: int,
    ) -> list[str]:
        ns = check_namespace(namespace)
        who = _claimant(claimant)
        failed = dict(failures or {})
        wanted = list(dict.fromkeys([*ids, *failed]))
        if not wanted:
            return []
        await self._db.gate()
        with self._db.write() as conn:
            changes = journal.release(
                self._states(conn, ns, wanted),
                who,
                ids,
                failures=failed,
                now=now,
                quarantine_after=quarantine_after,
            )
            self._apply(conn, ns, changes)
        return changes.quarantined
