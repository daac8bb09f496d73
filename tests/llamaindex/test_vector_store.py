"""TieredMemoryVectorStore under a real VectorStoreIndex, through the sync paths."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from llamaindex_tiered_memory import (
    TieredMemoryVectorStore,
    UnsupportedFilterError,
    UnsupportedQueryError,
)
from tiered_memory import (
    DimensionMismatchError,
    HashingEmbedder,
    ManualClock,
    Tier,
    TieredMemory,
    ValidationError,
)
from tiered_memory.models import CONTEXT_PHASE
from tiered_memory.ports import Matrix, Vector

from .helpers import DIM, HashingEmbedding, texts

NS = "docs"

DOCS = [
    Document(
        text="Ava plays the violin on Tuesdays.", doc_id="d-ava", metadata={"topic": "family"}
    ),
    Document(
        text="Project Falcon ships on March 3 to the Berlin office.",
        doc_id="d-falcon",
        metadata={"topic": "work", "year": 2026},
    ),
    Document(
        text="The quarterly budget review is in June.",
        doc_id="d-budget",
        metadata={"topic": "work", "year": 2025},
    ),
]


def by_topic(topic: str) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="topic", value=topic)])


def by_tier(value: str | list[str], op: FilterOperator = FilterOperator.EQ) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="tier", value=value, operator=op)])


@pytest.fixture
def store(mem: TieredMemory) -> TieredMemoryVectorStore:
    return TieredMemoryVectorStore(mem, namespace=NS)


@pytest.fixture
def index(store: TieredMemoryVectorStore, hashing_embed: HashingEmbedding) -> VectorStoreIndex:
    index = VectorStoreIndex.from_vector_store(store, embed_model=hashing_embed)
    for doc in DOCS:
        index.insert(doc)
    return index


def test_insert_makes_one_memory_per_node_with_the_node_id(
    index: VectorStoreIndex, mem: TieredMemory
) -> None:
    memories = mem.list(namespace=NS)
    assert sorted(m.content for m in memories) == sorted(d.text for d in DOCS)
    nodes = index.vector_store.get_nodes()
    assert {n.node_id for n in nodes} == {m.id for m in memories}
    falcon = next(n for n in nodes if "Falcon" in n.get_content())
    assert falcon.ref_doc_id == "d-falcon"
    assert falcon.metadata["year"] == 2026
    assert falcon.relationships[NodeRelationship.SOURCE].node_id == "d-falcon"
    assert {m.tier for m in memories} == {Tier.HOT}


def test_query_ranks_the_relevant_node_first_with_its_tier(index: VectorStoreIndex) -> None:
    results = index.as_retriever(similarity_top_k=2).retrieve("When does Project Falcon ship?")
    assert len(results) == 2
    top = results[0]
    assert "Falcon" in top.node.get_content()
    assert top.score is not None
    assert top.score > (results[1].score or 0.0)
    assert top.node.metadata["tier"] == "hot"
    assert "tier" not in top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "year: 2026" in top.node.get_content(metadata_mode=MetadataMode.LLM)


def test_metadata_filters_restrict_the_query(index: VectorStoreIndex) -> None:
    family = index.as_retriever(similarity_top_k=5, filters=by_topic("family")).retrieve(
        "Falcon ships"
    )
    assert texts(family) == ["Ava plays the violin on Tuesdays."]
    recent_work = index.as_retriever(
        similarity_top_k=5,
        filters=MetadataFilters(
            filters=[
                MetadataFilter(key="topic", value="work"),
                MetadataFilter(key="year", value=2026, operator=FilterOperator.GTE),
            ]
        ),
    ).retrieve("office budget review")
    assert [r.node.ref_doc_id for r in recent_work] == ["d-falcon"]


def test_or_and_not_filters_query_get_and_delete(index: VectorStoreIndex) -> None:
    """OR and NOT used to raise; now they are the core's trees, evaluated in the
    store's own query by search, get_nodes and delete_nodes alike."""
    either = MetadataFilters(
        filters=[
            MetadataFilter(key="topic", value="family"),
            MetadataFilter(key="year", value=2026),
        ],
        condition=FilterCondition.OR,
    )
    found = index.as_retriever(filters=either, similarity_top_k=5).retrieve(
        "Ava plays the violin; Project Falcon ships; the budget review"
    )
    assert sorted(r.node.ref_doc_id for r in found) == ["d-ava", "d-falcon"]
    store = index.vector_store
    assert sorted(n.ref_doc_id for n in store.get_nodes(filters=either)) == ["d-ava", "d-falcon"]
    neither = MetadataFilters(filters=either.filters, condition=FilterCondition.NOT)
    assert [n.ref_doc_id for n in store.get_nodes(filters=neither)] == ["d-budget"]
    store.delete_nodes(filters=neither)
    remaining = store.get_nodes()
    assert sorted(n.ref_doc_id for n in remaining) == ["d-ava", "d-falcon"]


def test_unsupported_filters_raise_instead_of_being_dropped(index: VectorStoreIndex) -> None:
    text = MetadataFilters(
        filters=[MetadataFilter(key="topic", value="wo", operator=FilterOperator.TEXT_MATCH)]
    )
    with pytest.raises(UnsupportedFilterError, match="text_match"):
        index.as_retriever(filters=text).retrieve("anything")


def test_delete_ref_doc_removes_that_documents_nodes_only(
    index: VectorStoreIndex, mem: TieredMemory
) -> None:
    index.delete_ref_doc("d-falcon")
    assert sorted(m.content for m in mem.list(namespace=NS)) == sorted(
        d.text for d in DOCS if d.doc_id != "d-falcon"
    )
    results = index.as_retriever(similarity_top_k=5).retrieve("Project Falcon ships")
    assert all(r.node.ref_doc_id != "d-falcon" for r in results)
    assert len(results) == 2


def test_identical_chunks_of_different_documents_stay_distinct(
    mem: TieredMemory, mock_embed: MockEmbedding
) -> None:
    # MockEmbedding gives every text the same vector: the engine's dedup would fold all
    # of these into one memory; the store turns it off so each node keeps its own id.
    store = TieredMemoryVectorStore(mem, namespace=NS)
    index = VectorStoreIndex.from_vector_store(store, embed_model=mock_embed)
    for i in range(3):
        index.insert(Document(text="Shared boilerplate paragraph.", doc_id=f"doc-{i}"))
    index.insert(Document(text="Something else entirely.", doc_id="doc-x"))
    assert mem.stats(namespace=NS).total == 4
    index.delete_ref_doc("doc-1")
    left = store.get_nodes()
    assert sorted(n.ref_doc_id or "" for n in left) == ["doc-0", "doc-2", "doc-x"]
    results = index.as_retriever(similarity_top_k=4).retrieve("boilerplate")
    assert {r.node.ref_doc_id for r in results} == {"doc-0", "doc-2", "doc-x"}


def test_query_engine_answers_from_the_tiered_store(index: VectorStoreIndex) -> None:
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=1)
    response = engine.query("When does Project Falcon ship?")
    assert "March 3" in str(response)  # MockLLM echoes its prompt, context included
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["d-falcon"]


def node(text: str, node_id: str, vector: Sequence[float] | None, **metadata: object) -> TextNode:
    return TextNode(text=text, id_=node_id, embedding=vector, metadata=dict(metadata))


def vec(text: str) -> list[float]:
    return [float(x) for x in HashingEmbedder(DIM).embed_sync([text])[0]]


def test_add_replaces_a_node_stored_under_the_same_id(
    store: TieredMemoryVectorStore, mem: TieredMemory
) -> None:
    assert store.add([node("first version", "n1", vec("first version"), v=1)]) == ["n1"]
    store.add([node("second version", "n1", vec("second version"), v=2)])
    memories = mem.list(namespace=NS)
    assert [(m.id, m.content, m.metadata["v"]) for m in memories] == [("n1", "second version", 2)]


@pytest.mark.parametrize(
    "replacement",
    [
        node("second version", "n1", [float("nan")] * DIM),
        node("second version", "n1", [0.1] * (DIM + 1)),
        node("second\x00version", "n1", vec("second version")),
        node("second version", "n1", vec("second version"), big=2**70),
    ],
    ids=["nan-embedding", "other-dimension", "nul-in-text", "integer-out-of-range"],
)
def test_a_refused_replacement_keeps_the_stored_node(
    store: TieredMemoryVectorStore, mem: TieredMemory, replacement: TextNode
) -> None:
    """The new node is checked before the old one is touched: nothing is lost."""
    store.add([node("first version", "n1", vec("first version"), v=1)])
    with pytest.raises(ValidationError):
        store.add([node("another", "n2", vec("another")), replacement])
    assert [(m.id, m.content) for m in mem.list(namespace=NS)] == [("n1", "first version")]
    [kept] = store.get_nodes(["n1"])
    assert kept.get_content() == "first version"


def test_an_index_with_another_embedding_size_is_refused_before_writing(
    mem: TieredMemory,
) -> None:
    """The memory embeds with a 64-d model; an index embedding with an 8-d one must not
    fix the file at 8-d (after which every add, search and recall of every namespace
    failed). Its insert is refused, and the memory keeps working."""
    store = TieredMemoryVectorStore(mem, namespace=NS)
    index = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=8))
    with pytest.raises(DimensionMismatchError, match="8"):
        index.insert(Document(text="an 8-d chunk", doc_id="small"))
    assert mem.stats(namespace=NS).total == 0
    added = mem.add("Ava plays the violin", namespace="other")
    assert mem.search("violin", namespace="other")[0].memory.id == added.id
    assert "violin" in mem.recall("violin", namespace="other").text
    assert mem.run(mem.aio.store.dimension()) == DIM


def test_duplicate_ids_in_one_add_replace_nothing(
    store: TieredMemoryVectorStore, mem: TieredMemory
) -> None:
    store.add([node("kept", "n1", vec("kept"))])
    with pytest.raises(ValidationError, match="twice"):
        store.add([node("a", "n1", vec("a")), node("b", "n1", vec("b"))])
    assert [m.content for m in mem.list(namespace=NS)] == ["kept"]


def test_add_needs_an_embedding_and_refuses_a_user_tier_key(
    store: TieredMemoryVectorStore, mem: TieredMemory
) -> None:
    with pytest.raises(ValidationError, match="no embedding"):
        store.add([node("no vector", "n1", None)])
    with pytest.raises(ValidationError, match="tier_key"):
        store.add([node("has a tier", "n2", vec("has a tier"), tier="gold")])
    assert mem.stats(namespace=NS).total == 0
    other = TieredMemoryVectorStore(mem, namespace=NS, tier_key="memory_tier")
    other.add([node("has a tier", "n2", vec("has a tier"), tier="gold")])
    got = other.get_nodes(["n2"])[0]
    assert (got.metadata["tier"], got.metadata["memory_tier"]) == ("gold", "hot")


def test_nodes_from_a_query_can_be_added_again(
    index: VectorStoreIndex, mem: TieredMemory, hashing_embed: HashingEmbedding
) -> None:
    found = index.vector_store.get_nodes(filters=by_topic("family"))
    assert found[0].metadata["tier"] == "hot"
    copy = TieredMemoryVectorStore(mem, namespace="copy")
    found[0].embedding = hashing_embed.get_text_embedding(found[0].get_content())
    copy.add(found)
    stored = mem.list(namespace="copy")
    assert len(stored) == 1
    assert "tier" not in stored[0].metadata


def test_get_nodes_by_ids_and_filters(index: VectorStoreIndex, mem: TieredMemory) -> None:
    store = index.vector_store
    work = store.get_nodes(filters=by_topic("work"))
    assert sorted(n.ref_doc_id or "" for n in work) == ["d-budget", "d-falcon"]
    ids = [n.node_id for n in work]
    assert [n.node_id for n in store.get_nodes([*ids, "missing"])] == ids
    assert store.get_nodes(ids, filters=by_topic("family")) == []
    with pytest.raises(UnsupportedFilterError):
        store.get_nodes(
            filters=MetadataFilters(
                filters=[MetadataFilter(key="t", value="x", operator=FilterOperator.TEXT_MATCH)]
            )
        )


def test_delete_nodes_by_ids_and_by_filters(index: VectorStoreIndex, mem: TieredMemory) -> None:
    store = index.vector_store
    ava = store.get_nodes(filters=by_topic("family"))[0]
    store.delete_nodes([ava.node_id, "not-there"])
    assert mem.get(ava.node_id, namespace=NS) is None
    store.delete_nodes(filters=by_topic("work"))
    assert mem.stats(namespace=NS).total == 0


def test_delete_nodes_without_ids_or_filters_deletes_nothing(
    index: VectorStoreIndex, mem: TieredMemory
) -> None:
    index.vector_store.delete_nodes()
    assert mem.stats(namespace=NS).total == 3


def test_clear_empties_this_namespace_only(
    store: TieredMemoryVectorStore, mem: TieredMemory
) -> None:
    other = TieredMemoryVectorStore(mem, namespace="other")
    store.add([node(f"note {i}", f"n{i}", vec(f"note {i}")) for i in range(3)])
    other.add([node("kept", "k1", vec("kept"))])
    store.clear()
    assert mem.stats(namespace=NS).total == 0
    assert [m.id for m in mem.list(namespace="other")] == ["k1"]


def test_namespaces_never_cross(mem: TieredMemory, hashing_embed: HashingEmbedding) -> None:
    alice = VectorStoreIndex.from_vector_store(
        TieredMemoryVectorStore(mem, namespace="alice"), embed_model=hashing_embed
    )
    bob = VectorStoreIndex.from_vector_store(
        TieredMemoryVectorStore(mem, namespace="bob"), embed_model=hashing_embed
    )
    alice.insert(Document(text="Alice's locker code is 4512.", doc_id="a"))
    bob.insert(Document(text="Bob's locker code is 9931.", doc_id="b"))
    found = bob.as_retriever(similarity_top_k=10).retrieve("Alice locker code 4512")
    assert texts(r.node for r in found) == ["Bob's locker code is 9931."]
    alice.delete_ref_doc("b")  # another namespace's document is "not found" here
    assert mem.stats(namespace="bob").total == 1


def test_tier_filters_select_tiers(index: VectorStoreIndex, mem: TieredMemory) -> None:
    budget = index.vector_store.get_nodes(filters=by_topic("work"))
    cold = next(n for n in budget if n.ref_doc_id == "d-budget")
    mem.demote(cold.node_id, Tier.COLD, namespace=NS)
    only_cold = index.as_retriever(similarity_top_k=5, filters=by_tier("cold")).retrieve("review")
    assert [(r.node.ref_doc_id, r.node.metadata["tier"]) for r in only_cold] == [
        ("d-budget", "cold")
    ]
    not_cold = index.as_retriever(
        similarity_top_k=5, filters=by_tier("cold", FilterOperator.NE)
    ).retrieve("quarterly budget review in June")
    assert {r.node.ref_doc_id for r in not_cold} == {"d-ava", "d-falcon"}
    cold_nodes = index.vector_store.get_nodes(filters=by_tier(["cold"], FilterOperator.IN))
    assert [n.node_id for n in cold_nodes] == [cold.node_id]


def test_archived_nodes_come_back_as_summaries_and_are_deleted_with_their_document(
    index: VectorStoreIndex, mem: TieredMemory
) -> None:
    falcon = index.vector_store.get_nodes(filters=by_topic("work"))
    target = next(n for n in falcon if n.ref_doc_id == "d-falcon")
    assert mem.archive([target.node_id], namespace=NS) == 1
    found = index.as_retriever(similarity_top_k=5, filters=by_tier("archived")).retrieve(
        "Project Falcon ships"
    )
    assert [r.node.node_id for r in found] == [target.node_id]
    assert found[0].node.metadata["tier"] == "archived"
    assert found[0].node.ref_doc_id == "d-falcon"
    assert "Falcon" in found[0].node.get_content()
    index.delete_ref_doc("d-falcon")
    stats = mem.stats(namespace=NS)
    assert (stats.tiers[Tier.ARCHIVED].count, stats.total) == (0, 2)


def test_budget_returns_what_recall_injects_and_records_its_use(
    mem: TieredMemory, hashing_embed: HashingEmbedding
) -> None:
    store = TieredMemoryVectorStore(mem, namespace=NS, budget_tokens=40)
    index = VectorStoreIndex.from_vector_store(store, embed_model=hashing_embed)
    for i in range(8):
        index.insert(Document(text=f"Falcon launch note {i}: " + "detail " * 10, doc_id=f"f{i}"))
    # what recall injects, looked at first without recording use
    injected = mem.recall(
        "Falcon launch note",
        namespace=NS,
        budget_tokens=40,
        max_items=8,
        record_use=False,
        query_embedding=hashing_embed.get_query_embedding("Falcon launch note"),
    ).items
    found = index.as_retriever(similarity_top_k=8).retrieve("Falcon launch note")
    count = mem.aio.tokens.count
    assert 1 <= len(found) < 8
    assert [r.node.node_id for r in found] == [h.memory.id for h in injected]
    assert count("\n".join("- " + r.node.get_content() for r in found)) <= 40
    used = {m.id: m.use_count for m in mem.list(namespace=NS)}
    # neighbours in time that rode along with a hit (phase 5) are not uses
    on_merit = {h.memory.id for h in injected if h.phase != CONTEXT_PHASE}
    assert on_merit
    assert {i for i, n in used.items() if n == 1} == on_merit
    assert sum(used.values()) == len(on_merit)
    plain = index.as_retriever(
        similarity_top_k=8, vector_store_kwargs={"budget_tokens": None}
    ).retrieve("Falcon launch note")
    assert len(plain) == 8
    assert sum(m.use_count for m in mem.list(namespace=NS)) == len(on_merit)  # search: none


def test_budget_per_query_and_top_k_cap(index: VectorStoreIndex, mem: TieredMemory) -> None:
    found = index.as_retriever(
        similarity_top_k=1, vector_store_kwargs={"budget_tokens": 1000}
    ).retrieve("Project Falcon ships")
    assert [r.node.ref_doc_id for r in found] == ["d-falcon"]
    assert mem.get(found[0].node.node_id, namespace=NS).use_count == 1  # type: ignore[union-attr]


def test_budget_with_a_tier_filter_raises(index: VectorStoreIndex) -> None:
    with pytest.raises(UnsupportedFilterError, match="budget_tokens"):
        index.as_retriever(
            filters=by_tier("hot"), vector_store_kwargs={"budget_tokens": 100}
        ).retrieve("Falcon")


@pytest.mark.parametrize(
    "mode",
    [
        VectorStoreQueryMode.MMR,
        VectorStoreQueryMode.SPARSE,
        VectorStoreQueryMode.SEMANTIC_HYBRID,
        VectorStoreQueryMode.SVM,
    ],
)
def test_unsupported_modes_raise(
    store: TieredMemoryVectorStore, mode: VectorStoreQueryMode
) -> None:
    query = VectorStoreQuery(query_embedding=vec("x"), query_str="x", mode=mode)
    with pytest.raises(UnsupportedQueryError, match=mode.value):
        store.query(query)


def test_text_search_and_hybrid_alpha(index: VectorStoreIndex) -> None:
    store = index.vector_store
    lexical = store.query(
        VectorStoreQuery(
            query_str="quarterly", mode=VectorStoreQueryMode.TEXT_SEARCH, similarity_top_k=1
        )
    )
    assert [n.ref_doc_id for n in lexical.nodes or []] == ["d-budget"]
    with pytest.raises(UnsupportedQueryError, match="query_str"):
        store.query(
            VectorStoreQuery(query_embedding=vec("x"), mode=VectorStoreQueryMode.TEXT_SEARCH)
        )
    # alpha=1: pure vector ranking, so the node whose vector *is* the query wins even
    # though the query text matches another document word for word
    target = store.get_nodes(filters=by_topic("family"))[0]
    hybrid = store.query(
        VectorStoreQuery(
            query_embedding=vec(target.get_content()),
            query_str="quarterly budget review June",
            mode=VectorStoreQueryMode.HYBRID,
            alpha=1.0,
            similarity_top_k=1,
        )
    )
    assert [n.ref_doc_id for n in hybrid.nodes or []] == ["d-ava"]
    with pytest.raises(UnsupportedQueryError, match="alpha"):
        store.query(
            VectorStoreQuery(query_embedding=vec("x"), mode=VectorStoreQueryMode.HYBRID, alpha=2.0)
        )


def test_unknown_kwargs_node_ids_and_empty_queries_raise(store: TieredMemoryVectorStore) -> None:
    with pytest.raises(UnsupportedQueryError, match="budget_token"):
        store.query(VectorStoreQuery(query_embedding=vec("x")), budget_token=10)
    with pytest.raises(UnsupportedQueryError, match="node_ids"):
        store.query(VectorStoreQuery(query_embedding=vec("x"), node_ids=["a"]))
    with pytest.raises(UnsupportedQueryError, match="neither"):
        store.query(VectorStoreQuery())
    with pytest.raises(UnsupportedQueryError, match="extra arguments"):
        store.add([], batch=2)


def test_doc_ids_restrict_the_query(index: VectorStoreIndex) -> None:
    result = index.vector_store.query(
        VectorStoreQuery(
            query_embedding=vec("Falcon"),
            query_str="Falcon",
            doc_ids=["d-ava", "d-budget"],
            similarity_top_k=5,
        )
    )
    assert sorted(n.ref_doc_id or "" for n in result.nodes or []) == ["d-ava", "d-budget"]
    assert result.ids == [n.node_id for n in result.nodes or []]
    assert len(result.similarities or []) == 2


class NoQueryEmbedder:
    """Embeds documents; fails any query embedding, to prove the store passes its own."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(DIM)

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        return self.inner.embed_sync(texts)

    async def aembed_query(self, text: str) -> Vector:
        raise AssertionError("the engine embedded a query the index had already embedded")


def test_the_index_query_embedding_is_used_not_re_embedded(
    tmp_path: Path, clock: ManualClock
) -> None:
    with TieredMemory.embedded(
        tmp_path / "m.db", embedder=NoQueryEmbedder(), clock=clock
    ) as memory:
        store = TieredMemoryVectorStore(memory, namespace=NS)
        store.add([node(t, f"n{i}", vec(t)) for i, t in enumerate(["red apples", "blue sky"])])
        query = np.asarray(vec("blue sky"))
        result = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=1))
        assert [n.get_content() for n in result.nodes or []] == ["blue sky"]
        budgeted = store.query(
            VectorStoreQuery(query_embedding=vec("red apples"), similarity_top_k=1),
            budget_tokens=100,
        )
        assert [n.get_content() for n in budgeted.nodes or []] == ["red apples"]


@pytest.mark.parametrize("budget", [None, 100])
def test_a_query_embedding_is_checked_once_and_of_the_stores_size(
    store: TieredMemoryVectorStore,
    mem: TieredMemory,
    monkeypatch: pytest.MonkeyPatch,
    budget: int | None,
) -> None:
    """The index's query vector goes to the engine as the caller's (`query_embedding`):
    checked there, once, as any caller's is. One of another size is the caller's
    mistake, a DimensionMismatchError; it used to pass as if the memory's embedder had
    made it, blamed on that embedder (ConfigurationError)."""
    from tiered_memory import validation

    store.add([node("blue sky", "n1", vec("blue sky"))])
    calls: list[str] = []
    real = validation.check_vector

    def counted(*args: object, **kwargs: object) -> Vector:
        calls.append(str(kwargs.get("what", "embedding")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(validation, "check_vector", counted)
    result = store.query(VectorStoreQuery(query_embedding=vec("blue sky")), budget_tokens=budget)
    assert [n.get_content() for n in result.nodes or []] == ["blue sky"]
    assert calls == ["query_embedding"]
    with pytest.raises(DimensionMismatchError, match="query_embedding"):
        store.query(VectorStoreQuery(query_embedding=[0.5] * 8), budget_tokens=budget)
    assert mem.run(mem.aio.store.dimension()) == DIM


def test_embedded_factory_owns_and_closes_its_engine(
    tmp_path: Path, hashing_embed: HashingEmbedding
) -> None:
    store = TieredMemoryVectorStore.embedded(
        tmp_path / "own.db", embed_model=hashing_embed, namespace=NS, budget_tokens=50
    )
    try:
        index = VectorStoreIndex.from_vector_store(store, embed_model=hashing_embed)
        index.insert(Document(text="Owned engine note.", doc_id="o"))
        assert isinstance(store.client, TieredMemory)
        assert store.client.stats(namespace=NS).total == 1
        assert store.budget_tokens == 50
        assert TieredMemoryVectorStore.class_name() == "TieredMemoryVectorStore"
    finally:
        store.close()


def test_bad_settings_fail_at_construction(mem: TieredMemory) -> None:
    with pytest.raises(ValueError, match="importance"):
        TieredMemoryVectorStore(mem, importance=1.5)
    with pytest.raises(ValidationError, match="unknown memory type"):
        TieredMemoryVectorStore(mem, memory_type="trivia")
