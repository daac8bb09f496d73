"""The approximate (HNSW) index of one large namespace's live vectors, kept beside the
SQLite file and caught up with it before each search.

Why one index per namespace, not per tier: the sweep moves hundreds of thousands of
rows between tiers, and moving a row between two HNSW graphs is a removal and an
insertion (about 0.3 ms each at 384-d), while a tier is a column the candidates are
checked against anyway. So the graph holds every live vector of the namespace, keyed by
`memories.pk`, and knows nothing of tiers or flags: a search asks it for more
candidates than it needs, and one SQL query over those candidates applies the tiers and
filters and reads their float32 embeddings for an exact re-score (`VectorTable`). A tier
move, a pin or a forget then costs the index nothing.

Staying consistent with the file, whoever wrote it (this connection, another process, a
transaction rolled back, a crash between a commit and a save), without trusting any
in-memory event: every deletion of a vector is logged by a trigger (`SCHEMA`,
`vector_deletes`), and an index remembers the last log entry it applied (`seq`) and its
largest key (`high`). The catch-up removes the pks logged since `seq`; the largest key
left then still exists in the file (it was not deleted since), and SQLite gives a new
row max(pk)+1, so every row inserted since, including one that took a deleted pk again,
has a pk above it: the catch-up adds the namespace's rows above it. Nothing changes for
a pk except by deleting it, which the log records. Checking whether there is anything
to catch up is three O(1) reads per search.

The log is pruned after a sweep (`prune_log`, from `checkpoint`): the entries every
saved index and every index of this process have applied go, save the last (`seq` is
a rowid: an empty table would hand out 1 again). An index of another process that had
applied fewer then misses entries: its catch-up reads the log's start with the entries
(one statement, so a prune cannot land between them), sees that it is above its `seq`
(`LogPruned`), and the newest saved file, which is never that old, replaces it.

The delta buffer: inserting a row into the HNSW graph costs about 0.4-1 ms (2 cores),
so a catch-up that inserted what was written since the last search put that cost on
every write that searches first (dedup and auto-linking search before each batch:
about 600 adds/s at 100k). So the graph holds the live rows up to its largest key
`top`, and the rows above it (up to `high`) wait in a buffer of unit float32 rows that
every search scans exactly (one matrix product) and merges with the graph's candidates
by score. A catch-up only reads new rows into the buffer (about 10 µs a row) and drops
deleted ones from both. Once the buffer holds `FOLD_ROWS` rows a background thread
folds it into the graph, lowest pks first, a few rows per locked step, so searches
keep being answered while it inserts; `fold` does it at once. Graph keys stay below
buffer keys, so `top` and the buffer's keys always partition the live rows.

The first search of a namespace without a saved graph (after a bulk load) reads every
row into the buffer (about 1.5 s at 100k) and answers from its exact scan, while the
background fold builds the graph (about 40 s at 100k on 2 quiet cores, minutes at 1M)
instead of blocking that search on the whole build; searches meanwhile cost a scan of
what is not folded yet plus a wait of one fold step at most. Building incrementally
this way needs no second code path: the build is a fold of a full buffer.

Persistence: the graph is saved as `<digest>.<seq>.<top>.hnsw` in the folder
`<database>.ann`; the state it holds is in its name, so a file is never paired with the
wrong state, a save is atomic (a temporary file renamed) and a crash leaves the previous
file, which the catch-up brings forward. Opening a namespace loads the newest file
(about 1 s for a million vectors) instead of reading every vector from SQLite. The
buffer is never saved: opening reads the rows above the saved `top` into it, which is
the catch-up itself. Closing stops a fold after its current step and saves the graph
as far as it got.

Storage is float16 (half the bytes of float32). An exact search re-scores its
candidates from the file's float32 embeddings, so recall@10 is unchanged; a search for
ranking (a recall's phases, add_many's links) takes the graph's cosines, within
`FLOAT16_ERROR` of the exact ones (`graph_candidates`); add_many ranks an item exactly
only where its duplicate decision hinges on them (`VectorTable._graph_ranked`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory import clusters
from tiered_memory.ports import Vector

from . import hnsw
from .hnsw import Graph
from .vectors import unit_rows

log = logging.getLogger(__name__)

# A namespace with at least this many live vectors is searched through the HNSW index;
# smaller ones stay exact (a scan of 20k rows takes about 2 ms, an exact answer).
ANN_MIN_ROWS = 20_000
# HNSW parameters, tuned on the scale benchmark's clustered 384-d vectors: recall@10
# against exact cosine >= 0.98 (`benchmarks/scale.py` measures it). The graph's own
# (links, insert beam, the size scanned instead) are in `hnsw`.
EXPANSION_SEARCH = 128
# The beam of a search: the candidates asked for, and at least EXPANSION_SEARCH_MIN.
# Measured on the scale benchmark's 384-d vectors (`benchmarks/scale.py`), top-10 recall
# against exact cosine among the candidates: at 100k, 0.9995 at a beam of 48 and 1.0 at
# 64; at 1M, 0.974 at 48, 0.995 at 64 and 0.9995 at 96 or 128. So 64: a wider beam per
# candidate (6 per candidate up to 128, before) cost about 1.5x the graph time of a
# search for k + 32 candidates and found nothing more at 100k.
EXPANSION_SEARCH_MIN = 64
# A single search's beam also grows with the graph: EXPANSION_SEARCH_MIN up to
# EXPANSION_SEARCH_ROWS rows, then half of it more per doubling (128 at 1M, 192 at 4M).
# Why: the misses at 1M are whole queries, not ranks near 10. On the scale vectors
# (5,000 tight clusters of 200, their centres near-orthogonal) a failed search ends in
# another cluster (best cosine found ~0.2, the true top 10 ~0.7): its beam, filled with
# that cluster's rows, never reaches the query's. Float16 rounding (4e-5) plays no
# part. Of 1,000 queries on two 1M graphs (built apart, like the store's folds), 17 and
# 14 were lost so at 64 (recall@10 0.983, 0.985), 0 and 1 at 128 (0.9999, 0.998), 0 and
# 0 at 160 (0.9999, 0.9994); 100k has no such trap (0.9998 at 64). Of the benchmark's
# 40 queries 0-2 were lost at 64 (recall@10 0.95-1.0 over builds; one lost query costs
# 0.025). A 1M vector search took 0.98 / 1.00 / 1.32 ms p50 at 64 / 128 / 160
# (interleaved, one process), so 128. add_many's batch search (dedup and links) has
# its own beams (BATCH_BEAM, RECHECK_BEAMS).
EXPANSION_SEARCH_ROWS = 250_000
# Below EXPANSION_SEARCH_ROWS the same rule shrinks a single search's beam, down to
# EXPANSION_SEARCH_FLOOR (48 up to ~177k rows). At 100k rows, recall@10 against exact
# cosine at 48 / 64: 0.9994 / 0.9999 for the benchmark's 1,000 queries, 0.9948 / 0.9994
# for 1,000 held-out memories of its clusters (32: 0.996 / 0.983); the graph's time is
# most of a k = 10 vector search there, and 48 took 0.62 / 0.80 ms p50 / p95 against
# 0.66 / 0.86 (interleaved on a busy machine). hnswlib's default is 10; the
# benchmark's hnswlib peer searches at 50.
EXPANSION_SEARCH_FLOOR = 48
# add_many's batch search (dedup and auto-links: `search_rechecked`) runs at BATCH_BEAM,
# then searches again at 256 the items whose best candidate is far (below the
# link floor): a search caught in another cluster (above) finds only far rows. Against
# the exact neighbours (a scan) of the scale benchmark's 2,000 adds, the share of link
# sets equal to the exact ones was, at 100k / 1M: 0.998 / 0.948 at a beam of 64 alone
# (at 1M 5 % of the items were caught: no link to their own cluster), 0.9995 / 0.992 at
# 128 alone, 0.981 / - at 32 then 256, 0.9975 / 0.994 at 48 then 256 (0.2 % / 8.6 % of
# the items searched again), 0.9985 / 0.9965 at 64 then 256. CPU per item (3 rounds,
# busy 2 cores) at 1M: ~660 us at 64, ~870 at 128, ~760 at 48 + 256, ~770 at 64 + 256;
# at 100k ~250 at 64 and ~225 at 48 + 256. So 48, then 256.
# Later the far items widen in steps, 128 and then 256 for those still far: of the 177
# of 2,000 adds at 1M searched again, 165 found their neighbourhood at 128. The same
# link sets as 48 then 256 (0.995 against a beam of 512), the batch search 187 -> 174
# us an item (median of 3 interleaved rounds; 48, 96, 256: 176).
BATCH_BEAM = 48
RECHECK_BEAMS = (128, 256)
# How far a cosine from the graph's float16 rows can be from the exact one, for unit
# vectors: each factor's rounding is at most 2**-11 of it (Cauchy-Schwarz bounds the
# sum by 2 * 2**-11 ~ 1e-3); measured at most 4e-5 on the scale vectors.
FLOAT16_ERROR = 1.5e-3
# Saved again once this share of its rows was added since the last save (and on close):
# the writes of saves stay a small multiple of the final size.
_SAVE_GROWTH = 0.25
_SAVE_MIN_ROWS = 10_000
_READ_BATCH = 20_000  # rows read from SQLite per step of a catch-up
# Scores per matrix product of queries with the buffer (bounds them at 16 MB): a batch
# of 500 queries and a buffer of 2,000 rows is one product; blocks of 64 queries took
# twice as long on 2 busy cores (each product wakes BLAS's threads again).
_SCORES_BLOCK = 1 << 22
# The buffer (module docstring) is folded into the graph in the background once it
# holds FOLD_ROWS rows, FOLD_CHUNK rows per locked step (faiss inserts without the
# GIL). A search waits for one step at most: after each step the folder lets a waiting
# search take the lock first (a lock is not fair: the folder took it again at once and
# searches waited for many steps).
FOLD_ROWS = 10_000
FOLD_CHUNK = 16
# A build (a buffer of FOLD_BUILD_ROWS rows or more: a first search after a bulk load, a
# restart) folds FOLD_BUILD_CHUNK rows a step: faiss inserts a batch on every core only
# above 100 rows (`hnsw_add_vertices`), and each call allocates a visited table of the
# graph's size, so 16-row steps built a 1M graph on one core. A search then waits for
# up to one step of ~256 inserts (tens of ms on 2 cores) while it scans at least as
# many unfolded rows exactly (`FOLD_BUILD_ROWS`: ~5 ms and more); in the steady state
# (10k rows buffered) the steps stay small.
FOLD_BUILD_ROWS = 100_000
FOLD_BUILD_CHUNK = 256
# A graph holding more removed rows than live ones, and at least this many, is built
# again (`AnnIndex._restart`): a few removals cost a search little, a majority of them
# its time and the graph's memory.
REBUILD_REMOVED = 10_000
_HANDOFF_POLL = 0.0002  # seconds between the folder's looks at a waiting search
_SUFFIX = "hnsw"  # a saved graph's file name: <digest>.<seq>.<top>.hnsw
# The graphs of the HNSW library before faiss (usearch): never loaded (the graph is
# built again from the file), deleted with the namespace's next save.
_OLD_SUFFIX = "usearch"

SCHEMA = [
    # One row per deleted vector, in deletion order (`seq`); read by the catch-up.
    """CREATE TABLE IF NOT EXISTS vector_deletes (
        seq INTEGER PRIMARY KEY,
        pk INTEGER NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS memory_vectors_log_delete
        AFTER DELETE ON memory_vectors BEGIN
        INSERT INTO vector_deletes (pk) VALUES (old.pk);
    END""",
]

Keys = npt.NDArray[np.uint64]


class LogPruned(Exception):
    """The delete log no longer holds every entry an index has yet to apply: another
    process pruned it while this one caught up. The index cannot catch up; the newest
    saved one (whose entries `prune_log` keeps) replaces it."""


def available() -> bool:
    """Whether the HNSW library (faiss-cpu, the `ann` extra) is importable."""
    return hnsw.available()


def log_state(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(last delete-log seq, largest pk of `memories`, the pruned horizon): what changed
    shows in one of them. Entries up to the horizon were pruned (`prune_log`)."""
    row = conn.execute(
        "SELECT (SELECT coalesce(max(seq), 0) FROM vector_deletes), "
        "(SELECT coalesce(max(pk), 0) FROM memories), "
        "(SELECT coalesce(min(seq), 1) - 1 FROM vector_deletes)"
    ).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def prune_log(conn: sqlite3.Connection, folder: Path | None, live: list[AnnIndex]) -> int:
    """Delete the delete-log entries that every saved index (the newest of each
    namespace) and every index in `live` (this process's) has applied, but the last
    one; returns how many. Nothing while no index exists: one being built elsewhere
    may need them all. Call it inside a write transaction."""
    applied = [index.seq for index in live]
    newest: dict[str, int] = {}
    for saved in _saved(folder, "*") if folder is not None else []:
        newest[saved.digest] = max(newest.get(saved.digest, 0), saved.seq)
    applied.extend(newest.values())
    if not applied:
        return 0
    last, _, horizon = log_state(conn)
    upto = min(min(applied), last - 1)
    if upto <= horizon:
        return 0
    return int(conn.execute("DELETE FROM vector_deletes WHERE seq <= ?", (upto,)).rowcount)


@dataclass
class _Saved:
    digest: str
    seq: int
    top: int
    path: Path


class AnnIndex:
    """The HNSW graph of one namespace's live vectors up to `top`, the exact buffer of
    those above it, and the file state they mirror.

    Thread safety: the graph and the buffer change under `_lock`, in the caller's
    thread (a catch-up) or the folder's (`fold_step`); a search holds it while it asks
    the graph and takes the buffer, so a row moving from one to the other is seen once.
    """

    def __init__(self, index: Graph, seq: int, top: int, *, saved: bool = False) -> None:
        self._index = index
        self.seq = seq  # the last delete-log entry applied (to graph and buffer)
        self.top = top  # the graph's largest key (pk); 0 when empty
        self.high = top  # the largest key of graph or buffer (rows above it are new)
        self.seen: tuple[int, int, int] = (-1, -1, -1)  # `log_state` at the last catch-up
        self.graph_rows = len(index)
        self.saved_size = self.graph_rows if saved else -1  # graph rows at the last save
        self.changed = False  # the graph differs from the newest file
        dim = index.dimension
        # The buffer: the live rows above `top`, ascending pks, unit float32 rows.
        self._keys: Keys = np.zeros(0, dtype=np.uint64)
        self._rows: npt.NDArray[np.float32] = np.zeros((0, dim), dtype=np.float32)
        self._lock = threading.Lock()
        self._count = threading.Lock()  # guards `_waiting`
        self._waiting = 0  # searches waiting for `_lock` (the folder lets them go first)
        self._stop = threading.Event()
        self._folder: threading.Thread | None = None
        self.rechecks = 0  # queries `search_rechecked` searched again

    @classmethod
    def empty(cls, dimension: int) -> AnnIndex:
        return cls(Graph.empty(dimension), 0, 0)

    @property
    def size(self) -> int:
        """Rows searched: the graph's and the buffer's."""
        return self.graph_rows + int(self._keys.size)

    @property
    def buffered(self) -> int:
        return int(self._keys.size)

    @property
    def dimension(self) -> int:
        return self._index.dimension

    def _exhaustive(self) -> bool:
        """A graph of a few thousand rows is scanned instead (`hnsw.EXHAUSTIVE_ROWS`): as
        fast at that size, and never misses a row. A namespace shrunk below
        `ANN_MIN_ROWS` keeps its graph, and with a tiny threshold (the consistency
        tests) a multithreaded build of a few hundred rows missed a top-5 row in about
        one search of 100."""
        return self._index.exhaustive

    # -- searching --------------------------------------------------------------------

    def search(self, query: Vector, count: int) -> Keys:
        """The pks of about `count` nearest rows, nearest first."""
        return self.search_many(np.asarray(query, dtype=np.float32)[None, :], count)[0]

    def search_many(self, queries: npt.NDArray[np.float32], count: int) -> list[Keys]:
        """For each (unit) query, the pks of about `count` nearest rows, nearest first:
        the graph's candidates and the buffer's exact best, merged by score."""
        return self.search_scored(queries, count)[0]

    def search_scored(
        self, queries: npt.NDArray[np.float32], count: int, *, beam: int = 0
    ) -> tuple[list[Keys], list[npt.NDArray[np.float32]]]:
        """`search_many` with each candidate's cosine: from the graph's float16 rows
        (within `FLOAT16_ERROR` of the exact one), or exact from the buffer's float32
        rows. `beam`: the graph search's beam, if not the default (`_expansion`)."""
        n = queries.shape[0]
        with self._searching():
            if self.graph_rows:
                # one query: a beam for the graph's size (EXPANSION_SEARCH_ROWS)
                size = self.graph_rows if n == 1 else 0
                width = max(count, beam) if beam else _expansion(count, size)
                graph_keys, graph_scores, counts = self._index.search(queries, count, width)
            else:
                graph_keys = np.zeros((n, 0), dtype=np.uint64)
                graph_scores = np.zeros((n, 0), dtype=np.float32)
                counts = np.zeros(n, dtype=np.int64)
            keys, rows = self._keys, self._rows  # replaced, never changed in place
        if n == 1 and not keys.size:
            # one query and nothing buffered (a settled store's every search): its
            # found rows as they are, without the padding masks of a batch (~30 us)
            return [graph_keys[0, : int(counts[0])]], [graph_scores[0, : int(counts[0])]]
        if not keys.size:
            return (
                [graph_keys[i, : int(counts[i])] for i in range(n)],
                [graph_scores[i, : int(counts[i])] for i in range(n)],
            )
        # A buffered row is a candidate only if it beats the graph's worst candidate of
        # a full answer (else `count` rows beat it): a comparison per row instead of a
        # partial sort of every row's score (11 ms for 500 queries of 1,500 rows).
        floor = np.where(counts >= count, graph_scores.min(axis=1, initial=np.inf), -np.inf)
        out_keys: list[Keys] = []
        out_scores: list[npt.NDArray[np.float32]] = []
        step = max(1, _SCORES_BLOCK // int(keys.size))
        for start in range(0, n, step):
            block = queries[start : start + step]
            scores = _cosines(block, rows)  # exact, to every buffered row
            hit_rows, hit_cols = np.nonzero(scores > floor[start : start + len(block), None])
            bounds = np.searchsorted(hit_rows, np.arange(len(block) + 1))
            for r in range(len(block)):
                i = start + r
                cols = hit_cols[bounds[r] : bounds[r + 1]]
                cand_keys = np.concatenate([graph_keys[i, : int(counts[i])], keys[cols]])
                cand_scores = np.concatenate([graph_scores[i, : int(counts[i])], scores[r, cols]])
                order = np.argsort(-cand_scores, kind="stable")[:count]
                out_keys.append(cand_keys[order])
                out_scores.append(cand_scores[order])
        return out_keys, out_scores

    def search_rechecked(
        self, queries: npt.NDArray[np.float32], count: int, below: float
    ) -> tuple[list[Keys], list[npt.NDArray[np.float32]]]:
        """`search_scored` at `BATCH_BEAM`, with the queries whose best candidate's
        cosine is below `below` searched again at each wider beam of `RECHECK_BEAMS`
        while it stays below: an HNSW search that went down into another cluster finds
        only far rows (`EXPANSION_SEARCH_ROWS`), and a far best is how such a miss
        shows. A query with truly no near row pays every search. An exhaustive graph
        (`_exhaustive`) misses nothing and is not searched again."""
        found, scores = self.search_scored(queries, count, beam=BATCH_BEAM)
        if self._exhaustive():
            return found, scores
        for beam in RECHECK_BEAMS:
            far = [j for j, s in enumerate(scores) if not s.size or float(s.max()) < below]
            if not far:
                break
            self.rechecks += len(far)
            again, rescored = self.search_scored(queries[far], count, beam=beam)
            for j, keys, values in zip(far, again, rescored, strict=True):
                found[j], scores[j] = keys, values
        return found, scores

    def rows_of(self, keys: Keys) -> tuple[Keys, npt.NDArray[np.float32]]:
        """Those of `keys` the index holds, with their unit rows: the graph's as float16
        (a cosine to one is within `FLOAT16_ERROR` of the exact one), the buffer's
        exact. Reading a few dozen rows here costs ~0.1 ms; reading them from the file
        at 1M memories cost 1-2 ms, most of it first touches of pages spread over
        its 2 GB of vectors."""
        with self._searching():
            in_graph = keys[self._index.contains(keys)] if keys.size else keys[:0]
            graph_rows = self._index.get(in_graph)
            buffered, rows = self._keys, self._rows  # replaced, never changed in place
        at = np.searchsorted(buffered, keys)
        held = at < buffered.size
        held[held] = buffered[at[held]] == keys[held]
        return np.concatenate([in_graph, keys[held]]), np.concatenate([graph_rows, rows[at[held]]])

    @contextlib.contextmanager
    def _searching(self) -> Iterator[None]:
        """`_lock`, taken ahead of the folder (which waits while `_waiting`)."""
        with self._count:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._count:
                self._waiting -= 1
        try:
            yield
        finally:
            self._lock.release()

    def contents(self) -> tuple[Keys, npt.NDArray[np.float32]]:
        """Every key the index holds (graph, then buffer) with its stored unit row: what
        a check that the index mirrors the file compares (the graph's rows are float16)."""
        with self._searching():
            graph_keys = self._index.keys()
            graph_rows = self._index.get(graph_keys)
            keys, rows = self._keys, self._rows
        return np.concatenate([graph_keys, keys]), np.concatenate([graph_rows, rows])

    # -- catching up with the file ----------------------------------------------------

    def catch_up(self, conn: sqlite3.Connection, ns: str, state: tuple[int, int, int]) -> int:
        """Apply the file's changes since `seq` (module docstring) to the graph and the
        buffer; new rows go to the buffer. Returns the rows added."""
        if state == self.seen:
            return 0
        with self._searching():
            if self.graph_rows == 0 and self.high == 0:  # a build: every row, no log
                added = self._buffer_rows(conn, ns, 0, state[1])
            else:
                self._apply_deletes(conn, state[0])
                if self._index.removed > max(self.graph_rows, REBUILD_REMOVED):
                    self._restart()
                added = self._buffer_rows(conn, ns, self.high, state[1])
            self.seq, self.seen = state[0], state
        if self._keys.size >= FOLD_ROWS:
            self.start_folding()
        return added

    def _restart(self) -> None:
        """Start a build over (an empty graph; every row read into the buffer by the
        catch-up, folded in the background): the graph holds more removed rows than
        live ones (`hnsw.Graph.remove` leaves them in as tombstones), which cost every
        search their visits and the graph their memory."""
        self._index = Graph.empty(self.dimension)
        self.top = self.high = self.graph_rows = 0
        self._keys = np.zeros(0, dtype=np.uint64)
        self._rows = np.zeros((0, self.dimension), dtype=np.float32)
        self.changed = True

    def _apply_deletes(self, conn: sqlite3.Connection, last: int) -> None:
        """Remove the pks logged after `seq` up to `last`, or raise `LogPruned` when the
        log no longer starts at or before `seq`. The log's start is read in the same
        statement as the entries (one snapshot): checked apart, another process could
        prune between the check and the read, and reading only the entries left lost
        the deletions before them, so deleted rows stayed live and were saved so. A
        build (nothing read yet) needs no log and never comes here."""
        horizon, pks = conn.execute(
            "SELECT (SELECT coalesce(min(seq), 1) - 1 FROM vector_deletes), "
            "(SELECT json_group_array(DISTINCT pk) FROM vector_deletes "
            "WHERE seq > ? AND seq <= ?)",
            (self.seq, last),
        ).fetchone()
        if int(horizon) > self.seq:
            raise LogPruned(f"the delete log starts after entry {self.seq}")
        deleted = np.array(json.loads(pks), dtype=np.uint64)
        if not deleted.size:
            return
        in_graph = deleted[deleted <= np.uint64(self.top)]
        if in_graph.size:
            if self._index.remove(in_graph):
                self.graph_rows = len(self._index)
                self.changed = True
            if np.any(in_graph == np.uint64(self.top)):
                # `top` must be a key that still exists (module docstring): the largest left
                graph_keys = self._index.keys()
                self.top = int(graph_keys[-1]) if graph_keys.size else 0
        if self._keys.size:
            keep = ~np.isin(self._keys, deleted)
            if not keep.all():
                self._keys, self._rows = self._keys[keep], self._rows[keep]
        # the same for the high-water mark: the largest key left, of buffer or graph
        self.high = int(self._keys[-1]) if self._keys.size else self.top

    def _buffer_rows(self, conn: sqlite3.Connection, ns: str, above: int, last: int) -> int:
        """Append the namespace's rows with pks above `above` to the buffer (`last`: the
        file's largest pk, which bounds how many there can be)."""
        # `+m.namespace`: a range scan of the rowids above `above`, not of the namespace.
        sql = (
            "FROM memories AS m JOIN memory_vectors AS v ON v.pk = m.pk "
            "WHERE +m.namespace = ? AND m.pk > ?"
        )
        expected = last - above
        if expected <= 0:
            return 0  # no pk above it in the file
        if expected > _READ_BATCH:  # a build: count them, so as not to hold them twice
            expected = int(conn.execute(f"SELECT count(*) {sql}", (ns, above)).fetchone()[0])
        filled = int(self._keys.size)
        keys_out = np.empty(filled + expected, dtype=np.uint64)
        rows_out = np.empty((keys_out.size, self.dimension), dtype=np.float32)
        keys_out[:filled], rows_out[:filled] = self._keys, self._rows
        extra_keys: list[Keys] = []  # rows written between the count and the read
        extra_rows: list[npt.NDArray[np.float32]] = []
        cursor = conn.execute(f"SELECT m.pk, v.embedding {sql} ORDER BY m.pk", (ns, above))
        added = 0
        while rows := cursor.fetchmany(_READ_BATCH):
            keys = np.fromiter((r[0] for r in rows), dtype=np.uint64, count=len(rows))
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
            matrix = matrix.reshape(len(rows), -1)
            if matrix.shape[1] != self.dimension:
                raise ValueError("vector of another dimension")  # never: the file checks
            units = unit_rows(matrix)
            fits = min(len(rows), keys_out.size - filled)
            keys_out[filled : filled + fits], rows_out[filled : filled + fits] = (
                keys[:fits],
                units[:fits],
            )
            filled += fits
            if fits < len(rows):
                extra_keys.append(keys[fits:])
                extra_rows.append(units[fits:])
            added += len(rows)
        if added:
            self._keys = np.concatenate([keys_out[:filled], *extra_keys])
            self._rows = (
                np.concatenate([rows_out[:filled], *extra_rows])
                if extra_rows
                else rows_out[:filled]
            )
            self.high = int(self._keys[-1])
        return added

    # -- folding the buffer into the graph --------------------------------------------

    def fold_step(self, limit: int = 0) -> int:
        """Move the buffer's lowest `limit` rows (by default `FOLD_CHUNK`, or
        `FOLD_BUILD_CHUNK` while a build's buffer is large) into the graph; returns how
        many moved. Searches wait for one step at most."""
        with self._lock:
            buffered = int(self._keys.size)
            chunk = FOLD_BUILD_CHUNK if buffered >= FOLD_BUILD_ROWS else FOLD_CHUNK
            n = min(limit or chunk, buffered)
            if n == 0:
                return 0
            keys, rows = self._keys[:n], self._rows[:n]
            self._index.add(keys, rows)
            self._keys, self._rows = self._keys[n:], self._rows[n:]
            self.top = int(keys[-1])  # ascending, and above every key of the graph
            self.graph_rows = len(self._index)
            self.changed = True
            return n

    def fold(self) -> int:
        """Fold the whole buffer into the graph now (in this thread); returns the rows."""
        self.stop_folding()
        moved = 0
        while step := self.fold_step():
            moved += step
        return moved

    def start_folding(self) -> None:
        """Fold the buffer into the graph in a background thread, until it is empty
        (rows written meanwhile included) or `stop_folding`."""
        if self._folder is not None and self._folder.is_alive():
            return
        self._stop.clear()
        self._folder = threading.Thread(target=self._fold_loop, name="tm-ann-fold", daemon=True)
        self._folder.start()

    def _fold_loop(self) -> None:
        try:
            while not self._stop.is_set() and self.fold_step():
                while self._waiting and not self._stop.is_set():
                    self._stop.wait(_HANDOFF_POLL)
        except Exception:  # never: the next search finds the rows in the buffer still
            log.exception("tiered-memory: folding the vector index failed")

    def stop_folding(self, *, wait: bool = True) -> None:
        """Stop the background fold after its current step (and wait for it)."""
        self._stop.set()
        folder = self._folder
        if wait and folder is not None and folder is not threading.current_thread():
            folder.join()
        self._folder = None

    def wait_folded(self) -> None:
        """Wait for a background fold to end (the buffer emptied, or stopped)."""
        folder = self._folder
        if folder is not None and folder is not threading.current_thread():
            folder.join()

    @property
    def folding(self) -> bool:
        return self._folder is not None and self._folder.is_alive()

    # -- persistence ------------------------------------------------------------------

    def save(self, folder: Path, digest: str) -> None:
        """Write the graph atomically under a name holding its state; drop older files.
        The buffer is not saved: the next open reads the rows above `top` again."""
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{digest}.", suffix=".tmp", dir=folder)
        os.close(fd)
        with self._searching():
            final = folder / f"{digest}.{self.seq}.{self.top}.{_SUFFIX}"
            try:
                self._index.save(tmp)
                os.replace(tmp, final)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self.saved_size = self.graph_rows
            self.changed = False
        stale = [old.path for old in _saved(folder, digest) if old.path != final]
        for path in [*stale, *folder.glob(f"{digest}.*.{_OLD_SUFFIX}")]:
            with contextlib.suppress(OSError):  # another process may hold it (Windows)
                path.unlink()

    def wants_save(self) -> bool:
        """Saved again once the graph grew by a share of its rows since the last save."""
        saved = max(self.saved_size, 0)
        grown = self.graph_rows - saved
        return self.changed and grown >= max(_SAVE_MIN_ROWS, int(saved * _SAVE_GROWTH))

    def wants_save_on_close(self) -> bool:
        """On close: whatever the graph holds that its file does not, or a first file."""
        return self.changed or self.saved_size < 0

    @classmethod
    def load(
        cls, folder: Path, digest: str, dimension: int, state: tuple[int, int, int]
    ) -> AnnIndex | None:
        """The newest saved index of a namespace, or None (none, unreadable, another
        dimension, a state this file never reached: a copy of another history, or one
        older than the pruned log: it could not catch up)."""
        last_seq, _, horizon = state
        for saved in sorted(_saved(folder, digest), key=lambda s: (s.seq, s.top), reverse=True):
            if saved.seq > last_seq or saved.seq < horizon:
                continue
            try:
                graph = Graph.load(saved.path)
            except (RuntimeError, ValueError, OSError, EOFError) as e:
                log.warning("tiered-memory: ignoring unreadable vector index %s: %s", saved.path, e)
                continue
            if graph.dimension != dimension:
                continue
            return cls(graph, saved.seq, saved.top, saved=True)
        return None


def _cosines(queries: npt.NDArray[np.float32], rows: npt.NDArray[np.float32]) -> Any:
    """Unit queries against unit rows. One query: numpy's own single-threaded loop,
    not BLAS: right after a graph search, a threaded BLAS product of one query with
    2,000 rows took 3-12 ms on 2 busy cores (its threads had to be woken) against
    0.03 ms in a tight loop; the loop takes about 0.5 ms. A batch (dedup): BLAS, on
    one thread (`clusters.one_blas_thread`): on a busy 2-core machine 500 queries by
    1,500 rows took 10 ms on one thread and 22 on two, whose second spun on a core
    usearch's search threads and SQLite wanted (add_many with dedup at 100k: about
    0.25 ms of CPU per memory less with this and `dedup.screen` on one thread)."""
    if queries.shape[0] == 1:
        return np.einsum("ij,j->i", rows, queries[0])[None, :]
    with clusters.one_blas_thread():
        return clusters.tile(queries, rows)


def _expansion(count: int, rows: int = 0) -> int:
    """The beam of a graph search for `count` candidates: EXPANSION_SEARCH_MIN at
    EXPANSION_SEARCH_ROWS rows, half of it more per doubling of the graph's `rows` and
    less per halving, down to EXPANSION_SEARCH_FLOOR (0 rows: a batch search, which
    keeps EXPANSION_SEARCH_MIN)."""
    if not rows:
        return max(count, EXPANSION_SEARCH_MIN)
    grown = EXPANSION_SEARCH_MIN * (1 + math.log2(rows / EXPANSION_SEARCH_ROWS) / 2)
    return max(count, EXPANSION_SEARCH_FLOOR, int(grown))


def digest_of(namespace: str) -> str:
    """A file-name-safe name for a namespace's index (namespaces may hold any text)."""
    return hashlib.sha256(namespace.encode()).hexdigest()[:24]


def _saved(folder: Path, digest: str) -> list[_Saved]:
    """The saved indexes of a namespace (of all with "*")."""
    out: list[_Saved] = []
    if not folder.is_dir():
        return out
    for path in folder.glob(f"{digest}.*.*.{_SUFFIX}"):
        parts = path.name.split(".")
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            out.append(_Saved(parts[0], int(parts[1]), int(parts[2]), path))
    return out


def remove_files(folder: Path, digest: str | None = None) -> None:
    """Delete the saved indexes of one namespace (of all with None)."""
    if not folder.is_dir():
        return
    for suffix in (_SUFFIX, _OLD_SUFFIX):
        for path in folder.glob(f"{digest or '*'}.*.{suffix}"):
            with contextlib.suppress(OSError):
                path.unlink()
