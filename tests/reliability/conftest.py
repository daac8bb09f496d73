"""Fixtures of the reliability suite (issue 11).

The servers are the ones the adapters' own tests use, imported from their conftests
(pytest registers imported fixtures under the names they are bound to here): the moto
S3 server on loopback, and FalkorDB's Bolt server. `_dummy_aws` is autouse: every test
here (and every child process it starts) sees dummy AWS credentials and no AWS config,
so nothing can reach real AWS.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.integration.neo4j.conftest import (
    FalkorDBServer,
    bolt_backend,
    falkordb_server,
)
from tests.integration.neo4j.conftest import outage_server as graph_outage_server
from tests.integration.s3.conftest import _dummy_aws, moto_server, s3_endpoint
from tests.integration.s3.conftest import outage_server as s3_outage_server
from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, TieredMemory

START = datetime(2026, 1, 1, tzinfo=timezone.utc)

__all__ = [
    "FalkorDBServer",
    "_dummy_aws",
    "bolt_backend",
    "falkordb_server",
    "graph_outage_server",
    "moto_server",
    "s3_endpoint",
    "s3_outage_server",
]


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """A generator seeded by the test's name: a failure replays the same way."""
    return random.Random(request.node.nodeid)


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak variants run only when asked for (`-m soak`); the default run stays fast."""
    if "soak" in (config.getoption("markexpr") or ""):
        return
    soak = [item for item in items if item.get_closest_marker("soak") is not None]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [item for item in items if item.get_closest_marker("soak") is None]


@pytest.fixture(autouse=True)
def _quiet_werkzeug() -> Iterator[None]:
    """moto's HTTP server logs every request at INFO; thousands of them only slow the
    log capture down."""
    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)
