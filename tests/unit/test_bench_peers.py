"""The scale benchmark's peer harness: exact answers and recall@10, the bandwidth
bound, a missing library's row, and one peer measured in its own process. Tiny sizes:
no store is built at scale here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from benchmarks import peers, scale
from benchmarks.peers import (
    PEERS,
    WARMUP,
    Peer,
    exact_top_k,
    fixed_cost_ms,
    parse_peers,
    recall_at_k,
    run_peer,
    run_peers,
    scan_bandwidth,
    scan_lower_bound_ms,
    table,
)


def unit_rows(n: int, dim: int, seed: int = 0) -> Any:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_recall_counts_the_share_of_the_exact_top_k_found_in_any_order() -> None:
    truth = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    assert recall_at_k([[4, 3, 2, 1], [5, 6, 7, 8]], truth, k=4) == 1.0
    assert recall_at_k([[1, 2, 9, 9], [8, 0, 0, 0]], truth, k=4) == pytest.approx((2 + 1) / 8)
    # only the first k returned count
    assert recall_at_k([[9, 9, 9, 9, 1], [5, 6, 7, 8]], truth, k=4) == 0.5


def test_exact_top_k_in_chunks_matches_a_full_sort_by_cosine() -> None:
    vectors = unit_rows(53, 8)
    queries = unit_rows(6, 8, seed=1) * 3.0  # not unit: normalised inside
    expected = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    np.testing.assert_array_equal(exact_top_k(vectors, queries, k=10, chunk=7), expected)


def test_the_bandwidth_is_a_plausible_rate_and_the_bound_is_bytes_over_it() -> None:
    measured = scan_bandwidth(mb=8, repeats=2, dim=16)
    assert 0.05 < measured["gb_per_s"] < 2000
    assert measured["gb_per_s"] == max(
        measured[k] for k in ("sum_gb_per_s", "matvec_gb_per_s", "copy_gb_per_s")
    )
    # 1M x 384 float32 = 1.536 GB: one second at 1.536 GB/s
    assert scan_lower_bound_ms(1_000_000, 384, 1.536) == pytest.approx(1000.0)


def test_a_peer_whose_library_is_missing_gets_a_row_saying_so(tmp_path: Path) -> None:
    absent = Peer("absent", "Absent DB", ("no_such_module_for_tiered_memory",), peers.NumpyPeer)
    row = run_peer(absent, tmp_path, n=10, timeout=5)
    assert row["status"] == "not installed"
    assert list(tmp_path.iterdir()) == []  # nothing was started or written

    entry = result_entry([row])
    assert "| 10 | Absent DB | not installed |" in table([entry])


def test_a_peer_below_its_minimum_size_is_skipped(tmp_path: Path) -> None:
    row = run_peer(PEERS["lancedb"], tmp_path, n=100, timeout=5)
    assert row["status"].startswith(("skipped below", "not installed"))


def test_unknown_peer_names_are_refused_with_the_choices() -> None:
    with pytest.raises(SystemExit, match="chroma"):
        parse_peers("numpy,chromadb")
    assert parse_peers("none") == []
    assert [p.name for p in parse_peers("all")] == list(PEERS)
    assert [p.name for p in parse_peers(" hnswlib , numpy ")] == ["hnswlib", "numpy"]


@pytest.mark.slow
def test_numpy_peer_measured_in_its_own_process_finds_the_exact_answers(tmp_path: Path) -> None:
    vectors = unit_rows(300, 16)
    queries = unit_rows(WARMUP + 4, 16, seed=2)
    texts = [f"memory {i}\nwith a newline" for i in range(300)]
    found = run_peers(
        [PEERS["numpy"]], vectors, texts, queries, timeout=120, folder=tmp_path, bandwidth_mb=8
    )
    (row,) = found["rows"]
    assert row["status"] == "ok", row
    assert row["recall_at_10"] == 1.0
    assert row["queries"] == 4
    assert row["disk_bytes_per_memory"] == pytest.approx(16 * 4, rel=0.1)  # the saved .npy
    assert found["scan_bound_ms"] > 0
    assert list(tmp_path.iterdir()) == []  # the shared data and the store are removed


def test_fixed_cost_is_recall_p95_minus_vector_search_p95() -> None:
    assert fixed_cost_ms({"recall_p95_ms": 12.5, "vector_search_p95_ms": 4.0}) == 8.5


def result_entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ours = {
        "add_off_per_s": 5000.0,
        "rss_mb": 12.0,
        "disk_bytes_per_memory": 2600.0,
        "vector_search_p50_ms": 1.0,
        "vector_search_p95_ms": 2.0,
        "vector_search_recall_at_10": 1.0,
        "search_p50_ms": 3.0,
        "search_p95_ms": 4.0,
        "recall_p50_ms": 5.0,
        "recall_p95_ms": 6.0,
        "fixed_cost_ms": 4.0,
    }
    return {
        "n": 10,
        "dim": 384,
        "ours": ours,
        "peers": rows,
        "bandwidth": {"gb_per_s": 10.0},
        "scan_bound_ms": 0.0004,
    }


def test_the_table_has_our_rows_the_peers_and_the_scan_bound() -> None:
    ok = {
        "name": "numpy",
        "label": "numpy brute force (exact)",
        "status": "ok",
        "search_p50_ms": 0.5,
        "search_p95_ms": 0.7,
        "recall_at_10": 1.0,
        "add_per_s": 1e6,
        "rss_mb": 1.0,
        "disk_bytes_per_memory": 1536.0,
    }
    text = table([result_entry([ok])])
    assert (
        "| 10 | tiered-memory vector search (k=10), as recall ranks | 1.00 | 2.00 | 1.00 |" in text
    )
    assert "exact scores" not in text  # a run that timed only the one variant
    for ours_row in ("vector search (k=10)", "search(k=10), hybrid", "recall(1000 tokens)"):
        assert text.count(f"tiered-memory {ours_row}") == 1
    assert "| 10 | numpy brute force (exact) | 0.50 | 0.70 | 1.00 | 1,000,000 |" in text
    assert "exact-scan bound: float32 vectors / 10.0 GB/s" in text
    assert "recall p95 − vector search p95) = 4.0 ms" in text


def test_the_exact_variant_is_a_labelled_row_of_its_own() -> None:
    entry = result_entry([])
    entry["ours"].update(
        vector_search_exact_p50_ms=1.5,
        vector_search_exact_p95_ms=2.5,
        vector_search_exact_recall_at_10=0.99,
    )
    text = table([entry])
    assert "| 10 | tiered-memory vector search (k=10), as recall ranks | 1.00 | 2.00 |" in text
    assert "| 10 | tiered-memory vector search (k=10), exact scores | 1.50 | 2.50 | 0.99 |" in text
    assert "recall p95 − vector search p95) = 4.0 ms" in text  # from the recall's variant


async def test_the_vector_search_is_timed_as_recall_asks_for_it_then_exact() -> None:
    """The fixed cost is the recall's time beyond its own vector search, which asks for
    the index's cosines (`exact_scores=False`); the exact default is a second loop."""
    asked: list[bool] = []

    class Store:
        async def vector_search(
            self, *args: object, exact_scores: bool = True, **kw: object
        ) -> list[SimpleNamespace]:
            asked.append(exact_scores)
            return [SimpleNamespace(memory=SimpleNamespace(id="a"))]

    mem = SimpleNamespace(store=Store())
    queries = np.zeros((WARMUP + 3, 4), dtype=np.float32)
    out = await scale._vector_search(mem, queries, {"a": 0})  # type: ignore[arg-type]
    assert asked == [False] * len(queries) + [True] * len(queries)
    assert len(out["vector_search_found"]) == len(out["vector_search_exact_found"]) == 3
    assert out["vector_search_p95_ms"] >= out["vector_search_p50_ms"] >= 0
