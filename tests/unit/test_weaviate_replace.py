"""The Weaviate store's replace and dimension bookkeeping, offline.

Weaviate has no transactions, so `replace_many` is a sequence of writes ordered so that
a failure at any step keeps the old value readable. The low-level reads and writes are
stubbed with an in-memory model of the collections that logs every write, and the
tests check what was written, in what order, and what a failure leaves.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest

from tiered_memory.backends.weaviate import WeaviateMemoryStore, WeaviateWriteError
from tiered_memory.errors import ConfigurationError, DimensionMismatchError, ValidationError
from tiered_memory.models import ArchiveRecord, Memory, Tier

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "user-42"
Row = tuple[uuid.UUID, dict[str, Any], list[float] | None, str]


def memory(memory_id: str, *, tier: Tier = Tier.HOT, dim: int = 4) -> Memory:
    return Memory(
        id=memory_id,
        content=f"memory {memory_id}",
        tier=tier,
        embedding=[1.0] + [0.0] * (dim - 1),
        created_at=T0,
        updated_at=T0,
        tier_changed_at=T0,
    )


def record(memory_id: str) -> ArchiveRecord:
    return ArchiveRecord(
        id=memory_id,
        namespace=NS,
        summary=f"summary of {memory_id}",
        storage_ref=f"file:///{memory_id}.json",
        size_bytes=1,
        checksum="0" * 64,
        created_at=T0,
        archived_at=T0,
        archive_reason="test",
    )


class Modelled(WeaviateMemoryStore):
    """Collections as sets of ids; every write and delete is logged in order."""

    def __init__(self, dimension: int | None = 4) -> None:
        super().__init__(url="http://localhost:1", prefix="TmUnit")
        self.held: dict[str, set[str]] = {
            self.active_name: set(),
            self.cold_name: set(),
            self.archive_name: set(),
            self.archival_name: set(),
        }
        self.log: list[tuple[str, str, list[str]]] = []
        self.recorded = dimension
        self.fail_writes = False
        self.occupied: list[str] = []

    async def dimension(self) -> int | None:
        return self.recorded

    async def namespaces(self) -> list[str]:
        return self.occupied

    async def _present(self, collection: str, namespace: str, ids: Sequence[str]) -> set[str]:
        return self.held[collection] & set(ids)

    async def get_archives(self, namespace: str, ids: Sequence[str]) -> dict[str, ArchiveRecord]:
        return {i: record(i) for i in self.held[self.archive_name] & set(ids)}

    async def _ensure_meta(
        self, kinds: Mapping[str, Any], collections: Sequence[str] | None = None
    ) -> None:
        return None

    async def _upsert(self, collection: str, namespace: str | None, rows: Sequence[Row]) -> None:
        labels = [label for *_, label in rows]
        if collection == self.registry_name:
            self.recorded = int(rows[0][1]["value"])
        elif self.fail_writes:
            raise WeaviateWriteError("rejected", dict.fromkeys(labels, "rejected"))
        else:
            self.held[collection].update(labels)
        self.log.append(("write", collection, labels))

    async def _delete(self, collection: str, namespace: str, ids: Sequence[str]) -> int:
        gone = self.held[collection] & set(ids)
        self.held[collection] -= gone
        self.log.append(("delete", collection, sorted(ids)))
        return len(gone)


async def test_a_replace_writes_the_new_object_first_then_drops_the_other_copy() -> None:
    store = Modelled()
    store.held[store.cold_name].add("a")
    assert await store.replace_many(NS, [memory("a"), memory("b")]) == []
    assert store.log == [
        ("write", store.active_name, ["a", "b"]),
        ("delete", store.archival_name, ["a", "b"]),
        ("delete", store.cold_name, ["a", "b"]),
    ]
    assert store.held == {
        store.active_name: {"a", "b"},
        store.cold_name: set(),
        store.archive_name: set(),
        store.archival_name: set(),
    }


async def test_replacing_an_archived_memory_drops_its_record_last() -> None:
    store = Modelled()
    store.held[store.archive_name].add("a")
    replaced = await store.replace_many(NS, [memory("a", tier=Tier.COLD)])
    assert [r.id for r in replaced] == ["a"]
    assert store.log == [
        ("write", store.cold_name, ["a"]),
        ("delete", store.archival_name, ["a"]),
        ("delete", store.active_name, ["a"]),
        ("delete", store.archive_name, ["a"]),  # until here "a" reads as archived: old value
    ]


async def test_a_replace_ends_the_archivals_of_the_replaced_memories() -> None:
    """An archival drafted from the old value must not commit over the new one: its
    claim (the journal row) goes as soon as the new value is written, before the old
    copies do, as the SQLite store's trigger deletes it with the old row."""
    store = Modelled()
    store.held[store.cold_name].update({"a", "b"})
    store.held[store.archival_name].update({"a", "c"})
    await store.replace_many(NS, [memory("a", tier=Tier.COLD)])
    assert store.held[store.archival_name] == {"c"}
    assert store.log[:2] == [
        ("write", store.cold_name, ["a"]),
        ("delete", store.archival_name, ["a"]),
    ]


async def test_a_refused_replace_writes_nothing() -> None:
    store = Modelled(dimension=4)
    store.held[store.active_name].add("a")
    with pytest.raises(DimensionMismatchError):
        await store.replace_many(NS, [memory("b"), memory("a", dim=5)])
    bare = memory("a").model_copy(update={"embedding": None})
    with pytest.raises(ValidationError, match="embedding"):
        await store.replace_many(NS, [bare])
    assert store.log == []


async def test_a_rejected_write_keeps_the_old_objects() -> None:
    store = Modelled()
    store.held[store.cold_name].add("a")
    store.held[store.archive_name].add("b")
    store.fail_writes = True
    with pytest.raises(WeaviateWriteError):
        await store.replace_many(NS, [memory("a"), memory("b")])
    assert [entry[0] for entry in store.log] == []  # no delete ran
    assert store.held[store.cold_name] == {"a"}
    assert store.held[store.archive_name] == {"b"}


async def test_ensure_dimension_records_once_and_refuses_another_with_data() -> None:
    store = Modelled(dimension=None)
    await store.ensure_dimension(4)
    assert store.recorded == 4
    assert store.log == [("write", store.registry_name, ["dim"])]
    await store.ensure_dimension(4)
    assert len(store.log) == 1  # the same: nothing written
    store.occupied = [NS]
    with pytest.raises(ConfigurationError, match="4-d"):
        await store.ensure_dimension(8)
    store.occupied = []  # an empty store takes another dimension
    await store.ensure_dimension(8)
    assert store.recorded == 8
    with pytest.raises(ConfigurationError, match="positive"):
        await store.ensure_dimension(0)


async def test_a_query_vector_is_compared_by_size_not_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine's boundary checked the query (finite, flat); the store only compares
    its size with what it holds, as the SQLite store does (issue 17: one check)."""
    import numpy as np

    from tiered_memory.backends.weaviate import store as weaviate

    store = Modelled(dimension=4)
    checks: list[object] = []
    monkeypatch.setattr(weaviate, "check_vector", lambda *a, **k: checks.append(a))
    sent: list[object] = []

    async def read(collection: str, namespace: str, action: str, call: Any) -> None:
        sent.append(action)
        return None  # no tenant yet: nothing found

    monkeypatch.setattr(store, "_read", read)
    query = np.ones(4, dtype=np.float32)
    assert await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=3) == []
    assert await store.search_archives(NS, query, k=3) == []
    assert sent
    assert checks == []
    with pytest.raises(DimensionMismatchError, match="query"):
        await store.vector_search(
            NS, np.ones(3, dtype=np.float32), tiers=frozenset({Tier.HOT}), k=3
        )
    with pytest.raises(DimensionMismatchError, match="query"):
        await store.search_archives(NS, np.ones(5, dtype=np.float32), k=3)
