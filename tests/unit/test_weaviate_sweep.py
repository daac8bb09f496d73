"""The Weaviate store's sweep reads, offline: `scan` and `get_many` reshaped into ids,
columns and an embedding matrix (no server; the two primitives are stubbed)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest

from tiered_memory.backends.weaviate.mapping import embedding_matrix
from tiered_memory.backends.weaviate.store import WeaviateMemoryStore
from tiered_memory.epoch import to_micros
from tiered_memory.models import LIVE_TIERS, Memory, MemoryType, Tier
from tiered_memory.ports import NO_TIME, MemoryFacts, ScanQuery

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def memory(memory_id: str, **fields: object) -> Memory:
    base: dict[str, object] = {"content": memory_id, "created_at": T0, "updated_at": T0}
    return Memory(id=memory_id, namespace="ns", **{**base, **fields})


PAGE = [
    memory("a", embedding=[1.0, 0.0]),
    memory(
        "b",
        memory_type=MemoryType.PROCEDURAL,
        importance=0.9,
        pinned=True,
        use_count=3,
        last_accessed_at=T0 + timedelta(days=2),
        use_days=[date(2026, 1, 3), date(2026, 1, 2)],
        tier=Tier.COLD,
        cold_since=T0 + timedelta(days=1),
        embedding=None,
    ),
]


class Stubbed(WeaviateMemoryStore):
    def __init__(self) -> None:
        super().__init__(url="http://localhost:1", prefix="TmUnit")
        self.scanned: list[tuple[str, ScanQuery]] = []
        self.fetched: list[list[str]] = []

    async def scan(self, namespace: str, query: ScanQuery) -> list[Memory]:
        self.scanned.append((namespace, query))
        return PAGE

    async def get_many(
        self, namespace: str, ids: Sequence[str], *, with_embeddings: bool = False
    ) -> dict[str, Memory]:
        assert with_embeddings
        self.fetched.append(list(ids))
        return {m.id: m for m in PAGE if m.id in ids}


async def test_scan_ids_and_facts_reshape_one_scan() -> None:
    store = Stubbed()
    query = ScanQuery(tiers=LIVE_TIERS, used=True, after_id="0", limit=7)
    assert await store.scan_ids("ns", query) == ["a", "b"]
    facts = await store.scan_facts("ns", query, use_days=True)
    assert store.scanned == [("ns", query), ("ns", query)]  # the query is passed on as is
    assert facts.ids == ["a", "b"]
    assert facts.memory_types == [MemoryType.EPISODIC, MemoryType.PROCEDURAL]
    assert facts.pinned.tolist() == [False, True]
    assert facts.use_count.tolist() == [0, 3]
    assert facts.last_used_at.tolist() == [to_micros(T0), to_micros(T0 + timedelta(days=2))]
    assert facts.cold_since.tolist() == [NO_TIME, to_micros(T0 + timedelta(days=1))]
    assert facts.use_days == [[], [date(2026, 1, 2), date(2026, 1, 3)]]
    assert (await store.scan_facts("ns", query)).use_days is None


async def test_embeddings_keep_the_order_asked_for_and_skip_missing_vectors() -> None:
    store = Stubbed()
    ids, matrix = await store.embeddings("ns", ["b", "x", "a", "a"])
    assert store.fetched == [["b", "x", "a"]]  # one read, each id once
    assert ids == ["a"]
    assert matrix.dtype == np.float32
    assert matrix.tolist() == [[1.0, 0.0]]
    assert await store.embeddings("ns", []) == ([], pytest.approx(np.zeros((0, 0))))
    assert store.fetched == [["b", "x", "a"]]


def test_embedding_matrix_of_nothing_is_empty() -> None:
    ids, matrix = embedding_matrix(["a"], {})
    assert ids == []
    assert matrix.shape == (0, 0)


def test_facts_of_no_memories_are_empty_columns() -> None:
    facts = MemoryFacts.of([], use_days=True)
    assert len(facts) == 0
    assert facts.use_days == []
    assert facts.created_at.dtype == np.int64
