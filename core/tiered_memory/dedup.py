"""Deduplication on add: an item nearly identical to a memory (cosine at least
`limits.dedup_similarity`) strengthens that memory instead of becoming a new one.

An item is compared with the stored memories and with the items of its own batch
accepted before it, so a batch holding one fact twice stores it once. The neighbours
found here are the ones auto-linking uses too (`associations.similarity_links`): one
vector search per item serves both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from . import clusters
from .models import LIVE_TIERS
from .ports import MemoryStore, SearchFilter, SupportsBatchVectorSearch, Vector

Neighbours = list[tuple[str, float]]
"""(memory id, cosine) pairs, best first."""

# Items of a batch whose cosines to the items before them are one matrix product in
# `screen`: a (block, batch) float32 matrix, bounded for a bulk import of 100k items.
_BLOCK = 256


@dataclass(frozen=True)
class Screened:
    """One item of a batch after screening."""

    duplicate_of: str | None  # the memory it strengthens instead of being stored
    near: Neighbours  # its nearest memories, stored or earlier in the batch


def threshold(dedup_similarity: float | None, dedup: bool | None) -> float | None:
    """The cosine from which an item is a duplicate, or None when the call does not
    deduplicate (`dedup=False`, or no `dedup_similarity` in the policy)."""
    if dedup_similarity is None or dedup is False:
        return None
    return dedup_similarity


async def nearest_stored(
    store: MemoryStore,
    namespace: str,
    vectors: Sequence[Vector],
    k: int,
    *,
    far: float | None = None,
    duplicate_at: float | None = None,
) -> list[Neighbours]:
    """Each vector's k nearest stored memories (forgotten and superseded included): in
    one batch where the store can (the embedded one), else one search per vector.

    `far`: a cosine below which no memory is a neighbour (the link floor). A batch
    search through an approximate index searches again, more thoroughly, the vectors
    whose best found is below it: that is how a search that missed the vector's
    neighbourhood shows (`SupportsBatchVectorSearch`).

    The batch search may give the index's cosines (within ~1e-3 of the exact ones: a
    link's weight, and which of two equally near memories is linked, need no more),
    except where a duplicate's decision hinges on them: a vector whose best may reach
    `duplicate_at` gets exact ones."""
    filters = SearchFilter(include_forgotten=True, include_superseded=True)
    if isinstance(store, SupportsBatchVectorSearch):
        matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
        return await store.vector_search_many(
            namespace,
            matrix,
            tiers=LIVE_TIERS,
            k=k,
            filters=filters,
            recheck_below=far,
            exact_scores=False,
            exact_from=duplicate_at,
        )
    return [
        [
            (s.memory.id, s.score)
            for s in await store.vector_search(namespace, v, tiers=LIVE_TIERS, k=k, filters=filters)
        ]
        for v in vectors
    ]


def screen(
    ids: Sequence[str],
    vectors: Sequence[Vector],
    stored: Sequence[Neighbours],
    *,
    k: int,
    threshold: float | None,
    replacing: Collection[str] = (),
) -> list[Screened]:
    """Screen a batch in order: each item's `k` nearest memories among `stored` (its
    stored neighbours) and the items accepted before it, and whether it is a duplicate
    (its nearest at `threshold` or above).

    Items in `replacing` replace a stored memory of their id: they are never merged,
    and the stored vectors of those ids (about to be replaced) are no one's neighbours.
    """
    n = len(ids)
    if not k:
        return [Screened(duplicate_of=None, near=[]) for _ in range(n)]
    units = np.stack([np.asarray(v, dtype=np.float32).reshape(-1) for v in vectors])
    norms = np.linalg.norm(units, axis=1)
    units /= np.where(norms > 0, norms, 1.0)[:, None]
    own: Sequence[Neighbours] = (
        [[p for p in pairs if p[0] not in replacing] for pairs in stored] if replacing else stored
    )
    rejected = np.zeros(n, dtype=np.bool_)  # the duplicates so far: no one's neighbours
    out: list[Screened] = []
    # small products (a block by the batch): on one BLAS thread (`one_blas_thread`);
    # one item (`add`) makes a 1 x 1 product, which the limit (~20 us) would outlast
    with clusters.one_blas_thread() if n > 1 else contextlib.nullcontext():
        for start in range(0, n, _BLOCK):
            stop = min(n, start + _BLOCK)
            # this block's items against every item before them, in one product
            sims = clusters.tile(units[start:stop], units[:stop])
            later = np.arange(stop)[None, :] >= np.arange(start, stop)[:, None]
            sims[later | rejected[None, :stop]] = -np.inf
            if threshold is not None:
                _reject(sims, ids, own, rejected, start, threshold, replacing)
            width = min(k, stop)
            top = np.argpartition(-sims, width - 1, axis=1)[:, :width]
            scores = np.take_along_axis(sims, top, axis=1)
            for r, (rows, values) in enumerate(zip(top.tolist(), scores.tolist(), strict=True)):
                i = start + r
                near = own[i] + [
                    (ids[j], v) for j, v in zip(rows, values, strict=True) if v > -np.inf
                ]
                near.sort(key=lambda t: t[1], reverse=True)  # stable: a stored memory wins a tie
                out.append(Screened(duplicate_of=near[0][0] if rejected[i] else None, near=near))
    return out


def _reject(
    sims: npt.NDArray[np.float32],
    ids: Sequence[str],
    own: Sequence[Neighbours],
    rejected: npt.NDArray[np.bool_],
    start: int,
    threshold: float,
    replacing: Collection[str],
) -> None:
    """Mark the duplicates among one block's items, in batch order: an item whose
    nearest stored memory or earlier accepted item is at `threshold` or above. A
    duplicate leaves the candidates (its column) of the items after it, which only
    lowers their best cosine, so only items whose best over every earlier item
    reaches the threshold need a look in order; the others are kept at once."""
    stored_best = np.array([pairs[0][1] if pairs else -np.inf for pairs in own[start:]])
    best = np.maximum(sims.max(axis=1), stored_best[: sims.shape[0]])
    for r in np.flatnonzero(best >= threshold).tolist():
        i = start + r
        if ids[i] in replacing:
            continue
        if max(float(sims[r].max()), float(stored_best[r])) >= threshold:
            rejected[i] = True
            sims[:, i] = -np.inf
