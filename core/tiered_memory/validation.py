"""Input checks that run before anything is written (DESIGN.md section 8).

The engine's public methods are the boundary: each checks its arguments here, once,
and passes on value types (`Namespace`, `MemoryId`) that the retrieval code, the
faces and the adapters take as already valid. An adapter called directly with a
plain string checks it with the same function (`check_namespace(value)`, defined
with the path namespaces in `namespaces.py` and re-exported here), so there is one
definition of a valid namespace; it adds only what its backend needs (an S3 key
length, a Weaviate tenant name).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from .errors import DimensionMismatchError, ValidationError
from .filters import Condition, is_condition, leaves, parse_filter
from .models import utc
from .namespaces import Namespace as Namespace  # re-exported: the boundary's value types
from .namespaces import check_namespace as check_namespace
from .policy import Limits
from .ports import Vector


class MemoryId(str):
    """A memory id that passed `check_id`: non-blank storable text."""

    __slots__ = ()


def check_content(content: str, limits: Limits) -> str:
    if not isinstance(content, str):
        raise ValidationError(
            f"content must be a string, got {type(content).__name__} (decode bytes first)"
        )
    if not content.strip():
        raise ValidationError("content is empty or whitespace; there is nothing to remember")
    if "\x00" in content:
        raise ValidationError("content contains a NUL character")
    if len(content) > limits.max_content_chars:
        raise ValidationError(
            f"content is {len(content)} characters; the limit is {limits.max_content_chars} "
            "(raise Policy.limits.max_content_chars, or split the text)"
        )
    _check_text_encodable(content, "content")
    return content


def check_ids(ids: object, limits: Limits | None = None) -> list[MemoryId]:
    """A list of ids. A bare string is refused: iterating it would act on one-letter ids."""
    if isinstance(ids, (str, bytes, Mapping)) or not isinstance(ids, Iterable):
        raise ValidationError("pass a list of ids, e.g. [memory.id], not a single value")
    return [check_id(i, limits) for i in ids]


def check_id(memory_id: object, limits: Limits | None = None, what: str = "id") -> MemoryId:
    """Ids follow the namespace rules, with their own length limit at the boundary."""
    if isinstance(memory_id, MemoryId) and limits is None:
        return memory_id
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ValidationError(
            f"{what} must be a non-empty string such as memory.id, got {_describe(memory_id)}"
        )
    if limits is not None and len(memory_id) > limits.max_id_chars:
        raise ValidationError(
            f"{what} is {len(memory_id)} characters; the limit is {limits.max_id_chars} "
            "(Policy.limits.max_id_chars): use a shorter key, e.g. a hash of it"
        )
    _check_text_encodable(memory_id, what)
    return MemoryId(memory_id)


def _describe(value: object) -> str:
    """A value for an error message: short, and never a dump of a huge input."""
    if isinstance(value, (str, int, float)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return type(value).__name__


# Unicode's control characters (category Cc: C0, DEL and C1), tab aside. One regex
# search instead of a category lookup per character: ids are checked on every write
# (an add_many of 500 items with auto-links checks 3,500: a tenth of its time).
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _check_text_encodable(
    text: str, what: str, error: type[ValidationError] = ValidationError
) -> None:
    """Lone surrogates cannot be stored as UTF-8 by any backend: reject them up front.

    Identifiers (namespaces, ids) also refuse control characters, which only ever
    arrive by mistake or malice and break paths, tenant names and logs.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise error(f"{what} is not valid Unicode text (lone surrogate)") from e
    if what != "content" and _CONTROL.search(text):
        raise error(f"{what} contains control characters")


def check_metadata(metadata: Mapping[str, Any] | None, limits: Limits) -> dict[str, Any]:
    """Metadata must be a JSON object of JSON values (it is stored and filtered as JSON)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata must be a dict")
    for key in metadata:
        if not isinstance(key, str):
            raise ValidationError(f"metadata keys must be strings, got {type(key).__name__}")
    try:
        encoded = json.dumps(metadata, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise ValidationError(f"metadata must be JSON-serialisable without NaN: {e}") from e
    except RecursionError as e:
        raise ValidationError("metadata is nested too deeply to store as JSON") from e
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValidationError("metadata contains invalid Unicode (lone surrogate)") from e
    if len(encoded) > limits.max_metadata_bytes:
        raise ValidationError(
            f"metadata is {len(encoded)} bytes as JSON; the limit is {limits.max_metadata_bytes}"
        )
    loaded: dict[str, Any] = json.loads(encoded)
    stack: list[Any] = [loaded]
    while stack:  # no recursion: the JSON may be nested up to json's own limit
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        else:
            check_int64(value, "metadata")
    return loaded


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def check_int64(value: Any, what: str) -> None:
    """Integers must fit a signed 64-bit integer, what SQLite stores and compares exactly:
    its JSON functions read a larger one as an approximate float, it cannot bind one as a
    parameter, and Weaviate indexes numbers as floats (beyond float range, not at all)."""
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise ValidationError(
            f"{what} holds the integer {value}, outside the signed 64-bit range "
            f"[{INT64_MIN}, {INT64_MAX}]; store it as a string"
        )


def check_filters(metadata: Any) -> tuple[Condition, ...]:
    """Metadata filters, as ANDed condition trees: a Mongo-style dict (`{"k": v}` is
    equality; operators and $and/$or/$not as in `filters.parse_filter`), one condition,
    or a list of them. Keys and text values must be encodable; each store checks the
    value types its operators take."""
    if metadata is None:
        return ()
    if isinstance(metadata, Mapping):
        filters = parse_filter(metadata)
    elif is_condition(metadata):
        filters = (metadata,)
    elif isinstance(metadata, (list, tuple)) and all(is_condition(f) for f in metadata):
        filters = tuple(metadata)
    else:
        raise ValidationError(
            "metadata filters must be a dict ({'k': v}, {'k': {'$in': [...]}}, "
            "{'$or': [...]}), or a list of tiered_memory.filters conditions"
        )
    for f in leaves(filters):
        if not isinstance(f.key, str):
            raise ValidationError(f"a metadata filter key must be a string, got {f.key!r}")
        scalars = _scalars(f.value)
        for text in (f.key, *(s for s in scalars if isinstance(s, str))):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValidationError("a metadata filter holds a lone surrogate") from e
        for scalar in scalars:
            check_int64(scalar, f"the metadata filter on {f.key!r}")
            if isinstance(scalar, float) and math.isnan(scalar):
                raise ValidationError(f"the metadata filter on {f.key!r} holds NaN")
    return filters


def _scalars(value: Any) -> list[Any]:
    """The leaves of a filter value (a scalar, or a list of them for in/nin)."""
    leaves: list[Any] = []
    stack = [value]
    while stack:  # no recursion: a hostile value may be nested deeply
        item = stack.pop()
        if isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        else:
            leaves.append(item)
    return leaves


def check_importance(importance: float) -> float:
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        raise ValidationError("importance must be a number between 0 and 1")
    value = float(importance)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"importance must be between 0 and 1, got {importance!r}")
    return value


def check_vector(values: Any, dimension: int | None, *, what: str = "embedding") -> Vector:
    """A finite float32 vector of the store's dimension."""
    try:
        vector = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValidationError(f"{what} must be a sequence of numbers") from e
    if vector.ndim != 1 or vector.size == 0:
        raise ValidationError(f"{what} must be a non-empty flat list of numbers")
    if not np.isfinite(vector).all():
        raise ValidationError(f"{what} contains NaN or infinite values")
    if dimension is not None:
        check_size(vector, dimension, what=what)
    return vector


def check_size(vector: Vector, dimension: int, *, what: str = "embedding") -> Vector:
    """A vector already checked finite and flat must have the store's dimension."""
    if vector.size != dimension:
        raise DimensionMismatchError(
            f"{what} has dimension {vector.size}, but this store holds {dimension}-d vectors "
            "(use the same embedding model, or a new store)"
        )
    return vector


def check_budget(budget_tokens: int) -> int:
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
        raise ValidationError("budget_tokens must be an integer")
    if budget_tokens < 0:
        raise ValidationError(f"budget_tokens must be >= 0, got {budget_tokens}")
    return budget_tokens


def check_k(k: object, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"{name} must be a positive integer, got {_describe(k)}")
    return k


def check_count(value: object, name: str, limits: Limits) -> int:
    """k, limit, max_items: a positive integer the backends can bind (SQLite stops at
    2**63) and a caller can page through (`Policy.limits.max_results`)."""
    count = check_k(value, name)
    if count > limits.max_results:
        raise ValidationError(
            f"{name} is {count}; the most one call returns is {limits.max_results} "
            "(page with after_id, or raise Policy.limits.max_results)"
        )
    return count


def check_items(items: object) -> list[Any]:
    """What add_many takes: a list (any iterable) of items, never one string or dict."""
    if isinstance(items, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(
        items, Iterable
    ):
        raise ValidationError(
            f"add_many takes a list of items (strings or dicts), got {_describe(items)}; "
            "use add() for one memory"
        )
    return list(items)


MAX_FUSION_WEIGHT = 1e6  # weights are relative; a larger one overflows their sum


def check_weights(weights: object) -> dict[str, float] | None:
    """Per-call fusion weights: a dict of name -> a finite number in [0, 1e6], not all 0.

    The names are checked where they are resolved (`scoring.resolve_fusion_weights`).
    """
    if weights is None:
        return None
    example = "e.g. weights={'vector': 1, 'keyword': 0}"
    if not isinstance(weights, Mapping):
        raise ValidationError(f"weights must be a dict of signal -> weight, {example}")
    out: dict[str, float] = {}
    for key, value in weights.items():
        if not isinstance(key, str):
            raise ValidationError(f"a fusion weight name must be a string, {example}")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 0 <= value <= MAX_FUSION_WEIGHT
        ):
            raise ValidationError(
                f"fusion weight {key!r} must be a number between 0 and {MAX_FUSION_WEIGHT:g}, "
                f"got {value!r}"
            )
        out[key] = float(value)
    if out and not any(out.values()):
        raise ValidationError(f"at least one fusion weight must be above 0, {example}")
    return out


def check_query(query: object, limits: Limits) -> str:
    """Query text may be empty (a vector can drive the search), but it is text."""
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, got {_describe(query)}")
    if len(query) > limits.max_content_chars:
        raise ValidationError(
            f"query is {len(query)} characters; the limit is {limits.max_content_chars} "
            "(Policy.limits.max_content_chars)"
        )
    _check_text_encodable(query, "content")
    return query


def check_label(value: object, what: str, limit: int, setting: str) -> str:
    """Short free text kept beside a memory (its source, an archive reason)."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {_describe(value)}")
    if len(value) > limit:
        raise ValidationError(
            f"{what} is {len(value)} characters; the limit is {limit} (Policy.limits.{setting})"
        )
    _check_text_encodable(value, "content")
    return value


def check_when(value: object, what: str = "now") -> datetime:
    """A datetime given by the caller; a naive one is taken as UTC (models.utc)."""
    if not isinstance(value, datetime):
        raise ValidationError(
            f"{what} must be a datetime, e.g. datetime(2026, 1, 1, tzinfo=timezone.utc), "
            f"got {_describe(value)}"
        )
    return utc(value)


def check_age(age: object, now: datetime, what: str = "age") -> datetime:
    """The instant `age` before `now`: a positive timedelta that still lands on a date
    (timedelta.max would overflow the subtraction)."""
    if not isinstance(age, timedelta) or age <= timedelta(0):
        raise ValidationError(
            f"{what} must be a positive timedelta, e.g. timedelta(days=90), got {_describe(age)}"
        )
    try:
        return now - age
    except OverflowError as e:
        raise ValidationError(f"{what} reaches before year 1; give a shorter age") from e


def check_flag(value: object, name: str) -> bool:
    """A yes/no argument is a bool: the string "no" is truthy, and `hard="no"` deletes."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{name} must be True or False, got {_describe(value)}")
    return bool(value)


def check_list(value: object, what: str) -> list[Any]:
    """A list argument (tiers, memory types): one string would iterate as letters."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValidationError(f"{what} must be a list, e.g. [{_EXAMPLES.get(what, '...')}]")
    return list(value)


_EXAMPLES = {
    "tiers": "'hot', 'warm'",
    "memory_types": "'factual'",
    "texts": "'some text'",
    "ids": "'doc-1'",
    "metadatas": "{'source': 'notes'}",
}
