"""Optional capabilities (`ports.Supports*`): the engine asks whether a backend has one
with `isinstance` against the declared Protocol, never by its class, so any backend
implementing the method gets the faster path."""

from __future__ import annotations

from pathlib import Path

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.backends.local import LocalFolderObjectStore
from tiered_memory.backends.s3 import S3ObjectStore
from tiered_memory.backends.sqlite import SQLiteAssociationGraph, SQLiteMemoryStore
from tiered_memory.models import ObjectInfo
from tiered_memory.ports import (
    MemoryStore,
    ObjectStore,
    SupportsAdjacent,
    SupportsBatchVectorSearch,
    SupportsCosines,
    SupportsDeferredSync,
    SupportsLiveIds,
    SupportsPutVectors,
)
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

from .conftest import START

NS = "caps"


class Folder:
    """An object store of its own (not a LocalFolderObjectStore) that can defer its
    folder syncs; it records how the archiver used it."""

    def __init__(self, root: Path) -> None:
        self._inner = LocalFolderObjectStore(root)
        self.calls: list[str] = []

    async def put(
        self, namespace: str, key: str, data: bytes, *, sync_folder: bool = True
    ) -> ObjectInfo:
        self.calls.append(f"put sync_folder={sync_folder}")
        return await self._inner.put(namespace, key, data, sync_folder=sync_folder)

    async def sync_folder(self, namespace: str) -> None:
        self.calls.append("sync_folder")
        await self._inner.sync_folder(namespace)

    async def head(self, namespace: str, key: str) -> ObjectInfo | None:
        return await self._inner.head(namespace, key)

    async def get(self, namespace: str, key: str) -> bytes:
        return await self._inner.get(namespace, key)

    async def delete(self, namespace: str, key: str) -> None:
        await self._inner.delete(namespace, key)

    async def list(self, namespace: str) -> list[str]:
        return await self._inner.list(namespace)

    def ref(self, namespace: str, key: str) -> str:
        return self._inner.ref(namespace, key)

    async def close(self) -> None:
        await self._inner.close()


async def test_any_object_store_that_can_defer_its_syncs_gets_them_deferred(
    tmp_path: Path,
) -> None:
    folder = Folder(tmp_path / "archive")
    assert isinstance(folder, ObjectStore)
    assert isinstance(folder, SupportsDeferredSync)
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    memory = AsyncTieredMemory(
        store=store,
        graph=SQLiteAssociationGraph(store.database),
        objects=folder,
        summarizer=ExtractiveSummarizer(),
        embedder=HashingEmbedder(),
        clock=ManualClock(START),
    )
    try:
        ids = [(await memory.add(f"note {i} about the garden", namespace=NS)).id for i in range(3)]
        assert await memory.archive(ids, namespace=NS) == 3
    finally:
        await memory.close()
    puts = [c for c in folder.calls if c.startswith("put")]
    assert puts == ["put sync_folder=False"] * 3
    assert "sync_folder" in folder.calls
    # every original's rename is made durable before the records that point to them
    assert folder.calls.index("sync_folder") > max(
        i for i, c in enumerate(folder.calls) if c.startswith("put")
    )


async def test_the_backends_declare_what_they_offer(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    try:
        assert isinstance(store, MemoryStore)
        for capability in (
            SupportsCosines,
            SupportsAdjacent,
            SupportsBatchVectorSearch,
            SupportsLiveIds,
            SupportsPutVectors,
        ):
            assert isinstance(store, capability), capability.__name__
    finally:
        await store.close()
    assert isinstance(LocalFolderObjectStore(tmp_path / "a"), SupportsDeferredSync)
    s3 = S3ObjectStore("bucket", region_name="us-east-1")
    assert isinstance(s3, ObjectStore)
    assert not isinstance(s3, SupportsDeferredSync)


async def test_live_ids_names_the_live_memories_of_one_namespace_only(tmp_path: Path) -> None:
    """Auto-linking's check that both ends of a new link still live (`SupportsLiveIds`):
    archived, deleted and other namespaces' memories are not live here."""
    memory = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=ManualClock(START)
    )
    try:
        kept, archived, deleted = [
            (await memory.add(f"note {i} about the garden", namespace=NS)).id for i in range(3)
        ]
        other = (await memory.add("a note elsewhere", namespace="other")).id
        await memory.archive([archived], namespace=NS)
        await memory.forget(deleted, namespace=NS, hard=True)
        store = memory.store
        assert isinstance(store, SupportsLiveIds)
        ids = [kept, archived, deleted, other, "never-added"]
        assert await store.live_ids(NS, ids) == {kept}
        assert await store.live_ids("other", ids) == {other}
        assert await store.live_ids(NS, []) == set()
    finally:
        await memory.close()
