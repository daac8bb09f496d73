"""Compact archive records and originals lose nothing, and old files still load.

An archive record keeps the summary embedding as a ternary code and its fields as
columns (schema version 2), the original keeps the embedding as base64 (format 2).
Restores must give back the exact memory, and files written in the old layouts must
keep working.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.matrix import MemoryFactory
from tests.schema_7 import put_texts_back
from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, Memory
from tiered_memory.archive import (
    decode_document,
    decode_embedding,
    encode_document,
    encode_embedding,
    original_document,
    sha256_hex,
)
from tiered_memory.backends.sqlite.codes import code_size, decode_code, encode_code
from tiered_memory.backends.sqlite.migrations import SCHEMA_VERSION
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.errors import ArchiveIntegrityError
from tiered_memory.models import ArchiveRecord, Link

NS = "ns"
T0 = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)
TEXTS = [
    f"Note {i}: the {topic} meeting with {name} moved to room {100 + i} on Tuesday"
    for i, (topic, name) in enumerate(
        (t, n)
        for t in ("budget", "roadmap", "hiring", "security", "launch")
        for n in ("Ava", "Marco", "Kim", "Lee", "Noor", "Sam")
    )
]
OLD_ARCHIVES = """CREATE TABLE archives (
    pk INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    summary_embedding BLOB,
    record TEXT NOT NULL,
    archived_at INTEGER NOT NULL,
    UNIQUE (namespace, id)
)"""


async def _engine(memories: MemoryFactory, path: Path, clock: ManualClock) -> AsyncTieredMemory:
    return await memories.open(path, embedder=HashingEmbedder(), clock=clock)


async def _archive(amem: AsyncTieredMemory, *ids: str) -> None:
    assert await amem.archive(list(ids), namespace=NS, reason="test") == len(ids)


async def _original(amem: AsyncTieredMemory, memory_id: str) -> bytes:
    record = (await amem.store.get_archives(NS, [memory_id]))[memory_id]
    return await amem.archiver.verified_original(NS, record)


async def _full(amem: AsyncTieredMemory, memory_id: str) -> Memory:
    return (await amem.store.get_many(NS, [memory_id], with_embeddings=True))[memory_id]


def _same_memory(back: Memory, before: Memory) -> None:
    """Everything a restore must give back exactly (the tier and its clocks restart)."""
    keep = {"tier", "cold_since", "tier_changed_at", "last_accessed_at", "updated_at"}
    assert back.model_dump(exclude=keep) == before.model_dump(exclude=keep)
    assert back.embedding is not None
    assert before.embedding is not None
    assert np.asarray(back.embedding).tobytes() == np.asarray(before.embedding).tobytes()


async def test_restore_gives_back_the_exact_memory(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    amem = await _engine(memories, tmp_path / "m.db", clock)
    try:
        m = await amem.add(
            "Ünïcode note — Ava's allergy: penicillin, since 2019-03-04.",
            namespace=NS,
            metadata={"domain": "health", "nested": {"k": [1, 2.5, None]}, "emoji": "🩺"},
            importance=0.37,
        )
        other = await amem.add("Ava's doctor is Dr. Lee at the Oslo clinic", namespace=NS)
        await amem.link(m.id, other.id, namespace=NS)
        before = await _full(amem, m.id)
        await _archive(amem, m.id)
        data = await _original(amem, m.id)
        assert len(data) < 4000  # 18 KB with the embedding as JSON numbers, twice
        record = (await amem.store.get_archives(NS, [m.id]))[m.id]
        assert record.checksum == sha256_hex(data)
        assert record.links == []  # kept in the original, not in the record

        assert await amem.restore_archive([m.id], namespace=NS) == 1
        _same_memory(await _full(amem, m.id), before)
        assert [link.target for link in await amem.links(m.id, namespace=NS)] == [other.id]
    finally:
        await amem.close()


async def test_each_summary_finds_its_own_record(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    amem = await _engine(memories, tmp_path / "s.db", clock)
    try:
        added = [await amem.add(text, namespace=NS) for text in TEXTS]
        await _archive(amem, *(m.id for m in added))
        records = await amem.store.scan_archives(NS, limit=100)
        assert len(records) == len(TEXTS)
        for record in records:
            query = await amem.embedder.aembed_query(record.summary)
            hits = await amem.store.search_archives(NS, query, k=3)
            assert hits[0].record.id == record.id
            assert hits[0].score == pytest.approx(1.0, abs=0.01)  # calibrated
            # the other scores estimate the float cosines
            float_vectors = await amem.embedder.aembed_documents([h.record.summary for h in hits])
            for hit, vector in zip(hits, float_vectors, strict=True):
                assert hit.score == pytest.approx(float(np.dot(query, vector)), abs=0.15)
        # a deep search that only archived records can answer
        hits = await amem.search("security meeting Noor room", namespace=NS, deep=True)
        assert hits
        assert hits[0].archived
        assert "security" in hits[0].memory.content
        assert "Noor" in hits[0].memory.content
    finally:
        await amem.close()


def _v1_document(memory: Memory, links: list[Link], archived_at: Any) -> dict[str, Any]:
    """An original exactly as format 1 wrote it (embedding as JSON numbers, twice)."""
    return {
        "schema_version": 1,
        "original_id": memory.id,
        "namespace": memory.namespace,
        "content": memory.content,
        "embedding": memory.embedding,
        "entity_links": [link.target for link in links],
        "links": [link.model_dump(mode="json") for link in links],
        "metadata": {
            **memory.metadata,
            "source": memory.source,
            "memory_type": memory.memory_type.value,
        },
        "importance_score": memory.importance,
        "created_at": memory.created_at.isoformat(),
        "archived_at": archived_at.isoformat(),
        "archive_reason": "test",
        "memory": memory.model_dump(mode="json"),
    }


def _rewrite_as_version_1(path: Path, records: list[ArchiveRecord]) -> None:
    """Turn the file's archive table back into the schema-1 layout, with these rows."""
    conn = sqlite3.connect(path)
    try:
        put_texts_back(conn)
        conn.execute("DROP TABLE archives")
        conn.execute("DROP TABLE archives_strings")
        conn.execute(OLD_ARCHIVES)
        for record in records:
            assert record.summary_embedding is not None
            conn.execute(
                "INSERT INTO archives (namespace, id, summary_embedding, record, archived_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    record.namespace,
                    record.id,
                    np.asarray(record.summary_embedding, dtype="<f4").tobytes(),
                    record.model_dump_json(exclude={"namespace", "summary_embedding"}),
                    int(record.archived_at.timestamp() * 1_000_000),
                ),
            )
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()


async def test_a_version_1_file_and_original_still_load_and_restore(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    """A file of schema 1 (JSON record, float32 summary embedding) whose original is of
    format 1 (JSON numbers) and whose links are in the record: converted on open,
    searchable, and restored exactly."""
    path = tmp_path / "old.db"
    amem = await _engine(memories, path, clock)
    try:
        m = await amem.add(TEXTS[3], namespace=NS, metadata={"k": "v"}, importance=0.2)
        other = await amem.add(TEXTS[4], namespace=NS)
        before = await _full(amem, m.id)
        links = await amem.graph.links_of(NS, [m.id])
        assert links
        await _archive(amem, m.id)
        # the original as format 1 wrote it, under the memory's id, and the record
        # that pointed at it
        new = (await amem.store.get_archives(NS, [m.id]))[m.id]
        await amem.archiver.delete_original(NS, new)
        data = encode_document(_v1_document(before, links, clock.now()))
        await amem.objects.put(NS, m.id, data)
        summary = (await amem.store.get_archives(NS, [m.id]))[m.id].summary
        exact_summary_vector = (await amem.embedder.aembed_documents([summary]))[0]
        old = (await amem.store.get_archives(NS, [m.id]))[m.id].model_copy(
            update={
                "summary_embedding": [float(x) for x in exact_summary_vector],
                "links": links,
                "checksum": sha256_hex(data),
                "size_bytes": len(data),
                "storage_ref": amem.objects.ref(NS, m.id),
            }
        )
    finally:
        await amem.close()
    _rewrite_as_version_1(path, [old])

    amem = await _engine(memories, path, clock)
    try:
        with amem.store.database.read() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert int(version.fetchone()[0]) == SCHEMA_VERSION
        got = (await amem.store.get_archives(NS, [m.id]))[m.id]
        exclude = {"summary_embedding"}
        assert got.model_dump(exclude=exclude) == old.model_dump(exclude=exclude)
        assert got.summary_embedding is not None
        cosine = float(
            np.dot(got.summary_embedding, exact_summary_vector)
            / np.linalg.norm(got.summary_embedding)
        )
        assert cosine > 0.85  # quantised on the way in
        hits = await amem.store.search_archives(NS, exact_summary_vector, k=1)
        assert hits[0].record.id == m.id
        assert hits[0].score == pytest.approx(1.0, abs=0.01)

        document = await amem.expand(m.id, namespace=NS)
        assert document["schema_version"] == 1
        assert document["embedding"] == before.embedding
        assert await amem.restore_archive([m.id], namespace=NS) == 1
        _same_memory(await _full(amem, m.id), before)
        assert other.id in {link.target for link in await amem.links(m.id, namespace=NS)}
    finally:
        await amem.close()


def test_the_original_embedding_round_trips_bit_exactly() -> None:
    rng = np.random.default_rng(3)
    narrow = rng.normal(size=384).astype(np.float32).astype(np.float64).tolist()
    narrow[:3] = [-0.0, 0.0, 3.4028234663852886e38]
    wide = [0.1, -1e-300, 2.0**-1074, 1 / 3, -0.0]  # not float32 values
    for values, encoding in ((narrow, "float32-le"), (wide, "float64-le")):
        kind, text = encode_embedding(values)
        assert kind == encoding
        back = decode_embedding(kind, text)
        assert np.asarray(back).tobytes() == np.asarray(values).tobytes()  # -0.0 included
    with pytest.raises(ArchiveIntegrityError):
        decode_embedding("float16-le", "AAAA")
    with pytest.raises(ArchiveIntegrityError):
        decode_embedding("float32-le", "not base64!")


def test_a_format_2_original_reads_in_the_format_1_shape() -> None:
    memory = Memory(
        id="m1",
        namespace=NS,
        content="hello",
        embedding=[0.5, -0.25],
        created_at=T0,
        updated_at=T0,
    )
    document = original_document(memory, [], archived_at=memory.created_at, reason="r")
    assert "embedding" not in document
    assert "content" not in document["memory"]
    read = decode_document(encode_document(document), expected_id="m1")
    assert read["embedding"] == [0.5, -0.25]
    assert read["memory"]["embedding"] == [0.5, -0.25]
    assert Memory.model_validate(read["memory"]) == memory


def test_the_summary_code_is_small_and_exact_for_single_magnitude_vectors() -> None:
    assert code_size(384) == 5 + 77
    axis = np.zeros(384, dtype=np.float32)
    axis[[3, 200]] = [0.7, -0.7]
    vector, fidelity = decode_code(encode_code(axis), 384)
    assert np.array_equal(vector, axis)
    assert fidelity == 1.0
    dense = np.random.default_rng(1).normal(size=384).astype(np.float32)
    vector, fidelity = decode_code(encode_code(dense), 384)
    cosine = float(np.dot(vector, dense) / np.linalg.norm(vector) / np.linalg.norm(dense))
    assert cosine == pytest.approx(fidelity, abs=1 / 255)
    assert fidelity > 0.88  # the best ternary code of a Gaussian vector (sign bits: 0.80)
    assert len(encode_code(np.zeros(384, dtype=np.float32))) == code_size(384)


async def test_records_keep_every_field_exactly(tmp_path: Path) -> None:
    """Defaults omitted, strings interned, a checksum that is not hex kept as text."""
    store = await SQLiteMemoryStore.open(tmp_path / "r.db")
    try:
        t0 = T0
        memories = [
            Memory(id=i, content=i, embedding=[1.0, 0.0], created_at=t0, updated_at=t0)
            for i in ("a", "b")
        ]
        await store.put_many(NS, memories)
        full = ArchiveRecord(
            id="a",
            namespace=NS,
            summary="s",
            summary_embedding=[0.0, 2.0],
            source="chat",
            metadata={"x": [1, "ü"]},
            links=[
                Link(source="a", target="b", weight=0.123456789, created_at=t0),
                Link(source="z", target="a", weight=1.0),
            ],
            storage_ref="s3://bucket/prefix/ns/a.json",
            size_bytes=10,
            checksum="not-a-digest",
            created_at=t0,
            archived_at=t0,
            archive_reason="because",
            use_count=3,
            expansions=[t0, t0],
        )
        bare = ArchiveRecord(
            id="b",
            namespace=NS,
            summary="s",
            storage_ref="no id in here",
            size_bytes=0,
            checksum="ab" * 32,
            created_at=t0,
            archived_at=t0,
            archive_reason="because",
        )
        assert await store.archive_many(NS, [full, bare]) == 2
        got = await store.get_archives(NS, ["a", "b"])
        assert got["a"] == full
        assert got["b"] == bare
    finally:
        await store.close()
