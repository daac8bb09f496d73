"""The decay maths of DESIGN.md section 3, checked against hand-computed values."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from tiered_memory import decay
from tiered_memory.models import Memory, MemoryType
from tiered_memory.policy import DecayPolicy

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
POLICY = DecayPolicy()


def memory(**kw: object) -> Memory:
    base: dict[str, object] = {"content": "x", "created_at": T0, "updated_at": T0}
    base.update(kw)
    return Memory(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("memory_type", "days"),
    [
        (MemoryType.PROCEDURAL, 180),
        (MemoryType.FACTUAL, 90),
        (MemoryType.PROJECT, 45),
        (MemoryType.EPISODIC, 10),
    ],
)
def test_a_fresh_memory_halves_after_one_half_life(memory_type: MemoryType, days: int) -> None:
    m = memory(memory_type=memory_type)
    assert decay.retention(m, T0 + timedelta(days=days), POLICY) == pytest.approx(0.5)


def test_three_hits_double_the_half_life() -> None:
    # hits = use_count + 1 counts the capture itself: capture + 2 uses = 3 hits = 2x
    assert decay.effective_half_life(10, 0) == pytest.approx(10)
    assert decay.effective_half_life(10, 2) == pytest.approx(20)
    # sub-linear: 31 uses give log2(33) ~ 5.04x, not 31x
    assert decay.effective_half_life(10, 31) == pytest.approx(10 * math.log2(33))


def test_recency_never_exceeds_one_under_clock_skew() -> None:
    assert decay.recency(-5.0, 10.0) == 1.0


def test_decay_runs_from_last_use_not_creation() -> None:
    used = T0 + timedelta(days=30)
    m = memory(memory_type=MemoryType.EPISODIC, last_accessed_at=used, use_count=1)
    h = decay.effective_half_life(10, 1)
    assert decay.retention(m, used + timedelta(days=h), POLICY) == pytest.approx(0.5)


def test_core_floor_and_pinned_never_decays() -> None:
    far = T0 + timedelta(days=10_000)
    assert decay.retention(memory(core=True), far, POLICY) == pytest.approx(0.60)
    assert decay.retention(memory(pinned=True), far, POLICY) == 1.0
    assert decay.retention(memory(), far, POLICY) == pytest.approx(0.0, abs=1e-9)


def test_retention_with_floor_formula() -> None:
    assert decay.retention_from_recency(0.5, 0.6) == pytest.approx(0.8)


@pytest.mark.parametrize(("uses", "expected"), [(0, 0.0), (1, 1 / 5), (32, 1.0), (1000, 1.0)])
def test_frequency_saturates_at_32(uses: int, expected: float) -> None:
    # log2(1+1)/log2(33) = 1/5.044
    exp = expected if uses != 1 else 1 / math.log2(33)
    assert decay.frequency(uses, 32) == pytest.approx(exp)


def test_time_to_floor_solves_the_retention_equation() -> None:
    t = decay.time_to_floor(10.0, 0.001, 0.0)
    r = decay.recency(t.total_seconds() / 86400, 10.0)
    assert r == pytest.approx(0.001)
    assert decay.time_to_floor(10.0, 0.5, 0.6) == timedelta(0)


def test_retention_vector_matches_scalar() -> None:
    elapsed = np.array([0.0, 10.0, 20.0, -1.0])
    h = np.array([10.0, 10.0, 10.0, 10.0])
    floors = np.array([0.0, 0.0, 0.6, 0.0])
    got = decay.retention_vector(elapsed, h, floors)
    assert got == pytest.approx([1.0, 0.5, 0.6 + 0.4 * 0.25, 1.0])


def test_policy_rejects_missing_half_life() -> None:
    with pytest.raises(ValueError, match="half_life_days"):
        DecayPolicy(half_life_days={MemoryType.FACTUAL: 1.0})
