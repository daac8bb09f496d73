"""The seeds' remaining rules on a simulated clock, with the seeds' numbers (issue 22):
forced archival at 365 days (seed 001), old COLD clusters archived under one summary
(seed 002), and provenance kept through both merges (consolidation, dedup at add)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.matrix import MemoryFactory
from tiered_memory import (
    ConsolidationPolicy,
    HashingEmbedder,
    ManualClock,
    MemoryType,
    Policy,
    Tier,
    TieredMemory,
    TierPolicy,
)
from tiered_memory.lifecycle import FORCED_AGE
from tiered_memory.provenance import MAX_MERGED

NS = "seeds"


def tier_of(mem: TieredMemory, memory_id: str) -> Tier:
    m = mem.get(memory_id, namespace=NS)
    assert m is not None, f"{memory_id} vanished"
    return m.tier


def use(mem: TieredMemory, query: str, memory_id: str) -> None:
    """One use of `memory_id` alone (a recall would inject every memory of a small
    namespace): what an app that injected it from `search` records."""
    assert memory_id in [h.memory.id for h in mem.search(query, namespace=NS)]
    assert mem.record_use([memory_id], namespace=NS) == 1


# -- 1. forced archival at 365 days (seed 001) ---------------------------------------------

PASSPORT = "The user's passport number is K4471902, renewed in Dublin"
BANK = "The user banks with Monzo; the joint account ends in 5521"
HABIT = "The user swims 40 lengths at the Clapham pool every Sunday"


def test_an_important_memory_used_every_45_days_is_archived_at_365_days(
    mem: TieredMemory, clock: ManualClock
) -> None:
    """Seed 001: "even important memories get archived after this period": older than
    365 days and used at most twice in the last 90, whatever the importance."""
    passport = mem.add(PASSPORT, namespace=NS, importance=0.9, memory_type=MemoryType.FACTUAL)
    busy = mem.add(BANK, namespace=NS, importance=0.9, memory_type=MemoryType.FACTUAL)
    pinned = mem.add(HABIT, namespace=NS, importance=0.9, pinned=True)
    # Once every 45 days, 7 times (an 8th use would earn it core, exempt by seed 000).
    every_45 = list(range(81, 361, 45))  # days 81, 126, ..., 351
    busy_days = {216, 261, 306, 330, 351}  # 3 of them within the last 90 days
    today = 0
    for day in sorted({*every_45, *busy_days}):
        clock.advance(days=day - today)
        today = day
        if day in every_45:
            use(mem, "what is the passport number", passport.id)
        if day in busy_days:
            use(mem, "which bank does the user use", busy.id)
        mem.maintain()
    clock.advance(days=364 - today)  # day 364: not a year old yet
    mem.maintain()
    assert tier_of(mem, passport.id) is Tier.WARM  # the tier rules never reach it

    clock.advance(days=2)  # day 366
    dry = mem.maintain(dry_run=True)
    assert [(d.id, d.reason, d.tier, d.recent_uses) for d in dry.forced_archival] == [
        (passport.id, FORCED_AGE, Tier.WARM, 2)
    ]
    assert dry.forced_archival[0].importance == 0.9
    assert dry.count("forced_archived") == 1
    assert dry.count("cold_to_archived") == 0  # listed apart from the COLD rules
    assert tier_of(mem, passport.id) is Tier.WARM  # a dry run changes nothing

    report = mem.maintain()
    assert report.errors == []
    assert report.count("forced_archived") == 1
    assert [d.id for d in report.forced_archival] == [passport.id]
    assert tier_of(mem, passport.id) is Tier.ARCHIVED
    assert tier_of(mem, busy.id) is Tier.WARM  # 3 uses in the last 90 days
    assert tier_of(mem, pinned.id) is Tier.WARM  # pinned: never
    original = mem.expand(passport.id, namespace=NS)
    assert original["archive_reason"] == FORCED_AGE
    # "they can still be retrieved via summary search"
    hits = mem.search("passport number", namespace=NS, deep=True)
    assert any(h.archived and h.memory.id == passport.id for h in hits)


def test_core_memories_are_never_force_archived(mem: TieredMemory, clock: ManualClock) -> None:
    habit = mem.add(HABIT, namespace=NS, importance=0.9, memory_type=MemoryType.PROCEDURAL)
    for _ in range(4):  # 8 uses on 4 days earn core
        use(mem, "where does the user swim", habit.id)
        use(mem, "where does the user swim", habit.id)
        clock.advance(days=1)
    mem.maintain()
    core = mem.get(habit.id, namespace=NS)
    assert core is not None
    assert core.core
    clock.advance(days=400)  # unused for 400 days
    report = mem.maintain()
    assert report.forced_archival == []
    assert tier_of(mem, habit.id) is Tier.WARM


def test_the_age_is_a_policy_field_and_none_turns_the_rule_off(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    assert TierPolicy().force_archive_age == timedelta(days=365)
    off = Policy(tiers=TierPolicy(force_archive_age=None))
    mem = memories.open_sync(tmp_path / "m.db", embedder=HashingEmbedder(), clock=clock, policy=off)
    try:
        kept = mem.add(PASSPORT, namespace=NS, importance=0.9, memory_type=MemoryType.FACTUAL)
        for _ in range(9):  # once every 45 days, to day 405
            clock.advance(days=45)
            use(mem, "what is the passport number", kept.id)
            mem.maintain()
        assert tier_of(mem, kept.id) is Tier.WARM
    finally:
        mem.close()
    shorter = Policy(tiers=TierPolicy(force_archive_age=timedelta(days=100)))
    mem = memories.open_sync(
        tmp_path / "n.db", embedder=HashingEmbedder(), clock=clock, policy=shorter
    )
    try:
        gone = mem.add(PASSPORT, namespace=NS, importance=0.9, memory_type=MemoryType.FACTUAL)
        clock.advance(days=45)
        use(mem, "what is the passport number", gone.id)
        clock.advance(days=56)  # day 101: one use in the last 90 days
        assert [d.id for d in mem.maintain().forced_archival] == [gone.id]
        assert tier_of(mem, gone.id) is Tier.ARCHIVED
    finally:
        mem.close()


# -- 2. old COLD clusters become one archive (seed 002) ------------------------------------

RUNS = [
    "Went for a run in the park on Monday morning",
    "Went for a run in the park on Tuesday morning",
    "Went for a long run in the park on Wednesday morning",
]


CLUSTERS = Policy(consolidation=ConsolidationPolicy(archive_clusters=True))


@pytest.fixture
def clustered(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> Iterator[TieredMemory]:
    """A memory with seed 002's cluster rule on (off by default: see docs/design.md)."""
    mem = memories.open_sync(
        tmp_path / "c.db", embedder=HashingEmbedder(), clock=clock, policy=CLUSTERS
    )
    try:
        yield mem
    finally:
        mem.close()


def test_old_cold_near_duplicates_are_archived_under_one_summary(
    clustered: TieredMemory, clock: ManualClock
) -> None:
    mem = clustered
    runs, other = _archive_a_cluster(mem, clock)

    # one summary is searched for the cluster: its most important member's record
    hits = [h for h in mem.search("run in the park", namespace=NS, deep=True) if h.archived]
    assert [h.memory.id for h in hits if h.memory.id in runs] == [runs[1]]

    # expand returns every original, whichever member is asked
    for asked in (runs[1], runs[2]):
        document = mem.expand(asked, namespace=NS)
        assert document["original_id"] == asked
        assert document["cluster"] == [runs[1], runs[0], runs[2]]
        originals = document["originals"]
        assert [d["original_id"] for d in originals] == [runs[1], runs[0], runs[2]]
        assert sorted(d["content"] for d in originals) == sorted(RUNS)
        assert all(len(d["embedding"]) == 384 for d in originals)
    single = mem.expand(other, namespace=NS)
    assert "cluster" not in single
    assert "originals" not in single

    # restore_archive brings each one back
    assert mem.restore_archive([runs[0]], namespace=NS) == 3
    back = {i: mem.get(i, namespace=NS) for i in runs}
    assert {m.tier for m in back.values() if m is not None} == {Tier.WARM}
    assert sorted(m.content for m in back.values() if m is not None) == sorted(RUNS)
    assert tier_of(mem, other) is Tier.ARCHIVED


def _archive_a_cluster(mem: TieredMemory, clock: ManualClock) -> tuple[list[str], str]:
    """RUNS (importance 0.2, 0.25, 0.1) and one unrelated memory, archived after 180
    days in COLD: the runs as one cluster, its summary on runs[1]'s record."""
    runs = [
        mem.add(text, namespace=NS, importance=importance).id
        for text, importance in zip(RUNS, (0.2, 0.25, 0.1), strict=True)
    ]
    other = mem.add("Filed the quarterly VAT return for Acme Ltd", namespace=NS, importance=0.2)
    clock.advance(days=4)
    mem.maintain()  # HOT -> COLD: unused, unimportant
    assert {tier_of(mem, i) for i in [*runs, other.id]} == {Tier.COLD}

    clock.advance(days=181)  # 180 days in COLD (seed 002's cold_ttl)
    dry = mem.maintain(dry_run=True)
    assert dry.count("archive_clusters") == 1
    assert dry.count("cold_to_archived") == 4
    assert dry.archive_estimate is not None
    assert dry.archive_estimate.summarizer_calls == 2  # one per cluster, one per single

    report = mem.maintain()
    assert report.errors == []
    assert report.count("archive_clusters") == 1
    assert report.count("cold_to_archived") == 4
    assert {tier_of(mem, i) for i in [*runs, other.id]} == {Tier.ARCHIVED}
    return runs, other.id


def test_hard_deleting_the_summary_member_keeps_the_cluster_searchable(
    clustered: TieredMemory, clock: ManualClock
) -> None:
    """The record that carries a cluster's summary embedding hands it on when it is
    deleted for good; before, the other members stayed archived but no search found
    them."""
    mem = clustered
    runs, _ = _archive_a_cluster(mem, clock)
    mem.forget(runs[1], namespace=NS, hard=True)
    hits = [h for h in mem.search("run in the park", namespace=NS, deep=True) if h.archived]
    assert [h.memory.id for h in hits if h.memory.id in runs] == [runs[0]]  # next in line
    document = mem.expand(runs[2], namespace=NS)
    assert [d["original_id"] for d in document["originals"]] == [runs[0], runs[2]]

    mem.forget_many(runs, namespace=NS, hard=True)  # the rest at once: nothing to hand on
    hits = mem.search("run in the park", namespace=NS, deep=True)
    assert [h.memory.id for h in hits if h.memory.id in runs] == []
    assert all(mem.get(i, namespace=NS) is None for i in runs)


def test_replacing_the_summary_member_keeps_the_cluster_searchable(
    clustered: TieredMemory, clock: ManualClock
) -> None:
    """An upsert of the summary member's id replaces its record: the summary goes on
    to the next member, as on a hard delete."""
    mem = clustered
    runs, _ = _archive_a_cluster(mem, clock)
    mem.upsert("Renewed the car insurance with Aviva", id=runs[1], namespace=NS)
    hits = [h for h in mem.search("run in the park", namespace=NS, deep=True) if h.archived]
    assert [h.memory.id for h in hits if h.memory.id in runs] == [runs[0]]


def test_clusters_can_be_turned_off(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    policy = Policy(consolidation=ConsolidationPolicy(archive_clusters=False))
    mem = memories.open_sync(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=clock, policy=policy
    )
    try:
        runs = [mem.add(text, namespace=NS, importance=0.2).id for text in RUNS]
        clock.advance(days=4)
        mem.maintain()
        clock.advance(days=181)
        report = mem.maintain()
        assert report.count("archive_clusters") == 0
        assert report.count("cold_to_archived") == 3
        assert all("cluster" not in mem.expand(i, namespace=NS) for i in runs)
    finally:
        mem.close()


# -- 4. provenance survives merges --------------------------------------------------------


@pytest.mark.matrix
def test_a_consolidated_memory_keeps_its_originals_metadata(
    mem: TieredMemory, clock: ManualClock
) -> None:
    ids = [
        mem.add(
            text,
            namespace=NS,
            importance=0.6,
            metadata={"user": "u1", "session": f"s{i}"},
            source="chat",
        ).id
        for i, text in enumerate(RUNS)
    ]
    clock.advance(days=4)
    mem.maintain()
    clock.advance(days=30)  # episodic half-life 10 d: retention 0.125 < 0.2
    assert mem.maintain().count("consolidated") == 3
    first = mem.get(ids[0], namespace=NS)
    assert first is not None
    assert first.superseded_by is not None
    summary = mem.get(first.superseded_by, namespace=NS)
    assert summary is not None
    assert summary.metadata["user"] == "u1"  # every original agreed: a filter still finds it
    assert "session" not in summary.metadata  # they disagreed: per original only
    cited = {e["id"]: e for e in summary.metadata["consolidated_from"]}
    assert set(cited) == set(ids)
    assert {e["metadata"]["session"] for e in cited.values()} == {"s0", "s1", "s2"}
    assert {e["source"] for e in cited.values()} == {"chat"}
    found = mem.search("run in the park", namespace=NS, metadata={"user": "u1"})
    assert summary.id in [h.memory.id for h in found]


@pytest.mark.matrix
def test_a_near_duplicate_merged_at_add_keeps_both_metadata(
    mem: TieredMemory, clock: ManualClock
) -> None:
    first = mem.add(PASSPORT, namespace=NS, metadata={"session": "s1"})
    clock.advance(hours=1)
    again = mem.add(PASSPORT, namespace=NS, metadata={"session": "s2"}, source="import")
    assert again.id == first.id
    assert again.metadata["session"] == "s1"
    [merged] = again.metadata["merged_from"]
    assert merged["metadata"] == {"session": "s2"}
    assert merged["source"] == "import"
    stored = mem.get(first.id, namespace=NS)
    assert stored is not None
    assert stored.metadata == again.metadata
    mem.add(PASSPORT, namespace=NS, metadata={"session": "s2"})  # nothing new: kept once
    mem.add(PASSPORT, namespace=NS)  # no metadata: nothing to keep
    stored = mem.get(first.id, namespace=NS)
    assert stored is not None
    assert len(stored.metadata["merged_from"]) == 1

    for i in range(3, 3 + MAX_MERGED + 5):  # bounded: the newest MAX_MERGED stay
        mem.add(PASSPORT, namespace=NS, metadata={"session": f"s{i}"})
    stored = mem.get(first.id, namespace=NS)
    assert stored is not None
    sessions = [e["metadata"]["session"] for e in stored.metadata["merged_from"]]
    assert len(sessions) == MAX_MERGED
    assert sessions[-1] == f"s{2 + MAX_MERGED + 5}"
    assert stored.metadata["session"] == "s1"
