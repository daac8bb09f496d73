"""`plans.search_plan`: the arguments of search, recall and explain checked into one
SearchPlan, and bad ones refused with a typed error before anything runs."""

from __future__ import annotations

import pytest

from tiered_memory import ValidationError
from tiered_memory.models import MemoryType, Tier
from tiered_memory.plans import search_plan
from tiered_memory.policy import FusionWeights
from tiered_memory.ports import MetadataFilter


def test_arguments_become_the_plan() -> None:
    plan = search_plan(
        FusionWeights(),
        k=7,
        deep=True,
        tiers=["cold", Tier.WARM],
        weights={"keyword": 1},
        memory_types=["factual"],
        metadata={"project": "x"},
        include_forgotten=True,
        ids=["a", "b"],
        fill=3,
    )
    assert (plan.k, plan.deep, plan.include_archived, plan.fill) == (7, True, False, 3)
    assert plan.tiers == frozenset({Tier.COLD, Tier.WARM})
    assert (plan.weights.vector, plan.weights.keyword, plan.weights.graph) == (0.0, 1.0, 0.0)
    assert plan.filters.memory_types == frozenset({MemoryType.FACTUAL})
    assert plan.filters.metadata == (MetadataFilter("project", "eq", "x"),)
    assert plan.filters.ids == frozenset({"a", "b"})
    assert plan.filters.include_forgotten


def test_no_arguments_search_everything_with_the_policys_weights() -> None:
    fusion = FusionWeights()
    plan = search_plan(fusion, k=10)
    assert plan.tiers is None
    assert plan.weights == fusion
    assert (plan.filters.ids, plan.filters.memory_types, plan.filters.metadata) == (None, None, ())
    assert plan.force_ids == frozenset()


@pytest.mark.parametrize(
    "bad",
    [
        {"tiers": ["lukewarm"]},
        {"tiers": "hot"},
        {"memory_types": ["gossip"]},
        {"weights": {"bogus": 1}},
        {"deep": "yes"},
        {"include_forgotten": 1},
        {"ids": [""]},
        {"metadata": 42},
    ],
)
def test_bad_arguments_are_typed_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        search_plan(FusionWeights(), k=10, **bad)  # type: ignore[arg-type]
