"""The LlamaIndex classes, sync and async, over memories whose graph speaks Bolt.

The Neo4j driver belongs to the loop it was opened on. A `TieredMemory` opened its
driver on its own loop thread: the classes' sync and async methods both run there. An
`AsyncTieredMemory` opened it on the caller's loop: the async methods run there, and
the sync ones refuse (they could only block that loop). A call on the wrong loop does
not always raise: the engine takes the graph's failure for an outage and carries on
without it, so each test also checks that the graph saw the writes and never failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llamaindex_tiered_memory import (
    TieredMemoryBlock,
    TieredMemoryRetriever,
    TieredMemoryVectorStore,
)
from tests.faces_bolt import *  # noqa: F403  (the Bolt fixtures, by their names)
from tests.faces_bolt import open_async, open_sync
from tiered_memory import AsyncTieredMemory, ConfigurationError, ManualClock, TieredMemory

from .helpers import HashingEmbedding

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(120)]

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
DOCS = [
    Document(text="Ava plays the violin at school concerts.", doc_id="d-ava"),
    Document(text="Ava plays the violin every evening.", doc_id="d-practice"),
    Document(text="The quarterly tax report is due in April.", doc_id="d-tax"),
]
TOLD = [
    ChatMessage(role=MessageRole.USER, content="My daughter is called Ava."),
    ChatMessage(role=MessageRole.ASSISTANT, content="Ava is a lovely name."),
]


@pytest.fixture
def mem(bolt_settings: dict[str, Any], hashing_embed: HashingEmbedding) -> Iterator[TieredMemory]:
    memory = open_sync(bolt_settings, embedder=hashing_embed, clock=ManualClock(START))
    try:
        yield memory
    finally:
        memory.close()


def _nodes_by_doc(store: TieredMemoryVectorStore) -> dict[str, str]:
    return {n.ref_doc_id or "": n.node_id for n in store.get_nodes()}


def test_sync_classes_on_a_facade(
    mem: TieredMemory,
    namespace: str,
    hashing_embed: HashingEmbedding,
    graph_failures: Callable[[], list[str]],
) -> None:
    store = TieredMemoryVectorStore(mem, namespace=namespace)
    index = VectorStoreIndex.from_vector_store(store, embed_model=hashing_embed)
    for doc in DOCS:
        index.insert(doc)
    nodes = _nodes_by_doc(store)
    [link] = mem.links(nodes["d-practice"], namespace=namespace)  # read from the Bolt graph
    assert link.target == nodes["d-ava"]

    hits = index.as_retriever(similarity_top_k=2).retrieve("violin every evening")
    assert hits[0].node.ref_doc_id == "d-practice"
    index.delete_ref_doc("d-tax")
    assert sorted(_nodes_by_doc(store)) == ["d-ava", "d-practice"]

    retriever = TieredMemoryRetriever(mem, namespace=namespace, budget_tokens=200)
    assert {h.node.ref_doc_id for h in retriever.retrieve("violin")} == {"d-ava", "d-practice"}

    block = TieredMemoryBlock(memory=mem, namespace=namespace)
    asyncio_run(block.aput(TOLD))  # how LlamaIndex's sync Memory calls a block
    question = ChatMessage(role=MessageRole.USER, content="What is my daughter called?")
    assert "My daughter is called Ava." in asyncio_run(block.aget([question]))
    store.clear()
    assert store.get_nodes() == []
    assert graph_failures() == []


async def test_async_classes_on_a_facade(
    mem: TieredMemory,
    namespace: str,
    hashing_embed: HashingEmbedding,
    graph_failures: Callable[[], list[str]],
) -> None:
    await _async_round(mem, namespace, hashing_embed)
    assert graph_failures() == []


async def test_async_classes_on_an_async_engine(
    bolt_settings: dict[str, Any],
    namespace: str,
    hashing_embed: HashingEmbedding,
    graph_failures: Callable[[], list[str]],
) -> None:
    engine = await open_async(bolt_settings, embedder=hashing_embed, clock=ManualClock(START))
    try:
        await _async_round(engine, namespace, hashing_embed)
        with pytest.raises(ConfigurationError, match="async methods"):
            TieredMemoryVectorStore(engine, namespace=namespace).get_nodes()
    finally:
        await engine.close()
    assert graph_failures() == []


async def _async_round(
    memory: TieredMemory | AsyncTieredMemory, namespace: str, embed: HashingEmbedding
) -> None:
    store = TieredMemoryVectorStore(memory, namespace=namespace)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed, use_async=True)
    for doc in DOCS:
        await index.ainsert(doc)
    nodes = {n.ref_doc_id or "": n.node_id for n in await store.aget_nodes()}
    if isinstance(memory, TieredMemory):  # each memory on its own loop
        [link] = memory.links(nodes["d-practice"], namespace=namespace)
    else:
        [link] = await memory.links(nodes["d-practice"], namespace=namespace)
    assert link.target == nodes["d-ava"]

    hits = await index.as_retriever(similarity_top_k=2).aretrieve("violin every evening")
    assert hits[0].node.ref_doc_id == "d-practice"
    await index.adelete_ref_doc("d-tax")
    assert sorted(n.ref_doc_id or "" for n in await store.aget_nodes()) == ["d-ava", "d-practice"]

    retriever = TieredMemoryRetriever(memory, namespace=namespace, budget_tokens=200)
    found = await retriever.aretrieve("violin")
    assert {h.node.ref_doc_id for h in found} == {"d-ava", "d-practice"}

    block = TieredMemoryBlock(memory=memory, namespace=namespace)
    await block.aput(TOLD)
    question = ChatMessage(role=MessageRole.USER, content="What is my daughter called?")
    assert "My daughter is called Ava." in await block.aget([question])
    await store.aclear()
    assert await store.aget_nodes() == []
