"""The SQLite store's reads for the maintenance sweep, and its cache upkeep after bulk moves.

A sweep at 100k memories used to spend most of its time building `Memory` objects
(content, metadata, JSON, pydantic validation) for rules that read three columns, and
re-adding every moved vector to the in-memory cache one row at a time. Here:

- `scan_ids` / `scan_facts` run the same store-side filters as `scan` (`scan_sql`, one
  query per tier on its (namespace, tier, ...) index) but return ids, or plain columns
  as numpy arrays, read with a tuple row factory.
- `embeddings` decodes the blobs of a few thousand fading memories straight into one
  float32 matrix (consolidation), without a `Memory` and a float list per row.
- `_refresh_moved` keeps the vector cache in step after `set_tier`: a small move
  patches the cached partitions row by row, a bulk move (thousands of rows, as when a
  sweep expires a whole HOT tier) drops the partitions it touched, which the next search
  reloads in one vectorised read, instead of re-reading and re-normalising each row.

`SQLiteMemoryStore` inherits `SQLiteSweepMixin`; the mixin uses its connection, cache
and `_refresh`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import date
from typing import Any

import numpy as np

from tiered_memory.models import LIVE_TIERS, MemoryType, Tier
from tiered_memory.ports import NO_TIME, Matrix, MemoryFacts, ScanQuery
from tiered_memory.validation import check_k
from tiered_memory.validation import check_namespace as _namespace

from .database import SQLiteDatabase
from .sql import IN_JSON, json_list, scan_sql, tier_values
from .vectors import VectorCache

# A move of more rows than this drops the cached partitions it touches (reloaded by the
# next search) instead of patching them row by row: at about 10 µs a row, patching 2000
# rows costs what reloading a 2000-row partition costs.
BULK_MOVE_ROWS = 2000

# The page cache of a bulk tier move (KiB), instead of SQLite's default 2 MB: a move
# rewrites every page of the rows it touches and of the entries of three or four
# indexes, and with the default cache those dirty pages spill to the WAL and are read
# back mid-transaction. Moving 98k of 100k rows: 0.95 s -> 0.68 s for the UPDATE.
# Restored when the move is over; the memory is freed then.
BULK_MOVE_CACHE_KIB = 65_536

_FACT_COLUMNS = (
    "id, memory_type, importance, use_count, pinned, core, do_not_inject, "
    "created_at, last_used_at, coalesce(cold_since, ?)"
)
_TYPES = {t.value: t for t in MemoryType}

# The index a bounded scan of one tier walks: the partial index of that tier's sweep rule
# (database). Without statistics SQLite prefers the (namespace, tier, id) index,
# which yields rows in id order but makes it read every row of the tier from the table to
# test the bound: a sweep with nothing due read the whole store seven times over. The
# timestamp index reads only the rows inside the bound; the page is then sorted by id.
# Other (tier, bound) pairs (no sweep rule asks for them) walk the id index.
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
    """
    for field, part, index in _BOUND_INDEXES:
        if part == tier and getattr(query, field) is not None:
            return f" INDEXED BY {index}"
    return ""


def tier_literal(tier: str) -> str:
    """`tier` as an SQL string literal; only the live tier values are accepted."""
    if tier not in {t.value for t in LIVE_TIERS}:
        raise ValueError(f"not a live tier: {tier!r}")
    return f"'{tier}'"


class SQLiteSweepMixin:
    """Column reads for the sweep; mixed into `SQLiteMemoryStore`."""

    _db: SQLiteDatabase
    _cache: VectorCache
    _cache_dirty: bool

    def _refresh(self, conn: sqlite3.Connection, ns: str, ids: Sequence[str]) -> None:
        raise NotImplementedError  # SQLiteMemoryStore's

    @contextlib.contextmanager
    def _bulk_page_cache(self, rows: int) -> Iterator[None]:
        """A larger page cache while more than BULK_MOVE_ROWS rows are moved. The lock
        is held throughout, so no other write sees the setting or restores it early."""
        if rows <= BULK_MOVE_ROWS:
            yield
            return
        with self._db.read() as conn:
            previous = int(conn.execute("PRAGMA cache_size").fetchone()[0])
            conn.execute(f"PRAGMA cache_size = {-BULK_MOVE_CACHE_KIB}")
            try:
                yield
            finally:
                conn.execute(f"PRAGMA cache_size = {previous}")

    def _scan_rows(
        self, namespace: str, query: ScanQuery, columns: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Rows of `columns` (the first must be id) matching `query`, ordered by id.

        One query per tier, as `scan` does: each walks its (namespace, tier, ...) index;
        the per-tier pages merged by id give the same page as one `tier IN (...)` query.
        """
        ns = _namespace(namespace)
        check_k(query.limit, "limit")
        parts = tier_values(frozenset(query.tiers) & LIVE_TIERS)
        if not parts:
            return []
        clauses, where_params = scan_sql(query)
        where = "".join(f" AND {c}" for c in clauses)
        rows: list[tuple[Any, ...]] = []
        with self._db.read() as conn:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples: a Row per memory costs more than the SQL
            for part in parts:
                sql = (
                    f"SELECT {columns} FROM memories{scan_index(query, part)} "
                    f"WHERE namespace = ? AND tier = {tier_literal(part)}{where} "
                    "ORDER BY id LIMIT ?"
                )
                rows.extend(cursor.execute(sql, (*params, ns, *where_params, query.limit)))
        if len(parts) > 1:
            rows.sort(key=lambda row: str(row[0]))
        return rows[: query.limit]

    async def scan_ids(self, namespace: str, query: ScanQuery) -> list[str]:
        await self._db.gate()
        return [row[0] for row in self._scan_rows(namespace, query, "id")]

    async def scan_facts(
        self, namespace: str, query: ScanQuery, *, use_days: bool = False
    ) -> MemoryFacts:
        columns = _FACT_COLUMNS + (", use_days" if use_days else "")
        await self._db.gate()
        rows = self._scan_rows(namespace, query, columns, (NO_TIME,))
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
        ns = _namespace(namespace)
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

    def _refresh_moved(
        self, conn: sqlite3.Connection, ns: str, ids: Sequence[str], target: Tier
    ) -> None:
        """Keep the cached vectors of `ns` in step after `ids` moved to `target`.

        Up to BULK_MOVE_ROWS: patched row by row (`_refresh`). More: the moved rows are
        taken out of the cached partitions that hold them and appended to the target's
        (already unit length: two numpy copies, no SQLite read), so the next search
        finds a warm cache; dropping them made it reload 100k vectors (1.5 s). Moved
        rows no cached partition held are read from the file when there are few, or the
        target is dropped and reloaded by the next search. A move changes no flag, so
        the moved rows' filters stay valid. Marks the cache dirty: a rollback clears it.
        """
        if len(ids) <= BULK_MOVE_ROWS:
            self._refresh(conn, ns, ids)
            return
        live = {t.value for t in LIVE_TIERS}
        keys = [key for key in self._cache if key[0] == ns and key[1] in live]
        if not keys:
            return
        self._cache_dirty = True
        target_key = (ns, target.value)
        destination = self._cache.get(target_key) if target_key in keys else None
        placed: set[str] = set()
        for key in keys:
            if key == target_key:
                continue
            index = self._cache.get(key)
            if index is None:
                continue
            taken = index.take(ids)
            if destination is not None and taken.size:
                destination.extend(taken)
                placed.update(taken.ids)
        if destination is None:
            return
        # Moved rows of a partition that was not cached: neither placed nor already there.
        unplaced = [i for i in ids if i not in placed and i not in destination]
        if not unplaced:
            return
        if len(unplaced) <= BULK_MOVE_ROWS:
            self._refresh(conn, ns, unplaced)
        else:
            self._cache.drop([target_key])
