"""Configuration in one place: environment variables and an optional TOML file -> a wired
`AsyncTieredMemory`.

    settings = load_settings("tiered-memory.toml")      # or load_settings() for env only
    memory = await build_memory(settings)               # AsyncTieredMemory
    memory = build_sync_memory(settings)                # TieredMemory

Precedence, highest first: keyword overrides, `TIERED_MEMORY_*` variables (nested with
`__`, e.g. `TIERED_MEMORY_POLICY__BUDGET__HOT=0.5`), the TOML file, the defaults of
`Policy` and of the sections below. Unknown keys are errors wherever they come from, so
a typo never silently falls back to a default.

Backends are named, not imported: `BACKENDS` maps each (port, name) to the module and
class that implement it, and a module is imported only when its backend is chosen, so a
plain install never needs weaviate, neo4j, boto3 or anthropic.

Nothing here reads the environment or touches a file at import time; `load_settings`,
`build_memory` and `build_sync_memory` do, when called.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic import ValidationError as PydanticValidationError

from .errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    ValidationError,
    missing_extra,
)
from .policy import Policy

log = logging.getLogger(__name__)

try:  # pydantic-settings belongs to the [cli] extra; fail with the extra's name
    from pydantic_settings import (
        BaseSettings,
        InitSettingsSource,
        PydanticBaseSettingsSource,
        SettingsConfigDict,
    )
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_extra("pydantic-settings", "cli") from e

if TYPE_CHECKING:
    from .engine import AsyncTieredMemory, TieredMemory
    from .ports import Clock, Embedder, Summarizer

ENV_PREFIX = "TIERED_MEMORY_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"
# Variables with the prefix that are not settings: the TOML path, and the local model
# folder read by `embeddings.resolve_local_model`.
_NOT_SETTINGS = frozenset({"CONFIG", "MODEL_PATH"})
APP_NAME = "tiered-memory"
DEFAULT_DB_NAME = "memory.db"


# -- durations ----------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|s)", re.IGNORECASE)
_UNIT_SECONDS = {"w": 604_800.0, "d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}


# Long enough to mean "never"; short enough that `now - duration` is still a date.
MAX_DURATION = timedelta(days=365_250)


def parse_duration(text: str) -> timedelta:
    """'90d', '6h', '1w2d', '30m', '45s' -> a timedelta: how people write intervals in a
    shell or a TOML file, where ISO 8601 ('PT6H') would be a chore."""
    cleaned = text.strip().replace(" ", "")
    if not cleaned or _DURATION.sub("", cleaned):
        raise ValidationError(
            f"bad duration {text!r}: write a number and a unit (w, d, h, m, s), e.g. 90d or 6h"
        )
    seconds = sum(float(n) * _UNIT_SECONDS[u.lower()] for n, u in _DURATION.findall(cleaned))
    if seconds <= 0:
        raise ValidationError(f"bad duration {text!r}: it must be longer than zero")
    if seconds > MAX_DURATION.total_seconds():  # also inf: "1e400d"
        raise ValidationError(f"bad duration {text!r}: the longest is 1000 years (365250d)")
    return timedelta(seconds=seconds)


def _durations_in(model: type[BaseModel], raw: Any) -> Any:
    """Turn '72h'-style strings into timedeltas wherever `model` has a timedelta field,
    and merge partial tables (one half-life) into their defaults, leaving everything
    else for pydantic to check (unknown keys included)."""
    if not isinstance(raw, Mapping):
        return raw
    out: dict[str, Any] = {}
    for key, value in raw.items():
        field = model.model_fields.get(key)
        annotation = field.annotation if field is not None else None
        if annotation is timedelta and isinstance(value, str) and _DURATION.search(value):
            with contextlib.suppress(ValidationError):  # not ours: pydantic parses ISO 8601
                value = parse_duration(value)
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            value = _durations_in(annotation, value)
        elif field is not None and isinstance(value, Mapping):
            default = field.get_default(call_default_factory=True)
            if isinstance(default, dict):  # override one half-life, keep the others
                value = {**default, **value}
        out[key] = value
    return out


# -- where data lives ----------------------------------------------------------------------


def default_data_dir() -> Path:
    """The user's data folder: $XDG_DATA_HOME/tiered-memory, else the platform's usual
    place (~/.local/share, ~/Library/Application Support, %LOCALAPPDATA%)."""
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg).expanduser() / APP_NAME
    if sys.platform == "win32":  # pragma: no cover - platform specific
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / APP_NAME
    if sys.platform == "darwin":  # pragma: no cover - platform specific
        return Path.home() / "Library" / "Application Support" / APP_NAME
    return Path.home() / ".local" / "share" / APP_NAME


def default_config_file() -> Path:
    """$XDG_CONFIG_HOME/tiered-memory/config.toml (read only if it exists)."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / APP_NAME / "config.toml"


# -- settings sections ---------------------------------------------------------------------

_SECTION = ConfigDict(extra="forbid", frozen=True)


class WeaviateSettings(BaseModel):
    model_config = _SECTION

    url: str = "http://localhost:8080"
    api_key: SecretStr | None = None
    prefix: str = Field(default="TieredMemory", description="names the collections")
    grpc_port: int = 50051
    grpc_host: str | None = Field(default=None, description="default: the URL's host")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="e.g. a vectoriser module's API key"
    )
    cold_quantizer: Literal["none", "bq"] = "none"


class StoreSettings(BaseModel):
    """Records, vectors and archive records."""

    model_config = _SECTION

    backend: Literal["sqlite", "weaviate"] = "sqlite"
    path: Path | None = Field(default=None, description="SQLite file; default <data_dir>/memory.db")
    weaviate: WeaviateSettings = WeaviateSettings()


class Neo4jSettings(BaseModel):
    model_config = _SECTION

    uri: str = "bolt://localhost:7687"
    user: str = "neo4j"
    password: SecretStr | None = None
    database: str | None = None


class GraphSettings(BaseModel):
    """Associations. `sqlite` shares the store's file; with another store it gets its own
    file (`path`, default <data_dir>/graph.db)."""

    model_config = _SECTION

    backend: Literal["sqlite", "neo4j"] = "sqlite"
    path: Path | None = None
    neo4j: Neo4jSettings = Neo4jSettings()


class S3Settings(BaseModel):
    model_config = _SECTION

    bucket: str | None = None
    prefix: str = "tiered-memory"
    endpoint_url: str | None = Field(default=None, description="R2, MinIO, ...")
    region: str | None = None
    path_style: bool = False
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    profile: str | None = None


class ObjectSettings(BaseModel):
    """Archived originals."""

    model_config = _SECTION

    backend: Literal["local", "s3"] = "local"
    path: Path | None = Field(
        default=None, description="folder; default <store file>.archive, or <data_dir>/archive"
    )
    s3: S3Settings = S3Settings()


class AnthropicSettings(BaseModel):
    model_config = _SECTION

    api_key: SecretStr | None = Field(default=None, description="default: ANTHROPIC_API_KEY")
    model: str | None = None
    base_url: str | None = None
    fallback_to_extractive: bool = True


class SummarizerSettings(BaseModel):
    model_config = _SECTION

    backend: Literal["extractive", "anthropic"] = "extractive"
    anthropic: AnthropicSettings = AnthropicSettings()


class EmbedderSettings(BaseModel):
    """`hashing` needs nothing and is deterministic; `local` is a sentence-transformers
    model (the [local] extra), loaded from disk only."""

    model_config = _SECTION

    backend: Literal["hashing", "local"] = "hashing"
    dimension: int = Field(default=384, ge=8, description="hashing only")
    model: str | None = Field(default=None, description="local: a folder or a cached name")
    device: str = "cpu"
    batch_size: int = Field(default=64, ge=1)


# A TOML file read by `load_settings`, handed to the settings class for one construction.
_TOML_DATA: ContextVar[Mapping[str, Any] | None] = ContextVar("_TOML_DATA", default=None)


class TieredMemorySettings(BaseSettings):
    """Everything a deployment chooses: backends, their addresses and credentials, where
    embedded data lives, and the `Policy` (tiers, weights, budgets, ...)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
    )

    data_dir: Path | None = Field(default=None, description="default: the user's data folder")
    namespace: str = "default"
    store: StoreSettings = StoreSettings()
    graph: GraphSettings = GraphSettings()
    objects: ObjectSettings = ObjectSettings()
    summarizer: SummarizerSettings = SummarizerSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    policy: Policy = Policy()

    @field_validator("policy", mode="before")
    @classmethod
    def _policy_durations(cls, value: Any) -> Any:
        return _durations_in(Policy, value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # No .env or secrets folder: the caller decides which files configure a library.
        toml = InitSettingsSource(settings_cls, init_kwargs=dict(_TOML_DATA.get() or {}))
        return (init_settings, env_settings, toml)

    def resolved_data_dir(self) -> Path:
        return (self.data_dir or default_data_dir()).expanduser()

    def resolved_db_path(self) -> Path:
        """The embedded SQLite file (store, and graph unless configured elsewhere)."""
        return (self.store.path or self.resolved_data_dir() / DEFAULT_DB_NAME).expanduser()


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError as e:
            raise MissingDependencyError(
                "reading a TOML config on Python 3.10 needs tomli: pip install tomli"
            ) from e
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError as e:
        raise ConfigurationError(f"config file {str(path)!r} does not exist") from e
    except OSError as e:
        raise ConfigurationError(f"cannot read config file {str(path)!r}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"config file {str(path)!r} is not valid TOML: {e}") from e


def _unknown_env_keys(environ: Mapping[str, str]) -> list[str]:
    """pydantic-settings ignores prefixed variables that match no field; a misspelt
    TIERED_MEMORY_STOR__BACKEND must not silently mean 'use the default store'."""
    known = {name.upper() for name in TieredMemorySettings.model_fields} | _NOT_SETTINGS
    unknown: list[str] = []
    for key in environ:
        upper = key.upper()
        if upper.startswith(ENV_PREFIX):
            top = upper[len(ENV_PREFIX) :].split("__", 1)[0]
            if top not in known:
                unknown.append(key)
    return sorted(unknown)


def _one_line(error: PydanticValidationError, where: str) -> str:
    parts = []
    for item in error.errors():
        loc = ".".join(str(x) for x in item["loc"]) or "settings"
        message = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        parts.append(f"{loc}: {message}")
    return f"invalid configuration ({where}): " + "; ".join(parts)


def load_settings(
    config: str | os.PathLike[str] | None = None, **overrides: Any
) -> TieredMemorySettings:
    """Read the settings now: `config` (else $TIERED_MEMORY_CONFIG, else the user's
    config.toml if it exists), then the environment, then `overrides`.

    Every problem is a `ConfigurationError` with one line saying which key is wrong.
    """
    environ = os.environ
    unknown = _unknown_env_keys(environ)
    if unknown:
        names = ", ".join(ENV_PREFIX + n.upper() for n in TieredMemorySettings.model_fields)
        raise ConfigurationError(
            f"unknown environment variable(s) {', '.join(unknown)}; settings are {names}"
        )
    path: Path | None
    if config is not None:
        path = Path(config).expanduser()
    elif environ.get(CONFIG_ENV):
        path = Path(environ[CONFIG_ENV]).expanduser()
    else:
        candidate = default_config_file()
        path = candidate if candidate.is_file() else None
    data = _read_toml(path) if path is not None else {}
    where = f"{path} and environment" if path is not None else "environment"
    token = _TOML_DATA.set(data)
    try:
        return TieredMemorySettings(**overrides)
    except PydanticValidationError as e:
        raise ConfigurationError(_one_line(e, where)) from e
    finally:
        _TOML_DATA.reset(token)


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
            w.db_path.with_name(w.db_path.name + ".archive")
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
        from .summarizers.extractive import ExtractiveSummarizer

        kwargs["fallback"] = ExtractiveSummarizer()
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
        "tiered_memory.backends.neo4j",
        "Neo4jAssociationGraph",
        "neo4j",
        _neo4j_graph,
        "neo4j",
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


# -- building a memory ---------------------------------------------------------------------


async def build_memory(
    settings: TieredMemorySettings | None = None,
    *,
    clock: Clock | None = None,
    embedder: Embedder | Any | None = None,
    summarizer: Summarizer | None = None,
) -> AsyncTieredMemory:
    """A wired `AsyncTieredMemory` from `settings` (default: `load_settings()`, which
    reads the environment now). `embedder=`/`summarizer=` override the configured ones,
    e.g. to pass a LangChain `Embeddings`. Close it with `await memory.close()`."""
    from .engine import AsyncTieredMemory
    from .locks import FileLock

    s = settings if settings is not None else load_settings()
    wiring = _Wiring(settings=s)
    opened: list[Any] = []
    try:
        store = await _build("store", s.store.backend, wiring)
        opened.append(store)
        wiring.store = store
        graph = await _build("graph", s.graph.backend, wiring)
        opened.append(graph)
        objects = await _build("objects", s.objects.backend, wiring)
        opened.append(objects)
        summ = summarizer or await _build("summarizer", s.summarizer.backend, wiring)
        emb = (
            embedder
            if embedder is not None
            else await _build("embedder", s.embedder.backend, wiring)
        )
    except BaseException:
        for port in reversed(opened):  # do not leak half a memory's connections
            with contextlib.suppress(Exception):
                await port.close()
        raise
    lock = (
        FileLock(wiring.db_path.with_name(wiring.db_path.name + ".sweep.lock"))
        if wiring.db_path is not None
        else None
    )
    memory = AsyncTieredMemory(
        store=store,
        graph=graph,
        objects=objects,
        summarizer=summ,
        embedder=emb,
        policy=s.policy,
        clock=clock,
        sweep_lock=lock,
    )
    return await memory._opened()  # a store of another embedding size is refused here


def build_sync_memory(
    settings: TieredMemorySettings | None = None,
    *,
    clock: Clock | None = None,
    embedder: Embedder | Any | None = None,
    summarizer: Summarizer | None = None,
) -> TieredMemory:
    """The blocking `TieredMemory` over `build_memory(...)`; close it with `close()`."""
    from .engine import TieredMemory

    return TieredMemory.from_async(
        build_memory(settings, clock=clock, embedder=embedder, summarizer=summarizer)
    )


__all__ = [
    "BACKENDS",
    "AnthropicSettings",
    "BackendSpec",
    "EmbedderSettings",
    "GraphSettings",
    "Neo4jSettings",
    "ObjectSettings",
    "S3Settings",
    "StoreSettings",
    "SummarizerSettings",
    "TieredMemorySettings",
    "WeaviateSettings",
    "backend_class",
    "build_memory",
    "build_sync_memory",
    "default_config_file",
    "default_data_dir",
    "load_settings",
    "parse_duration",
]
