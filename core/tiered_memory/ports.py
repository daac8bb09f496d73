"""The Protocols the engine talks to; every backend implements one of these.

Every method is async, takes the namespace explicitly and works in batches. Backends
enforce the namespace inside their own queries (a WHERE clause, a tenant, a MATCH),
never by filtering results afterwards. Together the ports cover the adapter contract
of seed 004: CRUD, vector and lexical search, tier migration, links, consolidation
helpers (filtered scans), counts, batch operations, transactions and clear.

Arguments arrive checked by the engine's boundary (`validation`): a namespace as a
`Namespace`, ids as strings, counts in range, a query vector finite and flat. A
backend checks only what it alone knows (its dimension, its key and name limits),
and a plain-string namespace with `validation.check_namespace` for direct callers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .epoch import to_micros
from .filters import Condition
from .filters import FilterOp as FilterOp  # re-exported: where callers found them first
from .filters import MetadataFilter as MetadataFilter
from .models import (
    ArchiveRecord,
    Link,
    Memory,
    MemoryType,
    Neighbor,
    ObjectInfo,
    Stats,
    Tier,
)

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class SearchFilter:
    """What a search may return, besides the tiers it is restricted to."""

    include_forgotten: bool = False  # do_not_inject memories
    include_superseded: bool = False
    pinned: bool | None = None  # None: either
    memory_types: frozenset[MemoryType] | None = None
    metadata: tuple[Condition, ...] = ()  # ANDed filter trees (`filters`)
    ids: frozenset[str] | None = None  # restrict to these ids
    # Score every vector instead of asking an approximate index (the embedded store's
    # HNSW for namespaces above `ANN_MIN_ROWS`): slower, the exact top k.
    exact: bool = False


@dataclass(frozen=True)
class ScanQuery:
    """A store-side filter for the sweep and for listings: every condition is ANDed;
    None means any.

    `last_used_before` compares coalesce(last_accessed_at, created_at). `metadata`
    means what it means in a search's `SearchFilter`, and is applied in the store's
    own query (so a page holds `limit` matches).
    Results are ordered by id; pass the last id seen as `after_id` to page.
    """

    tiers: frozenset[Tier]
    created_before: datetime | None = None
    last_used_before: datetime | None = None
    cold_since_before: datetime | None = None
    tier_changed_before: datetime | None = None
    importance_at_most: float | None = None
    importance_at_least: float | None = None
    min_uses_since_cold: int | None = None
    min_use_count: int | None = None
    pinned: bool | None = None
    core: bool | None = None
    superseded: bool | None = None
    used: bool | None = None  # use_count > 0
    metadata: tuple[Condition, ...] = ()
    after_id: str | None = None
    limit: int = 500


Micros = npt.NDArray[np.int64]  # timestamps: integer microseconds since the Unix epoch, UTC
NO_TIME = -1  # an unset timestamp (cold_since of a memory that never went COLD) in `Micros`


@dataclass(frozen=True)
class MemoryFacts:
    """Columns of the memories one scan matched: the fields the sweep's rules compute with.

    The sweep's rules need arithmetic over tens of thousands of memories (retention,
    time at the retention floor, fading for consolidation); building a full `Memory`
    (content, metadata, validation) for each cost more than the whole rest of a sweep.
    Row i of every column describes `ids[i]`; rows are ordered by id.
    `use_days` is filled only when asked for (`scan_facts(..., use_days=True)`), since
    it is the one column that needs per-row parsing.
    """

    ids: list[str]
    memory_types: list[MemoryType]
    importance: npt.NDArray[np.float64]
    use_count: npt.NDArray[np.int64]
    pinned: npt.NDArray[np.bool_]
    core: npt.NDArray[np.bool_]
    do_not_inject: npt.NDArray[np.bool_]
    created_at: Micros
    last_used_at: Micros  # coalesce(last_accessed_at, created_at)
    cold_since: Micros  # NO_TIME when unset
    use_days: list[list[date]] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def empty(cls, *, use_days: bool = False) -> MemoryFacts:
        return cls.of([], use_days=use_days)

    @classmethod
    def of(cls, memories: Sequence[Memory], *, use_days: bool = False) -> MemoryFacts:
        """Facts of memories already loaded: what a backend without a cheaper column
        read answers with (and what tests compare a backend's answer to)."""

        def micros(values: Sequence[datetime | None]) -> Micros:
            out: Micros = np.fromiter(
                (NO_TIME if v is None else to_micros(v) for v in values),
                dtype=np.int64,
                count=len(values),
            )
            return out

        return cls(
            ids=[m.id for m in memories],
            memory_types=[m.memory_type for m in memories],
            importance=np.array([m.importance for m in memories], dtype=np.float64),
            use_count=np.array([m.use_count for m in memories], dtype=np.int64),
            pinned=np.array([m.pinned for m in memories], dtype=np.bool_),
            core=np.array([m.core for m in memories], dtype=np.bool_),
            do_not_inject=np.array([m.do_not_inject for m in memories], dtype=np.bool_),
            created_at=micros([m.created_at for m in memories]),
            last_used_at=micros([m.last_used_at for m in memories]),
            cold_since=micros([m.cold_since for m in memories]),
            use_days=[sorted(set(m.use_days)) for m in memories] if use_days else None,
        )


@dataclass
class ScoredMemory:
    """A store's search answer: the memory and its raw score (cosine, or BM25 >= 0)."""

    memory: Memory
    score: float


@dataclass(frozen=True)
class MemoryPatch:
    """Fields to change on many memories at once; None leaves a field as it is."""

    pinned: bool | None = None
    core: bool | None = None
    do_not_inject: bool | None = None
    importance: float | None = None
    superseded_by: str | None = None
    clear_superseded: bool = False
    metadata: dict[str, Any] | None = None  # replaces the whole dict
    updated_at: datetime | None = None


@dataclass
class ScoredArchive:
    record: ArchiveRecord
    score: float


@dataclass(frozen=True)
class ArchivalState:
    """The archival journal of one live memory (`tiered_memory.archival`): who is
    archiving it now, which originals its attempts wrote, and how they failed.

    A memory has a row only while an archival holds it or has failed; committing its
    archive record deletes the row. `claimed_until` is wall-clock time: a claim protects
    the work of a running process, whatever a test's clock says."""

    id: str
    claimant: str | None = None
    claimed_until: datetime | None = None
    written: tuple[str, ...] = ()  # checksums of originals attempts wrote, oldest first
    failures: int = 0  # counted toward quarantine (outages are not)
    error: str | None = None  # the last failure, counted or not
    failed_at: datetime | None = None
    quarantined: bool = False


@dataclass(frozen=True)
class ArchivalFailure:
    """Why one claimed memory was not archived; `counts` toward its quarantine unless
    the failure was an outage (the backend's fault, not the memory's)."""

    error: str
    counts: bool = True


@dataclass(frozen=True)
class PendingOriginal:
    """An original in object storage that no record or journal row names any more,
    queued for deletion in the same store transaction as the write that let go of it
    (a hard delete, a replace, a restore): an unreachable object store then neither
    blocks that write nor leaves an original nothing names (`Archiver.delete_pending`,
    and the sweep, delete the queue's originals once the object store answers).

    The original is `archive.original_key(id, checksum)` (and, for records archived
    before content addressing, the key `id`). `hand_on`: it belonged to a record that
    carried its cluster's summary embedding, which could not be handed on before the
    record left (that needs the original's list of members,
    `Archiver.hand_on_summaries`): it is handed on before the original goes."""

    id: str
    checksum: str
    hand_on: bool = False


@dataclass(frozen=True)
class AccessRecord:
    """Use of one memory at `when`: use_count+1, last_accessed_at, use_days, cold uses."""

    id: str
    when: datetime


@runtime_checkable
class MemoryStore(Protocol):
    """Records, their embeddings, lexical index and archive records."""

    async def dimension(self) -> int | None:
        """The embedding dimension of the store's vectors, or None while it has none."""

    async def ensure_dimension(self, dimension: int) -> None:
        """Record `dimension` as the store's before its first write (the engine does,
        from its embedder). An empty store takes any; one holding vectors of another
        dimension raises ConfigurationError. Every later write of another size is a
        DimensionMismatchError, raised before anything is written."""

    async def put_many(self, namespace: str, memories: Sequence[Memory]) -> None:
        """Insert new memories (each with an embedding). An existing id is a ValidationError."""

    async def replace_many(self, namespace: str, memories: Sequence[Memory]) -> list[ArchiveRecord]:
        """Insert memories (each with an embedding), each replacing the live memory or
        the archive record of its id if there is one: all or nothing where the backend
        allows (one transaction), so a failure leaves what was stored as it was. Links
        are the graph's, untouched. Returns the archive records replaced (their
        originals in object storage are the caller's to delete)."""

    async def get_many(
        self, namespace: str, ids: Sequence[str], *, with_embeddings: bool = False
    ) -> dict[str, Memory]:
        """The live (HOT/WARM/COLD) memories among `ids`; unknown ids are absent."""

    async def patch_many(self, namespace: str, ids: Sequence[str], patch: MemoryPatch) -> int:
        """Apply `patch`; returns how many memories changed."""

    async def delete_many(self, namespace: str, ids: Sequence[str]) -> int:
        """Hard delete live memories; returns how many were deleted."""

    async def set_tier(self, namespace: str, ids: Sequence[str], tier: Tier, when: datetime) -> int:
        """Move live memories to HOT, WARM or COLD, persisting what `lifecycle.moved`
        writes: entering COLD sets cold_since and resets uses_since_cold; leaving COLD
        clears cold_since. Idempotent. Returns how many changed tier."""

    async def record_access(self, namespace: str, accesses: Sequence[AccessRecord]) -> None:
        """Count uses in one batch (use_count, last_accessed_at, use_days, cold uses)."""

    async def vector_search(
        self,
        namespace: str,
        query: Vector,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = SearchFilter(),
        exact_scores: bool = True,
    ) -> list[ScoredMemory]:
        """Top-k by cosine similarity among live memories of `tiers`, best first.

        `exact_scores=False`: the scores may be an approximate index's cosines, within
        a small bound of the exact ones (the embedded store's float16 graph rows:
        1.5e-3), which is all a ranking that fuses them with other signals needs; the
        store may then skip reading the full vectors. A store without such an index
        ignores it."""

    async def lexical_search(
        self,
        namespace: str,
        text: str,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = SearchFilter(),
    ) -> list[ScoredMemory]:
        """Top-k by BM25 (higher is better, >= 0) among live memories of `tiers`."""

    async def scan(self, namespace: str, query: ScanQuery) -> list[Memory]:
        """A page of memories matching store-side filters, ordered by id."""

    async def scan_ids(self, namespace: str, query: ScanQuery) -> list[str]:
        """The ids `scan` would return for `query` (same filters, order and paging),
        without reading the memories: the sweep's rules that are pure filters need
        nothing else."""

    async def scan_facts(
        self, namespace: str, query: ScanQuery, *, use_days: bool = False
    ) -> MemoryFacts:
        """The memories `scan` would return for `query` (same filters, order and
        paging), as columns: for the rules that compute with every candidate."""

    async def embeddings(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], Matrix]:
        """The embeddings of the live memories among `ids`: the ids that have one, in the
        order given, and a float32 matrix with one row each (consolidation's input)."""

    async def list_ids(
        self,
        namespace: str,
        *,
        tiers: frozenset[Tier] | None = None,
        after_id: str | None = None,
        limit: int = 1000,
    ) -> list[str]:
        """Ids of live memories (and, when ARCHIVED is in `tiers`, archive records)."""

    async def stats(self, namespace: str) -> Stats:
        """Counts and approximate bytes per tier (ARCHIVED counts archive records)."""

    async def namespaces(self) -> list[str]:
        """Every namespace that holds a live memory or an archive record."""

    # -- archive records -------------------------------------------------------------

    async def archive_many(
        self, namespace: str, records: Sequence[ArchiveRecord], *, claimant: str | None = None
    ) -> int:
        """Replace live memories by their archive records (same ids). Atomic per record
        where the backend allows; rerunning after a partial failure converges.

        With `claimant`, only the records of memories `claimant` holds a claim on are
        written (`claim_archival`), and their journal rows go with them; without it
        (imports), any live memory's."""

    async def get_archives(
        self, namespace: str, ids: Sequence[str]
    ) -> dict[str, ArchiveRecord]: ...

    async def search_archives(
        self, namespace: str, query: Vector, *, k: int, filters: SearchFilter = SearchFilter()
    ) -> list[ScoredArchive]:
        """The k archive records closest by cosine of their summary embedding, best
        first, among those `filters` allow (applied before k, as in `vector_search`).
        A record keeps its memory's type, metadata and flags; an archived memory is
        never pinned, and a record whose flags are unknown (None) counts as neither
        forgotten nor superseded."""

    async def update_archive(self, namespace: str, record: ArchiveRecord) -> None:
        """Overwrite an archive record (expansions, verification, detach flags)."""

    async def unarchive_many(self, namespace: str, memories: Sequence[Memory]) -> int:
        """Replace archive records by live memories (same ids); the restore path."""

    async def scan_archives(
        self,
        namespace: str,
        *,
        after_id: str | None = None,
        limit: int = 500,
        flags_unknown: bool = False,
        metadata: tuple[Condition, ...] = (),
    ) -> list[ArchiveRecord]:
        """Archive records by id, after `after_id`; with `flags_unknown`, only those
        whose flags are not known yet (archived before records kept them); only those
        whose metadata matches `metadata` (in the store's query, as in a search)."""

    async def delete_archives(self, namespace: str, ids: Sequence[str]) -> int:
        """Hard delete archive records (their originals in object storage are the
        caller's to delete); returns how many were deleted."""

    # -- the archival journal (tiered_memory.archival) -----------------------------------

    async def archival_states(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, ArchivalState]:
        """The journal rows of live memories among `ids` (all of the namespace's when
        None; few: only memories being archived or that failed have one)."""

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
        """Claim the live memories among `ids` for `claimant` until `until`, atomically
        where the backend allows; returns the rows of those claimed as they were before.

        A memory is claimed when it has no claim, its claim expired (`claimed_until` <=
        `now`), or its claimant is the one `replacing` names for it (a claim the caller
        found stale: compare-and-set). Quarantined memories are skipped unless
        `release_quarantine`, which lifts their quarantine."""

    async def note_archival(
        self, namespace: str, claimant: str, written: Mapping[str, str]
    ) -> set[str]:
        """Record, before writing them, the checksums of the originals `claimant` is about
        to write (id -> checksum); returns the ids noted. A memory another claimant holds
        now is not noted, and its original must not be written."""

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
        """End `claimant`'s claims on `ids`; record the `failures` among them (a counted
        one quarantines its memory at `quarantine_after`). Returns the ids quarantined
        by this call. Written checksums stay until an attempt commits (its cleanup)."""

    # -- originals to delete (tiered_memory.archive: Archiver.delete_pending) -------------

    async def queue_originals(self, namespace: str, originals: Sequence[PendingOriginal]) -> None:
        """Queue originals for deletion (one entry per id and checksum; queueing one
        again keeps one, `hand_on` if either asked). Call it inside the
        `transaction()` of the write that lets go of them, before that write: where
        transactions are a no-op, a crash between leaves an entry whose original is
        still named, which `Archiver.delete_pending` keeps and never deletes."""

    async def pending_originals(self, namespace: str, *, limit: int = 500) -> list[PendingOriginal]:
        """Up to `limit` queued originals of `namespace`, by id then checksum."""

    async def drop_pending_originals(
        self, namespace: str, originals: Sequence[PendingOriginal]
    ) -> int:
        """Remove entries from the queue (by id and checksum); returns how many went."""

    async def pending_namespaces(self) -> list[str]:
        """Every namespace with a queued original (the sweep's list: a namespace whose
        last memory was deleted during an outage holds nothing else)."""

    # -- housekeeping ------------------------------------------------------------------

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """Group writes atomically where the backend allows; a no-op elsewhere."""

    async def checkpoint(self) -> None:
        """Make what was committed durable in the store's main files where the backend
        keeps a write-ahead log apart (SQLite's `-wal`); a no-op elsewhere. The engine
        calls it after a sweep."""

    def snapshot(self) -> AbstractAsyncContextManager[None]:
        """Reads inside (of this store, and of a graph sharing its file) all see one
        state, whatever other writers do meanwhile, where the backend allows; a no-op
        elsewhere. For reads only: counts and exports that must add up."""

    async def clear(self, namespace: str | None = None) -> None:
        """Delete everything in `namespace` (its queued originals too), or everything
        when None (tests, benchmarks)."""

    async def close(self) -> None: ...


@runtime_checkable
class AssociationGraph(Protocol):
    """Weighted, bidirectional associations between memories of one namespace."""

    async def upsert_links(self, namespace: str, links: Sequence[Link]) -> None:
        """Create links; an existing link keeps the larger weight."""

    async def strengthen(
        self, namespace: str, pairs: Sequence[tuple[str, str]], delta: float, when: datetime
    ) -> None:
        """Add `delta` to each pair's weight, capped at 1.0; creates missing links."""

    async def neighbors(
        self,
        namespace: str,
        seeds: Sequence[str],
        *,
        depth: int = 1,
        min_weight: float = 0.0,
        limit: int = 50,
    ) -> list[Neighbor]:
        """Nodes reachable from `seeds` in 1..depth hops (depth in 1..3), seeds excluded,
        each with its best path-product strength, strongest first."""

    async def links_of(self, namespace: str, ids: Sequence[str]) -> list[Link]:
        """Every link touching `ids`, reported from the side of the id in `ids`."""

    async def unlink(self, namespace: str, pairs: Sequence[tuple[str, str]]) -> int: ...

    async def drop_nodes(self, namespace: str, ids: Sequence[str]) -> list[Link]:
        """Remove nodes and their links; returns the links removed."""

    async def count_links(self, namespace: str) -> int: ...

    async def clear(self, namespace: str | None = None) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class ObjectStore(Protocol):
    """Archived originals as bytes (JSON), keyed by namespace and memory id."""

    async def put(self, namespace: str, key: str, data: bytes) -> ObjectInfo: ...

    async def head(self, namespace: str, key: str) -> ObjectInfo | None: ...

    async def get(self, namespace: str, key: str) -> bytes:
        """The stored bytes; NotFoundError when absent."""

    async def delete(self, namespace: str, key: str) -> None: ...

    async def list(self, namespace: str) -> list[str]: ...

    def ref(self, namespace: str, key: str) -> str:
        """A URI for the archive record (e.g. s3://bucket/prefix/ns/id.json)."""

    async def close(self) -> None: ...


# -- optional capabilities -----------------------------------------------------------------
# What a backend may offer beyond its port. The core asks in one way only,
# `isinstance(backend, Supports...)`, and falls back to the port's calls otherwise, so a
# backend gains a faster path by implementing the method, never by being a known class.


@runtime_checkable
class SupportsCosines(Protocol):
    """A store that can give the cosine of a query to memories by id (the embedded one
    holds every vector in memory), so candidates need not be fetched with embeddings."""

    async def cosines(
        self, namespace: str, query: Vector, ids: Sequence[str]
    ) -> dict[str, float]: ...


@runtime_checkable
class SupportsAdjacent(Protocol):
    """A store that can list the memories written just before and after others (the
    embedded one keeps a (namespace, created_at) index); others skip retrieval's
    context phase."""

    async def adjacent(
        self, namespace: str, ids: Sequence[str], *, within: timedelta, per_side: int
    ) -> dict[str, list[Memory]]: ...


@runtime_checkable
class SupportsBatchVectorSearch(Protocol):
    """A store that ranks many query vectors in one pass: the (id, cosine) pairs
    `vector_search` would return for each row of `queries` (add_many's deduplication
    and auto-linking); others get one `vector_search` per query. An approximate index
    searches the queries whose best is below `recheck_below` again, more thoroughly
    (a far best is how a missed neighbourhood shows).

    `exact_scores=False`, as in `vector_search`: the cosines may be the index's,
    within its small bound, except for a query whose best may reach `exact_from` (the
    cosine a decision hinges on: a duplicate at the threshold), whose are exact."""

    async def vector_search_many(
        self,
        namespace: str,
        queries: Matrix,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = SearchFilter(),
        recheck_below: float | None = None,
        exact_scores: bool = True,
        exact_from: float | None = None,
    ) -> list[list[tuple[str, float]]]: ...


@runtime_checkable
class SupportsPutVectors(Protocol):
    """A store that takes new memories' embeddings as the float32 arrays add_many holds,
    beside memories that carry none (`put_many` otherwise): the embedded one stores
    their bytes. As lists, each 384-d embedding cost ~25 us to build and check again,
    a tenth of an add_many with deduplication and links."""

    async def put_vectors_many(
        self, namespace: str, memories: Sequence[Memory], vectors: Sequence[Vector]
    ) -> None: ...


@runtime_checkable
class SupportsLiveIds(Protocol):
    """A store that can say which of some ids are live memories without reading them
    (the embedded one: one index probe per id), for the check after auto-linking that
    no end of a new link was archived or deleted meanwhile; others answer with
    `get_many`, which builds a whole memory per id."""

    async def live_ids(self, namespace: str, ids: Sequence[str]) -> set[str]: ...


@runtime_checkable
class SupportsDeferredSync(Protocol):
    """An object store whose writes can leave the fsync that makes them durable to one
    later `sync_folder(namespace)` (the local folder), so the archiver syncs once per
    batch of originals instead of once per original."""

    async def put(
        self, namespace: str, key: str, data: bytes, *, sync_folder: bool = True
    ) -> ObjectInfo: ...

    async def sync_folder(self, namespace: str) -> None: ...


@dataclass(frozen=True)
class OperationEvent:
    """One operation the dashboard numbers are computed from (`tiered_memory.operations`):
    a sweep (`detail`: its report as JSON), an expansion, a restore, or summariser
    spending. Never memory content. `namespace` "" is the whole store (a sweep of every
    namespace, the summariser's spending)."""

    kind: str
    namespace: str
    at: datetime
    count: int = 1
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    detail: str | None = None


@dataclass(frozen=True)
class EventTotals:
    """Sums over the events of one kind (`SupportsOperationsLog.event_totals`)."""

    events: int = 0
    count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@runtime_checkable
class SupportsOperationsLog(Protocol):
    """A store that keeps the operations log with its data (the embedded one, in a
    table of its file), so stats() reads the last sweep, the expansions of the last 30
    days and the summariser's spending after a restart; others keep them per process."""

    async def record_events(self, events: Sequence[OperationEvent]) -> None: ...

    async def event_totals(
        self, kind: str, *, namespace: str | None = None, since: datetime | None = None
    ) -> EventTotals:
        """Sums over the events of `kind` (of `namespace` only when given, at or after
        `since` when given)."""

    async def last_event(self, kind: str, *, namespaces: Sequence[str]) -> OperationEvent | None:
        """The latest event of `kind` among `namespaces`."""


@dataclass(frozen=True)
class SummaryRequest:
    content: str
    memory_type: MemoryType = MemoryType.EPISODIC
    domain: str | None = None
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = "extractive"


@runtime_checkable
class Summarizer(Protocol):
    """Turns a memory into 2-3 sentences that keep names, dates and numbers."""

    async def summarize(self, request: SummaryRequest) -> Summary: ...


@runtime_checkable
class Embedder(Protocol):
    """Text to L2-normalisable vectors; queries and documents may differ.

    The names are LangChain's async ones, so a LangChain `Embeddings` is an Embedder as
    it stands. Rows may come back as a float32 matrix or as lists of floats (the
    engine's guard reads either); `embeddings.as_embedder` adapts synchronous ones.
    """

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix: ...

    async def aembed_query(self, text: str) -> Vector: ...


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime: ...


@dataclass
class Backends:
    """The wired ports of one TieredMemory."""

    store: MemoryStore
    graph: AssociationGraph
    objects: ObjectStore
    summarizer: Summarizer
    embedder: Embedder
    extras: dict[str, Any] = field(default_factory=dict)
