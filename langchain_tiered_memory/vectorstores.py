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

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from typing_extensions import Self

from tiered_memory import (
    Hit,
    Memory,
    MemoryInput,
    Policy,
    TieredMemory,
    ValidationError,
    validation,
)
from tiered_memory.embeddings import LangChainEmbedder
from tiered_memory.ports import Clock

from ._common import DEFAULT_NAMESPACE

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
    frequency, tier factor), which is also the score it returns (in [0, 1], higher is
    better). Ids are kept; adding an existing id replaces that document, and
    near-duplicates are never merged, as a vector store must.

    Build one with `TieredMemoryVectorStore.embedded(path, embedding)` or
    `from_texts(...)`, or wrap a memory you already have:
    `TieredMemoryVectorStore(memory=mem, namespace="docs")`. Every method runs on the
    memory's own loop, where its backends were opened; the async ones await it from
    the caller's loop without blocking it.
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
            embedding: The LangChain embeddings behind `memory`, reported by the
                `embeddings` property (found from the memory when not given).
            owns_memory: Close `memory` when this store is closed.
        """
        self.memory = memory
        self.namespace = namespace
        self._embedding = embedding
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
            # Wrapped explicitly: the core's `as_embedder` takes a LangChain Embeddings
            # for one of its own (sync methods match its Protocol by name) and awaits them.
            embedder=LangChainEmbedder(embedding),
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
    def embeddings(self) -> Embeddings | None:
        if self._embedding is not None:
            return self._embedding
        model = self.memory.aio.embedding_model
        return model if isinstance(model, Embeddings) else None

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

        Keyword arguments: `filter` (a dict of metadata equalities, or a list of
        `tiered_memory.ports.MetadataFilter`), `deep`, `include_archived`.
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
        """The engine's ranked search; a vector the caller embedded replaces the query's
        embedding (with a blank query, so no lexical signal)."""
        _check_options(kwargs)
        hits = await self.memory.aio.search(
            query,
            namespace=self.namespace,
            k=k,
            metadata=kwargs.get("filter"),
            deep=kwargs.get("deep", False),
            include_archived=kwargs.get("include_archived", False),
            query_embedding=embedding,
        )
        return _scored(hits)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # The final memory score is already a relevance in [0, 1], higher is better.
        return _identity

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


def _identity(score: float) -> float:
    return score


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
