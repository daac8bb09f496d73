"""Retention, recency and frequency (DESIGN.md section 3) as pure functions.

Kept free of I/O and of the Memory model's storage details so the maths can be tested
exhaustively and reused by the sweep, the ranking and `explain`.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from .models import Memory, MemoryType
from .policy import DecayPolicy

SECONDS_PER_DAY = 86_400.0


def effective_half_life(base_days: float, use_count: int) -> float:
    """h_eff = h * log2(hits + 1), hits = use_count + 1.

    A fresh memory lives one half-life; three hits (the capture plus two uses) double
    it. The log keeps popular
    memories alive longer without letting a burst of uses make them immortal (seed 003).
    """
    hits = max(0, use_count) + 1
    return base_days * math.log2(hits + 1)


def recency(elapsed_days: float, half_life_days: float) -> float:
    """r = 2 ** (-elapsed / h_eff); elapsed below zero (clock skew) counts as zero."""
    return float(2.0 ** (-max(0.0, elapsed_days) / half_life_days))


def retention_from_recency(r: float, floor: float) -> float:
    """R = floor + (1 - floor) * r."""
    return floor + (1.0 - floor) * r


def frequency(use_count: int, saturation: int) -> float:
    """f = min(1, log2(1 + uses) / log2(1 + saturation))."""
    if use_count <= 0:
        return 0.0
    return min(1.0, math.log2(1 + use_count) / math.log2(1 + saturation))


def floor_for(memory: Memory, policy: DecayPolicy) -> float:
    """Pinned memories never decay; core memories keep at least the core floor."""
    if memory.pinned:
        return 1.0
    if memory.core:
        return max(policy.core_floor, policy.floor)
    return policy.floor


def half_life_for(memory_type: MemoryType, use_count: int, policy: DecayPolicy) -> float:
    return effective_half_life(policy.half_life_days[memory_type], use_count)


def days_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / SECONDS_PER_DAY


def memory_recency(memory: Memory, now: datetime, policy: DecayPolicy) -> tuple[float, float]:
    """(recency, effective half-life in days) of one memory at `now`."""
    h = half_life_for(memory.memory_type, memory.use_count, policy)
    return recency(days_between(memory.last_used_at, now), h), h


def retention(memory: Memory, now: datetime, policy: DecayPolicy) -> float:
    r, _ = memory_recency(memory, now, policy)
    return retention_from_recency(r, floor_for(memory, policy))


def time_to_floor(half_life_days: float, epsilon: float, floor: float) -> timedelta:
    """How long after last use retention comes within `epsilon` of its floor.

    Solves floor + (1-floor) * 2^(-t/h) = floor + epsilon for t. The sweep uses it to
    turn 'at floor for 7 days' into a timestamp instead of a counter.
    """
    span = 1.0 - floor
    if span <= epsilon:
        return timedelta(0)
    days = half_life_days * math.log2(span / epsilon)
    return timedelta(days=days)


def retention_vector(
    elapsed_days: npt.NDArray[np.float64],
    half_life_days: npt.NDArray[np.float64],
    floors: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Vectorised retention for ranking many candidates at once."""
    r = np.exp2(-np.maximum(elapsed_days, 0.0) / half_life_days)
    return floors + (1.0 - floors) * r
