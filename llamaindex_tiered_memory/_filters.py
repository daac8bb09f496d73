"""LlamaIndex `MetadataFilters` to the core's filter trees, in one function.

AND, OR and NOT groups (nested) become `AllOf`, `AnyOf` and `Not(AnyOf)` (LlamaIndex's
NOT means "none of these match"); operators map one to one, with ANY / ALL on a list
field as contains-any / contains-all. A condition on `tier_key` selects tiers instead
of metadata, which only an AND path from the top can do. IS_EMPTY and the TEXT_MATCH
operators have no exact translation and raise `UnsupportedFilterError` rather than
being dropped or approximated.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from tiered_memory import Tier
from tiered_memory.filters import AllOf, AnyOf, Condition, FilterOp, Not, leaf

from ._errors import UnsupportedFilterError

_OPS: dict[FilterOperator, FilterOp] = {
    FilterOperator.EQ: "eq",
    FilterOperator.NE: "ne",
    FilterOperator.GT: "gt",
    FilterOperator.GTE: "gte",
    FilterOperator.LT: "lt",
    FilterOperator.LTE: "lte",
    FilterOperator.IN: "in",
    FilterOperator.NIN: "nin",
    FilterOperator.CONTAINS: "contains",
}
_TIER_OPS = (FilterOperator.EQ, FilterOperator.IN, FilterOperator.NE, FilterOperator.NIN)
_ALL_TIERS = frozenset(Tier)
_MAX_DEPTH = 32


@dataclass(frozen=True)
class CoreFilters:
    """The translation: metadata conditions (ANDed), and the tiers to search or list
    (None: a search's phase rules, a listing's every tier)."""

    metadata: tuple[Condition, ...] = ()
    tiers: frozenset[Tier] | None = None


def to_core_filters(filters: MetadataFilters | None, *, tier_key: str = "tier") -> CoreFilters:
    """Translate `filters`; a condition on `tier_key` on an AND path selects tiers."""
    if filters is None:
        return CoreFilters()
    if not isinstance(filters, MetadataFilters):
        raise UnsupportedFilterError(
            f"filters must be a MetadataFilters, got {type(filters).__name__}; e.g. "
            "MetadataFilters(filters=[MetadataFilter(key='author', value='ava')])"
        )
    translator = _Translator(tier_key)
    metadata = translator.group(filters, depth=0, top=True)
    return CoreFilters(metadata=metadata, tiers=translator.tiers)


class _Translator:
    def __init__(self, tier_key: str) -> None:
        self.tier_key = tier_key
        self.tiers: frozenset[Tier] | None = None

    def group(self, group: MetadataFilters, *, depth: int, top: bool) -> tuple[Condition, ...]:
        if depth > _MAX_DEPTH:
            raise UnsupportedFilterError(f"filters nest deeper than {_MAX_DEPTH} levels")
        condition = group.condition or FilterCondition.AND
        and_path = top and condition is FilterCondition.AND
        parts: list[Condition] = []
        for item in group.filters:
            if isinstance(item, MetadataFilters):
                parts.extend(self.group(item, depth=depth + 1, top=and_path))
            elif item.key == self.tier_key:
                if not and_path:
                    raise UnsupportedFilterError(
                        f"a filter on {self.tier_key!r} selects tiers, which only works "
                        "ANDed with the rest (not under OR or NOT)"
                    )
                self._tier(item)
            else:
                parts.append(self._leaf(item))
        if condition is FilterCondition.AND:
            return tuple(parts) if top else ((AllOf(tuple(parts)),) if parts else ())
        if not parts:
            raise UnsupportedFilterError(f"an empty {condition.value!r} group of filters")
        if condition is FilterCondition.OR:
            return (parts[0],) if len(parts) == 1 else (AnyOf(tuple(parts)),)
        if condition is FilterCondition.NOT:  # LlamaIndex: none of them matches
            return (Not(AnyOf(tuple(parts))),)
        raise UnsupportedFilterError(f"filter condition {condition!r} is not supported")

    def _tier(self, item: MetadataFilter) -> None:
        op, value = item.operator, item.value
        if op not in _TIER_OPS:
            raise UnsupportedFilterError(
                f"operator {op.value!r} on {self.tier_key!r} is not supported; "
                "use ==, !=, in or nin with tier names"
            )
        values = value if isinstance(value, list) else [value]
        named = frozenset(Tier.parse(str(v)) for v in values)
        if op in (FilterOperator.NE, FilterOperator.NIN):
            named = _ALL_TIERS - named
        self.tiers = named if self.tiers is None else self.tiers & named

    def _leaf(self, item: MetadataFilter) -> Condition:
        op, value, key = item.operator, item.value, item.key
        if op in (FilterOperator.ANY, FilterOperator.ALL):
            if not isinstance(value, list) or not value:
                raise UnsupportedFilterError(
                    f"operator {op.value!r} on {key!r} needs a non-empty list of values"
                )
            members = tuple(leaf(key, "contains", v) for v in value)
            if len(members) == 1:
                return members[0]
            return AnyOf(members) if op is FilterOperator.ANY else AllOf(members)
        if op in _OPS:
            return leaf(key, _OPS[op], value)
        raise UnsupportedFilterError(
            f"operator {op.value!r} on {key!r} has no exact translation to the tiered "
            "store's filters (supported: ==, !=, >, >=, <, <=, in, nin, contains, any, all; "
            "AND, OR, NOT)"
        )


__all__ = ["CoreFilters", "to_core_filters"]
