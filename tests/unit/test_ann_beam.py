"""The beam of the HNSW graph's searches (`backends.sqlite.ann`): a single search of a
large graph widens it (at 1M rows a beam of 64 lost whole queries: recall@10 0.95-1.0
over builds); add_many's batch search keeps the beam it had. A stand-in graph records
what each search asked the graph for, so no million-row build is needed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tiered_memory.backends.sqlite import ann


class _Graph:
    """Stands for a `hnsw.Graph` of `rows` rows: records each search's beam, and answers
    with `count` made-up keys."""

    dimension = 4
    exhaustive = False

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.calls: list[int] = []

    def __len__(self) -> int:
        return self.rows

    def search(self, queries: Any, count: int, beam: int) -> Any:
        self.calls.append(beam)
        n = queries.shape[0]
        keys = np.tile(np.arange(1, count + 1, dtype=np.uint64), (n, 1))
        return keys, np.zeros((n, count), dtype=np.float32), np.full(n, count)


def _searched(rows: int, queries: int, count: int = 20) -> int:
    graph = _Graph(rows)
    index = ann.AnnIndex(graph, 0, rows)  # type: ignore[arg-type]
    units = np.eye(queries, 4, dtype=np.float32)
    keys, _ = index.search_scored(units, count)
    assert [k.size for k in keys] == [count] * queries
    (call,) = graph.calls
    return call


@pytest.mark.parametrize(
    ("rows", "beam"),
    [(50_000, 48), (100_000, 48), (200_000, 53), (250_000, 64), (1_000_000, 128)],
)
def test_a_single_search_s_beam_grows_with_the_graph(rows: int, beam: int) -> None:
    """The benchmark's 100k graph needs no more than 48 for recall@10 0.99+; 1M needs
    128 (whole queries were lost at 64)."""
    assert _searched(rows, 1) == beam


def test_a_single_search_asks_for_at_least_its_candidates() -> None:
    assert _searched(1_000_000, 1, count=300) == 300


def test_the_batch_search_keeps_its_beam_at_any_size() -> None:
    assert _searched(1_000_000, 3) == ann.EXPANSION_SEARCH_MIN
    assert _searched(100_000, 3) == ann.EXPANSION_SEARCH_MIN


def test_the_beam_grows_by_half_per_doubling_of_the_graph() -> None:
    assert ann._expansion(10, 4_000_000) == 192
    assert ann._expansion(10, 500_000) == 96
    assert ann._expansion(10, 0) == ann.EXPANSION_SEARCH_MIN
