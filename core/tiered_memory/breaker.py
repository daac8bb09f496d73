"""A circuit breaker for optional backends (the association graph).

When the graph server is down, each call would wait out the driver's connection and
retry timeouts, so every search would be slow as well as degraded. After a failure
the breaker skips the graph for a cool-down, then lets one call try again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class CircuitBreaker:
    def __init__(self, cooldown_seconds: float, *, clock: Callable[[], float] = time.monotonic):
        self.cooldown = cooldown_seconds
        self._clock = clock
        self._open_until = 0.0
        self._lock = threading.Lock()
        self.last_error: str | None = None

    def allow(self) -> bool:
        """True when the backend may be called (closed, or the cool-down is over)."""
        with self._lock:
            return self._clock() >= self._open_until

    def failed(self, error: BaseException) -> None:
        with self._lock:
            self._open_until = self._clock() + self.cooldown
            self.last_error = f"{type(error).__name__}: {error}"

    def succeeded(self) -> None:
        with self._lock:
            self._open_until = 0.0
            self.last_error = None

    def skipped_reason(self) -> str:
        return f"graph: skipped for up to {self.cooldown:g}s after an outage ({self.last_error})"
