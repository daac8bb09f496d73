"""Errors of the LlamaIndex face, under the core's one root (`TieredMemoryError`).

Both subclass `ValidationError` (itself a `ValueError`), so code written for other
LlamaIndex vector stores, which raise `ValueError` for what they cannot do, still
catches them.
"""

from __future__ import annotations

from tiered_memory import ValidationError
from tiered_memory.errors import UnsupportedFilterError


class UnsupportedQueryError(ValidationError):
    """A query mode, field or keyword argument the tiered store cannot honour."""


__all__ = ["UnsupportedFilterError", "UnsupportedQueryError"]
