"""Memories on the embedded default for the LangChain face: no server, no network.

Every test here runs with sockets disabled except Unix ones (event loops use a Unix
socket pair to wake up), so nothing can leave the machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import pytest_socket

from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

START = datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    pytest_socket.disable_socket(allow_unix_socket=True)
    try:
        yield
    finally:
        pytest_socket.enable_socket()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def mem(tmp_path: Path, clock: ManualClock) -> Iterator[TieredMemory]:
    memory = TieredMemory.embedded(tmp_path / "memory.db", embedder=HashingEmbedder(), clock=clock)
    try:
        yield memory
    finally:
        memory.close()
