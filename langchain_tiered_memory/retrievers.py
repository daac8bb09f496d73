"""`TieredMemoryRetriever`: tiered memory as a LangChain retriever."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import Field, model_validator

from tiered_memory import TieredMemory, ValidationError

from ._common import hit_document, namespace_source, run_namespace

_OVERRIDABLE = frozenset({"k", "namespace", "budget_tokens", "deep"})
_IGNORED = frozenset({"verbose"})  # BaseRetriever.invoke forwards it to us


class TieredMemoryRetriever(BaseRetriever):
    """Retrieve memories of the caller's namespace as `Document`s.

    Without `budget_tokens` this is a plain ranked search: the `k` best hits, and
    nothing counts as used. With `budget_tokens` the documents are exactly what
    `recall` would inject into a prompt (tier shares, at most `k` items), and their
    use is recorded, so memories a chain actually reads stay in the active tiers.

    Each document's `page_content` is the memory (an archived one's summary) and its
    metadata carries `id`, `tier`, `score`, `memory_type`, `created_at` (ISO 8601),
    `archived` and `pinned`, over the memory's own metadata.

    The namespace of a call is the one its run names under `namespace_key` (default
    `"user_id"`): the LangGraph runtime context, else `config["configurable"]`, as for
    `TieredMemoryMiddleware`; a call naming none raises `ConfigurationError`. Give
    `namespace` instead to fix one namespace (a single-user app).

    Example:
        ```python
        retriever = TieredMemoryRetriever(memory=mem, k=5)
        docs = retriever.invoke(
            "what is my daughter called?", config={"configurable": {"user_id": "user-42"}}
        )
        docs = retriever.invoke("...", k=2)  # per-call k, namespace, budget_tokens, deep
        ```
    """

    memory: TieredMemory
    """The memory to read; `ainvoke` runs on its own loop, leaving the caller's free."""
    namespace: str | None = None
    """One fixed namespace for every call; not together with `namespace_key`."""
    namespace_key: str | None = None
    """Key of the run's context or configurable naming the namespace (default `user_id`)."""
    k: int = Field(default=4, ge=1)
    """How many documents at most."""
    budget_tokens: int | None = Field(default=None, ge=0)
    """When set, return what `recall` injects within this many tokens, and record use."""
    deep: bool = False
    """Also search COLD memories and archived summaries (DESIGN.md phases 3 and 4)."""

    @model_validator(mode="after")
    def _one_namespace_source(self) -> TieredMemoryRetriever:
        self.namespace, self.namespace_key = namespace_source(
            "TieredMemoryRetriever", self.namespace, self.namespace_key
        )
        return self

    def _with_namespace(
        self, config: RunnableConfig | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The call's arguments with its namespace: given, fixed, or the run's.

        Read here because `invoke` does not hand its config on to
        `_get_relevant_documents`.
        """
        if config is not None and not isinstance(config, Mapping):
            # checked before LangChain reads it: its own error would be an AttributeError
            raise ValidationError(
                f"config must be a RunnableConfig (a dict), got {type(config).__name__}; "
                "e.g. config={'configurable': {'user_id': 'user-42'}}"
            )
        if "namespace" in kwargs:
            return kwargs
        if self.namespace is not None:
            return {**kwargs, "namespace": self.namespace}
        assert self.namespace_key is not None  # namespace_source gives one or the other
        ns = run_namespace(self.namespace_key, "TieredMemoryRetriever", config=config)
        return {**kwargs, "namespace": ns}

    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        return super().invoke(input, config, **self._with_namespace(config, kwargs))

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        return await super().ainvoke(input, config, **self._with_namespace(config, kwargs))

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self.memory.run(self._retrieve(query, kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await self.memory.arun(self._retrieve(query, kwargs))

    async def _retrieve(self, query: str, overrides: dict[str, Any]) -> list[Document]:
        unknown = set(overrides) - _OVERRIDABLE - _IGNORED
        if unknown:
            raise ValidationError(
                f"unexpected argument(s) {sorted(unknown)}; "
                f"a call may override only {sorted(_OVERRIDABLE)}"
            )
        k: int = overrides.get("k", self.k)
        namespace: str = overrides["namespace"]  # set by invoke/ainvoke
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
