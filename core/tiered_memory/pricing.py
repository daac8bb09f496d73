"""What summarising costs in money: the price table, kept here once.

The Claude summariser prices its calls with it, `maintain(dry_run=True)` and
`archive_preview` price their token estimates with it, and a sweep's report prices the
tokens it spent with it. A model is matched by the longest id prefix in the table, so
`claude-haiku-4-5-20251001` is priced as `claude-haiku-4-5`. Prices change: override
them in `Policy(archival=ArchivalPolicy(prices={...}))`, or in the configuration file
(`[policy.archival.prices."claude-haiku-4-5"]`), rather than editing this table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_CLAUDE_MODEL = "claude-haiku-4-5"  # the Claude summariser's default model


class ModelPricing(BaseModel):
    """US dollars per million tokens, input and output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_usd_per_million: float = Field(ge=0)
    output_usd_per_million: float = Field(ge=0)

    def __init__(
        self, input_usd_per_million: float, output_usd_per_million: float, **_: Any
    ) -> None:
        # positional, as the table below reads: ModelPricing(1.00, 5.00)
        super().__init__(
            input_usd_per_million=input_usd_per_million,
            output_usd_per_million=output_usd_per_million,
        )

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.input_usd_per_million + output_tokens * self.output_usd_per_million
        ) / 1_000_000


FREE = ModelPricing(0.0, 0.0)

# List prices at the time of writing (USD per million input / output tokens).
PRICING: dict[str, ModelPricing] = {
    "claude-haiku-4-5": ModelPricing(1.00, 5.00),
    "claude-3-5-haiku": ModelPricing(0.80, 4.00),
    "claude-3-haiku": ModelPricing(0.25, 1.25),
    "claude-sonnet-4": ModelPricing(3.00, 15.00),
    "claude-opus-4": ModelPricing(15.00, 75.00),
}

# Summarisers that run here, on no model that bills: their calls cost nothing.
LOCAL_MODELS = frozenset({"extractive"})


def _match(model: str, table: Mapping[str, ModelPricing]) -> ModelPricing | None:
    for prefix in sorted(table, key=len, reverse=True):
        if model.startswith(prefix):
            return table[prefix]
    return None


def pricing_for(model: str, overrides: Mapping[str, ModelPricing] | None = None) -> ModelPricing:
    """The price of `model`: an override first, then the table. A local summariser is
    free; any other model not in the table is priced as the default Claude model (an
    estimate too high is safer than one of zero)."""
    found = _match(model, overrides or {})
    if found is not None:
        return found
    if model in LOCAL_MODELS:
        return FREE
    return _match(model, PRICING) or PRICING[DEFAULT_CLAUDE_MODEL]


def summarizer_model(summarizer: object) -> str:
    """The model a summariser bills by: its `model` attribute (the Claude one has it);
    a summariser without one runs locally (the extractive one)."""
    model = getattr(summarizer, "model", None)
    return model if isinstance(model, str) and model else "extractive"


def summarizer_pricing(
    summarizer: object, overrides: Mapping[str, ModelPricing] | None = None
) -> ModelPricing:
    """The price of `summarizer`'s calls: an override for its model, else the price it
    was built with (`AnthropicSummarizer(pricing=...)`), else the table's."""
    model = summarizer_model(summarizer)
    found = _match(model, overrides or {})
    if found is not None:
        return found
    own = getattr(summarizer, "pricing", None)
    return own if isinstance(own, ModelPricing) else pricing_for(model)


__all__ = [
    "DEFAULT_CLAUDE_MODEL",
    "FREE",
    "LOCAL_MODELS",
    "PRICING",
    "ModelPricing",
    "pricing_for",
    "summarizer_model",
    "summarizer_pricing",
]
