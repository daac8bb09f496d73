"""Search filters and sweep scans translated to Weaviate `Filter` objects.

Pure: it builds filter objects and sends nothing, so every translation is unit-tested
offline. A condition that Weaviate cannot express faithfully raises ValidationError;
none is ever dropped. A condition that nothing can satisfy (an empty id set, an empty
`in` list, a tier the collection does not hold) raises `NoMatches`, so the store
answers without a request instead of sending a filter Weaviate would reject.

Metadata semantics (the property layout is in `mapping`):
- `eq`, `ne`: one JSON scalar (str, number, bool); numbers compare as floats, so 1 == 1.0.
  `ne` and `nin` also match memories without the key or with another type there, as
  `metadata.get(key) != value` does in Python.
- `gt`, `gte`, `lt`, `lte`: a number, or a string (compared by UTF-8 bytes, which is
  ISO-8601 date order).
- `in`, `nin`: a non-empty list of scalars (an empty `in` matches nothing, an empty
  `nin` everything).
- `contains`: the value is an element of a list stored at the key, or, for a string
  value, a substring of a string stored there.
- `exists`: value True or None: the key is present (any value, null included); False:
  absent.
- `AllOf`/`AnyOf` are `Filter.all_of`/`any_of`. `Not` is pushed to the leaves first
  (`filters.negation_normal_form`): eq/ne, in/nin and exists have exact complements,
  so only a negated range or contains needs Weaviate's own NOT (`Filter.not_`, which
  needs Weaviate 1.33 or later).
String values are matched through Weaviate's `field` tokenisation, which trims
surrounding whitespace, so empty strings and strings with surrounding whitespace are
refused rather than silently matched loosely; `contains` refuses the `*` and `?`
wildcards of Weaviate's LIKE, which has no escape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from weaviate.classes.query import Filter, FilterReturn

from tiered_memory.errors import ValidationError
from tiered_memory.filters import (
    AllOf,
    AnyOf,
    Condition,
    MetadataFilter,
    Not,
    leaves,
    negation_normal_form,
)
from tiered_memory.models import LIVE_TIERS, MemoryType, Tier, utc
from tiered_memory.ports import ScanQuery, SearchFilter
from tiered_memory.validation import check_int64

from .mapping import MetaKind, id_key, meta_property, object_uuid


class NoMatches(Exception):
    """The conditions exclude every object; the store returns an empty answer."""


Scalar = str | float | bool


def all_of(parts: Sequence[FilterReturn]) -> FilterReturn | None:
    """AND of `parts`; None when there is no condition at all."""
    if not parts:
        return None
    return Filter.all_of(list(parts))


# -- small conditions ------------------------------------------------------------------


def tier_condition(wanted: frozenset[Tier], held: frozenset[Tier]) -> FilterReturn | None:
    """Restrict a collection holding `held` tiers to `wanted`; None when all it holds
    is wanted."""
    tiers = wanted & held
    if not tiers:
        raise NoMatches
    if tiers == held:
        return None
    values = sorted(t.value for t in tiers)
    if len(values) == 1:
        return Filter.by_property("tier").equal(values[0])
    return Filter.by_property("tier").contains_any(values)


def ids_condition(namespace: str, ids: Sequence[str] | frozenset[str]) -> FilterReturn:
    """Objects whose memory id is in `ids`, by their deterministic object ids."""
    if not ids:
        raise NoMatches
    return Filter.by_id().contains_any([object_uuid(namespace, i) for i in sorted(ids)])


def after_condition(after_id: str | None) -> FilterReturn | None:
    """Keyset paging: ids strictly after `after_id` in id order."""
    if after_id is None:
        return None
    return Filter.by_property("id_key").greater_than(id_key(after_id))


# -- metadata --------------------------------------------------------------------------------


def _scalar_kind(value: Any, *, op: str, key: str) -> MetaKind:
    if isinstance(value, bool):
        return "b"
    if isinstance(value, (int, float)):
        check_int64(value, f"metadata filter {key!r} {op}")
        return "n"
    if isinstance(value, str):
        if not value or value != value.strip():
            raise ValidationError(
                f"metadata filter {key!r} {op} {value!r}: Weaviate matches strings with "
                "surrounding whitespace trimmed, so empty or space-padded values cannot be "
                "matched exactly; strip the value"
            )
        return "s"
    what = "null" if value is None else type(value).__name__
    hint = " (use op='exists' for presence)" if value is None else ""
    raise ValidationError(
        f"metadata filter {key!r} {op} needs a string, number or boolean, got {what}{hint}"
    )


def _typed(value: Any, kind: MetaKind) -> Scalar:
    if kind == "n":
        return float(value)
    return bool(value) if kind == "b" else str(value)


def _values_list(value: Any, *, op: str, key: str) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ValidationError(f"metadata filter {key!r} {op} needs a list of values")
    return list(value)


@dataclass
class _Groups:
    """The values of an `in`/`nin` list, split by the property kind that holds them."""

    strings: list[str] = field(default_factory=list)
    numbers: list[float] = field(default_factory=list)
    booleans: list[bool] = field(default_factory=list)

    def conditions(self, key: str, *, negate: bool) -> list[FilterReturn]:
        """`contains_any` per kind (in), or `not_equal` per value (nin)."""
        out: list[FilterReturn] = []
        if self.booleans:
            by = Filter.by_property(meta_property(key, "b"))
            out += (
                [by.not_equal(v) for v in self.booleans]
                if negate
                else [by.contains_any(self.booleans)]
            )
        if self.numbers:
            by = Filter.by_property(meta_property(key, "n"))
            out += (
                [by.not_equal(v) for v in self.numbers]
                if negate
                else [by.contains_any(self.numbers)]
            )
        if self.strings:
            by = Filter.by_property(meta_property(key, "s"))
            out += (
                [by.not_equal(v) for v in self.strings]
                if negate
                else [by.contains_any(self.strings)]
            )
        return out

    def kinds(self) -> list[MetaKind]:
        pairs: list[tuple[MetaKind, list[Any]]] = [
            ("b", self.booleans),
            ("n", self.numbers),
            ("s", self.strings),
        ]
        return [kind for kind, values in pairs if values]


def _grouped(values: list[Any], *, op: str, key: str) -> _Groups:
    groups = _Groups()
    for v in values:
        kind = _scalar_kind(v, op=op, key=key)
        if kind == "b":
            groups.booleans.append(bool(v))
        elif kind == "n":
            groups.numbers.append(float(v))
        else:
            groups.strings.append(str(v))
    groups.booleans = sorted(set(groups.booleans))
    groups.numbers = sorted(set(groups.numbers))
    groups.strings = sorted(set(groups.strings))
    return groups


def _range(prop: str, op: str, value: Scalar) -> FilterReturn:
    by = Filter.by_property(prop)
    if op == "gt":
        return by.greater_than(value)
    if op == "gte":
        return by.greater_or_equal(value)
    if op == "lt":
        return by.less_than(value)
    return by.less_or_equal(value)


def metadata_condition(condition: Condition) -> FilterReturn | None:
    """One metadata filter tree; None when it constrains nothing (an empty `nin`).
    Raises `NoMatches` when nothing can match it (an empty `in`)."""
    return _tree(negation_normal_form(condition))


def _tree(condition: Condition) -> FilterReturn | None:
    if isinstance(condition, MetadataFilter):
        return _leaf(condition)
    if isinstance(condition, Not):  # a range or contains, after negation_normal_form
        inner = _tree(condition.condition)
        if inner is None:  # NOT(everything)
            raise NoMatches
        return Filter.not_(inner)
    if isinstance(condition, AllOf):
        parts = [p for p in (_tree(c) for c in condition.conditions) if p is not None]
        return all_of(parts)
    if isinstance(condition, AnyOf):
        kept: list[FilterReturn] = []
        for part in condition.conditions:
            try:
                translated = _tree(part)
            except NoMatches:  # one impossible branch does not empty an OR
                continue
            if translated is None:  # one branch matches everything: so does the OR
                return None
            kept.append(translated)
        if not kept:
            raise NoMatches
        return kept[0] if len(kept) == 1 else Filter.any_of(kept)
    raise ValidationError(
        f"a metadata filter must be a tiered_memory.filters condition, got "
        f"{type(condition).__name__}"
    )


def _leaf(f: MetadataFilter) -> FilterReturn | None:
    key, op, value = f.key, f.op, f.value
    if not isinstance(key, str) or not key:
        raise ValidationError("a metadata filter needs a non-empty string key")
    if op in ("eq", "ne"):
        kind = _scalar_kind(value, op=op, key=key)
        by = Filter.by_property(meta_property(key, kind))
        typed = _typed(value, kind)
        return by.equal(typed) if op == "eq" else by.not_equal(typed)
    if op in ("gt", "gte", "lt", "lte"):
        kind = _scalar_kind(value, op=op, key=key)
        if kind == "b":
            raise ValidationError(f"metadata filter {key!r} {op} cannot order booleans")
        return _range(meta_property(key, kind), op, _typed(value, kind))
    if op == "in":
        parts = _grouped(_values_list(value, op=op, key=key), op=op, key=key).conditions(
            key, negate=False
        )
        if not parts:
            raise NoMatches
        return Filter.any_of(parts)
    if op == "nin":
        groups = _grouped(_values_list(value, op=op, key=key), op=op, key=key)
        return all_of(groups.conditions(key, negate=True))
    if op == "contains":
        if isinstance(value, str):
            if not value or "*" in value or "?" in value:
                raise ValidationError(
                    f"metadata filter {key!r} contains {value!r}: the value must be non-empty "
                    "and free of '*' and '?' (Weaviate LIKE wildcards cannot be escaped)"
                )
            return Filter.any_of(
                [
                    Filter.by_property(meta_property(key, "sa")).contains_any([value]),
                    Filter.by_property(meta_property(key, "s")).like(f"*{value}*"),
                ]
            )
        if _scalar_kind(value, op=op, key=key) == "n":
            return Filter.by_property(meta_property(key, "na")).contains_any([float(value)])
        return Filter.by_property(meta_property(key, "ba")).contains_any([bool(value)])
    if op == "exists":
        if value is None or value is True:
            return Filter.by_property("meta_keys").equal(key)
        if value is False:
            return Filter.by_property("meta_keys").not_equal(key)
        raise ValidationError(f"metadata filter {key!r} exists takes True, False or None")
    raise ValidationError(
        f"unknown metadata filter op {op!r}; expected one of: "
        "eq, ne, gt, gte, lt, lte, in, nin, contains, exists"
    )


def metadata_properties(filters: Sequence[Condition]) -> dict[str, MetaKind]:
    """The typed metadata properties these filters read; they must exist in the schema
    before a query names them, or Weaviate rejects the query."""
    out: dict[str, MetaKind] = {}
    for f in leaves(filters):
        if f.op in ("eq", "ne", "gt", "gte", "lt", "lte"):
            kind = _scalar_kind(f.value, op=f.op, key=f.key)
            out[meta_property(f.key, kind)] = kind
        elif f.op in ("in", "nin"):
            groups = _grouped(_values_list(f.value, op=f.op, key=f.key), op=f.op, key=f.key)
            for kind in groups.kinds():
                out[meta_property(f.key, kind)] = kind
        elif f.op == "contains":
            if isinstance(f.value, str):
                out[meta_property(f.key, "sa")] = "sa"
                out[meta_property(f.key, "s")] = "s"
            else:
                kind = _scalar_kind(f.value, op=f.op, key=f.key)
                array: MetaKind = "na" if kind == "n" else "ba"
                out[meta_property(f.key, array)] = array
    return out


# -- whole queries ------------------------------------------------------------------------------


def search_where(
    namespace: str, tiers: frozenset[Tier], held: frozenset[Tier], filters: SearchFilter
) -> FilterReturn | None:
    """The filter of a vector or BM25 search in a collection holding `held` tiers."""
    parts: list[FilterReturn] = []
    tier = tier_condition(tiers & LIVE_TIERS, held)
    if tier is not None:
        parts.append(tier)
    if not filters.include_forgotten:
        parts.append(Filter.by_property("do_not_inject").equal(False))
    if not filters.include_superseded:
        parts.append(Filter.by_property("superseded").equal(False))
    if filters.pinned is not None:
        parts.append(Filter.by_property("pinned").equal(filters.pinned))
    return all_of(parts + _kept_conditions(namespace, filters))


def archive_where(namespace: str, filters: SearchFilter) -> FilterReturn | None:
    """The filter of a search of archive records, which keep their memory's type,
    metadata and flags, so every SearchFilter field means what it means for live ones.

    An archived memory is never pinned. The flags are `not_equal(True)`: a record
    archived before records kept them has no such property and passes, like a metadata
    `ne` on a missing key (it counts as neither forgotten nor superseded until the
    sweep fills them in)."""
    if filters.pinned:
        raise NoMatches
    parts: list[FilterReturn] = []
    if not filters.include_forgotten:
        parts.append(Filter.by_property("do_not_inject").not_equal(True))
    if not filters.include_superseded:
        parts.append(Filter.by_property("superseded").not_equal(True))
    return all_of(parts + _kept_conditions(namespace, filters))


def flags_unknown_where() -> FilterReturn:
    """Archive records lacking a flag (archived before records kept them): neither
    true nor false."""
    return Filter.any_of(
        [
            Filter.all_of(
                [
                    Filter.by_property(name).not_equal(True),
                    Filter.by_property(name).not_equal(False),
                ]
            )
            for name in ("do_not_inject", "superseded")
        ]
    )


def _kept_conditions(namespace: str, filters: SearchFilter) -> list[FilterReturn]:
    """Memory types, ids and metadata: what live memories and archive records share."""
    parts: list[FilterReturn] = []
    if filters.memory_types is not None:
        types = sorted(MemoryType.parse(t).value for t in filters.memory_types)
        if not types:
            raise NoMatches
        parts.append(Filter.by_property("memory_type").contains_any(types))
    if filters.ids is not None:
        parts.append(ids_condition(namespace, filters.ids))
    for f in filters.metadata:
        condition = metadata_condition(f)
        if condition is not None:
            parts.append(condition)
    return parts


def _before(prop: str, when: datetime | None) -> FilterReturn | None:
    return None if when is None else Filter.by_property(prop).less_than(utc(when))


def scan_where(query: ScanQuery, held: frozenset[Tier]) -> FilterReturn | None:
    """The filter of one sweep scan page in a collection holding `held` tiers.

    `last_used_before` reads `last_used_at`, which every write sets to
    coalesce(last_accessed_at, created_at), so the comparison stays in the index.
    """
    parts: list[FilterReturn | None] = [
        tier_condition(query.tiers, held),
        _before("created_at", query.created_before),
        _before("last_used_at", query.last_used_before),
        _before("cold_since", query.cold_since_before),
        _before("tier_changed_at", query.tier_changed_before),
        after_condition(query.after_id),
    ]
    if query.importance_at_most is not None:
        parts.append(
            Filter.by_property("importance").less_or_equal(float(query.importance_at_most))
        )
    if query.importance_at_least is not None:
        parts.append(
            Filter.by_property("importance").greater_or_equal(float(query.importance_at_least))
        )
    if query.min_uses_since_cold is not None:
        parts.append(
            Filter.by_property("uses_since_cold").greater_or_equal(int(query.min_uses_since_cold))
        )
    if query.min_use_count is not None:
        parts.append(Filter.by_property("use_count").greater_or_equal(int(query.min_use_count)))
    for name in ("pinned", "core", "superseded"):
        value = getattr(query, name)
        if value is not None:
            parts.append(Filter.by_property(name).equal(bool(value)))
    if query.used is not None:
        used = Filter.by_property("use_count")
        parts.append(used.greater_than(0) if query.used else used.equal(0))
    parts.extend(metadata_condition(f) for f in query.metadata)
    return all_of([p for p in parts if p is not None])
