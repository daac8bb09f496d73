"""Input checks that run before anything is written (DESIGN.md section 8)."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import DimensionMismatchError, NamespaceError, ValidationError
from .namespaces import MARK, PathNamespace
from .policy import Limits
from .ports import MetadataFilter, Vector


def check_namespace(namespace: str, limits: Limits) -> str:
    """Namespaces are opaque strings: any text is stored literally, but not empty ones,
    and not the mark of a path namespace, which only a `PathNamespace` may carry (so no
    text a caller passes can name a face's namespace)."""
    if not isinstance(namespace, str):
        raise NamespaceError(f"namespace must be a string, got {type(namespace).__name__}")
    if MARK in namespace and not isinstance(namespace, PathNamespace):
        raise NamespaceError(
            "namespace contains U+FDD0, which marks namespaces built from a path of labels "
            "(a LangGraph store's); name one with tiered_memory.PathNamespace(labels)"
        )
    if not namespace.strip():
        raise NamespaceError("namespace is empty; pass e.g. namespace='user-42'")
    if len(namespace) > limits.max_namespace_chars:
        raise NamespaceError(
            f"namespace is {len(namespace)} characters; the limit is {limits.max_namespace_chars}"
        )
    _check_text_encodable(namespace, "namespace", NamespaceError)
    return namespace


def check_content(content: str, limits: Limits) -> str:
    if not isinstance(content, str):
        raise ValidationError(f"content must be a string, got {type(content).__name__}")
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


def check_ids(ids: object) -> list[str]:
    """A list of ids. A bare string is refused: iterating it would act on one-letter ids."""
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise ValidationError("pass a list of ids, e.g. [memory.id], not a single string")
    return [check_id(i) for i in ids]


def check_id(memory_id: str) -> str:
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ValidationError("a memory id must be a non-empty string")
    _check_text_encodable(memory_id, "id")
    return memory_id


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
    if what != "content" and any(unicodedata.category(c) == "Cc" and c not in "\t" for c in text):
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


def check_filters(metadata: Any) -> tuple[MetadataFilter, ...]:
    """Metadata filters: a dict of key -> value (equality), or a list of MetadataFilter.
    Keys and text values must be encodable; each store checks the ops and value types."""
    if metadata is None:
        return ()
    if isinstance(metadata, Mapping):
        filters = tuple(MetadataFilter(key, "eq", value) for key, value in metadata.items())
    elif isinstance(metadata, (list, tuple)) and all(
        isinstance(f, MetadataFilter) for f in metadata
    ):
        filters = tuple(metadata)
    else:
        raise ValidationError(
            "metadata filters must be a dict of key: value, or a list of MetadataFilter"
        )
    for f in filters:
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
    if dimension is not None and vector.size != dimension:
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


def check_k(k: int, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"{name} must be a positive integer, got {k!r}")
    return k
