"""The HNSW graph itself: faiss's `IndexHNSWSQ` over float16 rows, keyed by `memories.pk`.

Why faiss: on the scale benchmark's 100k clustered 384-d rows at the same beam (48)
and graph (16 links, expansion 128) on a 2-core AMD EPYC (AVX2, no AVX-512), one
query took 112 / 151 us p50 / p95 in faiss's HNSW over float16 rows, against 307 /
443 in usearch's (float16, the library before) and 194 / 270 in hnswlib's (float32
only), at recall@10 0.9987 / 0.9987 / 1.0; a batch of 500 queries took 69 ms on 2
threads against 140. faiss also releases the GIL for the whole search, where
usearch took it back after every query (a Python thread spinning beside a 500-query
search slowed it from 227 ms to 1,162 ms), so the event loop and the graph walk
really run side by side (`VectorTable.walk_for`). faiss-cpu is maintained by Meta
and ships wheels for Linux, macOS and Windows; hnswlib ships a source archive only.

What faiss lacks, and how it is made up for:
- Keys: faiss numbers its rows 0, 1, 2, ... in insertion order. Rows are added in
  ascending pk order (`AnnIndex` folds its buffer lowest pks first, above every live
  key of the graph), so the pks by position are a sorted array: a pk's position is a
  binary search (`_position`), no hash map. A removed row's pk may come back
  (`_rename_dead_tail`).
- Removal: an HNSW graph in faiss cannot drop a node. A removed row stays in the graph
  as a path between its neighbours (as usearch and hnswlib also keep theirs) and is
  left out of answers by a bitmap of the live positions (`IDSelectorBitmap`), passed
  only while some row is removed. A graph whose removed rows outnumber its live ones is
  rebuilt (`AnnIndex._restart` starts a build).
- Exactness of a small graph: a graph of at most `EXHAUSTIVE_ROWS` rows is scanned
  (its float16 rows decoded, one product), as fast at that size and never missing a row.
"""

from __future__ import annotations

import functools
import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory import clusters

Keys = npt.NDArray[np.uint64]
Rows = npt.NDArray[np.float32]

# Links per node (faiss's M: 2M at the bottom layer) and the beam while inserting. An
# insert is most of a sustained add's cost at 1M rows (0.56 ms at 128, 0.37 at 64, 0.28
# at 40, into the loaded 1M graph), but a beam of 64 built a graph of the scale
# benchmark's 1M rows whose recall@10 was 0.90 / 0.955 at search beams 64 / 128,
# against 0.9985 at both for 128 (the build 179 against 366 s). 24 or 32 links at 64
# lost queries too (0.98 at 128), at 96 they built 7-15 % faster than this, and a beam
# growing with the graph (64 up to 250k) left the first rows' links too poor for 1M
# (0.98). Nor does a beam of 64 for the rows folded once the graph is big: cheap while
# they are a few percent of it, recall falls with their share (a 1M graph built 128 up
# to 250k rows, then 64: 0.95 near its late rows): design.md, "The insert beam stays 128".
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXHAUSTIVE_ROWS = 4096  # at most this many rows: an exact scan of the graph's rows
_MAGIC = b"tm-hnsw1"  # a saved graph's first bytes, then its keys, live flags and faiss index


def available() -> bool:
    """Whether the HNSW library (faiss-cpu, the `ann` extra) is importable."""
    try:
        _faiss()
    except ImportError:
        return False
    return True


@functools.cache
def _faiss() -> Any:
    """The faiss module, imported on first use (an optional dependency). Typed `Any`:
    the stubs faiss ships leave out much of what its SWIG module has.

    The BLAS controller of `clusters` is made first: faiss loads a BLAS library of its
    own, threaded by OpenMP, whose thread count is each thread's own setting, so the
    process-wide limit of `clusters.one_blas_thread` (held and released by different
    threads) could leave one thread's faiss searches on one core for good. numpy's
    products are the ones that limit is for."""
    clusters.blas_controller()
    return importlib.import_module("faiss")


class Graph:
    """An HNSW graph of unit float16 rows, searched by inner product (the cosine, for
    unit rows and queries), with pks as keys and removals as tombstones.

    Not thread-safe: `AnnIndex` holds its lock around every call. The searches and
    inserts themselves run without the GIL."""

    def __init__(self, index: Any, keys: Keys, live: npt.NDArray[np.bool_]) -> None:
        self._index = index
        self._n = int(keys.size)  # rows in the graph, removed ones included
        # pks and live flags by position, with room to grow (an insert of 16 rows must
        # not copy a million keys)
        self._keys = _grown(keys, max(1024, self._n))
        self._live = _grown(live, self._keys.size)
        self._count = int(live.sum())
        # faiss's filter of the live positions (its bitmap), and search parameters by
        # beam: made when first needed after a change (`_parameters`)
        self._bitmap: npt.NDArray[np.uint8] | None = None
        self._selector: Any = None
        self._searches: dict[int, Any] = {}

    @classmethod
    def empty(cls, dimension: int) -> Graph:
        faiss = _faiss()
        index = faiss.IndexHNSWSQ(
            dimension, faiss.ScalarQuantizer.QT_fp16, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT
        )
        index.hnsw.efConstruction = EXPANSION_ADD
        return cls(index, np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.bool_))

    def __len__(self) -> int:
        """Live rows."""
        return self._count

    @property
    def removed(self) -> int:
        """Rows removed but still in the graph (tombstones)."""
        return self._n - self._count

    @property
    def dimension(self) -> int:
        return int(self._index.d)

    @property
    def exhaustive(self) -> bool:
        """Searched by a scan of its rows, not by walking the graph."""
        return self._n <= EXHAUSTIVE_ROWS

    def keys(self) -> Keys:
        """The live rows' pks, ascending."""
        live: Keys = self._keys[: self._n][self._live[: self._n]]
        return live

    # -- changes -------------------------------------------------------------------------

    def add(self, keys: Keys, rows: Rows) -> None:
        """Insert unit `rows` under `keys`: ascending, and above every live key of the
        graph."""
        if not keys.size:
            return
        if self._n and int(keys[0]) <= int(self._keys[self._n - 1]):
            self._rename_dead_tail(int(keys[0]))
        end = self._n + int(keys.size)
        if end > self._keys.size:
            self._keys = _grown(self._keys[: self._n], end)
            self._live = _grown(self._live[: self._n], self._keys.size)
        self._index.add(np.ascontiguousarray(rows, dtype=np.float32))
        self._keys[self._n : end] = keys
        self._live[self._n : end] = True
        self._n = end
        self._count += int(keys.size)
        self._rows_changed()

    def _rename_dead_tail(self, first: int) -> None:
        """Make room for keys from `first` on, which SQLite may hand out again once the
        rows that held them are deleted (a new row takes max(pk) + 1 of the rows left):
        the removed rows whose keys are `first` or above keep their places in the graph
        under the key before them, so the keys stay in order. A lookup finds the first
        place of a key (`_position`), and a live row always comes before the removed
        ones renamed to its key; removed rows are never looked up for themselves."""
        stored = self._keys[: self._n]
        tail = int(np.searchsorted(stored, first))
        if bool(self._live[tail : self._n].any()):
            raise ValueError("keys must ascend above the graph's live ones")  # never: `AnnIndex`
        stored[tail:] = stored[tail - 1] if tail else 0

    def remove(self, keys: Keys) -> int:
        """Leave the rows of `keys` out of every answer from now on; returns how many of
        them were live here."""
        at, held = self._position(keys)
        at = np.unique(at[held])
        at = at[self._live[at]]
        if at.size:
            self._live[at] = False
            self._count -= int(at.size)
            self._rows_changed()
        return int(at.size)

    # -- lookups -------------------------------------------------------------------------

    def _position(self, keys: Keys) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
        """Each key's position, and whether the graph holds it (live or removed)."""
        stored = self._keys[: self._n]
        at = np.searchsorted(stored, keys)
        held = at < self._n
        held[held] = stored[at[held]] == keys[held]
        return np.where(held, at, 0), held

    def contains(self, keys: Keys) -> npt.NDArray[np.bool_]:
        """Whether each key is a live row of the graph."""
        at, held = self._position(keys)
        live: npt.NDArray[np.bool_] = held & self._live[at]
        return live

    def get(self, keys: Keys) -> Rows:
        """The stored rows of live `keys` (float16, decoded), in their order."""
        at, held = self._position(keys)
        if not bool(np.all(held & self._live[at])):
            raise KeyError("not a live row of the graph")  # never: callers check `contains`
        if not at.size:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.asarray(self._index.reconstruct_batch(at.astype(np.int64)), dtype=np.float32)

    # -- searching -----------------------------------------------------------------------

    def search(
        self, queries: Rows, count: int, beam: int
    ) -> tuple[Keys, Rows, npt.NDArray[np.int64]]:
        """The `count` best live rows of each unit query, at a beam of `beam`: their pks
        and cosines (within float16 rounding), best first, padded past each query's
        found rows (whose number is in the third array)."""
        n = queries.shape[0]
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.exhaustive:
            return self._scan(queries, count)
        scores = np.empty((n, count), dtype=np.float32)
        positions = np.empty((n, count), dtype=np.int64)
        # faiss's `search_c`, not its numpy wrapper, which checks and copies again what
        # is checked here: a single search is ~150 us, the wrapper and a new
        # SearchParametersHNSW a call added ~40 (`_parameters` keeps them)
        swig_ptr = _faiss().swig_ptr
        self._index.search_c(
            n,
            swig_ptr(queries),
            count,
            swig_ptr(scores),
            swig_ptr(positions),
            self._parameters(max(beam, count)),
        )
        if positions[:, -1].min() >= 0:  # every query found `count` rows: no padding
            return self._keys[positions], scores, np.full(n, count, dtype=np.int64)
        found = positions >= 0  # faiss pads with -1 past the rows it found
        keys = np.where(found, self._keys[np.where(found, positions, 0)], 0).astype(np.uint64)
        scores[~found] = -np.inf
        return keys, scores, found.sum(axis=1).astype(np.int64)

    def _parameters(self, beam: int) -> Any:
        """faiss's parameters of a search at `beam`, with the filter of the live
        positions while some row is removed; kept until the rows change."""
        parameters = self._searches.get(beam)
        if parameters is None:
            faiss = _faiss()
            parameters = faiss.SearchParametersHNSW()
            parameters.efSearch = beam
            if self._count < self._n:
                if self._selector is None:
                    # the selector only points at the bitmap: both stay referenced here
                    self._bitmap = np.packbits(self._live[: self._n], bitorder="little")
                    self._selector = faiss.IDSelectorBitmap(
                        self._bitmap.size, faiss.swig_ptr(self._bitmap)
                    )
                parameters.sel = self._selector
            self._searches[beam] = parameters
        return parameters

    def _rows_changed(self) -> None:
        """Forget the filter of the live positions and the parameters that hold it."""
        self._searches.clear()
        self._selector = None
        self._bitmap = None

    def _scan(self, queries: Rows, count: int) -> tuple[Keys, Rows, npt.NDArray[np.int64]]:
        """`search` of a small graph (`exhaustive`): every live row scored exactly."""
        n = queries.shape[0]
        keys = np.zeros((n, count), dtype=np.uint64)
        scores = np.full((n, count), -np.inf, dtype=np.float32)
        counts = np.zeros(n, dtype=np.int64)
        live = np.flatnonzero(self._live[: self._n])
        if not live.size:
            return keys, scores, counts
        rows = np.asarray(self._index.reconstruct_n(0, self._n), dtype=np.float32)[live]
        products = queries @ rows.T
        take = min(count, int(live.size))
        for i in range(n):
            chosen = (
                np.argpartition(-products[i], take - 1)[:take]
                if take < live.size
                else np.arange(live.size)
            )
            order = chosen[np.argsort(-products[i, chosen], kind="stable")]
            keys[i, :take] = self._keys[live[order]]
            scores[i, :take] = products[i, order]
            counts[i] = take
        return keys, scores, counts

    # -- persistence ---------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph with its keys and live flags to `path` (one file)."""
        faiss = _faiss()
        with open(path, "wb") as f:
            f.write(_MAGIC)
            np.save(f, self._keys[: self._n], allow_pickle=False)
            np.save(f, self._live[: self._n], allow_pickle=False)
            faiss.write_index(self._index, faiss.PyCallbackIOWriter(f.write))

    @classmethod
    def load(cls, path: Path) -> Graph:
        """The graph `save` wrote; ValueError for a file it did not write."""
        faiss = _faiss()
        with open(path, "rb") as f:
            if f.read(len(_MAGIC)) != _MAGIC:
                raise ValueError("not a saved graph")
            keys = np.load(f, allow_pickle=False)
            live = np.load(f, allow_pickle=False)
            index = faiss.read_index(faiss.PyCallbackIOReader(f.read))
        if keys.dtype != np.uint64 or live.dtype != np.bool_ or keys.size != index.ntotal:
            raise ValueError("a saved graph's parts disagree")
        return cls(index, keys, live)


def _grown(values: npt.NDArray[Any], capacity: int) -> npt.NDArray[Any]:
    """`values` at the front of an array of at least `capacity` (doubling) places."""
    size = max(capacity, 2 * int(values.size), 1)
    out = np.zeros(size, dtype=values.dtype)
    out[: values.size] = values
    return out
