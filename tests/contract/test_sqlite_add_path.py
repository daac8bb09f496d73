"""The shape of add_many's writes in the embedded store (issue 19): which indexes and
statements a write pays for. Counted (statements, plans, rows), never timed."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.errors import ValidationError
from tiered_memory.models import Link, LinkKind, Memory
from tiered_memory.ports import Vector

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "adds"
DIM = 8


def _memories(n: int, start: int = 0) -> list[Memory]:
    rng = np.random.default_rng(start)
    return [
        Memory(
            id=f"m{i:04d}",
            namespace=NS,
            content=f"memory number {i} about topic {i % 7}",
            embedding=[float(x) for x in rng.normal(size=DIM)],
            created_at=T0 + timedelta(seconds=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(start, start + n)
    ]


def _link(a: str, b: str, weight: float = 0.5) -> Link:
    return Link(source=a, target=b, weight=weight, kind=LinkKind.SIMILAR)


def _indexes(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
            )
        }


async def test_links_have_no_index_by_target(tmp_path: Path) -> None:
    """Every auto-link wrote two entries at random places of an index on (namespace,
    target) that only dropping a node read; a file that has it loses it when opened."""
    path = tmp_path / "m.db"
    store = await SQLiteMemoryStore.open(path)
    await store.close()
    assert "links_target" not in _indexes(path, "links")
    with sqlite3.connect(path) as conn:  # as an older library left the file
        conn.execute("CREATE INDEX links_target ON links (namespace, target)")
    store = await SQLiteMemoryStore.open(path)
    await store.close()
    assert "links_target" not in _indexes(path, "links")


async def test_dropping_nodes_deletes_both_rows_of_each_link_by_key(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    graph = SQLiteAssociationGraph(store.database)
    try:
        await store.put_many(NS, _memories(6))
        await graph.upsert_links(
            NS,
            [
                _link("m0000", "m0001"),
                _link("m0002", "m0000"),
                _link("m0001", "m0002"),
                _link("m0003", "m0004"),
                _link("m0000", "m0005"),
            ],
        )
        await graph.upsert_links("other", [_link("m0000", "m0001")])
        dropped = await graph.drop_nodes(NS, ["m0000", "m0005"])
        assert sorted((x.source, x.target) for x in dropped) == [
            ("m0000", "m0001"),
            ("m0000", "m0002"),
            ("m0000", "m0005"),
            ("m0005", "m0000"),
        ]
        with store.database.read() as conn:
            left = sorted(
                (r[0], r[1], r[2])
                for r in conn.execute("SELECT namespace, source, target FROM links")
            )
            plan = " ".join(
                str(r[3])
                for r in conn.execute(
                    "EXPLAIN QUERY PLAN DELETE FROM links "
                    "WHERE namespace = ? AND source = ? AND target = ?",
                    (NS, "a", "b"),
                )
            )
        assert left == [
            ("adds", "m0001", "m0002"),
            ("adds", "m0002", "m0001"),
            ("adds", "m0003", "m0004"),
            ("adds", "m0004", "m0003"),
            ("other", "m0000", "m0001"),
            ("other", "m0001", "m0000"),
        ]
        assert "PRIMARY KEY" in plan
        assert "SCAN" not in plan
    finally:
        await store.close()


async def test_put_vectors_many_stores_the_arrays_bit_exact(tmp_path: Path) -> None:
    """add_many's path (`SupportsPutVectors`): the embeddings come as float32 arrays
    beside memories that carry none, and are stored byte for byte as put_many would."""
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    try:
        batch = _memories(5)
        vectors = [np.asarray(m.embedding, dtype=np.float32) for m in batch]
        vectors[0][:3] = [-0.0, np.float32(1e-45), 1.5e18]
        bare = [m.model_copy(update={"embedding": None}) for m in batch]
        await store.put_vectors_many(NS, bare, vectors)
        with store.database.read() as conn:
            stored = dict(
                conn.execute(
                    "SELECT m.id, v.embedding FROM memories AS m "
                    "JOIN memory_vectors AS v ON v.pk = m.pk"
                ).fetchall()
            )
        expected = {m.id: v.astype("<f4").tobytes() for m, v in zip(batch, vectors, strict=True)}
        assert stored == expected
        bad = np.full(DIM, np.nan, dtype=np.float32)
        with pytest.raises(ValidationError):
            await store.put_vectors_many(NS, _memories(1, 10), [bad])
        with pytest.raises(ValidationError):
            await store.put_vectors_many(NS, _memories(2, 20), vectors[:1])
        assert len(await store.get_many(NS, ["m0010", "m0020"])) == 0
    finally:
        await store.close()


async def test_add_many_hands_the_embedded_store_its_arrays(tmp_path: Path) -> None:
    """No embedding becomes a list of floats on the way in (~25 us a 384-d memory)."""
    memory = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=ManualClock(T0)
    )
    calls: list[str] = []
    store = memory.store
    assert isinstance(store, SQLiteMemoryStore)
    put_many, put_vectors_many = store.put_many, store.put_vectors_many

    async def spy_lists(namespace: str, memories: Sequence[Memory]) -> None:
        calls.append("put_many")
        await put_many(namespace, memories)

    async def spy_arrays(
        namespace: str, memories: Sequence[Memory], vectors: Sequence[Vector]
    ) -> None:
        calls.append("put_vectors_many")
        assert all(m.embedding is None for m in memories)
        await put_vectors_many(namespace, memories, vectors)

    store.put_many = spy_lists  # type: ignore[method-assign]
    store.put_vectors_many = spy_arrays  # type: ignore[method-assign]
    try:
        added = await memory.add_many(["the garden needs water", "the car needs oil"], namespace=NS)
        found = await memory.search("garden water", namespace=NS, k=1)
    finally:
        await memory.close()
    assert calls == ["put_vectors_many"]
    assert [m.embedding for m in added] == [None, None]
    assert found[0].memory.id == added[0].id
