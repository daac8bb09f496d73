"""The archive records of the embedded store: the `archives` table (rows: `archive_rows`)
and the moves between it and the live memories.

A memory is archived by replacing its live row with its record and restored by the
reverse, each in one transaction, so a memory is always exactly one of the two. Records
are searched like live memories, by the vector cache's archive partition (`codes`):
types, ids and flags from a mask, metadata by SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from tiered_memory.errors import DimensionMismatchError, NotFoundError, ValidationError
from tiered_memory.filters import Condition
from tiered_memory.models import ArchiveRecord, Memory
from tiered_memory.ports import ScoredArchive, SearchFilter, Vector
from tiered_memory.validation import check_id, check_k, check_namespace, check_vector

from .archive_rows import FLAGS_UNKNOWN, UPDATE, UPSERT, archive_row, keep_code, records, select
from .database import SQLiteDatabase
from .memories import MemoryTable, ids_in
from .sql import IN_JSON, json_list, metadata_sql
from .vector_table import ARCHIVE_KEY, VectorTable

_NO_FILTER = SearchFilter()  # frozen, so one shared default is safe


def _records_dimension(records: Sequence[ArchiveRecord]) -> int | None:
    sizes = {len(r.summary_embedding) for r in records if r.summary_embedding is not None}
    if len(sizes) > 1:
        raise DimensionMismatchError(
            f"one batch mixes summary embeddings of dimensions {sorted(sizes)}"
        )
    return sizes.pop() if sizes else None


class ArchiveTable:
    """The `archives` table of one open file; keeps the vector cache in step."""

    def __init__(
        self, database: SQLiteDatabase, vectors: VectorTable, memories: MemoryTable
    ) -> None:
        self._db = database
        self._vectors = vectors
        self._memories = memories

    @staticmethod
    def get(conn: sqlite3.Connection, ns: str, ids: Sequence[str]) -> dict[str, ArchiveRecord]:
        rows = conn.execute(select(f"id {IN_JSON}"), (ns, json_list(ids))).fetchall()
        return {r.id: r for r in records(conn, rows)}

    async def archive_many(
        self, namespace: str, records: Sequence[ArchiveRecord], *, claimant: str | None = None
    ) -> int:
        """One transaction: each record replaces its live memory. A record whose memory is
        not live (already archived, or gone) is skipped, so reruns are no-ops; with
        `claimant`, so is one whose memory `claimant` does not hold a claim on. The
        journal row leaves with the live row (a trigger, `schema.ARCHIVAL`)."""
        ns = check_namespace(namespace)
        if not records:
            return 0
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            raise ValidationError("a batch of archive records repeats an id")
        for record in records:  # validated before anything is written
            check_id(record.id)
            if record.summary_embedding is not None:
                check_vector(record.summary_embedding, None, what="summary embedding")
        dimension = _records_dimension(records)
        by_id = {r.id: r for r in records}
        await self._db.gate()
        with self._db.write() as conn:
            self._vectors.fix_dimension(conn, dimension)
            live = ids_in(conn, "memories", ns, ids)
            if claimant is not None:
                sql = "SELECT id FROM archival WHERE namespace = ? AND claimant = ? AND id "
                held = conn.execute(sql + IN_JSON, (ns, claimant, json_list(ids)))
                live &= {row[0] for row in held}
            moving = [i for i in ids if i in live]
            if not moving:
                return 0
            conn.executemany(UPSERT, [archive_row(conn, ns, by_id[i]) for i in moving])
            conn.execute(
                f"DELETE FROM memories WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(moving)),
            )
            self._vectors.refresh(conn, ns, moving)
        return len(moving)

    async def get_archives(self, namespace: str, ids: Sequence[str]) -> dict[str, ArchiveRecord]:
        ns = check_namespace(namespace)
        if not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            return self.get(conn, ns, ids)

    async def search_archives(
        self, namespace: str, query: Vector, *, k: int, filters: SearchFilter = _NO_FILTER
    ) -> list[ScoredArchive]:
        """The k records whose summary embeddings are closest to `query` among those
        `filters` allow, scored by the calibrated estimate of the cosine to the float
        vector (`codes.CalibratedIndex`)."""
        ns = check_namespace(namespace)
        check_k(k)
        await self._db.gate()
        with self._db.read() as conn:
            best = self._vectors.best(conn, ns, [ARCHIVE_KEY], query, k=k, filters=filters)
            found = self.get(conn, ns, [i for i, _ in best])
        # An estimate can pass 1 by a little (a near-duplicate of a low-fidelity code).
        return [
            ScoredArchive(found[i], max(-1.0, min(1.0, score))) for i, score in best if i in found
        ]

    async def update_archive(self, namespace: str, record: ArchiveRecord) -> None:
        ns = check_namespace(namespace)
        check_id(record.id)
        dimension = _records_dimension([record])
        await self._db.gate()
        with self._db.write() as conn:
            self._vectors.fix_dimension(conn, dimension)
            row = keep_code(conn, ns, record, archive_row(conn, ns, record))
            changed = conn.execute(UPDATE, (*row[2:], ns, record.id)).rowcount
            if not changed:
                raise NotFoundError(
                    f"no archive record {record.id!r} in namespace {ns!r}; "
                    "archive_many creates records"
                )
            self._vectors.refresh(conn, ns, [record.id])

    async def unarchive_many(self, namespace: str, memories: Sequence[Memory]) -> int:
        """One transaction: each memory replaces its archive record. A memory without an
        archive record is skipped, so reruns are no-ops; an embedding is optional here."""
        ns = check_namespace(namespace)
        if not memories:
            return 0
        rows, dimension = self._memories.prepare(ns, memories, need_embedding=False)
        ids = [m.id for m in memories]
        await self._db.gate()
        with self._db.write() as conn:
            self._vectors.fix_dimension(conn, dimension)
            archived = ids_in(conn, "archives", ns, ids)
            live = ids_in(conn, "memories", ns, ids)
            inserts = [
                row for row, i in zip(rows, ids, strict=True) if i in archived and i not in live
            ]
            self._memories.insert(conn, inserts)
            conn.execute(
                f"DELETE FROM archives WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(archived)),
            )
            self._vectors.refresh(conn, ns, sorted(archived))
        return len(archived)

    async def delete_archives(self, namespace: str, ids: Sequence[str]) -> int:
        ns = check_namespace(namespace)
        if not ids:
            return 0
        await self._db.gate()
        with self._db.write() as conn:
            cur = conn.execute(
                f"DELETE FROM archives WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(list(ids))),
            )
            self._vectors.refresh(conn, ns, list(ids))
            return int(cur.rowcount)

    async def scan_archives(
        self,
        namespace: str,
        *,
        after_id: str | None = None,
        limit: int = 500,
        flags_unknown: bool = False,
        metadata: tuple[Condition, ...] = (),
    ) -> list[ArchiveRecord]:
        ns = check_namespace(namespace)
        check_k(limit, "limit")
        where = "1" if after_id is None else "id > ?"
        params: tuple[Any, ...] = (ns,) if after_id is None else (ns, after_id)
        if flags_unknown:
            where += f" AND {FLAGS_UNKNOWN}"
        for condition in metadata:
            sql, values = metadata_sql(condition, "archives")
            where += f" AND {sql}"
            params += tuple(values)
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(select(where) + " ORDER BY id LIMIT ?", (*params, limit)).fetchall()
            return records(conn, rows)
