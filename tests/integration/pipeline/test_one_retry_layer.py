"""One retry layer (issue 16, item 1): the archival pipeline makes one call per step and
the adapter that speaks the protocol retries. Counted in HTTP requests on the loopback
Messages API stub: a memory whose summary Claude cannot give costs the summariser's
own `max_retries + 1` requests in a run, whatever `ArchivalPolicy.max_retries` says,
not their product."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.integration.anthropic.conftest import MessagesStub, error
from tiered_memory import (
    ArchivalPolicy,
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    Policy,
    Tier,
)
from tiered_memory.summarizers.anthropic import AnthropicSummarizer, Backoff

pytestmark = [pytest.mark.http]
NS = "retries"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("summarizer_retries", [0, 2])
async def test_a_failing_summary_costs_the_summarisers_attempts_only(
    tmp_path: Path, stub: MessagesStub, summarizer_retries: int
) -> None:
    stub.default = error(529, "overloaded_error")
    clock = ManualClock(START)
    claude = AnthropicSummarizer(
        api_key="test-key",
        base_url=stub.url,
        rate_per_second=1000,
        max_retries=summarizer_retries,
        backoff=Backoff(base_seconds=0.0),
    )
    mem = await AsyncTieredMemory.embedded(
        tmp_path / "m.db",
        embedder=HashingEmbedder(),
        summarizer=claude,
        clock=clock,
        policy=Policy(archival=ArchivalPolicy(max_retries=4, backoff_base_seconds=0.0)),
    )
    try:
        added = await mem.add("Noor's visa interview is on 3 May", namespace=NS, importance=0.1)
        clock.advance(days=4)
        await mem.maintain()
        clock.advance(days=200)
        report = await mem.maintain()
        assert report.count("cold_to_archived") == 0
        assert len(report.errors) == 1
        assert "529" in report.errors[0]
        assert len(stub.received) == summarizer_retries + 1
        assert claude.usage.requests == summarizer_retries + 1
        still = await mem.get(added.id, namespace=NS)
        assert still is not None
        assert still.tier is Tier.COLD

        stub.received.clear()
        with pytest.raises(Exception, match="529"):
            await mem.archive([added.id], namespace=NS)
        assert len(stub.received) == summarizer_retries + 1
    finally:
        await mem.close()
