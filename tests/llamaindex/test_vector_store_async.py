"""TieredMemoryVectorStore through LlamaIndex's async paths, on either engine type."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from llamaindex_tiered_memory import TieredMemoryVectorStore, UnsupportedFilterError
from tiered_memory import AsyncTieredMemory, ConfigurationError, Tier, TieredMemory

from .helpers import HashingEmbedding

NS = "docs"

DOCS = [
    Document(
        text="Ava plays the violin on Tuesdays.", doc_id="d-ava", metadata={"topic": "family"}
    ),
    Document(
        text="Project Falcon ships on March 3 to the Berlin office.",
        doc_id="d-falcon",
        metadata={"topic": "work"},
    ),
    Document(
        text="The quarterly budget review is in June.",
        doc_id="d-budget",
        metadata={"topic": "work"},
    ),
]


@pytest.fixture(params=["facade", "async-engine"])
async def memory(
    request: pytest.FixtureRequest, mem: TieredMemory, amem: AsyncTieredMemory
) -> TieredMemory | AsyncTieredMemory:
    return mem if request.param == "facade" else amem


async def test_async_insert_query_filter_delete(
    memory: TieredMemory | AsyncTieredMemory, hashing_embed: HashingEmbedding
) -> None:
    store = TieredMemoryVectorStore(memory, namespace=NS)
    index = VectorStoreIndex.from_vector_store(store, embed_model=hashing_embed, use_async=True)
    for doc in DOCS:
        await index.ainsert(doc)
    assert len(await store.aget_nodes()) == 3

    results = await index.as_retriever(similarity_top_k=2).aretrieve("When does Falcon ship?")
    assert results[0].node.ref_doc_id == "d-falcon"
    assert results[0].node.metadata["tier"] == "hot"

    work = await index.as_retriever(
        similarity_top_k=5,
        filters=MetadataFilters(filters=[MetadataFilter(key="topic", value="work")]),
    ).aretrieve("Falcon ships; budget review")
    assert sorted(r.node.ref_doc_id or "" for r in work) == ["d-budget", "d-falcon"]

    await index.adelete_ref_doc("d-falcon")
    left = await store.aget_nodes()
    assert sorted(n.ref_doc_id or "" for n in left) == ["d-ava", "d-budget"]

    ava = next(n for n in left if n.ref_doc_id == "d-ava")
    await index.adelete_nodes([ava.node_id])
    assert [n.ref_doc_id for n in await store.aget_nodes()] == ["d-budget"]

    await store.adelete_nodes(
        filters=MetadataFilters(
            filters=[MetadataFilter(key="tier", value="hot", operator=FilterOperator.EQ)]
        )
    )
    assert await store.aget_nodes() == []


async def test_async_budget_records_use_and_clear(
    memory: TieredMemory | AsyncTieredMemory, hashing_embed: HashingEmbedding
) -> None:
    store = TieredMemoryVectorStore(memory, namespace=NS, budget_tokens=30)
    nodes = [
        TextNode(
            text=f"Falcon note {i} " + "detail " * 6,
            id_=f"n{i}",
            embedding=await hashing_embed.aget_text_embedding(f"Falcon note {i}"),
        )
        for i in range(6)
    ]
    assert await store.async_add(nodes) == [f"n{i}" for i in range(6)]
    query = VectorStoreQuery(
        query_embedding=await hashing_embed.aget_query_embedding("Falcon note"),
        query_str="Falcon note",
        similarity_top_k=6,
    )
    result = await store.aquery(query)
    chosen = result.ids or []
    assert 1 <= len(chosen) < 6
    listed = [n for n in await store.aget_nodes()]
    assert len(listed) == 6
    engine = memory.aio if isinstance(memory, TieredMemory) else memory
    uses = {m.id: m.use_count for m in await engine.list(namespace=NS)}
    assert {i for i, n in uses.items() if n} == set(chosen)
    with pytest.raises(UnsupportedFilterError):
        await store.aquery(
            VectorStoreQuery(
                query_embedding=query.query_embedding,
                filters=MetadataFilters(filters=[MetadataFilter(key="tier", value="warm")]),
            )
        )
    await store.aclear()
    assert (await engine.stats(namespace=NS)).total == 0


async def test_concurrent_queries_keep_their_own_vectors(
    memory: TieredMemory | AsyncTieredMemory, hashing_embed: HashingEmbedding
) -> None:
    # The precomputed query vector is task-local: queries running at the same time on
    # one engine must each be answered for their own vector.
    store = TieredMemoryVectorStore(memory, namespace=NS)
    words = ["apple", "river", "violin", "engine", "garden", "planet"]
    await store.async_add(
        [
            TextNode(text=w, id_=w, embedding=await hashing_embed.aget_text_embedding(w))
            for w in words
        ]
    )

    async def top(word: str) -> str | None:
        result = await store.aquery(
            VectorStoreQuery(
                query_embedding=await hashing_embed.aget_query_embedding(word),
                similarity_top_k=1,
            )
        )
        return (result.ids or [None])[0]

    answers = await asyncio.gather(*(top(w) for w in words * 3))
    assert answers == words * 3


async def test_sync_methods_on_an_async_engine_say_what_to_do(
    amem: AsyncTieredMemory,
) -> None:
    store = TieredMemoryVectorStore(amem, namespace=NS)
    with pytest.raises(ConfigurationError, match="aquery, async_add"):
        store.get_nodes()
    await store.async_add([TextNode(text="x", id_="x", embedding=[1.0] * 64)])
    assert (await amem.stats(namespace=NS)).tiers[Tier.HOT].count == 1


async def test_sync_methods_work_inside_a_running_loop(
    mem: TieredMemory, hashing_embed: HashingEmbedding
) -> None:
    # Jupyter and async web apps call LlamaIndex's sync API with a loop running; the
    # facade's own loop thread serves them without nesting loops.
    store = TieredMemoryVectorStore(mem, namespace=NS)
    vector = hashing_embed.get_text_embedding("inside a loop")
    store.add([TextNode(text="inside a loop", id_="l1", embedding=vector)])
    result = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=1))
    assert result.ids == ["l1"]
