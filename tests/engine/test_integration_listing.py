"""What the faces need from the core, as public API: listing and deleting by metadata,
batch upserts, and one bridge from a caller's event loop to the memory's."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from tiered_memory import (
    AsyncTieredMemory,
    ConfigurationError,
    HashingEmbedder,
    MemoryInput,
    Tier,
    TieredMemory,
    ValidationError,
)
from tiered_memory.ports import MetadataFilter

NS = "docs"


async def _docs(amem: AsyncTieredMemory, n: int = 10) -> list[str]:
    """`n` memories, alternately of document a and b; the first of each archived."""
    items = [
        MemoryInput(content=f"chunk {i} of a note", id=f"c{i:02d}", metadata={"doc": "ab"[i % 2]})
        for i in range(n)
    ]
    ids = [m.id for m in await amem.add_many(items, namespace=NS, link=False)]
    await amem.archive(["c00", "c01"], namespace=NS)
    return ids


async def test_list_filters_in_the_stores_query(amem: AsyncTieredMemory) -> None:
    await _docs(amem)
    # Filtered in the query, a page holds `limit` matches even though the documents
    # interleave in id order (a filter applied afterwards would return a short page).
    page = await amem.list(namespace=NS, metadata={"doc": "a"}, limit=2)
    assert [m.id for m in page] == ["c02", "c04"]
    rest = await amem.list(namespace=NS, metadata={"doc": "a"}, after_id="c04", limit=10)
    assert [m.id for m in rest] == ["c06", "c08"]
    archived = await amem.list(namespace=NS, tier=Tier.ARCHIVED, metadata={"doc": "b"})
    assert [(m.id, m.tier) for m in archived] == [("c01", Tier.ARCHIVED)]
    ops = await amem.list(namespace=NS, metadata=[MetadataFilter("doc", "ne", "a")])
    assert [m.id for m in ops] == ["c03", "c05", "c07", "c09"]


async def test_iterate_walks_every_tier_live_first(amem: AsyncTieredMemory) -> None:
    await _docs(amem)
    every = [m.id async for m in amem.iterate(namespace=NS, metadata={"doc": "a"}, page=2)]
    assert every == ["c02", "c04", "c06", "c08", "c00"]
    live = [m.id async for m in amem.iterate(namespace=NS, tiers=["hot"], page=3)]
    assert live == [f"c{i:02d}" for i in range(2, 10)]
    archived = amem.iterate(namespace=NS, tiers=[Tier.ARCHIVED])
    assert [m.tier async for m in archived] == [Tier.ARCHIVED, Tier.ARCHIVED]
    assert [m async for m in amem.iterate(namespace="elsewhere")] == []


async def test_iterate_checks_its_arguments_when_called(amem: AsyncTieredMemory) -> None:
    for bad in (
        lambda: amem.iterate(namespace=NS, page=0),
        lambda: amem.iterate(namespace=NS, tiers="hot"),
        lambda: amem.iterate(namespace=NS, metadata="doc=a"),  # type: ignore[arg-type]
        lambda: amem.iterate(namespace=" "),
    ):
        with pytest.raises(ValidationError):
            bad()


async def test_forget_where_deletes_by_metadata(amem: AsyncTieredMemory) -> None:
    await _docs(amem)
    assert await amem.forget_where({"doc": "a"}, namespace=NS) == 4  # live ones, soft
    assert all(m.do_not_inject for m in await amem.list(namespace=NS, metadata={"doc": "a"}))
    assert await amem.forget_where({"doc": "b"}, namespace=NS, hard=True) == 5
    assert [m.id async for m in amem.iterate(namespace=NS, metadata={"doc": "b"})] == []
    assert await amem.forget_where({"doc": "none"}, namespace=NS, hard=True) == 0
    assert await amem.get("c00", namespace=NS) is not None  # doc a's archived one stays


async def test_forget_where_never_means_everything(amem: AsyncTieredMemory) -> None:
    ids = await _docs(amem, 4)
    for empty in ({}, []):
        with pytest.raises(ValidationError, match="clear"):
            await amem.forget_where(empty, namespace=NS, hard=True)
    assert sorted([m.id async for m in amem.iterate(namespace=NS)]) == ids


async def test_upsert_many_replaces_by_id_in_one_step(amem: AsyncTieredMemory) -> None:
    await amem.upsert_many([{"content": "first", "id": "d"}], namespace=NS)
    with pytest.raises(ValidationError, match="id on every item"):
        await amem.upsert_many([{"content": "x", "id": "e"}, {"content": "y"}], namespace=NS)
    replaced = await amem.upsert_many(
        [MemoryInput(content="second", id="d"), MemoryInput(content="second", id="e")],
        namespace=NS,
    )
    assert [m.id for m in replaced] == ["d", "e"]  # never merged into a near-duplicate
    stored = await amem.get("d", namespace=NS)
    assert stored is not None
    assert stored.content == "second"
    assert (await amem.stats(namespace=NS)).total == 2


def test_the_facade_has_the_blocking_twins(mem: TieredMemory) -> None:
    mem.upsert_many([{"content": "kept", "id": "k", "metadata": {"doc": "a"}}], namespace=NS)
    assert [m.id for m in mem.list(namespace=NS, metadata={"doc": "a"})] == ["k"]
    assert mem.forget_where({"doc": "a"}, namespace=NS, hard=True) == 1
    assert mem.get("k", namespace=NS) is None


# -- the bridge between a caller's loop and the memory's ---------------------------------


def test_arun_runs_on_the_facades_loop_and_leaves_the_callers_free(mem: TieredMemory) -> None:
    ran_on: list[str] = []
    gate = threading.Event()

    async def on_memory_loop() -> tuple[bool, str]:
        ran_on.append(threading.current_thread().name)
        opened = await asyncio.to_thread(gate.wait, 5)  # opened by the caller's loop
        return opened, (await mem.aio.add("noted", namespace=NS)).id

    async def open_gate() -> None:
        await asyncio.sleep(0.01)
        gate.set()

    async def caller() -> tuple[bool, str]:
        result, _ = await asyncio.gather(mem.arun(on_memory_loop()), open_gate())
        return result

    opened, memory_id = asyncio.run(caller())
    assert ran_on == ["tiered-memory"]  # the facade's loop thread
    assert opened  # the caller's loop ran while the coroutine waited
    assert mem.get(memory_id, namespace=NS) is not None


def test_cancelling_arun_cancels_the_coroutine_on_the_memorys_loop(mem: TieredMemory) -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def caller() -> None:
        task = asyncio.create_task(mem.arun(slow()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(caller())
    assert cancelled.wait(5)


async def test_an_async_engine_is_its_own_aio_and_awaits_on_the_callers_loop(
    amem: AsyncTieredMemory,
) -> None:
    assert amem.aio is amem
    loop = asyncio.get_running_loop()

    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    assert await amem.arun(where()) is loop


async def test_an_async_engine_refuses_to_block(amem: AsyncTieredMemory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the refused coroutine is closed, never left
        with pytest.raises(ConfigurationError, match="async methods"):
            amem.run(amem.stats(namespace=NS))


async def test_the_embedding_model_is_the_one_given(amem: AsyncTieredMemory) -> None:
    assert isinstance(amem.embedding_model, HashingEmbedder)
