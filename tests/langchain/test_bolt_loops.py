"""Every LangChain class, sync and async, over a memory whose graph speaks Bolt.

The Neo4j driver belongs to the loop it was opened on: the `TieredMemory` facade's own
loop thread. Sync methods run there; async methods must too (awaited from the caller's
loop without blocking it). Awaiting `memory.aio` on the caller's loop instead uses the
driver from a foreign loop, which fails as soon as a call reaches the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from langchain_tiered_memory import (
    TieredMemoryMiddleware,
    TieredMemoryRetriever,
    TieredMemoryStore,
    TieredMemoryVectorStore,
    create_memory_tools,
)
from tests.faces_bolt import *  # noqa: F403  (the Bolt fixtures, by their names)
from tests.faces_bolt import open_sync
from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

from .fakes import RecordingChatModel

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(120)]

START = datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc)
EMBEDDER = HashingEmbedder()
VIOLIN = [
    "Ava plays the violin at school concerts",
    "Ava practises the violin every evening",
    "The quarterly tax report is due in April",
]


@pytest.fixture
def mem(bolt_settings: dict[str, Any]) -> Iterator[TieredMemory]:
    memory = open_sync(bolt_settings, embedder=EMBEDDER, clock=ManualClock(START))
    try:
        yield memory
    finally:
        memory.close()


def _linked(mem: TieredMemory, namespace: str, memory_id: str) -> list[str]:
    """The memory's neighbours, read from the Bolt graph."""
    return [link.target for link in mem.links(memory_id, namespace=namespace)]


def test_sync_classes_on_the_bolt_graph(
    mem: TieredMemory, namespace: str, graph_failures: Callable[[], list[str]]
) -> None:
    store = TieredMemoryVectorStore(mem, namespace=namespace)
    assert store.add_texts(VIOLIN, ids=["a", "b", "c"]) == ["a", "b", "c"]
    assert _linked(mem, namespace, "b") == ["a"]  # auto-linking wrote to the graph
    assert [d.id for d in store.similarity_search("violin", k=2)] == ["b", "a"]
    vector = EMBEDDER.embed_sync(["violin evening"])[0].tolist()
    assert store.similarity_search_by_vector(vector, k=1)[0].id == "b"
    store.delete(["c"])
    assert [d.id for d in store.get_by_ids(["a", "b", "c"])] == ["a", "b"]

    retriever = TieredMemoryRetriever(memory=mem, namespace=namespace, budget_tokens=200)
    assert {d.metadata["id"] for d in retriever.invoke("violin")} == {"a", "b"}

    graph_store = TieredMemoryStore(mem, index={"fields": ["text"]})
    graph_store.put(("notes", namespace), "tea", {"text": "Ava drinks green tea"})
    [item] = graph_store.search(("notes", namespace), query="what does Ava drink?")
    assert item.key == "tea"

    recall, remember = create_memory_tools(mem, namespace)[:2]
    assert "Stored" in remember.invoke({"content": "Ava's violin teacher is called Mira"})
    assert "Mira" in recall.invoke({"query": "violin teacher"})

    model = RecordingChatModel()
    agent = create_agent(model=model, middleware=[TieredMemoryMiddleware(mem)])
    agent.invoke(
        {"messages": [HumanMessage("My daughter is called Ava.")]},
        context={"user_id": namespace},
    )
    agent.invoke(
        {"messages": [HumanMessage("What is my daughter called?")]},
        context={"user_id": namespace},
    )
    assert "My daughter is called Ava." in model.system_prompts()[1]
    assert graph_failures() == []


async def test_async_classes_on_the_bolt_graph(
    mem: TieredMemory, namespace: str, graph_failures: Callable[[], list[str]]
) -> None:
    store = TieredMemoryVectorStore(mem, namespace=namespace)
    assert await store.aadd_texts(VIOLIN, ids=["a", "b", "c"]) == ["a", "b", "c"]
    assert _linked(mem, namespace, "b") == ["a"]
    assert [d.id for d in await store.asimilarity_search("violin", k=2)] == ["b", "a"]
    vector = EMBEDDER.embed_sync(["violin evening"])[0].tolist()
    assert (await store.asimilarity_search_by_vector(vector, k=1))[0].id == "b"
    await store.adelete(["c"])
    assert [d.id for d in await store.aget_by_ids(["a", "b", "c"])] == ["a", "b"]

    retriever = TieredMemoryRetriever(memory=mem, namespace=namespace, budget_tokens=200)
    assert {d.metadata["id"] for d in await retriever.ainvoke("violin")} == {"a", "b"}

    graph_store = TieredMemoryStore(mem, index={"fields": ["text"]})
    await graph_store.aput(("notes", namespace), "tea", {"text": "Ava drinks green tea"})
    [item] = await graph_store.asearch(("notes", namespace), query="what does Ava drink?")
    assert item.key == "tea"

    recall, remember = create_memory_tools(mem, namespace)[:2]
    assert "Stored" in await remember.ainvoke({"content": "Ava's violin teacher is called Mira"})
    assert "Mira" in await recall.ainvoke({"query": "violin teacher"})

    model = RecordingChatModel()
    agent = create_agent(model=model, middleware=[TieredMemoryMiddleware(mem)])
    await agent.ainvoke(
        {"messages": [HumanMessage("My daughter is called Ava.")]},
        context={"user_id": namespace},
    )
    await agent.ainvoke(
        {"messages": [HumanMessage("What is my daughter called?")]},
        context={"user_id": namespace},
    )
    assert "My daughter is called Ava." in model.system_prompts()[1]
    assert graph_failures() == []
