"""Hybrid fusion, per-call weights, noise floor and the final score."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tiered_memory import ValidationError
from tiered_memory import decay as d
from tiered_memory.models import Memory, MemoryType, Tier
from tiered_memory.policy import FusionWeights, Policy, ScoringWeights
from tiered_memory.scoring import (
    final_score,
    formula,
    fuse,
    min_max,
    passes_noise_floor,
    resolve_fusion_weights,
    score_terms,
)

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


def test_min_max_normalises_present_values_and_zeroes_missing() -> None:
    assert min_max([0.2, None, 0.6, 0.4]) == pytest.approx([0.0, 0.0, 1.0, 0.5])
    assert min_max([None, None]) == [0.0, 0.0]
    assert min_max([0.3, 0.3]) == [1.0, 1.0]
    assert min_max([-0.1]) == [0.0]


def test_fuse_weights_default_to_design_values() -> None:
    assert (FusionWeights().vector, FusionWeights().keyword, FusionWeights().graph) == (
        0.6,
        0.3,
        0.0,
    )
    w = FusionWeights(graph=0.1)
    rel, nv, nl, ng = fuse([0.9, 0.1], [None, 5.0], [0.5, None], w)
    # candidate 0: vector 1, lexical 0, graph 1 -> 0.6 + 0.1
    assert rel[0] == pytest.approx(0.7)
    # candidate 1: vector 0, lexical 1, graph 0 -> 0.3
    assert rel[1] == pytest.approx(0.3)
    assert (nv, nl, ng) == ([1.0, 0.0], [0.0, 1.0], [1.0, 0.0])


def test_per_call_override_for_exact_id_lookup() -> None:
    w = resolve_fusion_weights(FusionWeights(), {"keyword": 1, "vector": 0})
    assert (w.vector, w.keyword, w.graph) == (0.0, 1.0, 0.0)
    rel, *_ = fuse([0.99, 0.1], [None, 3.0], [None, None], w)
    assert rel == pytest.approx([0.0, 1.0])


def test_relevance_stays_in_unit_range_for_any_weights() -> None:
    w = resolve_fusion_weights(FusionWeights(), {"vector": 5, "keyword": 5, "graph": 5})
    rel, *_ = fuse([1.0, 0.0], [2.0, 1.0], [1.0, 0.0], w)
    assert max(rel) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [{"bogus": 1.0}, {"vector": -1}, {"vector": 0, "keyword": 0}])
def test_bad_weights_are_typed_errors(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        resolve_fusion_weights(FusionWeights(), bad)


def test_final_score_formula_and_tier_factors() -> None:
    w = ScoringWeights(  # DESIGN.md's first weights and factors
        relevance=0.5,
        retention=0.3,
        frequency=0.2,
        tier_factor={Tier.HOT: 1.0, Tier.WARM: 1.0, Tier.COLD: 0.5, Tier.ARCHIVED: 1 / 1.2},
    )
    score, factor = final_score(0.8, 0.5, 0.25, Tier.WARM, w)
    assert factor == 1.0
    assert score == pytest.approx(0.5 * 0.8 + 0.3 * 0.5 + 0.2 * 0.25)
    cold, f_cold = final_score(0.8, 0.5, 0.25, Tier.COLD, w)
    assert f_cold == 0.5
    assert cold == pytest.approx(score * 0.5)
    archived, f_arch = final_score(0.8, 0.5, 0.25, Tier.ARCHIVED, w)
    assert f_arch == pytest.approx(1 / 1.2)
    assert archived == pytest.approx(score / 1.2)


def test_noise_floor_drops_near_nothing_but_keeps_real_evidence() -> None:
    assert not passes_noise_floor(0.01, None, None, 0.05, 0.2)
    assert passes_noise_floor(0.2, None, None, 0.05, 0.2)
    assert passes_noise_floor(0.01, 1.0, None, 0.05, 0.2)  # the best lexical match
    assert not passes_noise_floor(0.01, 0.05, None, 0.05, 0.2)  # stopword-only match
    assert passes_noise_floor(0.01, None, 0.3, 0.05, 0.2)  # an association
    assert not passes_noise_floor(None, 0.0, 0.0, 0.05, 0.2)


def test_tuned_defaults_let_relevance_decide() -> None:
    # LoCoMo dev split: freshness breaks ties, use acts through the tiers instead
    w = ScoringWeights()
    assert (w.relevance, w.retention, w.frequency) == (0.95, 0.05, 0.0)
    assert w.tier_factor[Tier.COLD] == 1.0  # COLD is held back by when it is searched
    relevant_but_old, _ = final_score(0.9, 0.0, 0.0, Tier.WARM, w)
    fresh_small_talk, _ = final_score(0.6, 1.0, 1.0, Tier.HOT, w)
    assert relevant_but_old > fresh_small_talk
    assert final_score(0.8, 1.0, 0.0, Tier.WARM, w)[0] > final_score(0.8, 0.0, 0.0, Tier.WARM, w)[0]


def _memory(tier: Tier, *, pinned: bool = False) -> Memory:
    created = NOW - timedelta(days=20)
    return Memory(
        id="m",
        namespace="ns",
        content="Invoices are paid on the 15th",
        memory_type=MemoryType.FACTUAL,
        tier=tier,
        use_count=3,
        last_accessed_at=NOW - timedelta(days=6),
        created_at=created,
        updated_at=created,
        tier_changed_at=created,
        pinned=pinned,
    )


@pytest.mark.parametrize("tier", [Tier.HOT, Tier.WARM, Tier.COLD])
def test_score_terms_of_a_live_memory_are_decay_and_final_score(tier: Tier) -> None:
    policy = Policy()
    m = _memory(tier)
    terms = score_terms(m, NOW, policy, relevance=0.7, cosine=0.4, vector=0.9, cues=0.1)
    r, h = d.memory_recency(m, NOW, policy.decay)
    retention = d.retention(m, NOW, policy.decay)
    frequency = d.frequency(3, policy.decay.frequency_saturation)
    score, factor = final_score(0.7, retention, frequency, tier, policy.scoring)
    assert (terms.recency, terms.half_life_days) == (r, h)
    assert (terms.retention, terms.frequency) == (retention, frequency)
    assert (terms.score, terms.tier_factor) == (score, factor)
    # the signals behind the relevance are carried, not used
    assert (terms.relevance, terms.cosine, terms.vector, terms.cues) == (0.7, 0.4, 0.9, 0.1)
    assert (terms.lexical, terms.graph) == (0.0, 0.0)


def test_score_terms_without_a_query_are_the_decay_terms_alone() -> None:
    policy = Policy()
    pinned = score_terms(_memory(Tier.WARM, pinned=True), NOW, policy)
    assert pinned.relevance == 0.0
    assert pinned.retention == 1.0  # pinned: never decays
    w = policy.scoring
    assert pinned.score == pytest.approx(w.retention * 1.0 + w.frequency * pinned.frequency)


def test_an_archived_memory_scores_on_relevance_and_use_only() -> None:
    policy = Policy()
    terms = score_terms(_memory(Tier.ARCHIVED), NOW, policy, relevance=0.5)
    assert (terms.retention, terms.recency, terms.half_life_days) == (0.0, 0.0, 0.0)
    assert terms.frequency == d.frequency(3, policy.decay.frequency_saturation)
    assert terms.tier_factor == policy.scoring.tier_factor[Tier.ARCHIVED]
    assert (terms.score, terms.tier_factor) == final_score(
        0.5, 0.0, terms.frequency, Tier.ARCHIVED, policy.scoring
    )


def test_formula_writes_the_score_out_with_its_numbers() -> None:
    policy = Policy()
    terms = score_terms(_memory(Tier.WARM), NOW, policy, relevance=0.5)
    text = formula(terms, policy.scoring)
    assert text.startswith("score = tier_factor(1.000) * (0.95 * relevance(0.500) + 0.05")
    assert text.endswith(f"= {terms.score:.4f}")
