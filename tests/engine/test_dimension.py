"""One embedding dimension per store, decided before its first write (issue 16, item 3).

The dimension is the embedder's (its `dimension`, or `dimension=` given, or measured
once), recorded in the store when it is opened, and every vector of another size is
refused before anything is written; a file opened with an embedder of another size
is a ConfigurationError, not a store that fails on every call afterwards.

One backend: the dimension is the store's and the embedder's, and neither the graph nor
the object store takes part; `embedded` is also the opening path these tests check.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from tiered_memory import (
    AsyncTieredMemory,
    ConfigurationError,
    DimensionMismatchError,
    HashingEmbedder,
    Memory,
    TieredMemory,
)
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.ports import Matrix, Vector


def _memory(memory_id: str, embedding: list[float]) -> Memory:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return Memory(
        id=memory_id, content=memory_id, embedding=embedding, created_at=now, updated_at=now
    )


class Undeclared:
    """An embedder that does not say its dimension (most framework models don't)."""

    def __init__(self, dimension: int) -> None:
        self.inner = HashingEmbedder(dimension)
        self.calls = 0

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        self.calls += 1
        return self.inner.embed_sync(texts)

    async def aembed_query(self, text: str) -> Vector:
        self.calls += 1
        return self.inner.embed_sync([text])[0]


async def test_the_dimension_is_recorded_when_the_store_is_opened(tmp_path: Path) -> None:
    async with await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(64)
    ) as memory:
        assert await memory.store.dimension() == 64  # before any write
        assert await memory.dimension() == 64


async def test_a_first_write_of_another_dimension_is_refused(tmp_path: Path) -> None:
    """Before: the first vector written decided, so an 8-d vector fixed a store whose
    embedder makes 64-d ones, and every later add, search and recall failed."""
    async with await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(64)
    ) as memory:
        with pytest.raises(DimensionMismatchError, match="64"):
            await memory.add("an 8-d vector", namespace="a", embedding=np.ones(8))
        assert (await memory.stats(namespace="a")).total == 0
        added = await memory.add("Ava plays the violin", namespace="b")
        assert (await memory.search("violin", namespace="b"))[0].memory.id == added.id
        assert (await memory.recall("violin", namespace="b")).items


async def test_an_undeclared_dimension_is_measured_once_before_the_first_write(
    tmp_path: Path,
) -> None:
    embedder = Undeclared(16)
    async with await AsyncTieredMemory.embedded(tmp_path / "m.db", embedder=embedder) as memory:
        assert await memory.store.dimension() is None  # opening embeds nothing
        assert embedder.calls == 0
        with pytest.raises(DimensionMismatchError, match="16"):
            await memory.add("given vector", namespace="a", embedding=np.ones(8))
        assert embedder.calls == 1  # measured by one embedding
        assert await memory.store.dimension() == 16
        await memory.add("given vector", namespace="a", embedding=np.ones(16))
        await memory.add("embedded here", namespace="a")
        assert embedder.calls == 2  # measured once: the add's own embedding call only


async def test_a_given_dimension_is_recorded_at_open(tmp_path: Path) -> None:
    async with await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=Undeclared(16), dimension=16
    ) as memory:
        assert await memory.store.dimension() == 16
    with TieredMemory.embedded(tmp_path / "s.db", embedder=Undeclared(16), dimension=16) as mem:
        assert mem.run(mem.aio.store.dimension()) == 16
    with pytest.raises(ConfigurationError, match="dimension"):
        await AsyncTieredMemory.embedded(
            tmp_path / "x.db", embedder=HashingEmbedder(64), dimension=8
        )


async def test_opening_a_file_with_an_embedder_of_another_dimension_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    async with await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(64)) as memory:
        await memory.add("a 64-d memory", namespace="a")
    with pytest.raises(ConfigurationError, match=r"64-d.*32-d|32-d.*64-d"):
        await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(32))
    with pytest.raises(ConfigurationError, match="64"):
        TieredMemory.embedded(path, embedder=HashingEmbedder(32))
    # an embedder that does not declare its size is caught on its first use
    async with await AsyncTieredMemory.embedded(path, embedder=Undeclared(32)) as memory:
        with pytest.raises(ConfigurationError, match="64"):
            await memory.add("a 32-d memory", namespace="a")
        with pytest.raises(ConfigurationError, match="64"):
            await memory.search("anything", namespace="a")
        assert (await memory.stats(namespace="a")).total == 1
    async with await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(64)) as memory:
        assert (await memory.stats(namespace="a")).total == 1  # nothing was touched


async def test_an_empty_file_takes_the_dimension_of_its_next_embedder(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(64)) as memory:
        m = await memory.add("short-lived", namespace="a")
        await memory.forget(m.id, namespace="a", hard=True)
    async with await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(32)) as memory:
        assert await memory.store.dimension() == 32
        await memory.add("a 32-d memory", namespace="a")


async def test_the_store_port_fixes_the_dimension_before_the_first_write(
    tmp_path: Path,
) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "s.db", dimension=4)
    try:
        assert await store.dimension() == 4
        await store.ensure_dimension(4)  # the same: nothing to do
        await store.ensure_dimension(3)  # an empty store takes another
        assert await store.dimension() == 3
        await store.put_many("ns", [_memory("a", [1.0, 0.0, 0.0])])
        with pytest.raises(ConfigurationError, match="3-d"):
            await store.ensure_dimension(4)  # one holding vectors does not
        assert await store.dimension() == 3
    finally:
        await store.close()


class Misdeclared(Undeclared):
    """Says 64, makes 16."""

    dimension = 64


@pytest.mark.parametrize("given", [0, -3, True, 2.5])
async def test_a_given_dimension_must_be_a_positive_integer(tmp_path: Path, given: object) -> None:
    with pytest.raises(ConfigurationError, match="positive integer"):
        await AsyncTieredMemory.embedded(
            tmp_path / "m.db",
            embedder=Undeclared(16),
            dimension=given,  # type: ignore[arg-type]
        )


async def test_an_embedder_that_makes_another_size_than_it_declares_is_refused(
    tmp_path: Path,
) -> None:
    async with await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=Misdeclared(16)
    ) as memory:
        with pytest.raises(ConfigurationError, match="16-d"):
            await memory.add("anything", namespace="a")
        with pytest.raises(ConfigurationError, match="16-d"):
            await memory.search("anything", namespace="a")
        assert (await memory.stats(namespace="a")).total == 0
