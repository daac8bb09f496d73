"""The tier transitions of DESIGN.md section 2 as pure functions (`lifecycle`): the
moves a caller may ask for, what a move writes, restore and expansion, recall's
revival, and the sweep's rules one memory at a time. (`tests/engine/test_sweep_columns.py`
checks the column rules against scalar references over random namespaces, through the
sweep; `tests/engine/test_lifecycle.py` runs them for a year.)"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from itertools import product

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiered_memory import ValidationError
from tiered_memory import decay as d
from tiered_memory import lifecycle as lc
from tiered_memory.epoch import to_micros
from tiered_memory.models import CONTEXT_PHASE, Hit, Memory, MemoryType, ScoreTerms, Tier
from tiered_memory.policy import DecayPolicy, Policy, TierPolicy
from tiered_memory.ports import MemoryFacts

NOW = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)
DAY = timedelta(days=1)
TP = TierPolicy()
LIVE = (Tier.HOT, Tier.WARM, Tier.COLD)


def memory(
    id: str = "m",
    *,
    tier: Tier = Tier.HOT,
    age: timedelta = 10 * DAY,
    last_used: timedelta | None = None,
    use_count: int = 0,
    importance: float = 0.4,
    pinned: bool = False,
    core: bool = False,
    cold_since: datetime | None = None,
    use_days: list[date] | None = None,
    memory_type: MemoryType = MemoryType.EPISODIC,
) -> Memory:
    created = NOW - age
    return Memory(
        id=id,
        content=f"memory {id}",
        tier=tier,
        memory_type=memory_type,
        importance=importance,
        pinned=pinned,
        core=core,
        use_count=use_count,
        use_days=use_days or [],
        last_accessed_at=None if last_used is None else NOW - last_used,
        cold_since=cold_since,
        created_at=created,
        updated_at=created,
        tier_changed_at=created,
    )


# -- the moves a caller asks for: the whole table --------------------------------------

PROMOTIONS = {(Tier.WARM, Tier.HOT), (Tier.COLD, Tier.HOT), (Tier.COLD, Tier.WARM)}
DEMOTIONS = {(Tier.HOT, Tier.WARM), (Tier.HOT, Tier.COLD), (Tier.WARM, Tier.COLD)}


@pytest.mark.parametrize(("source", "target"), list(product(LIVE, Tier)))
@pytest.mark.parametrize("flag", ["plain", "pinned", "core"])
def test_the_table_of_explicit_moves(source: Tier, target: Tier, flag: str) -> None:
    """Promotion goes to a more active live tier whatever the flags; demotion to a less
    active live tier, never for a pinned or core memory; nothing moves to ARCHIVED."""
    m = memory(tier=source, pinned=flag == "pinned", core=flag == "core")
    if (source, target) in PROMOTIONS:
        lc.check_promotion(m, target)
    else:
        with pytest.raises(ValidationError, match="promot"):
            lc.check_promotion(m, target)
    if (source, target) in DEMOTIONS and flag == "plain":
        lc.check_demotion(m, target)
    else:
        with pytest.raises(ValidationError):
            lc.check_demotion(m, target)


def test_a_refused_demotion_says_why() -> None:
    with pytest.raises(ValidationError, match=r"pinned .* unpin it first"):
        lc.check_demotion(memory(pinned=True), Tier.COLD)
    with pytest.raises(ValidationError, match="core and exempt"):
        lc.check_demotion(memory(core=True), Tier.COLD)
    with pytest.raises(ValidationError, match=r"maintain\(\) or archive\(\)"):
        lc.check_demotion(memory(), Tier.ARCHIVED)
    with pytest.raises(ValidationError, match="less active tier"):
        lc.check_demotion(memory(tier=Tier.COLD), Tier.WARM)


def test_pinning_brings_a_cold_memory_back_to_warm_and_moves_no_other() -> None:
    assert lc.tier_when_pinned(memory(tier=Tier.COLD)) is Tier.WARM
    assert lc.tier_when_pinned(memory(tier=Tier.HOT)) is None
    assert lc.tier_when_pinned(memory(tier=Tier.WARM)) is None


# -- what a move writes ------------------------------------------------------------------


def test_a_move_writes_the_cold_bookkeeping_and_is_idempotent() -> None:
    m = memory(tier=Tier.HOT).model_copy(update={"uses_since_cold": 4})
    cold = lc.moved(m, Tier.COLD, NOW + DAY)
    assert (cold.tier, cold.cold_since, cold.tier_changed_at, cold.uses_since_cold) == (
        Tier.COLD,
        NOW + DAY,
        NOW + DAY,
        0,
    )
    assert m.tier is Tier.HOT  # a copy: the memory given is untouched
    assert lc.moved(cold, Tier.COLD, NOW + 5 * DAY) == cold  # timestamps kept
    warm = lc.moved(cold, Tier.WARM, NOW + 2 * DAY)
    assert (warm.tier, warm.cold_since, warm.tier_changed_at) == (Tier.WARM, None, NOW + 2 * DAY)
    hot = lc.moved(warm, Tier.HOT, NOW + 3 * DAY)
    assert (hot.tier, hot.cold_since) == (Tier.HOT, None)
    naive = lc.moved(m, Tier.WARM, datetime(2026, 7, 1))
    assert naive.tier_changed_at == datetime(2026, 7, 1, tzinfo=timezone.utc)
    with pytest.raises(ValidationError):
        lc.moved(m, Tier.ARCHIVED, NOW)


def test_a_restored_memory_is_warm_live_and_used_now() -> None:
    original = memory(tier=Tier.COLD, cold_since=NOW - 200 * DAY).model_copy(
        update={"namespace": "elsewhere", "uses_since_cold": 2}
    )
    back = lc.restored(original, "ns", NOW)
    assert (back.namespace, back.tier, back.cold_since, back.uses_since_cold) == (
        "ns",
        Tier.WARM,
        None,
        0,
    )
    assert back.tier_changed_at == back.last_accessed_at == back.updated_at == NOW
    assert (back.id, back.content, back.created_at) == (
        original.id,
        original.content,
        original.created_at,
    )


def test_three_expansions_within_the_window_restore() -> None:
    old = NOW - TP.restore_window - DAY
    recent, due = lc.expansions_to_keep([old, NOW - 2 * DAY], NOW, TP)
    assert recent == [NOW - 2 * DAY, NOW]  # the one outside the window is dropped
    assert not due
    recent, due = lc.expansions_to_keep([NOW - 20 * DAY, NOW - DAY], NOW, TP)
    assert len(recent) == TP.restore_expansions
    assert due


# -- recall: what counts as a use, and revival -----------------------------------------


def hit(m: Memory, phase: int, tier: Tier | None = None) -> Hit:
    t = tier or m.tier
    return Hit(memory=m, tier=t, score=0.5, terms=ScoreTerms(), phase=phase)


def test_only_live_hits_injected_on_their_own_merit_count_as_uses() -> None:
    direct = hit(memory("a"), 1)
    via_graph = hit(memory("b", tier=Tier.COLD), lc.ASSOCIATION_PHASE)
    neighbour = hit(memory("c"), CONTEXT_PHASE)
    archived = hit(memory("d"), 4, Tier.ARCHIVED)
    assert lc.counted_uses([direct, via_graph, neighbour, archived]) == [direct, via_graph]


def test_only_cold_memories_reached_through_an_association_are_revived() -> None:
    found_cold = hit(memory("a", tier=Tier.COLD), 3)  # waits for the sweep
    linked_cold = hit(memory("b", tier=Tier.COLD), lc.ASSOCIATION_PHASE)
    linked_warm = hit(memory("c", tier=Tier.WARM), lc.ASSOCIATION_PHASE)
    assert lc.revived([found_cold, linked_cold, linked_warm]) == ["b"]


# -- the sweep's rules, one memory at a time ----------------------------------------------


def test_hot_expiry_keeps_what_was_used_or_matters_and_sends_the_rest_cold() -> None:
    policy = Policy()
    facts = MemoryFacts.of(
        [
            memory("used", last_used=2 * DAY, use_count=1),
            memory("important", importance=TP.hot_to_warm_min_importance),
            memory("pinned", pinned=True),
            memory("core", core=True),
            memory("idle", importance=0.1),
            # used once, long ago: WARM would send it on at once, so it goes through
            memory("stale", age=200 * DAY, last_used=100 * DAY, use_count=1),
            # pinned and as stale: pinned memories settle in WARM
            memory("pinned-stale", age=200 * DAY, last_used=100 * DAY, pinned=True),
        ]
    )
    expiry = lc.hot_expiry(facts, NOW, policy)
    assert expiry.to_warm == ["used", "important", "pinned", "core", "pinned-stale"]
    assert expiry.to_cold == ["idle"]
    assert expiry.through_warm == ["stale"]


def test_warm_goes_cold_when_idle_or_at_its_floor_for_the_dwell() -> None:
    policy = Policy()
    idle = TP.warm_idle + DAY
    facts = MemoryFacts.of(
        [
            memory("idle", age=idle, last_used=idle),
            memory("fresh", age=idle, last_used=DAY),
            memory("pinned", age=idle, last_used=idle, pinned=True),
            memory("core", age=idle, last_used=idle, core=True),
        ]
    )
    assert list(lc.warm_due(facts, NOW, policy)) == [True, False, False, False]
    # the floor rule, with warm_idle out of the way: at the floor (within floor_epsilon)
    # for floor_dwell; the shortest half-life is the unused episodic memory's
    slow = Policy(tiers=TierPolicy(warm_idle=timedelta(days=3650)))
    floor_at = lc.warm_idle_at_least(slow)
    dp = slow.decay
    assert floor_at == (
        d.time_to_floor(dp.half_life_days[MemoryType.EPISODIC], TP.floor_epsilon, dp.floor)
        + TP.floor_dwell
    )
    at_floor = MemoryFacts.of([memory("f", age=floor_at, last_used=floor_at)])
    short = MemoryFacts.of([memory("f", age=floor_at, last_used=floor_at - DAY)])
    assert list(lc.warm_due(at_floor, NOW, slow)) == [True]
    assert list(lc.warm_due(short, NOW, slow)) == [False]
    assert lc.warm_idle_at_least(policy) == min(TP.warm_idle, floor_at)
    floor_at = lc.warm_idle_at_least(policy)
    query = lc.warm_to_cold_query(NOW, policy)
    assert (query.tiers, query.last_used_before) == (lc.WARM, NOW - floor_at)
    assert (query.pinned, query.core) == (False, False)


def test_cold_comes_back_when_used_on_enough_distinct_days_since_it_went_cold() -> None:
    went_cold = NOW - 10 * DAY
    days_after = [(NOW - 3 * DAY).date(), (NOW - DAY).date()]
    one_day_after = [(NOW - DAY).date()]
    before_and_after = [(NOW - 20 * DAY).date(), (NOW - DAY).date()]
    facts = MemoryFacts.of(
        [
            memory("back", tier=Tier.COLD, cold_since=went_cold, use_days=days_after),
            memory("one-day", tier=Tier.COLD, cold_since=went_cold, use_days=one_day_after),
            memory("earlier", tier=Tier.COLD, cold_since=went_cold, use_days=before_and_after),
            # never stamped cold (an old record): counted from its creation
            memory("unstamped", tier=Tier.COLD, age=5 * DAY, use_days=days_after),
        ],
        use_days=True,
    )
    assert lc.reactivated(facts, TP) == ["back", "unstamped"]
    query = lc.cold_to_warm_query(TP)
    assert (query.tiers, query.min_uses_since_cold) == (lc.COLD, TP.reactivate_uses)


def test_core_is_earned_by_retention_and_use_on_distinct_days() -> None:
    policy = Policy()
    days = [(NOW - i * DAY).date() for i in range(TP.core_min_distinct_days)]
    uses = TP.core_min_uses
    facts = MemoryFacts.of(
        [
            memory("habit", use_count=uses, last_used=DAY, use_days=days),
            memory("burst", use_count=uses, last_used=DAY, use_days=days[:1]),
            memory("faded", use_count=uses, last_used=400 * DAY, use_days=days, age=500 * DAY),
        ],
        use_days=True,
    )
    assert lc.earn_core(facts, NOW, policy) == ["habit"]


def test_archival_is_due_for_long_cold_or_old_unimportant_barely_used_memories() -> None:
    queries = lc.archive_queries(NOW, TP)
    ttl, low = queries[lc.COLD_TTL_EXPIRED], queries[lc.LOW_SALIENCE]
    assert (ttl.tiers, ttl.pinned, ttl.core) == (lc.COLD, False, False)
    assert ttl.cold_since_before == NOW - TP.cold_to_archive
    assert (low.created_before, low.importance_at_most) == (
        NOW - TP.archive_min_age,
        TP.archive_max_importance,
    )
    recent = (NOW - DAY).date()
    long_ago = (NOW - TP.archive_recent_window - DAY).date()
    assert lc.low_salience(memory(use_count=2, use_days=[recent]), NOW, TP)
    assert lc.low_salience(memory(use_count=9, use_days=[long_ago]), NOW, TP)
    assert not lc.low_salience(memory(use_count=9, use_days=[long_ago, recent]), NOW, TP)


@given(
    memory_type=st.sampled_from(list(MemoryType)),
    use_count=st.integers(0, 1000),
    floor=st.floats(0.0, 0.9),
    retention_below=st.floats(0.01, 0.99),
    after=st.floats(0.0, 1.0),
)
def test_nothing_used_after_its_types_fading_bound_fades(
    memory_type: MemoryType, use_count: int, floor: float, retention_below: float, after: float
) -> None:
    """`fading_bounds` only ever leaves out memories whose retention is not below the
    consolidation threshold: a memory last used at or after its type's bound (up to
    now), whatever its use count and the floor, keeps retention >= the threshold, as
    the sweep's column test and the scalar one compute it."""
    now = datetime(2026, 6, 1, tzinfo=timezone.utc)
    dp = DecayPolicy(floor=floor)
    bound = lc.fading_bounds(now, dp, retention_below)[memory_type]
    last_used = bound + (now - bound) * after
    facts = MemoryFacts(
        ids=["m"],
        memory_types=[memory_type],
        importance=np.zeros(1),
        use_count=np.array([use_count], dtype=np.int64),
        pinned=np.zeros(1, dtype=np.bool_),
        core=np.zeros(1, dtype=np.bool_),
        do_not_inject=np.zeros(1, dtype=np.bool_),
        created_at=np.array([to_micros(last_used)], dtype=np.int64),
        last_used_at=np.array([to_micros(last_used)], dtype=np.int64),
        cold_since=np.zeros(1, dtype=np.int64),
    )
    assert lc.retention(facts, now, dp)[0] >= retention_below
    memory = Memory(
        namespace="n",
        content="x",
        memory_type=memory_type,
        use_count=use_count,
        created_at=last_used,
        updated_at=last_used,
    )
    assert d.retention(memory, now, dp) >= retention_below


def test_fading_bounds_are_the_shortest_bound_for_the_shortest_half_life() -> None:
    """The shortest-lived type's bound is the scan's own (`last_used_before`), one
    margin later; the others' are further back, in proportion to their half-lives."""
    now = datetime(2026, 6, 1, tzinfo=timezone.utc)
    dp = DecayPolicy()
    bounds = lc.fading_bounds(now, dp, 0.2)
    steps = np.log2(1 / 0.2)
    for memory_type, days in dp.half_life_days.items():
        assert bounds[memory_type] == now - timedelta(days=days * steps) + lc.FADING_MARGIN
