"""The SQLite store's sweep reads and bulk moves: index choice and vector-cache upkeep."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from tiered_memory.backends.sqlite import vector_table
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.backends.sqlite.sweep import scan_index, tier_literal
from tiered_memory.models import LIVE_TIERS, Memory, Tier
from tiered_memory.ports import ScanQuery

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "bulk"
DIM = 8


def memories(n: int, seed: int = 0) -> list[Memory]:
    rng = np.random.default_rng(seed)
    return [
        Memory(
            id=f"m{i:03d}",
            namespace=NS,
            content=f"memory {i}",
            embedding=[float(x) for x in rng.normal(size=DIM)],
            created_at=T0 + timedelta(minutes=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(n)
    ]


async def brute_force(store: SQLiteMemoryStore, query: np.ndarray, tier: Tier, k: int) -> list[str]:
    ids = await store.scan_ids(NS, ScanQuery(tiers=frozenset({tier}), limit=10_000))
    found, matrix = await store.embeddings(NS, ids)
    scores = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)) @ query
    return [found[i] for i in np.argsort(-scores, kind="stable")[:k]]


@pytest.mark.parametrize("bulk_rows", [1000, 5])  # patched row by row; dropped and reloaded
async def test_vector_search_follows_a_bulk_move(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, bulk_rows: int
) -> None:
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", bulk_rows)
    batch = memories(60)
    await store.put_many(NS, batch)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):  # load every partition into the cache
        await store.vector_search(NS, query, tiers=frozenset({tier}), k=5)
    moved = [m.id for m in batch[::2]]
    assert await store.set_tier(NS, moved, Tier.WARM, T0 + timedelta(days=4)) == 30
    assert await store.set_tier(NS, moved[:10], Tier.COLD, T0 + timedelta(days=5)) == 10
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=8)
        assert [h.memory.id for h in hits] == await brute_force(store, query, tier, 8)
        assert {h.memory.tier for h in hits} == {tier}


async def test_a_rolled_back_bulk_move_leaves_search_as_it_was(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", 5)
    await store.put_many(NS, memories(40))
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    before = await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=10)

    async def move_then_fail() -> None:
        async with store.transaction():
            await store.set_tier(NS, [f"m{i:03d}" for i in range(30)], Tier.COLD, T0)
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        await move_then_fail()
    after = await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=10)
    assert [h.memory.id for h in after] == [h.memory.id for h in before]
    assert await store.vector_search(NS, query, tiers=frozenset({Tier.COLD}), k=10) == []


@pytest.mark.parametrize(
    ("bound", "tier", "index"),
    [
        ("tier_changed_before", "hot", "memories_hot_changed"),
        ("cold_since_before", "cold", "memories_cold_since"),
        ("last_used_before", "warm", "memories_warm_used"),
        ("created_before", "cold", "memories_cold_created"),
    ],
)
async def test_bounded_scans_walk_the_timestamp_index(
    store: SQLiteMemoryStore, bound: str, tier: str, index: str
) -> None:
    """Without statistics SQLite would walk (namespace, tier, id) and read every row of
    the tier to test the bound; the sweep's scans must read only the rows inside it,
    from the partial index of the tier their rule reads."""
    query = ScanQuery(tiers=LIVE_TIERS, **{bound: T0})
    assert scan_index(query, tier) == f" INDEXED BY {index}"
    others = {t.value for t in LIVE_TIERS} - {tier}
    assert all(scan_index(query, other) == "" for other in others)
    await store.put_many(NS, memories(3))
    with store.database.read() as conn:
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM memories{scan_index(query, tier)} "
            f"WHERE namespace = ? AND tier = {tier_literal(tier)} ORDER BY id",
            (NS,),
        ).fetchall()
    assert any(index in str(tuple(row)) for row in plan), plan
    assert await store.scan_ids(NS, query) == []
    later = ScanQuery(tiers=LIVE_TIERS, created_before=T0 + timedelta(days=1))
    assert await store.scan_ids(NS, later) == ["m000", "m001", "m002"]
    await store.set_tier(NS, ["m001"], Tier.COLD, T0)
    cold = ScanQuery(tiers=LIVE_TIERS, created_before=T0 + timedelta(days=1))
    assert await store.scan_ids(NS, cold) == ["m000", "m001", "m002"]  # COLD by its index
    assert scan_index(ScanQuery(tiers=LIVE_TIERS), tier) == ""


async def test_pages_after_the_first_walk_the_id_index(store: SQLiteMemoryStore) -> None:
    """The timestamp index yields rows in timestamp order, so each page of it re-reads
    and re-sorts every row inside the bound: paging through a million due memories
    50k at a time read them twenty times. A next page walks (namespace, tier, id) from
    `after_id` instead, and the pages still hold every due memory once, in id order."""
    due = ScanQuery(tiers=frozenset({Tier.HOT}), tier_changed_before=T0 + timedelta(days=1))
    later = dataclasses.replace(due, after_id="m010")
    assert scan_index(due, "hot") == " INDEXED BY memories_hot_changed"
    assert scan_index(later, "hot") == " INDEXED BY memories_tier_id"
    batch = memories(25)
    for m in batch[::3]:  # some not due yet
        m.tier_changed_at = T0 + timedelta(days=2)
    await store.put_many(NS, batch)
    pages: list[list[str]] = []
    query = dataclasses.replace(due, limit=4)
    while True:
        page = await store.scan_ids(NS, query)
        pages.append(page)
        if len(page) < query.limit:
            break
        query = dataclasses.replace(query, after_id=page[-1])
    expected = sorted(m.id for m in batch if m.tier_changed_at == T0)
    assert [i for page in pages for i in page] == expected
    assert all(len(page) == 4 for page in pages[:-1])
