"""Flat vector baselines for the scale benchmark, fed the same precomputed vectors.

Each has `add(ids, texts, vectors)` and `search(vector, k) -> ids`. The framework
stores are used as their users use them: vectors go in as the list[float] an
`Embeddings` / `BaseEmbedding` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class FlatIndex(Protocol):
    name: str

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: Matrix) -> None: ...

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[str]: ...


class BruteForce:
    """Raw numpy: one preallocated unit-row matrix, a product and an argpartition."""

    name = "numpy brute force"

    def __init__(self, dim: int, capacity: int) -> None:
        self._matrix = np.empty((capacity, dim), dtype=np.float32)
        self._ids: list[str] = []

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: Matrix) -> None:
        n = len(self._ids)
        rows = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        self._matrix[n : n + len(ids)] = rows
        self._ids.extend(ids)

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[str]:
        n = len(self._ids)
        q = vector / np.linalg.norm(vector)
        scores = self._matrix[:n] @ q
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [self._ids[i] for i in top.tolist()]


class _Precomputed:
    """An Embeddings / BaseEmbedding stand-in that hands out precomputed vectors."""

    def __init__(self) -> None:
        self.pending: list[list[float]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out, self.pending = self.pending[: len(texts)], self.pending[len(texts) :]
        return out

    def embed_query(self, text: str) -> list[float]:
        raise NotImplementedError("queries are searched by vector")


class LangChainFlat:
    """langchain_core's InMemoryVectorStore."""

    name = "LangChain InMemoryVectorStore"

    def __init__(self) -> None:
        from langchain_core.embeddings import Embeddings
        from langchain_core.vectorstores import InMemoryVectorStore

        class Given(_Precomputed, Embeddings):
            pass

        self._embeddings = Given()
        self._store = InMemoryVectorStore(self._embeddings)

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: Matrix) -> None:
        from langchain_core.documents import Document

        self._embeddings.pending = vectors.tolist()
        self._store.add_documents([Document(page_content=t) for t in texts], ids=list(ids))

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[str]:
        docs = self._store.similarity_search_by_vector(vector.tolist(), k=k)
        return [str(d.id) for d in docs]


class LlamaIndexFlat:
    """llama_index.core's SimpleVectorStore (nodes carry their embeddings)."""

    name = "LlamaIndex SimpleVectorStore"

    def __init__(self) -> None:
        from llama_index.core.vector_stores import SimpleVectorStore

        self._store = SimpleVectorStore()

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: Matrix) -> None:
        from llama_index.core.schema import TextNode

        rows = vectors.tolist()
        nodes: list[Any] = [
            TextNode(id_=i, text=t, embedding=v) for i, t, v in zip(ids, texts, rows, strict=True)
        ]
        self._store.add(nodes)

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[str]:
        from llama_index.core.vector_stores.types import VectorStoreQuery

        result = self._store.query(
            VectorStoreQuery(query_embedding=vector.tolist(), similarity_top_k=k)
        )
        return list(result.ids or [])
