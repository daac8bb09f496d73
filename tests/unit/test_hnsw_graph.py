"""The faiss HNSW graph keyed by pks (`backends.sqlite.hnsw.Graph`): what faiss lacks and
the wrapper makes up for (pks as keys, removal as tombstones left out of answers, a scan
of a small graph), and its file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiered_memory.backends.sqlite import hnsw
from tiered_memory.backends.sqlite.hnsw import Graph

pytestmark = pytest.mark.skipif(
    not hnsw.available(), reason="faiss (the ann extra) is not installed"
)

DIM = 16


def _units(n: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _graph(n: int, *, walked: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Graph, np.ndarray]:
    """A graph of `n` rows under the odd pks 1, 3, 5, ...; `walked`: searched through
    the HNSW graph, not by a scan, whatever its size."""
    if walked:
        monkeypatch.setattr(hnsw, "EXHAUSTIVE_ROWS", 0)
    graph = Graph.empty(DIM)
    rows = _units(n)
    keys = np.arange(1, 2 * n, 2, dtype=np.uint64)
    for start in range(0, n, 37):  # in steps, as the fold adds them
        graph.add(keys[start : start + 37], rows[start : start + 37])
    return graph, rows


def _exact(rows: np.ndarray, keys: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    order = np.argsort(-(rows @ query), kind="stable")[:k]
    return [int(keys[i]) for i in order]


@pytest.mark.parametrize("walked", [True, False])
def test_answers_are_the_nearest_pks_with_their_cosines(
    walked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, rows = _graph(500, walked=walked, monkeypatch=monkeypatch)
    keys = np.arange(1, 1000, 2, dtype=np.uint64)
    queries = _units(20, seed=1)
    found, scores, counts = graph.search(queries, 5, beam=64)
    assert counts.tolist() == [5] * 20
    hits = sum(
        len(set(found[i].tolist()) & set(_exact(rows, keys, queries[i], 5))) for i in range(20)
    )
    assert hits >= 98  # of 100: the graph of 500 rows misses at most a couple
    for i in range(20):
        positions = (found[i].astype(np.int64) - 1) // 2
        assert np.allclose(scores[i], rows[positions] @ queries[i], atol=2e-3)  # float16 rows
        assert list(scores[i]) == sorted(scores[i], reverse=True)


@pytest.mark.parametrize("walked", [True, False])
def test_a_removed_row_is_never_an_answer(walked: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, rows = _graph(300, walked=walked, monkeypatch=monkeypatch)
    gone = np.arange(1, 600, 4, dtype=np.uint64)  # every other row: 150
    assert graph.remove(gone) == 150
    assert graph.remove(gone[:10]) == 0  # already removed
    assert graph.remove(np.array([2, 10_000], dtype=np.uint64)) == 0  # never held
    assert len(graph) == 150
    assert graph.removed == 150
    # each query is a removed row itself: its nearest live rows come back, never it
    found, _, counts = graph.search(rows[::2][:20], 10, beam=64)
    assert counts.tolist() == [10] * 20
    assert not set(found.ravel().tolist()) & set(gone.tolist())
    assert graph.contains(gone).sum() == 0
    assert graph.contains(np.array([3, 7], dtype=np.uint64)).all()
    assert np.array_equal(graph.keys(), np.arange(3, 600, 4, dtype=np.uint64))


def test_a_graph_with_fewer_live_rows_than_asked_pads_its_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph, _ = _graph(30, walked=True, monkeypatch=monkeypatch)
    graph.remove(np.arange(1, 50, 2, dtype=np.uint64))  # 25 of 30
    found, scores, counts = graph.search(_units(3, seed=2), 10, beam=64)
    assert counts.tolist() == [5] * 3
    assert set(found[:, :5].ravel().tolist()) <= {51, 53, 55, 57, 59}
    assert np.isneginf(scores[:, 5:]).all()


def test_rows_come_back_as_stored_in_float16() -> None:
    graph = Graph.empty(DIM)
    rows = _units(50)
    graph.add(np.arange(10, 60, dtype=np.uint64), rows)
    got = graph.get(np.array([12, 10, 59], dtype=np.uint64))
    assert np.allclose(got, rows[[2, 0, 49]], atol=1e-3)
    assert graph.get(np.zeros(0, dtype=np.uint64)).shape == (0, DIM)
    graph.remove(np.array([12], dtype=np.uint64))
    with pytest.raises(KeyError):
        graph.get(np.array([12], dtype=np.uint64))


def test_keys_must_ascend_above_the_graph_s_live_ones() -> None:
    graph = Graph.empty(DIM)
    graph.add(np.array([5, 9], dtype=np.uint64), _units(2))
    with pytest.raises(ValueError, match="ascend"):
        graph.add(np.array([9], dtype=np.uint64), _units(1))


@pytest.mark.parametrize("walked", [True, False])
def test_a_removed_row_s_pk_given_out_again_is_the_new_row(
    walked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite gives a new row max(pk) + 1 of the rows left: once the largest rows are
    deleted, their pks come back for new rows, which the graph then holds under the
    same keys as its removed ones."""
    graph, rows = _graph(100, walked=walked, monkeypatch=monkeypatch)  # pks 1, 3, ..., 199
    graph.remove(np.array([195, 197, 199], dtype=np.uint64))
    new_rows = _units(3, seed=9)
    graph.add(np.array([194, 195, 196], dtype=np.uint64), new_rows)
    keys = np.array([193, 194, 195, 196, 197, 199], dtype=np.uint64)
    assert graph.contains(keys).tolist() == [True, True, True, True, False, False]
    assert np.allclose(graph.get(keys[1:4]), new_rows, atol=1e-3)
    found, scores, _ = graph.search(new_rows, 1, beam=64)
    assert found[:, 0].tolist() == [194, 195, 196]
    assert np.allclose(scores[:, 0], 1.0, atol=2e-3)
    # the removed 195's old row is never an answer, even to itself
    _, old_scores, _ = graph.search(rows[97:98], 5, beam=64)
    assert old_scores[0, 0] < 0.99
    assert len(graph) == 100
    assert graph.removed == 3
    assert graph.remove(np.array([195], dtype=np.uint64)) == 1  # the new row
    assert graph.contains(np.array([194, 195, 196], dtype=np.uint64)).tolist() == [
        True,
        False,
        True,
    ]
    graph.add(np.array([197], dtype=np.uint64), _units(1, seed=10))  # past the new rows
    assert len(graph) == 100
    assert np.array_equal(
        graph.keys(), np.array([*range(1, 195, 2), 194, 196, 197], dtype=np.uint64)
    )


def test_many_small_adds_keep_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys grow in place with room to spare (a fold adds 16 rows a step)."""
    graph, _ = _graph(2000, walked=True, monkeypatch=monkeypatch)
    assert len(graph) == 2000
    assert np.array_equal(graph.keys(), np.arange(1, 4000, 2, dtype=np.uint64))


def test_a_saved_graph_loads_with_its_keys_and_removals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, _ = _graph(400, walked=True, monkeypatch=monkeypatch)
    graph.remove(np.arange(1, 200, 2, dtype=np.uint64))
    queries = _units(10, seed=3)
    before = graph.search(queries, 8, beam=64)
    graph.save(tmp_path / "g.hnsw")
    loaded = Graph.load(tmp_path / "g.hnsw")
    assert len(loaded) == 300
    assert loaded.removed == 100
    assert loaded.dimension == DIM
    after = loaded.search(queries, 8, beam=64)
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a, b)
    loaded.add(np.array([10_001], dtype=np.uint64), _units(1, seed=4))  # it grows again
    assert loaded.contains(np.array([10_001], dtype=np.uint64)).all()


@pytest.mark.parametrize("content", [b"", b"tm-hnsw1", b"usearch graph", b"tm-hnsw1\x93NUMPY"])
def test_a_file_it_did_not_write_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "g.hnsw"
    path.write_bytes(content)
    with pytest.raises((ValueError, EOFError, RuntimeError, OSError)):
        Graph.load(path)
