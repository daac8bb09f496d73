"""LlamaIndex `MetadataFilters` to the core's filters, in one function.

The core ANDs `ports.MetadataFilter`s on metadata keys and restricts searches to
tiers; whatever cannot be expressed that way exactly (OR, NOT, "is empty", text
match, "any of" several values) raises `UnsupportedFilterError` rather than being
dropped or approximated.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilters,
)

from tiered_memory import Tier
from tiered_memory.ports import FilterOp
from tiered_memory.ports import MetadataFilter as CoreFilter

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


@dataclass(frozen=True)
class CoreFilters:
    """The translation: metadata conditions, and the tiers to search or list (None: a
    search's phase rules, a listing's every tier)."""

    metadata: tuple[CoreFilter, ...] = ()
    tiers: frozenset[Tier] | None = None


def to_core_filters(filters: MetadataFilters | None, *, tier_key: str = "tier") -> CoreFilters:
    """Translate `filters`; a condition on `tier_key` selects tiers instead of metadata.

    Nested groups are accepted when every level is AND (or holds a single filter),
    since the core ANDs everything; ALL becomes one `contains` per value, and ANY
    with one value is `contains`.
    """
    if filters is None:
        return CoreFilters()
    if not isinstance(filters, MetadataFilters):
        raise UnsupportedFilterError(
            f"filters must be a MetadataFilters, got {type(filters).__name__}; e.g. "
            "MetadataFilters(filters=[MetadataFilter(key='author', value='ava')])"
        )
    metadata: list[CoreFilter] = []
    tiers: frozenset[Tier] | None = None
    pending: list[MetadataFilters] = [filters]
    while pending:
        group = pending.pop()
        condition = group.condition or FilterCondition.AND
        if condition is not FilterCondition.AND and not (
            condition is FilterCondition.OR and len(group.filters) == 1
        ):
            raise UnsupportedFilterError(
                f"filter condition {condition.value!r} is not supported: the tiered store "
                "ANDs its filters; rewrite the query with AND (e.g. IN for alternatives)"
            )
        for item in group.filters:
            if isinstance(item, MetadataFilters):
                pending.append(item)
                continue
            op, value = item.operator, item.value
            if item.key == tier_key:
                if op not in _TIER_OPS:
                    raise UnsupportedFilterError(
                        f"operator {op.value!r} on {tier_key!r} is not supported; "
                        "use ==, !=, in or nin with tier names"
                    )
                values = value if isinstance(value, list) else [value]
                named = frozenset(Tier.parse(str(v)) for v in values)
                if op in (FilterOperator.NE, FilterOperator.NIN):
                    named = _ALL_TIERS - named
                tiers = named if tiers is None else tiers & named
            elif op is FilterOperator.ALL and isinstance(value, list):
                metadata.extend(CoreFilter(item.key, "contains", v) for v in value)
            elif op is FilterOperator.ANY and isinstance(value, list) and len(value) == 1:
                metadata.append(CoreFilter(item.key, "contains", value[0]))
            elif op in _OPS:
                metadata.append(CoreFilter(item.key, _OPS[op], value))
            else:
                raise UnsupportedFilterError(
                    f"operator {op.value!r} on {item.key!r} has no exact translation to the "
                    "tiered store's filters (supported: ==, !=, >, >=, <, <=, in, nin, "
                    "contains, all, any with one value)"
                )
    return CoreFilters(metadata=tuple(metadata), tiers=tiers)


__all__ = ["CoreFilters", "to_core_filters"]
