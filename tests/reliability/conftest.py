"""Fixtures of the reliability suite (issue 11).

The servers are the ones the adapters' own tests use, imported from their conftests
(pytest registers imported fixtures under the names they are bound to here): the moto
S3 server on loopback, and FalkorDB's Bolt server. `_dummy_aws` is autouse: every test
here (and every child process it starts) sees dummy AWS credentials and no AWS config,
so nothing can reach real AWS. Tests that take `memories` run on every backend
combination (tests/matrix.py).
"""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest

from tests.integration.neo4j.conftest import bolt_backend, falkordb_server
from tests.integration.neo4j.conftest import outage_server as graph_outage_server
from tests.integration.s3.conftest import _dummy_aws, moto_server, s3_endpoint
from tests.integration.s3.conftest import outage_server as s3_outage_server
from tests.matrix import backends, matrix_bucket, memories, quiet_werkzeug
from tests.matrix import parametrize_backends as pytest_generate_tests

START = datetime(2026, 1, 1, tzinfo=timezone.utc)

__all__ = [
    "_dummy_aws",
    "backends",
    "bolt_backend",
    "falkordb_server",
    "graph_outage_server",
    "matrix_bucket",
    "memories",
    "moto_server",
    "pytest_generate_tests",
    "quiet_werkzeug",
    "s3_endpoint",
    "s3_outage_server",
]


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """A generator seeded by the test's name: a failure replays the same way."""
    return random.Random(request.node.nodeid)
