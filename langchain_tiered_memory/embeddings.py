"""The package's embedders as LangChain `Embeddings`.

`HashingEmbedder` and `SentenceTransformerEmbedder` implement LangChain's interface
(sync `embed_documents`/`embed_query` returning lists, async `aembed_*` twins), so
they are registered here as virtual subclasses of `Embeddings`: code that checks
`isinstance(x, Embeddings)` (LangGraph's `InMemoryStore(index={"embed": ...})`,
pydantic fields) takes them. Their async twins return float32 numpy rows, which
every sequence-of-rows reader accepts. Any other tiered-memory embedder (one with
async methods only, say) is wrapped by `TieredMemoryEmbeddings`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings

from tiered_memory import HashingEmbedder, SentenceTransformerEmbedder
from tiered_memory.embeddings import as_embedder

T = TypeVar("T")

Embeddings.register(HashingEmbedder)
Embeddings.register(SentenceTransformerEmbedder)


class TieredMemoryEmbeddings(Embeddings):
    """A LangChain `Embeddings` over any tiered-memory embedder: whatever
    `TieredMemory` takes as `embedder=` (a LlamaIndex `BaseEmbedding` too)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._async = as_embedder(embedder)  # a non-embedder fails here, with the fix

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if _sync(self.embedder):
            return [_floats(row) for row in self.embedder.embed_documents(list(texts))]
        return [_floats(row) for row in _run(self._async.aembed_documents(texts))]

    def embed_query(self, text: str) -> list[float]:
        if _sync(self.embedder):
            return _floats(self.embedder.embed_query(text))
        return _floats(_run(self._async.aembed_query(text)))

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_floats(row) for row in await self._async.aembed_documents(texts)]

    async def aembed_query(self, text: str) -> list[float]:
        return _floats(await self._async.aembed_query(text))


def as_langchain_embeddings(model: Any) -> Embeddings:
    """`model` itself if it is an `Embeddings` (or registered as one), else wrapped."""
    return model if isinstance(model, Embeddings) else TieredMemoryEmbeddings(model)


def _sync(embedder: Any) -> bool:
    return callable(getattr(embedder, "embed_documents", None)) and callable(
        getattr(embedder, "embed_query", None)
    )


def _floats(row: Any) -> list[float]:
    return [float(x) for x in row]


def _run(call: Coroutine[Any, Any, T]) -> T:
    """A coroutine to completion from sync code, even inside a running loop."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, call).result()


__all__ = ["TieredMemoryEmbeddings", "as_langchain_embeddings"]
