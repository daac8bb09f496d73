"""The embedded default MemoryStore: one SQLite file, a per-namespace lexical index, numpy
for vectors.

Build it with `store = await SQLiteMemoryStore.open("memory.db")`; the association
graph lives in the same file: `SQLiteAssociationGraph(store.database)`.

The store is built from parts that share the file's one connection (`database`), each
owning one concern of the port:

- `vector_table.VectorTable`: the recorded dimension and the in-memory matrices every
  vector search reads (exact brute-force cosine), kept in step with the writes, and
  the HNSW index of each namespace above `ann_min_rows` (`ann`);
- `memories.MemoryTable`: the live memories, their writes, uses and tier moves;
- `archives.ArchiveTable`: the archive records, and the moves between them and the
  live memories;
- `lexical.LexicalSearch`: BM25 over the per-namespace lexical index (`lexicon`);
- `sweep.SweepReads`: the sweep's filtered pages, as memories, ids or columns;
- `archival.ArchivalJournal`: the archival journal's rows;
- `pending.PendingOriginals`: the queue of originals to delete from object storage.

This class wires them: a call of the port that one part answers alone is that part's
method; the store itself holds what spans several parts (writes that check or replace
both live memories and archive records, searches that rank in the cache and read the
rows, counts) and housekeeping.

- Durability: WAL with `synchronous=FULL`: once a call returns, its write survives a
  crash or a power loss (details in `database`). `stats` and `scan` read one
  snapshot; `snapshot()` spans many calls (an export).
- Namespaces: every statement filters by namespace in its own WHERE clause.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from tiered_memory.errors import ValidationError
from tiered_memory.models import LIVE_TIERS, ArchiveRecord, Memory, Stats, Tier, TierStats
from tiered_memory.policy import TierPolicy
from tiered_memory.ports import (
    EventTotals,
    Matrix,
    OperationEvent,
    ScoredMemory,
    SearchFilter,
    Vector,
)
from tiered_memory.validation import check_k, check_namespace

from . import events
from .ann import ANN_MIN_ROWS
from .archival import ArchivalJournal
from .archives import ArchiveTable
from .database import DEFAULT_BUSY_TIMEOUT, SQLiteDatabase
from .lexical import DEFAULT_LEXICAL_ROWS, LexicalSearch
from .memories import VECTOR_JOIN, MemoryTable, ids_in, memory_of
from .memory_columns import TEXT_JOIN
from .pending import PendingOriginals
from .sql import IN_JSON, json_list, placeholders, tier_values
from .sweep import SweepReads
from .vector_table import DEFAULT_CACHE_ROWS, VectorTable, check_dimension

_NO_FILTER = SearchFilter()


# Every namespace with memories or archive records, by one index seek per namespace
# (each table's key starts with the namespace) instead of reading every key: a sweep
# begins with this, and `SELECT namespace FROM memories UNION ...` read the million
# entries of a 1M store's (namespace, id) index, 0.1-0.3 s a sweep.
NAMESPACES_SQL = """WITH RECURSIVE
    m(ns) AS (
        SELECT (SELECT min(namespace) FROM memories)
        UNION ALL
        SELECT (SELECT min(namespace) FROM memories WHERE namespace > m.ns) FROM m
        WHERE m.ns IS NOT NULL
    ),
    a(ns) AS (
        SELECT (SELECT min(namespace) FROM archives)
        UNION ALL
        SELECT (SELECT min(namespace) FROM archives WHERE namespace > a.ns) FROM a
        WHERE a.ns IS NOT NULL
    )
    SELECT ns FROM m WHERE ns IS NOT NULL UNION SELECT ns FROM a WHERE ns IS NOT NULL
    ORDER BY 1"""


class SQLiteMemoryStore:
    """MemoryStore over one SQLite file. Build it with `await SQLiteMemoryStore.open(path)`."""

    def __init__(
        self,
        database: SQLiteDatabase,
        *,
        owns_database: bool = False,
        use_days_kept: int = TierPolicy().use_days_kept,
        cache_rows: int = DEFAULT_CACHE_ROWS,
        lexical_rows: int = DEFAULT_LEXICAL_ROWS,
        ann_min_rows: int | None = ANN_MIN_ROWS,
    ) -> None:
        self._db = database
        self._owns_database = owns_database
        self._vectors = VectorTable(database, cache_rows=cache_rows, ann_min_rows=ann_min_rows)
        self._memories = MemoryTable(database, self._vectors, use_days_kept=use_days_kept)
        self._archives = ArchiveTable(database, self._vectors, self._memories)
        self._lexical = LexicalSearch(database, rows=lexical_rows, locator=self._vectors.locator)
        self._sweep = SweepReads(database, self._vectors, self._memories)
        self._journal = ArchivalJournal(database)
        self._pending = PendingOriginals(database)
        # The port's calls that one part answers alone.
        memories, archives, journal = self._memories, self._archives, self._journal
        self.get_many = memories.get_many
        self.live_ids = memories.live_ids  # SupportsLiveIds
        self.patch_many = memories.patch_many
        self.delete_many = memories.delete_many
        self.set_tier = memories.set_tier
        self.record_access = memories.record_access
        self.adjacent = memories.adjacent  # SupportsAdjacent
        self.lexical_search = self._lexical.search
        self.lexical_statistics = self._lexical.statistics
        self.scan = self._sweep.scan
        self.scan_ids = self._sweep.scan_ids
        self.scan_facts = self._sweep.scan_facts
        self.embeddings = self._sweep.embeddings
        self.expire_hot = self._sweep.expire_hot  # lifecycle.SupportsBulkExpiry
        self.scan_facts_by_bound = self._sweep.scan_facts_by_bound  # SupportsBoundOrderScan
        self.archive_many = archives.archive_many
        self.get_archives = archives.get_archives
        self.search_archives = archives.search_archives
        self.update_archive = archives.update_archive
        self.unarchive_many = archives.unarchive_many
        self.delete_archives = archives.delete_archives
        self.scan_archives = archives.scan_archives
        self.archival_states = journal.archival_states
        self.claim_archival = journal.claim_archival
        self.note_archival = journal.note_archival
        self.release_archival = journal.release_archival
        self.queue_originals = self._pending.queue_originals
        self.pending_originals = self._pending.pending_originals
        self.drop_pending_originals = self._pending.drop_pending_originals
        self.pending_namespaces = self._pending.pending_namespaces

    @classmethod
    async def open(
        cls,
        path: str | PathLike[str],
        *,
        verify: bool | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        use_days_kept: int = TierPolicy().use_days_kept,
        cache_rows: int = DEFAULT_CACHE_ROWS,
        lexical_rows: int = DEFAULT_LEXICAL_ROWS,
        dimension: int | None = None,
        ann_min_rows: int | None = ANN_MIN_ROWS,
    ) -> SQLiteMemoryStore:
        """Open or create the file (schema included); `close()` closes it again.

        `dimension` is the size of the embeddings it will hold (the engine passes its
        embedder's): recorded before the first write, and a file holding vectors of
        another size is refused here (`ensure_dimension`).

        `verify` runs the integrity check that reads the whole file at open: None
        (the default) on files up to 512 MB (`database.VERIFY_MAX_BYTES`), True always,
        False never.
        `cache_rows` bounds the vectors kept in memory (about 1.5 KB each at 384-d).
        `lexical_rows` bounds the texts one lexical search scores with BM25
        (`LexicalSearch.terms`). A namespace holding `ann_min_rows` memories or more is
        searched through an HNSW index saved in the folder `<path>.ann` (`ann`; None:
        always exact; one search can ask `SearchFilter(exact=True)`).
        """
        database = await SQLiteDatabase.open(path, verify=verify, busy_timeout=busy_timeout)
        store = cls(
            database,
            owns_database=True,
            use_days_kept=use_days_kept,
            cache_rows=cache_rows,
            lexical_rows=lexical_rows,
            ann_min_rows=ann_min_rows,
        )
        if dimension is not None:
            try:
                await store.ensure_dimension(dimension)
            except BaseException:
                await store.close()
                raise
        return store

    @property
    def database(self) -> SQLiteDatabase:
        """The open file, to build the graph on: `SQLiteAssociationGraph(store.database)`."""
        return self._db

    # -- dimension -----------------------------------------------------------------------

    async def dimension(self) -> int | None:
        await self._db.gate()
        with self._db.read() as conn:
            return self._vectors.dimension(conn)

    async def ensure_dimension(self, dimension: int) -> None:
        wanted = check_dimension(dimension)
        await self._db.gate()
        with self._db.read() as conn:
            if self._vectors.dimension(conn) == wanted:
                return  # the usual case: one read, no write lock
        with self._db.write() as conn:
            self._vectors.record_dimension(conn, wanted)

    # -- live memories -------------------------------------------------------------------

    async def put_many(self, namespace: str, memories: Sequence[Memory]) -> None:
        await self._put(namespace, memories, None)

    async def put_vectors_many(
        self, namespace: str, memories: Sequence[Memory], vectors: Sequence[Vector]
    ) -> None:
        """`put_many` with the embeddings as arrays, one per memory (`SupportsPutVectors`);
        the memories' own `embedding` is ignored."""
        if len(vectors) != len(memories):
            raise ValidationError(f"{len(memories)} memories but {len(vectors)} vectors")
        await self._put(namespace, memories, vectors)

    async def _put(
        self, namespace: str, memories: Sequence[Memory], vectors: Sequence[Vector] | None
    ) -> None:
        ns = check_namespace(namespace)
        if not memories:
            return
        rows, dimension = self._memories.prepare(ns, memories, need_embedding=True, vectors=vectors)
        ids = [m.id for m in memories]
        await self._db.gate()
        with self._db.write() as conn:
            self._vectors.fix_dimension(conn, dimension)
            taken = ids_in(conn, "memories", ns, ids) | ids_in(conn, "archives", ns, ids)
            if taken:
                raise ValidationError(
                    f"ids already exist in namespace {ns!r}: {sorted(taken)[:5]} "
                    "(ids are unique across live and archived memories)"
                )
            self._memories.insert(conn, rows)
            self._vectors.refresh(conn, ns, ids)

    async def replace_many(self, namespace: str, memories: Sequence[Memory]) -> list[ArchiveRecord]:
        """One transaction: the old rows (live, or archive records) go and the new ones
        come in together, so a failure at any step keeps the old ones."""
        ns = check_namespace(namespace)
        if not memories:
            return []
        rows, dimension = self._memories.prepare(ns, memories, need_embedding=True)
        ids = [m.id for m in memories]
        await self._db.gate()
        with self._db.write() as conn:
            self._vectors.fix_dimension(conn, dimension)
            archived = self._archives.get(conn, ns, ids)
            conn.execute(
                f"DELETE FROM memories WHERE namespace = ? AND id {IN_JSON}", (ns, json_list(ids))
            )
            if archived:
                conn.execute(
                    f"DELETE FROM archives WHERE namespace = ? AND id {IN_JSON}",
                    (ns, json_list(sorted(archived))),
                )
            self._memories.insert(conn, rows)
            self._vectors.refresh(conn, ns, ids)
        return [archived[i] for i in sorted(archived)]

    # -- search ----------------------------------------------------------------------------

    async def vector_search(
        self,
        namespace: str,
        query: Vector,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = _NO_FILTER,
        exact_scores: bool = True,
    ) -> list[ScoredMemory]:
        ns = check_namespace(namespace)
        check_k(k)
        parts = tier_values(frozenset(tiers) & LIVE_TIERS)
        await self._db.gate()
        with self._db.read() as conn:
            walk = self._vectors.walk_for(
                conn, ns, parts, query, k=k, filters=filters, exact_scores=exact_scores
            )
        if walk is not None:
            # a big graph's search, on another thread: the event loop goes on meanwhile
            # (a recall's lexical phase: `Retriever._search_tiers`)
            await asyncio.to_thread(walk.run)
            await self._db.gate()
        with self._db.read() as conn:
            best = self._vectors.best(
                conn, ns, parts, query, k=k, filters=filters, exact_scores=exact_scores, walk=walk
            )
            ids = [i for i, _ in best]
            read = self._vectors.candidate_rows(conn, ns, ids)
            found = {i: memory_of(row, True, keep_embedding=False) for i, row in read.items()}
            if len(found) < len(ids):
                found.update(
                    self._memories.get(conn, ns, [i for i in ids if i not in found], False)
                )
        return [ScoredMemory(found[i], score) for i, score in best if i in found]

    async def vector_search_many(
        self,
        namespace: str,
        queries: Matrix,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = _NO_FILTER,
        recheck_below: float | None = None,
        exact_scores: bool = True,
        exact_from: float | None = None,
    ) -> list[list[tuple[str, float]]]:
        """The (id, cosine) pairs `vector_search` would rank, for many queries at once
        (`SupportsBatchVectorSearch`): add_many's deduplication and auto-linking.
        `recheck_below`, `exact_scores` and `exact_from`: see `VectorTable.best_many`."""
        ns = check_namespace(namespace)
        check_k(k)
        matrix = np.asarray(queries, dtype=np.float32)
        if filters.metadata or matrix.ndim != 2:  # metadata needs SQL: one query at a time
            return [
                [(s.memory.id, s.score) for s in found]
                for found in [
                    await self.vector_search(ns, q, tiers=tiers, k=k, filters=filters)
                    for q in matrix
                ]
            ]
        parts = tier_values(frozenset(tiers) & LIVE_TIERS)
        await self._db.gate()
        with self._db.read() as conn:
            return self._vectors.best_many(
                conn,
                ns,
                parts,
                matrix,
                k=k,
                filters=filters,
                recheck_below=recheck_below,
                exact_scores=exact_scores,
                exact_from=exact_from,
            )

    async def cosines(self, namespace: str, query: Vector, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of `query` to each live memory of `ids` that has an embedding
        (`SupportsCosines`): the retriever needs it for candidates found another way
        (lexically, through the graph)."""
        ns = check_namespace(namespace)
        if not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            return self._vectors.cosines(conn, ns, query, ids)

    # -- scans and counts ----------------------------------------------------------------

    async def list_ids(
        self,
        namespace: str,
        *,
        tiers: frozenset[Tier] | None = None,
        after_id: str | None = None,
        limit: int = 1000,
    ) -> list[str]:
        ns = check_namespace(namespace)
        check_k(limit, "limit")
        wanted = LIVE_TIERS if tiers is None else frozenset(tiers)
        parts = tier_values(wanted & LIVE_TIERS)
        after = "" if after_id is None else " AND id > ?"
        bound = () if after_id is None else (after_id,)
        selects: list[str] = []
        params: list[Any] = []
        if parts:
            selects.append(
                f"SELECT id FROM memories WHERE namespace = ? "
                f"AND tier IN ({placeholders(len(parts))}){after}"
            )
            params.extend((ns, *parts, *bound))
        if Tier.ARCHIVED in wanted:
            selects.append(f"SELECT id FROM archives WHERE namespace = ?{after}")
            params.extend((ns, *bound))
        if not selects:
            return []
        sql = f"{' UNION ALL '.join(selects)} ORDER BY id LIMIT ?"
        await self._db.gate()
        with self._db.read() as conn:
            return [row[0] for row in conn.execute(sql, (*params, limit))]

    async def stats(self, namespace: str) -> Stats:
        ns = check_namespace(namespace)
        tiers = {tier: TierStats() for tier in Tier}
        await self._db.gate()
        with self._db.snapshot() as conn:  # live and archived counts of one moment
            rows = conn.execute(
                "SELECT m.tier, count(*), "
                "sum(length(CAST(t.content AS BLOB)) + coalesce(length(v.embedding), 0) "
                "+ length(CAST(m.metadata AS BLOB))), "
                "sum(m.pinned), sum(m.core), sum(m.do_not_inject) "
                f"FROM memories AS m{TEXT_JOIN}{VECTOR_JOIN} WHERE m.namespace = ? "
                "GROUP BY m.tier",
                (ns,),
            ).fetchall()
            archived = conn.execute(
                "SELECT count(*), sum(length(CAST(summary AS BLOB)) "
                "+ coalesce(length(summary_code), 0) + length(checksum) "
                "+ coalesce(length(CAST(metadata AS BLOB)), 0) "
                "+ coalesce(length(CAST(links AS BLOB)), 0)), sum(size_bytes) "
                "FROM archives WHERE namespace = ?",
                (ns,),
            ).fetchone()
        pinned = core = forgotten = 0
        for row in rows:
            tiers[Tier(row[0])] = TierStats(count=row[1], bytes=row[2] or 0)
            pinned += row[3] or 0
            core += row[4] or 0
            forgotten += row[5] or 0
        tiers[Tier.ARCHIVED] = TierStats(count=archived[0], bytes=archived[1] or 0)
        return Stats(
            namespace=ns,
            tiers=tiers,
            pinned=pinned,
            core=core,
            forgotten=forgotten,
            object_store_bytes=archived[2] or 0,
        )

    # -- the operations log (ports.SupportsOperationsLog) ----------------------------------

    async def record_events(self, records: Sequence[OperationEvent]) -> None:
        await self._db.gate()
        with self._db.write() as conn:
            events.record(conn, records)

    async def event_totals(
        self, kind: str, *, namespace: str | None = None, since: datetime | None = None
    ) -> EventTotals:
        await self._db.gate()
        with self._db.read() as conn:
            return events.totals(conn, kind, namespace, since)

    async def last_event(self, kind: str, *, namespaces: Sequence[str]) -> OperationEvent | None:
        await self._db.gate()
        with self._db.read() as conn:
            return events.last(conn, kind, namespaces)

    async def namespaces(self) -> list[str]:
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(NAMESPACES_SQL).fetchall()
        return [row[0] for row in rows]

    # -- housekeeping --------------------------------------------------------------------

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """Writes inside commit together or roll back together (graph writes included)."""
        return self._db.transaction()

    def snapshot(self) -> AbstractAsyncContextManager[None]:
        """Reads inside see one state of the file (graph reads included): one SQLite
        read transaction, which other processes' commits do not change."""
        return self._db.read_transaction()

    async def checkpoint(self) -> None:
        """Copy the WAL into the main file (`SQLiteDatabase.checkpoint`), after pruning
        the log of deleted vectors that the HNSW indexes have applied (`ann`): it grows
        by a row per deletion or archival otherwise."""
        await self._db.gate()
        with self._db.write() as conn:
            self._vectors.prune_delete_log(conn)
        self._db.checkpoint()

    async def backup(self, target: str | PathLike[str]) -> None:
        """A consistent copy of the whole file (every namespace, the graph too) in the
        new file `target`, taken with SQLite's online backup API while writers go on.
        The archived originals are not in it (`tiered_memory.backup` copies them)."""
        await self._db.gate()
        self._db.backup(Path(target))

    async def clear(self, namespace: str | None = None) -> None:
        await self._db.gate()
        with self._db.write() as conn:
            if namespace is None:
                conn.execute("DELETE FROM memories")
                conn.execute("DELETE FROM memory_vectors")  # the triggers did; no orphans
                conn.execute("DELETE FROM memory_texts")
                conn.execute("DELETE FROM archival")  # likewise
                conn.execute("DELETE FROM archives")
                conn.execute("DELETE FROM pending_originals")
                conn.execute("DELETE FROM meta WHERE key = 'dimension'")
                events.clear(conn, None)
                self._vectors.cleared()
                return
            ns = check_namespace(namespace)
            conn.execute("DELETE FROM memories WHERE namespace = ?", (ns,))
            conn.execute("DELETE FROM archives WHERE namespace = ?", (ns,))
            conn.execute("DELETE FROM pending_originals WHERE namespace = ?", (ns,))
            events.clear(conn, ns)
            self._vectors.forget_dimension_if_empty(conn)
            self._vectors.cleared(ns)

    async def settle_vector_index(self, namespace: str | None = None) -> None:
        """Wait until the HNSW indexes (of `namespace`) have folded every row they
        buffered in the background (`backends.sqlite.ann`); searches never need this."""
        await asyncio.to_thread(self._vectors.settle, namespace)

    async def close(self) -> None:
        """Closes the file when this store opened it (`open()`); the graph never does.
        The approximate indexes that changed are saved first (`VectorTable.close`)."""
        self._vectors.close()
        if self._owns_database:
            await self._db.close()
