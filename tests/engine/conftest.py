"""Engines with a manual clock, one per test, on every backend combination (see
tests/matrix.py): the embedded default, and the Bolt graph and S3 where they run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

# the backend matrix (tests/matrix.py) and the servers it starts, used by name
from tests.integration.neo4j.conftest import falkordb_server  # noqa: F401
from tests.integration.s3.conftest import _dummy_aws, moto_server, s3_endpoint  # noqa: F401
from tests.matrix import MemoryFactory, backends, matrix_bucket, memories, quiet_werkzeug  # noqa: F401
from tests.matrix import parametrize_backends as pytest_generate_tests  # noqa: F401
from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, TieredMemory

START = datetime(2026, 1, 1, tzinfo=timezone.utc)

__all__ = ["memories"]  # also a parameter of the fixtures below


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def amem(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> AsyncIterator[AsyncTieredMemory]:
    engine = await memories.open(tmp_path / "memory.db", embedder=HashingEmbedder(), clock=clock)
    try:
        yield engine
    finally:
        await engine.close()


@pytest.fixture
def mem(tmp_path: Path, clock: ManualClock, memories: MemoryFactory) -> Iterator[TieredMemory]:
    engine = memories.open_sync(tmp_path / "memory.db", embedder=HashingEmbedder(), clock=clock)
    try:
        yield engine
    finally:
        engine.close()
