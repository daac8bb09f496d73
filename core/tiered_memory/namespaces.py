"""What a valid namespace is: the one definition, for the engine's boundary and the
adapters alike (`check_namespace`, re-exported by `validation`).

A namespace is opaque text, stored literally: not blank, valid Unicode without control
characters, within `Policy.limits.max_namespace_chars` at the boundary. The check
returns a `Namespace`, the value type the engine hands to retrieval, the faces and the
adapters, which take it as valid instead of checking again.

Namespaces built from a path of labels are kept apart from every namespace a caller
can type.

A face with hierarchical namespaces of its own (LangGraph's store names them as tuples
like `("memories", "user-42")`) must map them onto ours without landing on a namespace
that a direct caller can name: if `("user-42",)` became `"user-42"`, or any other text a
caller may pass, one user's store items would be another's memories.

So a path namespace starts with `MARK`, U+FDD0, a Unicode noncharacter (set aside for
a program's internal use): valid text every backend stores, but `check_namespace`
refuses it in a plain string, so only a `PathNamespace` carries it. After the mark,
the labels are a compact JSON array in which the mark itself is escaped, so it occurs
once, first; JSON decodes back to exactly the labels, so distinct paths never share a
name, and the name stays as readable (and as short) as the labels.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import NamespaceError

if TYPE_CHECKING:
    from .policy import Limits

MARK = "\ufdd0"


class Namespace(str):
    """A namespace that passed `check_namespace`: non-blank storable text."""

    __slots__ = ()


def check_namespace(namespace: object, limits: Limits | None = None) -> Namespace:
    """Any text is a namespace, stored literally, except blank text and the mark of a
    path namespace, which only a `PathNamespace` may carry (so no text a caller passes
    can name a face's namespace).

    With `limits` (the engine's boundary) the policy's length limit applies too; an
    adapter calls it without, and a `Namespace` made at the boundary passes as is.
    """
    if isinstance(namespace, Namespace) and limits is None:
        return namespace
    if not isinstance(namespace, str):
        raise NamespaceError(
            f"namespace must be a string such as 'user-42', got {type(namespace).__name__}"
        )
    if MARK in namespace and not isinstance(namespace, PathNamespace):
        raise NamespaceError(
            "namespace contains U+FDD0, which marks namespaces built from a path of labels "
            "(a LangGraph store's); name one with tiered_memory.PathNamespace(labels)"
        )
    if not namespace.strip():
        raise NamespaceError("namespace is empty or blank; pass e.g. namespace='user-42'")
    if limits is not None and len(namespace) > limits.max_namespace_chars:
        raise NamespaceError(
            f"namespace is {len(namespace)} characters; the limit is "
            f"{limits.max_namespace_chars} (Policy.limits.max_namespace_chars)"
        )
    _check_text(namespace, "namespace")
    return namespace if isinstance(namespace, Namespace) else Namespace(namespace)


class PathNamespace(Namespace):
    """A namespace made of labels; pass it wherever a namespace goes.

    Example:
        ```python
        ns = PathNamespace(("langgraph", "memories", "user-42"))
        mem.add("Likes green tea", namespace=ns)
        ns.labels  # ("langgraph", "memories", "user-42")
        ```

    The stored name is plain text beginning with `MARK`; `PathNamespace.parse` turns a
    name read back (e.g. from `namespaces()`) into one again.
    """

    __slots__ = ()

    def __new__(cls, labels: Sequence[str]) -> PathNamespace:
        if isinstance(labels, str):
            raise NamespaceError(
                "PathNamespace takes a sequence of labels, e.g. ('memories', 'user-42'), "
                "not one string"
            )
        labels = tuple(labels)
        if not labels:
            raise NamespaceError("a path namespace needs at least one label")
        for label in labels:
            _check_label(label)
        encoded = json.dumps(list(labels), ensure_ascii=False, separators=(",", ":"))
        # The mark can only occur inside a label's string literal: escape it there.
        return super().__new__(cls, MARK + encoded.replace(MARK, "\\ufdd0"))

    @property
    def labels(self) -> tuple[str, ...]:
        decoded = _decode(str(self))
        assert decoded is not None  # built by __new__, so always well formed
        return decoded

    @property
    def descendants_prefix(self) -> str:
        """The text every longer path under this one starts with, and no other name
        (for `namespaces(prefix=...)`): the JSON array with its `]` turned into `,`."""
        return str(self)[:-1] + ","

    @classmethod
    def parse(cls, name: str) -> PathNamespace | None:
        """The path namespace stored as `name`, or None when `name` is a plain one."""
        labels = _decode(name)
        if labels is None:
            return None
        try:
            namespace = cls(labels)
        except NamespaceError:
            return None
        # Only the canonical spelling is ours (e.g. no extra spaces in the JSON).
        return namespace if str(namespace) == name else None


def stored_namespace(name: str) -> Namespace:
    """A namespace name read back from a backend (`MemoryStore.namespaces`) as the value
    it was written as: a `PathNamespace` again for a path's name, so it can be passed
    back (a sweep over every namespace, a caller listing them) without being refused
    as typed text carrying the mark."""
    return PathNamespace.parse(name) or Namespace(name)


def _check_label(label: object) -> None:
    if not isinstance(label, str):
        raise NamespaceError(f"namespace labels must be strings, got {type(label).__name__}")
    _check_text(label, f"namespace label {label!r}")


def _check_text(text: str, what: str) -> None:
    """Lone surrogates cannot be stored as UTF-8 by any backend, and control characters
    only arrive by mistake or malice (they break paths, tenant names and logs)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise NamespaceError(f"{what} is not valid Unicode text (lone surrogate)") from e
    if any(unicodedata.category(c) == "Cc" and c != "\t" for c in text):
        raise NamespaceError(f"{what} contains control characters")


def _decode(name: str) -> tuple[str, ...] | None:
    if not name.startswith(MARK):
        return None
    try:
        decoded = json.loads(name[len(MARK) :])
    except ValueError:
        return None
    if not isinstance(decoded, list) or not all(isinstance(x, str) for x in decoded):
        return None
    return tuple(decoded)


__all__ = ["MARK", "Namespace", "PathNamespace", "check_namespace", "stored_namespace"]
