"""A later memory on the same subject is an update of the earlier one.

"I live in Leeds" and, a year later, "we moved to York last month": a question about
where the user lives matches both about equally, and a flat search ranks them by a coin
toss of wording. Memory that knows time should put the newer statement first, so that a
tight budget injects the current state and a loose one injects both, newest first.

The rule is deliberately narrow: only a memory that is both *much like* a strong hit
(cosine of the two memories at least `update_similarity`) and *written later* by at least
`update_min_gap` is lifted, and only to just above the hit it updates. It never lowers
a score, so nothing the query found on its own merit is pushed out by it; what it
changes is the order between two statements of one subject.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import numpy as np

from .models import Hit

# how far above the hit it updates a newer memory lands: enough to order them, far too
# little to pass any third memory that was ranked between them by more than noise
LIFT = 1e-6


def lift_updates(
    hits: Sequence[Hit],
    ids: Sequence[str],
    vectors: np.ndarray,
    *,
    similarity: float,
    min_gap: timedelta,
) -> int:
    """Raise each newer hit that updates an older, better-scored one to just above it.

    `ids` and `vectors` are the embeddings of (some of) `hits`, one row each, unit or
    not. Works in place on the hits' scores; returns how many were lifted.
    """
    if len(ids) < 2:
        return 0
    rows = vectors.astype(np.float32, copy=False)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit = rows / norms
    sims = unit @ unit.T
    by_id = {h.memory.id: h for h in hits if not h.archived}
    present = [i for i in ids if i in by_id]
    index = {memory_id: n for n, memory_id in enumerate(ids)}
    lifted = 0
    # oldest first, so a chain of updates (A, then B, then C) ends with C on top
    for older_id in sorted(present, key=lambda i: by_id[i].memory.created_at):
        older = by_id[older_id]
        for newer_id in present:
            newer = by_id[newer_id]
            if newer.memory.created_at - older.memory.created_at < min_gap:
                continue
            if sims[index[older_id], index[newer_id]] < similarity:
                continue
            if newer.score <= older.score:
                newer.score = newer.terms.score = older.score + LIFT
                lifted += 1
    return lifted
