"""The price table, kept in one place (issue 21, item 2): prefixes, overrides, local
summarisers free, and the Claude summariser pricing with the same table."""

from __future__ import annotations

import pytest

from tiered_memory.pricing import (
    FREE,
    PRICING,
    ModelPricing,
    pricing_for,
    summarizer_model,
    summarizer_pricing,
)
from tiered_memory.summarizers.anthropic import DEFAULT_MODEL, AnthropicSummarizer
from tiered_memory.summarizers.extractive import ExtractiveSummarizer


def test_models_are_matched_by_the_longest_prefix() -> None:
    assert pricing_for("claude-haiku-4-5-20251001") == PRICING["claude-haiku-4-5"]
    assert pricing_for("claude-3-5-haiku-latest") == PRICING["claude-3-5-haiku"]
    assert pricing_for("claude-3-haiku-20240307") == PRICING["claude-3-haiku"]
    assert pricing_for("some-new-model") == PRICING[DEFAULT_MODEL]  # never priced at 0
    assert pricing_for("extractive") == FREE
    assert PRICING["claude-haiku-4-5"].cost(1_000_000, 1_000_000) == pytest.approx(6.0)


def test_overrides_come_first() -> None:
    mine = ModelPricing(2.0, 3.0)
    assert pricing_for("claude-haiku-4-5-20251001", {"claude-haiku": mine}) == mine
    assert pricing_for("extractive", {"extractive": mine}) == mine


def test_a_summariser_is_priced_by_its_model() -> None:
    claude = AnthropicSummarizer(api_key="never-sent")
    assert summarizer_model(claude) == DEFAULT_MODEL
    assert summarizer_pricing(claude) == PRICING[DEFAULT_MODEL]
    own = ModelPricing(9.0, 9.0)
    assert summarizer_pricing(AnthropicSummarizer(api_key="k", pricing=own)) == own
    assert summarizer_pricing(claude, {"claude": own}) == own
    assert summarizer_pricing(ExtractiveSummarizer()) == FREE
    # the Claude summariser's estimate uses the same table
    estimate = claude.estimate_cost(10)
    assert estimate.usd == pytest.approx(
        PRICING[DEFAULT_MODEL].cost(estimate.input_tokens, estimate.output_tokens)
    )
