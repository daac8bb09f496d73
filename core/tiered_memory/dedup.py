"""Deduplication on add: an item nearly identical to a memory (cosine at least
`limits.dedup_similarity`) strengthens that memory instead of becoming a new one.

An item is compared with the stored memories and with the items of its own batch
accepted before it, so a batch holding one fact twice stores it once. The neighbours
found here are the ones auto-linking uses too (`associations.similarity_links`): one
vector search per item serves both.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from .models import LIVE_TIERS
from .ports import MemoryStore, SearchFilter, SupportsBatchVectorSearch, Vector

Neighbours = list[tuple[str, float]]
"""(memory id, cosine) pairs, best first."""


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
    store: MemoryStore, namespace: str, vectors: Sequence[Vector], k: int
) -> list[Neighbours]:
    """Each vector's k nearest stored memories (forgotten and superseded included): in
    one batch where the store can (the embedded one), else one search per vector."""
    filters = SearchFilter(include_forgotten=True, include_superseded=True)
    if isinstance(store, SupportsBatchVectorSearch):
        matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
        return await store.vector_search_many(
            namespace, matrix, tiers=LIVE_TIERS, k=k, filters=filters
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
    out: list[Screened] = []
    accepted: list[str] = []
    # unit rows of the accepted items, so later items of the batch dedup against them
    units = np.empty((len(ids), vectors[0].size if len(ids) else 0), dtype=np.float32)
    for i, (memory_id, vector) in enumerate(zip(ids, vectors, strict=True)):
        near: Neighbours = []
        unit = vector / (float(np.linalg.norm(vector)) or 1.0)
        if k:
            near.extend(pair for pair in stored[i] if pair[0] not in replacing)
            if accepted:
                sims = units[: len(accepted)] @ unit  # cosines
                for j in np.argsort(-sims)[:k]:
                    near.append((accepted[int(j)], float(sims[int(j)])))
            near.sort(key=lambda t: t[1], reverse=True)
        mergeable = memory_id not in replacing
        if mergeable and threshold is not None and near and near[0][1] >= threshold:
            out.append(Screened(duplicate_of=near[0][0], near=near))
            continue
        units[len(accepted)] = unit
        accepted.append(memory_id)
        out.append(Screened(duplicate_of=None, near=near))
    return out
