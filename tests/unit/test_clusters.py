"""Near-duplicate groups computed a tile at a time (`clusters`) are the groups of the
whole similarity matrix (the rule as first written, kept here as the reference), and
no matrix grows with the number of memories."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from tests.blas import blas_threads, blas_threads_of
from tiered_memory import clusters


def dense_groups(
    ids: Sequence[str],
    vectors: npt.ArrayLike,
    *,
    min_similarity: float,
    max_group: int,
    reach: int | None = None,
) -> list[list[str]]:
    """The rule over the full n x n matrix (clusters.py before it worked in tiles); with
    a reach, pairs further apart than `reach` places are masked out."""
    if len(ids) < 2:
        return []
    matrix = np.array(vectors, dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -1.0)
    if reach is not None:
        pos = np.arange(len(ids))
        sims[np.abs(pos[:, None] - pos[None, :]) > reach] = -1.0
    close = sims >= min_similarity
    used: set[int] = set()
    groups: list[list[str]] = []
    for i in (int(x) for x in np.flatnonzero(close.any(axis=1))):
        if i in used:
            continue
        candidates = [int(j) for j in np.flatnonzero(close[i]) if int(j) not in used]
        near = sorted(candidates, key=lambda j: -float(sims[i, j]))[: max_group - 1]
        if near:
            members = [i, *near]
            used.update(members)
            groups.append([ids[j] for j in members])
    return groups


def clustered(seed: int, n: int, dim: int = 24) -> tuple[list[str], npt.NDArray[np.float32]]:
    """Random vectors, a third of them noisy copies of a few centres: groups of every
    size, some larger than max_group, members far apart in the order."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 12), dim))
    vectors = rng.normal(size=(n, dim))
    copies = rng.random(n) < 0.35
    which = rng.integers(0, len(centres), size=n)
    noise = rng.uniform(0.05, 0.6, size=(n, 1))
    vectors[copies] = centres[which[copies]] + noise[copies] * rng.normal(size=(n, dim))[copies]
    return [f"m{i:04d}" for i in range(n)], vectors.astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reach", [None, 1, 7, 40])
def test_tiles_give_the_groups_of_the_whole_matrix(
    seed: int, reach: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clusters, "BLOCK", 16)  # many tiles, partial ones at the edges
    ids, vectors = clustered(seed, 150)
    found = 0
    for min_similarity, max_group in [(0.7, 5), (0.5, 3), (0.9, 2)]:
        want = dense_groups(
            ids, vectors, min_similarity=min_similarity, max_group=max_group, reach=reach
        )
        got = clusters.near_duplicate_groups(
            ids, vectors, min_similarity=min_similarity, max_group=max_group, reach=reach
        )
        assert got == want
        found += len(want)
    assert found or reach == 1  # the data has groups to find (neighbours rarely are)


@pytest.mark.parametrize("reach", [None, 5, 30])
@pytest.mark.parametrize("feed", [1, 7, 64])
def test_feeding_a_block_at_a_time_gives_the_same_groups(
    reach: int | None, feed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clusters, "BLOCK", 8)
    ids, vectors = clustered(11, 200)
    want = dense_groups(ids, vectors, min_similarity=0.6, max_group=4, reach=reach)
    grouper = clusters.Grouper(min_similarity=0.6, max_group=4, reach=reach)
    got: list[list[str]] = []
    for start in range(0, len(ids), feed):
        got += grouper.feed(ids[start : start + feed], vectors[start : start + feed])
    got += grouper.close()
    assert got == want


def test_memory_stays_bounded_by_the_block_and_the_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """No similarity matrix is larger than BLOCK x BLOCK, and a grouper with a reach
    keeps at most reach + one feed of vectors, however many memories go through."""
    monkeypatch.setattr(clusters, "BLOCK", 32)
    shapes: list[tuple[int, ...]] = []
    real_tile = clusters.tile

    def spy(rows: clusters.Matrix, cols: clusters.Matrix) -> clusters.Matrix:
        out = real_tile(rows, cols)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(clusters, "tile", spy)
    ids, vectors = clustered(5, 3000, dim=8)
    grouper = clusters.Grouper(min_similarity=0.8, max_group=5, reach=50)
    held = 0
    for start in range(0, len(ids), 100):
        grouper.feed(ids[start : start + 100], vectors[start : start + 100])
        held = max(held, 0 if grouper._vectors is None else len(grouper._vectors))
        assert len(grouper._ids) <= 50 + 100 + 2
        assert len(grouper._near) <= 50 + 100
    grouper.close()
    assert max(r * c for r, c in shapes) <= 32 * 32
    assert held <= 50
    assert len(shapes) > 100  # 3000 rows went through in tiles


def test_fewer_than_two_memories_make_no_group() -> None:
    assert (
        clusters.near_duplicate_groups([], np.zeros((0, 4)), min_similarity=0.5, max_group=3) == []
    )
    assert (
        clusters.near_duplicate_groups(["a"], [[1.0, 0.0]], min_similarity=0.5, max_group=3) == []
    )
    with pytest.raises(ValueError, match="reach"):
        clusters.Grouper(min_similarity=0.5, max_group=3, reach=0)


def test_the_tiles_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grouping multiplies small tiles, which OpenBLAS split across every core: on a
    busy 2-core machine a tile took 2-30x longer on two threads than on one. Where
    threadpoolctl can see the BLAS library, each tile runs on one thread, and the
    groups are the same."""
    rng = np.random.default_rng(4)
    base = rng.normal(size=(40, 16)).astype(np.float32)
    vectors = np.concatenate([base, base + rng.normal(scale=0.01, size=base.shape)])
    ids = [f"m{i}" for i in range(len(vectors))]
    want = clusters.near_duplicate_groups(ids, vectors, min_similarity=0.9, max_group=4, reach=50)
    threads = blas_threads_of(monkeypatch)
    got = clusters.near_duplicate_groups(ids, vectors, min_similarity=0.9, max_group=4, reach=50)
    assert got == want
    assert len(want) == 40
    assert threads
    assert set(threads) == {1}


def test_overlapping_limits_in_two_threads_restore_the_blas_threads() -> None:
    """The limit is the process's: a sweep's grouping and an add_many's products may
    hold it at once, from two threads, and leave in either order. Each restoring what
    it saw on entry left BLAS on one thread for good when the first to enter left
    first (the second restored the first's limit). The last to leave restores."""
    before = blas_threads()  # skips where threadpoolctl sees no BLAS library
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with clusters.one_blas_thread():
            first_in.set()
            second_in.wait(5)
            seen.append(blas_threads())
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with clusters.one_blas_thread():
            second_in.set()
            first_out.wait(5)
            seen.append(blas_threads())  # the first left; this one still holds it

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [1, 1]
    assert blas_threads() == before
