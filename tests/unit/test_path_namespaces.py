"""Path namespaces: exact round trips, no two paths share a name, and no text a caller
passes as a namespace can name one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiered_memory import HashingEmbedder, NamespaceError, PathNamespace, TieredMemory
from tiered_memory.namespaces import MARK
from tiered_memory.policy import Limits
from tiered_memory.validation import check_namespace

LIMITS = Limits()

# Labels may hold anything a namespace may (the mark included), but no control characters.
label = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), whitelist_characters="\t" + MARK),
    max_size=12,
)
paths = st.lists(label, min_size=1, max_size=4).map(tuple)


@given(paths)
def test_labels_round_trip(labels: tuple[str, ...]) -> None:
    namespace = PathNamespace(labels)
    assert namespace.labels == labels
    assert PathNamespace.parse(str(namespace)) == namespace
    assert namespace.count(MARK) == 1
    assert namespace.startswith(MARK)


@given(paths, paths)
def test_distinct_paths_never_share_a_name(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    assert (PathNamespace(a) == PathNamespace(b)) == (a == b)


@given(st.text(max_size=40))
def test_no_plain_namespace_is_a_path_namespace(text: str) -> None:
    """Whatever a caller passes as a plain string is refused or is not a path namespace."""
    try:
        accepted = check_namespace(text, LIMITS)
    except NamespaceError:
        return
    assert MARK not in accepted
    assert PathNamespace.parse(accepted) is None


@given(paths)
def test_the_name_as_plain_text_is_refused(labels: tuple[str, ...]) -> None:
    namespace = PathNamespace(labels)
    assert check_namespace(namespace, LIMITS) is namespace
    with pytest.raises(NamespaceError, match="PathNamespace"):
        check_namespace(str(namespace), LIMITS)


@given(paths, paths)
def test_descendants_prefix_selects_exactly_the_longer_paths_under_it(
    parent: tuple[str, ...], other: tuple[str, ...]
) -> None:
    prefix = PathNamespace(parent).descendants_prefix
    under = len(other) > len(parent) and other[: len(parent)] == parent
    assert PathNamespace(other).startswith(prefix) == under
    assert PathNamespace((*parent, *other)).startswith(prefix)


@pytest.mark.parametrize(
    "name",
    [
        "user-42",
        MARK,
        MARK + "not json",
        MARK + "[]",
        MARK + '{"a": 1}',
        MARK + "[1]",
        MARK + '[ "a"]',  # not the canonical spelling
        MARK + '["\\u0001"]',  # a label PathNamespace refuses
    ],
)
def test_parse_refuses_what_path_namespace_cannot_have_built(name: str) -> None:
    assert PathNamespace.parse(name) is None


@pytest.mark.parametrize("labels", [(), ("a\x01",), "user-42", ("a", 1)])
def test_bad_labels_are_refused(labels: object) -> None:
    with pytest.raises(NamespaceError):
        PathNamespace(labels)  # type: ignore[arg-type]


def test_memories_of_a_path_namespace_stay_there(tmp_path: Path) -> None:
    with TieredMemory.embedded(tmp_path / "m.db", embedder=HashingEmbedder()) as mem:
        path = PathNamespace(("user-42",))
        mem.add("The user drinks green tea", namespace=path)
        mem.add("The user drinks coffee", namespace="user-42")
        assert [m.content for m in mem.list(namespace=path)] == ["The user drinks green tea"]
        assert [m.content for m in mem.list(namespace="user-42")] == ["The user drinks coffee"]
        with pytest.raises(NamespaceError):
            mem.list(namespace=str(path))
        names = mem.namespaces()
        assert sorted(PathNamespace.parse(n) is not None for n in names) == [False, True]
