"""Time is injected so tests and simulations can move it; the library never calls utcnow()."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import ConfigurationError
from .models import utc


class SystemClock:
    """UTC wall time."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that only moves when told to; thread-safe so a runner thread can read it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = utc(start) if start else datetime(2026, 1, 1, tzinfo=timezone.utc)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | None = None, **kwargs: Any) -> datetime:
        """advance(days=3) or advance(timedelta(hours=2)); returns the new time."""
        step = (delta or timedelta()) + timedelta(**kwargs)
        if step < timedelta(0):
            from .errors import ValidationError

            raise ValidationError("a ManualClock only moves forward; use set() to go back")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = utc(when)


class CheckedClock:
    """The engine's view of the clock it was given: each reading must be an aware
    datetime, else a `ConfigurationError` naming the clock. A naive reading is
    refused, not taken as UTC: a clock returning `datetime.now()` (local time) would
    shift every decay and sweep by the machine's UTC offset without a sound.

    Attributes are read through (`advance`, `set` of a ManualClock).
    """

    def __init__(self, inner: Any) -> None:
        self.inner: Any = inner.inner if isinstance(inner, CheckedClock) else inner
        self.name = type(self.inner).__name__

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def now(self) -> datetime:
        try:
            reading = self.inner.now()
        except Exception as e:
            raise ConfigurationError(f"the clock {self.name} failed: {e}") from e
        if not isinstance(reading, datetime):
            raise ConfigurationError(
                f"the clock {self.name} returned {type(reading).__name__}, not a datetime"
            )
        if reading.tzinfo is None or reading.utcoffset() is None:
            raise ConfigurationError(
                f"the clock {self.name} returned a naive datetime ({reading.isoformat()}); "
                "return an aware one, e.g. datetime.now(timezone.utc)"
            )
        return utc(reading)
