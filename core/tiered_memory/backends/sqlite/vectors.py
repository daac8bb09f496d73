"""In-memory float32 matrices that make the SQLite store's vector search fast.

SQLite holds the embeddings (the truth); these caches hold, per (namespace, tier) and
per namespace's archive records, unit-length copies in one contiguous matrix, so a
search is a single matrix-vector product plus `argpartition`. Rows are appended into
spare capacity and removed by moving the last row into the gap, so keeping a cache in
step with a write costs O(rows written), not O(rows cached).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from tiered_memory.models import MemoryType
from tiered_memory.ports import Matrix, Vector

FORGOTTEN = 1
SUPERSEDED = 2
PINNED = 4
TYPE_CODES: dict[MemoryType, int] = {t: i for i, t in enumerate(MemoryType)}

Mask = npt.NDArray[np.bool_]
Scores = npt.NDArray[np.float32]
CacheKey = tuple[str, str]  # (namespace, tier value or 'archived')


def unit_rows(matrix: Matrix) -> Matrix:
    """Rows scaled to length 1 (zero rows stay zero), so a dot product is a cosine."""
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    out: Matrix = (matrix / norms[:, None]).astype(np.float32, copy=False)
    return out


def unit(vector: Vector) -> Vector:
    norm = float(np.linalg.norm(vector))
    out: Vector = (vector / norm if norm > 0 else vector).astype(np.float32, copy=False)
    return out


def flags_of(do_not_inject: bool, superseded: bool, pinned: bool) -> int:
    return (
        (FORGOTTEN if do_not_inject else 0)
        | (SUPERSEDED if superseded else 0)
        | (PINNED if pinned else 0)
    )


class VectorIndex:
    """Unit rows of one partition, with the per-row facts the cheap filters need.

    The ids are a numpy array of objects, not a list: numpy arrays are not tracked by
    the garbage collector, while each of its full passes walked every pointer of a
    list (a million cached ids: ~10-30 ms more a pass, in every process holding them).
    """

    def __init__(self, dimension: int, capacity: int = 64) -> None:
        self.dimension = dimension
        self._ids: npt.NDArray[np.object_] = np.empty(max(capacity, 1), dtype=object)
        self._n = 0  # rows held: the first `_n` of every array
        self._pos: dict[str, int] = {}
        self._vectors: Matrix = np.zeros((max(capacity, 1), dimension), dtype=np.float32)
        self._flags = np.zeros(max(capacity, 1), dtype=np.uint8)
        self._types = np.zeros(max(capacity, 1), dtype=np.uint8)

    @classmethod
    def build(
        cls,
        dimension: int,
        ids: Sequence[str],
        matrix: Matrix,
        flags: Sequence[int],
        types: Sequence[int],
    ) -> VectorIndex:
        """One bulk load (a cache miss), with headroom for the appends that follow."""
        n = len(ids)
        index = cls(dimension, capacity=n + max(64, n // 4))
        if n:
            index._vectors[:n] = unit_rows(matrix)
            index._flags[:n] = np.asarray(flags, dtype=np.uint8)
            index._types[:n] = np.asarray(types, dtype=np.uint8)
            index._ids[:n] = list(ids)
        index._n = n
        index._pos = {memory_id: i for i, memory_id in enumerate(ids)}
        return index

    @property
    def size(self) -> int:
        return self._n

    @property
    def ids(self) -> list[str]:
        """The ids of the rows, in row order (a copy)."""
        out: list[str] = self._ids[: self._n].tolist()
        return out

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._pos

    def add(self, memory_id: str, vector: Vector, flags: int = 0, type_code: int = 0) -> None:
        self.remove(memory_id)
        i = self._n
        if i == self._vectors.shape[0]:
            self._grow()
        self._vectors[i] = unit(vector)
        self._flags[i] = flags
        self._types[i] = type_code
        self._ids[i] = memory_id
        self._n = i + 1
        self._pos[memory_id] = i

    def remove(self, memory_id: str) -> None:
        i = self._pos.pop(memory_id, None)
        if i is None:
            return
        last = self._n - 1
        if i != last:  # move the last row into the gap
            moved = self._ids[last]
            self._vectors[i] = self._vectors[last]
            self._flags[i] = self._flags[last]
            self._types[i] = self._types[last]
            self._ids[i] = moved
            self._pos[moved] = i
        self._ids[last] = None
        self._n = last

    def take(self, ids: Iterable[str]) -> VectorIndex:
        """Remove the rows of `ids` held here and return them as a new index.

        For bulk tier moves: the rows are already unit length, so moving them costs
        two numpy copies, not a SQLite read and a normalisation each. The rows left
        keep their order (a compaction, unlike `remove`'s swap with the last row).
        """
        picked = self._rows_of(ids)
        if picked is None:
            return VectorIndex(self.dimension, capacity=1)
        m = int(picked.size)
        taken = VectorIndex(self.dimension, capacity=m)
        taken._vectors[:m] = self._vectors[picked]
        taken._flags[:m] = self._flags[picked]
        taken._types[:m] = self._types[picked]
        taken._ids[:m] = self._ids[picked]
        taken._n = m
        taken._pos = dict(zip(taken._ids[:m].tolist(), range(m), strict=True))
        self._compact(picked)
        return taken

    def discard(self, ids: Iterable[str]) -> int:
        """Remove the rows of `ids` held here, keeping the order of the rest, and say
        how many went: `take` for a bulk move whose target is not cached.

        Why: `take` copies the rows it removes into a new index, which a move to an
        uncached tier throws away. At 1M memories with the HOT tier cached, the sweep
        moved 976k rows out of it (1.5 GB of float32 copied, then dropped): about
        5.7 s of a 13.8 s sweep."""
        picked = self._rows_of(ids)
        if picked is None:
            return 0
        self._compact(picked)
        return int(picked.size)

    def _rows_of(self, ids: Iterable[str]) -> npt.NDArray[np.intp] | None:
        """The sorted rows of the `ids` held here (each once), or None for none."""
        pos = self._pos
        found = [pos[i] for i in ids if i in pos]
        if not found:
            return None
        rows: npt.NDArray[np.intp] = np.unique(np.asarray(found, dtype=np.intp))
        return rows

    def _compact(self, picked: npt.NDArray[np.intp]) -> None:
        """Drop the rows `picked` (sorted, once each); the others keep their order."""
        n = self.size
        keep: Mask = np.ones(n, dtype=np.bool_)
        keep[picked] = False
        left = n - int(picked.size)
        self._vectors[:left] = self._vectors[:n][keep]
        self._flags[:left] = self._flags[:n][keep]
        self._types[:left] = self._types[:n][keep]
        self._ids[:left] = self._ids[:n][keep]
        self._ids[left:n] = None
        self._n = left
        self._pos = dict(zip(self._ids[:left].tolist(), range(left), strict=True))

    def extend(self, other: VectorIndex) -> None:
        """Append every row of `other` (unit rows, as `take` returns them)."""
        incoming: list[str] = other._ids[: other.size].tolist()
        for memory_id in self._pos.keys() & set(incoming):
            self.remove(memory_id)
        m = other.size
        while self.size + m > self._vectors.shape[0]:
            self._grow()
        start = self.size
        self._vectors[start : start + m] = other._vectors[:m]
        self._flags[start : start + m] = other._flags[:m]
        self._types[start : start + m] = other._types[:m]
        self._ids[start : start + m] = other._ids[:m]
        self._n = start + m
        self._pos.update(zip(incoming, range(start, start + m), strict=True))

    def _grow(self) -> None:
        capacity = self._vectors.shape[0] * 2
        vectors = np.zeros((capacity, self.dimension), dtype=np.float32)
        vectors[: self.size] = self._vectors[: self.size]
        flags = np.zeros(capacity, dtype=np.uint8)
        flags[: self.size] = self._flags[: self.size]
        types = np.zeros(capacity, dtype=np.uint8)
        types[: self.size] = self._types[: self.size]
        ids: npt.NDArray[np.object_] = np.empty(capacity, dtype=object)
        ids[: self.size] = self._ids[: self.size]
        self._vectors, self._flags, self._types, self._ids = vectors, flags, types, ids

    # -- filters -------------------------------------------------------------------------

    def without_flags(self, flags: int) -> Mask:
        mask: Mask = (self._flags[: self.size] & flags) == 0
        return mask

    def with_flags(self, flags: int, present: bool) -> Mask:
        has: Mask = (self._flags[: self.size] & flags) != 0
        return has if present else ~has

    def of_types(self, codes: Iterable[int]) -> Mask:
        mask: Mask = np.isin(self._types[: self.size], np.fromiter(codes, dtype=np.uint8))
        return mask

    def of_ids(self, ids: Iterable[str]) -> Mask:
        mask: Mask = np.zeros(self.size, dtype=np.bool_)
        rows = [self._pos[i] for i in ids if i in self._pos]
        if rows:
            mask[rows] = True
        return mask

    # -- search --------------------------------------------------------------------------

    def scores(self, query: Vector, mask: Mask | None = None) -> tuple[Scores, int]:
        """Cosine of every row to a unit `query` (-inf where `mask` is False), and how
        many rows the mask allows."""
        n = self.size
        scores: Scores = self._vectors[:n] @ query
        if mask is None:
            return scores, n
        allowed = int(np.count_nonzero(mask))
        if allowed < n:  # in place: the product is a fresh array, and most rows pass
            scores[~mask] = -np.inf
        return scores, allowed

    def scores_many(self, queries: Matrix, mask: Mask | None = None) -> tuple[Scores, int]:
        """`scores` for many unit queries at once: one (rows, queries) matrix product."""
        n = self.size
        scores: Scores = self._vectors[:n] @ queries.T
        if mask is None:
            return scores, n
        allowed = int(np.count_nonzero(mask))
        if allowed < n:
            scores[~mask] = -np.inf
        return scores, allowed

    def cosines(self, query: Vector, ids: Iterable[str]) -> dict[str, float]:
        """Cosine of a unit `query` to the rows of `ids` held here (others are skipped)."""
        found = [(i, self._pos[i]) for i in ids if i in self._pos]
        if not found:
            return {}
        rows = np.fromiter((r for _, r in found), dtype=np.intp, count=len(found))
        scores = self._vectors[rows] @ query
        return {i: float(s) for (i, _), s in zip(found, scores.tolist(), strict=True)}

    def best(self, scores: Scores, k: int) -> list[tuple[str, float]]:
        """The k best (id, score) pairs of `scores`, best first (k <= allowed rows)."""
        n = scores.shape[0]
        k = min(k, n)
        if k <= 0:
            return []
        rows = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        rows = rows[np.argsort(-scores[rows], kind="stable")]
        ids = self._ids
        return [(ids[r], float(scores[r])) for r in rows.tolist()]

    def top_k(self, query: Vector, k: int, mask: Mask | None = None) -> list[tuple[str, float]]:
        """The k best (id, cosine) pairs, best first; `query` must be unit length."""
        if self.size == 0 or k <= 0:
            return []
        scores, allowed = self.scores(query, mask)
        return self.best(scores, min(k, allowed))


class VectorCache:
    """Indexes by key, least recently used dropped first once `max_rows` is exceeded."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._indexes: OrderedDict[CacheKey, VectorIndex] = OrderedDict()

    def get(self, key: CacheKey) -> VectorIndex | None:
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
        return index

    def put(self, key: CacheKey, index: VectorIndex) -> None:
        self._indexes[key] = index
        self._indexes.move_to_end(key)
        total = sum(i.size for i in self._indexes.values())
        while total > self.max_rows and len(self._indexes) > 1:
            _, dropped = self._indexes.popitem(last=False)
            total -= dropped.size

    def __iter__(self) -> Iterator[CacheKey]:
        return iter(list(self._indexes))

    def drop(self, keys: Iterable[CacheKey]) -> None:
        for key in list(keys):
            self._indexes.pop(key, None)

    def clear(self) -> None:
        self._indexes.clear()
