"""Groups of near-duplicate memories: what consolidation merges into one summary
memory (fading HOT/WARM) and what archival summarises into one archived summary (COLD
due for the archive, seed 002's "summarise old COLD clusters"). One rule for both, so a
cluster means the same thing wherever it is read.

A group is built greedily in the order given: each memory not yet grouped takes the
ungrouped memories at least `min_similarity` (cosine) from it, nearest first, up to
`max_group` in all. Callers pass windows of bounded size: the similarity matrix is
quadratic in the window.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def near_duplicate_groups(
    ids: Sequence[str],
    vectors: npt.ArrayLike,
    *,
    min_similarity: float,
    max_group: int,
) -> list[list[str]]:
    """Groups of at least two of `ids` (row i of `vectors` is `ids[i]`'s embedding);
    each group starts with the memory it was built around."""
    if len(ids) < 2:
        return []
    matrix = np.array(vectors, dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -1.0)
    close = sims >= min_similarity  # sort only what is near, never whole rows
    used: set[int] = set()
    groups: list[list[str]] = []
    for i in (int(x) for x in np.flatnonzero(close.any(axis=1))):
        if i in used:
            continue
        candidates = [int(j) for j in np.flatnonzero(close[i]) if int(j) not in used]
        near = sorted(candidates, key=lambda j: -float(sims[i, j]))[: max_group - 1]
        if near:
            members = [i, *near]
            used.update(members)
            groups.append([ids[j] for j in members])
    return groups
