"""Memories per (namespace, tier) (`backends.sqlite.tier_rows`): kept by triggers
through every write, filled when an older file is opened, and used to steer a vector
search in a namespace with an HNSW graph (no graph search for an empty tier; a tier
that is a small share of the graph is scanned or asked for enough candidates at once)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from tests.sql_trace import traced
from tiered_memory.backends.sqlite import ann, vector_table
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import Memory, Tier
from tiered_memory.ports import SearchFilter

from .tier_counts import kept_tier_counts

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DIM = 8


def _memories(n: int, ns: str, start: int = 0) -> list[Memory]:
    vectors = np.random.default_rng(start).normal(size=(n, DIM))
    return [
        Memory(
            id=f"m{start + i:05d}",
            namespace=ns,
            content=f"note {start + i}",
            embedding=[float(x) for x in vectors[i]],
            created_at=T0 + timedelta(minutes=start + i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(n)
    ]


def _counted(path: Path) -> dict[tuple[str, str], int]:
    conn = sqlite3.connect(path)
    try:
        return kept_tier_counts(conn)
    finally:
        conn.close()


async def test_the_counts_follow_every_write(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await SQLiteMemoryStore.open(path)
    try:
        await store.put_many("a", _memories(40, "a"))
        await store.put_many("b", _memories(7, "b", start=100))
        assert _counted(path) == {("a", "hot"): 40, ("b", "hot"): 7}
        await store.set_tier("a", [f"m{i:05d}" for i in range(10)], Tier.COLD, T0)
        await store.set_tier("a", [f"m{i:05d}" for i in range(10, 15)], Tier.WARM, T0)
        await store.delete_many("a", [f"m{i:05d}" for i in range(35, 40)])
        assert _counted(path) == {
            ("a", "hot"): 20,
            ("a", "warm"): 5,
            ("a", "cold"): 10,
            ("b", "hot"): 7,
        }
        other = sqlite3.connect(path)  # another writer, without this library
        with other:
            other.execute("UPDATE memories SET tier = 'warm' WHERE namespace = 'b'")
        other.close()
        assert _counted(path)[("b", "warm")] == 7
        await store.clear("a")
        assert _counted(path) == {("b", "warm"): 7}
    finally:
        await store.close()


async def test_a_file_from_before_the_counts_gets_them_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await SQLiteMemoryStore.open(path)
    await store.put_many("a", _memories(12, "a"))
    await store.set_tier("a", ["m00000", "m00001"], Tier.COLD, T0)
    await store.close()
    conn = sqlite3.connect(path)
    with conn:  # as an older library left it: no table, no triggers, no mark
        for trigger in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER memories_tier_rows_{trigger}")
        conn.execute("DROP TABLE tier_rows")
        conn.execute("DELETE FROM meta WHERE key = 'tier_rows'")
    conn.close()
    store = await SQLiteMemoryStore.open(path)
    await store.close()
    assert _counted(path) == {("a", "hot"): 10, ("a", "cold"): 2}


class _GraphCalls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts: list[int] = []
        search = ann.AnnIndex.search_scored

        def counting(
            index: ann.AnnIndex, queries: np.ndarray, count: int
        ) -> tuple[list[ann.Keys], list[np.ndarray]]:
            self.counts.append(count)
            return search(index, queries, count)

        monkeypatch.setattr(ann.AnnIndex, "search_scored", counting)


@pytest.mark.skipif(not ann.available(), reason="faiss (the ann extra) is not installed")
async def test_an_empty_tier_is_not_searched_through_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db", ann_min_rows=50)
    try:
        await store.put_many("a", _memories(300, "a"))
        query = np.ones(DIM, dtype=np.float32)
        await store.vector_search("a", query, tiers=frozenset({Tier.HOT}), k=5)
        calls = _GraphCalls(monkeypatch)
        found = await store.vector_search("a", query, tiers=frozenset({Tier.COLD}), k=5)
        assert found == []
        assert calls.counts == []  # before: 64, 256, 1024 candidates, then a scan
    finally:
        await store.close()


@pytest.mark.skipif(not ann.available(), reason="faiss (the ann extra) is not installed")
async def test_a_small_share_of_the_graph_is_found_in_one_graph_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db", ann_min_rows=50)
    try:
        await store.put_many("a", _memories(800, "a"))
        cold = [f"m{i:05d}" for i in range(0, 800, 8)]  # 100 rows: 1/8 of the graph
        await store.set_tier("a", cold, Tier.COLD, T0)
        rng = np.random.default_rng(3)
        calls = _GraphCalls(monkeypatch)
        for query in rng.normal(size=(10, DIM)).astype(np.float32):
            got = await store.vector_search("a", query, tiers=frozenset({Tier.COLD}), k=5)
            want = await store.vector_search(
                "a", query, tiers=frozenset({Tier.COLD}), k=5, filters=SearchFilter(exact=True)
            )
            assert [s.memory.id for s in got] == [s.memory.id for s in want]
        # one graph search per query, asked for k / share candidates (before: the first
        # fetch, then 4x)
        assert len(calls.counts) == 10
        assert min(calls.counts) >= 8 * vector_table._ann_fetch(5, ["cold"], SearchFilter())
    finally:
        await store.close()


@pytest.mark.skipif(not ann.available(), reason="faiss (the ann extra) is not installed")
async def test_a_tier_with_fewer_rows_than_the_graph_threshold_is_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db", ann_min_rows=50)
    try:
        await store.put_many("a", _memories(300, "a"))
        await store.set_tier("a", ["m00001", "m00002", "m00003"], Tier.WARM, T0)
        calls = _GraphCalls(monkeypatch)
        found = await store.vector_search(
            "a", np.ones(DIM, dtype=np.float32), tiers=frozenset({Tier.WARM}), k=5
        )
        assert sorted(s.memory.id for s in found) == ["m00001", "m00002", "m00003"]
        assert calls.counts == []
    finally:
        await store.close()


async def _swept(store: SQLiteMemoryStore, n: int = 900) -> None:
    """`n` memories in namespace "a" spread as a sweep leaves a store: a WARM eighth,
    a COLD three quarters (the largest share), the rest HOT."""
    await store.put_many("a", _memories(n, "a"))
    warm = [f"m{i:05d}" for i in range(4, n, 8)]
    cold = [f"m{i:05d}" for i in range(n) if i % 4]
    await store.set_tier("a", warm, Tier.WARM, T0)
    await store.set_tier("a", cold, Tier.COLD, T0)


@pytest.mark.skipif(not ann.available(), reason="faiss (the ann extra) is not installed")
async def test_the_cold_phase_reuses_the_active_phase_graph_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db", ann_min_rows=50)
    try:
        await _swept(store)
        active, cold_only = frozenset({Tier.HOT, Tier.WARM}), frozenset({Tier.COLD})
        calls = _GraphCalls(monkeypatch)
        for query in np.random.default_rng(4).normal(size=(8, DIM)).astype(np.float32):
            calls.counts.clear()
            # a recall's two phases: the active tiers, then COLD with the same query
            await store.vector_search("a", query, tiers=active, k=20)
            got = await store.vector_search("a", query, tiers=cold_only, k=20)
            assert len(calls.counts) == 1  # before: a second graph search for COLD
            want = await store.vector_search(
                "a", query, tiers=cold_only, k=20, filters=SearchFilter(exact=True)
            )
            assert [s.memory.id for s in got] == [s.memory.id for s in want]
            assert [s.score for s in got] == pytest.approx([s.score for s in want], abs=1e-6)
    finally:
        await store.close()


@pytest.mark.skipif(not ann.available(), reason="faiss (the ann extra) is not installed")
async def test_kept_graph_candidates_are_forgotten_after_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db", ann_min_rows=50)
    try:
        await _swept(store)
        query = np.ones(DIM, dtype=np.float32)
        active, cold_only = frozenset({Tier.HOT, Tier.WARM}), frozenset({Tier.COLD})
        await store.vector_search("a", query, tiers=active, k=20)
        best = (await store.vector_search("a", query, tiers=cold_only, k=1))[0].memory.id
        await store.set_tier("a", [best], Tier.WARM, T0)  # the best COLD one moves up
        calls = _GraphCalls(monkeypatch)
        got = await store.vector_search("a", query, tiers=cold_only, k=5)
        assert best not in {s.memory.id for s in got}
        assert len(calls.counts) == 1  # asked the graph again
        other = sqlite3.connect(tmp_path / "a.db")  # another process moves one back
        with other:
            other.execute("UPDATE memories SET tier = 'cold' WHERE id = ?", (best,))
        other.close()
        got = await store.vector_search("a", query, tiers=cold_only, k=5)
        assert got[0].memory.id == best
    finally:
        await store.close()


@pytest.mark.skipif(not ann.available(), reason="faiss (the ann extra) is not installed")
async def test_the_first_search_decides_on_the_graph_from_the_kept_counts(tmp_path: Path) -> None:
    """Whether a namespace is large enough for the graph is read from `tier_rows`:
    counting its rows at the first search after opening read a 48 MB index at 1M
    memories (24 of 35 s of a first answer with a cold page cache)."""
    path = tmp_path / "a.db"
    store = await SQLiteMemoryStore.open(path, ann_min_rows=50)
    await store.put_many("a", _memories(300, "a"))
    await store.vector_search("a", np.ones(DIM, dtype=np.float32), tiers=frozenset(Tier), k=5)
    await store.close()
    store = await SQLiteMemoryStore.open(path, ann_min_rows=50)
    try:
        with traced(store) as statements:
            found = await store.vector_search(
                "a", np.ones(DIM, dtype=np.float32), tiers=frozenset(Tier), k=5
            )
        assert len(found) == 5
        counts = [s for s in statements if "count(" in s.lower() and "memories" in s]
        assert counts == []
    finally:
        await store.close()
