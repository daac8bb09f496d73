"""Tier transitions (DESIGN.md section 2) as pure functions: which memories move, to
which tier, and what a move writes.

Every scheduled rule is two halves: a store-side filter (a `ScanQuery`, which bounds
the rows a sweep reads, never every memory) and the exact rule over columns of those
rows (`MemoryFacts`). `tiered_memory.sweep` pages through the one and moves what the
other selects; `tiered_memory.archival` does the same for COLD -> ARCHIVED. The moves a
caller asks for (`promote`, `demote`, `pin`) and recall's COLD -> WARM revival are
checked here for the engine; a restore from the archive is built here for the
archiver. `moved` is the state any move leaves, which a store's `set_tier` persists.

Each rule is a function of stored state and `now`, so applying it twice at one `now`
changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from . import bookkeeping, decay
from .epoch import day_of, to_micros
from .errors import ValidationError
from .models import CONTEXT_PHASE, LIVE_TIERS, Hit, Memory, MemoryType, Tier
from .policy import DecayPolicy, Policy, TierPolicy
from .ports import NO_TIME, MemoryFacts, ScanQuery

HOT = frozenset({Tier.HOT})
WARM = frozenset({Tier.WARM})
COLD = frozenset({Tier.COLD})
ACTIVE = frozenset({Tier.HOT, Tier.WARM})

RANK = {Tier.HOT: 0, Tier.WARM: 1, Tier.COLD: 2, Tier.ARCHIVED: 3}
"""How far from active each tier is: promotion lowers the rank, demotion raises it."""

ASSOCIATION_PHASE = 2
"""The phase of a hit reached through an association (`retrieval`)."""

# Page sizes of the scans. Id and column rows are a few dozen bytes, so large pages keep
# the number of queries down. A page of a scan bounded by a timestamp reads every row
# inside the bound from the tier's timestamp index and sorts them by id: 98k expired
# rows in pages of 10k read ~10 x 98k rows (0.65 s); in pages of 50k, 2 x 98k (a
# page's facts: a few MB). The expiry scans keep every due id anyway.
SCAN_PAGE = 10_000
EXPIRY_PAGE = 50_000

_US_PER_DAY = 86_400e6

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


# -- decay over columns ------------------------------------------------------------------


def half_lives(facts: MemoryFacts, dp: DecayPolicy) -> Floats:
    """Effective half-lives in days, `decay.half_life_for` over a column of memories."""
    base = np.array([dp.half_life_days[t] for t in facts.memory_types], dtype=np.float64)
    out: Floats = base * np.log2(np.maximum(facts.use_count, 0) + 2.0)
    return out


def floors(facts: MemoryFacts, dp: DecayPolicy) -> Floats:
    """`decay.floor_for` over a column: pinned 1.0, core the core floor, else the floor."""
    core = max(dp.core_floor, dp.floor)
    out: Floats = np.where(facts.pinned, 1.0, np.where(facts.core, core, dp.floor))
    return out


def retention(facts: MemoryFacts, now: datetime, dp: DecayPolicy) -> Floats:
    """`decay.retention` of every memory in `facts` at `now`."""
    elapsed = (to_micros(now) - facts.last_used_at) / _US_PER_DAY
    return decay.retention_vector(elapsed, half_lives(facts, dp), floors(facts, dp))


# -- what a move writes ------------------------------------------------------------------


def moved(memory: Memory, tier: Tier, when: datetime) -> Memory:
    """A copy of `memory` moved to `tier` at `when`: entering COLD sets `cold_since` and
    restarts the uses counted since; leaving COLD clears `cold_since`. Unchanged
    (timestamps too) if already there, so a move done twice is done once. The fields
    are `bookkeeping`'s, which every backend's `set_tier` persists."""
    return bookkeeping.moved(memory, bookkeeping.tier_move(tier, when))


def restored(memory: Memory, namespace: str, now: datetime) -> Memory:
    """An archived memory (read back from its original) live again: WARM, in
    `namespace`, with no cold history, and used `now` (a restore is a use: it starts
    decaying afresh)."""
    return memory.model_copy(
        update={
            "namespace": namespace,
            "tier": Tier.WARM,
            "cold_since": None,
            "uses_since_cold": 0,
            "tier_changed_at": now,
            "last_accessed_at": now,
            "updated_at": now,
        }
    )


def expansions_to_keep(
    expansions: Sequence[datetime], now: datetime, tp: TierPolicy
) -> tuple[list[datetime], bool]:
    """An archived memory expanded at `now`: the expansions still inside
    `restore_window` (this one included), and whether they are enough
    (`restore_expansions`) to restore it to WARM."""
    recent = [t for t in expansions if now - t < tp.restore_window] + [now]
    return recent, len(recent) >= tp.restore_expansions


# -- moves a caller asks for ---------------------------------------------------------------


def check_promotion(memory: Memory, target: Tier) -> None:
    """`promote`: only to a more active live tier (HOT only ever this way)."""
    if target is Tier.ARCHIVED or RANK[target] >= RANK[memory.tier]:
        raise ValidationError(
            f"cannot promote {memory.id!r} from {memory.tier.value} to {target.value}; "
            "promotion moves to a more active tier (use demote to go down)"
        )


def check_demotion(memory: Memory, target: Tier) -> None:
    """`demote`: only to a less active live tier, and never a pinned or core memory
    (archiving is `archive()`'s or the sweep's)."""
    if memory.pinned:
        raise ValidationError(
            f"memory {memory.id!r} is pinned and exempt from demotion; unpin it first"
        )
    if memory.core:
        raise ValidationError(f"memory {memory.id!r} is core and exempt from demotion")
    if target is Tier.ARCHIVED:
        raise ValidationError(
            "archive memories with maintain() or archive(); demote moves between HOT, WARM and COLD"
        )
    if RANK[target] <= RANK[memory.tier]:
        raise ValidationError(
            f"cannot demote {memory.id!r} from {memory.tier.value} to {target.value}; "
            "demotion moves to a less active tier"
        )


def tier_when_pinned(memory: Memory) -> Tier | None:
    """Where pinning moves a memory, if anywhere: a pinned memory is always injectable,
    so a COLD one comes back to WARM."""
    return Tier.WARM if memory.tier is Tier.COLD else None


def counted_uses(injected: Sequence[Hit]) -> list[Hit]:
    """The injected hits that count as a use: live memories injected on their own
    merit. A neighbour in time that rode along with a hit does not count, or every
    memory near a popular one would stay WARM."""
    return [h for h in injected if not h.archived and h.phase != CONTEXT_PHASE]


def revived(used: Sequence[Hit]) -> list[str]:
    """Which used hits come back from COLD to WARM at once: the ones reached through an
    association (a COLD memory found directly waits for the sweep's reactivation)."""
    return [h.memory.id for h in used if h.tier is Tier.COLD and h.phase == ASSOCIATION_PHASE]


# -- the sweep's rules, in DESIGN.md order -----------------------------------------------


def hot_expiry_query(now: datetime, tp: TierPolicy) -> ScanQuery:
    """HOT memories past `hot_ttl`."""
    return ScanQuery(tiers=HOT, tier_changed_before=now - tp.hot_ttl, limit=EXPIRY_PAGE)


@dataclass(frozen=True)
class HotExpiry:
    """Where one page of expired HOT memories goes."""

    to_warm: list[str]
    to_cold: list[str]
    through_warm: list[str]  # bound for WARM, and due to leave it at once: straight COLD


def hot_expiry(facts: MemoryFacts, now: datetime, policy: Policy) -> HotExpiry:
    """HOT lasts `hot_ttl`: then WARM if it was used or matters (importance, pinned,
    core), else COLD. Pinned and core memories settle in WARM.

    A memory bound for WARM that the next rule (WARM -> COLD) would send on at once
    goes straight to COLD (`through_warm`): the state the two moves leave, written once."""
    tp = policy.tiers
    keep = (
        (facts.use_count > 0)
        | (facts.importance >= tp.hot_to_warm_min_importance)
        | facts.pinned
        | facts.core
    )
    onward = keep & warm_due(facts, now, policy)
    out = HotExpiry([], [], [])
    for i, memory_id in enumerate(facts.ids):
        if onward[i]:
            out.through_warm.append(memory_id)
        else:
            (out.to_warm if keep[i] else out.to_cold).append(memory_id)
    return out


def warm_to_cold_query(now: datetime, policy: Policy) -> ScanQuery:
    """WARM memories unused for at least as long as any the rule moves has been
    (`warm_idle_at_least`); neither pinned nor core."""
    return ScanQuery(
        tiers=WARM,
        last_used_before=now - warm_idle_at_least(policy),
        pinned=False,
        core=False,
        limit=EXPIRY_PAGE,
    )


def warm_idle_at_least(policy: Policy) -> timedelta:
    """How long any memory the WARM -> COLD rule sends on has gone unused: the shorter
    of `warm_idle` and the shortest half-life's time to the floor plus the dwell."""
    tp, dp = policy.tiers, policy.decay
    shortest = min(dp.half_life_days.values())
    earliest = decay.time_to_floor(shortest, tp.floor_epsilon, dp.floor) + tp.floor_dwell
    return min(tp.warm_idle, earliest)


def warm_due(facts: MemoryFacts, now: datetime, policy: Policy) -> Bools:
    """Which of `facts` the WARM -> COLD rule moves at `now` (their tier aside):
    neither pinned nor core, and unused for `warm_idle`, or at the retention floor
    (within `floor_epsilon`) for `floor_dwell`: last use + `decay.time_to_floor` +
    dwell <= now (a timestamp computed from the last use, not a counter)."""
    tp = policy.tiers
    now_us = to_micros(now)
    idle = facts.last_used_at < to_micros(now - tp.warm_idle)
    dwell = tp.floor_dwell // timedelta(microseconds=1)
    dwelt = now_us - (facts.last_used_at + time_to_floor_us(facts, policy)) >= dwell
    due: Bools = ~facts.pinned & ~facts.core & (idle | dwelt)
    return due


def time_to_floor_us(facts: MemoryFacts, policy: Policy) -> npt.NDArray[np.int64]:
    """`decay.time_to_floor` of each memory, in microseconds: how long after its last
    use its retention is within `floor_epsilon` of its floor."""
    tp, dp = policy.tiers, policy.decay
    span = 1.0 - floors(facts, dp)
    with np.errstate(divide="ignore", invalid="ignore"):
        days = half_lives(facts, dp) * np.log2(span / tp.floor_epsilon)
    days = np.where(span <= tp.floor_epsilon, 0.0, days)
    # timedelta(days=x) rounds to the microsecond; so does this
    out: npt.NDArray[np.int64] = np.rint(days * _US_PER_DAY).astype(np.int64)
    return out


@dataclass(frozen=True)
class HotExpiryBounds:
    """`hot_expiry` as bounds a store can test row by row in its own query language
    (the embedded store's bulk expiry): with `keep` = used, or importance at least
    `keep_importance`, or pinned, or core, a HOT memory changed before
    `changed_before` goes COLD unless kept; a kept one goes WARM, or straight COLD
    when neither pinned nor core and last used before `idle_before`, or at or before
    `dwelt_by` minus its `time_to_floor_us` (`warm_due`). All in microseconds."""

    changed_before: int
    keep_importance: float
    idle_before: int
    dwelt_by: int


@dataclass(frozen=True)
class HotExpiryMoves:
    """How many memories a bulk expiry moved (or would move, in a dry run)."""

    to_warm: int
    to_cold: int
    through_warm: int


@runtime_checkable
class SupportsBulkExpiry(Protocol):
    """A store that applies `hot_expiry` inside its own query language, moving rows
    without handing their columns and ids to the sweep: at a million HOT memories due,
    reading their columns and sending the ids back cost more than the moves (the
    embedded store). `time_to_floor` is `unpinned_time_to_floor_us` for the policy."""

    async def expire_hot(
        self,
        namespace: str,
        bounds: HotExpiryBounds,
        time_to_floor: Callable[[MemoryType, int], int],
        when: datetime,
        *,
        dry_run: bool,
    ) -> HotExpiryMoves: ...


@runtime_checkable
class SupportsBoundOrderScan(Protocol):
    """A store that pages through every row of a scan bounded by `last_used_before` in
    the order of its timestamp index (`after_id` aside; pages in no order, each by id):
    for a caller that reads every page before it acts (consolidation). Paging by id,
    the embedded store read the bounded rows and then the tier's rows in random order.

    `type_bounds` (a memory type -> a time) lets the store leave out the rows of a type
    last used at or after that type's time, on top of `last_used_before`: a hint, as
    the caller tests every row it gets anyway (`fading_bounds`)."""

    def scan_facts_by_bound(
        self,
        namespace: str,
        query: ScanQuery,
        *,
        type_bounds: Mapping[MemoryType, datetime] | None = None,
    ) -> AsyncIterator[MemoryFacts]: ...


FADING_MARGIN = timedelta(seconds=1)
"""How much later than its exact bound `fading_bounds` lets a type's rows through: the
retention test of a row within microseconds of the bound rounds one way or the other,
and the bound only ever lets more rows through to it."""


def fading_bounds(
    now: datetime, dp: DecayPolicy, retention_below: float
) -> dict[MemoryType, datetime]:
    """For each memory type, a time after which no unpinned, non-core memory of that
    type last used then has `retention` below `retention_below` at `now`.

    Why: retention < t needs elapsed > h_eff * log2((1 - floor) / (t - floor)), and
    h_eff >= the type's half-life, log2((1 - floor) / (t - floor)) >= log2(1 / t) for
    floor < t (and nothing fades for floor >= t). Consolidation bounded its scan by the
    shortest half-life of any type: at a million memories it read 216k rows of which
    90k could fade (the longer-lived types' rows read only to be tested and dropped).
    """
    steps = np.log2(1.0 / max(retention_below, 1e-9))
    return {
        memory_type: now - timedelta(days=float(days) * steps) + FADING_MARGIN
        for memory_type, days in dp.half_life_days.items()
    }


def hot_expiry_bounds(now: datetime, policy: Policy) -> HotExpiryBounds:
    tp = policy.tiers
    query = hot_expiry_query(now, tp)
    assert query.tier_changed_before is not None
    return HotExpiryBounds(
        changed_before=to_micros(query.tier_changed_before),
        keep_importance=tp.hot_to_warm_min_importance,
        idle_before=to_micros(now - tp.warm_idle),
        dwelt_by=to_micros(now) - tp.floor_dwell // timedelta(microseconds=1),
    )


def unpinned_time_to_floor_us(memory_type: MemoryType, use_count: int, policy: Policy) -> int:
    """`time_to_floor_us` of one memory neither pinned nor core (the same arithmetic)."""
    one = MemoryFacts(
        ids=[""],
        memory_types=[memory_type],
        importance=np.zeros(1),
        use_count=np.array([use_count], dtype=np.int64),
        pinned=np.zeros(1, dtype=np.bool_),
        core=np.zeros(1, dtype=np.bool_),
        do_not_inject=np.zeros(1, dtype=np.bool_),
        created_at=np.zeros(1, dtype=np.int64),
        last_used_at=np.zeros(1, dtype=np.int64),
        cold_since=np.zeros(1, dtype=np.int64),
    )
    return int(time_to_floor_us(one, policy)[0])


SUPERSEDED_QUERY = ScanQuery(tiers=ACTIVE, superseded=True, pinned=False)
"""Active memories another has superseded (an update or a consolidation): all go COLD."""


def cold_to_warm_query(tp: TierPolicy) -> ScanQuery:
    """COLD memories used at least `reactivate_uses` times since they went cold."""
    return ScanQuery(
        tiers=COLD, min_uses_since_cold=tp.reactivate_uses, superseded=False, limit=SCAN_PAGE
    )


def reactivated(facts: MemoryFacts, tp: TierPolicy) -> list[str]:
    """COLD -> WARM: used `reactivate_uses` times on `reactivate_distinct_days`
    distinct days since it went cold: it is wanted again. (`facts` with use days.)"""
    assert facts.use_days is not None
    out: list[str] = []
    for i, memory_id in enumerate(facts.ids):
        went_cold = facts.cold_since[i]
        since = day_of(facts.created_at[i] if went_cold == NO_TIME else went_cold)
        days = {d for d in facts.use_days[i] if d >= since}
        if len(days) >= tp.reactivate_distinct_days:
            out.append(memory_id)
    return out


def core_query(tp: TierPolicy) -> ScanQuery:
    """Active memories not yet core, used at least `core_min_uses` times."""
    return ScanQuery(
        tiers=ACTIVE,
        core=False,
        superseded=False,
        min_use_count=tp.core_min_uses,
        limit=SCAN_PAGE,
    )


def earn_core(facts: MemoryFacts, now: datetime, policy: Policy) -> list[str]:
    """Stable and used memories earn `core` (a retention floor, no demotion): retention
    at least `core_min_retention`, used on `core_min_distinct_days` distinct days.
    (`facts` with use days.)"""
    tp = policy.tiers
    assert facts.use_days is not None
    retained = retention(facts, now, policy.decay) >= tp.core_min_retention
    return [
        facts.ids[i]
        for i in np.flatnonzero(retained)
        if len(set(facts.use_days[i])) >= tp.core_min_distinct_days
    ]


# -- to ARCHIVED --------------------------------------------------------------------------

COLD_TTL_EXPIRED = "cold_ttl_expired"
LOW_SALIENCE = "low_salience_aged_out"
FORCED_AGE = "forced_age_archived"


def archive_queries(now: datetime, tp: TierPolicy) -> dict[str, ScanQuery]:
    """The memories that may be due for archival, by reason: COLD for
    `cold_to_archive`; or COLD, older than `archive_min_age` and at most
    `archive_max_importance` (then `low_salience` decides); or, in any live tier and
    whatever their importance, older than `force_archive_age` (then `rarely_used`
    decides; seed 001's forced archival, off when the age is None). Never pinned or
    core."""
    base = ScanQuery(tiers=COLD, pinned=False, core=False, limit=SCAN_PAGE)
    queries = {
        COLD_TTL_EXPIRED: replace(base, cold_since_before=now - tp.cold_to_archive),
        LOW_SALIENCE: replace(
            base,
            created_before=now - tp.archive_min_age,
            importance_at_most=tp.archive_max_importance,
        ),
    }
    if tp.force_archive_age is not None:
        queries[FORCED_AGE] = replace(
            base, tiers=LIVE_TIERS, created_before=now - tp.force_archive_age
        )
    return queries


def recent_uses_at_most(memory: Memory, now: datetime, window: timedelta) -> int:
    """The most uses `memory` can have had within `window` before `now`.

    Uses are kept as a count and the distinct days they fell on, so the number within a
    window is bounded, not known: each day before the window took at least one of the
    count, and each day inside it holds at least one. Exact when no day held two uses."""
    start = (now - window).date()
    recent = sum(1 for d in memory.use_days if d >= start)
    if recent == 0:  # the kept days are the most recent ones: none in the window, no use
        return 0
    older = len(memory.use_days) - recent
    return max(recent, memory.use_count - older)


def rarely_used(memory: Memory, now: datetime, tp: TierPolicy) -> bool:
    """Used at most `archive_max_recent_uses` times within `archive_recent_window`."""
    uses = recent_uses_at_most(memory, now, tp.archive_recent_window)
    return uses <= tp.archive_max_recent_uses


def low_salience(memory: Memory, now: datetime, tp: TierPolicy) -> bool:
    """A memory `archive_queries` found for `LOW_SALIENCE` is due when it was used at
    most `archive_max_recent_uses` times within `archive_recent_window`."""
    return rarely_used(memory, now, tp)


def forced(memory: Memory, now: datetime, tp: TierPolicy) -> bool:
    """A memory `archive_queries` found for `FORCED_AGE` is due when it is rarely used
    (as for low salience): a year-old memory still used every few weeks stays, one
    used now and then goes, however important (its summary stays searchable)."""
    return rarely_used(memory, now, tp)
