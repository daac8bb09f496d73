"""A Weaviate server from WEAVIATE_URL (`docker compose up -d weaviate`).

The test module skips itself when the variable is unset. Every session works under
its own collection prefix, so runs never see each other's data, and the session drops
its collections at the end; tests get their own namespaces inside it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from tiered_memory.backends.weaviate.store import WeaviateMemoryStore

SKIP_REASON = (
    "WEAVIATE_URL is not set: Weaviate tests need a server (docker compose up -d weaviate); skipped"
)
WEAVIATE_URL = os.environ.get("WEAVIATE_URL", "")

StoreFactory = Callable[..., Awaitable[WeaviateMemoryStore]]


def make(prefix: str) -> WeaviateMemoryStore:
    """A store on the server under test; not opened yet."""
    return WeaviateMemoryStore(
        url=WEAVIATE_URL,
        api_key=os.environ.get("WEAVIATE_API_KEY") or None,
        grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
        prefix=prefix,
    )


def unique_prefix(label: str = "") -> str:
    return f"TmTest{label}{uuid.uuid4().hex[:10]}"


async def _drop(prefixes: list[str]) -> None:
    for prefix in prefixes:
        store = make(prefix)
        try:
            await store.open()
            await store.drop()
        finally:
            await store.close()


@pytest.fixture(scope="session")
def prefixes() -> Iterator[list[str]]:
    """Every collection prefix the session used; all of them are dropped at the end."""
    used: list[str] = []
    yield used
    if used:
        asyncio.run(_drop(used))


@pytest.fixture(scope="session")
def session_prefix(prefixes: list[str]) -> str:
    prefix = unique_prefix()
    prefixes.append(prefix)
    return prefix


@pytest.fixture
async def store(session_prefix: str) -> AsyncIterator[WeaviateMemoryStore]:
    """The session's store (schema created once, idempotently reopened per test)."""
    s = make(session_prefix)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def fresh_store(prefixes: list[str]) -> AsyncIterator[StoreFactory]:
    """Stores under prefixes of their own, for tests that fix another dimension or
    inspect the schema; opened on request, closed after the test."""
    opened: list[WeaviateMemoryStore] = []

    async def factory(label: str = "") -> WeaviateMemoryStore:
        prefix = unique_prefix(label)
        prefixes.append(prefix)
        s = make(prefix)
        opened.append(s)
        return await s.open()

    try:
        yield factory
    finally:
        for s in opened:
            await s.close()
