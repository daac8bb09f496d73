"""The sweep on columns (`scan_facts`, `scan_ids`, `embeddings`) decides what the rules of
DESIGN.md section 2 decide memory by memory.

A reference written per memory with `decay`'s scalar functions is run against the
sweep on a random namespace; the vectorised helpers are checked against the same
scalar functions on generated memories.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    MemoryType,
    Policy,
    Tier,
    lifecycle,
)
from tiered_memory import decay as d
from tiered_memory import sweep as sweep_module
from tiered_memory.lifecycle import retention as column_retention
from tiered_memory.models import Memory
from tiered_memory.policy import ConsolidationPolicy
from tiered_memory.ports import MemoryFacts

NOW = datetime(2026, 9, 1, tzinfo=timezone.utc)
NS = "cols"
DIM = 16
NO_CONSOLIDATION = Policy(consolidation=ConsolidationPolicy(enabled=False))


def random_memory(rng: random.Random, i: int, dim: int = DIM) -> Memory:
    created = NOW - timedelta(days=rng.uniform(0, 300))
    used = rng.random() < 0.5
    last = created + (NOW - created) * rng.random() if used else None
    tier = rng.choice([Tier.HOT, Tier.HOT, Tier.WARM, Tier.WARM, Tier.COLD])
    changed = created + (NOW - created) * rng.random()
    cold_since = changed if tier is Tier.COLD else None
    days = sorted({(created + (NOW - created) * rng.random()).date() for _ in range(9)})
    use_count = rng.choice([0, 1, 3, 9, 20]) if used else 0
    cold_uses = rng.choice([0, 3, 5]) if tier is Tier.COLD else 0
    if cold_uses:  # uses while COLD: recent ones, on the days since it went cold
        last = NOW - timedelta(days=rng.uniform(0, 5))
        use_count = max(use_count, cold_uses)
        days = sorted({changed.date(), *(d for d in days if d >= changed.date()), last.date()})
    vector = [rng.gauss(0, 1) for _ in range(dim)]
    return Memory(
        id=f"m{i:04d}",
        namespace=NS,
        content=f"memory number {i}",
        memory_type=rng.choice(list(MemoryType)),
        tier=tier,
        importance=rng.choice([0.1, 0.3, 0.4, 0.5, 0.9]),
        pinned=rng.random() < 0.05,
        core=rng.random() < 0.05,
        superseded_by="m0000" if rng.random() < 0.05 and i else None,
        embedding=vector,
        created_at=created,
        updated_at=created,
        last_accessed_at=last,
        use_count=use_count,
        use_days=days[-use_count:] if use_count else [],
        uses_since_cold=cold_uses,
        cold_since=cold_since,
        tier_changed_at=changed,
    )


def reference(memories: list[Memory], policy: Policy) -> tuple[dict[str, Memory], dict[str, int]]:
    """DESIGN.md section 2, one memory at a time, in the sweep's order (archival aside)."""
    tp, dp = policy.tiers, policy.decay
    state = {m.id: m.model_copy(deep=True) for m in memories}
    moved: dict[str, int] = {}

    def move(m: Memory, tier: Tier, name: str) -> None:
        moved[name] = moved.get(name, 0) + 1
        m.tier, m.tier_changed_at = tier, NOW
        m.cold_since = NOW if tier is Tier.COLD else None
        if tier is Tier.COLD:
            m.uses_since_cold = 0

    def warm_due(m: Memory) -> bool:
        if m.pinned or m.core:
            return False
        if m.last_used_at < NOW - tp.warm_idle:
            return True
        h = d.half_life_for(m.memory_type, m.use_count, dp)
        at_floor = m.last_used_at + d.time_to_floor(h, tp.floor_epsilon, d.floor_for(m, dp))
        return NOW - at_floor >= tp.floor_dwell

    for m in sorted(state.values(), key=lambda m: m.id):
        if m.tier is Tier.HOT and m.tier_changed_at and m.tier_changed_at < NOW - tp.hot_ttl:
            keep = m.use_count > 0 or m.importance >= tp.hot_to_warm_min_importance
            move(
                m,
                Tier.WARM if keep or m.pinned or m.core else Tier.COLD,
                "hot_to_warm" if keep or m.pinned or m.core else "hot_to_cold",
            )
    for m in state.values():
        if m.tier is Tier.WARM and warm_due(m):
            move(m, Tier.COLD, "warm_to_cold")
    for m in state.values():
        if m.tier in (Tier.HOT, Tier.WARM) and m.superseded and not m.pinned:
            move(m, Tier.COLD, "superseded_to_cold")
    for m in state.values():
        if m.tier is Tier.COLD and not m.superseded and m.uses_since_cold >= tp.reactivate_uses:
            since = (m.cold_since or m.created_at).date()
            if len({x for x in m.use_days if x >= since}) >= tp.reactivate_distinct_days:
                move(m, Tier.WARM, "cold_to_warm")
    for m in state.values():
        if (
            m.tier in (Tier.HOT, Tier.WARM)
            and not m.core
            and not m.superseded
            and m.use_count >= tp.core_min_uses
            and len(set(m.use_days)) >= tp.core_min_distinct_days
            and d.retention(m, NOW, dp) >= tp.core_min_retention
        ):
            m.core = True
            moved["core_promoted"] = moved.get("core_promoted", 0) + 1
    return state, moved


async def engine(factory: MemoryFactory, tmp_path: Path, policy: Policy) -> AsyncTieredMemory:
    return await factory.open(
        tmp_path / "m.db", embedder=HashingEmbedder(DIM), clock=ManualClock(NOW), policy=policy
    )


@pytest.fixture
async def amem(tmp_path: Path, memories: MemoryFactory) -> AsyncIterator[AsyncTieredMemory]:
    mem = await engine(memories, tmp_path, NO_CONSOLIDATION)
    try:
        yield mem
    finally:
        await mem.close()


# 400 memories: the other combinations run with --matrix (the life-cycle tests sweep
# over every backend by default).
@pytest.mark.matrix
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_sweep_decides_what_the_rules_decide_one_by_one(
    amem: AsyncTieredMemory, seed: int
) -> None:
    rng = random.Random(seed)
    memories = [random_memory(rng, i) for i in range(400)]
    await amem.store.put_many(NS, memories)
    want, moved = reference(memories, NO_CONSOLIDATION)

    dry = await amem.maintain(now=NOW, dry_run=True)
    for name in ("hot_to_warm", "hot_to_cold", "warm_to_cold"):
        assert dry.count(name) == moved.get(name, 0), name
    untouched = await amem.store.get_many(NS, [m.id for m in memories])
    assert {i: m.tier for i, m in untouched.items()} == {m.id: m.tier for m in memories}

    report = await amem.maintain(now=NOW)
    assert report.errors == []
    archival = ("cold_to_archived", "archive_clusters")  # the reference leaves it aside
    assert {k: v for k, v in report.moved.items() if k not in archival} == moved
    got = await amem.store.get_many(NS, [m.id for m in memories])
    archived = set(got) ^ set(want)
    assert len(archived) == report.count("cold_to_archived")
    for memory_id, m in got.items():
        w = want[memory_id]
        assert (m.tier, m.core, m.cold_since, m.tier_changed_at) == (
            w.tier,
            w.core,
            w.cold_since,
            w.tier_changed_at,
        ), memory_id
    assert (await amem.maintain(now=NOW)).moved == {}  # idempotent


async def test_a_hot_memory_due_to_leave_warm_goes_straight_to_cold(
    amem: AsyncTieredMemory,
) -> None:
    """HOT -> WARM -> COLD in one sweep rewrites the row once; the report shows both."""
    created = NOW - timedelta(days=90)
    old = Memory(
        id="old",
        namespace=NS,
        content="important but long unused",
        importance=0.9,
        embedding=[1.0] + [0.0] * (DIM - 1),
        created_at=created,
        updated_at=created,
        tier_changed_at=created,
    )
    await amem.store.put_many(NS, [old])
    report = await amem.maintain(now=NOW)
    assert report.moved == {"hot_to_warm": 1, "warm_to_cold": 1}
    m = (await amem.store.get_many(NS, ["old"]))["old"]
    assert (m.tier, m.cold_since, m.tier_changed_at, m.uses_since_cold) == (
        Tier.COLD,
        NOW,
        NOW,
        0,
    )


@pytest.mark.parametrize("apart", [3, 4])
async def test_consolidation_compares_fading_memories_within_reach_in_creation_order(
    tmp_path: Path, memories: MemoryFactory, monkeypatch: pytest.MonkeyPatch, apart: int
) -> None:
    """Each fading memory meets the CONSOLIDATION_REACH fading ones written just before
    and after it, whatever their ids: twins 3 places apart in creation order merge with
    a reach of 3, twins 4 apart do not. Vectors are read a few at a time, so the twins
    arrive in different reads. (Before, windows of `archival.batch_size` candidates
    in id order met only by chance at scale: ids are random.)"""
    monkeypatch.setattr(sweep_module, "CONSOLIDATION_REACH", 3)
    monkeypatch.setattr(sweep_module, "CONSOLIDATION_READ", 2)
    mem = await engine(memories, tmp_path, Policy())
    try:
        rng = np.random.default_rng(3)
        base = rng.normal(size=DIM)
        order = [f"c{i}" for i in rng.permutation(10)]  # creation order, ids shuffled
        twins = {order[2], order[2 + apart]}
        batch = []
        for rank, memory_id in enumerate(order):
            created = NOW - timedelta(days=40, hours=rank)  # episodic, unused: fading
            twin = memory_id in twins
            vector = base + rng.normal(scale=0.01, size=DIM) if twin else rng.normal(size=DIM)
            batch.append(
                Memory(
                    id=memory_id,
                    namespace=NS,
                    content=f"note {memory_id}",
                    tier=Tier.WARM,
                    importance=0.6,
                    embedding=[float(x) for x in vector],
                    created_at=created,
                    updated_at=created,
                    tier_changed_at=NOW - timedelta(days=1),
                )
            )
        await mem.store.put_many(NS, batch)
        report = await mem.maintain(now=NOW)
        merged = apart <= 3
        assert report.count("consolidated") == (2 if merged else 0)
        got = await mem.store.get_many(NS, sorted(twins))
        heads = {m.superseded_by for m in got.values()}
        assert (len(heads) == 1 and None not in heads) if merged else heads == {None}
        assert (await mem.maintain(now=NOW)).count("consolidated") == 0
    finally:
        await mem.close()


async def test_consolidation_reads_only_rows_inside_their_types_fading_bound(
    tmp_path: Path, memories: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consolidation's scan gets each type's fading bound (`lifecycle.fading_bounds`):
    WARM factual memories unused for 40 days (inside the 23-day bound of episodic ones,
    far from fading with a 90-day half-life) are not read at all; the episodic twins
    still merge. Before, the scan read every row inside the shortest type's bound."""
    mem = await engine(memories, tmp_path, Policy())
    try:
        if not isinstance(mem.store, lifecycle.SupportsBoundOrderScan):
            pytest.skip("a store without the bound-order scan pages by id")
        read: list[str] = []
        scan = mem.store.scan_facts_by_bound

        async def counted(*args: Any, **kwargs: Any) -> AsyncIterator[MemoryFacts]:
            async for page in scan(*args, **kwargs):
                read.extend(page.ids)
                yield page

        monkeypatch.setattr(mem.store, "scan_facts_by_bound", counted)
        rng = np.random.default_rng(5)
        base = rng.normal(size=DIM)
        batch = []
        for i in range(12):
            episodic = i < 2
            created = NOW - timedelta(days=40, hours=i)
            vector = base + rng.normal(scale=0.01, size=DIM) if episodic else rng.normal(size=DIM)
            batch.append(
                Memory(
                    id=f"f{i:02d}",
                    namespace=NS,
                    content=f"note {i}",
                    memory_type=MemoryType.EPISODIC if episodic else MemoryType.FACTUAL,
                    tier=Tier.WARM,
                    importance=0.6,
                    embedding=[float(x) for x in vector],
                    created_at=created,
                    updated_at=created,
                    tier_changed_at=NOW - timedelta(days=1),
                )
            )
        await mem.store.put_many(NS, batch)
        report = await mem.maintain(now=NOW)
        assert report.count("consolidated") == 2
        assert sorted(read) == ["f00", "f01"]
    finally:
        await mem.close()


@st.composite
def any_memory(draw: st.DrawFn) -> Memory:
    created = NOW - timedelta(seconds=draw(st.integers(0, 400 * 86_400)))
    gap = draw(st.none() | st.integers(0, 400 * 86_400))
    return Memory(
        content="x",
        memory_type=draw(st.sampled_from(list(MemoryType))),
        pinned=draw(st.booleans()),
        core=draw(st.booleans()),
        use_count=draw(st.integers(0, 100)),
        created_at=created,
        updated_at=created,
        last_accessed_at=None if gap is None else created + timedelta(seconds=gap),
        use_days=[date(2026, 1, 1)],
    )


@settings(max_examples=50, deadline=None)
@given(st.lists(any_memory(), min_size=1, max_size=30))
def test_column_retention_is_the_scalar_retention(batch: list[Memory]) -> None:
    dp = Policy().decay
    got = column_retention(MemoryFacts.of(batch), NOW, dp)
    want = [d.retention(m, NOW, dp) for m in batch]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
