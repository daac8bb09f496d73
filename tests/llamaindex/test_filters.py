"""LlamaIndex MetadataFilters -> core filters: every operator, every condition, tiers."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llamaindex_tiered_memory import UnsupportedFilterError
from llamaindex_tiered_memory._filters import CoreFilters, to_core_filters
from tiered_memory import Tier, TieredMemoryError, ValidationError
from tiered_memory.filters import AllOf, AnyOf, Not
from tiered_memory.filters import MetadataFilter as Core


def f(key: str, value: Any, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)


def filters(
    *items: Any, condition: FilterCondition | None = FilterCondition.AND
) -> MetadataFilters:
    return MetadataFilters(filters=list(items), condition=condition)


def test_none_is_no_filter() -> None:
    assert to_core_filters(None) == CoreFilters()


@pytest.mark.parametrize(
    ("op", "core_op"),
    [
        (FilterOperator.EQ, "eq"),
        (FilterOperator.NE, "ne"),
        (FilterOperator.GT, "gt"),
        (FilterOperator.GTE, "gte"),
        (FilterOperator.LT, "lt"),
        (FilterOperator.LTE, "lte"),
        (FilterOperator.CONTAINS, "contains"),
    ],
)
def test_scalar_operators(op: FilterOperator, core_op: str) -> None:
    out = to_core_filters(filters(f("year", 2024, op)))
    assert out.metadata == (Core("year", core_op, 2024),)  # type: ignore[arg-type]
    assert out.tiers is None


@pytest.mark.parametrize(
    ("op", "core_op"), [(FilterOperator.IN, "in"), (FilterOperator.NIN, "nin")]
)
def test_list_operators(op: FilterOperator, core_op: str) -> None:
    out = to_core_filters(filters(f("lang", ["en", "fr"], op)))
    assert out.metadata == (Core("lang", core_op, ["en", "fr"]),)  # type: ignore[arg-type]


def test_all_becomes_one_contains_per_value() -> None:
    out = to_core_filters(filters(f("tags", ["a", "b"], FilterOperator.ALL)))
    assert out.metadata == (AllOf((Core("tags", "contains", "a"), Core("tags", "contains", "b"))),)


def test_any_becomes_contains_any_value() -> None:
    out = to_core_filters(filters(f("tags", ["a", "b"], FilterOperator.ANY)))
    assert out.metadata == (AnyOf((Core("tags", "contains", "a"), Core("tags", "contains", "b"))),)


def test_any_with_one_value_is_contains() -> None:
    out = to_core_filters(filters(f("tags", ["a"], FilterOperator.ANY)))
    assert out.metadata == (Core("tags", "contains", "a"),)


@pytest.mark.parametrize(
    ("op", "value"),
    [
        (FilterOperator.TEXT_MATCH, "abc"),
        (FilterOperator.TEXT_MATCH_INSENSITIVE, "abc"),
        (FilterOperator.IS_EMPTY, None),
    ],
)
def test_untranslatable_operators_raise(op: FilterOperator, value: Any) -> None:
    with pytest.raises(UnsupportedFilterError, match=op.value):
        to_core_filters(filters(f("tags", value, op)))


def test_unsupported_is_a_typed_value_error() -> None:
    with pytest.raises(ValueError, match="text_match"):
        to_core_filters(filters(f("t", "x", FilterOperator.TEXT_MATCH)))
    assert issubclass(UnsupportedFilterError, TieredMemoryError)


def test_and_is_the_default_and_none_condition_means_and() -> None:
    out = to_core_filters(filters(f("a", 1), f("b", 2), condition=None))
    assert set(out.metadata) == {Core("a", "eq", 1), Core("b", "eq", 2)}


def test_or_is_any_of_and_not_is_none_of() -> None:
    """LlamaIndex's NOT means none of the filters match (its own simple store)."""
    a, b = Core("a", "eq", 1), Core("b", "eq", 2)
    out = to_core_filters(filters(f("a", 1), f("b", 2), condition=FilterCondition.OR))
    assert out.metadata == (AnyOf((a, b)),)
    out = to_core_filters(filters(f("a", 1), f("b", 2), condition=FilterCondition.NOT))
    assert out.metadata == (Not(AnyOf((a, b))),)
    out = to_core_filters(filters(f("a", 1), condition=FilterCondition.NOT))
    assert out.metadata == (Not(AnyOf((a,))),)


def test_or_of_a_single_filter_is_that_filter() -> None:
    out = to_core_filters(filters(f("a", 1), condition=FilterCondition.OR))
    assert out.metadata == (Core("a", "eq", 1),)


def test_nested_and_groups_flatten() -> None:
    nested = filters(f("a", 1), filters(f("b", 2), filters(f("c", 3, FilterOperator.GT))))
    out = to_core_filters(nested)
    assert set(out.metadata) == {Core("a", "eq", 1), Core("b", "eq", 2), Core("c", "gt", 3)}


def test_nested_groups_keep_their_shape() -> None:
    nested = filters(
        f("a", 1),
        filters(f("b", 2), filters(f("c", 3), f("d", 4)), condition=FilterCondition.OR),
    )
    out = to_core_filters(nested)
    inner = AllOf((Core("c", "eq", 3), Core("d", "eq", 4)))
    assert out.metadata == (Core("a", "eq", 1), AnyOf((Core("b", "eq", 2), inner)))


def test_a_tier_filter_under_or_raises() -> None:
    nested = filters(f("a", 1), f("tier", "hot"), condition=FilterCondition.OR)
    with pytest.raises(UnsupportedFilterError, match="tier"):
        to_core_filters(nested)


def test_tier_eq_and_in_select_tiers_not_metadata() -> None:
    assert to_core_filters(filters(f("tier", "hot"))).tiers == {Tier.HOT}
    out = to_core_filters(filters(f("tier", ["warm", "COLD"], FilterOperator.IN), f("x", 1)))
    assert out.tiers == {Tier.WARM, Tier.COLD}
    assert out.metadata == (Core("x", "eq", 1),)


def test_tier_ne_and_nin_are_complements() -> None:
    assert to_core_filters(filters(f("tier", "archived", FilterOperator.NE))).tiers == {
        Tier.HOT,
        Tier.WARM,
        Tier.COLD,
    }
    out = to_core_filters(filters(f("tier", ["hot", "warm"], FilterOperator.NIN)))
    assert out.tiers == {Tier.COLD, Tier.ARCHIVED}


def test_several_tier_filters_intersect() -> None:
    out = to_core_filters(
        filters(f("tier", ["hot", "warm"], FilterOperator.IN), f("tier", "hot", FilterOperator.NE))
    )
    assert out.tiers == {Tier.WARM}
    disjoint = to_core_filters(filters(f("tier", "hot"), f("tier", "warm")))
    assert disjoint.tiers == frozenset()


def test_tier_key_is_configurable() -> None:
    out = to_core_filters(filters(f("tier", "gold"), f("layer", "cold")), tier_key="layer")
    assert out.tiers == {Tier.COLD}
    assert out.metadata == (Core("tier", "eq", "gold"),)


def test_unknown_tier_name_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="unknown tier"):
        to_core_filters(filters(f("tier", "lukewarm")))


@pytest.mark.parametrize("op", [FilterOperator.GT, FilterOperator.CONTAINS, FilterOperator.ANY])
def test_ordering_operators_on_tier_raise(op: FilterOperator) -> None:
    with pytest.raises(UnsupportedFilterError, match="tier"):
        to_core_filters(filters(f("tier", "hot" if op is not FilterOperator.ANY else ["hot"], op)))
