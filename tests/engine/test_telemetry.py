"""OpenTelemetry (issue 21, item 1): with the SDK's in-memory exporters, an add, a
recall and a sweep with archival produce their spans (engine calls and every backend
call) and metrics; no attribute ever holds what was stored; without a provider nothing
is recorded. (Without the package installed nothing is imported:
tests/unit/test_telemetry_optional.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the SDK is in the test dependency group")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, NotFoundError, telemetry
from tiered_memory.backends.sqlite import SQLiteMemoryStore
from tiered_memory.ports import MemoryStore, SupportsCosines

NS = "otel"
SECRETS = [
    "Ava's locker combination is 4471",
    "the boiler was serviced by Bram in May",
    "Ava's passport expires in 2031",
]
QUERY = "what is the locker combination"


@pytest.fixture
def otel() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield spans, reader
    finally:
        telemetry.configure(tracer_provider=None, meter_provider=None)
        meter_provider.shutdown()
        tracer_provider.shutdown()


def _metrics(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Metric name -> its data points."""
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def _total(points: list[Any], **attributes: str) -> float:
    return sum(
        p.value for p in points if all(p.attributes.get(k) == v for k, v in attributes.items())
    )


async def _scenario(tmp_path: Path, clock: ManualClock) -> AsyncTieredMemory:
    """An add, a recall and a sweep with archival (the memories are then expanded)."""
    amem = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=clock
    )
    added = await amem.add_many(
        [{"content": s, "importance": 0.1} for s in SECRETS], namespace=NS, dedup=False
    )
    await amem.add("Ava likes oolong tea", namespace=NS, pinned=True)  # never archived
    injection = await amem.recall(QUERY, namespace=NS, budget_tokens=500)
    assert injection.tokens > 0
    assert await amem.search(QUERY, namespace=NS, k=2)
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    report = await amem.maintain()
    assert report.count("cold_to_archived") == 3
    await amem.expand(added[0].id, namespace=NS)
    await amem.stats(namespace=NS)
    return amem


async def test_spans_and_metrics_of_an_add_a_recall_and_a_sweep(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader], tmp_path: Path
) -> None:
    spans, reader = otel
    amem = await _scenario(tmp_path, ManualClock())
    try:
        # the ports were wrapped as the memory opened, and still look like themselves
        assert isinstance(amem.store, SQLiteMemoryStore)
        assert isinstance(amem.store, MemoryStore)
        assert isinstance(amem.store, SupportsCosines)
    finally:
        await amem.close()

    finished = spans.get_finished_spans()
    names = [s.name for s in finished]
    for name in ("add", "add_many", "recall", "search", "maintain", "expand"):
        assert f"tiered_memory.{name}" in names, name
    for backend_call in (
        "tiered_memory.store.put_vectors_many",  # add_many hands the vectors as arrays
        "tiered_memory.store.vector_search",
        "tiered_memory.store.archive_many",
        "tiered_memory.graph.drop_nodes",
        "tiered_memory.objects.put",
        "tiered_memory.objects.get",
        "tiered_memory.summarizer.summarize",
    ):
        assert backend_call in names, backend_call

    recall = next(s for s in finished if s.name == "tiered_memory.recall")
    attributes = dict(recall.attributes or {})
    assert attributes["tiered_memory.namespace"] == NS
    assert attributes["tiered_memory.tokens"] > 0
    assert attributes["tiered_memory.degraded"] is False
    assert 0 < attributes["tiered_memory.tokens.hot"] <= attributes["tiered_memory.tokens"]
    # backend calls of the recall are its children
    children = [s for s in finished if s.parent and s.parent.span_id == recall.context.span_id]
    assert any(s.name == "tiered_memory.store.vector_search" for s in children)

    sweeps = [s for s in finished if s.name == "tiered_memory.maintain"]
    archiving = dict(sweeps[-1].attributes or {})
    assert archiving["tiered_memory.moved.cold_to_archived"] == 3
    assert archiving["tiered_memory.dry_run"] is False
    assert "tiered_memory.summarizer.cost_usd" in archiving
    expand = next(s for s in finished if s.name == "tiered_memory.expand")
    assert (expand.attributes or {})["tiered_memory.restored"] is False

    # never what was stored, nor what was asked
    for s in finished:
        for key, value in (s.attributes or {}).items():
            text = f"{key}={value}"
            for secret in [*SECRETS, QUERY, "oolong"]:
                assert secret not in text, (s.name, key)
            assert "4471" not in text, (s.name, key)
            assert "Bram" not in text, (s.name, key)

    metrics = _metrics(reader)
    assert (
        _total(metrics["tiered_memory.recall.tokens"], tier="hot")
        == attributes["tiered_memory.tokens.hot"]
    )
    assert _total(metrics["tiered_memory.archival.archived"]) == 3
    assert _total(metrics["tiered_memory.archival.failed"]) == 0
    assert _total(metrics["tiered_memory.expansions"]) == 1
    assert _total(metrics["tiered_memory.summarizer.calls"]) == 3
    assert _total(metrics["tiered_memory.summarizer.cost_usd"]) == 0.0  # extractive: free
    durations = metrics["tiered_memory.sweep.duration"]
    assert sum(p.count for p in durations) == 2
    tiers = metrics["tiered_memory.memories"]
    assert _total(tiers, tier="archived") == 3
    assert _total(tiers, tier="hot") + _total(tiers, tier="warm") + _total(tiers, tier="cold") == 1
    assert _total(metrics["tiered_memory.object_store.bytes"]) > 1000


async def test_a_failing_call_marks_its_span_with_the_error_type_only(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader], tmp_path: Path
) -> None:
    spans, _ = otel
    amem = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=ManualClock()
    )
    try:
        with pytest.raises(NotFoundError, match="no archived memory"):
            await amem.expand("nope", namespace=NS)
    finally:
        await amem.close()
    expand = next(s for s in spans.get_finished_spans() if s.name == "tiered_memory.expand")
    assert not expand.status.is_ok
    assert (expand.attributes or {})["error.type"] == "NotFoundError"
    assert "nope" not in str(expand.status.description)  # the message may quote input


async def test_nothing_is_recorded_without_a_provider(tmp_path: Path) -> None:
    """No provider configured (the global ones are the API's no-op proxies in this
    test process): no proxy around the backends, no span, no metric."""
    assert not telemetry.tracing()
    assert not telemetry.metering()
    amem = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=ManualClock()
    )
    try:
        assert type(amem.store) is SQLiteMemoryStore  # the port itself, not a proxy
        await amem.add("Ava likes oolong tea", namespace=NS)
        await amem.recall("tea", namespace=NS)
    finally:
        await amem.close()
