"""TieredMemoryRetriever: LangChain's standard retriever suite, and what is ours."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from langchain_tiered_memory import TieredMemoryRetriever
from tiered_memory import ConfigurationError, MemoryType, Tier, TieredMemory, ValidationError

NS = "user-42"

FACTS = [
    ("The user drinks green tea every morning", MemoryType.FACTUAL),
    ("The user prefers green tea over coffee", MemoryType.PROCEDURAL),
    ("The user bought a new green tea kettle", MemoryType.EPISODIC),
    ("The user's tea shop is on Baker Street", MemoryType.FACTUAL),
    ("Project Falcon ships on March 3", MemoryType.PROJECT),
]


def seed(mem: TieredMemory, namespace: str = NS) -> list[str]:
    return [mem.add(text, namespace=namespace, memory_type=kind).id for text, kind in FACTS]


class TestTieredMemoryRetrieverStandard(RetrieversIntegrationTests):
    """The suite runs in-process on the embedded store, as Chroma's does."""

    @pytest.fixture(autouse=True)
    def _seeded(self, mem: TieredMemory) -> None:
        seed(mem)
        self.memory = mem

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return TieredMemoryRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"memory": self.memory, "namespace": NS}

    @property
    def retriever_query_example(self) -> str:
        return "what tea does the user drink?"


def test_documents_carry_the_memory_and_its_standing(mem: TieredMemory) -> None:
    ids = seed(mem)
    docs = TieredMemoryRetriever(memory=mem, namespace=NS, k=2).invoke("green tea morning")
    assert len(docs) == 2
    top = docs[0]
    assert top.page_content == FACTS[0][0]
    assert top.id == ids[0]
    assert top.metadata["id"] == ids[0]
    assert top.metadata["tier"] == Tier.HOT.value
    assert top.metadata["memory_type"] == MemoryType.FACTUAL.value
    assert top.metadata["archived"] is False
    assert datetime.fromisoformat(top.metadata["created_at"]) == mem.clock.now()
    assert 0.0 < docs[1].metadata["score"] <= top.metadata["score"] <= 1.0


def test_plain_retrieval_records_no_use(mem: TieredMemory) -> None:
    ids = seed(mem)
    TieredMemoryRetriever(memory=mem, namespace=NS, k=3).invoke("green tea")
    assert all(mem.get(i, namespace=NS).use_count == 0 for i in ids)  # type: ignore[union-attr]


def test_budgeted_retrieval_is_exactly_what_recall_injects(mem: TieredMemory) -> None:
    seed(mem)
    # recall with the same arguments, but without recording, is the reference
    expected = mem.recall(
        "green tea", namespace=NS, budget_tokens=25, max_items=4, record_use=False
    )
    assert 0 < len(expected.items) < 4  # the budget, not k, is what limits it
    docs = TieredMemoryRetriever(memory=mem, namespace=NS, k=4, budget_tokens=25).invoke(
        "green tea"
    )
    assert [d.id for d in docs] == [h.memory.id for h in expected.items]
    for doc in docs:  # and each injected memory now counts one use
        assert mem.get(doc.id, namespace=NS).use_count == 1  # type: ignore[arg-type,union-attr]


async def test_async_budgeted_retrieval_records_use(mem: TieredMemory) -> None:
    ids = seed(mem)
    retriever = TieredMemoryRetriever(memory=mem, namespace=NS, k=2, budget_tokens=500)
    docs = await retriever.ainvoke("green tea")
    assert len(docs) == 2
    used = {i for i in ids if (await mem.aio.get(i, namespace=NS)).use_count}  # type: ignore[union-attr]
    assert used == {d.id for d in docs}


def test_namespaces_do_not_mix(mem: TieredMemory) -> None:
    seed(mem, "someone-else")
    assert TieredMemoryRetriever(memory=mem, namespace=NS).invoke("green tea") == []
    docs = TieredMemoryRetriever(memory=mem, namespace=NS).invoke(
        "green tea", namespace="someone-else"
    )
    assert docs
    assert all("tea" in d.page_content.lower() for d in docs[:3])


def test_forgotten_memories_are_not_retrieved(mem: TieredMemory) -> None:
    ids = seed(mem)
    mem.forget(ids[0], namespace=NS)
    docs = TieredMemoryRetriever(memory=mem, namespace=NS, k=5).invoke("green tea morning")
    assert ids[0] not in {d.id for d in docs}


def test_unknown_call_arguments_are_refused(mem: TieredMemory) -> None:
    retriever = TieredMemoryRetriever(memory=mem, namespace=NS)
    with pytest.raises(ValidationError, match="tiers"):
        retriever.invoke("tea", tiers=["hot"])


@pytest.mark.parametrize("config", [[], "user-42", 42])
def test_a_config_that_is_not_a_dict_is_refused(mem: TieredMemory, config: Any) -> None:
    """Refused by us, as a typed error, before LangChain reads it (an AttributeError)."""
    seed(mem)
    for retriever in (
        TieredMemoryRetriever(memory=mem, namespace=NS),
        TieredMemoryRetriever(memory=mem, namespace_key="user_id"),
    ):
        with pytest.raises(ValidationError, match="RunnableConfig"):
            retriever.invoke("tea", config=config)
        with pytest.raises(ValidationError, match="RunnableConfig"):
            asyncio.run(retriever.ainvoke("tea", config=config))


def test_deep_retrieval_marks_archived_summaries(mem: TieredMemory) -> None:
    ids = seed(mem)
    assert mem.archive([ids[3]], namespace=NS) == 1
    deep = TieredMemoryRetriever(memory=mem, namespace=NS, k=5, deep=True).invoke(
        "Baker Street shop"
    )
    [archived] = [d for d in deep if d.id == ids[3]]
    assert archived.metadata["archived"] is True
    assert archived.metadata["tier"] == Tier.ARCHIVED.value
    assert "Baker Street" in archived.page_content  # the summary keeps the name


# -- the namespace of the run -------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"namespace_key": "user_id"}])
async def test_namespace_from_the_run_config(mem: TieredMemory, kwargs: dict[str, Any]) -> None:
    """Without a fixed namespace, each call searches the namespace its config names."""
    seed(mem, "alice")
    mem.add("The user drinks black coffee", namespace="bob")
    retriever = TieredMemoryRetriever(memory=mem, k=5, **kwargs)
    alice = retriever.invoke("drinks", config={"configurable": {"user_id": "alice"}})
    bob = await retriever.ainvoke("drinks", config={"configurable": {"user_id": "bob"}})
    assert alice
    assert all("black coffee" not in d.page_content for d in alice)
    assert [d.page_content for d in bob] == ["The user drinks black coffee"]
    # in a chain, the config reaches the retriever as it reaches every step
    chain = RunnableLambda(lambda q: q) | retriever
    chained = chain.invoke("drinks", config={"configurable": {"user_id": "bob"}})
    assert [d.page_content for d in chained] == ["The user drinks black coffee"]


def test_namespace_from_the_graph_run_context(mem: TieredMemory) -> None:
    mem.add("The user drinks black coffee", namespace="bob")
    retriever = TieredMemoryRetriever(memory=mem)

    class State(TypedDict):
        query: str
        found: list[str]

    def node(state: State) -> dict[str, list[str]]:
        return {"found": [d.page_content for d in retriever.invoke(state["query"])]}

    graph = StateGraph(State, context_schema=dict).add_node(node).add_edge(START, "node")
    result = graph.compile().invoke({"query": "drinks", "found": []}, context={"user_id": "bob"})
    assert result["found"] == ["The user drinks black coffee"]


async def test_a_call_without_its_namespace_is_an_error(mem: TieredMemory) -> None:
    seed(mem, "default")
    retriever = TieredMemoryRetriever(memory=mem)
    with pytest.raises(ConfigurationError, match="'user_id'"):
        retriever.invoke("green tea")
    with pytest.raises(ConfigurationError, match="userid"):
        await retriever.ainvoke("green tea", config={"configurable": {"userid": "alice"}})


def test_namespace_and_namespace_key_together_are_refused(mem: TieredMemory) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        TieredMemoryRetriever(memory=mem, namespace=NS, namespace_key="user_id")
