"""Engines on the embedded default, with a manual clock, one per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, TieredMemory

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def amem(tmp_path: Path, clock: ManualClock) -> AsyncIterator[AsyncTieredMemory]:
    engine = await AsyncTieredMemory.embedded(
        tmp_path / "memory.db", embedder=HashingEmbedder(), clock=clock
    )
    try:
        yield engine
    finally:
        await engine.close()


@pytest.fixture
def mem(tmp_path: Path, clock: ManualClock) -> Iterator[TieredMemory]:
    engine = TieredMemory.embedded(tmp_path / "memory.db", embedder=HashingEmbedder(), clock=clock)
    try:
        yield engine
    finally:
        engine.close()
