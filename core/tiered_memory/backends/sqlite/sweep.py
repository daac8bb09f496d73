"""The embedded store's reads for the maintenance sweep: pages of one namespace's
memories matching store-side filters (`ScanQuery`), as memories, ids or columns.

A sweep at 100k memories used to spend most of its time building `Memory` objects
(content, metadata, JSON, pydantic validation) for rules that read three columns. Here
`scan_ids` and `scan_facts` run the same filters as `scan` (`sql.scan_sql`, one query
per tier on its (namespace, tier, ...) index) but return ids, or plain columns as numpy
arrays read with a tuple row factory; `embeddings` decodes the blobs of a few thousand
fading memories straight into one float32 matrix (consolidation), without a `Memory`
and a float list per row. Keeping the vector cache in step after the sweep's bulk tier
moves is `vector_table.VectorTable.refresh_moved`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import date
from operator import itemgetter
from typing import Any

import numpy as np

from tiered_memory.models import LIVE_TIERS, Memory, MemoryType
from tiered_memory.ports import NO_TIME, Matrix, MemoryFacts, ScanQuery
from tiered_memory.validation import check_k, check_namespace

from .database import SQLiteDatabase
from .memories import columns, memory_of
from .sql import IN_JSON, json_list, scan_sql, tier_values

_FACT_COLUMNS = (
    "id, memory_type, importance, use_count, pinned, core, do_not_inject, "
    "created_at, last_used_at, coalesce(cold_since, ?)"
)
_TYPES = {t.value: t for t in MemoryType}

# The index a bounded scan of one tier walks: the partial index of that tier's sweep rule
# (`schema`). Without statistics SQLite prefers the (namespace, tier, id) index, which
# yields rows in id order but makes it read every row of the tier from the table to
# test the bound: a sweep with nothing due read the whole store seven times over. The
# timestamp index reads only the rows inside the bound; the page is then sorted by id.
# Other (tier, bound) pairs (no sweep rule asks for them), and every page after the
# first (`scan_index`), walk the id index.
_BOUND_INDEXES = (
    ("tier_changed_before", "hot", "memories_hot_changed"),
    ("cold_since_before", "cold", "memories_cold_since"),
    ("last_used_before", "warm", "memories_warm_used"),
    ("created_before", "cold", "memories_cold_created"),
)


def scan_index(query: ScanQuery, tier: str) -> str:
    """An `INDEXED BY` clause for a scan of `tier` with a timestamp bound (else empty).

    The SQL must name the tier as a literal (`tier_literal`): a partial index is only
    usable when the query's WHERE implies the index's, which a bound parameter cannot.

    Only the first page walks the timestamp index. Its rows come in timestamp order,
    so every page of it reads and sorts every row inside the bound again: with a
    million HOT memories due, paging 50k at a time read the tier twenty times over.
    A next page exists only when the first one filled, i.e. plenty of rows are due;
    it walks the id index from `after_id`, which reads each row of the tier at most
    once across all the pages that follow.
    """
    if query.after_id is not None:
        return " INDEXED BY memories_tier_id"
    for field, part, index in _BOUND_INDEXES:
        if part == tier and getattr(query, field) is not None:
            return f" INDEXED BY {index}"
    return ""


def tier_literal(tier: str) -> str:
    """`tier` as an SQL string literal; only the live tier values are accepted."""
    if tier not in {t.value for t in LIVE_TIERS}:
        raise ValueError(f"not a live tier: {tier!r}")
    return f"'{tier}'"


class SweepReads:
    """Filtered pages of the `memories` table of one open file."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self._db = database

    @staticmethod
    def _pages(
        conn: sqlite3.Connection | sqlite3.Cursor,
        ns: str,
        query: ScanQuery,
        columns: str,
        params: Sequence[Any] = (),
        id_of: Callable[[Any], str] = itemgetter(0),
    ) -> list[Any]:
        """Rows of `columns` matching `query`, ordered by id (`id_of` a row).

        One query per tier: each can walk its (namespace, tier, ...) index, where a
        `tier IN (...)` query would scan the whole namespace in id order. Merging the
        per-tier pages by id gives the same page (UTF-8 and str order agree).
        """
        parts = tier_values(frozenset(query.tiers) & LIVE_TIERS)
        clauses, where_params = scan_sql(query, "m")
        where = "".join(f" AND {c}" for c in clauses)
        rows: list[Any] = []
        for part in parts:
            sql = (
                f"SELECT {columns} FROM memories AS m{scan_index(query, part)} "
                f"WHERE namespace = ? AND tier = {tier_literal(part)}{where} "
                "ORDER BY id LIMIT ?"
            )
            rows.extend(conn.execute(sql, (*params, ns, *where_params, query.limit)))
        if len(parts) > 1:
            rows.sort(key=id_of)
        return rows[: query.limit]

    async def scan(self, namespace: str, query: ScanQuery) -> list[Memory]:
        ns = check_namespace(namespace)
        check_k(query.limit, "limit")
        if not frozenset(query.tiers) & LIVE_TIERS:
            return []
        await self._db.gate()
        with self._db.snapshot() as conn:  # a memory changing tier meanwhile is seen once
            rows = self._pages(conn, ns, query, columns("m", False), id_of=itemgetter("id"))
        return [memory_of(row, False) for row in rows]

    def _tuples(
        self, namespace: str, query: ScanQuery, columns: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        ns = check_namespace(namespace)
        check_k(query.limit, "limit")
        if not frozenset(query.tiers) & LIVE_TIERS:
            return []
        with self._db.read() as conn:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples: a Row per memory costs more than the SQL
            return self._pages(cursor, ns, query, columns, params)

    async def scan_ids(self, namespace: str, query: ScanQuery) -> list[str]:
        await self._db.gate()
        return [row[0] for row in self._tuples(namespace, query, "id")]

    async def scan_facts(
        self, namespace: str, query: ScanQuery, *, use_days: bool = False
    ) -> MemoryFacts:
        columns = _FACT_COLUMNS + (", use_days" if use_days else "")
        await self._db.gate()
        rows = self._tuples(namespace, query, columns, (NO_TIME,))
        if not rows:
            return MemoryFacts.empty(use_days=use_days)
        cols = list(zip(*rows, strict=True))
        return MemoryFacts(
            ids=list(cols[0]),
            memory_types=[_TYPES[t] for t in cols[1]],
            importance=np.array(cols[2], dtype=np.float64),
            use_count=np.array(cols[3], dtype=np.int64),
            pinned=np.array(cols[4], dtype=np.bool_),
            core=np.array(cols[5], dtype=np.bool_),
            do_not_inject=np.array(cols[6], dtype=np.bool_),
            created_at=np.array(cols[7], dtype=np.int64),
            last_used_at=np.array(cols[8], dtype=np.int64),
            cold_since=np.array(cols[9], dtype=np.int64),
            use_days=(
                [[date.fromisoformat(d) for d in json.loads(text)] for text in cols[10]]
                if use_days
                else None
            ),
        )

    async def embeddings(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], Matrix]:
        ns = check_namespace(namespace)
        if not ids:
            return [], np.zeros((0, 0), dtype=np.float32)
        await self._db.gate()
        with self._db.read() as conn:
            cursor = conn.cursor()
            cursor.row_factory = None
            found = dict(
                cursor.execute(
                    "SELECT m.id, v.embedding FROM memories AS m "
                    "JOIN memory_vectors AS v ON v.pk = m.pk "
                    f"WHERE m.namespace = ? AND m.id {IN_JSON}",
                    (ns, json_list(ids)),
                ).fetchall()
            )
        order = [i for i in dict.fromkeys(ids) if i in found]
        if not order:
            return [], np.zeros((0, 0), dtype=np.float32)
        blobs = [found[i] for i in order]
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32)
        return order, matrix.reshape(len(order), -1)
