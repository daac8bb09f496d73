"""Hybrid relevance and the final score (DESIGN.md section 3), as pure functions.

Relevance fuses three signals that live on different scales (cosine in [-1, 1], BM25
unbounded, graph path strength in [0, 1]); min-max normalising each over the
candidate set puts them on one scale before weighting, as in seed 003.

`score_terms` is the one place a memory's score is computed: the ranking calls it for
every candidate and `explain` for the memory it explains, so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from . import decay
from .errors import ValidationError
from .models import Memory, ScoreTerms, Tier, filled
from .policy import FusionWeights, Policy, ScoringWeights

_WEIGHT_ALIASES = {
    "vector": "vector",
    "keyword": "keyword",
    "lexical": "keyword",
    "graph": "graph",
    "speaker": "speaker",
    "time": "time",
}


def resolve_fusion_weights(
    base: FusionWeights, override: Mapping[str, float] | None
) -> FusionWeights:
    """Per-call weights, e.g. {"keyword": 1, "vector": 0} for exact-id lookups.

    Keys not given keep... nothing: an override names every signal it wants, the rest
    get 0, so {"vector": 1} means pure semantic search.
    """
    if not override:
        return base
    values = {"vector": 0.0, "keyword": 0.0, "graph": 0.0, "speaker": 0.0, "time": 0.0}
    for key, weight in override.items():
        name = _WEIGHT_ALIASES.get(key)
        if name is None:
            raise ValidationError(
                f"unknown fusion weight {key!r}; use 'vector', 'keyword', 'graph',"
                " 'speaker' or 'time'"
            )
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ValidationError(f"fusion weight {key!r} must be a number >= 0")
        values[name] = float(weight)
    try:
        return FusionWeights(**values)
    except ValueError as e:
        raise ValidationError(str(e)) from None


Bounds = tuple[float, float] | None


def bounds(values: Sequence[float | None]) -> Bounds:
    """(lowest, highest) of the present values, what `min_max` normalises them over;
    None when none is present. Two candidate sets with the same bounds for every signal
    give each candidate they share the same normalised terms."""
    present = [v for v in values if v is not None]
    return (min(present), max(present)) if present else None


def min_max(values: Sequence[float | None]) -> list[float]:
    """Normalise present values to [0, 1]; missing values are 0.

    When every present value is equal there is no spread to normalise: a positive
    signal then counts fully (1.0) and a non-positive one not at all.
    """
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values)
    lo, hi = min(present), max(present)
    span = hi - lo
    out: list[float] = []
    for v in values:
        if v is None:
            out.append(0.0)
        elif span <= 1e-12:
            out.append(1.0 if v > 0 else 0.0)
        else:
            out.append((v - lo) / span)
    return out


def fuse(
    vector: Sequence[float | None],
    lexical: Sequence[float | None],
    graph: Sequence[float | None],
    weights: FusionWeights,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Weighted sum of the normalised signals, divided by the weight total so that
    relevance stays in [0, 1] whatever the per-call weights are.

    Returns (relevance, vector_norm, lexical_norm, graph_norm), one entry per candidate.
    """
    nv, nl, ng = min_max(vector), min_max(lexical), min_max(graph)
    total = weights.vector + weights.keyword + weights.graph
    relevance = [
        (weights.vector * v + weights.keyword * lx + weights.graph * g) / total
        for v, lx, g in zip(nv, nl, ng, strict=True)
    ]
    return relevance, nv, nl, ng


def final_score(
    relevance: float, retention: float, frequency: float, tier: Tier, weights: ScoringWeights
) -> tuple[float, float]:
    """score = tier_factor * (w_rel*relevance + w_ret*retention + w_freq*frequency).

    Returns (score, tier_factor).
    """
    factor = weights.tier_factor.get(tier, 1.0)
    base = (
        weights.relevance * relevance
        + weights.retention * retention
        + weights.frequency * frequency
    )
    return factor * base, factor


def score_terms(
    memory: Memory,
    now: datetime,
    policy: Policy,
    *,
    relevance: float = 0.0,
    cosine: float = 0.0,
    vector: float = 0.0,
    lexical: float = 0.0,
    graph: float = 0.0,
    cues: float = 0.0,
) -> ScoreTerms:
    """Every term of `memory`'s final score at `now`, given its relevance to a query
    (0 without one) and the signals behind it, which are only carried along.

    An archived memory (its record's view, tier ARCHIVED) has no retention: only its
    summary is searched, and its use count still counts."""
    dp = policy.decay
    if memory.tier is Tier.ARCHIVED:
        r, h, ret = 0.0, 0.0, 0.0
    else:
        r, h = decay.memory_recency(memory, now, dp)
        ret = decay.retention_from_recency(r, decay.floor_for(memory, dp))
    freq = decay.frequency(memory.use_count, dp.frequency_saturation)
    return _terms(
        (r, h, ret, freq),
        memory.tier,
        policy,
        relevance=relevance,
        signals=(cosine, vector, lexical, graph, cues),
    )


def rescored(
    terms: ScoreTerms,
    tier: Tier,
    policy: Policy,
    *,
    relevance: float,
    cosine: float = 0.0,
    vector: float = 0.0,
    lexical: float = 0.0,
    graph: float = 0.0,
) -> ScoreTerms:
    """`terms` (what `score_terms` gave a memory of `tier` at some `now`) with another
    relevance, as `score_terms` would give them at that `now`: the decay terms and the
    cue bonus (already in `relevance`) depend on the memory and the query alone, so
    only the relevance's terms and the final score change. A ranking that normalises
    over a grown candidate set (the context phase) rescores its earlier hits this way."""
    return _terms(
        (terms.recency, terms.half_life_days, terms.retention, terms.frequency),
        tier,
        policy,
        relevance=relevance,
        signals=(cosine, vector, lexical, graph, terms.cues),
    )


def _terms(
    decay_terms: tuple[float, float, float, float],
    tier: Tier,
    policy: Policy,
    *,
    relevance: float,
    signals: tuple[float, float, float, float, float],
) -> ScoreTerms:
    """The `ScoreTerms` of (recency, half-life, retention, frequency) and a relevance
    (with the signals behind it: cosine, vector, lexical, graph, cues).

    Built without a second validation (`models.filled`): a recall scores ~150
    candidates, and validating each one's terms cost more than computing them."""
    r, h, ret, freq = decay_terms
    cosine, vector, lexical, graph, cues = signals
    score, factor = final_score(relevance, ret, freq, tier, policy.scoring)
    return filled(
        ScoreTerms,
        {
            "cosine": float(cosine),
            "vector": float(vector),
            "lexical": float(lexical),
            "graph": float(graph),
            "cues": float(cues),
            "relevance": float(relevance),
            "retention": float(ret),
            "recency": float(r),
            "half_life_days": float(h),
            "frequency": float(freq),
            "tier_factor": float(factor),
            "score": float(score),
        },
    )


def formula(terms: ScoreTerms, weights: ScoringWeights) -> str:
    """`final_score` written out with its numbers, for `explain`."""
    return (
        f"score = tier_factor({terms.tier_factor:.3f}) * ({weights.relevance} * relevance"
        f"({terms.relevance:.3f}) + {weights.retention} * retention({terms.retention:.3f}) + "
        f"{weights.frequency} * frequency({terms.frequency:.3f})) = {terms.score:.4f}"
    )


def passes_noise_floor(
    cosine: float | None,
    lexical_share: float | None,
    graph: float | None,
    floor: float,
    lexical_floor: float,
) -> bool:
    """A candidate that is near nothing is noise.

    Raw cosine at or above `floor` keeps a candidate; so does an association, or a
    lexical match worth at least `lexical_floor` of the best lexical score in the set
    (`lexical_share`). A BM25 hit on common words alone does not: an OR query matches
    "the" in every memory, and such hits would crowd out relevant COLD and archived ones.
    """
    if graph is not None and graph > 0:
        return True
    if lexical_share is not None and lexical_share >= lexical_floor:
        return True
    return cosine is not None and cosine >= floor
