"""Helpers shared by the LlamaIndex face tests."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding

from tiered_memory import HashingEmbedder

DIM = 64


class HashingEmbedding(BaseEmbedding):
    """The core's deterministic HashingEmbedder as a LlamaIndex embedding model, so
    rankings in tests mean something (MockEmbedding gives every text the same vector)."""

    dimension: int = DIM

    @classmethod
    def class_name(cls) -> str:
        return "HashingEmbedding"

    def _vector(self, text: str) -> list[float]:
        return [float(x) for x in HashingEmbedder(self.dimension).embed_sync([text])[0]]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


def texts(nodes: Any) -> list[str]:
    """Node texts of a list of nodes or NodeWithScores, for readable assertions."""
    return [n.get_content() for n in nodes]
