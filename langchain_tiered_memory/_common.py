"""Small helpers shared by the LangChain classes; no memory rule lives here.

Each class writes its logic once, as a coroutine over the async engine, and runs it on
the `TieredMemory` facade's own loop, where the backends were opened (a Neo4j or
Weaviate client is bound to that loop): `memory.run(...)` from its sync methods,
`await memory.arun(...)` from its async ones, which leaves the caller's loop free.
Whatever a coroutine needs from the caller's context (the run's namespace, its thread
id) is read before it is handed over: context variables stay on the caller's side.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, ensure_config

from tiered_memory import ConfigurationError, Hit

DEFAULT_NAMESPACE = "default"
DEFAULT_NAMESPACE_KEY = "user_id"


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


def namespace_source(
    owner: str, namespace: str | None, namespace_key: str | None
) -> tuple[str | None, str | None]:
    """Where a face's namespace comes from: `(namespace, None)` fixed, or
    `(None, namespace_key)` read from each run.

    Neither given means each run's `user_id`: a face that one process shares between
    users must never put them all into one namespace. Both given is refused, because a
    run missing the key would then quietly use the fixed namespace, which is how one
    user's memories end up in another's prompt.
    """
    if namespace is not None and namespace_key is not None:
        raise ConfigurationError(
            f"{owner}: pass namespace= (one fixed namespace, for a single-user app) or "
            "namespace_key= (each run's own, from its context or config), not both"
        )
    if namespace is None:
        key = DEFAULT_NAMESPACE_KEY if namespace_key is None else namespace_key
        if not isinstance(key, str) or not key.strip():
            raise ConfigurationError(f"{owner}: namespace_key must be a non-empty string")
        return None, key
    return namespace, None


def run_namespace(
    key: str, owner: str, *, context: Any = None, config: RunnableConfig | None = None
) -> str:
    """The namespace the current run names under `key`; an error if it names none.

    Looked up, in order: the runtime context (LangGraph's `context={"user_id": ...}`, a
    dict or an object with that attribute; `context` if given, else the current graph
    run's), then `config["configurable"][key]` (`config` laid over the current run's).
    Numbers and UUIDs are used as their text, so numeric user ids work. A missing,
    empty or misspelt key raises instead of falling back: a guessed namespace is
    another user's.
    """
    if context is None:
        context = current_context()
    configurable = ensure_config(config).get("configurable") or {}
    for source in (context, configurable):
        value = _lookup(source, key)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, uuid.UUID)):
            raise ConfigurationError(
                f"{owner}: the run's {key!r} is a {type(value).__name__}; "
                "give the namespace as a string (or an integer id)"
            )
        return str(value)
    raise ConfigurationError(
        f"{owner} takes each run's namespace from the key {key!r}, and this run has "
        f"none (looked in the runtime context, keys {_keys(context)}, and in "
        f"config['configurable'], keys {_keys(configurable)}). Pass e.g. "
        f"context={{{key!r}: 'user-42'}} or config={{'configurable': {{{key!r}: "
        f"'user-42'}}}} to invoke; a single-user app can give {owner} namespace='...' instead"
    )


def _lookup(source: Any, key: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(key)
    return getattr(source, key, None)


def _keys(source: Any) -> list[str]:
    """The names a run did give, so a misspelt key is easy to spot (never the values)."""
    if source is None:
        return []
    names = source.keys() if isinstance(source, Mapping) else getattr(source, "__dict__", {})
    return sorted(str(k) for k in names if not str(k).startswith("_"))


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
    value = (ensure_config().get("configurable") or {}).get("thread_id")
    return str(value) if value is not None else None
