"""The nouns of the library: what a memory is, where it lives, and what a search returns.

Models are pydantic v2 so that every backend serialises them the same way and bad
input is rejected at the boundary, before anything is written.
"""

from __future__ import annotations

import math
import os
import time
from datetime import date, datetime, timezone
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

E = TypeVar("E", bound=Enum)
M = TypeVar("M", bound=BaseModel)


def _parse_enum(cls: type[E], value: E | str, what: str) -> E:
    from .errors import ValidationError

    if isinstance(value, cls):
        return value
    try:
        return cls(str(value).strip().lower())
    except ValueError:
        names = ", ".join(str(t.value) for t in cls)
        raise ValidationError(f"unknown {what} {value!r}; expected one of: {names}") from None


class Tier(str, Enum):
    """Where a memory lives; ordered from most to least active."""

    HOT = "hot"
    WARM = "warm"
    COLD = "cold"
    ARCHIVED = "archived"

    @classmethod
    def parse(cls, value: Tier | str) -> Tier:
        """Accept a Tier or its name in any case; unknown names get a typed error."""
        return _parse_enum(cls, value, "tier")


ACTIVE_TIERS: frozenset[Tier] = frozenset({Tier.HOT, Tier.WARM})
LIVE_TIERS: frozenset[Tier] = frozenset({Tier.HOT, Tier.WARM, Tier.COLD})


class MemoryType(str, Enum):
    """What kind of knowledge a memory holds; it sets how fast the memory fades."""

    PROCEDURAL = "procedural"
    FACTUAL = "factual"
    PROJECT = "project"
    EPISODIC = "episodic"

    @classmethod
    def parse(cls, value: MemoryType | str) -> MemoryType:
        return _parse_enum(cls, value, "memory type")


def new_id() -> str:
    """A UUIDv7 (RFC 9562) in hex: 48 bits of Unix milliseconds, then 74 random bits.

    Time-ordered, so the memories of one batch sort together: each insert lands on the
    last pages of the indexes keyed by id instead of a random page each. At 1M memories
    a batch of 500 dirtied ~1,000 pages of those indexes with random (v4) ids, a few with
    these (`benchmarks/README.md`). Ids stay unguessable (74 random bits) and keep the
    shape of a v4 hex id.
    """
    millis = time.time_ns() // 1_000_000
    bits = (millis & _MILLIS_MASK) << 80 | int.from_bytes(os.urandom(10), "big")
    bits = bits & ~(0xF << 76) | 0x7 << 76  # version 7
    bits = bits & ~(0x3 << 62) | 0x2 << 62  # RFC 9562 variant
    return f"{bits:032x}"


_MILLIS_MASK = (1 << 48) - 1


def utc(dt: datetime) -> datetime:
    """Naive datetimes are taken as UTC; everything inside the library is aware UTC."""
    if dt.tzinfo is timezone.utc:  # most calls: the library's own timestamps
        return dt
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


class Memory(BaseModel):
    """One remembered thing, in the HOT, WARM or COLD tier."""

    model_config = ConfigDict(validate_assignment=False, extra="forbid")

    id: str = Field(default_factory=new_id)
    namespace: str = "default"
    content: str
    memory_type: MemoryType = MemoryType.EPISODIC
    tier: Tier = Tier.HOT
    # Below the 0.5 that keeps an unused memory WARM after 72 h: ordinary captures
    # fade unless used; say importance=0.5+ for what must stay.
    importance: float = Field(default=0.4, ge=0.0, le=1.0)
    pinned: bool = False
    core: bool = False
    do_not_inject: bool = False
    superseded_by: str | None = None
    consolidated_from: list[str] = Field(default_factory=list)
    source: str = "api"
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: list[float] | None = Field(default=None, repr=False)
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None = None
    use_count: int = Field(default=0, ge=0)
    use_days: list[date] = Field(default_factory=list)
    uses_since_cold: int = Field(default=0, ge=0)
    cold_since: datetime | None = None
    tier_changed_at: datetime | None = None

    @field_validator(
        "created_at", "updated_at", "last_accessed_at", "cold_since", "tier_changed_at"
    )
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        return None if v is None else utc(v)

    @property
    def last_used_at(self) -> datetime:
        """Decay runs from the last use, or from creation if never used."""
        return self.last_accessed_at or self.created_at

    @property
    def superseded(self) -> bool:
        return self.superseded_by is not None


class LinkKind(str, Enum):
    SIMILAR = "similar"  # auto-linked on add by embedding similarity
    CO_RECALLED = "co_recalled"  # injected together
    EXPLICIT = "explicit"  # link() called by the user
    CONSOLIDATED = "consolidated"  # original -> its consolidation summary


class Link(BaseModel):
    """A weighted association; stored bidirectionally, reported from `source`'s side."""

    source: str
    target: str
    weight: float = Field(ge=0.0, le=1.0)
    kind: LinkKind = LinkKind.SIMILAR
    created_at: datetime | None = None
    updated_at: datetime | None = None


class Neighbor(BaseModel):
    """A memory reached from a seed through associations."""

    id: str
    strength: float  # product of link weights along the best path
    depth: int
    seed: str  # the seed id the best path started from


class ArchiveRecord(BaseModel):
    """What stays searchable once a memory is archived: a summary and a pointer.

    The id is the original memory's id, so an id stays valid across every tier.
    A store may keep `summary_embedding` quantised (the SQLite store keeps a ternary
    code) and hand back an approximation: it only ranks summaries; the original,
    embedding included, is exact in object storage and verified by `checksum`.
    `links` are kept by the original since format 2 (restore re-creates them from
    there); records archived earlier, or imported, may carry them here.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    namespace: str
    summary: str
    summary_embedding: list[float] | None = Field(default=None, repr=False)
    memory_type: MemoryType = MemoryType.EPISODIC
    importance: float = Field(default=0.0, ge=0.0, le=1.0)
    source: str = "api"
    metadata: dict[str, Any] = Field(default_factory=dict)
    links: list[Link] = Field(default_factory=list)
    storage_ref: str
    size_bytes: int = Field(ge=0)
    checksum: str  # sha256 hex of the stored original
    storage_verified: bool = False
    created_at: datetime  # of the original memory
    archived_at: datetime
    archive_reason: str
    use_count: int = 0
    expansions: list[datetime] = Field(default_factory=list)
    # The original's flags, so searches filter archived memories as they filter live
    # ones. None: archived before records kept them (a sweep reads them back from the
    # original); until then the record counts as neither forgotten nor superseded.
    do_not_inject: bool | None = None
    superseded: bool | None = None

    @field_validator("created_at", "archived_at")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        return utc(v)


class ObjectInfo(BaseModel):
    """What an object store reports about a stored original (for verification)."""

    key: str
    size: int
    checksum: str  # sha256 hex


class ScoreTerms(BaseModel):
    """Every term of the final score, so a ranking can always be explained."""

    cosine: float = 0.0  # raw cosine to the query (before normalisation)
    vector: float = 0.0  # min-max normalised over the candidate set
    lexical: float = 0.0
    graph: float = 0.0
    cues: float = 0.0  # bonus for the query's cues: its speaker named, a time asked (cues.py)
    relevance: float = 0.0  # weighted fusion of the three above, plus the cues
    retention: float = 0.0
    recency: float = 0.0
    half_life_days: float = 0.0
    frequency: float = 0.0
    tier_factor: float = 1.0
    score: float = 0.0


CONTEXT_PHASE = 5
"""The phase of a hit that joined as a neighbour in time of a stronger hit."""


class Hit(BaseModel):
    """A ranked search result. Archived hits carry their summary as `memory.content`."""

    memory: Memory
    tier: Tier
    score: float
    terms: ScoreTerms
    phase: int = 1  # 1 active, 2 graph, 3 cold, 4 archived, 5 context (a hit's neighbour)
    via: str | None = None  # the seed id, when reached through an association
    tokens: int = 0  # set when packed into an Injection

    @property
    def archived(self) -> bool:
        return self.tier is Tier.ARCHIVED

    @property
    def id(self) -> str:
        return self.memory.id


class SearchResults(list[Hit]):
    """A list of hits that also says whether a backend was skipped (graph outage)."""

    degraded: bool = False
    reasons: list[str]

    def __init__(
        self,
        hits: list[Hit] | None = None,
        *,
        degraded: bool = False,
        reasons: list[str] | None = None,
    ) -> None:
        super().__init__(hits or [])
        self.degraded = degraded
        self.reasons = reasons or []


class Injection(BaseModel):
    """What `recall` decided to put into a prompt, and what it cost."""

    items: list[Hit]
    text: str
    tokens: int
    by_tier: dict[Tier, int]
    budget_tokens: int
    degraded: bool = False
    considered: int = 0  # candidate hits before packing


class Explanation(BaseModel):
    """`explain(id, query)`: every term of one memory's score, and the inputs behind them."""

    id: str
    namespace: str
    tier: Tier
    memory_type: MemoryType
    query: str | None
    terms: ScoreTerms
    use_count: int
    last_used_at: datetime
    pinned: bool
    core: bool
    formula: str


class TierStats(BaseModel):
    count: int = 0
    bytes: int = 0


class SummarizerTotals(BaseModel):
    """What the summariser has cost: calls, tokens, and US dollars at the price table's
    rates (`tiered_memory.pricing`)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class Stats(BaseModel):
    """Counts of one namespace, and the seed-001 dashboard numbers.

    `object_store_bytes`: the bytes of the namespace's archived originals.
    `expansions_30d`: expansions of its archived memories in the last 30 days, and
    `expansion_rate_30d` those per archived memory (a rate that climbs means archival
    takes memories still needed). `last_sweep`: the report of the latest sweep that
    covered the namespace. `summarizer`: the summariser's spending, store-wide (one
    sweep archives every namespace). `history_persisted`: False when the store keeps
    no operations log, so the last three are this process's only."""

    namespace: str
    tiers: dict[Tier, TierStats]
    pinned: int = 0
    core: int = 0
    forgotten: int = 0
    links: int = 0
    quarantined: int = 0  # COLD memories archival has set aside (see QuarantinedMemory)
    object_store_bytes: int | None = None
    expansions_30d: int = 0
    expansion_rate_30d: float = 0.0
    last_sweep: MaintenanceReport | None = None
    summarizer: SummarizerTotals = Field(default_factory=SummarizerTotals)
    history_persisted: bool = True

    @property
    def total(self) -> int:
        return sum(s.count for s in self.tiers.values())


def finite_vector(values: Any, *, what: str = "embedding") -> list[float]:
    """Check a vector is a non-empty sequence of finite floats (NaN/inf are rejected)."""
    from .errors import ValidationError

    try:
        out = [float(x) for x in values]
    except (TypeError, ValueError) as e:
        raise ValidationError(f"{what} must be a sequence of numbers") from e
    if not out:
        raise ValidationError(f"{what} is empty")
    if not all(math.isfinite(x) for x in out):
        raise ValidationError(f"{what} contains NaN or infinite values")
    return out


class ArchiveEstimate(BaseModel):
    """What archiving the current candidates would cost (a dry run's answer)."""

    candidates: int = 0
    summarizer_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    bytes: int = 0
    cost_usd: float = 0.0  # the tokens at the summariser's price (`tiered_memory.pricing`)


class ArchivePreview(BaseModel):
    """What an explicit archive would take now, and its cost (`archive_preview`)."""

    candidates: list[Memory]
    estimate: ArchiveEstimate


class QuarantinedMemory(BaseModel):
    """A live memory archival has set aside after `ArchivalPolicy.quarantine_after`
    counted failures: no sweep tries it again until an explicit `archive()` of it."""

    namespace: str
    id: str
    failures: int
    error: str  # the last failure
    failed_at: datetime | None = None


class ArchiveDue(BaseModel):
    """A memory a sweep archived (or, in a dry run, would) under a rule its report lists
    one by one: the forced archival of old memories, whatever their importance
    (`TierPolicy.force_archive_age`), which a user should be able to see coming."""

    namespace: str
    id: str
    tier: Tier  # where it was
    reason: str  # `lifecycle.FORCED_AGE`
    importance: float
    created_at: datetime
    recent_uses: int  # at most, within `TierPolicy.archive_recent_window`


class MaintenanceReport(BaseModel):
    """What one sweep moved, what failed, and how long it took.

    `quarantined` lists every memory set aside in the namespaces swept (those set aside
    by this run are counted in `moved["archive_quarantined"]`)."""

    now: datetime
    dry_run: bool = False
    skipped: bool = False  # another sweep of this store was running
    namespaces: int = 0
    moved: dict[str, int] = Field(default_factory=dict)  # transition name -> count
    errors: list[str] = Field(default_factory=list)
    archive_paused: bool = False
    archive_estimate: ArchiveEstimate | None = None
    quarantined: list[QuarantinedMemory] = Field(default_factory=list)
    # archived (dry run: due) by the forced rule, also counted in moved["forced_archived"]
    forced_archival: list[ArchiveDue] = Field(default_factory=list)
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_cost_usd: float = 0.0  # what this run's summaries cost
    duration_seconds: float = 0.0

    def count(self, transition: str) -> int:
        return self.moved.get(transition, 0)

    def add(self, transition: str, n: int) -> None:
        if n:
            self.moved[transition] = self.moved.get(transition, 0) + n


Stats.model_rebuild()  # `last_sweep` names MaintenanceReport, defined after it


_FIELD_NAMES: dict[type[BaseModel], tuple[frozenset[str], set[str]]] = {}


def filled(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of `cls` from `values` that the library built itself, with the types
    validation would give, filled the way `model_construct` fills one without walking
    the fields again: that walk (or a validation) cost ~10 us a memory row or link, a
    recall reads ~190 rows and an add makes ~3 links. Validated instead when `values`
    lack a field (the model gained one the caller does not know).

    Every instance of a class filled here shares one set of its field names as its
    `model_fields_set` (all of them: every field was given). pydantic only adds a
    field's name to it (a no-op: the name is there; the models forbid extra fields)
    and copies it for a `model_copy`. A set each was ~480 sets a recall, which with
    the collections they set off cost ~1.4 ms of a 100k recall's 9.9 ms p50
    (interleaved, three rounds)."""
    known = _FIELD_NAMES.get(cls)
    if known is None:
        names = frozenset(cls.model_fields)
        known = _FIELD_NAMES[cls] = (names, set(names))
    if values.keys() != known[0]:
        return cls.model_validate(values)
    instance = cls.__new__(cls)
    object.__setattr__(instance, "__dict__", values)
    object.__setattr__(instance, "__pydantic_fields_set__", known[1])
    object.__setattr__(instance, "__pydantic_extra__", None)
    object.__setattr__(instance, "__pydantic_private__", None)
    return instance
