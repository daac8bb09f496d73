"""The core filter language: parsing, typed errors, SQLite evaluation of every operator,
and the Weaviate translation (offline: filter objects, no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from weaviate.classes.query import Filter

from tests.filter_table import DOCS, ROWS, TEXT
from tiered_memory import HashingEmbedder, TieredMemory
from tiered_memory.backends.weaviate.filters import NoMatches, metadata_condition
from tiered_memory.backends.weaviate.mapping import meta_property
from tiered_memory.errors import UnsupportedFilterError, ValidationError
from tiered_memory.filters import (
    AllOf,
    AnyOf,
    MetadataFilter,
    Not,
    negation_normal_form,
    parse_filter,
)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("filters") / "f.db"
    with TieredMemory.embedded(path, embedder=HashingEmbedder(32)) as memory:
        memory.add_many(
            [{"id": key, "content": TEXT[key], "metadata": meta} for key, meta in DOCS.items()],
            namespace="t",
        )
        yield memory


@pytest.mark.parametrize(("spec", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_every_operator_in_sqlite(
    mem: TieredMemory, spec: dict[str, Any], expected: set[str]
) -> None:
    listed = {m.id for m in mem.list(namespace="t", metadata=spec)}
    assert listed == expected
    found = {h.id for h in mem.search("document fruit", namespace="t", k=10, metadata=spec)}
    assert found == expected  # the search path takes the same filter in its own query


def test_parse_builds_the_tree() -> None:
    assert parse_filter({"a": 1, "b": {"$in": [1, 2]}}) == (
        MetadataFilter("a", "eq", 1),
        MetadataFilter("b", "in", [1, 2]),
    )
    assert parse_filter({"$or": [{"a": 1}, {"$not": {"b": {"$gt": 2}}}]}) == (
        AnyOf((MetadataFilter("a", "eq", 1), Not(MetadataFilter("b", "gt", 2)))),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"a": {"$regex": "x"}}, r"'\$regex' on 'a'"),
        ({"$nor": [{"a": 1}]}, r"'\$nor'"),
        ({"a": {"b": 1}}, "nested object"),
        ({"a": {"$in": "xy"}}, "list of values"),
        ({"a": {"$exists": 1}}, "True or False"),
        ({"$or": []}, "non-empty list"),
        ({"a": [1, 2]}, r"\$in for alternatives"),
    ],
)
def test_unsupported_filters_raise_a_typed_error_naming_them(spec: Any, message: str) -> None:
    with pytest.raises(UnsupportedFilterError, match=message):
        parse_filter(spec)
    assert issubclass(UnsupportedFilterError, ValidationError)


def test_a_hostile_nesting_depth_is_refused() -> None:
    spec: dict[str, Any] = {"a": 1}
    for _ in range(100):
        spec = {"$not": spec}
    with pytest.raises(UnsupportedFilterError, match="deeper"):
        parse_filter(spec)


def test_negation_is_pushed_to_the_leaves() -> None:
    tree = Not(AnyOf((MetadataFilter("a", "eq", 1), Not(MetadataFilter("b", "in", [2])))))
    assert negation_normal_form(tree) == AllOf(
        (MetadataFilter("a", "ne", 1), MetadataFilter("b", "in", [2]))
    )
    assert negation_normal_form(Not(MetadataFilter("x", "exists", True))) == MetadataFilter(
        "x", "exists", False
    )
    ranged = Not(MetadataFilter("n", "gt", 2))
    assert negation_normal_form(ranged) == ranged  # no exact leaf complement


# -- Weaviate: every row translates, and the trees have the expected shape ---------------


def shape(f: Any) -> Any:
    """A Weaviate filter as comparable tuples (its classes define no equality)."""
    if f is None:
        return None
    if hasattr(f, "filters"):
        return (type(f).__name__, [shape(part) for part in f.filters])
    return (f.operator.value, f.target, f.value)


@pytest.mark.parametrize(("spec", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_every_row_translates_to_a_weaviate_filter(
    spec: dict[str, Any], expected: set[str]
) -> None:
    for condition in parse_filter(spec):
        assert metadata_condition(condition) is not None


def test_weaviate_trees() -> None:
    [either] = parse_filter({"$or": [{"color": "red"}, {"n": {"$gt": 2}}]})
    assert shape(metadata_condition(either)) == shape(
        Filter.any_of(
            [
                Filter.by_property(meta_property("color", "s")).equal("red"),
                Filter.by_property(meta_property("n", "n")).greater_than(2.0),
            ]
        )
    )
    [negated] = parse_filter({"$not": {"$and": [{"color": "red"}, {"n": {"$gt": 2}}]}})
    assert shape(metadata_condition(negated)) == shape(
        Filter.any_of(
            [
                Filter.by_property(meta_property("color", "s")).not_equal("red"),
                Filter.not_(Filter.by_property(meta_property("n", "n")).greater_than(2.0)),
            ]
        )
    )


def test_weaviate_or_survives_an_impossible_branch_and_not_everything_matches_nothing() -> None:
    [either] = parse_filter({"$or": [{"a": {"$in": []}}, {"b": 1}]})
    assert shape(metadata_condition(either)) == shape(
        Filter.by_property(meta_property("b", "n")).equal(1.0)
    )
    [neither] = parse_filter({"$or": [{"a": {"$in": []}}, {"b": {"$in": []}}]})
    with pytest.raises(NoMatches):
        metadata_condition(neither)
    [anything] = parse_filter({"$or": [{"a": {"$nin": []}}, {"b": 1}]})
    assert metadata_condition(anything) is None
