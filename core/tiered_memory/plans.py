"""The search a caller asked for, checked: `search`, `recall` and `explain` turn their
arguments into one `SearchPlan` here (every filter, tier and weight validated) before
the retriever runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import validation
from .filters import FilterSpec
from .models import MemoryType, Tier
from .policy import FusionWeights
from .ports import SearchFilter
from .retrieval import SearchPlan
from .scoring import resolve_fusion_weights


def search_plan(
    fusion: FusionWeights,
    *,
    k: int,
    deep: bool = False,
    include_archived: bool = False,
    tiers: Sequence[Tier | str] | None = None,
    weights: Mapping[str, float] | None = None,
    memory_types: Sequence[MemoryType | str] | None = None,
    metadata: FilterSpec | None = None,
    include_forgotten: bool = False,
    force_ids: frozenset[str] = frozenset(),
    ids: Sequence[str] | None = None,
    fill: int | None = None,
    exact_scores: bool = False,
) -> SearchPlan:
    """The plan for these arguments; `fusion` is the policy's weights, which `weights`
    overrides for this call (`scoring.resolve_fusion_weights`)."""
    meta = validation.check_filters(metadata)
    named = validation.check_list(memory_types, "memory_types") if memory_types is not None else []
    types = frozenset(MemoryType.parse(t) for t in named) if named else None
    if tiers is not None:
        tiers = validation.check_list(tiers, "tiers")
    filters = SearchFilter(
        include_forgotten=validation.check_flag(include_forgotten, "include_forgotten"),
        memory_types=types,
        metadata=meta,
        ids=frozenset(validation.check_ids(ids)) if ids is not None else None,
    )
    return SearchPlan(
        k=k,
        deep=validation.check_flag(deep, "deep"),
        include_archived=validation.check_flag(include_archived, "include_archived"),
        tiers=frozenset(Tier.parse(t) for t in tiers) if tiers is not None else None,
        weights=resolve_fusion_weights(fusion, validation.check_weights(weights)),
        filters=filters,
        force_ids=force_ids,
        fill=fill,
        exact_scores=exact_scores,
    )
