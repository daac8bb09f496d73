"""The public surface of the core and of the faces, for a property test to attack.

`surface(world)` lists every public method (bound, with its parameters) of the sync
engine facade `TieredMemory` (whose methods run the async engine's coroutines: one
implementation), of the LangChain VectorStore, retriever and tools, of the LangGraph
store, and of the LlamaIndex vector store and memory block. `arguments` draws keyword
arguments for one of them: each parameter plausible (an existing id, a small count)
or hostile (any value at all), so calls both reach deep and hit every check.

Left out, on purpose: constructors and factories (`embedded`, `from_config`, ...),
`close`, `run`/`arun` (they take coroutines, not data), and `start_maintenance`/
`stop_maintenance` (a background sweep would change the store between snapshots).
The async twins of the faces run the same coroutine as their sync methods.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

import langchain_tiered_memory
import llamaindex_tiered_memory
import tiered_memory
from tests.matrix import MemoryFactory
from tiered_memory import HashingEmbedder, ManualClock, MemoryType, Tier, TieredMemory

DIM = 64
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
NAMESPACES = ["default", "other", "docs"]

NASTY = ["\x00", "\u202e", "\u200b", "\ufeff", "\ud800", "\U0001f600", "\n", "'", "%", "/"]
hostile_text = st.text(
    alphabet=st.one_of(st.characters(codec=None), st.sampled_from(NASTY)), max_size=24
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 3, 2**63, 2**64, 10**20]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0]),
    hostile_text,
    st.sampled_from(["", "   ", "hot", "archived", "factual", "vector", "2026-01-01", "90d"]),
    st.binary(max_size=8),
    st.datetimes(),
    st.datetimes(timezones=st.just(timezone.utc)),
    st.just(timedelta(days=-1)),
    st.sampled_from([*Tier, *MemoryType]),
    st.builds(object),
    st.just(np.array([np.nan], dtype=np.float32)),
    st.just(np.ones(DIM, dtype=np.float32)),
)
hostile = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.one_of(hostile_text, st.integers()), children, max_size=3),
    ),
    max_leaves=6,
)


@dataclass(repr=False)
class World:
    """A seeded memory and every face built over it."""

    mem: TieredMemory
    archive: Path
    elsewhere: Callable[[], frozenset[tuple[Any, ...]]]  # what the servers hold
    ids: list[str] = field(default_factory=list)
    faces: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return "World()"


def build_world(memories: MemoryFactory, tmp: Path) -> World:
    mem = memories.open_sync(
        tmp / "world.db",
        embedder=HashingEmbedder(DIM),
        clock=ManualClock(START),
        archive_dir=tmp / "archive",
    )
    world = World(mem, tmp / "archive", memories.elsewhere)
    for ns in NAMESPACES:
        added = mem.add_many(
            [
                "the boiler was serviced in May",
                {"content": "Ava is seven and loves dinosaurs", "metadata": {"who": "ava"}},
                {"content": "always answer in metric units", "pinned": True},
                "the spare key is under the blue pot",
            ],
            namespace=ns,
        )
        world.ids.extend(m.id for m in added)
        mem.archive([added[3].id], namespace=ns)
    world.faces = _faces(mem)
    return world


def _faces(mem: TieredMemory) -> dict[str, Any]:
    from langchain_tiered_memory import (
        TieredMemoryRetriever,
        TieredMemoryStore,
        TieredMemoryVectorStore,
        create_memory_tools,
    )
    from llamaindex_tiered_memory import TieredMemoryBlock
    from llamaindex_tiered_memory import TieredMemoryRetriever as LlamaRetriever
    from llamaindex_tiered_memory import TieredMemoryVectorStore as LlamaVectorStore

    faces: dict[str, Any] = {
        "langchain.vectorstore": TieredMemoryVectorStore(mem, namespace="docs"),
        "langchain.retriever": TieredMemoryRetriever(memory=mem, namespace="default"),
        "langgraph.store": TieredMemoryStore(mem),
        "llamaindex.vectorstore": LlamaVectorStore(mem, namespace="docs"),
        "llamaindex.block": TieredMemoryBlock(memory=mem, namespace="default"),
        "llamaindex.retriever": LlamaRetriever(mem, namespace="default"),
    }
    for tool in create_memory_tools(mem, "default"):
        faces[f"langchain.tool.{tool.name}"] = tool
    return faces


@dataclass(frozen=True)
class Target:
    """One public method: how to call it, and what its parameters are."""

    name: str
    call: Callable[..., Any]
    parameters: tuple[inspect.Parameter, ...]

    def __repr__(self) -> str:
        return self.name


CORE_SKIP = frozenset(
    {"close", "run", "arun", "start_maintenance", "stop_maintenance", "policy", "clock"}
)
FACE_METHODS = {
    "langchain.vectorstore": [
        "add_texts",
        "add_documents",
        "delete",
        "get_by_ids",
        "similarity_search",
        "similarity_search_with_score",
        "similarity_search_by_vector",
        "similarity_search_with_relevance_scores",
    ],
    "langchain.retriever": ["invoke"],
    "langgraph.store": ["get", "put", "delete", "search", "list_namespaces", "batch"],
    "llamaindex.vectorstore": ["add", "delete", "delete_nodes", "get_nodes", "query", "clear"],
    "llamaindex.block": ["aget", "aput", "atruncate"],
    "llamaindex.retriever": ["retrieve"],
}


def surface(world: World) -> list[Target]:
    targets = [
        _target(f"core.{name}", getattr(world.mem, name))
        for name, value in vars(TieredMemory).items()
        if inspect.isfunction(value) and not name.startswith("_") and name not in CORE_SKIP
    ]
    for face, names in FACE_METHODS.items():
        for name in names:
            targets.append(_target(f"{face}.{name}", getattr(world.faces[face], name)))
    for face, tool in world.faces.items():
        if face.startswith("langchain.tool."):
            targets.append(_target(f"{face}.invoke", tool.invoke))
    return targets


OUR_PACKAGES = tuple(
    str(Path(module.__file__).parent)  # type: ignore[arg-type]
    for module in (tiered_memory, langchain_tiered_memory, llamaindex_tiered_memory)
)


def ran_our_code(error: BaseException) -> bool:
    """Whether any frame between the call and the raise is in one of our packages."""
    return any(
        frame.filename.startswith(OUR_PACKAGES)
        for frame in traceback.extract_tb(error.__traceback__)
    )


def _target(name: str, method: Callable[..., Any]) -> Target:
    call = method
    if inspect.iscoroutinefunction(method):  # the memory block is async only

        def call(*args: Any, _m: Callable[..., Any] = method, **kwargs: Any) -> Any:
            return asyncio.run(_m(*args, **kwargs))

    parameters = tuple(inspect.signature(method).parameters.values())
    return Target(name, call, parameters)


# -- arguments -------------------------------------------------------------------------


def _ids(world: World) -> st.SearchStrategy[str]:
    return st.sampled_from(world.ids)


def plausible(world: World, name: str, target: str) -> st.SearchStrategy[Any] | None:
    """A value of parameter `name` that passes the checks, often enough to go deep."""
    texts = st.sampled_from(["the boiler", "Ava", "metric units", "blue pot", "tea"])
    ids = _ids(world)
    counts = st.integers(min_value=1, max_value=5)
    if target.startswith("langgraph.store"):
        labels = st.tuples(st.sampled_from(["memories", "users"]), st.sampled_from(["u1", "u2"]))
        return {
            "namespace": labels,
            "namespace_prefix": labels.map(lambda t: t[:1]),
            "key": st.sampled_from(["k1", "k2"]),
            "value": st.fixed_dictionaries({"content": texts}),
            "query": texts,
            "limit": counts,
        }.get(name)
    if target.startswith("llamaindex"):
        from llama_index.core.schema import TextNode
        from llama_index.core.vector_stores.types import VectorStoreQuery

        nodes = st.lists(
            st.builds(
                TextNode,
                text=texts,
                id_=st.sampled_from(["n1", "n2", "n3"]),
                embedding=st.just([0.1] * DIM),
            ),
            max_size=3,
        )
        return {
            "nodes": nodes,
            "node_ids": st.lists(st.sampled_from(["n1", "n2", *world.ids[:3]]), max_size=3),
            "ref_doc_id": st.sampled_from(["doc-1", "n1"]),
            "query": st.builds(
                VectorStoreQuery,
                query_str=texts,
                query_embedding=st.one_of(st.none(), st.just([0.1] * DIM)),
                similarity_top_k=counts,
            ),
            "messages": st.just([]),
            "content": texts,
            "tokens_to_truncate": counts,
        }.get(name)
    if target.startswith("langchain.tool."):
        if name == "input":
            return st.fixed_dictionaries(
                {},
                optional={
                    "query": texts,
                    "content": texts,
                    "memory_id": ids,
                    "k": counts,
                    "tier": st.sampled_from(["hot", "warm", "cold", "archived"]),
                    "hard": st.booleans(),
                },
            )
        return None
    if target.startswith("langchain"):
        from langchain_core.documents import Document

        return {
            "texts": st.lists(texts, max_size=3),
            "documents": st.lists(st.builds(Document, page_content=texts), max_size=3),
            "ids": st.lists(ids, max_size=3),
            "query": texts,
            "input": texts,
            "k": counts,
            "embedding": st.just([0.1] * DIM),
        }.get(name)
    return {
        "namespace": st.sampled_from(NAMESPACES),
        "id": ids,
        "source": ids if target == "core.link" else texts,
        "target": ids,
        "ids": st.lists(ids, max_size=3),
        "content": texts,
        "query": texts,
        "items": st.lists(st.one_of(texts, st.fixed_dictionaries({"content": texts})), max_size=3),
        "k": counts,
        "limit": counts,
        "max_items": counts,
        "budget_tokens": st.integers(0, 300),
        "tier": st.sampled_from(["hot", "warm", "cold", "archived"]),
        "tiers": st.lists(st.sampled_from(["hot", "warm", "cold"]), max_size=2),
        "weights": st.just({"vector": 1.0, "keyword": 0.5}),
        "importance": st.floats(0, 1),
        "weight": st.floats(0, 1),
        "metadata": st.just({"who": "ava"}),
        "now": st.datetimes(
            min_value=datetime(2026, 1, 1),
            max_value=datetime(2030, 1, 1),
            timezones=st.just(timezone.utc),
        ),
        "embedding": st.just(np.ones(DIM, dtype=np.float32)),
        "query_embedding": st.just(np.ones(DIM, dtype=np.float32)),
        "prefix": st.sampled_from(["", "d", "o"]),
    }.get(name)


EXTRA_KWARGS = ["filter", "deep", "include_archived", "k", "namespace", "budget_tokens", "bogus"]


def arguments(
    data: st.DataObject, world: World, target: Target
) -> tuple[list[Any], dict[str, Any]]:
    """Positional-only arguments and keyword arguments for one call of `target`."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in target.parameters:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = data.draw(
                st.dictionaries(st.sampled_from(EXTRA_KWARGS), hostile, max_size=2),
                label=f"{target.name} **kwargs",
            )
            kwargs.update({k: v for k, v in extra.items() if k not in kwargs})
            continue
        optional = p.default is not inspect.Parameter.empty
        if optional and data.draw(st.booleans(), label=f"omit {p.name}"):
            continue
        good = plausible(world, p.name, target.name)
        value = data.draw(st.one_of(good, hostile) if good is not None else hostile, label=p.name)
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    return args, kwargs
