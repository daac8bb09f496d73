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

import contextlib
import ctypes
import functools
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from operator import itemgetter
from typing import Any

import numpy as np

from tiered_memory.bookkeeping import tier_move
from tiered_memory.epoch import to_micros
from tiered_memory.lifecycle import HotExpiryBounds, HotExpiryMoves
from tiered_memory.models import LIVE_TIERS, Memory, MemoryType, Tier
from tiered_memory.ports import NO_TIME, Matrix, MemoryFacts, ScanQuery
from tiered_memory.validation import check_k, check_namespace

from . import tier_rows
from .database import READ_CACHE_KIB, SQLiteDatabase
from .memories import MemoryTable, memory_of
from .memory_columns import TEXT_JOIN, columns
from .sql import IN_JSON, json_list, scan_sql, tier_values
from .vector_table import VectorTable

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
# The forced archival of old memories (`lifecycle.FORCED_AGE`) asks every live tier for
# the rows created before a bound: HOT and WARM have no partial index of their own, and
# through the id index an idle sweep read every WARM row (345k at 1M) to find none that
# old; the (namespace, created_at) index of every tier reads only the old rows.
# Other (tier, bound) pairs, and every page after the first (`scan_index`), walk the id
# index.
_BOUND_INDEXES = (
    ("tier_changed_before", "hot", "memories_hot_changed"),
    ("cold_since_before", "cold", "memories_cold_since"),
    ("last_used_before", "warm", "memories_warm_used"),
    ("created_before", "cold", "memories_cold_created"),
    ("created_before", "warm", "memories_created"),
    ("created_before", "hot", "memories_created"),
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
    if query.after_id is None:
        for field, part, index in _BOUND_INDEXES:
            if part == tier and getattr(query, field) is not None:
                return f" INDEXED BY {index}"
    partial = _partial_index(query, tier)
    if partial is not None:
        return f" INDEXED BY {partial[0]}"
    if query.after_id is not None:
        return " INDEXED BY memories_tier_id"
    return ""


def _partial_index(query: ScanQuery, tier: str) -> tuple[str, str] | None:
    """The partial index (and the literal condition that lets SQLite use it) of a rule
    that selects few rows by a flag or a count rather than a timestamp: pinned
    memories (every recall looks them up), superseded memories, COLD ones used since,
    used ones. Every page, in id order.

    Named, not left to the planner: right after the sweep rebuilt the tier index,
    neither it nor the pinned index had statistics, and SQLite walked the whole WARM
    tier through the tier index to find the pinned rows (21 ms per recall at 100k)."""
    if query.pinned:
        return "memories_pinned", "pinned = 1"
    if query.superseded:
        return "memories_superseded", "superseded_by IS NOT NULL"
    if tier == "cold" and (query.min_uses_since_cold or 0) > 0:
        return "memories_cold_used", "uses_since_cold > 0"
    if (query.min_use_count or 0) > 0 or query.used:
        return "memories_used", "use_count > 0"
    return None


def tier_literal(tier: str) -> str:
    """`tier` as an SQL string literal; only the live tier values are accepted."""
    if tier not in {t.value for t in LIVE_TIERS}:
        raise ValueError(f"not a live tier: {tier!r}")
    return f"'{tier}'"


TIER_INDEX = "memories_tier_id"
TIER_INDEX_SQL = f"CREATE INDEX IF NOT EXISTS {TIER_INDEX} ON memories (namespace, tier, id)"
REBUILD_SHARE = 0.25
"""A bulk move of more than this share of the file's memories rebuilds the (namespace,
tier, id) index instead of updating it row by row: each moved row deletes and inserts
one entry at a random place (ids are random), about 11 us a row, where building the
index anew sorts every row once (about 3 us a row): 100k rows moved out of 100k took
2.7 s with the index kept, 1.0 s with it rebuilt."""

MOVE_CACHE_KIB_PER_ROW = 0.5
"""SQLite page cache a bulk move is given per row it moves, on top of the usual
`READ_CACHE_KIB` (`_move_cache`): a move of 976k rows at 1M memories dirtied 455 MB of
pages (the rows' pages, the tier indexes built again, the WARM and COLD ones grown)."""
MOVE_CACHE_MAX_KIB = 1 << 20
"""The most page cache a bulk move is given (1 GiB); a bigger move spills the rest."""

HOT_INDEX = "memories_hot_changed"
_TO_FLOOR_FUNCTION = "tm_time_to_floor"
_DECISIONS = "temp.tm_hot_expiry"


class SweepReads:
    """Filtered pages of the `memories` table of one open file, and the sweep's bulk
    HOT expiry."""

    def __init__(
        self,
        database: SQLiteDatabase,
        vectors: VectorTable | None = None,
        memories: MemoryTable | None = None,
    ) -> None:
        self._db = database
        self._vectors, self._memories = vectors, memories

    @staticmethod
    def _pages(
        conn: sqlite3.Connection | sqlite3.Cursor,
        ns: str,
        query: ScanQuery,
        columns: str,
        params: Sequence[Any] = (),
        id_of: Callable[[Any], str] = itemgetter(0),
        join: str = "",
    ) -> list[Any]:
        """Rows of `columns` matching `query`, ordered by id (`id_of` a row); `join`
        adds the tables they name beside `memories AS m` (`TEXT_JOIN`).

        One query per tier: each can walk its (namespace, tier, ...) index, where a
        `tier IN (...)` query would scan the whole namespace in id order. Merging the
        per-tier pages by id gives the same page (UTF-8 and str order agree).
        """
        parts = tier_values(frozenset(query.tiers) & LIVE_TIERS)
        clauses, where_params = scan_sql(query, "m")
        where = "".join(f" AND {c}" for c in clauses)
        rows: list[Any] = []
        for part in parts:
            index = scan_index(query, part)
            partial = _partial_index(query, part)
            implied = f" AND {partial[1]}" if partial and partial[0] in index else ""
            sql = (
                f"SELECT {columns} FROM memories AS m{index}{join} "
                f"WHERE m.namespace = ? AND m.tier = {tier_literal(part)}{where}{implied} "
                "ORDER BY m.id LIMIT ?"
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
            rows = self._pages(
                conn, ns, query, columns("m", False), id_of=itemgetter("id"), join=TEXT_JOIN
            )
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
        return _facts_of(rows, use_days)

    async def scan_facts_by_bound(
        self,
        namespace: str,
        query: ScanQuery,
        *,
        type_bounds: Mapping[MemoryType, datetime] | None = None,
    ) -> AsyncIterator[MemoryFacts]:
        """Every row matching `query` (`after_id` aside), in pages of `query.limit`, in no
        order across pages (`lifecycle.SupportsBoundOrderScan`; each page by id).

        WARM rows bounded by `last_used_before` are walked once along the tier's
        (namespace, last_used_at) index, keyed by (last_used_at, pk). Paged by id, the
        first page read every row inside the bound and the next ones walked the id
        index, reading the tier's rows in random order: consolidation's scan of 216k
        fading candidates among 345k WARM rows at 1M read both. Other tiers page by id.

        The WARM walk also leaves out the rows of a type last used at or after its
        `type_bounds` time (the hint of `lifecycle.SupportsBoundOrderScan`): at 1M,
        216k WARM rows were inside the bound of the shortest-lived type, 90k inside
        their own type's; the others were read, tested and dropped.
        """
        ns = check_namespace(namespace)
        check_k(query.limit, "limit")
        query = replace(query, after_id=None)
        tiers = frozenset(query.tiers) & LIVE_TIERS
        if Tier.WARM in tiers and query.last_used_before is not None:
            async for page in self._warm_by_last_use(ns, query, type_bounds or {}):
                yield page
            tiers -= {Tier.WARM}
        if not tiers:
            return
        page_query = replace(query, tiers=tiers)
        while True:
            page = await self.scan_facts(ns, page_query)
            if len(page):
                yield page
            if len(page) < query.limit:
                return
            page_query = replace(page_query, after_id=page.ids[-1])

    async def _warm_by_last_use(
        self, ns: str, query: ScanQuery, type_bounds: Mapping[MemoryType, datetime]
    ) -> AsyncIterator[MemoryFacts]:
        clauses, where_params = scan_sql(replace(query, tiers=frozenset({Tier.WARM})), "m")
        assert query.last_used_before is not None
        bound = to_micros(query.last_used_before)
        typed = {t.value: to_micros(b) for t, b in type_bounds.items() if to_micros(b) < bound}
        if typed:  # rows of other types keep the query's bound alone
            cases = " ".join("WHEN ? THEN ?" for _ in typed)
            clauses.append(f"m.last_used_at < CASE m.memory_type {cases} ELSE ? END")
            where_params.extend([*(v for pair in typed.items() for v in pair), bound])
        where = "".join(f" AND {c}" for c in clauses)
        base = (
            f"SELECT {_FACT_COLUMNS}, m.pk FROM memories AS m INDEXED BY memories_warm_used "
            f"WHERE namespace = ? AND tier = 'warm'{where}"
        )
        order = " ORDER BY last_used_at, m.pk LIMIT ?"
        after: tuple[int, int] | None = None
        while True:
            await self._db.gate()
            with self._db.read() as conn:
                cursor = conn.cursor()
                cursor.row_factory = None
                if after is None:
                    sql, params = base + order, (NO_TIME, ns, *where_params, query.limit)
                else:
                    sql = base + " AND (last_used_at, m.pk) > (?, ?)" + order
                    params = (NO_TIME, ns, *where_params, *after, query.limit)
                rows = cursor.execute(sql, params).fetchall()
            if rows:
                after = (int(rows[-1][8]), int(rows[-1][-1]))
                yield _facts_of(sorted((row[:-1] for row in rows), key=itemgetter(0)), False)
            if len(rows) < query.limit:
                return

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

    async def expire_hot(
        self,
        namespace: str,
        bounds: HotExpiryBounds,
        time_to_floor: Callable[[MemoryType, int], int],
        when: datetime,
        *,
        dry_run: bool,
    ) -> HotExpiryMoves:
        """`lifecycle.hot_expiry` as one UPDATE (`lifecycle.SupportsBulkExpiry`): the
        HOT rows past the bound go COLD (not kept, or kept and due to leave WARM at
        once) or WARM. Rows are never read into Python: at a million due, reading
        their columns, deciding in numpy and matching a million ids back cost seconds
        more than the moves. The rule's arithmetic stays `lifecycle`'s:
        the time to the floor of each (type, use count) is computed there, once per
        distinct pair (`time_to_floor`, called from SQL for used rows; an unused row's
        is a literal of its type, `_unused_floor_sql`)."""
        ns = check_namespace(namespace)
        keep = "(use_count > 0 OR importance >= :keep OR pinned <> 0 OR core <> 0)"
        # The times to the floor of unused rows are computed inside the statements'
        # transaction (a failing `time_to_floor` rolls back what it began).
        due_template = (
            "(pinned = 0 AND core = 0 AND (last_used_at < :idle OR "
            "last_used_at <= :dwelt - {floor}))"
        )
        past = (
            f"SELECT pk FROM memories INDEXED BY {HOT_INDEX} "
            "WHERE namespace = :ns AND tier = 'hot' AND tier_changed_at < :changed"
        )
        params: dict[str, Any] = {
            "ns": ns,
            "changed": bounds.changed_before,
            "keep": bounds.keep_importance,
            "idle": bounds.idle_before,
            "dwelt": bounds.dwelt_by,
        }

        cached = _floor_function(time_to_floor)
        await self._db.gate()
        if dry_run:
            with self._db.read() as conn:
                conn.create_function(_TO_FLOOR_FUNCTION, 2, cached, deterministic=True)
                due = due_template.format(floor=_unused_floor_sql(cached))
                due_rows = f"SELECT {keep} AS kept, {due} AS due FROM memories WHERE pk IN ({past})"
                row = conn.execute(
                    f"SELECT count(*), coalesce(sum(kept AND due), 0), coalesce(sum(kept), 0) "
                    f"FROM ({due_rows})",
                    params,
                ).fetchone()
            total, through, kept = int(row[0]), int(row[1]), int(row[2])
            return HotExpiryMoves(
                to_warm=kept - through, to_cold=total - kept, through_warm=through
            )
        assert self._vectors is not None
        assert self._memories is not None
        at = to_micros(tier_move(Tier.COLD, when).tier_changed_at)  # WARM's too
        # The moved rows' ids are read back only for a cached partition of a live tier
        # of `ns` to follow (`refresh_moved`): at 976k moved, with none cached (a
        # namespace searched through its HNSW index), that is about a second for
        # nothing. They are read from the decisions joined to the rows, after the
        # UPDATE, one tier at a time: `RETURNING id, tier` cost the UPDATE 2.1-2.2 s
        # more at 976k rows (SQLite keeps every returned row until the statement
        # ends), the join 1.2-1.5 s.
        want_ids = self._vectors.holds_live(ns)
        with _move_cache(self._db) as grow_cache, self._db.write() as conn:
            conn.create_function(_TO_FLOOR_FUNCTION, 2, cached, deterministic=True)
            due_count = conn.execute(f"SELECT count(*) FROM ({past})", params).fetchone()[0]
            grow_cache(conn, due_count)
            due = due_template.format(floor=_unused_floor_sql(cached))
            with (
                _rebuilt_indexes(conn, due_count) as rebuilt,
                tier_rows.counted_by_statement(conn, due_count) as counting,
                _decisions(conn) as decisions,
            ):
                if HOT_INDEX in rebuilt:  # gone for the move: read the tier in pk order
                    past = past.replace(f"INDEXED BY {HOT_INDEX}", "NOT INDEXED")
                # Each row's tier is decided once, by its own statement, into a table
                # of (pk, cold, kept); the UPDATE then rewrites each row once (two
                # UPDATEs, COLD then WARM, dirtied every page of the moved rows twice:
                # their rows interleave) and calls no function of ours. A statement
                # that calls an application function may fail half-way, so SQLite
                # keeps a statement journal for it: the original of every page it
                # changes, copied to a temporary file (40 MB per 100k rows moved,
                # about 0.25 s). With none, and OR FAIL (a failed CHECK keeps the rows
                # already changed; the transaction around it is rolled back anyway),
                # it needs no journal (UPDATE ... FROM the decisions measured no
                # faster than the lookup by pk below).
                # CASE short-circuits where OR does not: the floor function runs
                # only for kept rows not idle long enough, once a row.
                conn.execute(
                    f"INSERT INTO {decisions} (pk, cold, kept) SELECT pk, "
                    f"CASE WHEN NOT {keep} OR {due} THEN 1 ELSE 0 END, "
                    f"CASE WHEN {keep} THEN 1 ELSE 0 END {past[past.index('FROM') :]}",
                    params,
                )
                move = (
                    "UPDATE OR FAIL memories "
                    "SET (tier, tier_changed_at, cold_since, uses_since_cold) = ("
                    "SELECT CASE d.cold WHEN 1 THEN 'cold' ELSE 'warm' END, :at, "
                    "CASE d.cold WHEN 1 THEN :at END, "
                    "CASE d.cold WHEN 1 THEN 0 ELSE memories.uses_since_cold END "
                    f"FROM {decisions} AS d WHERE d.pk = memories.pk) "
                    f"WHERE pk IN (SELECT pk FROM {decisions})"
                )
                conn.execute(move, {"at": at})
                moved = _moved_ids(conn, decisions) if want_ids else {}
                row = conn.execute(
                    "SELECT coalesce(sum(cold), 0), coalesce(sum(cold AND kept), 0) "
                    f"FROM {decisions}"
                ).fetchone()
            to_cold, through_warm = int(row[0]), int(row[1])
            to_warm = due_count - to_cold
            if counting:
                tier_rows.move(conn, ns, "hot", {"cold": to_cold, "warm": to_warm})
            for tier, ids in moved.items():
                if ids:
                    self._vectors.refresh_moved(conn, ns, ids, tier)
        return HotExpiryMoves(
            to_warm=to_warm, to_cold=to_cold - through_warm, through_warm=through_warm
        )


def _moved_ids(conn: sqlite3.Connection, decisions: str) -> dict[Tier, list[str]]:
    """The ids the bulk expiry moved to COLD and to WARM, each in pk order (the order
    the UPDATE rewrote them), read from its decisions table joined to the rows."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return {
        tier: [
            row[0]
            for row in cursor.execute(
                f"SELECT m.id FROM {decisions} AS d CROSS JOIN memories AS m ON m.pk = d.pk "
                "WHERE d.cold = ? ORDER BY d.pk",
                (cold,),
            )
        ]
        for tier, cold in ((Tier.COLD, 1), (Tier.WARM, 0))
    }


def _unused_floor_sql(time_to_floor: Callable[[str, int], int]) -> str:
    """`tm_time_to_floor(memory_type, use_count)` as SQL that calls the function only
    for used rows: the time of each type at no use is a literal (a CASE on the type).

    Why: SQLite calls an application function once per row it tests, at about 0.6 us
    a call through Python; at 1M memories the bulk expiry tested 340k kept rows, almost
    all never used (a bulk import), for four distinct values."""
    cases = " ".join(f"WHEN '{t.value}' THEN {int(time_to_floor(t.value, 0))}" for t in MemoryType)
    return (
        f"CASE WHEN use_count = 0 THEN CASE memory_type {cases} "
        f"ELSE {_TO_FLOOR_FUNCTION}(memory_type, use_count) END "
        f"ELSE {_TO_FLOOR_FUNCTION}(memory_type, use_count) END"
    )


def _floor_function(time_to_floor: Callable[[MemoryType, int], int]) -> Callable[[str, int], int]:
    """`tm_time_to_floor(memory_type, use_count)` for SQL: `time_to_floor` computed once
    per distinct (type, use count); SQLite still calls it once per row it tests."""

    @functools.cache
    def cached(memory_type: str, use_count: int) -> int:
        return time_to_floor(_TYPES[memory_type], int(use_count))

    return cached


def _facts_of(rows: Sequence[tuple[Any, ...]], use_days: bool) -> MemoryFacts:
    """`MemoryFacts` of rows of `_FACT_COLUMNS` (and `use_days` when asked for)."""
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


@contextlib.contextmanager
def _rebuilt_indexes(conn: sqlite3.Connection, moving: int) -> Iterator[frozenset[str]]:
    """Drop the (namespace, tier, id) index and the HOT tier's timestamp index for the
    moves inside, and build them again after, when more than `REBUILD_SHARE` of the
    file's rows move (inside the caller's transaction: a reader never sees the file
    without them, and a rollback brings them back). Yields the names dropped.

    The HOT index: a bulk expiry deletes the entry of every row it moves; at 976k of
    1M moved that cost about 0.8 s of CPU, building it again from the table (the few
    rows still HOT) 0.26 s. The other tiers' timestamp indexes gain entries, and
    measured no faster rebuilt (cold_since 0.35 s to keep, 0.53 s to build again)."""
    if moving == 0:  # an idle sweep: no need to count the file
        yield frozenset()
        return
    if moving <= REBUILD_SHARE * tier_rows.total(conn):
        yield frozenset()
        return
    names = (TIER_INDEX, HOT_INDEX)
    sqls = [
        conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        for name in names
    ]
    with _fast_secure_delete(conn):
        for name in names:
            conn.execute(f"DROP INDEX {name}")
        yield frozenset(names)
        for sql in sqls:
            conn.execute(sql)


@contextlib.contextmanager
def _fast_secure_delete(conn: sqlite3.Connection) -> Iterator[None]:
    """`PRAGMA secure_delete = FAST` inside, where SQLite was built with it ON (Debian's
    and others' system SQLite): freed pages are then not overwritten with zeros, deleted
    cells on the pages still in use still are.

    Why: dropping the two indexes of a bulk move freed 20k pages (80 MB at 1M
    memories), each zeroed and written to the log only to be taken again by the
    indexes built after it. What they held (namespaces, tiers, ids, timestamps) is
    in the rows, which stay. A build with it OFF is left OFF."""
    mode = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
    if mode != 1:
        yield
        return
    conn.execute("PRAGMA secure_delete = FAST")
    try:
        yield
    finally:
        conn.execute("PRAGMA secure_delete = 1")


@contextlib.contextmanager
def _decisions(conn: sqlite3.Connection) -> Iterator[str]:
    """A temporary table of the bulk expiry's decisions, (pk, cold, kept) a due row, for
    the statements inside (in the caller's transaction); dropped after them. Yields its
    name.

    Temporary: the connection's own, never in the file (a crash leaves nothing); at a
    million rows due it holds about 12 MB, in the temporary database's pages. A table
    left by a move that failed outside a transaction is dropped first."""
    conn.execute(f"DROP TABLE IF EXISTS {_DECISIONS}")
    conn.execute(
        f"CREATE TABLE {_DECISIONS} "
        "(pk INTEGER PRIMARY KEY, cold INTEGER NOT NULL, kept INTEGER NOT NULL)"
    )
    yield _DECISIONS  # on an error, the caller's rollback takes the table away
    conn.execute(f"DROP TABLE {_DECISIONS}")


@contextlib.contextmanager
def _move_cache(
    database: SQLiteDatabase,
) -> Iterator[Callable[[sqlite3.Connection, int], None]]:
    """For a bulk move inside: a function that grows the connection's page cache to
    hold the dirty pages of a move of that many rows (`MOVE_CACHE_KIB_PER_ROW`, at most
    `MOVE_CACHE_MAX_KIB`); after it (the move committed or rolled back), the cache is
    back to its size and the memory it took goes back to the system.

    Why: with the usual 64 MB, a move of 976k rows at 1M memories spilled its dirty
    pages to the WAL mid-statement (343 MB, written again at the commit) and sorted
    the tier index it builds again through temporary files (108 MB): 4.4 s for the
    UPDATE and 2.7 s for the index, against 2.6 s and 1.2 s with the pages held. The
    cache frees the pages when it shrinks, but glibc keeps the freed heap (555 MB of
    RSS after such a move) unless asked to give it back (`malloc_trim`)."""
    previous: list[tuple[str, int]] = []

    def grow(conn: sqlite3.Connection, rows: int) -> None:
        extra = int(rows * MOVE_CACHE_KIB_PER_ROW)
        if extra <= READ_CACHE_KIB // 2:  # fits the usual cache, with room to read
            return
        kib = min(MOVE_CACHE_MAX_KIB, READ_CACHE_KIB + extra)
        for schema in ("main", "temp"):  # temp: the decisions table (~12 MB at 1M rows)
            size = int(conn.execute(f"PRAGMA {schema}.cache_size").fetchone()[0])
            if -kib < size:  # a negative size is in KiB; grow only
                previous.append((schema, size))
                conn.execute(f"PRAGMA {schema}.cache_size = {-kib}")

    try:
        yield grow
    finally:
        if previous:
            with database.read() as conn:
                for schema, size in previous:
                    conn.execute(f"PRAGMA {schema}.cache_size = {size}")
                conn.execute("PRAGMA shrink_memory")
            _release_heap()


def _release_heap() -> None:
    """Give the heap's free memory back to the system where the C library can
    (glibc's `malloc_trim`); elsewhere nothing. Best effort."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return
    trim(0)
