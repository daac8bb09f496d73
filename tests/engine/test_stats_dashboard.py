"""`stats()`'s seed-001 dashboard numbers (issue 21, item 2), and archival's cost in
money: the expansion rate over 30 days (a manual clock walks the window), the object
store's size, quarantined memories, the last sweep's time and report, the
summariser's spending, and the price of a dry run, a preview and a run."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from tests.distinct import distinct_texts
from tests.matrix import MemoryFactory
from tiered_memory import (
    ArchivalPolicy,
    AsyncTieredMemory,
    ConsolidationPolicy,
    HashingEmbedder,
    ManualClock,
    Policy,
    Tier,
)
from tiered_memory.ports import Summary, SummaryRequest
from tiered_memory.pricing import ModelPricing, pricing_for

NS = "dash"


class PricedSummarizer:
    """A summariser billing like Claude Haiku 4.5: fixed tokens per summary."""

    model = "claude-haiku-4-5"

    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.calls += 1
        return Summary(
            text=request.content[:40], input_tokens=400, output_tokens=60, model=self.model
        )


async def _archived(
    amem: AsyncTieredMemory, clock: ManualClock, texts: Sequence[str], namespace: str = NS
) -> list[str]:
    """Unimportant memories of `namespace`, archived by a sweep."""
    added = await amem.add_many(
        [{"content": t, "importance": 0.1} for t in texts], namespace=namespace, dedup=False
    )
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    report = await amem.maintain()
    assert report.count("cold_to_archived") >= len(texts), report
    return [m.id for m in added]


async def test_expansion_rate_counts_the_last_30_days(
    amem: AsyncTieredMemory, clock: ManualClock
) -> None:
    ids = await _archived(amem, clock, ["Ava's passport expires 2031", "Bay C12, level 3"])
    before = await amem.stats(namespace=NS)
    assert (before.expansions_30d, before.expansion_rate_30d) == (0, 0.0)

    await amem.expand(ids[0], namespace=NS)
    clock.advance(days=20)
    await amem.expand(ids[1], namespace=NS)
    stats = await amem.stats(namespace=NS)
    assert stats.expansions_30d == 2
    assert stats.expansion_rate_30d == pytest.approx(2 / 2)  # per archived memory

    clock.advance(days=11)  # the first expansion is 31 days old now
    stats = await amem.stats(namespace=NS)
    assert stats.expansions_30d == 1
    assert stats.expansion_rate_30d == pytest.approx(1 / 2)
    assert (await amem.stats(namespace="elsewhere")).expansions_30d == 0


async def test_expansions_that_restore_still_count(
    amem: AsyncTieredMemory, clock: ManualClock
) -> None:
    """The third expansion in 30 days restores the memory (its record goes): the log,
    not the record, keeps what was expanded."""
    [memory_id] = await _archived(amem, clock, ["the boiler code is 4471"])
    for _ in range(3):
        await amem.expand(memory_id, namespace=NS)
        clock.advance(hours=1)
    stats = await amem.stats(namespace=NS)
    assert stats.tiers[Tier.ARCHIVED].count == 0
    assert stats.expansions_30d == 3


async def test_object_store_size_and_last_sweep(
    amem: AsyncTieredMemory, clock: ManualClock
) -> None:
    empty = await amem.stats(namespace=NS)
    assert empty.object_store_bytes == 0
    assert empty.last_sweep is None
    ids = await _archived(amem, clock, ["Ava's passport expires 2031", "Bay C12, level 3"])
    records = [await amem.get(i, namespace=NS) for i in ids]
    assert all(r is not None for r in records)
    originals = [await amem.expand(i, namespace=NS) for i in ids]
    assert len(originals) == 2
    stats = await amem.stats(namespace=NS)
    assert stats.object_store_bytes is not None
    assert stats.object_store_bytes > 1000
    assert stats.last_sweep is not None
    assert stats.last_sweep.now == clock.now()
    assert stats.last_sweep.count("cold_to_archived") == 2
    assert stats.last_sweep.duration_seconds > 0

    # a dry run is not a sweep that happened; a skipped one neither
    clock.advance(days=1)
    await amem.maintain(dry_run=True)
    assert (await amem.stats(namespace=NS)).last_sweep.now == clock.now() - timedelta(days=1)


async def test_last_sweep_shows_only_its_namespace_memories(
    memories: MemoryFactory, tmp_path: Path, clock: ManualClock
) -> None:
    class Failing(PricedSummarizer):
        async def summarize(self, request: SummaryRequest) -> Summary:
            if "poison" in request.content:
                raise ValueError("cannot summarise this one")
            return await super().summarize(request)

    amem = await memories.open(
        tmp_path / "m.db",
        embedder=HashingEmbedder(),
        clock=clock,
        summarizer=Failing(),
        policy=Policy(archival=ArchivalPolicy(quarantine_after=1)),
    )
    try:
        await amem.add("poison pill in a", importance=0.1, namespace="a")
        await amem.add("poison pill in b", importance=0.1, namespace="b")
        clock.advance(days=4)
        await amem.maintain()
        clock.advance(days=200)
        report = await amem.maintain()
        assert report.count("archive_failed") == 2
        assert {q.namespace for q in report.quarantined} == {"a", "b"}
        for ns in ("a", "b"):
            stats = await amem.stats(namespace=ns)
            assert stats.quarantined == 1
            assert stats.last_sweep is not None
            assert [q.namespace for q in stats.last_sweep.quarantined] == [ns]
            assert all(e.startswith(f"{ns}: ") for e in stats.last_sweep.errors)

        # memories archived by age (seed 002's forced archival) are listed per namespace too
        for ns in ("a", "b"):
            await amem.add(f"kept a year in {ns}", importance=0.9, namespace=ns)
        clock.advance(days=400)
        report = await amem.maintain()
        assert {d.namespace for d in report.forced_archival} == {"a", "b"}
        for ns in ("a", "b"):
            last = (await amem.stats(namespace=ns)).last_sweep
            assert last is not None
            assert [d.namespace for d in last.forced_archival] == [ns]
    finally:
        await amem.close()


async def test_a_preview_prices_clusters_as_the_dry_run_and_the_run_do(
    memories: MemoryFactory, tmp_path: Path, clock: ManualClock
) -> None:
    """Near-duplicates due together share one summary (seed 002's COLD clusters): the
    preview of the due memories, the dry run and the run agree on the calls and cost
    (the preview priced one call per memory: three times the dry run's)."""
    summarizer = PricedSummarizer()
    amem = await memories.open(
        tmp_path / "m.db",
        embedder=HashingEmbedder(),
        clock=clock,
        summarizer=summarizer,
        policy=Policy(consolidation=ConsolidationPolicy(archive_clusters=True)),
    )
    try:
        await amem.add_many(
            [{"content": f"Ticket {i} closed by Ava", "importance": 0.1} for i in range(3)],
            namespace=NS,
            dedup=False,
        )
        clock.advance(days=4)
        await amem.maintain()
        clock.advance(days=200)
        dry = (await amem.maintain(dry_run=True)).archive_estimate
        preview = (await amem.archive_preview(namespace=NS)).estimate
        assert dry is not None
        assert dry.candidates == preview.candidates == 3
        assert dry.summarizer_calls == preview.summarizer_calls == 1
        assert preview.cost_usd == pytest.approx(dry.cost_usd)
        await amem.maintain()
        assert summarizer.calls == 1
    finally:
        await amem.close()


async def test_cost_of_a_dry_run_a_preview_and_a_run(
    memories: MemoryFactory, tmp_path: Path, clock: ManualClock
) -> None:
    summarizer = PricedSummarizer()
    amem = await memories.open(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=clock, summarizer=summarizer
    )
    haiku = pricing_for("claude-haiku-4-5")
    try:
        # one summary per memory: distinct texts (templated ones share a cluster's)
        texts = distinct_texts(3, lambda i: f"Ticket {i} closed by Ava:")
        await amem.add_many(
            [{"content": text, "importance": 0.1} for text in texts], namespace=NS, dedup=False
        )
        clock.advance(days=4)
        await amem.maintain()
        clock.advance(days=200)

        dry = await amem.maintain(dry_run=True)
        est = dry.archive_estimate
        assert est is not None
        assert est.candidates == 3
        assert est.cost_usd == pytest.approx(haiku.cost(est.input_tokens, est.output_tokens))
        assert est.cost_usd > 0
        preview = await amem.archive_preview(namespace=NS)
        assert preview.estimate.cost_usd == pytest.approx(est.cost_usd)

        report = await amem.maintain()
        assert summarizer.calls == 3
        assert report.summarizer_cost_usd == pytest.approx(haiku.cost(3 * 400, 3 * 60))
        stats = await amem.stats(namespace=NS)
        assert stats.summarizer.calls == 3
        assert (stats.summarizer.input_tokens, stats.summarizer.output_tokens) == (1200, 180)
        assert stats.summarizer.cost_usd == pytest.approx(report.summarizer_cost_usd)
        assert stats.last_sweep is not None
        assert stats.last_sweep.summarizer_cost_usd == pytest.approx(report.summarizer_cost_usd)

        # an explicit archive() counts too
        extra = await amem.add("Ava's locker is 17", importance=0.1, namespace=NS)
        await amem.archive([extra.id], namespace=NS)
        stats = await amem.stats(namespace=NS)
        assert stats.summarizer.calls == 4
    finally:
        await amem.close()


async def test_prices_are_overridden_in_the_policy(
    memories: MemoryFactory, tmp_path: Path, clock: ManualClock
) -> None:
    price = ModelPricing(10.0, 100.0)
    amem = await memories.open(
        tmp_path / "m.db",
        embedder=HashingEmbedder(),
        clock=clock,
        summarizer=PricedSummarizer(),
        policy=Policy(archival=ArchivalPolicy(prices={"claude-haiku": price})),
    )
    try:
        memory = await amem.add("Ava's locker is 17", importance=0.1, namespace=NS)
        preview = await amem.archive_preview([memory.id], namespace=NS)
        est = preview.estimate
        assert est.cost_usd == pytest.approx(price.cost(est.input_tokens, est.output_tokens))
        await amem.archive([memory.id], namespace=NS)
        assert (await amem.stats(namespace=NS)).summarizer.cost_usd == pytest.approx(
            price.cost(400, 60)
        )
    finally:
        await amem.close()


async def test_the_extractive_summariser_costs_nothing(
    amem: AsyncTieredMemory, clock: ManualClock
) -> None:
    await _archived(amem, clock, ["Ava's passport expires 2031"])
    stats = await amem.stats(namespace=NS)
    assert stats.summarizer.calls == 1
    assert stats.summarizer.cost_usd == 0.0
    assert stats.last_sweep is not None
    assert stats.last_sweep.summarizer_cost_usd == 0.0


async def test_history_survives_a_restart_and_clear_forgets_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The embedded store keeps the operations log in its file."""
    path = tmp_path / "m.db"
    amem = await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(), clock=clock)
    try:
        [memory_id] = await _archived(amem, clock, ["Ava's passport expires 2031"])
        await amem.expand(memory_id, namespace=NS)
    finally:
        await amem.close()
    amem = await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(), clock=clock)
    try:
        stats = await amem.stats(namespace=NS)
        assert stats.history_persisted
        assert stats.expansions_30d == 1
        assert stats.last_sweep is not None
        assert stats.last_sweep.now == clock.now()
        assert stats.summarizer.calls == 1
        await amem.clear(namespace=NS)
        assert (await amem.stats(namespace=NS)).expansions_30d == 0
    finally:
        await amem.close()
