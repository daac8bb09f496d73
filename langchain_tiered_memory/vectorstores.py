"""`TieredMemoryVectorStore`: tiered memory behind LangChain's `VectorStore` interface."""

from __future__ import annotations

import math
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from typing_extensions import Self

from tiered_memory import (
    ConfigurationError,
    Hit,
    Memory,
    MemoryInput,
    Policy,
    TieredMemory,
    ValidationError,
    validation,
)
from tiered_memory.filters import Condition, FilterSpec, parse_filter
from tiered_memory.ports import Clock

from ._common import DEFAULT_NAMESPACE
from .embeddings import as_langchain_embeddings

_SEARCH_OPTIONS = frozenset({"filter", "deep", "include_archived"})


def vectorstore_policy(base: Policy | None = None) -> Policy:
    """The engine policy for a memory built to serve as a vector store.

    A VectorStore's contract is "top k, one record per id": near-duplicate
    deduplication (two ids, same text, one record) and the noise floor (a far
    document is dropped even when fewer than k exist) both break it, so they are off.
    Every other rule, tiers and scores included, stays the memory's.
    """
    policy = base or Policy()
    return policy.model_copy(
        update={
            "limits": policy.limits.model_copy(update={"dedup_similarity": None}),
            "retrieval": policy.retrieval.model_copy(update={"noise_floor": -math.inf}),
        }
    )


class TieredMemoryVectorStore(VectorStore):
    """A LangChain `VectorStore` whose documents are memories of one namespace.

    Documents are added HOT and then age through the tiers like any memory, and a
    similarity search ranks by the memory's final score (relevance, retention,
    frequency, tier factor), which is also what `similarity_search_with_score` returns
    (in [0, 1], higher is better; it moves as documents age).
    `similarity_search_with_relevance_scores` returns the same documents in the same
    order with LangChain's relevance instead: the raw cosine to the query mapped to
    [0, 1] as (1 + cosine) / 2, so an exact match scores 1, unrelated text about 0.5,
    and a `score_threshold` means the same tomorrow as today.
    `max_marginal_relevance_search` and `as_retriever(search_type="mmr")` re-rank the
    `fetch_k` best with LangChain's own MMR over the documents' embeddings (re-embedded
    by the memory's embedder: the engine does not hand out stored vectors).

    Filters (`filter=`) are the core's Mongo-style language, evaluated in the store's
    own query: `{"color": "red"}`, `{"year": {"$gte": 2025}}`, `{"color": {"$in":
    [...]}}`, `{"$or": [...]}`, `{"$not": {...}}`, `$exists`; see
    `tiered_memory.filters`. Anything else raises `UnsupportedFilterError`.

    Ids are kept; adding an existing id replaces that document, and near-duplicates
    are never merged, as a vector store must.

    Build one with `TieredMemoryVectorStore.embedded(path, embedding)` or
    `from_texts(...)`, or wrap a memory you already have:
    `TieredMemoryVectorStore(memory=mem, namespace="docs")`. A wrapped memory keeps its
    own policy: with the default one, near-duplicates merge on add and the noise floor
    drops documents far from the query, so a search may return fewer than k of the k
    that exist; build the memory with `policy=vectorstore_policy()` for the vector-store
    contract (`embedded`/`from_texts` do). Every method runs on the memory's own loop,
    where its backends were opened; the async ones await it from the caller's loop
    without blocking it.
    """

    def __init__(
        self,
        memory: TieredMemory,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        embedding: Embeddings | None = None,
        owns_memory: bool = False,
    ) -> None:
        """
        Args:
            memory: The memory holding the documents; its embedder embeds them.
            namespace: The namespace the documents live in.
            embedding: The embeddings behind `memory`, if given: the memory embeds,
                never this, so one of another class than the memory's embedder is a
                `ConfigurationError` rather than silently unused.
            owns_memory: Close `memory` when this store is closed.
        """
        used = memory.aio.embedding_model
        if embedding is not None and embedding is not used and type(embedding) is not type(used):
            raise ConfigurationError(
                f"the memory embeds with {type(memory.aio.embedding_model).__name__}, not the "
                f"{type(embedding).__name__} given: documents and queries would be embedded "
                "by the memory's embedder; pass embedding=None, or build the memory with "
                "this embedder (TieredMemory.embedded(path, embedder=...))"
            )
        self.memory = memory
        self.namespace = namespace
        self._owns_memory = owns_memory
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def embedded(
        cls,
        path: str | PathLike[str] | None,
        embedding: Embeddings,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        policy: Policy | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """A store on the embedded default (one SQLite file), embedding with `embedding`.

        `path=None` keeps the file in a temporary folder removed by `close()`.
        """
        tempdir = None
        if path is None:
            tempdir = tempfile.TemporaryDirectory(prefix="tiered-memory-vs-")
            path = Path(tempdir.name) / "memory.db"
        memory = TieredMemory.embedded(
            path,
            embedder=embedding,  # the core awaits aembed_documents/aembed_query directly
            policy=vectorstore_policy(policy),
            clock=clock,
        )
        store = cls(memory, namespace=namespace, embedding=embedding, owns_memory=True)
        store._tempdir = tempdir
        return store

    def close(self) -> None:
        if self._owns_memory:
            self.memory.close()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def embeddings(self) -> Embeddings:
        """The embedder the memory really uses, as a LangChain `Embeddings` (itself
        when it is one; the package's own embedders are; else wrapped)."""
        return as_langchain_embeddings(self.memory.aio.embedding_model)

    # -- adding ---------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        items = _inputs(texts, metadatas, ids)
        return self.memory.run(self._upsert(items))

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return await self.memory.arun(self._upsert(_inputs(texts, metadatas, ids)))

    async def _upsert(self, items: list[MemoryInput]) -> list[str]:
        # A vector store replaces an existing id: the engine's atomic upsert, so a batch
        # that fails validation or embedding changes nothing. A replaced document
        # starts over in HOT.
        added = await self.memory.aio.upsert_many(items, namespace=self.namespace)
        return [m.id for m in added]

    # -- deleting and reading by id -------------------------------------------------

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return self.memory.run(self._delete(ids))

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return await self.memory.arun(self._delete(ids))

    async def _delete(self, ids: list[str] | None) -> bool:
        """Hard-delete these documents (unknown ids are fine); None deletes them all."""
        engine = self.memory.aio
        if ids is None:
            await engine.clear(namespace=self.namespace)
        else:
            await engine.forget_many(ids, namespace=self.namespace, hard=True)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return self.memory.run(self._get_by_ids(ids))

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return await self.memory.arun(self._get_by_ids(ids))

    async def _get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        out: list[Document] = []
        seen: set[str] = set()
        for doc_id in validation.check_ids(ids):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            memory = await self.memory.aio.get(doc_id, namespace=self.namespace)
            if memory is not None:
                out.append(_document(memory))
        return out

    # -- searching ------------------------------------------------------------------

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k best documents and their final memory score, best first.

        Keyword arguments: `filter` (a Mongo-style dict, see the class docstring, or
        `tiered_memory.filters` conditions), `deep`, `include_archived`.
        """
        return self.memory.run(self._search(query, None, k, kwargs))

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return await self.memory.arun(self._search(query, None, k, kwargs))

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.memory.run(self._search("", embedding, k, kwargs))]

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        scored = await self.memory.arun(self._search("", embedding, k, kwargs))
        return [doc for doc, _ in scored]

    async def _search(
        self, query: str, embedding: Sequence[float] | None, k: int, kwargs: dict[str, Any]
    ) -> list[tuple[Document, float]]:
        return _scored(await self._hits(query, embedding, k, kwargs))

    async def _hits(
        self, query: str, embedding: Sequence[float] | None, k: int, kwargs: Mapping[str, Any]
    ) -> list[Hit]:
        """The engine's ranked search; a vector the caller embedded replaces the query's
        embedding (with a blank query, so no lexical signal)."""
        _check_options(kwargs)
        return list(
            await self.memory.aio.search(
                query,
                namespace=self.namespace,
                k=k,
                metadata=translate_filter(kwargs.get("filter")),
                deep=kwargs.get("deep", False),
                include_archived=kwargs.get("include_archived", False),
                query_embedding=embedding,
            )
        )

    # -- relevance scores -------------------------------------------------------------

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return self.memory.run(self._relevance(query, k, kwargs))

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return await self.memory.arun(self._relevance(query, k, kwargs))

    async def _relevance(
        self, query: str, k: int, kwargs: Mapping[str, Any]
    ) -> list[tuple[Document, float]]:
        hits = await self._hits(query, None, k, kwargs)
        return [(_document(h.memory), cosine_relevance(h.terms.cosine)) for h in hits]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # Only LangChain's default relevance path calls this, and it is overridden
        # above: the final memory score is no cosine, so there is nothing to map.
        raise NotImplementedError(
            "relevance scores come from the raw cosine; call "
            "similarity_search_with_relevance_scores"
        )

    # -- maximal marginal relevance ---------------------------------------------------

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        """The `k` documents among the `fetch_k` best that balance relevance to the
        query against difference from each other (`lambda_mult` 1: relevance only, 0:
        diversity only). The candidates are the memory's ranking, so tiers count."""
        return self.memory.run(self._mmr(query, None, k, fetch_k, lambda_mult, kwargs))

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        return await self.memory.arun(self._mmr(query, None, k, fetch_k, lambda_mult, kwargs))

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        return self.memory.run(self._mmr("", embedding, k, fetch_k, lambda_mult, kwargs))

    async def amax_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        return await self.memory.arun(self._mmr("", embedding, k, fetch_k, lambda_mult, kwargs))

    async def _mmr(
        self,
        query: str,
        embedding: Sequence[float] | None,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        kwargs: Mapping[str, Any],
    ) -> list[Document]:
        validation.check_k(k, "k")
        validation.check_k(fetch_k, "fetch_k")
        if (
            isinstance(lambda_mult, bool)
            or not isinstance(lambda_mult, (int, float))
            or not (0.0 <= lambda_mult <= 1.0)
        ):
            raise ValidationError(f"lambda_mult must be a number in [0, 1], got {lambda_mult!r}")
        hits = await self._hits(query, embedding, max(k, fetch_k), kwargs)
        if not hits:
            return []
        embedder = self.embeddings
        query_vector = (
            list(embedding) if embedding is not None else await embedder.aembed_query(query)
        )
        vectors = await embedder.aembed_documents([h.memory.content for h in hits])
        chosen = maximal_marginal_relevance(
            np.asarray(query_vector, dtype=np.float32),
            [list(map(float, row)) for row in vectors],
            lambda_mult=float(lambda_mult),
            k=min(k, len(hits)),
        )
        return [_document(hits[i].memory) for i in chosen]

    # -- construction from texts ------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new embedded store holding `texts`.

        Keyword arguments: `path` (the SQLite file; a temporary one by default),
        `namespace`, `policy`, `clock`; or `memory=` an existing `TieredMemory`.
        """
        store = cls._build(embedding, kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        store = cls._build(embedding, kwargs)
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    def _build(cls, embedding: Embeddings, kwargs: dict[str, Any]) -> Self:
        namespace = kwargs.pop("namespace", DEFAULT_NAMESPACE)
        memory = kwargs.pop("memory", None)
        if memory is not None:
            if kwargs:
                raise TypeError(f"unexpected argument(s) with memory=: {sorted(kwargs)}")
            return cls(memory, namespace=namespace, embedding=embedding)
        options = {k: kwargs.pop(k) for k in ("policy", "clock") if k in kwargs}
        path = kwargs.pop("path", None)
        if kwargs:
            raise TypeError(f"unexpected argument(s): {sorted(kwargs)}")
        return cls.embedded(path, embedding, namespace=namespace, **options)


def cosine_relevance(cosine: float) -> float:
    """LangChain's relevance in [0, 1] from a cosine in [-1, 1]: 1 identical, 0.5
    unrelated, 0 opposite (what langchain-core's stores return for normalised vectors).
    Independent of time, tier and use, unlike the memory's final score."""
    return min(1.0, max(0.0, (1.0 + float(cosine)) / 2.0))


def translate_filter(filter: FilterSpec | None) -> tuple[Condition, ...]:
    """A LangChain `filter=` as the core's filter trees: the same Mongo-style dict
    (see `tiered_memory.filters`), or conditions built directly."""
    if filter is None:
        return ()
    if isinstance(filter, Mapping):
        return parse_filter(filter)
    return validation.check_filters(filter)


def _check_options(kwargs: Mapping[str, Any]) -> None:
    unknown = set(kwargs) - _SEARCH_OPTIONS
    if unknown:
        raise ValidationError(
            f"unexpected search argument(s) {sorted(unknown)}; supported: {sorted(_SEARCH_OPTIONS)}"
        )


def _inputs(
    texts: Iterable[str],
    metadatas: list[dict[str, Any]] | None,
    ids: Sequence[str | None] | None,
) -> list[MemoryInput]:
    text_list = validation.check_list(texts, "texts")
    metadata_list = validation.check_list(metadatas, "metadatas") if metadatas is not None else None
    id_list = validation.check_list(ids, "ids") if ids is not None else None
    if metadata_list is not None and len(metadata_list) != len(text_list):
        raise ValidationError(f"got {len(metadata_list)} metadatas for {len(text_list)} texts")
    if id_list is not None and len(id_list) != len(text_list):
        raise ValidationError(f"got {len(id_list)} ids for {len(text_list)} texts")
    return [
        MemoryInput.parse(
            {
                "content": text,
                "metadata": metadata_list[i] if metadata_list is not None else None,
                "id": (id_list[i] if id_list is not None else None) or uuid.uuid4().hex,
                "source": "vectorstore",
            }
        )
        for i, text in enumerate(text_list)
    ]


def _document(memory: Memory) -> Document:
    return Document(id=memory.id, page_content=memory.content, metadata=dict(memory.metadata))


def _scored(hits: Sequence[Hit]) -> list[tuple[Document, float]]:
    return [(_document(h.memory), h.score) for h in hits]
