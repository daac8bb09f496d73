"""The engine on SQLite records + a Bolt graph (issue 4, item 3): the behaviours that
involve links, and search surviving a graph outage."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.integration.neo4j.conftest import OUTAGE, FalkorDBServer, GraphFactory
from tiered_memory import (
    ArchivalPolicy,
    AssociationPolicy,
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    Policy,
    Tier,
)
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.neo4j.graph import Neo4jAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.ports import AssociationGraph
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

pytestmark = pytest.mark.neo4j
FAST_ARCHIVE = Policy(archival=ArchivalPolicy(backoff_base_seconds=0.0, max_retries=0))


async def engine_on(
    tmp_path: Path, graph: AssociationGraph, clock: ManualClock, policy: Policy = FAST_ARCHIVE
) -> AsyncTieredMemory:
    store = await SQLiteMemoryStore.open(tmp_path / f"{uuid.uuid4().hex}.db")
    return AsyncTieredMemory(
        store=store,
        graph=graph,
        objects=LocalFolderObjectStore(tmp_path / "archive"),
        summarizer=ExtractiveSummarizer(),
        embedder=HashingEmbedder(),
        policy=policy,
        clock=clock,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))


@pytest.fixture
def ns() -> str:
    return f"neo-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def mem(
    tmp_path: Path, graph_factory: GraphFactory, clock: ManualClock
) -> AsyncIterator[AsyncTieredMemory]:
    engine = await engine_on(tmp_path, await graph_factory(), clock)
    try:
        yield engine
    finally:
        await engine.store.close()  # the factory closes the graph


async def test_add_links_neighbours_in_the_graph(mem: AsyncTieredMemory, ns: str) -> None:
    a = await mem.add("Ava plays the violin at school concerts", namespace=ns)
    b = await mem.add("Ava practises violin every evening", namespace=ns)
    await mem.add("The quarterly tax report is due in April", namespace=ns)
    assert isinstance(mem.graph, Neo4jAssociationGraph)
    links = await mem.graph.links_of(ns, [b.id])
    assert [link.target for link in links] == [a.id]
    assert 0.3 <= links[0].weight <= 1.0


async def test_co_injection_strengthens_the_link(
    tmp_path: Path, graph_factory: GraphFactory, clock: ManualClock, ns: str
) -> None:
    # off by default since the LoCoMo tuning; the option must still work on Neo4j
    policy = FAST_ARCHIVE.model_copy(
        update={"associations": AssociationPolicy(co_recall_boost=0.1)}
    )
    mem = await engine_on(tmp_path, await graph_factory(), clock, policy)
    try:
        a = await mem.add("Ava plays the violin", namespace=ns)
        b = await mem.add("Ava has violin lessons on Tuesday", namespace=ns)
        before = {x.target: x.weight for x in await mem.links(a.id, namespace=ns)}
        inj = await mem.recall("Ava violin", namespace=ns, budget_tokens=200)
        assert {h.memory.id for h in inj.items} == {a.id, b.id}
        after = {x.target: x.weight for x in await mem.links(a.id, namespace=ns)}
        assert after[b.id] == pytest.approx(min(1.0, before[b.id] + 0.1))
    finally:
        await mem.store.close()


async def test_a_cold_neighbour_is_reactivated_through_the_graph(
    mem: AsyncTieredMemory, ns: str
) -> None:
    seed = await mem.add("Ava's recital is on Friday evening", namespace=ns)
    cold = await mem.add("Remember to buy flowers", namespace=ns)
    await mem.link(seed.id, cold.id, namespace=ns, weight=0.9)
    await mem.demote(cold.id, Tier.COLD, namespace=ns)
    inj = await mem.recall("when is Ava's recital", namespace=ns, budget_tokens=500)
    reached = [h for h in inj.items if h.memory.id == cold.id]
    assert reached
    assert reached[0].phase == 2
    assert reached[0].via == seed.id
    back = await mem.get(cold.id, namespace=ns)
    assert back is not None
    assert back.tier is Tier.WARM
    assert back.cold_since is None


async def test_archival_drops_graph_links_and_keeps_them_in_the_original(
    mem: AsyncTieredMemory, ns: str, clock: ManualClock
) -> None:
    a = await mem.add("Ava's school play is on the 12th of June", namespace=ns)
    b = await mem.add("Ava will be a tree in the school play", namespace=ns)
    assert await mem.graph.links_of(ns, [a.id])
    assert await mem.archive([a.id], namespace=ns) == 1
    assert await mem.graph.links_of(ns, [a.id, b.id]) == []  # nothing dangling
    record = (await mem.store.get_archives(ns, [a.id]))[a.id]
    assert record.links == []  # the links travel in the original, in object storage
    restored = await mem.restore(a.id, namespace=ns)
    assert restored.tier is Tier.WARM
    assert [x.target for x in await mem.graph.links_of(ns, [a.id])] == [b.id]


async def test_hostile_namespace_is_matched_literally(
    mem: AsyncTieredMemory,
) -> None:
    evil = "'}) DETACH DELETE n // \" `x` {ns}"
    a = await mem.add("Ava plays the violin", namespace=evil)
    b = await mem.add("Ava practises violin", namespace=evil)
    await mem.add("Ava plays the violin", namespace="innocent")
    assert [x.target for x in await mem.links(a.id, namespace=evil)] == [b.id]
    assert await mem.graph.count_links("innocent") == 0
    assert await mem.graph.count_links(evil) == 1


async def test_graph_server_stopped_mid_test_degrades_search(
    tmp_path: Path, outage_server: FalkorDBServer, clock: ManualClock, ns: str
) -> None:
    graph = Neo4jAssociationGraph(outage_server.uri, **OUTAGE)
    await graph.open()
    mem = await engine_on(tmp_path, graph, clock)
    try:
        await mem.add("Ava plays the violin", namespace=ns)
        await mem.add("Ava practises the violin daily", namespace=ns)
        healthy = await mem.search("violin", namespace=ns)
        assert not healthy.degraded
        outage_server.stop()
        hits = await mem.search("violin", namespace=ns)
        assert hits.degraded
        assert len(hits) == 2
        assert any("BackendUnavailable" in r for r in hits.reasons)
        started = time.monotonic()  # the breaker is open now: no more waiting on the graph
        again = await mem.search("violin", namespace=ns)
        assert time.monotonic() - started < 0.5
        assert again.degraded
        assert "skipped" in again.reasons[0]
        inj = await mem.recall("violin", namespace=ns)
        assert inj.degraded
        assert len(inj.items) == 2
        # writes keep working without the graph (links are skipped, memories kept)
        m = await mem.add("Ava tunes the violin", namespace=ns)
        assert (await mem.get(m.id, namespace=ns)) is not None
    finally:
        await mem.close()


@pytest.mark.slow  # the driver's own retries at start-up take ~13 s
async def test_a_memory_configured_with_a_dead_graph_still_starts(
    tmp_path: Path,
    outage_server: FalkorDBServer,
    clock: ManualClock,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tiered_memory.config import load_settings

    for name in list(__import__("os").environ):
        if name.startswith("TIERED_MEMORY_"):
            monkeypatch.delenv(name)
    outage_server.stop()
    config = tmp_path / "tm.toml"
    config.write_text("")
    settings = load_settings(
        config,
        data_dir=str(tmp_path),
        graph={"backend": "neo4j", "neo4j": {"uri": outage_server.uri}},
    )
    mem = await AsyncTieredMemory.from_settings(settings, clock=clock)
    try:
        await mem.add("Ava plays the violin", namespace=ns)
        hits = await mem.search("Ava plays the violin", namespace=ns)
        assert [h.memory.content for h in hits] == ["Ava plays the violin"]
        assert hits.degraded  # the graph walk was tried and skipped
    finally:
        await mem.close()
