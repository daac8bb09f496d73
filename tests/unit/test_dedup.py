"""Deduplication on add (`dedup`): a batch screened against stored neighbours and
against its own earlier items, in order."""

from __future__ import annotations

import numpy as np
import pytest

from tests.blas import blas_threads_of
from tiered_memory.dedup import Screened, screen, threshold


def vec(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def test_the_threshold_is_the_policys_unless_the_call_or_the_policy_says_no() -> None:
    assert threshold(0.95, None) == 0.95
    assert threshold(0.95, True) == 0.95
    assert threshold(0.95, False) is None
    assert threshold(None, True) is None


def test_an_item_near_a_stored_memory_is_its_duplicate() -> None:
    stored = [[("old", 0.97), ("other", 0.4)], [("old", 0.5)]]
    out = screen(["a", "b"], [vec(1, 0), vec(0, 1)], stored, k=3, threshold=0.95)
    assert out[0] == Screened(duplicate_of="old", near=[("old", 0.97), ("other", 0.4)])
    assert out[1].duplicate_of is None
    # a strengthened "old" instead of being stored: it is no neighbour of b
    assert out[1].near == [("old", 0.5)]


def test_a_batch_holding_one_fact_twice_keeps_the_first() -> None:
    same = vec(3, 4)
    out = screen(["a", "b", "c"], [same, same * 2, vec(-4, 3)], [[], [], []], k=1, threshold=0.95)
    assert [s.duplicate_of for s in out] == [None, "a", None]
    assert out[1].near[0] == ("a", pytest.approx(1.0))
    # a duplicate is not a neighbour of later items: c sees a, not b
    assert [other for other, _ in out[2].near] == ["a"]


def test_without_a_threshold_nothing_merges_but_neighbours_are_found() -> None:
    same = vec(1, 1)
    out = screen(["a", "b"], [same, same], [[("x", 0.99)], [("x", 0.99)]], k=2, threshold=None)
    assert [s.duplicate_of for s in out] == [None, None]
    # b's neighbours: a (accepted before it, the same vector) and the stored x, best first
    assert [other for other, _ in out[1].near] == ["a", "x"]


def test_no_neighbours_are_looked_for_when_k_is_0() -> None:
    same = vec(1, 0)
    out = screen(["a", "b"], [same, same], [], k=0, threshold=None)
    assert out == [Screened(None, []), Screened(None, [])]


def test_a_replacing_item_is_never_merged_and_stale_vectors_are_no_neighbours() -> None:
    """`b` replaces the stored memory of its id: its old vector is no one's neighbour,
    and `b` itself is stored even when it is near another memory."""
    stored = [[("b", 0.99), ("c", 0.5)], [("c", 0.99)]]
    out = screen(["a", "b"], [vec(1, 0), vec(0, 1)], stored, k=3, threshold=0.95, replacing={"b"})
    assert out[0].near == [("c", 0.5)]
    assert out[0].duplicate_of is None
    assert out[1].duplicate_of is None
    assert out[1].near[0] == ("c", 0.99)


def test_the_batch_is_compared_with_itself_on_one_blas_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The products of a batch with its earlier items are small (a block by the
    batch): on one BLAS thread, where a second one spun on a core add_many's graph
    search and SQLite wanted. The screening is the same."""
    rng = np.random.default_rng(2)
    vectors = list(rng.normal(size=(300, 8)).astype(np.float32))
    vectors[290] = vectors[3] * 2  # a duplicate in the second block
    ids = [f"m{i}" for i in range(300)]
    stored: list[list[tuple[str, float]]] = [[("s", 0.5)] for _ in ids]
    want = screen(ids, vectors, stored, k=3, threshold=0.95)
    threads = blas_threads_of(monkeypatch)
    assert screen(ids, vectors, stored, k=3, threshold=0.95) == want
    assert want[290].duplicate_of == "m3"
    assert len(threads) == 2  # one product per block of 256
    assert set(threads) == {1}
