"""Memories whose association graph is a Bolt server, for the faces' event-loop tests.

The Neo4j driver is bound to the event loop its connections were opened on, so these
memories catch a face that awaits the engine on the wrong loop: a `TieredMemory` opens
its backends on its own loop thread, an `AsyncTieredMemory` on the caller's loop.
The memories are wired through the public `from_config`, as an application does.

Import the fixtures into a test module (`from tests.faces_bolt import ...`): pytest
registers imported fixtures under the names they are bound to.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_socket

from tests.integration.neo4j.conftest import Backend, bolt_backend, falkordb_server
from tiered_memory import AsyncTieredMemory, TieredMemory

__all__ = [
    "bolt_backend",
    "bolt_settings",
    "falkordb_server",
    "graph_failures",
    "loopback_only",
    "namespace",
    "open_async",
    "open_sync",
]


@pytest.fixture
def loopback_only() -> Iterator[None]:
    """Sockets to 127.0.0.1 only (the Bolt server), instead of the faces' Unix-only rule."""
    pytest_socket.enable_socket()
    connect = socket.socket.connect
    pytest_socket.socket_allow_hosts(["127.0.0.1"], allow_unix_socket=True)
    try:
        yield
    finally:
        socket.socket.connect = connect  # type: ignore[method-assign]


@pytest.fixture
def graph_failures(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """What the engine logged about the graph failing so far. A graph call on the wrong
    loop need not raise: the engine takes the failure for an outage and skips the graph
    (auto-linking, relinking, expansion), logging that it did."""
    caplog.set_level(logging.INFO, logger="tiered_memory")

    def failures() -> list[str]:
        return [
            record.getMessage()
            for record in caplog.records
            if record.name.startswith("tiered_memory")
            and (record.levelno >= logging.WARNING or "skipped" in record.getMessage())
        ]

    return failures


@pytest.fixture
def namespace() -> str:
    """A namespace of this test's own: the Bolt server is shared by the session."""
    return f"face-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def bolt_settings(bolt_backend: Backend, tmp_path: Path, loopback_only: None) -> dict[str, Any]:
    """`from_config` arguments: SQLite records in `tmp_path`, the graph on Bolt."""
    bolt_backend.heal()
    neo4j: dict[str, Any] = {"uri": bolt_backend.uri}
    if bolt_backend.auth is not None:
        neo4j["user"], neo4j["password"] = bolt_backend.auth
    config = tmp_path / "config.toml"
    config.write_text("")  # never the user's own config file
    return {
        "config": config,
        "store": {"backend": "sqlite", "path": tmp_path / "memory.db"},
        "graph": {"backend": "neo4j", "neo4j": neo4j},
        "objects": {"backend": "local", "path": tmp_path / "archive"},
    }


def open_sync(settings: dict[str, Any], **options: Any) -> TieredMemory:
    """A facade: its backends, the Bolt driver included, live on its own loop thread."""
    args = dict(settings)
    return TieredMemory.from_config(args.pop("config"), **args, **options)


async def open_async(settings: dict[str, Any], **options: Any) -> AsyncTieredMemory:
    """An engine whose Bolt driver lives on the running (the caller's) loop."""
    args = dict(settings)
    return await AsyncTieredMemory.from_config(args.pop("config"), **args, **options)
