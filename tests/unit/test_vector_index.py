"""The embedded store's cached partition (`backends.sqlite.vectors.VectorIndex`): its
rows and ids stay in step through every kind of change, and its ids cost the garbage
collector nothing (a list of a million ids was walked by each of its full passes)."""

from __future__ import annotations

import gc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory.backends.sqlite.vectors import VectorIndex

DIM = 4


def _vector(i: int) -> np.ndarray:
    return np.asarray([1.0, i % 7, i % 5, i % 3], dtype=np.float32)


def _consistent(index: VectorIndex, want: dict[str, int]) -> None:
    """`index` holds exactly the ids of `want` (id -> the number its vector was made
    from), each row's vector its own, and finds each by its exact vector."""
    assert sorted(index.ids) == sorted(want)
    assert index.size == len(want)
    for memory_id, i in want.items():
        assert memory_id in index
        v = _vector(i)
        cosines = index.cosines(v / np.linalg.norm(v), [memory_id])
        assert cosines[memory_id] == np.float32(1.0) or abs(cosines[memory_id] - 1.0) < 1e-6


_ops = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "take", "discard"]), st.integers(0, 40)),
    max_size=80,
)


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_rows_and_ids_stay_in_step(ops: list[tuple[str, int]]) -> None:
    index = VectorIndex.build(DIM, [], np.zeros((0, DIM), np.float32), [], [])
    want: dict[str, int] = {}
    moved = VectorIndex(DIM)
    moved_want: dict[str, int] = {}
    for op, i in ops:
        key = f"m{i}"
        if op == "add":
            index.add(key, _vector(i))
            want[key] = i
        elif op == "remove":
            index.remove(key)
            want.pop(key, None)
        elif op == "take":
            taken = index.take([key, f"m{i + 1}"])
            for k in taken.ids:
                moved_want[k] = want.pop(k)
            moved.extend(taken)
        else:
            index.discard([key])
            want.pop(key, None)
        _consistent(index, want)
    _consistent(moved, moved_want)


def test_the_ids_are_not_walked_by_the_collector() -> None:
    n = 5_000
    ids = [f"m{i}" for i in range(n)]
    index = VectorIndex.build(DIM, ids, np.ones((n, DIM), np.float32), [0] * n, [0] * n)
    index.add("one-more", _vector(1))
    gc.collect()
    assert not gc.is_tracked(index._ids)
    assert index.size == n + 1
    assert index.ids[:2] == ["m0", "m1"]
