"""Timestamps as integer microseconds since the Unix epoch, UTC: the one conversion.

Backends that keep times as integers (SQLite columns, Neo4j properties) and the sweep's
column arithmetic (`ports.MemoryFacts`) all convert here, so every one of them reads
back the instant that was written: exact (no float seconds) and ordered as the
datetimes are.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from .models import utc

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(when: datetime) -> int:
    """An aware datetime (a naive one is taken as UTC) as microseconds since the epoch."""
    return (utc(when) - EPOCH) // _MICROSECOND


def to_micros_or_none(when: datetime | None) -> int | None:
    return None if when is None else to_micros(when)


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime `to_micros` was given."""
    return EPOCH + timedelta(microseconds=int(micros))


def from_micros_or_none(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def day_of(micros: int) -> date:
    """The UTC calendar day of a timestamp."""
    return from_micros(micros).date()
