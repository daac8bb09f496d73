"""`TieredMemoryEmbedding`: any tiered-memory embedder as a LlamaIndex `BaseEmbedding`.

LlamaIndex takes an embedding model only if it is a `BaseEmbedding` (a pydantic model
it can configure and serialise); the core's embedders cannot subclass it without
making LlamaIndex a core dependency. This adapter closes the gap:
`VectorStoreIndex.from_vector_store(store, embed_model=TieredMemoryEmbedding(emb))`,
or `store.embed_model`, which wraps the embedder the store's memory really uses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

from tiered_memory import ConfigurationError
from tiered_memory.embeddings import as_embedder
from tiered_memory.ports import Embedder

T = TypeVar("T")


class TieredMemoryEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model over a tiered-memory embedder.

    Takes what `TieredMemory` takes as `embedder=`: `HashingEmbedder`,
    `SentenceTransformerEmbedder`, a LangChain `Embeddings`, an object with async
    `aembed_documents`/`aembed_query` or sync `embed_documents`/`embed_query`.
    Sync calls use the embedder's sync methods when it has them (else its coroutines,
    on a private loop in a worker thread); async calls await its async methods.
    """

    _embedder: Any = PrivateAttr()
    _async: Embedder = PrivateAttr()

    def __init__(self, embedder: Any, **kwargs: Any) -> None:
        if isinstance(embedder, BaseEmbedding):
            raise ConfigurationError(
                f"{type(embedder).__name__} is a LlamaIndex BaseEmbedding already; pass it "
                "as embed_model directly"
            )
        adapted = as_embedder(embedder)  # a non-embedder fails here, with the fix
        kwargs.setdefault("model_name", type(embedder).__name__)
        super().__init__(**kwargs)
        self._embedder = embedder
        self._async = adapted

    @classmethod
    def class_name(cls) -> str:
        return "TieredMemoryEmbedding"

    @property
    def embedder(self) -> Any:
        """The tiered-memory embedder this model wraps."""
        return self._embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        if callable(getattr(self._embedder, "embed_query", None)):
            return _floats(self._embedder.embed_query(query))
        return _floats(_run(self._async.aembed_query(query)))

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if callable(getattr(self._embedder, "embed_documents", None)):
            return [_floats(row) for row in self._embedder.embed_documents(list(texts))]
        return [_floats(row) for row in _run(self._async.aembed_documents(texts))]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return _floats(await self._async.aembed_query(query))

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [_floats(row) for row in await self._async.aembed_documents(texts)]


def _floats(row: Any) -> list[float]:
    return [float(x) for x in row]


def _run(call: Coroutine[Any, Any, T]) -> T:
    """A coroutine to completion from sync code, even when the caller's thread is
    running a loop (LlamaIndex calls sync embedding methods from anywhere)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, call).result()


__all__ = ["TieredMemoryEmbedding"]
