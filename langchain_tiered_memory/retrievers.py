"""`TieredMemoryRetriever`: tiered memory as a LangChain retriever."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from tiered_memory import TieredMemory, ValidationError

from ._common import DEFAULT_NAMESPACE, hit_document, run_sync

_OVERRIDABLE = frozenset({"k", "namespace", "budget_tokens", "deep"})
_IGNORED = frozenset({"verbose"})  # BaseRetriever.invoke forwards it to us


class TieredMemoryRetriever(BaseRetriever):
    """Retrieve memories of one namespace as `Document`s.

    Without `budget_tokens` this is a plain ranked search: the `k` best hits, and
    nothing counts as used. With `budget_tokens` the documents are exactly what
    `recall` would inject into a prompt (tier shares, at most `k` items), and their
    use is recorded, so memories a chain actually reads stay in the active tiers.

    Each document's `page_content` is the memory (an archived one's summary) and its
    metadata carries `id`, `tier`, `score`, `memory_type`, `created_at` (ISO 8601),
    `archived` and `pinned`, over the memory's own metadata.

    Example:
        ```python
        retriever = TieredMemoryRetriever(memory=mem, namespace="user-42", k=5)
        docs = retriever.invoke("what is my daughter called?")
        docs = retriever.invoke("...", k=2)  # per-call k, namespace, budget_tokens, deep
        ```
    """

    memory: TieredMemory
    """The memory to read; its async engine (`memory.aio`) serves `ainvoke`."""
    namespace: str = DEFAULT_NAMESPACE
    """Whose memories: every call stays inside this namespace."""
    k: int = Field(default=4, ge=1)
    """How many documents at most."""
    budget_tokens: int | None = Field(default=None, ge=0)
    """When set, return what `recall` injects within this many tokens, and record use."""
    deep: bool = False
    """Also search COLD memories and archived summaries (DESIGN.md phases 3 and 4)."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return run_sync(self.memory, self._retrieve(query, kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await self._retrieve(query, kwargs)

    async def _retrieve(self, query: str, overrides: dict[str, Any]) -> list[Document]:
        unknown = set(overrides) - _OVERRIDABLE - _IGNORED
        if unknown:
            raise ValidationError(
                f"unexpected argument(s) {sorted(unknown)}; "
                f"a call may override only {sorted(_OVERRIDABLE)}"
            )
        k: int = overrides.get("k", self.k)
        namespace: str = overrides.get("namespace", self.namespace)
        budget: int | None = overrides.get("budget_tokens", self.budget_tokens)
        deep: bool = overrides.get("deep", self.deep)
        engine = self.memory.aio
        if budget is not None:
            injection = await engine.recall(
                query, namespace=namespace, budget_tokens=budget, max_items=k, deep=deep
            )
            hits = injection.items
        else:
            hits = await engine.search(query, namespace=namespace, k=k, deep=deep)
        return [hit_document(h) for h in hits]
