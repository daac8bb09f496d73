"""TieredMemoryRetriever: scored nodes with tiers, budgets, filters, namespaces."""

from __future__ import annotations

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llamaindex_tiered_memory import (
    TieredMemoryRetriever,
    TieredMemoryVectorStore,
    UnsupportedFilterError,
)
from tiered_memory import AsyncTieredMemory, ConfigurationError, MemoryType, Tier, TieredMemory

from .helpers import HashingEmbedding, texts

NS = "user-42"


@pytest.fixture
def seeded(mem: TieredMemory) -> TieredMemory:
    mem.add("User's daughter is called Ava", namespace=NS, memory_type=MemoryType.FACTUAL)
    mem.add("Ava has violin lessons on Tuesdays", namespace=NS, metadata={"topic": "family"})
    mem.add("Project Falcon ships on March 3", namespace=NS, metadata={"topic": "work"})
    mem.add("Had pizza for lunch with the team", namespace=NS, metadata={"topic": "work"})
    return mem


def test_search_returns_scored_nodes_with_their_tier(seeded: TieredMemory) -> None:
    results = TieredMemoryRetriever(seeded, namespace=NS, similarity_top_k=2).retrieve(
        "daughter Ava"
    )
    assert len(results) == 2
    assert results[0].node.get_content() == "User's daughter is called Ava"
    assert [r.score for r in results] == sorted((r.score or 0.0 for r in results), reverse=True)
    node = results[0].node
    assert node.metadata["tier"] == "hot"
    assert "tier" not in node.get_content(metadata_mode=MetadataMode.LLM)
    ava = next(m for m in seeded.list(namespace=NS) if m.content == node.get_content())
    assert node.node_id == ava.id
    assert all(m.use_count == 0 for m in seeded.list(namespace=NS))  # search records nothing


def test_budget_returns_the_injection_and_records_use(seeded: TieredMemory) -> None:
    retriever = TieredMemoryRetriever(seeded, namespace=NS, budget_tokens=12, similarity_top_k=10)
    results = retriever.retrieve("Ava daughter violin")
    lines = "\n".join("- " + r.node.get_content() for r in results)
    assert 1 <= len(results) < 4
    assert seeded.aio.tokens.count(lines) <= 12
    used = {m.id for m in seeded.list(namespace=NS) if m.use_count == 1}
    assert used == {r.node.node_id for r in results}


def test_filters_on_metadata_tier_and_type(seeded: TieredMemory) -> None:
    work = TieredMemoryRetriever(
        seeded,
        namespace=NS,
        filters=MetadataFilters(filters=[MetadataFilter(key="topic", value="work")]),
    ).retrieve("Ava Falcon pizza")
    assert sorted(texts(r.node for r in work)) == [
        "Had pizza for lunch with the team",
        "Project Falcon ships on March 3",
    ]
    facts = TieredMemoryRetriever(seeded, namespace=NS, memory_types=["factual"]).retrieve("Ava")
    assert texts(r.node for r in facts) == ["User's daughter is called Ava"]
    pizza = next(m for m in seeded.list(namespace=NS) if "pizza" in m.content)
    seeded.demote(pizza.id, Tier.COLD, namespace=NS)
    cold = TieredMemoryRetriever(
        seeded,
        namespace=NS,
        filters=MetadataFilters(
            filters=[MetadataFilter(key="tier", value=["cold"], operator=FilterOperator.IN)]
        ),
    ).retrieve("lunch pizza team")
    assert [(r.node.node_id, r.node.metadata["tier"]) for r in cold] == [(pizza.id, "cold")]


def test_budget_and_tier_filter_are_rejected_at_construction(seeded: TieredMemory) -> None:
    with pytest.raises(UnsupportedFilterError, match="budget_tokens"):
        TieredMemoryRetriever(
            seeded,
            namespace=NS,
            budget_tokens=100,
            filters=MetadataFilters(filters=[MetadataFilter(key="tier", value="hot")]),
        )


def test_namespaces_never_cross(seeded: TieredMemory) -> None:
    assert TieredMemoryRetriever(seeded, namespace="user-7").retrieve("Ava daughter") == []


def test_nodes_stored_by_the_vector_store_come_back_whole(
    mem: TieredMemory, hashing_embed: HashingEmbedding
) -> None:
    index = VectorStoreIndex.from_vector_store(
        TieredMemoryVectorStore(mem, namespace=NS), embed_model=hashing_embed
    )
    index.insert(Document(text="Falcon launch checklist", doc_id="doc-1", metadata={"n": 1}))
    (result,) = TieredMemoryRetriever(mem, namespace=NS).retrieve("Falcon launch")
    assert result.node.ref_doc_id == "doc-1"
    assert result.node.metadata == {"n": 1, "tier": "hot"}


def test_retriever_query_engine_with_a_mock_llm(seeded: TieredMemory) -> None:
    engine = RetrieverQueryEngine.from_args(
        TieredMemoryRetriever(seeded, namespace=NS, similarity_top_k=1), llm=MockLLM()
    )
    response = engine.query("What is the daughter called?")
    assert "User's daughter is called Ava" in str(response)


async def test_async_retrieve_with_either_engine(
    seeded: TieredMemory, amem: AsyncTieredMemory
) -> None:
    results = await TieredMemoryRetriever(seeded, namespace=NS, similarity_top_k=1).aretrieve(
        "daughter Ava"
    )
    assert texts(r.node for r in results) == ["User's daughter is called Ava"]
    await amem.add("Async engines work too", namespace=NS)
    retriever = TieredMemoryRetriever(amem, namespace=NS, budget_tokens=50)
    found = await retriever.aretrieve("async engines")
    assert texts(r.node for r in found) == ["Async engines work too"]
    assert (await amem.list(namespace=NS))[0].use_count == 1
    with pytest.raises(ConfigurationError, match="async methods"):
        retriever.retrieve("async engines")


def test_k_is_the_old_name_of_similarity_top_k(seeded: TieredMemory) -> None:
    """LlamaIndex users write similarity_top_k; k still works for one release, with a
    DeprecationWarning that names the new argument."""
    with pytest.warns(DeprecationWarning, match="similarity_top_k"):
        old = TieredMemoryRetriever(seeded, namespace=NS, k=1)
    assert old.similarity_top_k == 1
    assert len(old.retrieve("daughter Ava")) == 1
