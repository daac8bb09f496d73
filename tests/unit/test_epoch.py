"""Timestamps as integer microseconds (`tiered_memory.epoch`): the one conversion every
backend and the sweep's column arithmetic use."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tiered_memory import epoch
from tiered_memory.epoch import (
    EPOCH,
    day_of,
    from_micros,
    from_micros_or_none,
    to_micros,
    to_micros_or_none,
)

AWARE = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)
)


@given(AWARE)
def test_a_timestamp_reads_back_exactly(when: datetime) -> None:
    assert from_micros(to_micros(when)) == when


@given(AWARE, AWARE)
def test_integers_order_as_the_datetimes_do(a: datetime, b: datetime) -> None:
    assert (to_micros(a) < to_micros(b)) == (a < b)


def test_naive_is_utc_and_other_zones_are_converted() -> None:
    naive = datetime(2026, 1, 1, 12, 0, 0, 1)
    assert to_micros(naive) == to_micros(naive.replace(tzinfo=timezone.utc))
    paris = timezone(timedelta(hours=1))
    assert to_micros(datetime(2026, 1, 1, 13, tzinfo=paris)) == to_micros(
        datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    )
    assert to_micros(EPOCH) == 0
    assert to_micros(EPOCH - timedelta(microseconds=1)) == -1


def test_none_passes_through_and_days_are_utc_days() -> None:
    assert to_micros_or_none(None) is None
    assert from_micros_or_none(None) is None
    late = datetime(2026, 3, 1, 23, 59, 59, 999_999, tzinfo=timezone.utc)
    assert day_of(to_micros(late)) == date(2026, 3, 1)
    assert day_of(to_micros(late) + 1) == date(2026, 3, 2)


def test_the_epoch_is_written_once() -> None:
    """Every conversion goes through `epoch`: no other module of the core spells out
    the Unix epoch (SQLite, Neo4j, the ports and the sweep each had their own)."""
    core = Path(epoch.__file__).parent
    spelled = [
        str(path.relative_to(core))
        for path in sorted(core.rglob("*.py"))
        if path.name != "epoch.py" and "1970" in path.read_text(encoding="utf-8")
    ]
    assert spelled == []
