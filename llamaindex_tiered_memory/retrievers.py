"""`TieredMemoryRetriever`: tiered memories as scored nodes, for query engines, agents
and chat engines that do not own a vector store."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from tiered_memory import AsyncTieredMemory, Hit, MemoryType, Tier, TieredMemory

from ._errors import UnsupportedFilterError
from ._filters import to_core_filters
from ._nodes import memory_to_node


class TieredMemoryRetriever(BaseRetriever):
    """Searches one namespace with the engine's own embedder and ranking.

    Each node carries its tier in metadata (`tier_key`, kept out of the LLM text) and
    its final score. With `budget_tokens` the nodes are exactly what `recall` injects
    within the budget, split by tier shares, and their use is recorded (so what the
    application really uses stays in the active tiers); without it, the top
    `similarity_top_k` hits (LlamaIndex's name, as in `as_retriever(similarity_top_k=)`)
    and nothing is recorded. The query text is embedded by the engine, never with a
    `QueryBundle.embedding` from another model.
    """

    def __init__(
        self,
        memory: TieredMemory | AsyncTieredMemory,
        *,
        namespace: str = "default",
        similarity_top_k: int = 10,
        budget_tokens: int | None = None,
        deep: bool = False,
        include_archived: bool = False,
        memory_types: Sequence[MemoryType | str] | None = None,
        filters: MetadataFilters | None = None,
        tier_key: str = "tier",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        k: int | None = None,
    ) -> None:
        """`filters` are LlamaIndex metadata filters; one on `tier_key` restricts the
        tiers searched (not combinable with a budget, which spans every tier). `k` is
        the old name of `similarity_top_k`, kept for one release."""
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        if k is not None:
            warnings.warn(
                "TieredMemoryRetriever(k=) is now similarity_top_k=, as in LlamaIndex",
                DeprecationWarning,
                stacklevel=2,
            )
            similarity_top_k = k
        self.memory = memory
        self.namespace = namespace
        self.similarity_top_k = similarity_top_k
        self.budget_tokens = budget_tokens
        self.deep = deep
        self.include_archived = include_archived
        self.memory_types = list(memory_types) if memory_types else None
        self.tier_key = tier_key
        self._filters = to_core_filters(filters, tier_key=tier_key)  # fail at construction
        if budget_tokens is not None and self._filters.tiers is not None:
            raise UnsupportedFilterError(
                f"a filter on {tier_key!r} cannot be combined with budget_tokens: recall "
                "packs every tier into its share; drop one of them"
            )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.memory.run(self._hits(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await self.memory.arun(self._hits(query_bundle.query_str))

    async def _hits(self, query: str) -> list[NodeWithScore]:
        engine = self.memory.aio
        common: dict[str, Any] = {
            "namespace": self.namespace,
            "deep": self.deep,
            "include_archived": self.include_archived,
            "memory_types": self.memory_types,
            "metadata": list(self._filters.metadata),
        }
        hits: list[Hit]
        if self.budget_tokens is None:
            tiers: list[Tier] | None = (
                sorted(self._filters.tiers) if self._filters.tiers is not None else None
            )
            hits = list(await engine.search(query, k=self.similarity_top_k, tiers=tiers, **common))
        else:
            injection = await engine.recall(
                query,
                budget_tokens=self.budget_tokens,
                max_items=self.similarity_top_k,
                **common,
            )
            hits = injection.items
        return [
            NodeWithScore(node=memory_to_node(h.memory, tier_key=self.tier_key), score=h.score)
            for h in hits
        ]


__all__ = ["TieredMemoryRetriever"]
