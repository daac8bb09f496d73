"""Outages (issue 11, part 5): each backend fails in turn, and it shows.

- the graph server stops: search and recall are degraded (`degraded=True`, the reason
  named), never failed; writes go on; the sweep keeps memories COLD and says why;
- the object store stops: archival (whose S3 adapter retries with botocore's backoff,
  the one retry layer) pauses, keeps every memory COLD with its content, and says so
  in the report; it resumes when the store is back;
- the summariser fails: the pipeline asks once per memory and run (retrying is the
  summariser adapter's: `AnthropicSummarizer` backs off itself), and the batch pauses
  once more than 5 % of it failed; under 5 % it carries on; an outage never
  quarantines a memory (on every backend combination: tests/matrix.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from tests.distinct import distinct_texts
from tests.integration.neo4j.conftest import FAST as BOLT_FAST
from tests.integration.neo4j.conftest import FalkorDBServer
from tests.integration.s3.conftest import FAST as S3_FAST
from tests.integration.s3.conftest import MotoServer
from tests.matrix import MemoryFactory
from tiered_memory import (
    ArchivalPolicy,
    AsyncTieredMemory,
    BackendUnavailableError,
    HashingEmbedder,
    ManualClock,
    Policy,
    RetrievalPolicy,
    Tier,
    TieredMemoryError,
)
from tiered_memory.archive import original_key, sha256_hex
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.neo4j.graph import Neo4jAssociationGraph
from tiered_memory.backends.s3.objects import S3ObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.ports import ObjectStore, Summary, SummaryRequest
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

from .conftest import START
from .invariants import check_store

NS = "outage"
BACKOFF = 0.02
RETRIES = 3
COOLDOWN = 0.5  # seconds searches skip the graph after it failed (the breaker)
POLICY = Policy(
    archival=ArchivalPolicy(backoff_base_seconds=BACKOFF, max_retries=RETRIES),
    retrieval=RetrievalPolicy(graph_cooldown_seconds=COOLDOWN),
)


async def fill(mem: AsyncTieredMemory, clock: ManualClock, n: int) -> dict[str, str]:
    """`n` unimportant memories, made COLD and then due for archival. Their texts are
    distinct (no two near-duplicates), so each is archived, and fails, on its own: these
    tests count failures per memory, and near-duplicates would be archived together."""
    texts = distinct_texts(n, lambda i: f"Ticket {i}:")
    added = await mem.add_many(
        [{"content": text, "importance": 0.1} for text in texts], namespace=NS, dedup=False
    )
    clock.advance(days=4)
    assert (await mem.maintain()).count("hot_to_cold") == n
    clock.advance(days=200)
    return {m.id: m.content for m in added}


async def assert_all_cold(mem: AsyncTieredMemory, contents: dict[str, str]) -> None:
    live = await mem.store.get_many(NS, list(contents))
    assert set(live) == set(contents), "a memory left its COLD tier during the outage"
    for memory_id, memory in live.items():
        assert memory.tier is Tier.COLD
        assert memory.content == contents[memory_id]
    assert await mem.store.get_archives(NS, list(contents)) == {}


# -- the graph server stops ----------------------------------------------------------------


@pytest.fixture
async def bolt_memory(
    tmp_path: Path, graph_outage_server: FalkorDBServer
) -> AsyncIterator[tuple[AsyncTieredMemory, FalkorDBServer, ManualClock]]:
    clock = ManualClock(START)
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    graph = Neo4jAssociationGraph(graph_outage_server.uri, None, **BOLT_FAST)
    mem = AsyncTieredMemory(
        store=store,
        graph=graph,
        objects=LocalFolderObjectStore(tmp_path / "archive"),
        summarizer=ExtractiveSummarizer(),
        embedder=HashingEmbedder(),
        policy=POLICY,
        clock=clock,
    )
    try:
        await graph.open()
        yield mem, graph_outage_server, clock
    finally:
        await mem.close()


@pytest.mark.neo4j
@pytest.mark.slow
async def test_graph_outage_degrades_search_and_pauses_archival(
    bolt_memory: tuple[AsyncTieredMemory, FalkorDBServer, ManualClock],
) -> None:
    mem, server, clock = bolt_memory
    contents = await fill(mem, clock, 6)
    first = await mem.add("Ava's piano lesson moved to Thursday", namespace=NS, importance=0.9)
    second = await mem.add("Ava's piano teacher is Mr Lund", namespace=NS, importance=0.9)
    await mem.link(first.id, second.id, namespace=NS, weight=0.9)
    assert await mem.links(first.id, namespace=NS)
    healthy = await mem.search("piano lesson", namespace=NS)
    assert not healthy.degraded

    server.stop()
    started = time.monotonic()
    hits = await mem.search("piano lesson", namespace=NS)
    assert hits.degraded
    assert any("graph" in reason for reason in hits.reasons), hits.reasons
    assert first.id in [h.memory.id for h in hits]  # found without the graph
    injection = await mem.recall("piano lesson", namespace=NS, budget_tokens=300)
    assert injection.degraded
    assert first.id in [h.memory.id for h in injection.items]
    third = await mem.add("Ava practises piano after school", namespace=NS, importance=0.9)
    assert (await mem.get(third.id, namespace=NS)) is not None  # writes go on
    assert time.monotonic() - started < 30, "a dead graph must fail fast"

    report = await mem.maintain()
    assert report.count("cold_to_archived") == 0
    assert report.archive_paused
    assert any("BackendUnavailableError" in e for e in report.errors), report.errors
    await assert_all_cold(mem, contents)

    server.start()  # back on the same port: the next sweep archives everything
    report = await mem.maintain()
    assert report.errors == []
    assert report.count("cold_to_archived") == len(contents)
    await asyncio.sleep(COOLDOWN)  # the breaker lets searches try the graph again
    assert not (await mem.search("piano lesson", namespace=NS)).degraded
    live = {m.id for m in await mem.list(namespace=NS, limit=100)}
    assert {first.id, second.id, third.id} <= live
    for link in await mem.graph.links_of(NS, [*contents, *live]):
        assert {link.source, link.target} <= live, "a link to an archived memory"
    print(f"\n[outage/graph] search degraded, {len(report.errors)} errors after recovery")


# -- the object store stops ----------------------------------------------------------------


def s3(endpoint: str, bucket: str) -> S3ObjectStore:
    # One attempt per call: the pipeline's own retries (with backoff) are under test.
    return S3ObjectStore(bucket, **{**S3_FAST, "endpoint_url": endpoint, "max_attempts": 1})


class Counting:
    """Counts the calls of some methods of an object store (retries show up here)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("put", "head", "get"):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return await attr(*args, **kwargs)

        return call


@pytest.mark.s3
@pytest.mark.slow
async def test_object_store_outage_pauses_archival_with_memories_kept_cold(
    tmp_path: Path, s3_outage_server: MotoServer
) -> None:
    clock = ManualClock(START)
    bucket = f"outage-{uuid.uuid4().hex[:16]}"
    first = s3(s3_outage_server.endpoint, bucket)
    await first.create_bucket_if_missing()
    objects = Counting(first)
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    mem = AsyncTieredMemory(
        store=store,
        graph=SQLiteAssociationGraph(store.database),
        objects=objects,
        summarizer=ExtractiveSummarizer(),
        embedder=HashingEmbedder(),
        policy=POLICY,
        clock=clock,
    )
    revived: ThreadedMotoServer | None = None
    try:
        contents = await fill(mem, clock, 40)
        links_before = (await mem.stats(namespace=NS)).links
        s3_outage_server.stop()
        report = await mem.maintain()
        assert report.archive_paused
        assert report.count("cold_to_archived") == 0
        assert any("paused" in e for e in report.errors)
        assert any("BackendUnavailableError" in e for e in report.errors), report.errors
        failed = [e for e in report.errors if ": archive " in e]
        assert len(failed) == 2  # 2 of 20 is over 5 %: the batch stops there
        # one call per memory: botocore retried inside it (one layer), then gave up
        assert objects.calls["put"] == len(failed)
        await assert_all_cold(mem, contents)
        assert (await mem.stats(namespace=NS)).links == links_before

        # The store is back (moto's state lives in this process; a new server serves it).
        revived = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        revived.start()
        host, port = revived.get_host_and_port()
        await objects.inner.close()  # type: ignore[attr-defined]
        objects.inner = s3(f"http://{host}:{port}", bucket)
        report = await mem.maintain()
        assert report.errors == []
        assert not report.archive_paused
        assert report.count("cold_to_archived") == len(contents)
        snap = await check_store(mem, {NS: contents})
        assert len(snap.archived) == len(contents)
        for record in snap.archived.values():
            data = await mem.objects.get(NS, original_key(record.id, record.checksum))
            assert sha256_hex(data) == record.checksum
    finally:
        await mem.close()
        if revived is not None:
            revived.stop()
    print(f"\n[outage/s3] paused after {len(failed)} failures, {objects.calls} calls")


# -- the summariser fails --------------------------------------------------------------------


class FlakySummarizer:
    """Fails for the memories `fails(content)` picks: an outage (retried) or a bad
    request (not retried). Records when each call was made."""

    def __init__(self, fails: Callable[[str], bool], error: Exception) -> None:
        self.fails, self.error = fails, error
        self.inner = ExtractiveSummarizer()
        self.calls: dict[str, list[float]] = {}

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.calls.setdefault(request.content, []).append(time.monotonic())
        if self.fails(request.content):
            raise self.error
        return await self.inner.summarize(request)


async def _opened(
    memories: MemoryFactory, tmp_path: Path, summarizer: Any, clock: ManualClock
) -> AsyncTieredMemory:
    return await memories.open(
        tmp_path / "m.db",
        embedder=HashingEmbedder(),
        summarizer=summarizer,
        policy=POLICY,
        clock=clock,
    )


@pytest.mark.slow
async def test_failing_summariser_pauses_the_batch_and_quarantines_nothing(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    clock = ManualClock(START)
    # Every third memory's summary fails: far more than 5 % of the batch.
    summarizer = FlakySummarizer(
        lambda text: int(text.split()[1].rstrip(":")) % 3 == 0,
        BackendUnavailableError("the summariser is overloaded (529)"),
    )
    mem = await _opened(memories, tmp_path, summarizer, clock)
    try:
        contents = await fill(mem, clock, 30)
        summarizer.calls.clear()
        report = await mem.maintain()
        assert report.archive_paused
        assert any("paused" in e for e in report.errors)
        failed = [e for e in report.errors if ": archive " in e]
        assert len(failed) == 2  # the second failure crosses 5 % of a 20-memory floor
        assert all("overloaded" in e for e in failed)
        # one call per memory and run: the pipeline does not retry on top of the adapter
        assert all(len(stamps) == 1 for stamps in summarizer.calls.values())
        archived = report.count("cold_to_archived")
        stats = await mem.stats(namespace=NS)
        assert stats.tiers[Tier.ARCHIVED].count == archived
        assert stats.tiers[Tier.COLD].count == len(contents) - archived
        assert archived < len(contents) - 2  # the rest of the batch waited
        snap = await check_store(mem, {NS: contents})
        assert len(snap.archived) == archived
        for _ in range(3):  # an outage is not the memories' fault: never quarantined
            await mem.maintain()
        assert (await mem.stats(namespace=NS)).quarantined == 0
    finally:
        await mem.close()
    print(f"\n[outage/summariser] paused after {len(failed)} failures, {archived} archived first")


@pytest.mark.slow
async def test_a_few_summariser_failures_do_not_pause_the_batch(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    clock = ManualClock(START)
    summarizer = FlakySummarizer(
        lambda text: text.startswith("Ticket 7:"), BackendUnavailableError("flaky")
    )
    mem = await _opened(memories, tmp_path, summarizer, clock)
    try:
        contents = await fill(mem, clock, 40)
        report = await mem.maintain()
        assert not report.archive_paused
        assert report.count("cold_to_archived") == len(contents) - 1
        assert len(report.errors) == 1
        assert "flaky" in report.errors[0]
        snap = await check_store(mem, {NS: contents})
        (cold,) = [m for m in snap.live.values() if m.tier is Tier.COLD]
        assert cold.content.startswith("Ticket 7:")
    finally:
        await mem.close()


async def test_a_bad_request_to_the_summariser_is_not_retried(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    clock = ManualClock(START)
    summarizer = FlakySummarizer(
        lambda text: text.startswith("Ticket 3:"), TieredMemoryError("bad request: prompt too long")
    )
    mem = await _opened(memories, tmp_path, summarizer, clock)
    try:
        await fill(mem, clock, 25)
        report = await mem.maintain()
        calls = [c for c in summarizer.calls if c.startswith("Ticket 3:")]
        assert len(summarizer.calls[calls[0]]) == 1
        assert not report.archive_paused
        assert report.count("cold_to_archived") == 24
    finally:
        await mem.close()
