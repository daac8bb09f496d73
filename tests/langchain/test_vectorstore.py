"""TieredMemoryVectorStore: LangChain's standard vector store suite, and what is ours."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from langchain_tiered_memory import TieredMemoryVectorStore
from langchain_tiered_memory.vectorstores import vectorstore_policy
from tiered_memory import (
    ConfigurationError,
    HashingEmbedder,
    ManualClock,
    Policy,
    Tier,
    TieredMemory,
    TieredMemoryError,
    ValidationError,
)

from .fakes import FailingEmbeddings


class TestTieredMemoryVectorStoreStandard(VectorStoreIntegrationTests):
    """The unmodified suite, in-process on the embedded store (as Chroma runs it)."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:  # type: ignore[override]
        store = TieredMemoryVectorStore.embedded(tmp_path / "vs.db", self.get_embeddings())
        try:
            yield store
        finally:
            store.close()


@pytest.fixture
def docs_store(tmp_path: Path, clock: ManualClock) -> Iterator[TieredMemoryVectorStore]:
    store = TieredMemoryVectorStore.embedded(
        tmp_path / "docs.db", DeterministicFakeEmbedding(size=16), clock=clock
    )
    try:
        yield store
    finally:
        store.close()


def test_policy_turns_off_only_what_breaks_the_vector_store_contract() -> None:
    base = Policy()
    policy = vectorstore_policy(base)
    assert policy.limits.dedup_similarity is None
    assert policy.retrieval.noise_floor < -1.0
    assert policy.budget == base.budget
    assert policy.tiers == base.tiers
    assert policy.scoring == base.scoring


def test_identical_texts_with_different_ids_are_two_documents(
    docs_store: TieredMemoryVectorStore,
) -> None:
    ids = docs_store.add_texts(["same text", "same text"], ids=["a", "b"])
    assert ids == ["a", "b"]
    assert {d.id for d in docs_store.get_by_ids(["a", "b"])} == {"a", "b"}


def test_scores_are_the_final_memory_score(docs_store: TieredMemoryVectorStore) -> None:
    docs_store.add_texts(["alpha", "beta", "gamma"], ids=["1", "2", "3"])
    results = docs_store.similarity_search_with_score("beta", k=3)
    assert results[0][0].id == "2"
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_relevance_scores_are_the_cosine_in_0_1_and_do_not_drift(
    docs_store: TieredMemoryVectorStore, clock: ManualClock
) -> None:
    """An exact match scores 1 (it scored the decayed fused score, about 0.905, and
    kept falling as the document aged), unrelated text about 0.5, and a week later
    the numbers are the same, so a score_threshold keeps meaning the same."""
    docs_store.add_texts(["alpha", "beta", "gamma"], ids=["1", "2", "3"])
    clock.advance(timedelta(hours=1))
    before = docs_store.similarity_search_with_relevance_scores("beta", k=3)
    assert before[0][0].id == "2"
    assert before[0][1] == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 <= s <= 1.0 for _, s in before)
    assert all(s < 0.9 for _, s in before[1:])  # random fake vectors: near 0.5
    clock.advance(timedelta(days=7))
    after = docs_store.similarity_search_with_relevance_scores("beta", k=3)
    assert {d.id: s for d, s in after} == pytest.approx({d.id: s for d, s in before})
    kept = docs_store.similarity_search_with_relevance_scores("beta", k=3, score_threshold=0.99)
    assert [d.id for d, _ in kept] == ["2"]


async def test_async_relevance_scores(docs_store: TieredMemoryVectorStore) -> None:
    await docs_store.aadd_texts(["alpha", "beta"], ids=["1", "2"])
    [(doc, score), _] = await docs_store.asimilarity_search_with_relevance_scores("alpha", k=2)
    assert doc.id == "1"
    assert score == pytest.approx(1.0, abs=1e-5)


def _mmr_store(tmp_path: Path) -> TieredMemoryVectorStore:
    store = TieredMemoryVectorStore.embedded(tmp_path / "mmr.db", HashingEmbedder(64))
    store.add_texts(
        [
            "green tea from Japan",
            "green tea from Japan, sencha",
            "green tea from Japan, matcha",
            "black coffee from Kenya",
        ],
        ids=["t1", "t2", "t3", "c"],
        metadatas=[{"kind": "tea"}, {"kind": "tea"}, {"kind": "tea"}, {"kind": "coffee"}],
    )
    return store


def test_mmr_trades_relevance_for_diversity(tmp_path: Path) -> None:
    with _mmr_store(tmp_path) as store:
        similar = store.similarity_search("green tea from Japan", k=2)
        assert next(d.id for d in similar) == "t1"
        assert similar[1].id in {"t2", "t3"}
        diverse = store.max_marginal_relevance_search(
            "green tea from Japan", k=2, fetch_k=4, lambda_mult=0.1
        )
        assert [d.id for d in diverse] == ["t1", "c"]
        relevant = store.max_marginal_relevance_search(
            "green tea from Japan", k=2, fetch_k=4, lambda_mult=1.0
        )
        assert [d.id for d in relevant] == [d.id for d in similar]
        retriever = store.as_retriever(
            search_type="mmr", search_kwargs={"k": 2, "fetch_k": 4, "lambda_mult": 0.1}
        )
        assert [d.id for d in retriever.invoke("green tea from Japan")] == ["t1", "c"]
        filtered = store.max_marginal_relevance_search(
            "green tea from Japan", k=2, fetch_k=4, lambda_mult=0.1, filter={"kind": "tea"}
        )
        assert {d.id for d in filtered} <= {"t1", "t2", "t3"}
        assert len(filtered) == 2
        with pytest.raises(ValidationError, match="lambda_mult"):
            store.max_marginal_relevance_search("tea", lambda_mult=2)


async def test_mmr_async_and_by_vector(tmp_path: Path) -> None:
    with _mmr_store(tmp_path) as store:
        vector = HashingEmbedder(64).embed_query("green tea from Japan")
        by_vector = store.max_marginal_relevance_search_by_vector(
            vector, k=2, fetch_k=4, lambda_mult=0.1
        )
        assert [d.id for d in by_vector] == ["t1", "c"]
        found = await store.amax_marginal_relevance_search(
            "green tea from Japan", k=2, fetch_k=4, lambda_mult=0.1
        )
        assert [d.id for d in found] == ["t1", "c"]
        found = await store.amax_marginal_relevance_search_by_vector(
            vector, k=2, fetch_k=4, lambda_mult=0.1
        )
        assert [d.id for d in found] == ["t1", "c"]
        retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 1})
        assert [d.id for d in await retriever.ainvoke("black coffee")] == ["c"]


def test_filter_and_search_by_vector(docs_store: TieredMemoryVectorStore) -> None:
    docs_store.add_texts(
        ["apples", "pears", "plums"],
        metadatas=[{"kind": "fruit", "n": 1}, {"kind": "fruit", "n": 2}, {"kind": "stone"}],
        ids=["a", "p", "s"],
    )
    fruit = docs_store.similarity_search("plums", k=3, filter={"kind": "fruit"})
    assert {d.id for d in fruit} == {"a", "p"}
    vector = DeterministicFakeEmbedding(size=16).embed_query("pears")
    [best] = docs_store.similarity_search_by_vector(vector, k=1)
    assert best == Document(id="p", page_content="pears", metadata={"kind": "fruit", "n": 2})
    with pytest.raises(ValidationError, match="unexpected search argument"):
        docs_store.similarity_search("pears", k=1, where={"kind": "fruit"})


async def test_async_twins(docs_store: TieredMemoryVectorStore) -> None:
    ids = await docs_store.aadd_texts(["one", "two"], metadatas=[{"i": 1}, {"i": 2}])
    assert len(ids) == 2
    [(doc, score)] = await docs_store.asimilarity_search_with_score("two", k=1)
    assert doc.page_content == "two"
    assert doc.metadata == {"i": 2}
    assert 0 < score <= 1
    vector = await DeterministicFakeEmbedding(size=16).aembed_query("one")
    [first] = await docs_store.asimilarity_search_by_vector(vector, k=1)
    assert first.page_content == "one"
    await docs_store.adelete([ids[0]])
    assert [d.page_content for d in await docs_store.aget_by_ids(ids)] == ["two"]


def test_delete_everything(docs_store: TieredMemoryVectorStore) -> None:
    docs_store.add_texts([f"text {i}" for i in range(7)])
    docs_store.delete()
    assert docs_store.similarity_search("text", k=10) == []


def test_documents_age_through_the_tiers(
    docs_store: TieredMemoryVectorStore, clock: ManualClock
) -> None:
    docs_store.add_texts(["kept", "faded"], ids=["k", "f"])
    docs_store.memory.demote("f", Tier.COLD, namespace=docs_store.namespace)
    results = docs_store.similarity_search_with_score("faded", k=2)
    assert {d.id for d, _ in results} == {"k", "f"}
    cold = dict((d.id, s) for d, s in results)["f"]
    memory = docs_store.memory.get("f", namespace=docs_store.namespace)
    assert memory is not None
    assert memory.tier is Tier.COLD
    hot = dict((d.id, s) for d, s in results)["k"]
    assert cold <= docs_store.memory.policy.scoring.tier_factor[Tier.COLD]
    assert cold != hot  # each scored on its own terms, whatever tier it is in


def test_from_texts_and_as_retriever(tmp_path: Path) -> None:
    store = TieredMemoryVectorStore.from_texts(
        ["red apples", "green pears"],
        DeterministicFakeEmbedding(size=8),
        metadatas=[{"c": "red"}, {"c": "green"}],
        ids=["r", "g"],
        path=tmp_path / "from.db",
        namespace="fruit",
    )
    try:
        assert store.namespace == "fruit"
        assert isinstance(store.embeddings, DeterministicFakeEmbedding)
        docs = store.as_retriever(search_kwargs={"k": 1}).invoke("green pears")
        assert docs == [Document(id="g", page_content="green pears", metadata={"c": "green"})]
    finally:
        store.close()


async def test_afrom_texts(tmp_path: Path) -> None:
    store = await TieredMemoryVectorStore.afrom_texts(
        ["x marks the spot"], DeterministicFakeEmbedding(size=8), path=tmp_path / "a.db"
    )
    try:
        [doc] = await store.asimilarity_search("x marks the spot", k=1)
        assert doc.page_content == "x marks the spot"
    finally:
        store.close()


def test_without_a_path_the_file_lives_in_a_temporary_folder() -> None:
    store = TieredMemoryVectorStore.from_texts(
        ["x marks the spot"], DeterministicFakeEmbedding(size=8)
    )
    try:
        assert (
            store.similarity_search("x marks the spot", k=1)[0].page_content == "x marks the spot"
        )
        assert store._tempdir is not None
        folder = store._tempdir.name
        assert os.path.isdir(folder)
    finally:
        store.close()
    assert not os.path.isdir(folder)


def test_wrapping_an_existing_memory(mem: TieredMemory) -> None:
    store = TieredMemoryVectorStore(mem, namespace="kb")
    store.add_texts(["The office is in Leeds"], ids=["office"])
    assert mem.get("office", namespace="kb") is not None
    # the embedder the memory really uses, which is a LangChain Embeddings
    assert store.embeddings is mem.aio.embedding_model
    assert isinstance(store.embeddings, Embeddings)
    store.close()  # not ours: the memory stays open
    assert mem.get("office", namespace="kb") is not None
    assert isinstance(mem.aio.embedder.inner, HashingEmbedder)  # behind the engine's guard


def test_a_wrapped_memory_with_the_vectorstore_policy_returns_k(tmp_path: Path) -> None:
    """The default policy's noise floor drops far documents (documented); with
    `vectorstore_policy()` a wrapped memory returns k when k exist, as from_texts does."""
    texts = ["red apples", "the quarterly budget review", "Ava plays the violin", "tax"]
    with TieredMemory.embedded(
        tmp_path / "w.db", embedder=HashingEmbedder(64), policy=vectorstore_policy()
    ) as mem:
        store = TieredMemoryVectorStore(mem, namespace="kb")
        store.add_texts(texts)
        assert len(store.similarity_search("red apples", k=4)) == 4
    built = TieredMemoryVectorStore.from_texts(texts, HashingEmbedder(64))
    with built:
        assert len(built.similarity_search("red apples", k=4)) == 4


def test_an_embedder_other_than_the_memorys_is_refused(mem: TieredMemory) -> None:
    with pytest.raises(ConfigurationError, match="embeds with HashingEmbedder"):
        TieredMemoryVectorStore(mem, embedding=DeterministicFakeEmbedding(size=8))
    with pytest.raises(ConfigurationError, match="embeds with HashingEmbedder"):
        TieredMemoryVectorStore.from_texts(["x"], DeterministicFakeEmbedding(size=8), memory=mem)


def test_a_core_embedder_without_sync_methods_is_reported_wrapped(tmp_path: Path) -> None:
    class AsyncOnly:
        async def aembed_documents(self, texts: list[str]) -> Any:
            return HashingEmbedder(16).embed_sync(texts)

        async def aembed_query(self, text: str) -> Any:
            return HashingEmbedder(16).embed_sync([text])[0]

    with TieredMemory.embedded(tmp_path / "a.db", embedder=AsyncOnly()) as mem:
        embeddings = TieredMemoryVectorStore(mem).embeddings
        assert isinstance(embeddings, Embeddings)
        assert embeddings.embed_query("tea") == HashingEmbedder(16).embed_query("tea")


def test_a_refused_replacement_keeps_the_stored_document(
    docs_store: TieredMemoryVectorStore,
) -> None:
    docs_store.add_texts(["original"], metadatas=[{"v": 1}], ids=["d"])
    with pytest.raises(ValidationError, match="NaN"):
        docs_store.add_texts(["replacement"], metadatas=[{"v": float("nan")}], ids=["d"])
    with pytest.raises(ValidationError, match="twice"):
        docs_store.add_texts(["a", "b"], ids=["d", "d"])
    with pytest.raises(ValidationError, match="empty"):
        docs_store.add_texts(["  "], ids=["d"])
    assert docs_store.get_by_ids(["d"]) == [
        Document(id="d", page_content="original", metadata={"v": 1})
    ]


def test_a_replacement_whose_embedding_fails_keeps_the_stored_document(
    tmp_path: Path, clock: ManualClock
) -> None:
    with TieredMemoryVectorStore.embedded(
        tmp_path / "flaky.db", FailingEmbeddings(size=16), clock=clock
    ) as store:
        store.add_texts(["original"], metadatas=[{"v": 1}], ids=["d"])
        with pytest.raises((ConnectionError, TieredMemoryError)):
            store.add_texts(["boom"], metadatas=[{"v": 2}], ids=["d"])
        with pytest.raises((ConnectionError, TieredMemoryError)):
            store.add_texts(["fine", "boom"], ids=["e", "d"])  # nothing of the batch lands
        assert store.get_by_ids(["d", "e"]) == [
            Document(id="d", page_content="original", metadata={"v": 1})
        ]
        assert store.similarity_search("original", k=1)[0].id == "d"
