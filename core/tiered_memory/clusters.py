"""Groups of near-duplicate memories: what consolidation merges into one summary
memory (fading HOT/WARM) and what archival summarises into one archived summary (COLD
due for the archive, seed 002's "summarise old COLD clusters"). One rule for both, so a
cluster means the same thing wherever it is read.

A group is built greedily in the order given: each memory not yet grouped takes the
ungrouped memories at least `min_similarity` (cosine) from it, nearest first, up to
`max_group` in all. With a `reach`, only memories at most `reach` places apart in that
order are compared (consolidation passes fading memories in creation order: each meets
the `reach` written just before and just after it).

Similarities are computed in tiles of at most `BLOCK` x `BLOCK` and only the pairs at
or above `min_similarity` are kept, so no matrix grows with the number of memories: a
namespace-wide fading x fading matrix would need hundreds of GB at a million memories.
`Grouper` takes the memories a block at a time; with a `reach`, it settles the groups
of each memory once everything within reach of it has arrived and forgets the vectors
that can meet nothing new, so memory stays bounded by the reach and the block size.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

BLOCK = 1024
"""Rows per side of one tile of similarities (4 MB of float32 at 1024)."""

Matrix = npt.NDArray[np.float32]


def tile(rows: Matrix, cols: Matrix) -> Matrix:
    """Cosines of unit `rows` against unit `cols`: the only matrix the grouping makes."""
    out: Matrix = rows @ cols.T
    return out


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """The matrix products inside run on one BLAS thread (where `threadpoolctl` is
    installed; else as the BLAS library is set up).

    Why: the tiles are small (at most `BLOCK` x `BLOCK`; consolidation's are 128 x 384
    at 384 dimensions), and OpenBLAS splits each across every core. On a 2-core
    machine with other work running, a tile took 0.7-15 ms across two threads against
    0.43 ms on one: consolidation's 693 tiles at 1M memories took 3.1 s, 0.3 s on one
    thread, with the same products. The limit is the process's while any holder of it
    is inside (`_OneThread`)."""
    if blas_controller() is None:
        return contextlib.nullcontext()
    return _ONE_THREAD.held()


class _OneThread:
    """One process-wide BLAS limit shared by every holder: the first to enter sets it,
    the last to leave restores what was there before.

    A sweep's grouping and an add_many's products may hold it at once, from two
    threads, and leave in either order; each restoring what it saw on entry left the
    second without its limit when the first left, then BLAS on one thread for good
    when the second restored the first's limit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._limiter: Any = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._limiter = blas_controller().limit(limits=1, user_api="blas")
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    limiter, self._limiter = self._limiter, None
                    # threadpoolctl lets one thread at a time set OpenBLAS's shared
                    # pool (the first to set it, until released); the last holder
                    # may be another thread, so it takes over to restore, then lets go
                    _release_openblas()
                    limiter.restore_original_limits()
                    _release_openblas()


def _release_openblas() -> None:
    """Let any thread set OpenBLAS's threads again (threadpoolctl >= 3.6 ties them to
    the thread that set them last; older versions have no such tie)."""
    openblas = getattr(importlib.import_module("threadpoolctl"), "OpenBLASController", None)
    clear = getattr(openblas, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


_ONE_THREAD = _OneThread()


@functools.cache
def blas_controller() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded when first asked (once a
    process: finding them reads the loaded libraries), or None without threadpoolctl.
    Libraries loaded later (faiss's own: `backends.sqlite.hnsw`) are left alone."""
    try:
        return importlib.import_module("threadpoolctl").ThreadpoolController()
    except Exception:  # not installed, or a platform it does not handle
        return None


def _unit(vectors: npt.ArrayLike) -> Matrix:
    matrix = np.array(vectors, dtype=np.float32, ndmin=2)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return matrix


class Grouper:
    """The greedy grouping of `near_duplicate_groups` over memories fed in order, a block
    at a time. `feed` returns the groups it could settle; `close` the rest."""

    def __init__(self, *, min_similarity: float, max_group: int, reach: int | None = None):
        if reach is not None and reach < 1:
            raise ValueError("reach must be at least 1")
        self.min_similarity, self.max_group, self.reach = min_similarity, max_group, reach
        self._ids: dict[int, str] = {}  # position -> id, for positions not yet settled
        self._base = 0  # position of the first row of `_vectors`
        self._vectors: Matrix | None = None  # rows that may still meet a new one
        self._size = 0  # rows fed so far
        self._next = 0  # the next position the greedy pass visits
        self._near: dict[int, list[tuple[int, float]]] = {}  # close pairs, both ways
        self._used: set[int] = set()

    def feed(self, ids: Sequence[str], vectors: npt.ArrayLike) -> list[list[str]]:
        if not len(ids):
            return []
        new = _unit(vectors)
        if new.shape[0] != len(ids):
            raise ValueError("one vector per id")
        start = self._size
        self._ids.update(zip(range(start, start + len(ids)), ids, strict=True))
        kept = new if self._vectors is None else np.concatenate([self._vectors, new])
        self._size += len(ids)
        with one_blas_thread():
            self._pairs(kept, start)
        if self.reach is None:
            self._vectors = kept
            return []
        groups = self._settle(self._size - self.reach)
        # rows more than `reach` before the next one fed can meet nothing new
        drop = max(0, self._size - self.reach - self._base)
        self._vectors = kept[drop:]
        self._base += drop
        return groups

    def close(self) -> list[list[str]]:
        groups = self._settle(self._size)
        self._vectors, self._base = None, self._size
        return groups

    def _pairs(self, kept: Matrix, start: int) -> None:
        """Record every close pair (i, j), j < i, of the rows from `start` on."""
        reach, t = self.reach, self.min_similarity
        # With a reach, a row meets `reach` earlier rows: tiles of reach/2 rows against
        # reach + reach/2 columns compute 1.5 cosines per one wanted, full-height ones 3.
        step = BLOCK if reach is None else max(1, min(BLOCK, reach // 2))
        for r0 in range(start, self._size, step):
            r1 = min(r0 + step, self._size)
            lo = self._base if reach is None else max(self._base, r0 - reach)
            rows = kept[r0 - self._base : r1 - self._base]
            for c0 in range(lo, r1, BLOCK):
                c1 = min(c0 + BLOCK, r1)
                sims = tile(rows, kept[c0 - self._base : c1 - self._base])
                ri, cj = np.nonzero(sims >= t)
                for a, b in zip(ri.tolist(), cj.tolist(), strict=True):
                    i, j = r0 + a, c0 + b
                    if j >= i or (reach is not None and i - j > reach):
                        continue
                    s = float(sims[a, b])
                    self._near.setdefault(i, []).append((j, s))
                    self._near.setdefault(j, []).append((i, s))

    def _settle(self, upto: int) -> list[list[str]]:
        """Run the greedy pass over positions before `upto` (those whose every
        neighbour within reach has been fed)."""
        groups: list[list[str]] = []
        while self._next < upto:
            i = self._next
            self._next += 1
            near = self._near.pop(i, [])
            if i not in self._used and near:
                candidates = sorted(p for p in near if p[0] not in self._used)
                chosen = sorted(candidates, key=lambda p: -p[1])[: self.max_group - 1]
                if chosen:
                    members = [i, *(j for j, _ in chosen)]
                    self._used.update(members)
                    groups.append([self._ids[j] for j in members])
            self._used.discard(i - (self.reach or self._size) - 1)
        for i in [p for p in self._ids if p < upto - (self.reach or 0) - 1]:
            del self._ids[i]
        return groups


def near_duplicate_groups(
    ids: Sequence[str],
    vectors: npt.ArrayLike,
    *,
    min_similarity: float,
    max_group: int,
    reach: int | None = None,
) -> list[list[str]]:
    """Groups of at least two of `ids` (row i of `vectors` is `ids[i]`'s embedding);
    each group starts with the memory it was built around."""
    if len(ids) < 2:
        return []
    grouper = Grouper(min_similarity=min_similarity, max_group=max_group, reach=reach)
    return grouper.feed(ids, vectors) + grouper.close()
