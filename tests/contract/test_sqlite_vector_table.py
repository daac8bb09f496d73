"""Schema 3: embeddings in `memory_vectors`, migrated from the inline column of schema 2,
written and deleted in the memory's own transaction, and moved between cached tier
partitions (not reloaded) by a bulk `set_tier`."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from tests.schema_7 import put_texts_back
from tiered_memory.backends.sqlite import vector_table
from tiered_memory.backends.sqlite.migrations import SCHEMA_VERSION
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.errors import ValidationError
from tiered_memory.models import Memory, Tier
from tiered_memory.ports import ScanQuery

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "vectors"
DIM = 16


def _memories(n: int, seed: int = 0) -> list[Memory]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    # values a lossy copy would change: -0.0, a subnormal, a large and a tiny normal
    vectors[0, :4] = [-0.0, np.float32(1e-45), 1.5e18, 1.2e-38]
    return [
        Memory(
            id=f"m{i:03d}",
            namespace=NS,
            content=f"memory number {i}",
            embedding=[float(x) for x in vectors[i]],
            created_at=T0 + timedelta(minutes=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(n)
    ]


def _blob(memory: Memory) -> bytes:
    assert memory.embedding is not None
    return np.asarray(memory.embedding, dtype="<f4").tobytes()


def _rewrite_as_version_2(path: Path) -> None:
    """Put the vectors (and texts) back inline in `memories`, as schema 2 kept them."""
    conn = sqlite3.connect(path)
    try:
        put_texts_back(conn)
        conn.execute("ALTER TABLE memories ADD COLUMN embedding BLOB")
        conn.execute(
            "UPDATE memories SET embedding = "
            "(SELECT v.embedding FROM memory_vectors AS v WHERE v.pk = memories.pk)"
        )
        conn.execute("DROP TRIGGER memories_vector_delete")
        conn.execute("DROP TABLE memory_vectors")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()


async def test_a_schema_2_file_keeps_every_vector_bit_exact(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    batch = _memories(50)
    s = await SQLiteMemoryStore.open(path)
    await s.put_many(NS, batch)
    await s.close()
    _rewrite_as_version_2(path)
    with sqlite3.connect(path) as conn:
        inline = dict(conn.execute("SELECT id, embedding FROM memories").fetchall())
    assert inline == {m.id: _blob(m) for m in batch}

    s = await SQLiteMemoryStore.open(path)
    try:
        with s.database.read() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert (
                int(version.fetchone()[0]) == SCHEMA_VERSION
            )  # 3 moved the vectors; 4 added the archival journal; 5 the lexicon
            columns = {r[1] for r in conn.execute("PRAGMA table_info(memories)")}
            assert "embedding" not in columns
            stored = dict(
                conn.execute(
                    "SELECT m.id, v.embedding FROM memories AS m "
                    "JOIN memory_vectors AS v ON v.pk = m.pk"
                ).fetchall()
            )
        assert stored == inline  # byte for byte
        got = await s.get_many(NS, [m.id for m in batch], with_embeddings=True)
        for m in batch:
            vector = got[m.id].embedding
            assert vector is not None
            assert np.asarray(vector, dtype="<f4").tobytes() == _blob(m)
        query = np.asarray(batch[7].embedding, dtype=np.float32)
        hits = await s.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=1)
        assert hits[0].memory.id == batch[7].id
        lexical = await s.lexical_search(NS, "number", k=50, tiers=frozenset({Tier.HOT}))
        assert len(lexical) == 50  # the FTS index survived the table rewrite
        assert await s.delete_many(NS, [batch[0].id]) == 1
        with s.database.read() as conn:
            assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 49
    finally:
        await s.close()
    s = await SQLiteMemoryStore.open(path)  # opening again migrates nothing
    try:
        assert len(await s.get_many(NS, [m.id for m in batch], with_embeddings=True)) == 49
    finally:
        await s.close()


async def test_a_memory_and_its_vector_commit_or_roll_back_together(
    store: SQLiteMemoryStore,
) -> None:
    with store.database.read() as conn:  # the vector insert of the 4th memory fails
        conn.execute(
            "CREATE TEMP TRIGGER fail_vector BEFORE INSERT ON memory_vectors "
            "WHEN (SELECT id FROM memories WHERE pk = new.pk) = 'm003' "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    with pytest.raises(ValidationError):
        await store.put_many(NS, _memories(6))
    with store.database.read() as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 0
        conn.execute("DROP TRIGGER temp.fail_vector")
    batch = _memories(6)
    await store.put_many(NS, batch)
    await store.delete_many(NS, [batch[1].id])
    await store.clear(NS)
    with store.database.read() as conn:
        assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 0


def _cached(store: SQLiteMemoryStore, tier: Tier) -> dict[str, np.ndarray]:
    index = store._vectors.cache.get((NS, tier.value))
    assert index is not None, f"{tier.value} partition was dropped"
    return {i: index._vectors[r].copy() for i, r in index._pos.items()}


async def _expected(store: SQLiteMemoryStore, tier: Tier) -> dict[str, np.ndarray]:
    ids = await store.scan_ids(NS, ScanQuery(tiers=frozenset({tier}), limit=10_000))
    found, matrix = await store.embeddings(NS, ids)
    if not found:
        return {}
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return dict(zip(found, unit, strict=True))


async def test_bulk_moves_move_cached_rows_between_partitions(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", 5)
    batch = _memories(90, seed=3)
    await store.put_many(NS, batch)
    ids = [m.id for m in batch]
    # every tier holds rows, so each search loads its partition (an empty tier is
    # answered without a search: `tier_rows`)
    await store.set_tier(NS, ids[80:85], Tier.WARM, T0 + timedelta(days=1))
    await store.set_tier(NS, ids[85:], Tier.COLD, T0 + timedelta(days=2))
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):
        await store.vector_search(NS, query, tiers=frozenset({tier}), k=3)
    assert await store.set_tier(NS, ids[:50], Tier.WARM, T0 + timedelta(days=3)) == 50
    assert await store.set_tier(NS, ids[10:70], Tier.COLD, T0 + timedelta(days=4)) == 60
    assert await store.set_tier(NS, ids[10:70], Tier.COLD, T0 + timedelta(days=5)) == 0
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):
        cached, expected = _cached(store, tier), await _expected(store, tier)
        assert cached.keys() == expected.keys()
        for memory_id, row in expected.items():
            np.testing.assert_allclose(cached[memory_id], row, rtol=0, atol=1e-6)
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=10)
        assert {h.memory.tier for h in hits} == {tier}
    await store.set_tier(NS, ids[:10], Tier.COLD, T0 + timedelta(days=6))
    cold = await store.vector_search(NS, query, tiers=frozenset({Tier.COLD}), k=100)
    assert len(cold) == 75


@pytest.mark.parametrize("bulk_rows", [5, 20])  # uncached rows: target dropped / read
async def test_a_bulk_move_from_an_uncached_partition(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, bulk_rows: int
) -> None:
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", bulk_rows)
    batch = _memories(60, seed=5)
    await store.put_many(NS, batch)
    ids = [m.id for m in batch]
    await store.set_tier(NS, ids[40:], Tier.COLD, T0 + timedelta(days=2))
    await store.set_tier(NS, ids[:1], Tier.WARM, T0 + timedelta(days=2))  # WARM not empty
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    for tier in (Tier.WARM, Tier.COLD):  # HOT stays uncached
        await store.vector_search(NS, query, tiers=frozenset({tier}), k=3)
    # 20 rows come from the cached COLD partition, 10 from the uncached HOT one
    assert await store.set_tier(NS, ids[30:], Tier.WARM, T0 + timedelta(days=3)) == 30
    warm = store._vectors.cache.get((NS, Tier.WARM.value))
    assert (warm is None) == (bulk_rows < 10)
    assert _cached(store, Tier.COLD) == {}
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=100)
        assert {h.memory.id for h in hits} == set((await _expected(store, tier)).keys())
