"""Pure translation of search filters and scans into SQL for SQLite.

Every value goes in as a parameter; the only text built here is fixed SQL and
placeholders. Id lists travel as one JSON parameter read with `json_each`, which
avoids SQLite's limit on the number of parameters for any batch size.
"""

from __future__ import annotations

import json
import operator
import sqlite3
from collections.abc import Callable, Collection, Iterable
from typing import Any

from tiered_memory.epoch import to_micros
from tiered_memory.errors import ValidationError
from tiered_memory.filters import AllOf, AnyOf, Condition, MetadataFilter, Not
from tiered_memory.models import Tier
from tiered_memory.ports import ScanQuery, SearchFilter
from tiered_memory.validation import check_int64


def json_list(values: Iterable[str]) -> str:
    """One parameter holding many values, for `IN (SELECT value FROM json_each(?))`."""
    return json.dumps(list(values), ensure_ascii=False)


def json_ints(values: Iterable[int]) -> str:
    """`json_list` for integers (a search's candidate pks), joined directly: no
    `json.dumps` pass over values that need no escaping."""
    return "[" + ",".join(map(str, values)) + "]"


IN_JSON = "IN (SELECT value FROM json_each(?))"


def placeholders(n: int) -> str:
    return ", ".join("?" * n)


def tier_values(tiers: Collection[Tier]) -> list[str]:
    return sorted(t.value for t in tiers)


# -- search filters ----------------------------------------------------------------------


def search_filter_sql(filters: SearchFilter, alias: str = "m") -> tuple[list[str], list[Any]]:
    """WHERE clauses (ANDed) and their parameters for a SearchFilter."""
    clauses: list[str] = []
    params: list[Any] = []
    if not filters.include_forgotten:
        clauses.append(f"{alias}.do_not_inject = 0")
    if not filters.include_superseded:
        clauses.append(f"{alias}.superseded_by IS NULL")
    if filters.pinned is not None:
        clauses.append(f"{alias}.pinned = ?")
        params.append(int(filters.pinned))
    if filters.memory_types is not None:
        clauses.append(f"{alias}.memory_type {IN_JSON}")
        params.append(json_list(t.value for t in filters.memory_types))
    if filters.ids is not None:
        clauses.append(f"{alias}.id {IN_JSON}")
        params.append(json_list(filters.ids))
    for condition in filters.metadata:
        sql, values = metadata_sql(condition, alias)
        clauses.append(sql)
        params.extend(values)
    return clauses, params


def _scalar(value: Any, what: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        check_int64(value, f"metadata filter {what}")
        return value
    raise ValidationError(
        f"metadata filter {what} needs a string, number, boolean or None, "
        f"got {type(value).__name__}"
    )


def _equals(type_col: str, value_col: str, value: Any) -> tuple[str, list[Any]]:
    """JSON-typed equality: 1 equals 1.0, but never "1" or true."""
    if value is None:
        return f"{type_col} = 'null'", []
    if isinstance(value, bool):
        return f"{type_col} = '{'true' if value else 'false'}'", []
    if isinstance(value, (int, float)):
        return f"({type_col} IN ('integer', 'real') AND {value_col} = ?)", [value]
    return f"({type_col} = 'text' AND {value_col} = ?)", [value]


_ORDER = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


# SQLite's JSON functions return text cut at its first U+0000 (json_each's key and value
# are NUL-terminated C strings), so {"k": "a\x00b"} would neither equal "a\x00b" nor
# differ from "a". json.dumps always writes U+0000 as this escape, so a document without
# it is safe for the SQL below; one with it (rare) is matched in Python instead.
NUL_ESCAPE = "\\u0000"
MATCH_FUNCTION = "tm_metadata_match"


def metadata_sql(condition: Condition, alias: str = "m") -> tuple[str, list[Any]]:
    """One metadata filter tree as one SQL expression (0 or 1, never NULL, so NOT and
    OR mean what they say); each leaf as in `_leaf_sql`."""
    if isinstance(condition, MetadataFilter):
        return _leaf_sql(condition, alias)
    if isinstance(condition, Not):
        sql, params = metadata_sql(condition.condition, alias)
        return f"(NOT {sql})", params
    if isinstance(condition, (AllOf, AnyOf)):
        if not condition.conditions:
            return ("1" if isinstance(condition, AllOf) else "0"), []
        parts: list[str] = []
        params = []
        for part in condition.conditions:
            sql, values = metadata_sql(part, alias)
            parts.append(sql)
            params.extend(values)
        joiner = " AND " if isinstance(condition, AllOf) else " OR "
        return f"({joiner.join(parts)})", params
    raise ValidationError(
        f"a metadata filter must be a tiered_memory.filters condition, got "
        f"{type(condition).__name__}"
    )


def _leaf_sql(condition: MetadataFilter, alias: str) -> tuple[str, list[Any]]:
    """One leaf (see `_metadata_sql`), exact for text holding U+0000 too."""
    value = condition.value
    if condition.op in ("in", "nin"):
        if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
            value = list(value)  # iterated twice below
    elif condition.op == "exists":
        value = value is None or bool(value)
    condition = MetadataFilter(condition.key, condition.op, value)
    sql, params = _metadata_sql(condition, alias)  # checks the condition
    spec = json.dumps([condition.key, condition.op, value], ensure_ascii=False)
    if NUL_ESCAPE in spec:
        return f"({MATCH_FUNCTION}({alias}.metadata, ?))", [spec]
    return (
        f"(CASE WHEN instr({alias}.metadata, '{NUL_ESCAPE}') > 0 "
        f"THEN {MATCH_FUNCTION}({alias}.metadata, ?) ELSE {sql} END)",
        [spec, *params],
    )


def register_functions(conn: sqlite3.Connection) -> None:
    """The Python function `metadata_sql` calls; register it on every connection."""
    conn.create_function(MATCH_FUNCTION, 2, metadata_matches, deterministic=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(stored: Any, wanted: Any) -> bool:
    """`_equals` in Python: typed JSON equality."""
    if wanted is None or isinstance(wanted, bool):
        return stored is wanted
    if _is_number(wanted):
        return _is_number(stored) and bool(stored == wanted)
    return isinstance(stored, str) and stored == wanted


def metadata_matches(metadata: str | None, spec: str) -> int:
    """What `_metadata_sql`'s condition means, evaluated on a metadata JSON document."""
    document = json.loads(metadata) if metadata is not None else {}
    key, op, wanted = json.loads(spec)
    present = isinstance(document, dict) and key in document
    stored = document[key] if present else None
    if op == "exists":
        return int(present == wanted)
    if op in ("eq", "ne"):
        return int((present and _same(stored, wanted)) != (op == "ne"))
    if op in ("in", "nin"):
        return int((present and any(_same(stored, w) for w in wanted)) != (op == "nin"))
    if not present:
        return 0
    if op in _ORDER:
        if isinstance(wanted, str) != isinstance(stored, str) or not (
            isinstance(stored, str) or _is_number(stored)
        ):
            return 0
        return int(_COMPARE[op](stored, wanted))
    if op == "contains":
        if isinstance(stored, list) and any(_same(item, wanted) for item in stored):
            return 1
        return int(isinstance(stored, str) and isinstance(wanted, str) and wanted in stored)
    return 0


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def _metadata_sql(condition: MetadataFilter, alias: str = "m") -> tuple[str, list[Any]]:
    """One metadata condition on a top-level key, matched literally (no path syntax).

    eq/ne/in/nin compare JSON values by type; gt..lte compare numbers with numbers and
    strings with strings; contains means "list holds the value" or "string holds the
    substring"; exists (value True or None) / not exists (value False). A missing key
    satisfies ne and nin, and nothing else.
    """
    op, key = condition.op, condition.key
    if not isinstance(key, str) or not key:
        raise ValidationError("a metadata filter key must be a non-empty string")
    entry = f"SELECT 1 FROM json_each({alias}.metadata) AS j WHERE j.key = ?"
    if op == "exists":
        present = condition.value is None or bool(condition.value)
        return f"{'' if present else 'NOT '}EXISTS ({entry})", [key]
    if op in ("eq", "ne"):
        sql, values = _equals("j.type", "j.value", _scalar(condition.value, op))
        negate = "NOT " if op == "ne" else ""
        return f"{negate}EXISTS ({entry} AND {sql})", [key, *values]
    if op in ("in", "nin"):
        options = condition.value
        if isinstance(options, (str, bytes)) or not isinstance(options, Iterable):
            raise ValidationError(f"metadata filter {op!r} needs a list of values")
        parts: list[str] = []
        values = []
        for option in options:
            sql, vals = _equals("j.type", "j.value", _scalar(option, op))
            parts.append(sql)
            values.extend(vals)
        any_of = " OR ".join(parts) if parts else "0"
        negate = "NOT " if op == "nin" else ""
        return f"{negate}EXISTS ({entry} AND ({any_of}))", [key, *values]
    if op in _ORDER:
        value = condition.value
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValidationError(f"metadata filter {op!r} needs a number or a string")
        check_int64(value, f"metadata filter {op}")
        kind = "j.type = 'text'" if isinstance(value, str) else "j.type IN ('integer', 'real')"
        return f"EXISTS ({entry} AND {kind} AND j.value {_ORDER[op]} ?)", [key, value]
    if op == "contains":
        value = _scalar(condition.value, op)
        member, vals = _equals("e.type", "e.value", value)
        in_list = (
            f"(j.type = 'array' AND EXISTS (SELECT 1 FROM json_each(j.value) AS e WHERE {member}))"
        )
        if isinstance(value, str):
            return (
                f"EXISTS ({entry} AND ({in_list} OR (j.type = 'text' AND instr(j.value, ?) > 0)))",
                [key, *vals, value],
            )
        return f"EXISTS ({entry} AND {in_list})", [key, *vals]
    raise ValidationError(
        f"unknown metadata filter op {op!r}; expected eq, ne, gt, gte, lt, lte, in, nin, "
        "contains or exists"
    )


# -- sweep scans ---------------------------------------------------------------------------


def scan_sql(query: ScanQuery, alias: str = "memories") -> tuple[list[str], list[Any]]:
    """WHERE clauses for a ScanQuery, besides namespace and tiers (`alias` names the
    memories table, for the metadata conditions).

    A `*_before` bound never matches a NULL timestamp (a memory that never went COLD
    has no cold_since); only `last_used_before` falls back to created_at.
    """
    clauses: list[str] = []
    params: list[Any] = []

    def add(sql: str, value: Any) -> None:
        clauses.append(sql)
        params.append(value)

    if query.created_before is not None:
        add("created_at < ?", to_micros(query.created_before))
    if query.last_used_before is not None:
        add("last_used_at < ?", to_micros(query.last_used_before))
    if query.cold_since_before is not None:
        add("cold_since < ?", to_micros(query.cold_since_before))
    if query.tier_changed_before is not None:
        add("tier_changed_at < ?", to_micros(query.tier_changed_before))
    if query.importance_at_most is not None:
        add("importance <= ?", float(query.importance_at_most))
    if query.importance_at_least is not None:
        add("importance >= ?", float(query.importance_at_least))
    if query.min_uses_since_cold is not None:
        add("uses_since_cold >= ?", int(query.min_uses_since_cold))
    if query.min_use_count is not None:
        add("use_count >= ?", int(query.min_use_count))
    if query.pinned is not None:
        # A literal, not a parameter: only then can SQLite use the partial index of
        # pinned memories (recall looks them up on every call).
        clauses.append(f"pinned = {int(bool(query.pinned))}")
    if query.core is not None:
        add("core = ?", int(query.core))
    if query.superseded is not None:
        clauses.append(f"superseded_by IS {'NOT ' if query.superseded else ''}NULL")
    if query.used is not None:
        clauses.append("use_count > 0" if query.used else "use_count = 0")
    for condition in query.metadata:
        sql, values = metadata_sql(condition, alias)
        clauses.append(sql)
        params.extend(values)
    if query.after_id is not None:
        add("id > ?", query.after_id)
    return clauses, params
