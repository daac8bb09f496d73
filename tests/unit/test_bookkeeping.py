"""What a use and a tier move change on a memory (`tiered_memory.bookkeeping`): one rule
for every backend, and the embedded store applying exactly that rule in its SQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from tiered_memory.backends.sqlite import SQLiteMemoryStore
from tiered_memory.bookkeeping import after_uses, moved, tier_move, used, uses_by_id
from tiered_memory.errors import ValidationError
from tiered_memory.models import Memory, Tier
from tiered_memory.ports import AccessRecord

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)
KEEP = 64


def _memory(memory_id: str = "a", **fields: object) -> Memory:
    return Memory.model_validate(
        {"id": memory_id, "content": "x", "created_at": T0, "updated_at": T0, **fields}
    )


def test_uses_count_days_and_cold_uses() -> None:
    m = _memory()
    once = used(m, [T0 + DAY], keep_days=KEEP)
    twice = used(once, [T0 + DAY + timedelta(hours=3)], keep_days=KEEP)
    older = used(twice, [T0 + timedelta(hours=1)], keep_days=KEEP)
    assert older.use_count == 3
    assert older.last_accessed_at == T0 + DAY + timedelta(hours=3)  # never moves back
    assert older.use_days == [T0.date(), (T0 + DAY).date()]
    assert older.uses_since_cold == 0
    cold = m.model_copy(update={"tier": Tier.COLD})
    assert used(cold, [T0, T0 + DAY], keep_days=KEEP).uses_since_cold == 2


def test_a_batch_of_uses_counts_as_the_same_uses_one_by_one() -> None:
    m = _memory(tier=Tier.COLD, use_count=2, use_days=[T0.date()])
    whens = [T0 + 3 * DAY, T0 + DAY, T0 + 2 * DAY, T0 + DAY]
    one_by_one = m
    for when in whens:
        one_by_one = used(one_by_one, [when], keep_days=KEEP)
    assert used(m, whens, keep_days=KEEP) == one_by_one


def test_only_the_most_recent_use_days_are_kept() -> None:
    m = _memory(use_days=[(T0 + i * DAY).date() for i in range(5)])
    after = used(m, [T0 + 10 * DAY, T0 + 10 * DAY], keep_days=3)
    assert after.use_days == [(T0 + 3 * DAY).date(), (T0 + 4 * DAY).date(), (T0 + 10 * DAY).date()]
    with pytest.raises(ValueError, match="at least one use"):
        after_uses(
            tier=Tier.HOT,
            use_count=0,
            last_accessed_at=None,
            use_days=[],
            uses_since_cold=0,
            whens=[],
            keep_days=KEEP,
        )


def test_tier_moves_and_reruns_are_no_ops() -> None:
    m = _memory(uses_since_cold=4)
    cold = moved(m, tier_move(Tier.COLD, T0 + DAY))
    assert (cold.tier, cold.cold_since, cold.tier_changed_at, cold.uses_since_cold) == (
        Tier.COLD,
        T0 + DAY,
        T0 + DAY,
        0,
    )
    again = moved(cold, tier_move(Tier.COLD, T0 + 5 * DAY))
    assert again == cold  # timestamps kept
    warm = moved(cold, tier_move("warm", T0 + 2 * DAY))
    assert (warm.tier, warm.cold_since, warm.tier_changed_at) == (Tier.WARM, None, T0 + 2 * DAY)
    hot = moved(warm, tier_move(Tier.HOT, T0 + 3 * DAY))
    assert (hot.tier, hot.cold_since) == (Tier.HOT, None)
    with pytest.raises(ValidationError, match="archive_many"):
        tier_move(Tier.ARCHIVED, T0)


def test_uses_are_grouped_by_memory_in_order() -> None:
    naive = datetime(2026, 1, 2)
    grouped = uses_by_id([AccessRecord("a", T0), AccessRecord("b", T0), AccessRecord("a", naive)])
    assert grouped == {"a": [T0, naive.replace(tzinfo=timezone.utc)], "b": [T0]}


async def test_the_embedded_store_applies_the_same_rules(tmp_path: Path) -> None:
    """SQLite computes uses and moves over its columns; the result must be what the
    shared rules give for the same memory."""
    store = await SQLiteMemoryStore.open(tmp_path / "m.db", use_days_kept=3)
    try:
        start = _memory(
            "a",
            embedding=[1.0, 0.0],
            use_count=1,
            use_days=[(T0 + i * DAY).date() for i in range(3)],
            last_accessed_at=T0 + 9 * DAY,
        )
        await store.put_many("ns", [start])
        expected = start.model_copy(update={"embedding": None})
        steps: list[tuple[str, object]] = [
            ("use", [T0 + 5 * DAY, T0 + 4 * DAY]),
            ("move", Tier.COLD),
            ("use", [T0 + 12 * DAY]),
            ("move", Tier.COLD),
            ("move", Tier.WARM),
            ("use", [T0 + 12 * DAY, T0 + 13 * DAY]),
        ]
        for i, (kind, value) in enumerate(steps):
            if kind == "use":
                assert isinstance(value, list)
                await store.record_access("ns", [AccessRecord("a", w) for w in value])
                expected = used(expected, value, keep_days=3)
            else:
                assert isinstance(value, Tier)
                when = T0 + (20 + i) * DAY
                await store.set_tier("ns", ["a"], value, when)
                expected = moved(expected, tier_move(value, when))
            got = (await store.get_many("ns", ["a"]))["a"]
            fields = ("tier", "use_count", "last_accessed_at", "use_days", "uses_since_cold")
            fields += ("cold_since", "tier_changed_at", "last_used_at")
            assert {f: getattr(got, f) for f in fields} == {
                f: getattr(expected, f) for f in fields
            }, (kind, value)
        assert np.isfinite(got.importance)
    finally:
        await store.close()
