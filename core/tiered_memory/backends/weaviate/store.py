"""The production MemoryStore on Weaviate (weaviate-client v4, async).

Layout. Six collections share a prefix (default `TieredMemory`):
- `<prefix>Active`: HOT and WARM memories, HNSW index: the tiers every search reads.
- `<prefix>Cold`: COLD memories, flat (brute-force) index, optionally binary-quantised:
  rarely searched, so they cost no HNSW graph in memory.
- `<prefix>Archive`: archive records, flat index over their summary embeddings; each
  keeps its memory's type, metadata (typed properties, as live memories do) and flags,
  so searches filter archived memories as they filter live ones.
- `<prefix>Archival`: the archival journal (claims, originals written, failures), one
  object per memory being archived or that failed to be, no vectors.
- `<prefix>PendingOriginals`: the originals to delete from object storage
  (`ports.PendingOriginal`), one object per original, no vectors; queued before the
  write that lets go of them, so a crash between leaves an entry whose original is
  still named, which the engine keeps (`Archiver.delete_pending`).
- `<prefix>Registry`: the embedding dimension, the namespaces whose tenant names are
  hashed (see `mapping`) and the one-time migrations done; not multi-tenant.
All but the registry are multi-tenant: each namespace is a tenant, created on its first
write, and every data call goes through `collection.with_tenant(...)`, so Weaviate
itself keeps namespaces apart. Object ids are uuid5 of (namespace, memory id), equal in
every collection: a tier move or an archival is copy-then-delete by one id, and rerunning
it overwrites rather than duplicates.

Lexical search is native BM25 over `content`, not Weaviate's hybrid query: the engine
fuses vector, lexical and graph relevance itself, min-max normalised with the same
weights on every backend, and needs the raw vector and BM25 candidates to do so (and to
explain a score). Hybrid would fuse inside Weaviate, without the graph, by its own rule.

No transactions. Weaviate has none, so `transaction()` is a no-op and every multi-step
write is ordered to converge when rerun after a crash:
- tier moves write the target copy, then delete the source; a reader that finds both
  copies takes the one with the later `tier_changed_at`, and the next move cleans up;
- `archive_many` writes the archive record, then deletes the live object, and readers
  treat an id present in the archive as archived, so a crash between the two steps
  leaves a memory that is archived, never one that is both or neither;
- `unarchive_many` writes the live object, then deletes the record; until the second
  step lands, the memory still reads as archived and a rerun finishes the restore.

Batches. Reads fetch many ids per request (`read_batch_size`). Weaviate has no batched
partial update, so patches, uses and tier moves read the affected memories (one request
per batch) and write them back whole with one batch upsert; per-object failures are
collected into a `WeaviateWriteError`. The read-modify-write is not atomic: two
processes counting uses of one memory at the same moment can lose one increment
(last write wins), which use counts tolerate and which the engine's single sweep lock
avoids for tier moves.

Limits: a query returns at most Weaviate's QUERY_MAXIMUM_RESULTS (default 10,000)
objects, so reads are chunked; gRPC messages are capped (default 10 MB), so a write
batch holds `write_batch_size` objects. Metadata keys become schema properties on first
use (one per key and value kind), so unbounded sets of distinct keys grow the schema.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlparse

import numpy as np

from tiered_memory import bookkeeping, journal
from tiered_memory.errors import (
    ConfigurationError,
    NotFoundError,
    ValidationError,
    missing_extra,
)
from tiered_memory.filters import Condition
from tiered_memory.models import (
    ACTIVE_TIERS,
    LIVE_TIERS,
    ArchiveRecord,
    Memory,
    Stats,
    Tier,
    TierStats,
)
from tiered_memory.policy import TierPolicy
from tiered_memory.ports import (
    AccessRecord,
    ArchivalFailure,
    ArchivalState,
    Matrix,
    MemoryFacts,
    MemoryPatch,
    PendingOriginal,
    ScanQuery,
    ScoredArchive,
    ScoredMemory,
    SearchFilter,
    Vector,
)
from tiered_memory.validation import check_size, check_vector

try:
    import weaviate
    from weaviate.classes.aggregate import GroupByAggregate, Metrics
    from weaviate.classes.config import Configure, VectorDistances
    from weaviate.classes.data import DataObject
    from weaviate.classes.init import AdditionalConfig
    from weaviate.classes.query import Filter, FilterReturn, MetadataQuery, Sort
    from weaviate.collections.classes.aggregate import (
        AggregateBoolean,
        AggregateInteger,
        PropertiesMetrics,
    )
    from weaviate.collections.classes.internal import Object
    from weaviate.collections.classes.types import WeaviateProperties
    from weaviate.collections.collection import CollectionAsync
    from weaviate.exceptions import WeaviateBaseError, WeaviateInsertManyAllFailedError
except ImportError as e:  # pragma: no cover - only without the [weaviate] extra
    raise missing_extra("weaviate-client", "weaviate") from e

from .errors import (
    WeaviateRequestError,
    WeaviateWriteError,
    is_missing_tenant,
    translate_error,
)
from .filters import (
    NoMatches,
    after_condition,
    all_of,
    archive_where,
    flags_unknown_where,
    ids_condition,
    metadata_condition,
    metadata_properties,
    scan_where,
    search_where,
    tier_condition,
)
from .mapping import (
    MetaKind,
    apply_patch,
    archival_from_properties,
    archival_to_properties,
    archive_from_properties,
    archive_to_properties,
    embedding_matrix,
    is_hashed_tenant,
    is_valid_tenant_name,
    memory_from_properties,
    memory_to_properties,
    metadata_kinds,
    namespace_from_tenant,
    newest_copy,
    object_uuid,
    pending_from_properties,
    pending_key,
    pending_to_properties,
    tenant_name,
)
from .schema import (
    ARCHIVAL_SCHEMA,
    ARCHIVE_SCHEMA,
    LIVE_SCHEMA,
    PENDING_SCHEMA,
    REGISTRY_SCHEMA,
    Prop,
    meta_schema,
)

__all__ = ["WeaviateMemoryStore", "WeaviateRequestError", "WeaviateWriteError"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Collection = CollectionAsync[WeaviateProperties, None]
WObject = Object[WeaviateProperties, None]

VECTOR = "default"  # the one named vector of every collection
_COLD_TIERS = frozenset({Tier.COLD})
NO_FILTER = SearchFilter()  # frozen, so one shared default is safe
_REGISTRY_UUID = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/tiered-memory/registry")
_ARCHIVE_FILTERS = "archive-filters"  # archive records got typed metadata properties
JOURNAL_PAGE = 1_000  # journal objects read per request


# -- the store ---------------------------------------------------------------------------------


@asynccontextmanager
async def _no_transaction() -> AsyncIterator[None]:
    yield


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _vector_of(obj: WObject) -> list[float] | None:
    raw = obj.vector.get(VECTOR)
    if not raw:
        return None
    return [float(x) for x in cast(list[float], raw)]  # one flat vector per object here


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class WeaviateMemoryStore:
    """MemoryStore on Weaviate; see the module docstring for layout and guarantees.

    Pass a `weaviate.WeaviateAsyncClient` (you keep ownership) or a `url` (and
    `api_key`); nothing connects until `await store.open()`, which also creates the
    schema idempotently. `close()` closes the client only if the store built it.
    """

    def __init__(
        self,
        client: weaviate.WeaviateAsyncClient | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        prefix: str = "TieredMemory",
        grpc_port: int = 50051,
        grpc_host: str | None = None,
        headers: Mapping[str, str] | None = None,
        additional_config: AdditionalConfig | None = None,
        cold_quantizer: Literal["none", "bq"] = "none",
        write_batch_size: int = 100,
        read_batch_size: int = 200,
        max_concurrency: int = 8,
        use_days_kept: int = TierPolicy().use_days_kept,
    ) -> None:
        if (client is None) == (url is None):
            raise ConfigurationError(
                "pass either client= (a weaviate.WeaviateAsyncClient) or url= "
                "(e.g. url='http://localhost:8080'), not both and not neither"
            )
        if not prefix[:1].isupper() or not prefix.isascii() or not prefix.isidentifier():
            raise ConfigurationError(
                f"prefix {prefix!r} must start with an upper-case letter and hold only "
                "ASCII letters, digits and '_' (it names Weaviate collections)"
            )
        for name, value in (
            ("write_batch_size", write_batch_size),
            ("read_batch_size", read_batch_size),
            ("max_concurrency", max_concurrency),
        ):
            if value < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {value}")
        if cold_quantizer not in ("none", "bq"):
            raise ConfigurationError("cold_quantizer must be 'none' or 'bq'")
        self._client = client
        self._owns_client = client is None
        self._url = url
        self._api_key = api_key
        self._grpc_port = grpc_port
        self._grpc_host = grpc_host
        self._headers = dict(headers) if headers else None
        self._additional_config = additional_config
        self._cold_quantizer = cold_quantizer
        self.prefix = prefix
        self.active_name = f"{prefix}Active"
        self.cold_name = f"{prefix}Cold"
        self.archive_name = f"{prefix}Archive"
        self.registry_name = f"{prefix}Registry"
        self.archival_name = f"{prefix}Archival"
        self.pending_name = f"{prefix}PendingOriginals"
        self._write_batch = write_batch_size
        self._read_batch = read_batch_size
        self._max_concurrency = max_concurrency
        self._use_days_kept = use_days_kept
        self._opened = False
        self._props: dict[str, set[str]] = {}
        self._tenants: set[tuple[str, str]] = set()  # (collection, tenant) known to exist
        self._registered: set[str] = set()  # hashed tenants written to the registry
        self._dimension: int | None = None
        self._schema_lock = asyncio.Lock()

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def client(self) -> weaviate.WeaviateAsyncClient:
        if self._client is None:
            raise ConfigurationError("the store is not open; await store.open() first")
        return self._client

    @property
    def _where(self) -> str:
        return self._url or "the given client"

    def _build_client(self) -> weaviate.WeaviateAsyncClient:
        assert self._url is not None
        parsed = urlparse(self._url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigurationError(
                f"WEAVIATE_URL {self._url!r} is not an http(s) URL; "
                "expected e.g. http://localhost:8080"
            )
        secure = parsed.scheme == "https"
        return weaviate.use_async_with_custom(
            http_host=parsed.hostname,
            http_port=parsed.port or (443 if secure else 80),
            http_secure=secure,
            grpc_host=self._grpc_host or parsed.hostname,
            grpc_port=self._grpc_port,
            grpc_secure=secure,
            headers=self._headers,
            additional_config=self._additional_config,
            auth_credentials=self._api_key,
        )

    @classmethod
    async def connect(
        cls,
        client: weaviate.WeaviateAsyncClient | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        prefix: str = "TieredMemory",
        **options: Any,
    ) -> WeaviateMemoryStore:
        """Build and open a store in one step (`options` as for the constructor)."""
        store = cls(client, url=url, api_key=api_key, prefix=prefix, **options)
        try:
            return await store.open()
        except BaseException:
            await store.close()  # a client we built must not leak
            raise

    async def open(self) -> WeaviateMemoryStore:
        """Connect (if the store owns the client) and create the schema; idempotent."""
        if self._opened:
            return self
        if self._client is None:
            self._client = self._build_client()
        with self._errors("connecting"):
            await self._client.connect()
        await self._ensure_schema()
        self._opened = True
        try:
            await self._migrate_archives()
        except BaseException:
            self._opened = False
            raise
        return self

    async def close(self) -> None:
        if self._client is not None and self._owns_client:
            try:
                with self._errors("closing the client"):
                    await self._client.close()
            finally:
                self._client = None
        self._opened = False

    async def __aenter__(self) -> WeaviateMemoryStore:
        return await self.open()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def drop(self) -> None:
        """Delete this store's collections and everything in them (tests, benchmarks)."""
        names = [
            self.active_name,
            self.cold_name,
            self.archive_name,
            self.archival_name,
            self.registry_name,
        ]
        with self._errors("deleting the collections"):
            await self.client.collections.delete(names)
        self._props.clear()
        self._tenants.clear()
        self._registered.clear()
        self._dimension = None
        self._opened = False

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except WeaviateBaseError as e:
            raise translate_error(e, action, self._where) from e

    def _use(self, name: str) -> Collection:
        if not self._opened:
            raise ConfigurationError("the store is not open; await store.open() first")
        return self.client.collections.use(name)

    # -- schema -----------------------------------------------------------------------------

    def _vector_config(self, index: Literal["hnsw", "flat"], *, quantize: bool) -> Any:
        if index == "hnsw":
            config = Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)
            return Configure.Vectors.self_provided(name=VECTOR, vector_index_config=config)
        quantizer = Configure.VectorIndex.Quantizer.bq() if quantize else None
        flat = Configure.VectorIndex.flat(
            distance_metric=VectorDistances.COSINE, quantizer=quantizer
        )
        return Configure.Vectors.self_provided(name=VECTOR, vector_index_config=flat)

    async def _ensure_schema(self) -> None:
        cold_bq = self._cold_quantizer == "bq"
        await self._ensure_collection(
            self.active_name, LIVE_SCHEMA, self._vector_config("hnsw", quantize=False), True
        )
        await self._ensure_collection(
            self.cold_name, LIVE_SCHEMA, self._vector_config("flat", quantize=cold_bq), True
        )
        await self._ensure_collection(
            self.archive_name, ARCHIVE_SCHEMA, self._vector_config("flat", quantize=False), True
        )
        await self._ensure_collection(
            self.archival_name, ARCHIVAL_SCHEMA, self._vector_config("flat", quantize=False), True
        )
        await self._ensure_collection(
            self.pending_name, PENDING_SCHEMA, self._vector_config("flat", quantize=False), True
        )
        await self._ensure_collection(
            self.registry_name, REGISTRY_SCHEMA, self._vector_config("flat", quantize=False), False
        )

    async def _ensure_collection(
        self, name: str, schema: Sequence[Prop], vectors: Any, multi_tenant: bool
    ) -> None:
        collections = self.client.collections
        with self._errors(f"checking collection {name}"):
            exists = await collections.exists(name)
        if not exists:
            try:
                await collections.create(
                    name,
                    properties=[p.build() for p in schema],
                    vector_config=vectors,
                    multi_tenancy_config=(
                        Configure.multi_tenancy(
                            enabled=True, auto_tenant_creation=True, auto_tenant_activation=True
                        )
                        if multi_tenant
                        else None
                    ),
                )
            except WeaviateBaseError as e:  # another process may have created it first
                with self._errors(f"checking collection {name}"):
                    if not await collections.exists(name):
                        raise translate_error(e, f"creating collection {name}", self._where) from e
        with self._errors(f"reading the schema of {name}"):
            config = await collections.use(name).config.get()
        if config.multi_tenancy_config.enabled != multi_tenant:
            raise ConfigurationError(
                f"collection {name} exists but was not created by this store "
                f"(multi-tenancy is {'off' if multi_tenant else 'on'}); pass another prefix="
            )
        self._props[name] = {p.name for p in config.properties}
        missing = [p for p in schema if p.name not in self._props[name]]
        await self._add_properties(name, missing)

    async def _add_properties(self, collection: str, props: Sequence[Prop]) -> None:
        for prop in props:
            try:
                await self.client.collections.use(collection).config.add_property(prop.build())
            except WeaviateBaseError as e:  # a concurrent writer may have added it
                with self._errors(f"reading the schema of {collection}"):
                    config = await self.client.collections.use(collection).config.get()
                self._props[collection] = {p.name for p in config.properties}
                if prop.name not in self._props[collection]:
                    raise translate_error(
                        e, f"adding property {prop.name} to {collection}", self._where
                    ) from e
            self._props.setdefault(collection, set()).add(prop.name)

    async def _ensure_meta(
        self, kinds: Mapping[str, MetaKind], collections: Sequence[str] | None = None
    ) -> None:
        """Typed metadata properties must exist before a write or a filter names them
        (in the live collections unless `collections` says which)."""
        for collection in collections or (self.active_name, self.cold_name):
            if all(name in self._props.get(collection, set()) for name in kinds):
                continue
            async with self._schema_lock:
                known = self._props.get(collection, set())
                missing = [meta_schema(n, k) for n, k in sorted(kinds.items()) if n not in known]
                await self._add_properties(collection, missing)

    async def _migrate_archives(self) -> None:
        """Make archive objects written before records were filterable (metadata only
        as JSON) filterable: rewrite each once through `archive_to_properties`, which
        adds the typed metadata properties. Their flags stay unknown (absent) until the
        sweep reads them from the originals (`ArchivalPipeline.backfill_flags`).

        A registry mark says it is done; a crash midway reruns it (rewrites converge).
        As with every read-modify-write here, an expansion another process writes to a
        record while it is rewritten can be lost."""
        if await self._marked(_ARCHIVE_FILTERS):
            return
        for namespace in await self.namespaces():
            after: str | None = None
            while True:
                page = await self.scan_archives(namespace, after_id=after, limit=self._read_batch)
                await self._write_records(namespace, page)
                if len(page) < self._read_batch:
                    break
                after = page[-1].id
        await self._mark(_ARCHIVE_FILTERS)

    async def _marked(self, migration: str) -> bool:
        key = self._registry_uuid(f"migration:{migration}")
        with self._errors("reading the registry"):
            result = await self._use(self.registry_name).query.fetch_objects(
                filters=Filter.by_id().equal(key), limit=1
            )
        return bool(result.objects)

    async def _mark(self, migration: str) -> None:
        key = self._registry_uuid(f"migration:{migration}")
        props = {"kind": "migration", "tenant": migration, "value": "done"}
        await self._upsert(self.registry_name, None, [(key, props, None, migration)])

    # -- tenants ----------------------------------------------------------------------------

    async def _has_tenant(self, collection: str, tenant: str) -> bool:
        if (collection, tenant) in self._tenants:
            return True
        with self._errors(f"looking up tenant {tenant} of {collection}"):
            exists = await self._use(collection).tenants.exists(tenant)
        if exists:
            self._tenants.add((collection, tenant))
        return exists

    async def _ensure_tenant(self, namespace: str, collection: str) -> str:
        """The tenant of `namespace` in `collection`, created (and registered) if new."""
        tenant = tenant_name(namespace)
        if is_hashed_tenant(tenant) and tenant not in self._registered:
            props = {"kind": "namespace", "tenant": tenant, "value": namespace}
            await self._upsert(
                self.registry_name, None, [(self._registry_uuid(tenant), props, None, tenant)]
            )
            self._registered.add(tenant)
        if await self._has_tenant(collection, tenant):
            return tenant
        try:
            await self._use(collection).tenants.create([tenant])
        except WeaviateBaseError as e:  # created concurrently, or by auto-creation
            if not await self._has_tenant(collection, tenant):
                raise translate_error(e, f"creating tenant {tenant}", self._where) from e
        self._tenants.add((collection, tenant))
        return tenant

    @staticmethod
    def _registry_uuid(key: str) -> uuid.UUID:
        return uuid.uuid5(_REGISTRY_UUID, key)

    # -- low-level reads and writes ---------------------------------------------------------

    async def _read(
        self,
        collection: str,
        namespace: str,
        action: str,
        call: Callable[[Collection], Awaitable[T]],
    ) -> T | None:
        """Run a read in the namespace's tenant; None when the tenant does not exist."""
        return await self._read_tenant(collection, tenant_name(namespace), action, call)

    async def _read_tenant(
        self,
        collection: str,
        tenant: str,
        action: str,
        call: Callable[[Collection], Awaitable[T]],
    ) -> T | None:
        if not await self._has_tenant(collection, tenant):
            return None
        try:
            return await call(self._use(collection).with_tenant(tenant))
        except WeaviateBaseError as e:
            if is_missing_tenant(e):  # cleared by another process since we looked
                self._tenants.discard((collection, tenant))
                return None
            raise translate_error(e, action, self._where) from e

    async def _fetch_ids(
        self,
        collection: str,
        namespace: str,
        ids: Sequence[str],
        *,
        vectors: bool = False,
        properties: bool = True,
    ) -> list[WObject]:
        out: list[WObject] = []
        for chunk in _chunks(_unique(ids), self._read_batch):
            where = ids_condition(namespace, chunk)

            async def call(c: Collection, where: FilterReturn = where, n: int = len(chunk)) -> Any:
                return await c.query.fetch_objects(
                    filters=where,
                    limit=n,
                    include_vector=[VECTOR] if vectors else False,
                    return_properties=None if properties else [],
                )

            result = await self._read(collection, namespace, f"reading {collection}", call)
            if result is not None:
                out.extend(result.objects)
        return out

    async def _present(self, collection: str, namespace: str, ids: Sequence[str]) -> set[str]:
        """Which of `ids` have an object in `collection` (ids only, no properties)."""
        by_uuid = {object_uuid(namespace, i): i for i in ids}
        objects = await self._fetch_ids(collection, namespace, ids, properties=False)
        return {by_uuid[o.uuid] for o in objects if o.uuid in by_uuid}

    async def _upsert(
        self,
        collection: str,
        namespace: str | None,
        rows: Sequence[tuple[uuid.UUID, dict[str, Any], list[float] | None, str]],
    ) -> None:
        """Batch-write (insert or replace) `(uuid, properties, vector, label)` rows.

        Raises WeaviateWriteError naming every rejected row by its label.
        """
        if not rows:
            return
        base = self._use(collection)
        tenant = await self._ensure_tenant(namespace, collection) if namespace is not None else None
        target = base.with_tenant(tenant) if tenant is not None else base
        failures: dict[str, str] = {}
        for chunk in _chunks(rows, self._write_batch):
            objects = [
                DataObject(
                    properties=props,
                    uuid=uid,
                    vector={VECTOR: vector} if vector is not None else None,
                )
                for uid, props, vector, _ in chunk
            ]
            try:
                result = await target.data.insert_many(objects)
            except WeaviateInsertManyAllFailedError as e:
                failures.update({label: e.message for *_, label in chunk})
                continue
            except WeaviateBaseError as e:
                raise translate_error(e, f"writing to {collection}", self._where) from e
            for index, error in result.errors.items():
                failures[chunk[index][3]] = error.message
        if failures:
            sample = "; ".join(f"{k}: {v}" for k, v in list(failures.items())[:5])
            raise WeaviateWriteError(
                f"Weaviate rejected {len(failures)} of {len(rows)} objects written to "
                f"{collection} ({sample})",
                failures,
            )

    async def _delete(self, collection: str, namespace: str, ids: Sequence[str]) -> int:
        deleted = 0
        for chunk in _chunks(_unique(ids), self._read_batch):
            where = ids_condition(namespace, chunk)

            async def call(c: Collection, where: FilterReturn = where) -> Any:
                return await c.data.delete_many(where=where)

            result = await self._read(collection, namespace, f"deleting from {collection}", call)
            if result is not None:
                deleted += int(result.successful)
        return deleted

    def _live_collection(self, tier: Tier) -> str:
        if tier in ACTIVE_TIERS:
            return self.active_name
        if tier is Tier.COLD:
            return self.cold_name
        raise ValidationError(f"{tier.value} is not a live tier (HOT, WARM or COLD)")

    def _live_collections(self, tiers: frozenset[Tier]) -> list[tuple[str, frozenset[Tier]]]:
        out: list[tuple[str, frozenset[Tier]]] = []
        if tiers & ACTIVE_TIERS:
            out.append((self.active_name, ACTIVE_TIERS))
        if Tier.COLD in tiers:
            out.append((self.cold_name, _COLD_TIERS))
        return out

    # -- settling what a crash may have left ------------------------------------------------

    async def _live_copies(
        self, namespace: str, ids: Sequence[str], *, vectors: bool
    ) -> dict[str, list[Memory]]:
        """Every live copy of each id (normally one; two after a crashed tier move)."""
        found = await asyncio.gather(
            *(
                self._fetch_ids(name, namespace, ids, vectors=vectors)
                for name in (self.active_name, self.cold_name)
            )
        )
        copies: dict[str, list[Memory]] = {}
        for objects in found:
            for obj in objects:
                memory = memory_from_properties(
                    obj.properties, namespace=namespace, vector=_vector_of(obj) if vectors else None
                )
                copies.setdefault(memory.id, []).append(memory)
        return copies

    async def _current(
        self, namespace: str, ids: Sequence[str], *, vectors: bool
    ) -> tuple[dict[str, Memory], dict[str, list[Memory]]]:
        """The current live memory of each id, archived ids excluded, and all copies."""
        copies, archived = await asyncio.gather(
            self._live_copies(namespace, ids, vectors=vectors),
            self._present(self.archive_name, namespace, ids),
        )
        current = {i: newest_copy(c) for i, c in copies.items() if i not in archived}
        return current, copies

    async def _settle(self, namespace: str, memories: Sequence[Memory]) -> dict[str, Memory]:
        """Check query results against the other collections: drop archived ids, and
        replace a memory that also has a newer copy elsewhere by that copy."""
        ids = _unique([m.id for m in memories])
        if not ids:
            return {}
        in_active, in_cold, archived = await asyncio.gather(
            self._present(self.active_name, namespace, ids),
            self._present(self.cold_name, namespace, ids),
            self._present(self.archive_name, namespace, ids),
        )
        settled = {m.id: m for m in memories if m.id not in archived}
        doubled = sorted((in_active & in_cold) - archived)
        if doubled:
            copies = await self._live_copies(namespace, doubled, vectors=False)
            for memory_id, found in copies.items():
                settled[memory_id] = newest_copy(found)
        return settled

    # -- MemoryStore: dimension and writes --------------------------------------------------

    async def dimension(self) -> int | None:
        if self._dimension is not None:
            return self._dimension
        key = self._registry_uuid("dimension")
        with self._errors("reading the embedding dimension"):
            result = await self._use(self.registry_name).query.fetch_objects(
                filters=Filter.by_id().equal(key), limit=1
            )
        for obj in result.objects:
            self._dimension = int(str(obj.properties.get("value")))
        return self._dimension

    async def ensure_dimension(self, dimension: int) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise ConfigurationError(
                f"an embedding dimension is a positive integer, not {dimension!r}"
            )
        stored = await self.dimension()
        if stored == dimension:
            return
        if stored is not None and await self.namespaces():
            raise ConfigurationError(
                f"the Weaviate collections {self.prefix}* hold {stored}-d embeddings, not "
                f"{dimension}-d ones: use the embedding model that wrote them (or "
                f"dimension={stored}), or another prefix="
            )
        await self._record_dimension(dimension)

    async def _record_dimension(self, dimension: int) -> None:
        props = {"kind": "dimension", "value": str(dimension)}
        await self._upsert(
            self.registry_name, None, [(self._registry_uuid("dimension"), props, None, "dim")]
        )
        self._dimension = dimension

    async def _query_vector(self, query: Vector) -> list[float]:
        """The query as floats. It is finite and flat (the engine's boundary checked
        it); only its size is compared, with what this store holds."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        dim = await self.dimension()
        if dim is not None:
            check_size(vector, dim, what="query")
        return [float(x) for x in vector]

    async def _check_dimension(self, vectors: Sequence[Sequence[float] | None]) -> None:
        """Every vector must have the recorded dimension (`ensure_dimension`); a store
        used without the engine, which records none, takes its first vector's."""
        given = [v for v in vectors if v is not None]
        if not given:
            return
        dim = await self.dimension()
        for v in given:
            check_vector(v, dim if dim is not None else len(given[0]))
        if dim is None:
            await self._record_dimension(len(given[0]))

    @staticmethod
    def _check_live(memories: Sequence[Memory]) -> None:
        """The `namespace` argument decides where a memory goes (its tenant), not the
        model's own field; reads report the argument back."""
        seen: set[str] = set()
        for m in memories:
            if m.tier not in LIVE_TIERS:
                raise ValidationError(f"memory {m.id!r} has tier {m.tier.value}; expected live")
            if m.id in seen:
                raise ValidationError(f"id {m.id!r} appears twice in one call")
            seen.add(m.id)

    async def _write_live(self, namespace: str, memories: Sequence[Memory]) -> None:
        kinds: dict[str, MetaKind] = {}
        for m in memories:
            kinds.update(metadata_kinds(m.metadata))
        if kinds:
            await self._ensure_meta(kinds)
        by_collection: dict[str, list[Memory]] = {}
        for m in memories:
            by_collection.setdefault(self._live_collection(m.tier), []).append(m)
        for collection, group in by_collection.items():
            rows = [
                (object_uuid(namespace, m.id), memory_to_properties(m), m.embedding, m.id)
                for m in group
            ]
            await self._upsert(collection, namespace, rows)

    async def put_many(self, namespace: str, memories: Sequence[Memory]) -> None:
        if not memories:
            return
        self._check_live(memories)
        for m in memories:
            if m.embedding is None:
                raise ValidationError(f"memory {m.id!r} has no embedding; put_many needs one")
        ids = [m.id for m in memories]
        taken = await asyncio.gather(
            *(self._present(c, namespace, ids) for c in self._all_collections())
        )
        clash = sorted(set().union(*taken))
        if clash:
            raise ValidationError(f"ids already exist in {namespace!r}: {clash[:5]}")
        await self._check_dimension([m.embedding for m in memories])
        await self._write_live(namespace, memories)

    async def replace_many(self, namespace: str, memories: Sequence[Memory]) -> list[ArchiveRecord]:
        """Without transactions, ordered so that a failure keeps the old value: the new
        objects are written first (an object of the same id in the same collection is
        replaced in place, and one Weaviate rejects leaves the old one), then the copies
        in the other live collection and the archive records go. Until the archive
        record goes, an id that was archived reads as archived, its old value; a
        rerun finishes the replace.

        The journal rows of the replaced memories go right after the new objects are
        written (as the SQLite trigger deletes them with the old rows): an archival
        drafted from the old value loses its claim and cannot commit it over the new
        one. Their noted originals are the caller's to delete (`Writer._replace`)."""
        if not memories:
            return []
        self._check_live(memories)
        for m in memories:
            if m.embedding is None:
                raise ValidationError(f"memory {m.id!r} has no embedding; replace_many needs one")
        await self._check_dimension([m.embedding for m in memories])
        archived = await self.get_archives(namespace, [m.id for m in memories])
        await self._write_live(namespace, memories)
        await self._delete(self.archival_name, namespace, _unique([m.id for m in memories]))
        stale: dict[str, list[str]] = {}
        for m in memories:
            other = self.cold_name if m.tier in ACTIVE_TIERS else self.active_name
            stale.setdefault(other, []).append(m.id)
        for collection, ids in stale.items():
            await self._delete(collection, namespace, ids)
        if archived:
            await self._delete(self.archive_name, namespace, sorted(archived))
        return [archived[i] for i in sorted(archived)]

    def _all_collections(self) -> tuple[str, str, str]:
        return (self.active_name, self.cold_name, self.archive_name)

    async def get_many(
        self, namespace: str, ids: Sequence[str], *, with_embeddings: bool = False
    ) -> dict[str, Memory]:
        if not ids:
            return {}
        current, _ = await self._current(namespace, ids, vectors=with_embeddings)
        return current

    async def _rewrite(
        self,
        namespace: str,
        ids: Sequence[str],
        change: Callable[[Memory], Memory],
    ) -> tuple[int, int]:
        """Read, change and write back memories whole; also removes stale duplicate
        copies. Returns (memories found, memories whose tier changed)."""
        current, copies = await self._current(namespace, _unique(ids), vectors=True)
        if not current:
            return 0, 0
        updated = {i: change(m) for i, m in current.items()}
        await self._write_live(namespace, list(updated.values()))
        stale: dict[str, list[str]] = {}
        moved = 0
        for memory_id, memory in updated.items():
            target = self._live_collection(memory.tier)
            if memory.tier is not current[memory_id].tier:
                moved += 1
            for copy in copies[memory_id]:
                source = self._live_collection(copy.tier)
                if source != target:
                    stale.setdefault(source, []).append(memory_id)
        for collection, stale_ids in stale.items():
            await self._delete(collection, namespace, stale_ids)
        return len(updated), moved

    async def patch_many(self, namespace: str, ids: Sequence[str], patch: MemoryPatch) -> int:
        if patch.clear_superseded and patch.superseded_by is not None:
            raise ValidationError("a patch cannot both set superseded_by and clear it")
        found, _ = await self._rewrite(namespace, ids, lambda m: apply_patch(m, patch))
        return found

    async def delete_many(self, namespace: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        current, copies = await self._current(namespace, _unique(ids), vectors=False)
        if not copies:
            return 0
        live = sorted(copies)
        await asyncio.gather(
            self._delete(self.active_name, namespace, live),
            self._delete(self.cold_name, namespace, live),
        )
        await self._delete(self.archival_name, namespace, live)  # their journal rows go too
        return len(current)

    async def set_tier(self, namespace: str, ids: Sequence[str], tier: Tier, when: datetime) -> int:
        move = bookkeeping.tier_move(tier, when)
        _, moved = await self._rewrite(namespace, ids, lambda m: bookkeeping.moved(m, move))
        return moved

    async def record_access(self, namespace: str, accesses: Sequence[AccessRecord]) -> None:
        uses = bookkeeping.uses_by_id(accesses)
        if not uses:
            return
        keep = self._use_days_kept
        await self._rewrite(
            namespace, list(uses), lambda m: bookkeeping.used(m, uses[m.id], keep_days=keep)
        )

    # -- MemoryStore: searches and scans ----------------------------------------------------

    async def vector_search(
        self,
        namespace: str,
        query: Vector,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = NO_FILTER,
        exact_scores: bool = True,  # Weaviate's distances are its own either way
    ) -> list[ScoredMemory]:
        if k < 1:
            return []
        vector = await self._query_vector(query)
        await self._ensure_meta(metadata_properties(filters.metadata))

        async def one(collection: str, held: frozenset[Tier]) -> list[ScoredMemory]:
            try:
                where = search_where(namespace, tiers, held, filters)
            except NoMatches:
                return []

            async def call(c: Collection) -> Any:
                return await c.query.near_vector(
                    near_vector=vector,
                    target_vector=VECTOR,
                    limit=k,
                    filters=where,
                    return_metadata=MetadataQuery(distance=True),
                )

            result = await self._read(collection, namespace, "searching by vector", call)
            if result is None:
                return []
            return [
                ScoredMemory(
                    memory_from_properties(o.properties, namespace=namespace),
                    1.0 - float(o.metadata.distance if o.metadata.distance is not None else 1.0),
                )
                for o in result.objects
            ]

        return await self._merge(namespace, tiers, k, self._live_collections(tiers), one)

    async def lexical_search(
        self,
        namespace: str,
        text: str,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = NO_FILTER,
    ) -> list[ScoredMemory]:
        """BM25 per collection. Scores of HOT/WARM and COLD hits come from separate
        indexes (separate term statistics); the engine searches them in separate phases."""
        if k < 1 or not any(ch.isalnum() for ch in text):
            return []  # no word to match (Weaviate's tokenizer keeps letters and digits)
        await self._ensure_meta(metadata_properties(filters.metadata))

        async def one(collection: str, held: frozenset[Tier]) -> list[ScoredMemory]:
            try:
                where = search_where(namespace, tiers, held, filters)
            except NoMatches:
                return []

            async def call(c: Collection) -> Any:
                return await c.query.bm25(
                    query=text,
                    query_properties=["content"],
                    limit=k,
                    filters=where,
                    return_metadata=MetadataQuery(score=True),
                )

            result = await self._read(collection, namespace, "searching by BM25", call)
            if result is None:
                return []
            return [
                ScoredMemory(
                    memory_from_properties(o.properties, namespace=namespace),
                    max(0.0, float(o.metadata.score or 0.0)),
                )
                for o in result.objects
            ]

        return await self._merge(namespace, tiers, k, self._live_collections(tiers), one)

    async def _merge(
        self,
        namespace: str,
        tiers: frozenset[Tier],
        k: int,
        collections: Sequence[tuple[str, frozenset[Tier]]],
        one: Callable[[str, frozenset[Tier]], Awaitable[list[ScoredMemory]]],
    ) -> list[ScoredMemory]:
        found = await asyncio.gather(*(one(name, held) for name, held in collections))
        hits = sorted((h for part in found for h in part), key=lambda h: h.score, reverse=True)
        settled = await self._settle(namespace, [h.memory for h in hits])
        out: list[ScoredMemory] = []
        seen: set[str] = set()
        for hit in hits:
            memory = settled.get(hit.memory.id)
            if memory is None or memory.id in seen or memory.tier not in tiers:
                continue
            seen.add(memory.id)
            out.append(ScoredMemory(memory, hit.score))
        return out[:k]

    async def scan(self, namespace: str, query: ScanQuery) -> list[Memory]:
        if query.limit < 1:
            return []
        await self._ensure_meta(metadata_properties(query.metadata))

        async def one(collection: str, held: frozenset[Tier]) -> list[Memory]:
            try:
                where = scan_where(query, held)
            except NoMatches:
                return []

            async def call(c: Collection) -> Any:
                return await c.query.fetch_objects(
                    filters=where, sort=Sort.by_property("id_key"), limit=query.limit
                )

            result = await self._read(collection, namespace, "scanning", call)
            if result is None:
                return []
            return [
                memory_from_properties(o.properties, namespace=namespace) for o in result.objects
            ]

        parts = await asyncio.gather(
            *(one(name, held) for name, held in self._live_collections(query.tiers))
        )
        page = sorted((m for part in parts for m in part), key=lambda m: m.id)[: query.limit]
        settled = await self._settle(namespace, page)
        out: list[Memory] = []
        seen: set[str] = set()
        for m in page:
            current = settled.get(m.id)
            if current is not None and current.tier in query.tiers and m.id not in seen:
                seen.add(m.id)
                out.append(current)
        return out

    # The sweep's column reads. Weaviate returns whole objects either way, and `scan`
    # already checks each page against the other collections (`_settle`), so these are
    # `scan` and `get_many` with the answer reshaped: the sweep's saving on this backend
    # is in the arithmetic it does on columns, not in the reads.

    async def scan_ids(self, namespace: str, query: ScanQuery) -> list[str]:
        return [m.id for m in await self.scan(namespace, query)]

    async def scan_facts(
        self, namespace: str, query: ScanQuery, *, use_days: bool = False
    ) -> MemoryFacts:
        return MemoryFacts.of(await self.scan(namespace, query), use_days=use_days)

    async def embeddings(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], Matrix]:
        if not ids:
            return embedding_matrix([], {})
        found = await self.get_many(namespace, _unique(ids), with_embeddings=True)
        return embedding_matrix(ids, found)

    async def list_ids(
        self,
        namespace: str,
        *,
        tiers: frozenset[Tier] | None = None,
        after_id: str | None = None,
        limit: int = 1000,
    ) -> list[str]:
        wanted = LIVE_TIERS if tiers is None else frozenset(tiers)
        if limit < 1:
            return []
        targets = self._live_collections(wanted)
        if Tier.ARCHIVED in wanted:
            targets.append((self.archive_name, frozenset({Tier.ARCHIVED})))

        async def one(collection: str, held: frozenset[Tier]) -> list[str]:
            try:
                parts = [after_condition(after_id)]
                if collection == self.active_name:
                    parts.append(tier_condition(wanted, held))
            except NoMatches:
                return []
            where = all_of([p for p in parts if p is not None])

            async def call(c: Collection) -> Any:
                return await c.query.fetch_objects(
                    filters=where,
                    sort=Sort.by_property("id_key"),
                    limit=limit,
                    return_properties=["memory_id", "tier"],
                )

            result = await self._read(collection, namespace, "listing ids", call)
            if result is None:
                return []
            return [str(o.properties["memory_id"]) for o in result.objects]

        found = await asyncio.gather(*(one(name, held) for name, held in targets))
        ids = sorted(set().union(*found))[:limit]
        if Tier.ARCHIVED in wanted or not ids:
            return ids
        archived = await self._present(self.archive_name, namespace, ids)
        return [i for i in ids if i not in archived]

    async def stats(self, namespace: str) -> Stats:
        metrics: PropertiesMetrics = [
            Metrics("pinned").boolean(total_true=True),
            Metrics("core").boolean(total_true=True),
            Metrics("do_not_inject").boolean(total_true=True),
            Metrics("approx_bytes").integer(sum_=True),
        ]

        async def grouped(c: Collection) -> Any:
            return await c.aggregate.over_all(
                total_count=True, group_by=GroupByAggregate(prop="tier"), return_metrics=metrics
            )

        async def whole(c: Collection) -> Any:
            return await c.aggregate.over_all(total_count=True, return_metrics=metrics)

        async def archived(c: Collection) -> Any:
            return await c.aggregate.over_all(
                total_count=True, return_metrics=[Metrics("approx_bytes").integer(sum_=True)]
            )

        active, cold, archive = await asyncio.gather(
            self._read(self.active_name, namespace, "counting", grouped),
            self._read(self.cold_name, namespace, "counting", whole),
            self._read(self.archive_name, namespace, "counting", archived),
        )
        stats = Stats(namespace=namespace, tiers={t: TierStats() for t in Tier})
        rows: list[tuple[Tier, Any]] = []
        if active is not None:
            rows += [(Tier(str(g.grouped_by.value)), g) for g in active.groups]
        if cold is not None:
            rows.append((Tier.COLD, cold))
        for tier, row in rows:
            stats.tiers[tier] = TierStats(
                count=row.total_count or 0, bytes=_sum(row, "approx_bytes")
            )
            stats.pinned += _true(row, "pinned")
            stats.core += _true(row, "core")
            stats.forgotten += _true(row, "do_not_inject")
        if archive is not None:
            stats.tiers[Tier.ARCHIVED] = TierStats(
                count=archive.total_count or 0, bytes=_sum(archive, "approx_bytes")
            )
        return stats

    async def namespaces(self) -> list[str]:
        tenants: set[str] = set()
        for collection in self._all_collections():
            with self._errors(f"listing tenants of {collection}"):
                found = await self._use(collection).tenants.get()
            tenants.update(found)
            self._tenants.update((collection, t) for t in found)
        limit = asyncio.Semaphore(self._max_concurrency)

        async def holds_data(tenant: str) -> bool:
            async with limit:
                for collection in self._all_collections():
                    if (collection, tenant) not in self._tenants:
                        continue
                    count = await self._read_tenant(collection, tenant, "counting", _count)
                    if count:
                        return True
                return False

        names = sorted(t for t in tenants if is_valid_tenant_name(t))
        flags = await asyncio.gather(*(holds_data(t) for t in names))
        occupied = [t for t, ok in zip(names, flags, strict=True) if ok]
        return await self._namespaces_of(occupied, warn=True)

    async def _namespaces_of(self, tenants: Sequence[str], *, warn: bool) -> list[str]:
        """The namespaces `tenants` stand for, sorted: a hashed tenant's from the
        registry, another's decoded from its name; a tenant this store did not make is
        left out (and logged when `warn`)."""
        hashed = await self._registry_namespaces([t for t in tenants if is_hashed_tenant(t)])
        out: list[str] = []
        for tenant in tenants:
            try:
                namespace = hashed.get(tenant) if is_hashed_tenant(tenant) else None
                namespace = namespace or namespace_from_tenant(tenant)
            except ValidationError:
                if warn:
                    log.warning("ignoring tenant %r not created by this store", tenant)
                continue
            if namespace is not None:
                out.append(namespace)
        return sorted(out)

    async def _registry_namespaces(self, tenants: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for chunk in _chunks(list(tenants), self._read_batch):
            where = Filter.by_property("tenant").contains_any(list(chunk)) & Filter.by_property(
                "kind"
            ).equal("namespace")
            with self._errors("reading the namespace registry"):
                result = await self._use(self.registry_name).query.fetch_objects(
                    filters=where, limit=len(chunk)
                )
            for obj in result.objects:
                out[str(obj.properties["tenant"])] = str(obj.properties["value"])
        return out

    # -- MemoryStore: archive records -------------------------------------------------------

    @staticmethod
    def _check_records(records: Sequence[ArchiveRecord]) -> None:
        seen: set[str] = set()
        for r in records:
            if r.id in seen:
                raise ValidationError(f"id {r.id!r} appears twice in one call")
            seen.add(r.id)

    async def _write_records(self, namespace: str, records: Sequence[ArchiveRecord]) -> None:
        await self._check_dimension([r.summary_embedding for r in records])
        kinds: dict[str, MetaKind] = {}
        for r in records:
            kinds.update(metadata_kinds(r.metadata))
        if kinds:
            await self._ensure_meta(kinds, (self.archive_name,))
        rows = [
            (object_uuid(namespace, r.id), archive_to_properties(r), r.summary_embedding, r.id)
            for r in records
        ]
        await self._upsert(self.archive_name, namespace, rows)

    async def archive_many(
        self, namespace: str, records: Sequence[ArchiveRecord], *, claimant: str | None = None
    ) -> int:
        """Archive the records whose memory is live (and, with `claimant`, claimed by
        it); returns how many moved. Live copies left behind by a crash after the record
        was written are removed too, and the moved memories' journal rows last."""
        if not records:
            return 0
        self._check_records(records)
        if claimant is not None:
            rows = await self._journal(namespace, [r.id for r in records])
            records = [r for r in records if r.id in rows and rows[r.id].claimant == claimant]
            if not records:
                return 0
        current, copies = await self._current(namespace, [r.id for r in records], vectors=False)
        moving = [r for r in records if r.id in current]
        await self._write_records(namespace, moving)  # first: a crash leaves it archived
        leftover = sorted(copies)
        if leftover:
            await asyncio.gather(
                self._delete(self.active_name, namespace, leftover),
                self._delete(self.cold_name, namespace, leftover),
            )
        if moving:
            await self._delete(self.archival_name, namespace, [r.id for r in moving])
        return len(moving)

    async def get_archives(self, namespace: str, ids: Sequence[str]) -> dict[str, ArchiveRecord]:
        if not ids:
            return {}
        objects = await self._fetch_ids(self.archive_name, namespace, ids, vectors=True)
        records = [
            archive_from_properties(o.properties, namespace=namespace, vector=_vector_of(o))
            for o in objects
        ]
        return {r.id: r for r in records}

    async def search_archives(
        self, namespace: str, query: Vector, *, k: int, filters: SearchFilter = NO_FILTER
    ) -> list[ScoredArchive]:
        if k < 1:
            return []
        vector = await self._query_vector(query)
        await self._ensure_meta(metadata_properties(filters.metadata), (self.archive_name,))
        try:
            where = archive_where(namespace, filters)
        except NoMatches:
            return []

        async def call(c: Collection) -> Any:
            return await c.query.near_vector(
                near_vector=vector,
                target_vector=VECTOR,
                limit=k,
                filters=where,
                include_vector=[VECTOR],
                return_metadata=MetadataQuery(distance=True),
            )

        result = await self._read(self.archive_name, namespace, "searching archives", call)
        if result is None:
            return []
        return [
            ScoredArchive(
                archive_from_properties(o.properties, namespace=namespace, vector=_vector_of(o)),
                1.0 - float(o.metadata.distance if o.metadata.distance is not None else 1.0),
            )
            for o in result.objects
        ]

    async def update_archive(self, namespace: str, record: ArchiveRecord) -> None:
        self._check_records([record])
        if record.id not in await self._present(self.archive_name, namespace, [record.id]):
            raise NotFoundError(f"no archive record {record.id!r} in namespace {namespace!r}")
        await self._write_records(namespace, [record])

    async def unarchive_many(self, namespace: str, memories: Sequence[Memory]) -> int:
        """Restore the memories that have an archive record; returns how many moved."""
        if not memories:
            return 0
        self._check_live(memories)
        archived = await self._present(self.archive_name, namespace, [m.id for m in memories])
        memories = [m for m in memories if m.id in archived]
        if not memories:
            return 0
        await self._check_dimension([m.embedding for m in memories])
        await self._write_live(namespace, memories)  # first: until the record goes, archived
        stale: dict[str, list[str]] = {}
        for m in memories:
            other = self.cold_name if m.tier in ACTIVE_TIERS else self.active_name
            stale.setdefault(other, []).append(m.id)
        for collection, ids in stale.items():
            await self._delete(collection, namespace, ids)
        await self._delete(self.archive_name, namespace, [m.id for m in memories])
        return len(memories)

    async def delete_archives(self, namespace: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        present = await self._present(self.archive_name, namespace, _unique(ids))
        if present:
            await self._delete(self.archive_name, namespace, sorted(present))
        return len(present)

    async def scan_archives(
        self,
        namespace: str,
        *,
        after_id: str | None = None,
        limit: int = 500,
        flags_unknown: bool = False,
        metadata: tuple[Condition, ...] = (),
    ) -> list[ArchiveRecord]:
        if limit < 1:
            return []
        await self._ensure_meta(metadata_properties(metadata), (self.archive_name,))
        where = all_of(
            [
                p
                for p in (
                    after_condition(after_id),
                    flags_unknown_where() if flags_unknown else None,
                    *(metadata_condition(f) for f in metadata),
                )
                if p is not None
            ]
        )

        async def call(c: Collection) -> Any:
            return await c.query.fetch_objects(
                filters=where, sort=Sort.by_property("id_key"), limit=limit, include_vector=[VECTOR]
            )

        result = await self._read(self.archive_name, namespace, "scanning archives", call)
        if result is None:
            return []
        records = [
            archive_from_properties(o.properties, namespace=namespace, vector=_vector_of(o))
            for o in result.objects
        ]
        if flags_unknown:  # what the filter meant, whatever a server's null semantics
            records = [r for r in records if r.do_not_inject is None or r.superseded is None]
        return records

    # -- MemoryStore: the archival journal ---------------------------------------------------
    # The rules are `tiered_memory.journal`'s. Weaviate has no compare-and-set, so a claim
    # is written, then read back, and only what still names this claimant is held: two
    # processes claiming one memory in the same instant can both proceed, which costs a
    # second summary and an unused original, never a record that does not verify (each
    # attempt writes its own content-addressed original; `archive.original_key`).

    async def _journal(self, namespace: str, ids: Sequence[str] | None) -> dict[str, ArchivalState]:
        if ids is not None:
            objects = await self._fetch_ids(self.archival_name, namespace, ids)
        else:
            objects = await self._journal_objects(namespace)
        states = [archival_from_properties(o.properties) for o in objects]
        return {s.id: s for s in states}

    async def _journal_objects(self, namespace: str) -> list[WObject]:
        out: list[WObject] = []
        after: str | None = None
        while True:
            where = after_condition(after)

            async def call(c: Collection, where: FilterReturn | None = where) -> Any:
                return await c.query.fetch_objects(
                    filters=where, sort=Sort.by_property("id_key"), limit=JOURNAL_PAGE
                )

            result = await self._read(
                self.archival_name, namespace, "reading the archival journal", call
            )
            if result is None:
                return out
            out.extend(result.objects)
            if len(result.objects) < JOURNAL_PAGE:
                return out
            after = str(result.objects[-1].properties["memory_id"])

    async def _journal_apply(self, namespace: str, changes: journal.Changes) -> None:
        rows = [
            (object_uuid(namespace, s.id), archival_to_properties(s), None, s.id)
            for s in changes.write
        ]
        await self._upsert(self.archival_name, namespace, rows)
        if changes.delete:
            await self._delete(self.archival_name, namespace, changes.delete)

    async def archival_states(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, ArchivalState]:
        if ids is not None and not ids:
            return {}
        return await self._journal(namespace, None if ids is None else _unique(ids))

    async def claim_archival(
        self,
        namespace: str,
        ids: Sequence[str],
        *,
        claimant: str,
        until: datetime,
        now: datetime,
        replacing: Mapping[str, str] | None = None,
        release_quarantine: bool = False,
    ) -> dict[str, ArchivalState]:
        wanted = _unique(ids)
        if not wanted:
            return {}
        current, _ = await self._current(namespace, wanted, vectors=False)
        before, changes = journal.claim(
            await self._journal(namespace, wanted),
            [i for i in wanted if i in current],
            who=claimant,
            until=until,
            now=now,
            replacing=replacing,
            release_quarantine=release_quarantine,
        )
        if not before:
            return {}
        await self._journal_apply(namespace, changes)
        after = await self._journal(namespace, sorted(before))
        return {i: s for i, s in before.items() if i in after and after[i].claimant == claimant}

    async def note_archival(
        self, namespace: str, claimant: str, written: Mapping[str, str]
    ) -> set[str]:
        if not written:
            return set()
        changes = journal.note(await self._journal(namespace, list(written)), claimant, written)
        await self._journal_apply(namespace, changes)
        return {s.id for s in changes.write}

    async def release_archival(
        self,
        namespace: str,
        claimant: str,
        ids: Sequence[str],
        *,
        failures: Mapping[str, ArchivalFailure] | None = None,
        now: datetime,
        quarantine_after: int,
    ) -> list[str]:
        wanted = _unique([*ids, *(failures or {})])
        if not wanted:
            return []
        changes = journal.release(
            await self._journal(namespace, wanted),
            claimant,
            ids,
            failures=failures,
            now=now,
            quarantine_after=quarantine_after,
        )
        await self._journal_apply(namespace, changes)
        return changes.quarantined

    # -- MemoryStore: originals to delete -----------------------------------------------------
    # One object per original, its object id that of `pending_key` in the namespace's
    # tenant. Queueing one again keeps one, `hand_on` if either asked.

    async def queue_originals(self, namespace: str, originals: Sequence[PendingOriginal]) -> None:
        if not originals:
            return
        merged: dict[str, PendingOriginal] = {}
        for o in originals:
            known = merged.get(pending_key(o))
            merged[pending_key(o)] = o if known is None or o.hand_on else known
        existing = await self._fetch_ids(self.pending_name, namespace, sorted(merged))
        for obj in existing:
            old = pending_from_properties(obj.properties)
            if old.hand_on:
                merged[pending_key(old)] = old
        rows = [
            (object_uuid(namespace, key), pending_to_properties(o), None, key)
            for key, o in sorted(merged.items())
        ]
        await self._upsert(self.pending_name, namespace, rows)

    async def pending_originals(self, namespace: str, *, limit: int = 500) -> list[PendingOriginal]:
        if limit < 1:
            return []

        async def call(c: Collection) -> Any:
            return await c.query.fetch_objects(sort=Sort.by_property("id_key"), limit=limit)

        result = await self._read(self.pending_name, namespace, "reading originals to delete", call)
        if result is None:
            return []
        found = [pending_from_properties(o.properties) for o in result.objects]
        return sorted(found, key=lambda o: (o.id, o.checksum))

    async def drop_pending_originals(
        self, namespace: str, originals: Sequence[PendingOriginal]
    ) -> int:
        if not originals:
            return 0
        return await self._delete(self.pending_name, namespace, [pending_key(o) for o in originals])

    async def pending_namespaces(self) -> list[str]:
        with self._errors(f"listing tenants of {self.pending_name}"):
            found = sorted(await self._use(self.pending_name).tenants.get())
        self._tenants.update((self.pending_name, t) for t in found)

        async def holds(tenant: str) -> bool:
            return bool(await self._read_tenant(self.pending_name, tenant, "counting", _count))

        occupied = [t for t in found if is_valid_tenant_name(t) and await holds(t)]
        return await self._namespaces_of(occupied, warn=False)

    # -- housekeeping -----------------------------------------------------------------------

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """A no-op: Weaviate has no transactions (see the module docstring for how the
        multi-step writes are ordered to converge instead)."""
        return _no_transaction()

    async def checkpoint(self) -> None:
        """A no-op: the server persists its own writes."""

    def snapshot(self) -> AbstractAsyncContextManager[None]:
        """A no-op: Weaviate reads have no snapshot isolation, so a count or an export
        taken while a sweep archives may see a memory both live and archived."""
        return _no_transaction()

    async def clear(self, namespace: str | None = None) -> None:
        if namespace is None:
            await self._clear_all()
            return
        tenant = tenant_name(namespace)
        for collection in (*self._all_collections(), self.archival_name, self.pending_name):
            if await self._has_tenant(collection, tenant):
                with self._errors(f"removing tenant {tenant} from {collection}"):
                    await self._use(collection).tenants.remove([tenant])
            self._tenants.discard((collection, tenant))
        if is_hashed_tenant(tenant):
            with self._errors("updating the namespace registry"):
                await self._use(self.registry_name).data.delete_many(
                    where=Filter.by_id().equal(self._registry_uuid(tenant))
                )
            self._registered.discard(tenant)

    async def _clear_all(self) -> None:
        for collection in (*self._all_collections(), self.archival_name, self.pending_name):
            with self._errors(f"listing tenants of {collection}"):
                tenants = sorted(await self._use(collection).tenants.get())
            for chunk in _chunks(tenants, 100):  # Weaviate takes at most 100 per call
                with self._errors(f"removing tenants from {collection}"):
                    await self._use(collection).tenants.remove(list(chunk))
        with self._errors("clearing the registry"):
            await self._use(self.registry_name).data.delete_many(
                where=Filter.by_property("kind").contains_any(["dimension", "namespace"])
            )
        self._tenants.clear()
        self._registered.clear()
        self._dimension = None


async def _count(c: Collection) -> int:
    return (await c.aggregate.over_all(total_count=True)).total_count or 0


def _true(row: Any, prop: str) -> int:
    metric = row.properties.get(prop)
    return int(metric.total_true or 0) if isinstance(metric, AggregateBoolean) else 0


def _sum(row: Any, prop: str) -> int:
    metric = row.properties.get(prop)
    return int(metric.sum_ or 0) if isinstance(metric, AggregateInteger) else 0
