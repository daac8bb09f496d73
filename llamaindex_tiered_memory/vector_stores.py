"""`TieredMemoryVectorStore`: a LlamaIndex vector store whose nodes are tiered memories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from tiered_memory import (
    AsyncTieredMemory,
    Hit,
    Memory,
    MemoryType,
    Policy,
    TieredMemory,
    validation,
)
from tiered_memory.filters import leaf
from tiered_memory.ports import Clock

from ._errors import UnsupportedFilterError, UnsupportedQueryError
from ._filters import to_core_filters
from ._nodes import memory_to_node, node_to_input
from .embeddings import TieredMemoryEmbedding

_QUERY_KWARGS = frozenset({"budget_tokens", "deep", "include_archived"})
AnyMemory = TieredMemory | AsyncTieredMemory


class TieredMemoryVectorStore(BasePydanticVectorStore):
    """Nodes become memories of one namespace, so documents fade, come back with use
    and are archived like any memory, and queries rank by relevance, freshness and use.

    Queries take the index's query embedding (the store keeps the index's vectors, so
    the engine's own embedder must be the same model: it embeds archive summaries and
    text-only queries). Without a budget a query returns the top `similarity_top_k`
    hits (nothing is recorded as used). With `budget_tokens` (on the store, or per
    query through `vector_store_kwargs`) it returns what `recall` injects within the
    budget split by tier shares, at most `similarity_top_k` nodes, and records their
    use. Filters on `tier_key` ("tier") select tiers; other keys filter metadata.

    Deduplication is off for adds: the engine would merge a near-identical chunk of
    another document into the existing memory and return that memory's id, leaving the
    index pointing at a node id the store does not hold, and deleting one document would
    delete the other's text. Each node is stored under its own id; `add` replaces a node
    already stored under the same id (LlamaIndex's upsert) in one atomic step, restarting
    its use history: a batch that fails validation keeps every stored node. Node
    embeddings must have the memory's dimension (its embedder's), checked before writing.

    Every method runs where the memory's connections live: on a `TieredMemory`'s own
    loop (the async methods await it without blocking the caller's loop), or on the
    caller's loop for an `AsyncTieredMemory`, whose sync methods therefore refuse.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False

    namespace: str = "default"
    budget_tokens: int | None = None
    tier_key: str = "tier"
    memory_type: MemoryType = MemoryType.FACTUAL
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    link: bool = True

    _memory: AnyMemory = PrivateAttr()
    _owns_memory: bool = PrivateAttr(default=False)

    def __init__(
        self,
        memory: TieredMemory | AsyncTieredMemory,
        *,
        namespace: str = "default",
        budget_tokens: int | None = None,
        tier_key: str = "tier",
        memory_type: MemoryType | str = MemoryType.FACTUAL,
        importance: float = 0.5,
        link: bool = True,
    ) -> None:
        """`memory` is used, never closed (pass a `TieredMemory` for the sync methods);
        `memory_type`/`importance` apply to every node added (they set how fast it fades);
        `link=False` skips auto-linking chunks to their nearest neighbours on add."""
        super().__init__(
            stores_text=True,
            namespace=namespace,
            budget_tokens=budget_tokens,
            tier_key=tier_key,
            memory_type=MemoryType.parse(memory_type),
            importance=importance,
            link=link,
        )
        self._memory = memory

    @classmethod
    def embedded(
        cls,
        path: str | PathLike[str],
        *,
        embed_model: BaseEmbedding,
        namespace: str = "default",
        policy: Policy | None = None,
        clock: Clock | None = None,
        **fields: Any,
    ) -> TieredMemoryVectorStore:
        """A store on its own embedded engine (one SQLite file), closed by `close()`.

        `embed_model` is the index's LlamaIndex embedding model: the engine needs the
        same one for archive summaries and text-only queries.
        """
        memory = TieredMemory.embedded(path, embedder=embed_model, policy=policy, clock=clock)
        try:
            store = cls(memory, namespace=namespace, **fields)
        except BaseException:
            memory.close()
            raise
        store._owns_memory = True
        return store

    def close(self) -> None:
        """Close the engine if this store built it (`embedded`); a given one is the caller's."""
        if self._owns_memory and isinstance(self._memory, TieredMemory):
            self._memory.close()

    @classmethod
    def class_name(cls) -> str:
        return "TieredMemoryVectorStore"

    @property
    def client(self) -> AnyMemory:
        return self._memory

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedder the memory really uses, as a LlamaIndex model: pass it on,
        `VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)`, so
        the index embeds nodes and queries as the memory embeds summaries and text."""
        model = self._memory.aio.embedding_model
        if isinstance(model, BaseEmbedding):
            return model
        return TieredMemoryEmbedding(model)

    # -- add ------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return self._memory.run(self._add(nodes, kwargs))

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await self._memory.arun(self._add(nodes, kwargs))

    async def _add(self, nodes: Sequence[BaseNode], kwargs: Mapping[str, Any]) -> list[str]:
        _no_kwargs("add", kwargs)
        items = [
            node_to_input(
                node,
                tier_key=self.tier_key,
                memory_type=self.memory_type,
                importance=self.importance,
                source="llamaindex",
            )
            for node in validation.check_list(nodes, "nodes")
        ]
        # One atomic write: nodes stored under the same ids are replaced, and a batch
        # that fails validation changes nothing (the core checks repeated ids too).
        await self._memory.aio.upsert_many(items, namespace=self.namespace, link=self.link)
        return [node.node_id for node in nodes]

    # -- read -----------------------------------------------------------------------

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        return self._memory.run(self._get_nodes(node_ids, filters))

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        return await self._memory.arun(self._get_nodes(node_ids, filters))

    async def _get_nodes(
        self, node_ids: list[str] | None, filters: MetadataFilters | None
    ) -> list[BaseNode]:
        memories = await self._select(node_ids, filters)
        return [memory_to_node(m, tier_key=self.tier_key) for m in memories]

    async def _select(
        self, node_ids: Sequence[str] | None, filters: MetadataFilters | None
    ) -> list[Memory]:
        """Memories by id and/or filter, live and archived, in the order of `node_ids`
        (else by id). A filter is the core's, applied in the store's own query, so it
        selects exactly what the same filter on a query would."""
        translated = to_core_filters(filters, tier_key=self.tier_key)  # raises first
        engine = self._memory.aio
        ns = self.namespace
        ids = validation.check_ids(node_ids) if node_ids is not None else None
        if ids is not None and filters is None:
            found = [await engine.get(i, namespace=ns) for i in ids]
            return [m for m in found if m is not None]
        matches = engine.iterate(
            namespace=ns,
            tiers=sorted(translated.tiers) if translated.tiers is not None else None,
            metadata=list(translated.metadata),
        )
        if ids is None:
            return [m async for m in matches]
        wanted = set(ids)
        by_id = {m.id: m async for m in matches if m.id in wanted}
        return [by_id[i] for i in ids if i in by_id]

    # -- delete ---------------------------------------------------------------------

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self._memory.run(self._delete(ref_doc_id, delete_kwargs))

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await self._memory.arun(self._delete(ref_doc_id, delete_kwargs))

    async def _delete(self, ref_doc_id: str, kwargs: Mapping[str, Any]) -> None:
        """Hard-delete every node of the document, archived ones included."""
        _no_kwargs("delete", kwargs)
        validation.check_id(ref_doc_id, what="ref_doc_id")
        await self._memory.aio.forget_where(
            {"ref_doc_id": ref_doc_id}, namespace=self.namespace, hard=True
        )

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        self._memory.run(self._delete_nodes(node_ids, filters, delete_kwargs))

    async def adelete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        await self._memory.arun(self._delete_nodes(node_ids, filters, delete_kwargs))

    async def _delete_nodes(
        self,
        node_ids: Sequence[str] | None,
        filters: MetadataFilters | None,
        kwargs: Mapping[str, Any],
    ) -> None:
        _no_kwargs("delete_nodes", kwargs)
        if node_ids is None and filters is None:
            return  # deleting "everything" is clear(), never a default
        doomed = [m.id for m in await self._select(node_ids, filters)]
        await self._memory.aio.forget_many(doomed, namespace=self.namespace, hard=True)

    def clear(self) -> None:
        """Hard-delete every memory of this store's namespace (other namespaces stay)."""
        self._memory.run(self._memory.aio.clear(namespace=self.namespace))

    async def aclear(self) -> None:
        await self._memory.arun(self._memory.aio.clear(namespace=self.namespace))

    # -- query ----------------------------------------------------------------------

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return self._memory.run(self._query(query, kwargs))

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await self._memory.arun(self._query(query, kwargs))

    async def _query(
        self, query: VectorStoreQuery, kwargs: Mapping[str, Any]
    ) -> VectorStoreQueryResult:
        unknown = sorted(set(kwargs) - _QUERY_KWARGS)
        if unknown:
            raise UnsupportedQueryError(
                f"unknown query arguments {unknown}; the tiered store takes {sorted(_QUERY_KWARGS)}"
            )
        _check_query(query)
        if query.node_ids:
            raise UnsupportedQueryError(
                "VectorStoreQuery.node_ids is not supported: the core cannot restrict a "
                "search to given ids; filter on metadata or ref_doc_id (doc_ids) instead"
            )
        text = query.query_str or ""
        weights = _fusion_weights(query, text)
        if query.query_embedding is None and not text.strip():
            raise UnsupportedQueryError("the query has neither a query_embedding nor query_str")
        translated = to_core_filters(query.filters, tier_key=self.tier_key)
        metadata = list(translated.metadata)
        if query.doc_ids:
            metadata.append(leaf("ref_doc_id", "in", list(query.doc_ids)))
        budget = kwargs.get("budget_tokens", self.budget_tokens)
        deep = validation.check_flag(kwargs.get("deep", False), "deep")
        include_archived = validation.check_flag(
            kwargs.get("include_archived", False), "include_archived"
        )
        engine = self._memory.aio
        ns = self.namespace
        hits: list[Hit]
        if budget is None:
            results = await engine.search(
                text,
                namespace=ns,
                k=query.similarity_top_k,
                deep=deep,
                include_archived=include_archived,
                tiers=sorted(translated.tiers) if translated.tiers is not None else None,
                weights=weights,
                metadata=metadata,
                query_embedding=query.query_embedding,
            )
            hits = list(results)
        else:
            if translated.tiers is not None:
                raise UnsupportedFilterError(
                    f"a filter on {self.tier_key!r} cannot be combined with budget_tokens: "
                    "recall packs every tier into its share and takes no tier restriction; "
                    "drop the tier filter or query without a budget"
                )
            injection = await engine.recall(
                text,
                namespace=ns,
                budget_tokens=budget,
                max_items=query.similarity_top_k,
                deep=deep,
                include_archived=include_archived,
                weights=weights,
                metadata=metadata,
                query_embedding=query.query_embedding,
            )
            hits = injection.items
        return VectorStoreQueryResult(
            nodes=[memory_to_node(h.memory, tier_key=self.tier_key) for h in hits],
            similarities=[h.score for h in hits],
            ids=[h.memory.id for h in hits],
        )


def _check_query(query: object) -> None:
    """The fields of a VectorStoreQuery (a plain dataclass: nothing checks them)."""
    if not isinstance(query, VectorStoreQuery):
        raise UnsupportedQueryError(f"query must be a VectorStoreQuery, got {type(query).__name__}")
    if query.query_str is not None and not isinstance(query.query_str, str):
        raise UnsupportedQueryError("query_str must be a string or None")
    # query_embedding is checked once, by the engine's search (finite, flat, its size)
    if query.doc_ids is not None:
        validation.check_ids(query.doc_ids)
    if query.alpha is not None and (
        isinstance(query.alpha, bool) or not isinstance(query.alpha, (int, float))
    ):
        raise UnsupportedQueryError(
            f"alpha must be a number between 0 and 1, got {query.alpha!r:.60}"
        )
    try:
        VectorStoreQueryMode(query.mode)
    except ValueError as e:
        raise UnsupportedQueryError(
            f"query mode {query.mode!r:.60} is not supported; use 'default', 'hybrid' "
            "(alpha = vector weight) or 'text_search'"
        ) from e


def _fusion_weights(query: VectorStoreQuery, text: str) -> dict[str, float] | None:
    """Query modes the core ranks natively: its default hybrid fusion, hybrid with
    `alpha` as the vector weight (LlamaIndex's convention), and keyword-only search."""
    mode = VectorStoreQueryMode(query.mode)
    if mode is VectorStoreQueryMode.DEFAULT:
        return None
    if mode is VectorStoreQueryMode.HYBRID:
        if query.alpha is None:
            return None
        if not 0.0 <= query.alpha <= 1.0:
            raise UnsupportedQueryError(f"alpha must be between 0 and 1, got {query.alpha}")
        return {"vector": query.alpha, "keyword": 1.0 - query.alpha}
    if mode is VectorStoreQueryMode.TEXT_SEARCH:
        if not text.strip():
            raise UnsupportedQueryError("text_search needs a query_str")
        return {"keyword": 1.0}
    raise UnsupportedQueryError(
        f"query mode {mode.value!r} is not supported; use 'default', 'hybrid' "
        "(alpha = vector weight) or 'text_search'"
    )


def _no_kwargs(method: str, kwargs: Mapping[str, Any]) -> None:
    if kwargs:
        raise UnsupportedQueryError(
            f"{method}() takes no extra arguments here, got {sorted(kwargs)}; they would "
            "otherwise be ignored"
        )


__all__ = ["TieredMemoryVectorStore"]
