"""The shared filter table through the LangChain VectorStore and the LangGraph store:
both take the core's Mongo-style language (the VectorStore took equality only)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langchain_tiered_memory import TieredMemoryStore, TieredMemoryVectorStore
from tests.filter_table import DOCS, ROWS, TEXT
from tiered_memory import HashingEmbedder, TieredMemory, UnsupportedFilterError

CASES = pytest.mark.parametrize(
    ("spec", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)


@pytest.fixture(scope="module")
def vectorstore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredMemoryVectorStore]:
    path: Path = tmp_path_factory.mktemp("vs") / "vs.db"
    with TieredMemoryVectorStore.embedded(path, HashingEmbedder(32)) as store:
        store.add_texts(list(TEXT.values()), metadatas=list(DOCS.values()), ids=list(DOCS))
        yield store


@pytest.fixture(scope="module")
def graph_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredMemoryStore]:
    path: Path = tmp_path_factory.mktemp("lg") / "lg.db"
    with TieredMemory.embedded(path, embedder=HashingEmbedder(32)) as mem:
        store = TieredMemoryStore(mem)
        for key, meta in DOCS.items():
            store.put(("docs",), key, {**meta, "text": TEXT[key]})
        yield store


@CASES
def test_vectorstore_filter(
    vectorstore: TieredMemoryVectorStore, spec: dict[str, Any], expected: set[str]
) -> None:
    found = vectorstore.similarity_search("document fruit", k=10, filter=spec)
    assert {d.id for d in found} == expected


@CASES
def test_langgraph_store_filter(
    graph_store: TieredMemoryStore, spec: dict[str, Any], expected: set[str]
) -> None:
    listed = graph_store.search(("docs",), filter=spec, limit=10)
    assert {item.key for item in listed} == expected
    ranked = graph_store.search(("docs",), query="document fruit", filter=spec, limit=10)
    assert {item.key for item in ranked} == expected


def test_unsupported_operators_raise_in_both(
    vectorstore: TieredMemoryVectorStore, graph_store: TieredMemoryStore
) -> None:
    with pytest.raises(UnsupportedFilterError, match=r"'\$regex' on 'color'"):
        vectorstore.similarity_search("x", filter={"color": {"$regex": "r.*"}})
    with pytest.raises(UnsupportedFilterError, match=r"'\$regex' on 'color'"):
        graph_store.search(("docs",), filter={"color": {"$regex": "r.*"}})


def test_langgraph_search_returns_the_top_limit(graph_store: TieredMemoryStore) -> None:
    """Like InMemoryStore: `limit` items when that many exist, however weak the match."""
    assert len(graph_store.search(("docs",), query="document fruit", limit=5)) == 5
    assert len(graph_store.search(("docs",), query="zzz unrelated qqq", limit=3)) == 3
