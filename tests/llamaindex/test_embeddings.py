"""The package's embedders as LlamaIndex embedding models (`TieredMemoryEmbedding`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding

from llamaindex_tiered_memory import TieredMemoryEmbedding, TieredMemoryVectorStore
from tiered_memory import ConfigurationError, HashingEmbedder, TieredMemory

from .helpers import DIM, HashingEmbedding, texts

DOCS = [
    Document(text="Ava plays the violin on Tuesdays.", doc_id="d-ava"),
    Document(text="The quarterly budget review is in June.", doc_id="d-budget"),
]


class AsyncOnly:
    """The core's own protocol and nothing else: async methods only."""

    async def aembed_documents(self, texts: list[str]) -> Any:
        return HashingEmbedder(DIM).embed_sync(texts)

    async def aembed_query(self, text: str) -> Any:
        return HashingEmbedder(DIM).embed_sync([text])[0]


def test_the_memorys_embedder_drives_an_index_through_the_store(tmp_path: Path) -> None:
    """`from_vector_store(vs, embed_model=HashingEmbedder())` hits LlamaIndex's bare
    `assert isinstance(embed_model, BaseEmbedding)`; the store offers the embedder its
    memory really uses as a BaseEmbedding instead."""
    with TieredMemory.embedded(tmp_path / "m.db", embedder=HashingEmbedder(DIM)) as mem:
        store = TieredMemoryVectorStore(mem, namespace="docs")
        model = store.embed_model
        assert isinstance(model, TieredMemoryEmbedding)
        assert isinstance(model.embedder, HashingEmbedder)
        index = VectorStoreIndex.from_vector_store(store, embed_model=model)
        for doc in DOCS:
            index.insert(doc)
        found = index.as_retriever(similarity_top_k=1).retrieve("who plays the violin?")
        assert texts(found) == ["Ava plays the violin on Tuesdays."]


def test_a_llamaindex_model_given_to_the_memory_is_returned_as_is(tmp_path: Path) -> None:
    embed = HashingEmbedding()
    with TieredMemory.embedded(tmp_path / "m.db", embedder=embed) as mem:
        assert TieredMemoryVectorStore(mem).embed_model is embed


@pytest.mark.parametrize("make", [lambda: HashingEmbedder(DIM), AsyncOnly])
async def test_the_adapter_gives_the_core_vectors_sync_and_async(make: Any) -> None:
    model = TieredMemoryEmbedding(make())
    assert isinstance(model, BaseEmbedding)
    expected = HashingEmbedder(DIM).embed_sync(["green tea", "black coffee"])
    assert np.allclose(model.get_text_embedding_batch(["green tea", "black coffee"]), expected)
    assert np.allclose(model.get_query_embedding("green tea"), expected[0])
    assert np.allclose(await model.aget_query_embedding("green tea"), expected[0])
    batch = await model.aget_text_embedding_batch(["green tea", "black coffee"])
    assert np.allclose(batch, expected)


def test_the_adapter_refuses_what_is_no_embedder_or_already_a_model() -> None:
    with pytest.raises(ConfigurationError, match="not an embedder"):
        TieredMemoryEmbedding(object())
    with pytest.raises(ConfigurationError, match="pass it as embed_model directly"):
        TieredMemoryEmbedding(HashingEmbedding())
