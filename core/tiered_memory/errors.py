"""One error hierarchy, so callers can catch `TieredMemoryError` and nothing else.

Backend exceptions are chained (`raise ... from e`) rather than swallowed, and every
message says what to do about it.
"""

from __future__ import annotations


class TieredMemoryError(Exception):
    """Root of every error this library raises on purpose."""


class ValidationError(TieredMemoryError, ValueError):
    """Input was rejected before anything was written."""


MemoryValidationError = ValidationError
"""`ValidationError` under a name that cannot clash with pydantic's: code importing
both writes `except MemoryValidationError`. The same class, so either name catches it."""


class UnsupportedFilterError(ValidationError):
    """A metadata filter uses an operator, shape or value no store can evaluate exactly.

    Raised instead of dropping or approximating the condition, because a silently
    ignored filter returns what the caller asked to exclude.
    """


class NotFoundError(TieredMemoryError, KeyError):
    """No such memory in this namespace (ids never cross namespaces)."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else "not found"


class NamespaceError(ValidationError):
    """The namespace is malformed."""


class DimensionMismatchError(ValidationError):
    """An embedding does not have the store's dimension."""


class BackendUnavailableError(TieredMemoryError):
    """A backend (graph, object store, vector store, LLM) could not be reached."""


class ConfigurationError(TieredMemoryError):
    """The library was wired or configured wrongly; the message names the fix."""


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


class EmbedderError(TieredMemoryError):
    """The embedder failed, hung or returned unusable vectors; the message names it.

    Nothing was written: embedding runs before any write.
    """


class ArchiveIntegrityError(TieredMemoryError):
    """An archived original is missing, corrupt or does not match its record."""


def missing_extra(package: str, extra: str) -> MissingDependencyError:
    """Build the error raised when an optional integration is used without its extra."""
    return MissingDependencyError(
        f"{package} is not installed; install it with: pip install 'tiered-memory[{extra}]'"
    )


__all__ = [
    "ArchiveIntegrityError",
    "BackendUnavailableError",
    "ConfigurationError",
    "DimensionMismatchError",
    "EmbedderError",
    "MemoryValidationError",
    "MissingDependencyError",
    "NamespaceError",
    "NotFoundError",
    "TieredMemoryError",
    "ValidationError",
    "missing_extra",
]
