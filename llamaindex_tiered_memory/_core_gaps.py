"""Workarounds for what the core does not offer yet. Each one is marked CORE GAP and
says what to delete once the core has the missing piece; nothing here decides a
memory rule (scores, tiers, budgets all stay in the core).

1. Search and recall by a precomputed query vector. LlamaIndex embeds the query
   with the index's model before it reaches a vector store, but `search`/`recall`
   only take text. We install a delegating embedder whose `embed_query` returns the
   vector set for the current task (a ContextVar, so concurrent queries on one
   engine never see each other's vectors).
   Wanted: `search(..., query_embedding=...)` and `recall(..., query_embedding=...)`.
2. Running a coroutine on a `TieredMemory`'s own event loop. The facade runs only
   its own methods there; the face composes several engine calls into one
   coroutine, so it uses the facade's private loop.
   Wanted: a public `TieredMemory.run(coro)` (blocking) and an awaitable twin.
3. Listing by metadata and bulk hard delete. `list()` takes no metadata filters and
   `forget()` takes one id, so deleting a document (all memories with its
   `ref_doc_id`) pages through the namespace and forgets ids one by one.
   Wanted: `list(..., metadata=[MetadataFilter...])` and `forget_many(ids, hard=True)`
   (or `forget_where(metadata=...)`), and `clear(namespace)` on the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

from tiered_memory import AsyncTieredMemory, ConfigurationError, Memory, Tier, TieredMemory
from tiered_memory.ports import Embedder, Matrix, Vector

T = TypeVar("T")
AnyMemory = TieredMemory | AsyncTieredMemory

_QUERY_VECTOR: ContextVar[Vector | None] = ContextVar(
    "llamaindex_tiered_memory_query_vector", default=None
)


def engine_of(memory: AnyMemory) -> AsyncTieredMemory:
    return memory.aio if isinstance(memory, TieredMemory) else memory


# -- CORE GAP 2: run a composed coroutine on the engine's loop -------------------------


def run_sync(memory: AnyMemory, coro: Coroutine[Any, Any, T]) -> T:
    """Block on `coro`; a `TieredMemory` runs it on its own loop thread, which works
    from plain code, from LlamaIndex's `asyncio_run` and inside a running loop."""
    if isinstance(memory, TieredMemory):
        return memory._loop.run(coro)  # CORE GAP 2: no public TieredMemory.run(coro)
    coro.close()
    raise ConfigurationError(
        "this object wraps an AsyncTieredMemory, whose connections live on your event "
        "loop: use the async methods (aquery, async_add, adelete, aretrieve ...), or pass "
        "a TieredMemory to use the sync ones"
    )


async def run_async(memory: AnyMemory, coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro`: directly for an `AsyncTieredMemory`; on the facade's loop for a
    `TieredMemory` (from a worker thread, so the caller's loop is never blocked)."""
    if isinstance(memory, TieredMemory):
        return await asyncio.to_thread(memory._loop.run, coro)  # CORE GAP 2
    return await coro


# -- CORE GAP 1: a precomputed query vector -------------------------------------------


class QueryVectorEmbedder:
    """Delegates to the engine's embedder, except `embed_query` while a precomputed
    vector is set for the running task."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    async def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        vector = _QUERY_VECTOR.get()
        if vector is not None:
            return vector
        return await self.inner.embed_query(text)


async def with_query_vector(
    engine: AsyncTieredMemory,
    vector: Sequence[float] | None,
    call: Callable[[], Awaitable[T]],
) -> T:
    """Run `call` (one engine search or recall) so it uses `vector` as the query
    embedding; without a vector the engine embeds the query text itself."""
    if vector is None:
        return await call()
    if not isinstance(engine.embedder, QueryVectorEmbedder):  # CORE GAP 1
        engine.embedder = QueryVectorEmbedder(engine.embedder)
    token = _QUERY_VECTOR.set(np.asarray(vector, dtype=np.float32))
    try:
        return await call()
    finally:
        _QUERY_VECTOR.reset(token)


# -- CORE GAP 3: list everything of a namespace, forget many -------------------------


async def every_memory(
    engine: AsyncTieredMemory, namespace: str, *, page: int = 500
) -> AsyncIterator[Memory]:
    """Every live memory, then every archived one (as its summary), page by page."""
    for tier in (None, Tier.ARCHIVED):
        after: str | None = None
        while True:
            batch = await engine.list(namespace=namespace, tier=tier, after_id=after, limit=page)
            for memory in batch:
                yield memory
            if len(batch) < page:
                break
            after = batch[-1].id


async def forget_hard(engine: AsyncTieredMemory, namespace: str, ids: Sequence[str]) -> None:
    for memory_id in ids:
        await engine.forget(memory_id, namespace=namespace, hard=True)


__all__ = [
    "AnyMemory",
    "QueryVectorEmbedder",
    "engine_of",
    "every_memory",
    "forget_hard",
    "run_async",
    "run_sync",
    "with_query_vector",
]
