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
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from tests.integration.neo4j.conftest import bolt_backend, falkordb_server
from tests.integration.neo4j.conftest import outage_server as graph_outage_server
from tests.integration.s3.conftest import _dummy_aws, moto_server, s3_endpoint
from tests.integration.s3.conftest import outage_server as s3_outage_server

START = datetime(2026, 1, 1, tzinfo=timezone.utc)

__all__ = [
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
