"""The embeddings of the embedded store: the file's recorded dimension, and the
in-memory matrices (`vectors`) kept in step with the file, that every vector search
reads.

The file holds the truth (`memory_vectors`, and the archive records' summary codes);
the cache holds, per (namespace, tier) and per namespace's archive records, unit rows
that one matrix product scores. It is updated in place by this store's writes
(`refresh` after each, `refresh_moved` after a tier move), dropped on a rollback that
undid cached writes, and when `PRAGMA data_version` shows another connection or process
wrote to the file. The cheap filters are masks over the flags cached beside the rows;
metadata filters run in SQL on growing batches of the best-scoring rows.

A namespace with `ann_min_rows` live vectors or more is searched through its HNSW
index instead (`ann`): the index proposes candidates, one SQL query over them applies
the tiers and filters and reads their float32 embeddings, and the candidates are
re-scored exactly, so scores are exact and only the candidate set is approximate
(recall@10 >= 0.98 against a scan). A search that finds too few candidates passing its
filters, or asks `SearchFilter(exact=True)`, scans the cached matrices of the tiers it
wants as below. Such a namespace's tiers are then never loaded as float32 matrices
unless a search needs a scan: its vectors stay in the index as float16.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory.errors import ConfigurationError, DimensionMismatchError
from tiered_memory.models import LIVE_TIERS, MemoryType, Tier
from tiered_memory.ports import Matrix, SearchFilter, Vector

from . import ann, tier_rows
from .ann import ANN_MIN_ROWS, AnnIndex
from .archive_rows import code_rows
from .codes import CalibratedIndex
from .database import SQLiteDatabase
from .file_memo import FileMemo, FileState
from .graph_candidates import GraphCandidates, shortlist
from .locator import RowLocator
from .sql import IN_JSON, json_ints, json_list, metadata_sql, search_filter_sql
from .vectors import (
    FORGOTTEN,
    PINNED,
    SUPERSEDED,
    TYPE_CODES,
    Mask,
    Scores,
    VectorCache,
    VectorIndex,
    flags_of,
    unit,
    unit_rows,
)

log = logging.getLogger(__name__)

ARCHIVE_KEY = "archived"  # the cache partition of a namespace's archive records
DEFAULT_CACHE_ROWS = 2_000_000
# A move of more rows than this moves cached rows between partitions in bulk, or drops
# the partitions it touches (`refresh_moved`), instead of patching them row by row: at
# about 10 µs a row, patching 2000 rows costs what reloading a 2000-row partition costs.
BULK_MOVE_ROWS = 2000
_METADATA_BATCH = 4  # metadata-filtered search checks k*4, then k*16, ... candidates
_QUERY_BLOCK = 64  # queries per matrix product in `best_many` (bounds the scores)
# An approximate search asks the index for k + max(_ANN_EXTRA, k / 4) candidates, then
# more while too few pass the filters (`wider_fetch`), up to this many; beyond it the tiers are
# scanned. The spare covers rows a filter leaves out (forgotten, superseded: few; the
# wider retry covers more) and the float16 graph's order near rank k. It was 2k (at least
# k + 32): 42 rows read for k = 10, and for a recall's 83 candidates a graph search for
# 166 took 1.41 ms at 1M against 0.67 ms for 93, for a top-83 recall of 0.999 against
# 0.989 (0.9999 and 1.0 at 100k). Then k / 8: in a swept store the wanted tiers are a
# share of the graph (a recall's HOT and WARM: 36 % at 100k) and a third of the recalls
# found too few of them among k / share candidates and searched again. At k / 4 (a
# recall's 84: 105 / share), over 400 recalls of a swept copy of the 100k scale store,
# the vector search took 2.8-3.7 ms a recall on average against 3.1-4.1, p95 6.2-7.7
# against 7.1-10.3 (four interleaved rounds, better in three); at 1M its p50 was 4.0 /
# 3.2 against 5.5 / 5.3 ms (two). At 1M a recall's beam is 128 either way; unswept,
# 100k recalls measured the same within the noise.
_ANN_EXTRA = 10
_ANN_EXTRA_SHARE = 4  # the spare is at least k / this
_ANN_MAX_FETCH = 4096
# A graph search of an index this big runs on another thread while the event loop goes
# on (`walk_for`): faiss releases the GIL while it walks, and a recall has its lexical
# phase to do meanwhile. At 1M rows a recall's walk (84 candidates, beam 128) took
# ~0.9 ms, and a hop to a thread and back ~0.07; at 100k the walk (beam 48) is ~0.3 ms,
# and a vector search alone (nothing to overlap) would pay the hop: 250k is where
# the beam starts to grow (`ann.EXPANSION_SEARCH_ROWS`).
WALK_OFF_LOOP_ROWS = ann.EXPANSION_SEARCH_ROWS
# When every row of the namespace passes (all live tiers, nothing hidden: dedup and
# auto-linking), the extra candidates only correct the float16 graph's order: k + 8.
_ANN_SPARE = 8
# A wider graph search asks for a quarter more than the yield of the last one says
# k needs (`wider_fetch`).
_RETRY_MARGIN = 1.25
# Each memory joined to its vector: memories without one are left out.
_CACHE_COLUMNS = (
    "m.id, m.tier, v.embedding, m.do_not_inject, m.superseded_by, m.pinned, m.memory_type"
)
_CACHE_FROM = "memories AS m JOIN memory_vectors AS v ON v.pk = m.pk"


def to_blob(vector: Vector) -> bytes:
    """An embedding as stored: little-endian float32."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> Vector:
    vector: Vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    return vector


def check_dimension(dimension: int) -> int:
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise ConfigurationError(f"an embedding dimension is a positive integer, not {dimension!r}")
    return dimension


def batch_dimension(vectors: Iterable[Vector | None]) -> int | None:
    """The one dimension of a batch's vectors (None without any)."""
    dimension: int | None = None
    for vector in vectors:
        if vector is None:
            continue
        if dimension is None:
            dimension = int(vector.size)
        elif vector.size != dimension:
            raise DimensionMismatchError(
                f"one batch mixes {dimension}-d and {vector.size}-d embeddings"
            )
    return dimension


class GraphWalk:
    """One graph search (`AnnIndex.search_scored`), prepared on the connection's thread
    (`VectorTable.walk_for`) and run on another (`run`), for `VectorTable.best` to take
    instead of searching again while the file is unchanged (`result_for`)."""

    __slots__ = ("fetch", "found", "index", "query", "state")

    def __init__(self, index: AnnIndex, query: Vector, fetch: int, state: FileState) -> None:
        self.index = index
        self.query = query
        self.fetch = fetch
        self.state = state
        self.found: tuple[ann.Keys, npt.NDArray[np.float32]] | None = None

    def run(self) -> None:
        """Search the graph; safe on any thread (the index locks its own searches)."""
        (keys,), (scores,) = self.index.search_scored(self.query[None, :], self.fetch)
        self.found = (keys, scores)

    def result_for(
        self, index: AnnIndex, query: Vector, fetch: int, state: FileState
    ) -> tuple[ann.Keys, npt.NDArray[np.float32]] | None:
        """Its candidates, if it ran and was this search of `index` in the file as it
        is now (`state`); else None."""
        if (
            self.index is index
            and self.fetch == fetch
            and self.state == state
            and np.array_equal(self.query, query)
        ):
            return self.found
        return None


def _row_flags(row: sqlite3.Row) -> int:
    return flags_of(
        bool(row["do_not_inject"]), row["superseded_by"] is not None, bool(row["pinned"])
    )


class VectorTable:
    """The dimension and the vector cache of one open file; every method runs on a
    connection its caller holds (`SQLiteDatabase.read`/`write`)."""

    def __init__(
        self,
        database: SQLiteDatabase,
        *,
        cache_rows: int = DEFAULT_CACHE_ROWS,
        ann_min_rows: int | None = ANN_MIN_ROWS,
    ) -> None:
        self._db = database
        self.cache = VectorCache(cache_rows)
        self._data_version: int | None = None
        self._dirty = False  # the cache holds writes not yet committed
        # The approximate indexes (`ann`): None turns them off (every search scans).
        self.ann_min_rows = ann_min_rows
        self._anns: dict[str, AnnIndex] = {}
        self._small: dict[str, tuple[int, int, int]] = {}  # ns -> `log_state` it was counted at
        self._ann_dirty = False  # an index caught up inside a transaction
        self._warned_missing = False
        self._graph_candidates: GraphCandidates | None = None  # the last graph search's
        self.locator = RowLocator()  # pks of rows a search just read (`cosines`)
        self._memo = FileMemo()  # the small reads every search repeats
        self._folder = None if database.path == ":memory:" else Path(f"{database.path}.ann")
        database.on_rollback(self._rolled_back)
        database.on_commit(self._committed)

    def _rolled_back(self) -> None:
        # Cached rows may mirror writes that no longer exist; a rejected batch that never
        # reached the cache keeps it (reloading 100k vectors takes a second).
        if self._dirty:
            self.cache.clear()
            self._dirty = False
        if self._ann_dirty:  # it may hold rows that never existed: reload from its file
            for index in self._anns.values():
                index.stop_folding(wait=False)
            self._anns.clear()
            self._ann_dirty = False

    def _committed(self) -> None:
        self._dirty = False
        self._ann_dirty = False

    # -- the dimension ---------------------------------------------------------------

    @staticmethod
    def dimension(conn: sqlite3.Connection) -> int | None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
        return None if row is None else int(row[0])

    def record_dimension(self, conn: sqlite3.Connection, wanted: int) -> None:
        """Record `wanted` as the file's dimension (`MemoryStore.ensure_dimension`): an
        empty file takes any, one holding vectors of another size is refused."""
        stored = self.dimension(conn)
        if stored == wanted:
            return
        if stored is not None and not _empty(conn):
            raise ConfigurationError(
                f"{self._db.path} holds {stored}-d embeddings, not {wanted}-d ones: open "
                f"it with the embedding model that wrote it (or dimension={stored}), "
                "or use a new file"
            )
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('dimension', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(wanted),),
        )
        self.cache.clear()  # no cached matrix may keep the old width

    def fix_dimension(self, conn: sqlite3.Connection, dimension: int | None) -> None:
        """Vectors written must have the recorded dimension (`record_dimension`); a store
        used without the engine, which records none, takes its first vector's."""
        if dimension is None:
            return
        stored = self.dimension(conn)
        if stored is None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('dimension', ?)", (dimension,))
        elif stored != dimension:
            raise DimensionMismatchError(
                f"embedding has dimension {dimension}, but this store holds {stored}-d "
                "vectors (use the same embedding model, or a new store)"
            )

    @staticmethod
    def forget_dimension_if_empty(conn: sqlite3.Connection) -> None:
        if _empty(conn):
            conn.execute("DELETE FROM meta WHERE key = 'dimension'")

    def query(
        self, conn: sqlite3.Connection, query: Vector, state: FileState
    ) -> tuple[Vector, int] | None:
        """The unit query and the store's dimension (None while it holds no vector). The
        query is finite and flat (the engine checked it); only its size is compared
        with what this file holds. `state`: the caller's `FileMemo.state`."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        dim = self._memo.get(state, "dimension", lambda: self.dimension(conn))
        if dim is None:
            return None
        if vector.size != dim:
            raise DimensionMismatchError(
                f"query vector has dimension {vector.size}, but this store holds {dim}-d "
                "vectors (embed the query with the model used for the memories)"
            )
        return unit(vector), dim

    def queries(
        self, conn: sqlite3.Connection, queries: Matrix, state: FileState
    ) -> tuple[Matrix, int] | None:
        """`query` for the rows of a matrix."""
        dim = self._memo.get(state, "dimension", lambda: self.dimension(conn))
        if dim is None:
            return None
        if queries.shape[1] != dim:
            raise DimensionMismatchError(
                f"query vectors have dimension {queries.shape[1]}, but this store holds "
                f"{dim}-d vectors (embed them with the model used for the memories)"
            )
        return unit_rows(queries), dim

    # -- the cache ---------------------------------------------------------------------

    def sync(self, conn: sqlite3.Connection) -> None:
        """Drop every cached matrix once another connection has written to the file."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:
            self.cache.clear()
            self._data_version = version

    def partition(self, conn: sqlite3.Connection, ns: str, part: str, dim: int) -> VectorIndex:
        """The cached matrix of one tier (or of the archive records), loaded on a miss."""
        key = (ns, part)
        index = self.cache.get(key)
        if index is not None:
            return index
        if part == ARCHIVE_KEY:  # quantised codes (`codes`)
            index = CalibratedIndex.of_codes(dim, code_rows(conn, ns))
        else:
            ids: list[str] = []
            blobs: list[bytes] = []
            flags: list[int] = []
            types: list[int] = []
            cursor = conn.execute(
                f"SELECT {_CACHE_COLUMNS} FROM {_CACHE_FROM} WHERE m.namespace = ? AND m.tier = ?",
                (ns, part),
            )
            for row in cursor:
                ids.append(row["id"])
                blobs.append(row["embedding"])
                flags.append(_row_flags(row))
                types.append(TYPE_CODES[MemoryType(row["memory_type"])])
            matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), dim)
            index = VectorIndex.build(dim, ids, matrix.astype(np.float32), flags, types)
        self.cache.put(key, index)
        return index

    def refresh(self, conn: sqlite3.Connection, ns: str, ids: Sequence[str]) -> None:
        """Bring the cached matrices of `ns` in step with the rows of `ids` (after a write
        of memories or archive records)."""
        loaded = [key for key in self.cache if key[0] == ns]
        if not loaded or not ids:
            return
        self._dirty = True
        indexes = {key[1]: self.cache.get(key) for key in loaded}
        for index in indexes.values():
            if index is not None:
                for memory_id in ids:
                    index.remove(memory_id)
        if any(part != ARCHIVE_KEY for part in indexes):
            for row in conn.execute(
                f"SELECT {_CACHE_COLUMNS} FROM {_CACHE_FROM} "
                f"WHERE m.namespace = ? AND m.id {IN_JSON}",
                (ns, json_list(ids)),
            ):
                target = indexes.get(row["tier"])
                if target is not None:
                    target.add(
                        row["id"],
                        from_blob(row["embedding"]),
                        _row_flags(row),
                        TYPE_CODES[MemoryType(row["memory_type"])],
                    )
        archive = indexes.get(ARCHIVE_KEY)
        if archive is not None:
            if not isinstance(archive, CalibratedIndex):  # never: `partition` builds them
                raise TypeError("the archive partition of the cache is not a CalibratedIndex")
            archive.add_codes(code_rows(conn, ns, ids))

    def holds_live(self, ns: str) -> bool:
        """Whether a live tier's partition of `ns` is cached: else a tier move of its rows
        has nothing to keep in step, and the mover need not read their ids back
        (`refresh_moved`).

        The archive records' partition does not count: a live memory moving between
        tiers is none of them (`refresh` would take the moved ids out of it and read
        their codes back: none). Every search of the scale benchmark loads it, empty,
        and the sweep at 1M then read back 976k moved ids for nothing (`RETURNING`:
        about 2.7 s of an 11.6 s sweep)."""
        live = {t.value for t in LIVE_TIERS}
        return any(key[0] == ns and key[1] in live for key in self.cache)

    def refresh_moved(
        self, conn: sqlite3.Connection, ns: str, ids: Sequence[str], target: Tier
    ) -> None:
        """Keep the cached vectors of `ns` in step after `ids` moved to `target`.

        Up to BULK_MOVE_ROWS: patched row by row (`refresh`). More: the moved rows are
        taken out of the cached partitions that hold them and appended to the target's
        (already unit length: two numpy copies, no SQLite read), so the next search
        finds a warm cache; dropping them made it reload 100k vectors (1.5 s). Moved
        rows no cached partition held are read from the file when there are few, or the
        target is dropped and reloaded by the next search. A move changes no flag, so
        the moved rows' filters stay valid. Marks the cache dirty: a rollback clears it.
        """
        if len(ids) <= BULK_MOVE_ROWS:
            self.refresh(conn, ns, ids)
            return
        live = {t.value for t in LIVE_TIERS}
        keys = [key for key in self.cache if key[0] == ns and key[1] in live]
        if not keys:
            return
        self._dirty = True
        target_key = (ns, target.value)
        destination = self.cache.get(target_key) if target_key in keys else None
        placed: set[str] = set()
        for key in keys:
            if key == target_key:
                continue
            index = self.cache.get(key)
            if index is None:
                continue
            if destination is None:  # nothing to append them to: no copy of the rows
                index.discard(ids)
                continue
            taken = index.take(ids)
            if taken.size:
                destination.extend(taken)
                placed.update(taken.ids)
        if destination is None:
            return
        # Moved rows of a partition that was not cached: neither placed nor already there.
        unplaced = [i for i in ids if i not in placed and i not in destination]
        if not unplaced:
            return
        if len(unplaced) <= BULK_MOVE_ROWS:
            self.refresh(conn, ns, unplaced)
        else:
            self.cache.drop([target_key])

    def forget(self, namespace: str | None = None) -> None:
        """Drop the cached matrices of `namespace` (of every namespace when None)."""
        if namespace is None:
            self.cache.clear()
        else:
            self.cache.drop(key for key in self.cache if key[0] == namespace)

    def cleared(self, namespace: str | None = None) -> None:
        """After `clear`: nothing cached or saved of `namespace` (every one with None)
        may outlive its rows."""
        self.forget(namespace)
        gone = list(self._anns) if namespace is None else [namespace]
        for ns in gone:
            index = self._anns.pop(ns, None)
            if index is not None:
                index.stop_folding()
            self._small.pop(ns, None)
        if namespace is None:
            self._small.clear()
        if self._folder is not None:
            ann.remove_files(self._folder, None if namespace is None else ann.digest_of(namespace))

    def close(self) -> None:
        """Save the approximate indexes that changed since their file (a crash instead
        leaves the older file, which the next search catches up), then drop everything."""
        for index in self._anns.values():
            index.stop_folding()  # after its current step; the buffer is read again
        if self._folder is not None and not self._ann_dirty:
            for ns, index in self._anns.items():
                if index.wants_save_on_close():
                    try:
                        index.save(self._folder, ann.digest_of(ns))
                    except OSError as e:  # a read-only folder: the next open catches up
                        log.warning("tiered-memory: could not save the vector index: %s", e)
        self._anns.clear()
        self._small.clear()
        self.forget()

    # -- the approximate indexes -------------------------------------------------------

    def prune_delete_log(self, conn: sqlite3.Connection) -> int:
        """Drop the delete-log entries no index needs any more (`ann.prune_log`)."""
        if self.ann_min_rows is None:
            return 0
        return ann.prune_log(conn, self._folder, list(self._anns.values()))

    def settle(self, namespace: str | None = None) -> None:
        """Block until the background folds of the loaded indexes (of `namespace`) end:
        a benchmark's steady state, or a graph complete before a copy of the folder."""
        for ns, index in list(self._anns.items()):
            if namespace is None or ns == namespace:
                index.wait_folded()

    def ann(self, conn: sqlite3.Connection, ns: str, dim: int, file: FileState) -> AnnIndex | None:
        """The HNSW index of `ns`, caught up with the file; None while `ns` holds fewer
        than `ann_min_rows` memories (or the index is off or not installed). `file`:
        the caller's `FileMemo.state`."""
        if self.ann_min_rows is None:
            return None
        state = self._memo.get(file, "log", lambda: ann.log_state(conn))
        index = self._anns.get(ns)
        if index is None:
            if self._small.get(ns) == state:
                return None
            # from the kept counts: counting a million rows through an index at open
            # read a 48 MB index for one comparison
            count = tier_rows.rows(conn, ns, [t.value for t in LIVE_TIERS])
            if count < self.ann_min_rows:
                self._small[ns] = state
                return None
            if not ann.available():
                if not self._warned_missing:
                    log.warning(
                        "tiered-memory: namespace %r holds %d memories and is searched "
                        "exactly; pip install 'tiered-memory[ann]' for the HNSW index",
                        ns,
                        count,
                    )
                    self._warned_missing = True
                self._small[ns] = state
                return None
            index = self._saved_or_built(ns, dim, state, count)
            self._anns[ns] = index
            self._small.pop(ns, None)
        try:
            index.catch_up(conn, ns, state)
        except ann.LogPruned:
            index = self._replace_ann(conn, ns, dim, state)
        if conn.in_transaction:
            self._ann_dirty = True
        elif self._folder is not None and index.wants_save():
            try:
                index.save(self._folder, ann.digest_of(ns))
            except OSError as e:
                log.warning("tiered-memory: could not save the vector index: %s", e)
        return index

    def _saved_or_built(
        self, ns: str, dim: int, state: tuple[int, int, int], rows: int | None = None
    ) -> AnnIndex:
        """The newest saved index of `ns`, or an empty one to build (its catch-up reads
        every row; `rows`, when known, for the log)."""
        if self._folder is not None:
            index = AnnIndex.load(self._folder, ann.digest_of(ns), dim, state)
            if index is not None:
                return index
        log.info("tiered-memory: building the vector index of %r (%s rows)", ns, rows or "all")
        return AnnIndex.empty(dim)

    def _replace_ann(
        self, conn: sqlite3.Connection, ns: str, dim: int, state: tuple[int, int, int]
    ) -> AnnIndex:
        """The newest saved index of `ns`, caught up, in place of one the delete log was
        pruned past (`ann.LogPruned`: another process pruned what it had yet to apply);
        a build from the rows (which needs no log) if that one cannot catch up either."""
        log.info("tiered-memory: reloading the vector index of %r (log pruned past it)", ns)
        self._anns.pop(ns).stop_folding()
        index = self._saved_or_built(ns, dim, state)
        try:
            index.catch_up(conn, ns, state)
        except ann.LogPruned:
            index = AnnIndex.empty(dim)
            index.catch_up(conn, ns, state)
        self._anns[ns] = index
        return index

    def _rows(
        self, conn: sqlite3.Connection, ns: str, parts: Sequence[str], state: FileState
    ) -> int:
        """The memories of `ns` in the tiers `parts` (`tier_rows.rows`)."""
        return self._memo.get(
            state, ("rows", ns, tuple(parts)), lambda: tier_rows.rows(conn, ns, parts)
        )

    def _route(
        self,
        conn: sqlite3.Connection,
        ns: str,
        parts: Sequence[str],
        rows: int,
        k: int,
        filters: SearchFilter,
        dim: int,
        state: FileState,
    ) -> tuple[AnnIndex, int] | None:
        """The graph and how many candidates to ask it for, for a search of tiers
        holding `rows` memories; None to scan those tiers instead: exact asked, or
        fewer such rows than `ann_min_rows` (as in a small namespace: a scan of 20k
        cached rows takes about 2 ms and is exact, while the graph would return the
        namespace's rows until enough of these few turned up), or so small a share of
        the graph that it would have to return more than `_ANN_MAX_FETCH` candidates.

        The graph holds every live tier, so about `rows / size` of its candidates are
        in the wanted tiers: asking for k / share of them finds k at the first try
        (the COLD phase of a swept store, 40 % of the rows, asked 4x, 16x, 64x k).
        """
        if filters.exact or self.ann_min_rows is None or rows < self.ann_min_rows:
            return None
        index = self.ann(conn, ns, dim, state)
        if index is None or index.size == 0:
            return None
        share = min(1.0, rows / index.size)
        fetch = int(np.ceil(_ann_fetch(k, parts, filters) / share))
        if fetch > _ANN_MAX_FETCH:
            return None
        return index, fetch

    def _candidates(
        self,
        conn: sqlite3.Connection,
        ns: str,
        keys: npt.NDArray[np.uint64],
        parts: Sequence[str],
        filters: SearchFilter,
    ) -> tuple[list[int], list[str], Matrix]:
        """The (pk, id, unit float32 row) of the candidates `keys` that are still in `ns`
        and pass the tiers and `filters`, read from the file."""
        clauses, params = search_filter_sql(filters)
        where = "".join(f" AND {c}" for c in clauses)
        # `+`: look the candidates up by pk, not through an index of the namespace
        rows = conn.execute(
            f"SELECT m.pk, m.id, v.embedding FROM {_CACHE_FROM} "
            f"WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ? "
            f"AND +m.tier IN (SELECT value FROM json_each(?)){where}",
            (json_ints(keys.tolist()), ns, json_list(parts), *params),
        ).fetchall()
        if not rows:
            return [], [], np.zeros((0, 1), dtype=np.float32)
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)
        return [r[0] for r in rows], [r[1] for r in rows], unit_rows(matrix.astype(np.float32))

    def _ann_best(
        self,
        conn: sqlite3.Connection,
        ns: str,
        index: AnnIndex,
        parts: Sequence[str],
        q: Vector,
        k: int,
        filters: SearchFilter,
        fetch: int,
        state: FileState,
        exact: bool = True,
        walk: GraphWalk | None = None,
    ) -> list[tuple[str, float]] | None:
        """The k best through the index, re-scored exactly (or with the graph's
        cosines, if not `exact`: `GraphCandidates`), starting with `fetch` candidates
        (`_route`); None when too few of the candidates it gives pass the filters (the
        caller scans). The candidates of every tier are kept for the next phase of the
        same search (`GraphCandidates`)."""
        while True:
            last = self._graph_candidates
            if last is None or not last.answers(state, ns, q, filters, fetch, exact=exact):
                walked = walk.result_for(index, q, fetch, state) if walk else None
                if walked is not None:
                    keys, approximate = walked
                else:
                    (keys,), (approximate,) = index.search_scored(q[None, :], fetch)
                walk = None  # one search's: a wider one (below) searches again
                last = GraphCandidates.read(
                    conn, ns, keys, approximate, q, filters, fetch, state, k,
                    exact=exact, reuse=last,
                )  # fmt: skip
                self._graph_candidates = last
            found = last.best(parts, k)
            if found is None and last.unread.size:
                last = self._graph_candidates = last.read_rest(conn)
                found = last.best(parts, k)
            if found is not None:
                return found
            fetch = max(fetch, last.fetch)
            if fetch >= _ANN_MAX_FETCH or fetch >= index.size:
                return None
            fetch = min(wider_fetch(fetch, last.held(parts), k), _ANN_MAX_FETCH)

    # -- searching ---------------------------------------------------------------------

    def best(
        self,
        conn: sqlite3.Connection,
        ns: str,
        parts: Sequence[str],
        query: Vector,
        *,
        k: int,
        filters: SearchFilter,
        exact_scores: bool = True,
        walk: GraphWalk | None = None,
    ) -> list[tuple[str, float]]:
        """The k best (id, cosine) pairs over the partitions `parts` (tiers, or
        ARCHIVE_KEY), best first, among the rows `filters` allow. Empty while the file
        holds no vector. `exact_scores=False`: through the graph, its cosines
        (`GraphCandidates`); a scan's are exact anyway. `walk`: the graph search
        `walk_for` prepared and another thread ran, taken if it still stands for this
        search in the file as it is now."""
        planned = self._plan(conn, ns, parts, query, k, filters)
        if planned is None:
            return []
        state, q, dim, route = planned
        if route is not None:
            found = self._ann_best(
                conn, ns, route[0], parts, q, k, filters, route[1], state, exact_scores, walk
            )
            if found is not None:
                return found
        self.sync(conn)
        best: list[tuple[str, float]] = []
        for part in parts:
            index = self.partition(conn, ns, part, dim)
            if index.size == 0:
                continue
            scores, allowed = index.scores(q, _mask(index, filters))
            if filters.metadata:
                best.extend(_best_matching(conn, ns, part, index, scores, allowed, k, filters))
            else:
                best.extend(index.best(scores, min(k, allowed)))
        best.sort(key=lambda pair: (-pair[1], pair[0]))
        return best[:k]

    def _plan(
        self,
        conn: sqlite3.Connection,
        ns: str,
        parts: Sequence[str],
        query: Vector,
        k: int,
        filters: SearchFilter,
    ) -> tuple[FileState, Vector, int, tuple[AnnIndex, int] | None] | None:
        """The file's state, the unit query, the dimension and the graph route
        (`_route`; None: scan) of a search of `parts`; None when there is nothing to
        search: no vector in the file, no part, or no row in the tiers (the COLD phase
        before any sweep). The archive records' partition is always scanned."""
        state = self._memo.state(conn)
        prepared = self.query(conn, query, state)
        if prepared is None or not parts:
            return None
        q, dim = prepared
        if ARCHIVE_KEY in parts:
            return state, q, dim, None
        rows = self._rows(conn, ns, parts, state)
        if rows == 0:
            return None
        return state, q, dim, self._route(conn, ns, parts, rows, k, filters, dim, state)

    def walk_for(
        self,
        conn: sqlite3.Connection,
        ns: str,
        parts: Sequence[str],
        query: Vector,
        *,
        k: int,
        filters: SearchFilter,
        exact_scores: bool = True,
    ) -> GraphWalk | None:
        """The graph search `best` would start with for these arguments, to run on
        another thread (`GraphWalk.run`), when the graph holds `WALK_OFF_LOOP_ROWS` rows
        or more and the last search's candidates do not answer it already; else None.
        The index is caught up with the file here, on the caller's connection."""
        known = self._anns.get(ns)
        if known is None or known.graph_rows < WALK_OFF_LOOP_ROWS:
            return None  # a small graph, or none yet: `best` searches it on the spot
        planned = self._plan(conn, ns, parts, query, k, filters)
        if planned is None:
            return None
        state, q, _, route = planned
        if route is None:
            return None
        index, fetch = route
        if index.graph_rows < WALK_OFF_LOOP_ROWS:
            return None
        last = self._graph_candidates
        if last is not None and last.answers(state, ns, q, filters, fetch, exact=exact_scores):
            return None
        return GraphWalk(index, q, fetch, state)

    def best_many(
        self,
        conn: sqlite3.Connection,
        ns: str,
        parts: Sequence[str],
        queries: Matrix,
        *,
        k: int,
        filters: SearchFilter,
        recheck_below: float | None = None,
        exact_scores: bool = True,
        exact_from: float | None = None,
    ) -> list[list[tuple[str, float]]]:
        """`best` for each row of `queries` (without metadata filters): one matrix
        product per partition and block of queries instead of one pass per query.
        `recheck_below`: through the graph, the queries whose best candidate is below
        this cosine are searched again with a wider beam (`AnnIndex.search_rechecked`).
        `exact_scores=False`: through the graph, when every row passes, the graph's
        cosines, except for a query whose best may reach `exact_from`
        (`_graph_ranked`); a scan's are exact anyway."""
        best: list[list[tuple[str, float]]] = [[] for _ in range(queries.shape[0])]
        if not best or not parts:
            return best
        state = self._memo.state(conn)
        prepared = self.queries(conn, queries, state)
        if prepared is None:
            return best
        units, dim = prepared
        pending = list(range(units.shape[0]))  # the queries still to scan for
        if ARCHIVE_KEY not in parts:
            rows = self._rows(conn, ns, parts, state)
            if rows == 0:
                return best
            route = self._route(conn, ns, parts, rows, k, filters, dim, state)
            if route is not None:
                pending = self._ann_best_many(
                    conn,
                    ns,
                    route[0],
                    parts,
                    units,
                    k,
                    filters,
                    best,
                    route[1],
                    state,
                    recheck_below,
                    exact_scores,
                    exact_from,
                )
        if not pending:
            return best
        units = units[pending]
        self.sync(conn)
        for part in parts:
            index = self.partition(conn, ns, part, dim)
            if index.size == 0:
                continue
            mask = _mask(index, filters)
            for start in range(0, units.shape[0], _QUERY_BLOCK):
                block, allowed = index.scores_many(units[start : start + _QUERY_BLOCK], mask)
                for j in range(block.shape[1]):
                    column = np.ascontiguousarray(block[:, j])
                    best[pending[start + j]].extend(index.best(column, min(k, allowed)))
        for pairs in best:
            pairs.sort(key=lambda pair: (-pair[1], pair[0]))
            del pairs[k:]
        return best

    def _ann_best_many(
        self,
        conn: sqlite3.Connection,
        ns: str,
        index: AnnIndex,
        parts: Sequence[str],
        units: Matrix,
        k: int,
        filters: SearchFilter,
        best: list[list[tuple[str, float]]],
        fetch: int,
        state: FileState,
        recheck_below: float | None = None,
        exact_scores: bool = True,
        exact_from: float | None = None,
    ) -> list[int]:
        """`_ann_best` for many queries: one batched graph search, one SQL read of their
        candidates. Fills `best`; returns the queries too few candidates passed for,
        each retried alone (`_ann_best`), and those still short left to scan.

        When every row passes (dedup and auto-linking), only the candidates whose
        approximate cosine could still rank them among a query's k best are read and
        re-scored (`shortlist`): about 4 of 11, where reading all their float32 rows
        was a third of the batch search at 1M memories. The k best are those a
        re-score of all would give. Not `exact_scores`: only the k best's ids are
        read (`_graph_ranked`)."""
        if recheck_below is None:
            found, scores = index.search_scored(units, fetch)
        else:
            found, scores = index.search_rechecked(units, fetch, recheck_below)
        answered: list[list[tuple[str, float]] | None]
        if _passes_all(parts, filters):
            answered = (
                self._rank(
                    conn,
                    ns,
                    _shortlists(found, scores, k),
                    parts,
                    filters,
                    units,
                    k,
                    fetch,
                )
                if exact_scores
                else self._graph_ranked(conn, ns, parts, found, scores, k, exact_from)
            )
            # a row gone since the search (never, in one transaction): rank them all
            again = [
                j
                for j, pairs in enumerate(answered)
                if pairs is None or len(pairs) < min(k, found[j].size)
            ]
            if again:
                redone = self._rank(
                    conn, ns, [found[j] for j in again], parts, filters, units[again], k, fetch
                )
                for j, pairs in zip(again, redone, strict=True):
                    answered[j] = pairs
        else:
            answered = self._rank(conn, ns, found, parts, filters, units, k, fetch)
        pending: list[int] = []
        for j, pairs in enumerate(answered):
            if pairs is not None:
                best[j] = pairs
                continue
            alone = self._ann_best(conn, ns, index, parts, units[j], k, filters, fetch * 4, state)
            if alone is None:
                pending.append(j)
            else:
                best[j] = alone
        return pending

    def _graph_ranked(
        self,
        conn: sqlite3.Connection,
        ns: str,
        parts: Sequence[str],
        found: Sequence[npt.NDArray[np.uint64]],
        scores: Sequence[npt.NDArray[np.float32]],
        k: int,
        exact_from: float | None,
    ) -> list[list[tuple[str, float]] | None]:
        """Each query's k best by the graph's cosines (within `ann.FLOAT16_ERROR` of
        the exact ones), with only their ids read: no float32 vector, which at 1M
        memories was most of the batch search's reads (a row's vector and its memory
        are two pages of a 3 GB file; add_many with deduplication into a copy of the
        1M scale store: 1,970 -> 2,550/s). The cost: where two candidates are as near
        as the rounding, it picks which one ranks k-th (design.md).

        None (ranked exactly by the caller) for a query whose graph cosines may reach
        `exact_from`, the cosine a decision hinges on (a duplicate), and for one whose
        k best are not all still there (never, in one transaction)."""
        out: list[list[tuple[str, float]] | None] = [None] * len(found)
        reach = np.inf if exact_from is None else exact_from - ann.FLOAT16_ERROR
        light = [j for j, s in enumerate(scores) if not s.size or float(s[0]) < reach]
        if not light:
            return out
        # the graph's candidates come nearest first (`AnnIndex.search_scored`)
        keys = np.unique(np.concatenate([found[j][:k] for j in light]))
        id_of = self._ids(conn, ns, keys, parts)
        for j in light:
            top = found[j][:k].tolist()
            if all(pk in id_of for pk in top):
                pairs = [(id_of[pk], v) for pk, v in zip(top, scores[j][:k].tolist(), strict=True)]
                pairs.sort(key=lambda pair: (-pair[1], pair[0]))
                out[j] = pairs
        return out

    def _ids(
        self, conn: sqlite3.Connection, ns: str, keys: npt.NDArray[np.uint64], parts: Sequence[str]
    ) -> dict[int, str]:
        """The id of each pk of `keys` still live in `ns` in the tiers `parts`."""
        if not keys.size:
            return {}
        rows = conn.execute(
            "SELECT pk, id FROM memories WHERE pk IN (SELECT value FROM json_each(?)) "
            "AND +namespace = ? AND +tier IN (SELECT value FROM json_each(?))",
            (json_ints(keys.tolist()), ns, json_list(parts)),
        ).fetchall()
        return {int(pk): str(memory_id) for pk, memory_id in rows}

    def _rank(
        self,
        conn: sqlite3.Connection,
        ns: str,
        found: Sequence[npt.NDArray[np.uint64]],
        parts: Sequence[str],
        filters: SearchFilter,
        units: Matrix,
        k: int,
        fetch: int,
    ) -> list[list[tuple[str, float]] | None]:
        """`_rank_many` over the candidates `found` for each query, read in one query."""
        union = np.unique(np.concatenate(found)) if found else np.zeros(0, np.uint64)
        pks, ids, rows = self._candidates(conn, ns, union, parts, filters)
        return _rank_many(found, pks, ids, rows, units, k, fetch)

    def cosines(
        self, conn: sqlite3.Connection, ns: str, query: Vector, ids: Sequence[str]
    ) -> dict[str, float]:
        """Cosine of `query` to each live memory of `ids` that has an embedding: from
        the cached unit rows, or the last graph search's candidates for this query
        (`GraphCandidates.cosines`), or the HNSW index's rows of the memories a search
        read in the file's present state (`RowLocator.current`), without reading and
        decoding the embeddings; the other ids are read from the file.

        A cosine from the index's graph is within `FLOAT16_ERROR` of the exact one
        (measured at most 4e-5): it is one term of a lexical hit's fused score, and a
        recall's ~70 lexical hits not among the graph's candidates cost 1-2 ms to read
        from a 1M-memory file (recall p50 -1.8 ms, interleaved on a 1M store). A
        vector search's own scores stay exact."""
        state = self._memo.state(conn)
        prepared = self.query(conn, query, state)
        if prepared is None:
            return {}
        q, dim = prepared
        self.sync(conn)
        out: dict[str, float] = {}
        for tier in LIVE_TIERS:
            index = self.cache.get((ns, tier.value))
            if index is not None:
                out.update(index.cosines(q, [i for i in ids if i not in out]))
        if self._graph_candidates is not None and len(out) < len(ids):
            known = self._graph_candidates.cosines(state, ns, q)
            out.update((i, known[i]) for i in ids if i not in out and i in known)
        missing = [i for i in ids if i not in out]
        if missing:
            out.update(self._indexed_cosines(conn, ns, q, missing, dim, state))
            missing = [i for i in missing if i not in out]
        if missing:
            rows = self._located_rows(conn, ns, missing)
            found = {r[0] for r in rows}
            rest = [i for i in missing if i not in found]
            if rest:
                rows += conn.execute(
                    f"SELECT m.id, v.embedding FROM {_CACHE_FROM} "
                    f"WHERE m.namespace = ? AND m.id {IN_JSON}",
                    (ns, json_list(rest)),
                ).fetchall()
            if rows:  # one matrix product (a large namespace caches no partition)
                matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
                scores = unit_rows(matrix.reshape(len(rows), -1).astype(np.float32)) @ q
                out.update(zip((r[0] for r in rows), scores.tolist(), strict=True))
        return out

    def _indexed_cosines(
        self,
        conn: sqlite3.Connection,
        ns: str,
        q: Vector,
        ids: Sequence[str],
        dim: int,
        state: FileState,
    ) -> dict[str, float]:
        """Cosines of those of `ids` whose rows a search read in the present `state`,
        from the namespace's HNSW index (`cosines`); none without one."""
        if self.ann_min_rows is None or ns not in self._anns:
            return {}  # a small namespace: its rows are in the cache, or few
        located = self.locator.current(ns, ids, state)
        index = self.ann(conn, ns, dim, state) if located else None
        if index is None:
            return {}
        id_of = {pk: i for i, pk in located.items()}
        keys, rows = index.rows_of(np.fromiter(id_of, dtype=np.uint64, count=len(id_of)))
        return {
            id_of[pk]: score for pk, score in zip(keys.tolist(), (rows @ q).tolist(), strict=True)
        }

    def candidate_rows(
        self, conn: sqlite3.Connection, ns: str, ids: Sequence[str]
    ) -> dict[str, Any]:
        """The whole rows (the embedding's column NULL in a set read for ranking) of
        those of `ids` the last graph search read, when it read them in the state
        `best` just ranked in (`GraphCandidates.rows_of`): a search's hits come from its
        candidates. Called right after `best`, under the same lock: the state `best`
        took stands (asking the file again was a second `PRAGMA data_version` a
        search, ~15 us of a 100k vector search)."""
        last, state = self._graph_candidates, self._memo.last()
        return {} if last is None or state is None else last.rows_of(state, ns, ids)

    def _located_rows(
        self, conn: sqlite3.Connection, ns: str, ids: Sequence[str]
    ) -> list[tuple[str, bytes]]:
        """(id, embedding) of the ids whose pk a search just noted (`RowLocator`), read
        by pk; a row whose pk now holds another memory is left out (read by id)."""
        located = self.locator.pks(ns, ids)
        if not located:
            return []
        rows = conn.execute(
            f"SELECT m.id, v.embedding, m.pk FROM {_CACHE_FROM} "
            "WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ?",
            (json.dumps(sorted(located.values())), ns),
        ).fetchall()
        return [(r[0], r[1]) for r in rows if located.get(r[0]) == r[2]]


def wider_fetch(fetch: int, held: int, k: int) -> int:
    """The candidates to ask the graph for after `fetch` of them held only `held` rows
    of the wanted tiers that pass (fewer than `k`): as many as that yield needs for k,
    with a quarter more, at least half as many again and at most four times as many.

    Why: it was always four times. In a store the sweep had spread (HOT and WARM 36 %
    of the graph at 100k), a recall's active phase asked for 261 candidates for its 84,
    and about one recall in three found too few of them there; its second search asked
    for 1,044 and read them all (14.9 ms where the others took 4-5), where the yield of
    the first (~70 in 261) said ~390 would do."""
    if held <= 0:
        return fetch * 4
    needed = math.ceil(fetch * k / held * _RETRY_MARGIN)
    return min(fetch * 4, max(needed, math.ceil(fetch * 1.5)))


def _ann_fetch(k: int, parts: Sequence[str], filters: SearchFilter) -> int:
    """Candidates a search asks the index for first (`_ann_best`)."""
    if _passes_all(parts, filters):
        return k + _ANN_SPARE
    return k + max(_ANN_EXTRA, k // _ANN_EXTRA_SHARE)


def _shortlists(
    found: Sequence[npt.NDArray[np.uint64]], scores: Sequence[npt.NDArray[np.float32]], k: int
) -> list[npt.NDArray[np.uint64]]:
    """The candidates of each query of a batch that `shortlist` keeps: in a few array
    operations when every query has as many (a batch's usually do), not a partition per
    query (500 of them took about 10 us a query)."""
    sizes = {s.size for s in scores}
    size = sizes.pop() if len(sizes) == 1 else 0
    if size <= k:
        return [f[shortlist(s, k)] for f, s in zip(found, scores, strict=True)]
    matrix = np.stack(scores)
    kth = np.partition(matrix, size - k, axis=1)[:, size - k]
    keep = matrix >= (kth - 2 * ann.FLOAT16_ERROR)[:, None]
    return [f[row] for f, row in zip(found, keep, strict=True)]


def _passes_all(parts: Sequence[str], filters: SearchFilter) -> bool:
    """Whether every live row of a namespace passes (none is left out by a filter)."""
    return (
        {t.value for t in LIVE_TIERS} <= set(parts)
        and filters.include_forgotten
        and filters.include_superseded
        and filters.pinned is None
        and filters.memory_types is None
        and filters.ids is None
        and not filters.metadata
    )


def _rank_many(
    found: Sequence[npt.NDArray[np.uint64]],
    pks: Sequence[int],
    ids: Sequence[str],
    rows: Matrix,
    units: Matrix,
    k: int,
    fetch: int,
) -> list[list[tuple[str, float]] | None]:
    """`_ranked` for each query of a batch over the candidates the graph `found` for
    it, among those that passed (`pks`, `ids`, `rows` from `_candidates`), in a few
    array operations instead of a Python pass per query (add_many's 500 queries): each
    query's k best, best first, ties by id; None for a query with fewer than k passing
    candidates out of a full `fetch` (the caller asks again for more)."""
    n = len(found)
    lengths = np.fromiter((keys.size for keys in found), dtype=np.int64, count=n)
    out: list[list[tuple[str, float]] | None] = [None] * n
    if not pks:
        for j in np.flatnonzero(lengths < fetch).tolist():
            out[j] = []
        return out
    flat = np.concatenate(found).astype(np.uint64, copy=False)
    owner = np.repeat(np.arange(n), lengths)
    passed = np.asarray(pks, dtype=np.uint64)
    by_pk = np.argsort(passed)
    at = np.minimum(np.searchsorted(passed[by_pk], flat), passed.size - 1)
    hit = passed[by_pk][at] == flat
    row, owner = by_pk[at[hit]], owner[hit]
    scores = np.einsum("ij,ij->i", rows[row], units[owner])
    counts = np.bincount(owner, minlength=n)
    # by query, then best score, then id (the rank of each passing id)
    id_rank = np.empty(len(ids), dtype=np.int64)
    id_rank[np.argsort(np.asarray(ids))] = np.arange(len(ids))
    order = np.lexsort((id_rank[row], -scores, owner))
    row, owner, values = row[order], owner[order], scores[order].tolist()
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    ok = (counts >= k) | (lengths < fetch)
    for j in np.flatnonzero(ok).tolist():
        first = int(start[j])
        last = first + min(k, int(counts[j]))
        out[j] = [(ids[r], values[i]) for i, r in enumerate(row[first:last].tolist(), first)]
    return out


def _ranked(ids: Sequence[str], scores: Any, k: int) -> list[tuple[str, float]]:
    """The k best (id, score) pairs, best first, ties by id (as the scan ranks them)."""
    pairs = [(i, float(s)) for i, s in zip(ids, np.asarray(scores).tolist(), strict=True)]
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs[:k]


def _empty(conn: sqlite3.Connection) -> bool:
    return bool(
        conn.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM memories) AND NOT EXISTS (SELECT 1 FROM archives)"
        ).fetchone()[0]
    )


def _mask(index: VectorIndex, filters: SearchFilter) -> Mask | None:
    """The cheap filters, answered from the flags cached beside the vectors."""
    mask: Mask | None = None

    def both(extra: Mask) -> None:
        nonlocal mask
        mask = extra if mask is None else mask & extra

    hidden = (0 if filters.include_forgotten else FORGOTTEN) | (
        0 if filters.include_superseded else SUPERSEDED
    )
    if hidden:
        both(index.without_flags(hidden))
    if filters.pinned is not None:
        both(index.with_flags(PINNED, filters.pinned))
    if filters.memory_types is not None:
        both(index.of_types(TYPE_CODES[t] for t in filters.memory_types))
    if filters.ids is not None:
        both(index.of_ids(filters.ids))
    return mask


def _best_matching(
    conn: sqlite3.Connection,
    ns: str,
    part: str,
    index: VectorIndex,
    scores: Scores,
    allowed: int,
    k: int,
    filters: SearchFilter,
) -> list[tuple[str, float]]:
    """Top k that pass the metadata filters (which only SQL can evaluate).

    The best-scoring rows are checked in growing batches; once k rows of a
    best-first prefix pass, no row outside it can beat them, so this is exact.
    A filter so selective that batches reach a quarter of the partition is
    checked once over the whole partition instead. The archive partition's rows
    are archive records, whose metadata column has the same encoding.
    """
    clauses: list[str] = []
    params: list[Any] = []
    for condition in filters.metadata:
        sql, values = metadata_sql(condition)
        clauses.append(sql)
        params.extend(values)
    conditions = " AND ".join(clauses)
    table = "archives" if part == ARCHIVE_KEY else "memories"
    batch = k * _METADATA_BATCH
    while batch * _METADATA_BATCH <= allowed:
        candidates = index.best(scores, batch)
        ids = json_list(i for i, _ in candidates)
        passing = {
            row[0]
            for row in conn.execute(
                f"SELECT m.id FROM {table} AS m WHERE m.namespace = ? "
                f"AND m.id {IN_JSON} AND {conditions}",
                (ns, ids, *params),
            )
        }
        matched = [pair for pair in candidates if pair[0] in passing]
        if len(matched) >= k:
            return matched[:k]
        batch *= _METADATA_BATCH
    tier: tuple[str, ...] = () if part == ARCHIVE_KEY else (part,)
    everywhere = {
        row[0]
        for row in conn.execute(
            f"SELECT m.id FROM {table} AS m WHERE m.namespace = ?"
            f"{' AND m.tier = ?' if tier else ''} AND {conditions}",
            (ns, *tier, *params),
        )
    }
    usable = index.of_ids(everywhere) & np.isfinite(scores)
    count = int(np.count_nonzero(usable))
    return index.best(np.where(usable, scores, -np.inf).astype(np.float32), min(k, count))
