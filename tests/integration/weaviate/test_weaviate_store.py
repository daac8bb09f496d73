"""WeaviateMemoryStore against a real server: the shared contract, then what is
particular to Weaviate (tenants, collections, crash convergence, batch errors) and the
engine end to end on top of it."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from weaviate.collections.classes.config import VectorIndexConfigFlat, VectorIndexConfigHNSW

if not os.environ.get("WEAVIATE_URL"):
    from .conftest import SKIP_REASON

    pytest.skip(SKIP_REASON, allow_module_level=True)

from tests.contract.store_contract import MemoryStoreContract, unique_namespace
from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.backends.weaviate.mapping import (
    is_hashed_tenant,
    memory_to_properties,
    object_uuid,
    tenant_name,
)
from tiered_memory.backends.weaviate.store import WeaviateMemoryStore, WeaviateWriteError
from tiered_memory.errors import BackendUnavailableError
from tiered_memory.models import LIVE_TIERS, ArchiveRecord, Memory, MemoryType, Tier
from tiered_memory.ports import AccessRecord, MemoryStore, ScanQuery
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

from .conftest import StoreFactory

pytestmark = pytest.mark.weaviate

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)


class TestWeaviateMemoryStore(MemoryStoreContract):
    """The shared MemoryStore suite; `store` comes from conftest (session prefix)."""

    transactional = False  # transaction() is documented as a no-op


# -- layout --------------------------------------------------------------------------------


async def test_collections_have_the_documented_indexes(fresh_store: StoreFactory) -> None:
    store = await fresh_store("Layout")
    assert isinstance(store, MemoryStore)
    collections = store.client.collections
    active = await collections.use(store.active_name).config.get()
    cold = await collections.use(store.cold_name).config.get()
    archive = await collections.use(store.archive_name).config.get()
    registry = await collections.use(store.registry_name).config.get()
    for config in (active, cold, archive):
        assert config.multi_tenancy_config.enabled
        assert config.multi_tenancy_config.auto_tenant_creation
    assert not registry.multi_tenancy_config.enabled
    indexes = {}
    for name, config in (("active", active), ("cold", cold), ("archive", archive)):
        assert config.vector_config is not None
        indexes[name] = config.vector_config["default"].vector_index_config
    assert isinstance(indexes["active"], VectorIndexConfigHNSW)
    assert isinstance(indexes["cold"], VectorIndexConfigFlat)
    assert isinstance(indexes["archive"], VectorIndexConfigFlat)


async def test_open_is_idempotent_and_a_second_store_shares_the_schema(
    fresh_store: StoreFactory,
) -> None:
    store = await fresh_store("Twice")
    assert await store.open() is store
    ns = unique_namespace()
    memory = Memory(
        id="a", namespace=ns, content="x", embedding=[1.0, 0.0], created_at=T0, updated_at=T0
    )
    await store.put_many(ns, [memory])
    again = WeaviateMemoryStore(client=store.client, prefix=store.prefix)
    await again.open()
    assert set(await again.get_many(ns, ["a"])) == {"a"}
    await again.close()  # a borrowed client stays open
    assert store.client.is_connected()
    assert set(await store.get_many(ns, ["a"])) == {"a"}


async def test_each_namespace_is_a_tenant_created_on_first_write(
    store: WeaviateMemoryStore,
) -> None:
    ns = unique_namespace("tenant")
    long_ns = "\u540d\u524d " * 40 + uuid.uuid4().hex
    try:
        tenants = store.client.collections.use(store.active_name).tenants
        assert not await tenants.exists(tenant_name(ns))
        assert await store.get_many(ns, ["a"]) == {}  # reading creates nothing
        assert not await tenants.exists(tenant_name(ns))
        for namespace in (ns, long_ns):
            memory = Memory(
                id="a",
                namespace=namespace,
                content="x",
                embedding=[1.0] + [0.0] * 7,
                created_at=T0,
                updated_at=T0,
            )
            await store.put_many(namespace, [memory])
            assert await tenants.exists(tenant_name(namespace))
        assert is_hashed_tenant(tenant_name(long_ns))
        listed = await store.namespaces()
        assert ns in listed
        assert long_ns in listed  # hashed tenant names map back through the registry
    finally:
        await store.clear(ns)
        await store.clear(long_ns)
    assert not await tenants.exists(tenant_name(ns))


# -- crash convergence ------------------------------------------------------------------------


def memory(memory_id: str, ns: str, **fields: object) -> Memory:
    return Memory(
        id=memory_id,
        namespace=ns,
        content=f"content of {memory_id}",
        embedding=[1.0] + [0.0] * 7,
        created_at=T0,
        updated_at=T0,
        **fields,
    )


async def test_a_crashed_tier_move_reads_as_moved_and_converges(
    store: WeaviateMemoryStore,
) -> None:
    ns = unique_namespace("crash")
    try:
        await store.put_many(ns, [memory("a", ns)])
        # the copy step of HOT -> COLD landed, the delete step did not
        moved = memory("a", ns, tier=Tier.COLD, cold_since=T0 + DAY, tier_changed_at=T0 + DAY)
        await store._upsert(
            store.cold_name,
            ns,
            [(object_uuid(ns, "a"), memory_to_properties(moved), moved.embedding, "a")],
        )
        assert (await store.get_many(ns, ["a"]))["a"].tier is Tier.COLD
        hot = await store.vector_search(
            ns, np.asarray(moved.embedding, dtype=np.float32), tiers=frozenset({Tier.HOT}), k=5
        )
        assert hot == []  # the stale HOT copy is not reported as HOT
        scanned = await store.scan(ns, ScanQuery(tiers=LIVE_TIERS))
        assert [(m.id, m.tier) for m in scanned] == [("a", Tier.COLD)]
        assert await store.set_tier(ns, ["a"], Tier.COLD, T0 + 2 * DAY) == 0  # rerun
        active = store.client.collections.use(store.active_name).with_tenant(tenant_name(ns))
        assert (await active.aggregate.over_all(total_count=True)).total_count == 0
        assert (await store.stats(ns)).tiers[Tier.COLD].count == 1
    finally:
        await store.clear(ns)


async def test_a_crashed_archival_reads_as_archived_and_converges(
    store: WeaviateMemoryStore,
) -> None:
    ns = unique_namespace("crash")
    record = ArchiveRecord(
        id="a",
        namespace=ns,
        summary="summary of a",
        summary_embedding=[1.0] + [0.0] * 7,
        storage_ref="file:///a.json",
        size_bytes=10,
        checksum="0" * 64,
        created_at=T0,
        archived_at=T0 + 200 * DAY,
        archive_reason="test",
    )
    try:
        await store.put_many(ns, [memory("a", ns, tier=Tier.COLD)])
        await store._write_records(ns, [record])
        assert await store.get_many(ns, ["a"]) == {}
        assert await store.list_ids(ns) == []
        query = np.asarray(record.summary_embedding, dtype=np.float32)
        assert await store.vector_search(ns, query, tiers=LIVE_TIERS, k=5) == []
        assert await store.archive_many(ns, [record]) == 0  # rerun: nothing left to move
        cold = store.client.collections.use(store.cold_name).with_tenant(tenant_name(ns))
        assert (await cold.aggregate.over_all(total_count=True)).total_count == 0
        assert set(await store.get_archives(ns, ["a"])) == {"a"}
    finally:
        await store.clear(ns)


# -- batches and errors ------------------------------------------------------------------------


async def test_batch_write_errors_name_each_rejected_object(store: WeaviateMemoryStore) -> None:
    ns = unique_namespace("batch")
    good = memory("good", ns)
    bad_props = memory_to_properties(memory("bad", ns))
    bad_props["use_count"] = "not a number"
    try:
        with pytest.raises(WeaviateWriteError) as caught:
            await store._upsert(
                store.active_name,
                ns,
                [
                    (object_uuid(ns, "good"), memory_to_properties(good), good.embedding, "good"),
                    (object_uuid(ns, "bad"), bad_props, good.embedding, "bad"),
                ],
            )
        assert set(caught.value.failures) == {"bad"}
        assert set(await store.get_many(ns, ["good", "bad"])) == {"good"}
    finally:
        await store.clear(ns)


async def test_many_uses_are_recorded_in_batches(store: WeaviateMemoryStore) -> None:
    ns = unique_namespace("uses")
    ids = [f"m{i:03d}" for i in range(250)]
    try:
        await store.put_many(ns, [memory(i, ns) for i in ids])
        await store.record_access(ns, [AccessRecord(i, T0 + DAY) for i in ids + ids[:10]])
        found = await store.get_many(ns, ids)
        assert sum(m.use_count for m in found.values()) == 260
        assert found["m000"].use_count == 2
        assert found["m249"].last_accessed_at == T0 + DAY
    finally:
        await store.clear(ns)


async def test_an_unreachable_server_is_backend_unavailable() -> None:
    store = WeaviateMemoryStore(url="http://127.0.0.1:9", prefix="TmUnreachable")
    try:
        with pytest.raises(BackendUnavailableError, match="docker compose"):
            await store.open()
    finally:
        await store.close()


# -- the engine on top -------------------------------------------------------------------------


@pytest.fixture
async def engine(
    tmp_path: Path, fresh_store: StoreFactory
) -> AsyncIterator[tuple[AsyncTieredMemory, ManualClock]]:
    """The engine with Weaviate as its store; graph and archive stay embedded."""
    clock = ManualClock(T0)
    store = await fresh_store("Engine")  # its own prefix: another embedding dimension
    graph_file = await SQLiteMemoryStore.open(tmp_path / "graph.db")
    memory_engine = AsyncTieredMemory(
        store=store,
        graph=SQLiteAssociationGraph(graph_file.database),
        objects=LocalFolderObjectStore(tmp_path / "archive"),
        summarizer=ExtractiveSummarizer(),
        embedder=HashingEmbedder(),
        clock=clock,
    )
    try:
        yield memory_engine, clock
    finally:
        await memory_engine.close()
        await graph_file.close()


async def test_the_engine_runs_end_to_end_on_weaviate(
    engine: tuple[AsyncTieredMemory, ManualClock],
) -> None:
    mem, clock = engine
    ns = unique_namespace("engine")
    ava = await mem.add(
        "User's daughter is called Ava",
        namespace=ns,
        memory_type=MemoryType.FACTUAL,
        importance=0.8,
    )
    injection = await mem.recall("what is my daughter called?", namespace=ns, budget_tokens=200)
    assert "Ava" in injection.text  # and Ava now counts as used
    idle = await mem.add("The office coffee machine is broken", namespace=ns, importance=0.1)
    hits = await mem.search("daughter name Ava", namespace=ns)
    assert hits[0].memory.id == ava.id
    assert await mem.get(ava.id, namespace="someone-else") is None

    clock.advance(days=4)
    await mem.maintain()
    got_ava, got_idle = await mem.get(ava.id, namespace=ns), await mem.get(idle.id, namespace=ns)
    assert got_ava is not None
    assert got_ava.tier is Tier.WARM
    assert got_idle is not None
    assert got_idle.tier is Tier.COLD

    clock.advance(days=200)
    await mem.maintain()
    archived = await mem.get(idle.id, namespace=ns)
    assert archived is not None
    assert archived.tier is Tier.ARCHIVED
    faded = await mem.get(ava.id, namespace=ns)
    assert faded is not None
    assert faded.tier is Tier.COLD
    stats = await mem.stats(namespace=ns)
    assert stats.tiers[Tier.ARCHIVED].count == 1
    original = await mem.expand(idle.id, namespace=ns)
    assert original["content"] == "The office coffee machine is broken"
