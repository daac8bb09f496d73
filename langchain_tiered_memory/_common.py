"""Small helpers shared by the LangChain classes; no memory rule lives here.

Each class writes its logic once, as a coroutine over the async engine, and its sync
method runs that coroutine on the `TieredMemory` facade's own loop, the loop the
backends were opened on (as the facade itself does for its methods).
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from langchain_core.documents import Document

from tiered_memory import Hit, MemoryInput, TieredMemory, ValidationError, validation

T = TypeVar("T")

DEFAULT_NAMESPACE = "default"


def run_sync(memory: TieredMemory, coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine of `memory.aio` to completion from sync code.

    The core has no public "run this coroutine on the facade's loop" call yet, so this
    uses the facade's loop thread directly: the one private attribute this package touches.
    """
    return memory._loop.run(coro)


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's own metadata with the memory's standing laid over it.

    The memory's fields win over caller metadata of the same name, so a retriever's
    consumer can always rely on `id`, `tier` and `score` meaning what they say.
    """
    memory = hit.memory
    return {
        **memory.metadata,
        "id": memory.id,
        "tier": hit.tier.value,
        "score": hit.score,
        "memory_type": memory.memory_type.value,
        "created_at": memory.created_at.isoformat(),
        "archived": hit.archived,
        "pinned": memory.pinned,
    }


def hit_document(hit: Hit) -> Document:
    return Document(id=hit.memory.id, page_content=hit.memory.content, metadata=hit_metadata(hit))


def _lookup(source: Any, key: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(key)
    return getattr(source, key, None)


def namespace_from(context: Any, key: str | None, default: str) -> str:
    """The memory namespace of the current run.

    Looked up, in order: the runtime context (`context={"user_id": ...}` or a context
    object with that attribute), then `config["configurable"][key]`, else `default`.
    Values are used as strings, so numeric user ids work.
    """
    if key:
        value = _lookup(context, key)
        if value is None:
            value = _configurable(key)
        if value is not None and str(value).strip():
            return str(value)
    return default


def _configurable(key: str) -> Any:
    try:
        from langgraph.config import get_config

        config = get_config()
    except (ImportError, RuntimeError):  # outside a graph run: no config to read
        return None
    return _lookup(config.get("configurable"), key)


def current_context() -> Any:
    """The runtime context of the LangGraph run we are called from, if any."""
    try:
        from langgraph.runtime import get_runtime

        runtime = get_runtime()
    except (ImportError, RuntimeError, KeyError):
        return None
    return getattr(runtime, "context", None)


def thread_id() -> str | None:
    """The LangGraph thread of the current run (kept with captures as provenance)."""
    value = _configurable("thread_id")
    return str(value) if value is not None else None


def precheck(memory: TieredMemory, items: list[MemoryInput]) -> None:
    """Run the core's own input checks before a replace deletes the old record.

    Replacing is "delete, then add" until the core has an upsert; checking first
    means bad input (empty text, metadata that is not JSON, a repeated id) leaves the
    stored record as it was instead of losing it.
    """
    limits = memory.aio.policy.limits
    seen: set[str] = set()
    for item in items:
        validation.check_content(item.content, limits)
        validation.check_metadata(item.metadata, limits)
        if item.id is not None:
            validation.check_id(item.id)
            if item.id in seen:
                raise ValidationError(f"id {item.id!r} appears twice in one call")
            seen.add(item.id)
