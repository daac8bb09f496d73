"""Time is injected so tests and simulations can move it; the library never calls utcnow()."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

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
