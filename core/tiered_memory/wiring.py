"""Settings -> the opened backends of one memory: the one place that knows how a
configuration becomes ports.

Every way of making a memory comes here. `AsyncTieredMemory.embedded(path)` is one
configuration (a SQLite file, the graph in the same file, originals in a folder beside
it, the extractive summariser, the hashing embedder); `from_config`/`from_env` read
another from TOML and the environment; `from_settings` takes one you built. Each ends
in `open_stack`, so the embedded layout (where the archive folder and the sweep's lock
file live) is written once, here, and a default changed here changes it for every path.

Backends are named, not imported: `BACKENDS` maps each (port, name) to the module and
class that implement it, and a module is imported only when its backend is chosen, so
a plain install never needs weaviate, neo4j, boto3 or anthropic.

This module does not know the engine: it hands the engine a `Stack`, and the engine
(`AsyncTieredMemory.from_settings`) builds itself from it. So the import graph stays a
tree: engine -> wiring -> config.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from . import telemetry
from .config import ObjectSettings, StoreSettings, TieredMemorySettings
from .errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    missing_extra,
)
from .locks import FileLock, ProcessLock, SweepLock
from .policy import Policy
from .ports import AssociationGraph, Embedder, MemoryStore, ObjectStore, Summarizer
from .telemetry import traced_port

log = logging.getLogger(__name__)

ARCHIVE_SUFFIX = ".archive"  # <file>.archive/: the originals of an embedded store
LOCK_SUFFIX = ".sweep.lock"  # <file>.sweep.lock: one sweep at a time, across processes


def archive_folder(db_path: Path) -> Path:
    """Where an embedded store keeps archived originals: a folder beside its file
    (`memory.db` -> `memory.db.archive/`), so copying both copies the whole store."""
    return db_path.with_name(db_path.name + ARCHIVE_SUFFIX)


def sweep_lock_file(db_path: Path) -> Path:
    """The file an embedded store's sweeps lock, beside the store's file."""
    return db_path.with_name(db_path.name + LOCK_SUFFIX)


def embedded_settings(
    path: str | PathLike[str],
    *,
    archive_dir: str | PathLike[str] | None = None,
    policy: Policy | None = None,
) -> TieredMemorySettings:
    """The embedded configuration as settings: the SQLite store at `path` (the graph in
    the same file), originals in `archive_dir` or beside the file, the default
    summariser and embedder. Reads no environment."""
    return TieredMemorySettings(
        store=StoreSettings(backend="sqlite", path=Path(path)),
        objects=ObjectSettings(backend="local", path=Path(archive_dir) if archive_dir else None),
        policy=policy or Policy(),
    )


# -- the opened backends ------------------------------------------------------------------


@dataclass
class Stack:
    """The ports one memory runs on, opened, and the lock its sweeps take."""

    store: MemoryStore
    graph: AssociationGraph
    objects: ObjectStore
    summarizer: Summarizer
    embedder: Embedder | Any
    sweep_lock: SweepLock

    async def close(self) -> None:
        """Close what was opened (when the engine could not be built over it)."""
        for port in (self.graph, self.objects, self.store):
            with contextlib.suppress(Exception):
                await port.close()


async def open_stack(
    settings: TieredMemorySettings,
    *,
    embedder: Embedder | Any | None = None,
    summarizer: Summarizer | None = None,
) -> Stack:
    """Open the backends `settings` name. `embedder=`/`summarizer=` replace the
    configured ones (e.g. a LangChain `Embeddings`). If one backend fails to open, the
    ones already opened are closed again before the error propagates."""
    wiring = _Wiring(settings=settings)
    opened: list[Any] = []
    try:
        store = await _build("store", settings.store.backend, wiring)
        opened.append(store)
        wiring.store = store
        graph = await _build("graph", settings.graph.backend, wiring)
        opened.append(graph)
        objects = await _build("objects", settings.objects.backend, wiring)
        opened.append(objects)
        summ = summarizer or await _build("summarizer", settings.summarizer.backend, wiring)
        emb = (
            embedder
            if embedder is not None
            else await _build("embedder", settings.embedder.backend, wiring)
        )
    except BaseException:
        for port in reversed(opened):  # do not leak half a memory's connections
            with contextlib.suppress(Exception):
                await port.close()
        raise
    # A server store is shared over the network: one runner per deployment, and only
    # this process's sweeps are kept apart here.
    lock: SweepLock = (
        FileLock(sweep_lock_file(wiring.db_path)) if wiring.db_path is not None else ProcessLock()
    )
    if telemetry.tracing():  # every backend call in a span (`telemetry.TracedPort`)
        store, graph = traced_port(store, "store"), traced_port(graph, "graph")
        objects, summ = traced_port(objects, "objects"), traced_port(summ, "summarizer")
    return Stack(store, graph, objects, summ, emb, lock)


# -- the backend registry ------------------------------------------------------------------

Kind = Literal["store", "graph", "objects", "summarizer", "embedder"]


@dataclass
class _Wiring:
    """What builders share while one memory is being wired."""

    settings: TieredMemorySettings
    store: Any = None  # the built store, for a graph living in the same SQLite file
    db_path: Path | None = None


Builder = Callable[[Any, _Wiring], Awaitable[Any]]


@dataclass(frozen=True)
class BackendSpec:
    """One implementation of a port: where it lives, which extra brings its
    dependencies, and how to build it from the settings."""

    module: str
    attr: str
    extra: str | None
    build: Builder
    package: str = ""  # the pip package named when the import fails


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


async def _sqlite_store(cls: Any, w: _Wiring) -> Any:
    path = w.settings.resolved_db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    w.db_path = path
    return await cls.open(path, use_days_kept=w.settings.policy.tiers.use_days_kept)


async def _weaviate_store(cls: Any, w: _Wiring) -> Any:
    s = w.settings.store.weaviate
    return await cls.connect(
        url=s.url,
        api_key=_secret(s.api_key),
        prefix=s.prefix,
        grpc_port=s.grpc_port,
        grpc_host=s.grpc_host,
        headers={k: v.get_secret_value() for k, v in s.headers.items()} or None,
        cold_quantizer=s.cold_quantizer,
        use_days_kept=w.settings.policy.tiers.use_days_kept,
    )


async def _sqlite_graph(cls: Any, w: _Wiring) -> Any:
    database = getattr(w.store, "database", None)
    if w.settings.graph.path is None and database is not None:
        return cls(database)  # same file, same transactions as the store
    path = (w.settings.graph.path or w.settings.resolved_data_dir() / "graph.db").expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return await cls.open(path)


async def _neo4j_graph(cls: Any, w: _Wiring) -> Any:
    s = w.settings.graph.neo4j
    password = _secret(s.password)
    auth = (s.user, password) if password is not None else None
    graph = cls(s.uri, auth, database=s.database)
    try:
        await graph.open()
    except BackendUnavailableError as e:
        # Search degrades without the graph, so a graph that is down must not keep the
        # memory from starting; the graph sets itself up on its first successful call.
        log.warning("graph server unavailable at start-up (%s); searches run degraded", e)
    return graph


async def _local_objects(cls: Any, w: _Wiring) -> Any:
    folder = w.settings.objects.path
    if folder is None:
        folder = (
            archive_folder(w.db_path)
            if w.db_path is not None
            else w.settings.resolved_data_dir() / "archive"
        )
    return cls(folder.expanduser())


async def _s3_objects(cls: Any, w: _Wiring) -> Any:
    s = w.settings.objects.s3
    if not s.bucket:
        raise ConfigurationError(
            "objects.backend is 's3' but objects.s3.bucket is not set "
            "(TIERED_MEMORY_OBJECTS__S3__BUCKET)"
        )
    return cls(
        s.bucket,
        prefix=s.prefix,
        endpoint_url=s.endpoint_url,
        region_name=s.region,
        path_style=s.path_style,
        aws_access_key_id=_secret(s.access_key_id),
        aws_secret_access_key=_secret(s.secret_access_key),
        aws_session_token=_secret(s.session_token),
        profile_name=s.profile,
    )


async def _extractive(cls: Any, w: _Wiring) -> Any:
    return cls()


async def _anthropic(cls: Any, w: _Wiring) -> Any:
    s = w.settings.summarizer.anthropic
    kwargs: dict[str, Any] = {"api_key": _secret(s.api_key), "base_url": s.base_url}
    if s.model:
        kwargs["model"] = s.model
    if s.fallback_to_extractive:
        kwargs["fallback"] = backend_class("summarizer", "extractive")()
    return cls.from_policy(w.settings.policy.archival, **kwargs)


async def _hashing(cls: Any, w: _Wiring) -> Any:
    return cls(w.settings.embedder.dimension)


async def _local_embedder(cls: Any, w: _Wiring) -> Any:
    s = w.settings.embedder
    return cls(s.model, device=s.device, batch_size=s.batch_size)


BACKENDS: Mapping[tuple[Kind, str], BackendSpec] = {
    ("store", "sqlite"): BackendSpec(
        "tiered_memory.backends.sqlite", "SQLiteMemoryStore", None, _sqlite_store
    ),
    ("store", "weaviate"): BackendSpec(
        "tiered_memory.backends.weaviate",
        "WeaviateMemoryStore",
        "weaviate",
        _weaviate_store,
        "weaviate-client",
    ),
    ("graph", "sqlite"): BackendSpec(
        "tiered_memory.backends.sqlite", "SQLiteAssociationGraph", None, _sqlite_graph
    ),
    ("graph", "neo4j"): BackendSpec(
        "tiered_memory.backends.neo4j", "Neo4jAssociationGraph", "neo4j", _neo4j_graph, "neo4j"
    ),
    ("objects", "local"): BackendSpec(
        "tiered_memory.backends.local", "LocalFolderObjectStore", None, _local_objects
    ),
    ("objects", "s3"): BackendSpec(
        "tiered_memory.backends.s3", "S3ObjectStore", "s3", _s3_objects, "boto3"
    ),
    ("summarizer", "extractive"): BackendSpec(
        "tiered_memory.summarizers.extractive", "ExtractiveSummarizer", None, _extractive
    ),
    ("summarizer", "anthropic"): BackendSpec(
        "tiered_memory.summarizers.anthropic",
        "AnthropicSummarizer",
        "anthropic",
        _anthropic,
        "anthropic",
    ),
    ("embedder", "hashing"): BackendSpec(
        "tiered_memory.embeddings", "HashingEmbedder", None, _hashing
    ),
    ("embedder", "local"): BackendSpec(
        "tiered_memory.embeddings",
        "SentenceTransformerEmbedder",
        "local",
        _local_embedder,
        "sentence-transformers",
    ),
}


def backend_class(kind: Kind, name: str) -> Any:
    """Import and return the class implementing `kind` named `name` (only now)."""
    spec = BACKENDS.get((kind, name))
    if spec is None:
        names = sorted(n for k, n in BACKENDS if k == kind)
        raise ConfigurationError(f"unknown {kind} backend {name!r}; expected one of: {names}")
    try:
        module = importlib.import_module(spec.module)
    except ImportError as e:
        if spec.extra is None or isinstance(e, MissingDependencyError):
            raise
        raise missing_extra(spec.package or spec.module, spec.extra) from e
    return getattr(module, spec.attr)


async def _build(kind: Kind, name: str, wiring: _Wiring) -> Any:
    spec = BACKENDS.get((kind, name))
    cls = backend_class(kind, name)
    assert spec is not None  # backend_class raised otherwise
    return await spec.build(cls, wiring)


__all__ = [
    "ARCHIVE_SUFFIX",
    "BACKENDS",
    "LOCK_SUFFIX",
    "BackendSpec",
    "Stack",
    "archive_folder",
    "backend_class",
    "embedded_settings",
    "open_stack",
    "sweep_lock_file",
]
