"""Issue 5's proof: archival of 200 memories through SQLite + S3 (moto) + Claude (stub),
and an object-store outage in the middle of a batch."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from tests.distinct import distinct_texts
from tests.integration.anthropic.conftest import MessagesStub
from tests.integration.s3.conftest import MotoServer
from tiered_memory import (
    ArchivalPolicy,
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    Policy,
    Tier,
)
from tiered_memory.archive import decode_document, key_owner, original_key, sha256_hex
from tiered_memory.backends.s3.objects import S3ObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.summarizers.anthropic import AnthropicSummarizer

pytestmark = [pytest.mark.s3, pytest.mark.http]
NS = "tenant-7"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
FAST = Policy(archival=ArchivalPolicy(backoff_base_seconds=0.0, max_retries=1))


def s3(endpoint: str, bucket: str) -> S3ObjectStore:
    return S3ObjectStore(
        bucket,
        endpoint_url=endpoint,
        region_name="us-east-1",
        path_style=True,
        max_attempts=2,
        connect_timeout=0.5,
        read_timeout=2.0,
    )


async def engine(
    db: Path, objects: S3ObjectStore, summarizer: Any, clock: ManualClock
) -> AsyncTieredMemory:
    store = await SQLiteMemoryStore.open(db)
    return AsyncTieredMemory(
        store=store,
        graph=SQLiteAssociationGraph(store.database),
        objects=objects,
        summarizer=summarizer,
        embedder=HashingEmbedder(),
        policy=FAST,
        clock=clock,
    )


def claude(stub: MessagesStub) -> AnthropicSummarizer:
    # the default 10 requests/s is the production limit; the stub takes more
    return AnthropicSummarizer(
        api_key="test-key", base_url=stub.url, rate_per_second=1000, max_retries=1
    )


async def fill(mem: AsyncTieredMemory, clock: ManualClock, n: int) -> list[str]:
    """`n` memories due for archival, no two near-duplicates: each is archived with a
    request of its own (near-duplicates would share one summary), as these tests count."""
    texts = distinct_texts(n, lambda i: f"Ticket {i}:")
    items = [{"content": text, "importance": 0.2} for text in texts]
    added = await mem.add_many(items, namespace=NS, dedup=False)
    clock.advance(days=4)
    await mem.maintain()  # HOT -> COLD
    clock.advance(days=200)  # due for archival
    return [m.id for m in added]


@pytest.fixture
async def bucket_on(s3_endpoint: str) -> str:
    name = f"tm-{uuid.uuid4().hex[:20]}"
    objects = s3(s3_endpoint, name)
    await objects.create_bucket_if_missing()
    await objects.close()
    return name


async def test_200_memories_archive_through_sqlite_moto_and_claude(
    tmp_path: Path, s3_endpoint: str, bucket_on: str, stub: MessagesStub
) -> None:
    clock = ManualClock(START)
    summarizer = claude(stub)
    mem = await engine(tmp_path / "m.db", s3(s3_endpoint, bucket_on), summarizer, clock)
    try:
        ids = await fill(mem, clock, 200)
        dry = await mem.maintain(dry_run=True)
        assert dry.archive_estimate is not None
        assert dry.archive_estimate.summarizer_calls == 200
        assert stub.received == []  # a dry run calls nothing
        report = await mem.maintain()
        assert report.errors == []
        assert report.count("cold_to_archived") == 200
        assert len(stub.received) == 200
        assert report.summarizer_input_tokens == 200 * 120  # the stub's usage, summed
        assert report.summarizer_output_tokens == 200 * 30
        stats = await mem.stats(namespace=NS)
        assert stats.tiers[Tier.ARCHIVED].count == 200
        assert stats.tiers[Tier.COLD].count == 0
        assert sorted(map(key_owner, await mem.objects.list(NS))) == sorted(ids)
        for memory_id in ids[:25]:
            record = (await mem.store.get_archives(NS, [memory_id]))[memory_id]
            assert record.storage_ref.startswith(f"s3://{bucket_on}/tiered-memory/")
            assert record.summary.startswith("Ava Chen")  # what Claude (the stub) said
            original = await mem.expand(memory_id, namespace=NS)
            data = await mem.objects.get(NS, original_key(memory_id, record.checksum))
            assert sha256_hex(data) == record.checksum
            assert original["content"] == decode_document(data)["content"]
            assert original["content"].startswith("Ticket ")
    finally:
        await mem.close()


class StopsTheStoreAfter:
    """A summariser that takes the object store down after `n` calls: an outage in the
    middle of a batch."""

    def __init__(self, inner: Any, server: MotoServer, n: int) -> None:
        self.inner, self.server, self.n, self.calls = inner, server, n, 0

    async def summarize(self, request: Any) -> Any:
        self.calls += 1
        if self.calls == self.n:
            self.server.stop()
        return await self.inner.summarize(request)


async def test_object_store_outage_mid_batch_keeps_every_memory_whole(
    tmp_path: Path, outage_server: MotoServer, stub: MessagesStub
) -> None:
    clock = ManualClock(START)
    bucket = f"tm-{uuid.uuid4().hex[:20]}"
    first = s3(outage_server.endpoint, bucket)
    await first.create_bucket_if_missing()
    summarizer = StopsTheStoreAfter(claude(stub), outage_server, n=41)
    mem = await engine(tmp_path / "m.db", first, summarizer, clock)
    try:
        ids = await fill(mem, clock, 120)
        report = await mem.maintain()
        archived = report.count("cold_to_archived")
        assert archived == 40  # the 41st upload met a dead endpoint
        assert report.archive_paused
        assert any("BackendUnavailable" in e or "paused" in e for e in report.errors)
        stats = await mem.stats(namespace=NS)
        assert stats.tiers[Tier.ARCHIVED].count == 40
        assert stats.tiers[Tier.COLD].count == 80
        live = await mem.store.get_many(NS, ids)
        assert all(m.tier is Tier.COLD and m.content.startswith("Ticket") for m in live.values())
    finally:
        await mem.close()

    # the store comes back (moto keeps its state in-process; a new server serves it)
    revived = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    revived.start()
    try:
        host, port = revived.get_host_and_port()
        again = await engine(
            tmp_path / "m.db", s3(f"http://{host}:{port}", bucket), claude(stub), clock
        )
        try:
            report = await again.maintain()
            assert report.errors == []
            assert report.count("cold_to_archived") == 80
            records = await again.store.get_archives(NS, ids)
            assert len(records) == 120
            for record in records.values():
                data = await again.archiver.verified_original(NS, record)
                assert sha256_hex(data) == record.checksum
            assert await again.store.get_many(NS, ids) == {}
        finally:
            await again.close()
    finally:
        revived.stop()


def test_clock_moves_only_forward() -> None:
    with pytest.raises(Exception, match="forward"):
        ManualClock(START).advance(timedelta(days=-1))
