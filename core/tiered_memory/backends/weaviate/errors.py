"""What Weaviate's errors mean to the library: its typed errors, with the weaviate-client
exception chained (outages, credentials, rejected requests, partial batch writes)."""

from __future__ import annotations

from collections.abc import Mapping

from weaviate.exceptions import (
    AuthenticationFailedError,
    InsufficientPermissionsError,
    UnexpectedStatusCodeError,
    WeaviateBaseError,
    WeaviateClosedClientError,
    WeaviateConnectionError,
    WeaviateGRPCUnavailableError,
    WeaviateRetryError,
    WeaviateStartUpError,
    WeaviateTimeoutError,
)

from tiered_memory.errors import BackendUnavailableError, ConfigurationError, TieredMemoryError


class WeaviateRequestError(TieredMemoryError):
    """Weaviate refused a request: neither an outage nor a credentials problem."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class WeaviateWriteError(WeaviateRequestError):
    """Some objects of a batch write were rejected; `failures` maps memory id to reason.

    The objects not listed were written: Weaviate batches are not atomic.
    """

    def __init__(self, message: str, failures: Mapping[str, str]) -> None:
        super().__init__(message)
        self.failures = dict(failures)


_UNAVAILABLE = (
    WeaviateConnectionError,
    WeaviateTimeoutError,
    WeaviateRetryError,
    WeaviateGRPCUnavailableError,
    WeaviateClosedClientError,
    WeaviateStartUpError,
)


def _caused_by_outage(e: BaseException) -> bool:
    """Query errors wrap the transport error; look down the chain for an outage."""
    seen: BaseException | None = e
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, (*_UNAVAILABLE, ConnectionError, TimeoutError)):
            return True
        code = getattr(seen, "code", None)
        if callable(code):
            try:
                name = getattr(code(), "name", "")
            except Exception:  # not a gRPC error after all
                name = ""
            if name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_missing_tenant(e: BaseException) -> bool:
    """Weaviate reports a query on a tenant that does not exist (yet) this way."""
    text = str(e).lower()
    return "tenant" in text and ("not found" in text or "does not exist" in text)


def translate_error(e: WeaviateBaseError, action: str, where: str) -> TieredMemoryError:
    """Map a weaviate-client exception to the library's typed errors (caller chains it)."""
    if isinstance(e, AuthenticationFailedError | InsufficientPermissionsError):
        return ConfigurationError(
            f"Weaviate at {where} refused {action}: {e.message} "
            "(check the API key, e.g. WEAVIATE_API_KEY, and its permissions)"
        )
    if isinstance(e, UnexpectedStatusCodeError):
        if e.status_code in (401, 403):
            return ConfigurationError(
                f"Weaviate at {where} refused {action} ({e.status_code}); check the API key"
            )
        if e.status_code >= 500:
            return BackendUnavailableError(
                f"Weaviate at {where} failed while {action} ({e.status_code}): {e.message}"
            )
        return WeaviateRequestError(f"Weaviate rejected {action}: {e.message}", e.status_code)
    if _caused_by_outage(e):
        return BackendUnavailableError(
            f"Weaviate at {where} could not be reached while {action}: {e.message} "
            "(is it running? `docker compose up -d weaviate`, and check WEAVIATE_URL)"
        )
    return WeaviateRequestError(f"Weaviate rejected {action}: {e.message}")
