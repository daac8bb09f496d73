"""Flat retrieval baselines and the line packing every system of the quality benchmarks
shares: whatever ranks the memories, the same packer turns a ranking into a context.

flat vector ranks by cosine, flat BM25 by Okapi BM25 (k1 1.2, b 0.75) on lower-cased
words, flat hybrid by the union of both top-N lists, each min-max normalised and fused
with our default weights (0.6 : 0.3): our relevance without the memory machinery.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from tiered_memory.policy import Policy

_WORD = re.compile(r"\w+")
Vec = npt.NDArray[np.float32]
FLAT_SYSTEMS = ("flat vector", "flat BM25", "flat hybrid")


def line(text: str) -> str:
    """A memory as the core renders it into a prompt (budget.render_line)."""
    return "- " + " ".join(text.split())


def pack_ranked(
    texts: Sequence[str],
    ranked: Sequence[int],
    budget: int,
    count: Callable[[str], int],
    max_items: int | None = None,
) -> list[int]:
    """Whole lines best-first while they fit (a line too long is skipped), like the
    core's packer with a single share; then never over budget once joined. No item cap
    unless one is given: the budget is what binds."""
    chosen: list[int] = []
    used = 0
    for i in ranked:
        if max_items is not None and len(chosen) >= max_items:
            break
        cost = count(line(texts[i]))
        if cost == 0 or used + cost > budget:
            continue
        chosen.append(i)
        used += cost
    while chosen and count("\n".join(line(texts[i]) for i in chosen)) > budget:
        chosen.pop()
    return chosen


class BM25:
    """Okapi BM25 over lower-cased word tokens."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(_WORD.findall(t.lower())) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(self.docs):
            for t, c in d.items():
                self.postings.setdefault(t, []).append((i, c))

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        out = np.zeros(len(self.docs))
        for term in set(_WORD.findall(query.lower())):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i, c in self.postings[term]:
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                out[i] += idf * c * (self.k1 + 1) / (c + norm)
        return out


def min_max(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-12:
        return np.where(values > 0, 1.0, 0.0)
    return (values - lo) / (hi - lo)


def rank_flat(
    texts: Sequence[str],
    vectors: Sequence[Vec],
    queries: Sequence[tuple[str, Vec]],
    candidates: int,
) -> dict[str, list[list[int]]]:
    """For each flat system, each query's ranking of `texts` (indexes, best first).

    The hybrid fuses the union of the vector and BM25 top-`candidates`; the texts
    outside that pool follow in cosine order, so the pool is never an item cap.
    """
    matrix = np.stack(list(vectors)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    bm25 = BM25(texts)
    p = Policy().fusion
    out: dict[str, list[list[int]]] = {name: [] for name in FLAT_SYSTEMS}
    for text, qv in queries:
        cos = matrix @ (qv / np.linalg.norm(qv))
        lex = bm25.scores(text)
        by_cos = np.argsort(-cos, kind="stable")
        by_lex = [int(i) for i in np.argsort(-lex, kind="stable") if lex[i] > 0]
        out["flat vector"].append([int(i) for i in by_cos])
        out["flat BM25"].append(by_lex)
        pool = sorted(set(by_cos[:candidates].tolist()) | set(by_lex[:candidates]))
        idx = np.array(pool)
        lex_pool = lex[idx]
        nv = min_max(cos[idx].astype(np.float64))
        # min-max over the lexical matches; a text without one scores 0
        matched = lex_pool > 0
        nl = np.zeros(len(pool))
        if matched.any():
            nl[matched] = min_max(lex_pool[matched])
        rel = (p.vector * nv + p.keyword * nl) / (p.vector + p.keyword)
        fused = [pool[i] for i in np.argsort(-rel, kind="stable")]
        in_pool = set(pool)
        out["flat hybrid"].append(fused + [int(i) for i in by_cos if int(i) not in in_pool])
    return out
