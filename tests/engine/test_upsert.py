"""Replacing a memory by id (issue 16, item 2): `upsert`, `add(..., replace=True)`.

A replace is validated and embedded before anything is written and swapped in one
store transaction, so a failure at any step leaves the old memory readable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    BackendUnavailableError,
    HashingEmbedder,
    LinkKind,
    ManualClock,
    MemoryInput,
    Tier,
    TieredMemory,
    TieredMemoryError,
    ValidationError,
)
from tiered_memory.ports import Matrix, Vector

NS = "user-42"


class FailingOn:
    """The hashing embedder, except that any text holding `word` fails to embed (an
    embedding service that is down for that request)."""

    def __init__(self, word: str = "boom") -> None:
        self.inner = HashingEmbedder()
        self.dimension = self.inner.dimension
        self.word = word

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        if any(self.word in t for t in texts):
            raise BackendUnavailableError("the embedding service is down")
        return await self.inner.aembed_documents(texts)

    async def aembed_query(self, text: str) -> Vector:
        return await self.inner.aembed_query(text)


@pytest.fixture
async def flaky(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> AsyncIterator[AsyncTieredMemory]:
    engine = await memories.open(tmp_path / "flaky.db", embedder=FailingOn(), clock=clock)
    try:
        yield engine
    finally:
        await engine.close()


async def test_add_with_an_existing_id_is_refused_unless_asked_to_replace(
    amem: AsyncTieredMemory,
) -> None:
    await amem.add("Sam drinks green tea", namespace=NS, id="drink")
    with pytest.raises(ValidationError, match="replace=True"):
        await amem.add("Sam drinks coffee", namespace=NS, id="drink")
    assert (await amem.get("drink", namespace=NS)).content == "Sam drinks green tea"  # type: ignore[union-attr]
    replaced = await amem.add("Sam drinks coffee", namespace=NS, id="drink", replace=True)
    assert replaced.id == "drink"
    assert (await amem.get("drink", namespace=NS)).content == "Sam drinks coffee"  # type: ignore[union-attr]
    assert (await amem.stats(namespace=NS)).total == 1


async def test_upsert_inserts_then_replaces(amem: AsyncTieredMemory, clock: ManualClock) -> None:
    first = await amem.upsert(
        "Sam drinks green tea", id="drink", namespace=NS, metadata={"v": 1}, importance=0.3
    )
    assert first.id == "drink"
    await amem.record_use(["drink"], namespace=NS)
    clock.advance(days=2)
    second = await amem.upsert(
        "Sam switched to black coffee", id="drink", namespace=NS, metadata={"v": 2}
    )
    stored = await amem.get("drink", namespace=NS)
    assert stored is not None
    assert (stored.content, stored.metadata, stored.importance) == (
        "Sam switched to black coffee",
        {"v": 2},
        0.4,
    )
    # a new memory under the same id: HOT, its own history, found by its new content
    assert (stored.tier, stored.use_count, stored.created_at) == (Tier.HOT, 0, clock.now())
    assert second.created_at == clock.now()
    hits = await amem.search("black coffee", namespace=NS)
    assert [h.memory.id for h in hits][:1] == ["drink"]
    assert not [h for h in await amem.search("green tea", namespace=NS) if h.terms.cosine > 0.5]


async def test_a_replace_whose_embedding_fails_keeps_the_old_memory(
    flaky: AsyncTieredMemory,
) -> None:
    await flaky.add("Sam drinks green tea", namespace=NS, id="drink")
    with pytest.raises(TieredMemoryError):
        await flaky.upsert("boom: Sam drinks coffee", id="drink", namespace=NS)
    with pytest.raises(TieredMemoryError):
        await flaky.add_many(
            [MemoryInput(content="boom again", id="drink")], namespace=NS, replace=True
        )
    kept = await flaky.get("drink", namespace=NS)
    assert kept is not None
    assert kept.content == "Sam drinks green tea"
    assert (await flaky.search("green tea", namespace=NS))[0].memory.id == "drink"


@pytest.mark.parametrize(
    "bad",
    [
        {"content": "   "},
        {"content": "bad\x00byte"},
        {"content": "ok", "metadata": {"n": 2**70}},
        {"content": "ok", "importance": 2.0},
        {"content": "ok", "embedding": [0.1] * 17},
        {"content": "ok", "embedding": [float("nan")] * 384},
    ],
)
async def test_a_replace_with_invalid_input_keeps_the_old_memory(
    amem: AsyncTieredMemory, bad: dict[str, object]
) -> None:
    await amem.add("Sam drinks green tea", namespace=NS, id="drink")
    with pytest.raises(ValidationError):
        await amem.upsert(id="drink", namespace=NS, **bad)  # type: ignore[arg-type]
    kept = await amem.get("drink", namespace=NS)
    assert kept is not None
    assert kept.content == "Sam drinks green tea"


async def test_a_replace_that_fails_inside_the_store_keeps_the_old_memory(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old row is removed and the new one inserted in one transaction: a failure
    between the two (here, the insert) rolls the removal back."""
    await amem.add("Sam drinks green tea", namespace=NS, id="drink")
    table = amem.store._memories  # type: ignore[attr-defined]
    insert = table.insert

    def failing_insert(conn: object, rows: object) -> None:
        raise BackendUnavailableError("disk full")

    monkeypatch.setattr(table, "insert", failing_insert)
    with pytest.raises(BackendUnavailableError):
        await amem.upsert("Sam drinks coffee", id="drink", namespace=NS)
    monkeypatch.setattr(table, "insert", insert)
    kept = await amem.get("drink", namespace=NS)
    assert kept is not None
    assert kept.content == "Sam drinks green tea"
    assert (await amem.search("green tea", namespace=NS))[0].memory.id == "drink"


async def test_a_replace_keeps_explicit_links_and_rebuilds_similar_ones(
    amem: AsyncTieredMemory,
) -> None:
    tea = await amem.add("Sam drinks green tea every morning", namespace=NS)
    coffee = await amem.add("Sam likes strong black coffee", namespace=NS)
    await amem.add("Sam drinks green tea every evening", namespace=NS, id="x")
    similar = {(link.target, link.kind) for link in await amem.links("x", namespace=NS)}
    assert (tea.id, LinkKind.SIMILAR) in similar
    friend = await amem.add("Ava is Sam's daughter", namespace=NS)
    await amem.link("x", friend.id, namespace=NS, weight=0.9)

    await amem.upsert("Sam likes strong black coffee at night", id="x", namespace=NS)
    links = {(link.target, link.kind) for link in await amem.links("x", namespace=NS)}
    assert (friend.id, LinkKind.EXPLICIT) in links  # kept: the id did not change
    assert (coffee.id, LinkKind.SIMILAR) in links  # rebuilt for the new content
    assert tea.id not in {target for target, _ in links}  # the old similarity is gone
    # seen from the other end too
    assert "x" not in {link.target for link in await amem.links(tea.id, namespace=NS)}


async def test_replacing_an_archived_memory_brings_it_back_live(
    amem: AsyncTieredMemory,
) -> None:
    await amem.add("Parked on level 3, bay C12", namespace=NS, id="car")
    assert await amem.archive(["car"], namespace=NS) == 1
    (original,) = await amem.objects.list(NS)
    assert original.startswith("car@")  # content-addressed: <id>@<sha256>
    with pytest.raises(ValidationError, match="already exist"):
        await amem.add("Parked on level 1", namespace=NS, id="car")
    replaced = await amem.upsert("Parked on level 1, bay A2", id="car", namespace=NS)
    assert replaced.tier is Tier.HOT
    stored = await amem.get("car", namespace=NS)
    assert stored is not None
    assert stored.content == "Parked on level 1, bay A2"
    assert await amem.store.get_archives(NS, ["car"]) == {}
    assert await amem.objects.list(NS) == []  # the old original went with its record
    assert (await amem.stats(namespace=NS)).total == 1


async def test_replace_many_mixes_new_and_existing_ids_and_never_merges_named_items(
    amem: AsyncTieredMemory,
) -> None:
    await amem.add("Sam drinks green tea", namespace=NS, id="a")
    out = await amem.add_many(
        [
            MemoryInput(content="Sam drinks green tea!", id="b"),  # a near-duplicate of a
            MemoryInput(content="Sam drinks oolong now", id="a"),
        ],
        namespace=NS,
        replace=True,
    )
    assert [m.id for m in out] == ["b", "a"]
    got = {m.id: m.content for m in await amem.list(namespace=NS)}
    assert got == {"a": "Sam drinks oolong now", "b": "Sam drinks green tea!"}


def test_the_sync_facade_upserts(mem: TieredMemory) -> None:
    mem.upsert("first", id="k", namespace=NS)
    mem.upsert("second", id="k", namespace=NS, embedding=np.ones(384, dtype=np.float32))
    stored = mem.get("k", namespace=NS)
    assert stored is not None
    assert stored.content == "second"
    with pytest.raises(ValidationError):
        mem.add("third", id="k", namespace=NS)


async def test_an_original_written_by_a_new_archival_is_not_deleted_by_the_replace(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replaced record's original is deleted after the commit (before it, a crash
    would leave the old record without its original), and only while it still holds the
    old bytes: here the new value is archived again in between, and its original stays."""
    await amem.add("Parked on level 3, bay C12", namespace=NS, id="car")
    await amem.archive(["car"], namespace=NS)
    replace_many = amem.store.replace_many

    async def then_archived_again(namespace: str, memories: Sequence[object]) -> object:
        replaced = await replace_many(namespace, memories)  # type: ignore[arg-type]
        assert await amem.archive(["car"], namespace=namespace) == 1
        return replaced

    monkeypatch.setattr(amem.store, "replace_many", then_archived_again)
    await amem.upsert("Parked on level 1, bay A2", id="car", namespace=NS)
    original = await amem.expand("car", namespace=NS)  # verified against its record
    assert original["content"] == "Parked on level 1, bay A2"


async def test_a_failed_cleanup_of_the_old_original_does_not_fail_the_replace(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await amem.add("Parked on level 3, bay C12", namespace=NS, id="car")
    await amem.archive(["car"], namespace=NS)

    async def unreachable(namespace: str, key: str) -> None:
        raise BackendUnavailableError("object storage is down")

    monkeypatch.setattr(amem.objects, "delete", unreachable)
    replaced = await amem.upsert("Parked on level 1, bay A2", id="car", namespace=NS)
    assert replaced.content == "Parked on level 1, bay A2"
    (left,) = await amem.objects.list(NS)  # left queued, for the sweep once it answers
    assert left.startswith("car@")
    assert [o.id for o in await amem.store.pending_originals(NS)] == ["car"]
