"""Input checks and the sync runner that works inside a running event loop."""

from __future__ import annotations

import asyncio
import math

import pytest

from tiered_memory import DimensionMismatchError, NamespaceError, ValidationError
from tiered_memory.models import MemoryType, Tier
from tiered_memory.policy import Limits
from tiered_memory.ports import MetadataFilter
from tiered_memory.runner import LoopThread
from tiered_memory.validation import (
    check_budget,
    check_content,
    check_filters,
    check_importance,
    check_metadata,
    check_namespace,
    check_vector,
)

L = Limits()


@pytest.mark.parametrize(
    "bad", ["", "   ", "\n\t", "a\x00b", "x" * (L.max_content_chars + 1), "lone \ud800 surrogate"]
)
def test_bad_content_is_rejected(bad: str) -> None:
    with pytest.raises(ValidationError):
        check_content(bad, L)


@pytest.mark.parametrize("bad", ["", " ", "a\x00", "n" * 300, "\udfff"])
def test_bad_namespace_is_rejected(bad: str) -> None:
    with pytest.raises(NamespaceError):
        check_namespace(bad, L)


def test_hostile_but_valid_namespace_is_kept_literally() -> None:
    ns = "'; DROP TABLE memories; -- }) DETACH DELETE n // \u202e"
    assert check_namespace(ns, L) == ns


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf], [], "abc", [[1.0]]])
def test_bad_vectors_are_rejected(bad: object) -> None:
    with pytest.raises(ValidationError):
        check_vector(bad, None)


def test_wrong_dimension_is_a_dimension_error() -> None:
    with pytest.raises(DimensionMismatchError, match="dimension 2"):
        check_vector([1.0, 2.0], 3)


@pytest.mark.parametrize("bad", [{1: "x"}, {"x": math.nan}, {"x": object()}, ["not", "a dict"]])
def test_bad_metadata_is_rejected(bad: object) -> None:
    with pytest.raises(ValidationError):
        check_metadata(bad, L)  # type: ignore[arg-type]


def test_metadata_is_normalised_to_json() -> None:
    assert check_metadata({"a": (1, 2), "b": None}, L) == {"a": [1, 2], "b": None}


@pytest.mark.parametrize(
    "bad", [{"n": 2**63}, {"n": -(2**63) - 1}, {"n": [1, 2**70]}, {"n": {"deep": [10**30]}}]
)
def test_metadata_integers_beyond_64_bits_are_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="64-bit"):
        check_metadata(bad, L)


def test_metadata_integers_at_the_64_bit_limits_and_nul_text_are_kept() -> None:
    edge = {"max": 2**63 - 1, "min": -(2**63), "big": 1e300, "nul": "a\x00b", "a\x00k": True}
    assert check_metadata(edge, L) == edge


@pytest.mark.parametrize(
    "bad",
    [
        {"n": 2**63},
        {"n": -(2**63) - 1},
        [MetadataFilter("n", "gt", 2**64)],
        [MetadataFilter("n", "in", [1, 2**70])],
        [MetadataFilter("n", "nin", (10**30,))],
        [MetadataFilter("n", "eq", math.nan)],
    ],
)
def test_metadata_filter_values_beyond_64_bits_or_nan_are_rejected(bad: object) -> None:
    with pytest.raises(ValidationError):
        check_filters(bad)


def test_metadata_filters_at_the_64_bit_limits_and_with_nul_are_kept() -> None:
    filters = check_filters({"max": 2**63 - 1, "min": -(2**63), "nul": "a\x00b"})
    assert [f.value for f in filters] == [2**63 - 1, -(2**63), "a\x00b"]


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, True, "0.5"])
def test_importance_range(bad: object) -> None:
    with pytest.raises(ValidationError):
        check_importance(bad)  # type: ignore[arg-type]


def test_budget_must_be_non_negative_int() -> None:
    assert check_budget(0) == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(ValidationError):
            check_budget(bad)  # type: ignore[arg-type]


def test_unknown_tier_and_type_are_typed_errors() -> None:
    assert Tier.parse("WARM") is Tier.WARM
    assert MemoryType.parse("Factual") is MemoryType.FACTUAL
    with pytest.raises(ValidationError, match="unknown tier"):
        Tier.parse("lukewarm")
    with pytest.raises(ValidationError, match="unknown memory type"):
        MemoryType.parse("dream")


def test_loop_thread_runs_coroutines_from_inside_a_running_loop() -> None:
    runner = LoopThread()

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def notebook_cell() -> int:  # like Jupyter: a loop is already running here
        return runner.run(answer())

    try:
        assert asyncio.run(notebook_cell()) == 42
    finally:
        runner.stop()
