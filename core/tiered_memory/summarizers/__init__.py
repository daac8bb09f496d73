"""Summarisers for archived memories: extractive (the offline default) and Claude."""

from .extractive import ExtractiveSummarizer

__all__ = ["ExtractiveSummarizer"]
