"""Workarounds for what the core does not offer yet. Each one is marked CORE GAP and
says what to delete once the core has the missing piece; nothing here decides a
memory rule (scores, tiers, budgets all stay in the core).

1. Running a coroutine on a `TieredMemory`'s own event loop. The facade runs only
   its own methods there; the face composes several engine calls into one
   coroutine, so it uses the facade's private loop.
   Wanted: a public `TieredMemory.run(coro)` (blocking) and an awaitable twin.
2. Listing by metadata and bulk hard delete. `list()` takes no metadata filters and
   `forget()` takes one id, so deleting a document (all memories with its
   `ref_doc_id`) pages through the namespace and forgets ids one by one.
   Wanted: `list(..., metadata=[MetadataFilter...])` and `forget_many(ids, hard=True)`
   (or `forget_where(metadata=...)`), and `clear(namespace)` on the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar

from tiered_memory import AsyncTieredMemory, ConfigurationError, Memory, Tier, TieredMemory

T = TypeVar("T")
AnyMemory = TieredMemory | AsyncTieredMemory


def engine_of(memory: AnyMemory) -> AsyncTieredMemory:
    return memory.aio if isinstance(memory, TieredMemory) else memory


# -- CORE GAP 1: run a composed coroutine on the engine's loop -------------------------


def run_sync(memory: AnyMemory, coro: Coroutine[Any, Any, T]) -> T:
    """Block on `coro`; a `TieredMemory` runs it on its own loop thread, which works
    from plain code, from LlamaIndex's `asyncio_run` and inside a running loop."""
    if isinstance(memory, TieredMemory):
        return memory._loop.run(coro)  # CORE GAP 1: no public TieredMemory.run(coro)
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
        return await asyncio.to_thread(memory._loop.run, coro)  # CORE GAP 1
    return await coro


# -- CORE GAP 2: list everything of a namespace, forget many -------------------------


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
    "engine_of",
    "every_memory",
    "forget_hard",
    "run_async",
    "run_sync",
]
