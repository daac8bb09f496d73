"""One metadata filter language for every face and every store.

A filter is a tree: `MetadataFilter` leaves (one condition on one top-level metadata
key) under `AllOf`, `AnyOf` and `Not`. Every face translates its framework's syntax
into this tree in one small function, and every store evaluates the tree in its own
query (SQL in SQLite, a `Filter` in Weaviate), so a page or a top k is filled from
matching memories only.

`parse_filter` reads the Mongo-style dicts that langchain-chroma and LangGraph use:

    {"topic": "work"}                          equality
    {"year": {"$gte": 2025, "$lt": 2027}}      several operators on one key, ANDed
    {"$or": [{"topic": "work"}, {"pinned": True}]}
    {"$not": {"topic": {"$in": ["spam", "ads"]}}}
    {"year": {"$not": {"$gt": 2025}}}          a negated operator on one key

Operators: $eq $ne $gt $gte $lt $lte $in $nin $exists $contains, and $and $or $not.
Anything else raises `UnsupportedFilterError` naming the operator and the key.

Semantics (each store implements exactly these; see its module):
- eq/ne/in/nin compare JSON values by type (1 == 1.0, never "1" or True); a missing
  key satisfies ne and nin, and nothing else, as in MongoDB;
- gt..lte compare numbers with numbers and strings with strings;
- contains: a list at the key holds the value, or a string there holds the substring;
- exists True / False: the key is present / absent;
- Not(c) matches exactly what c does not (a memory without the key included).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .errors import UnsupportedFilterError

FilterOp = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "exists"]

MAX_DEPTH = 32  # nesting of $and/$or/$not: deeper is a mistake or an attack on the parser


@dataclass(frozen=True)
class MetadataFilter:
    """One condition on a top-level metadata key (a leaf of a filter tree)."""

    key: str
    op: FilterOp
    value: Any = None


@dataclass(frozen=True)
class AllOf:
    """Every condition holds."""

    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one condition holds."""

    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class Not:
    """The condition does not hold."""

    condition: Condition


Condition: TypeAlias = MetadataFilter | AllOf | AnyOf | Not

FilterSpec: TypeAlias = Mapping[str, Any] | Condition | Sequence[Condition]
"""What callers may pass as `metadata=`: a Mongo-style dict, a condition, or a list."""

OPERATORS: dict[str, FilterOp] = {
    "$eq": "eq",
    "$ne": "ne",
    "$gt": "gt",
    "$gte": "gte",
    "$lt": "lt",
    "$lte": "lte",
    "$in": "in",
    "$nin": "nin",
    "$exists": "exists",
    "$contains": "contains",
}
LOGICAL = ("$and", "$or", "$not")
_SUPPORTED = ", ".join([*OPERATORS, *LOGICAL])
# The complement of a leaf that is itself a leaf, under the semantics above.
_COMPLEMENT: dict[FilterOp, FilterOp] = {"eq": "ne", "ne": "eq", "in": "nin", "nin": "in"}


def parse_filter(spec: Mapping[str, Any]) -> tuple[Condition, ...]:
    """A Mongo-style filter dict as conditions to AND (see the module docstring)."""
    return _parse_document(spec, depth=0)


def _parse_document(spec: Any, *, depth: int) -> tuple[Condition, ...]:
    if not isinstance(spec, Mapping):
        raise UnsupportedFilterError(
            f"a filter is a dict of key: value or key: {{'$op': value}}, got {type(spec).__name__}"
        )
    if depth > MAX_DEPTH:
        raise UnsupportedFilterError(f"a filter nests deeper than {MAX_DEPTH} levels")
    out: list[Condition] = []
    for key, value in spec.items():
        if not isinstance(key, str) or not key:
            raise UnsupportedFilterError(f"a filter key must be a non-empty string, got {key!r}")
        if key in ("$and", "$or"):
            parts = _documents(key, value, depth=depth)
            out.append(AllOf(parts) if key == "$and" else AnyOf(parts))
        elif key == "$not":
            out.append(Not(_one(_parse_document(value, depth=depth + 1))))
        elif key.startswith("$"):
            raise UnsupportedFilterError(
                f"unsupported filter operator {key!r} at the top of a filter; supported: "
                f"{_SUPPORTED} (or a metadata key)"
            )
        else:
            out.extend(_parse_field(key, value, depth=depth))
    return tuple(out)


def _documents(op: str, value: Any, *, depth: int) -> tuple[Condition, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise UnsupportedFilterError(f"{op} needs a non-empty list of filters, got {value!r:.80}")
    return tuple(_one(_parse_document(part, depth=depth + 1)) for part in value)


def _one(conditions: tuple[Condition, ...]) -> Condition:
    if not conditions:
        raise UnsupportedFilterError("an empty filter {} inside $and, $or or $not")
    return conditions[0] if len(conditions) == 1 else AllOf(conditions)


def _parse_field(key: str, value: Any, *, depth: int) -> list[Condition]:
    """`key: value` (equality) or `key: {"$op": value, ...}` (ANDed)."""
    if not isinstance(value, Mapping):
        return [leaf(key, "eq", value)]
    if not value or not all(isinstance(k, str) and k.startswith("$") for k in value):
        raise UnsupportedFilterError(
            f"cannot filter {key!r} on a nested object; filter top-level scalar values, or "
            f"give operators ({{'$in': [...]}})"
        )
    out: list[Condition] = []
    for op, operand in value.items():
        if op == "$not":
            if depth >= MAX_DEPTH:
                raise UnsupportedFilterError(f"a filter nests deeper than {MAX_DEPTH} levels")
            out.append(Not(_one(tuple(_parse_field(key, operand, depth=depth + 1)))))
        elif op in OPERATORS:
            out.append(leaf(key, OPERATORS[op], operand))
        else:
            raise UnsupportedFilterError(
                f"unsupported filter operator {op!r} on {key!r}; supported: "
                f"{', '.join(OPERATORS)} and $not"
            )
    return out


def leaf(key: str, op: FilterOp, value: Any) -> MetadataFilter:
    """A leaf, its operand's shape checked (the stores check the value types)."""
    if op in ("in", "nin"):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(
            value, (list, tuple, set, frozenset)
        ):
            raise UnsupportedFilterError(
                f"${op} on {key!r} needs a list of values, got {value!r:.80}"
            )
        return MetadataFilter(key, op, list(value))
    if op == "exists":
        if not isinstance(value, bool):
            raise UnsupportedFilterError(f"$exists on {key!r} takes True or False")
        return MetadataFilter(key, op, value)
    if isinstance(value, (list, tuple, set, frozenset, Mapping)):
        raise UnsupportedFilterError(
            f"${op} on {key!r} needs one scalar value (string, number, boolean), got "
            f"{type(value).__name__}; use $in for alternatives"
        )
    return MetadataFilter(key, op, value)


def leaves(conditions: Sequence[Condition] | Condition) -> Iterator[MetadataFilter]:
    """Every leaf of the trees, depth first (what stores must know about before a query:
    the keys and value types it reads)."""
    stack: list[Condition] = (
        [conditions]
        if isinstance(conditions, (MetadataFilter, AllOf, AnyOf, Not))
        else list(conditions)
    )
    while stack:
        item = stack.pop()
        if isinstance(item, MetadataFilter):
            yield item
        elif isinstance(item, Not):
            stack.append(item.condition)
        else:
            stack.extend(reversed(item.conditions))


def negation_normal_form(condition: Condition) -> Condition:
    """The same condition with `Not` pushed to the leaves (De Morgan), and complemented
    away where a leaf has an exact complement (eq/ne, in/nin, exists): what is left
    under a `Not` is a range or a contains. For stores whose NOT is costly or absent."""
    if isinstance(condition, MetadataFilter):
        return condition
    if isinstance(condition, AllOf):
        return AllOf(tuple(negation_normal_form(c) for c in condition.conditions))
    if isinstance(condition, AnyOf):
        return AnyOf(tuple(negation_normal_form(c) for c in condition.conditions))
    inner = condition.condition
    if isinstance(inner, Not):
        return negation_normal_form(inner.condition)
    if isinstance(inner, AllOf):
        return AnyOf(tuple(negation_normal_form(Not(c)) for c in inner.conditions))
    if isinstance(inner, AnyOf):
        return AllOf(tuple(negation_normal_form(Not(c)) for c in inner.conditions))
    if inner.op in _COMPLEMENT:
        return MetadataFilter(inner.key, _COMPLEMENT[inner.op], inner.value)
    if inner.op == "exists":
        return MetadataFilter(inner.key, "exists", not (inner.value is None or bool(inner.value)))
    return condition


def is_condition(value: object) -> bool:
    return isinstance(value, (MetadataFilter, AllOf, AnyOf, Not))


__all__ = [
    "AllOf",
    "AnyOf",
    "Condition",
    "FilterOp",
    "FilterSpec",
    "MetadataFilter",
    "Not",
    "UnsupportedFilterError",
    "leaf",
    "leaves",
    "negation_normal_form",
    "parse_filter",
]
