"""Summarisers for archived memories: extractive (the offline default) and Claude.

Importing this package never imports the `anthropic` SDK; that happens on first use.
"""

from .anthropic import AnthropicSummarizer, CostEstimate, ModelPricing, SummarizerUsage
from .extractive import ExtractiveSummarizer

__all__ = [
    "AnthropicSummarizer",
    "CostEstimate",
    "ExtractiveSummarizer",
    "ModelPricing",
    "SummarizerUsage",
]
