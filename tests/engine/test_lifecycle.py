"""The tier life cycle of DESIGN.md section 2 on a simulated clock (issue 3)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.distinct import distinct_texts
from tests.matrix import MemoryFactory
from tiered_memory import (
    ArchivalPolicy,
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    MemoryType,
    Policy,
    Tier,
    TieredMemory,
    TieredMemoryError,
)
from tiered_memory.archive import decode_document, document_links, sha256_hex

NS = "sim"


def tier_of(mem: TieredMemory, memory_id: str) -> Tier:
    m = mem.get(memory_id, namespace=NS)
    assert m is not None, f"{memory_id} vanished"
    return m.tier


def use(mem: TieredMemory, query: str, memory_id: str, *, deep: bool = False) -> None:
    """Recall so that `memory_id` is injected, and check it was."""
    inj = mem.recall(query, namespace=NS, budget_tokens=2000, deep=deep)
    assert memory_id in [h.memory.id for h in inj.items], inj.text


def test_a_year_in_the_life_of_one_namespace(mem: TieredMemory, clock: ManualClock) -> None:
    used = mem.add(
        "The user's car is a blue Volvo estate",
        namespace=NS,
        importance=0.3,
        memory_type=MemoryType.FACTUAL,
    )
    important = mem.add(
        "The user is allergic to penicillin",
        namespace=NS,
        importance=0.8,
        memory_type=MemoryType.FACTUAL,
    )
    faded = mem.add("Watched a documentary about octopuses", namespace=NS, importance=0.4)
    pinned = mem.add(
        "Always reply in Spanish", namespace=NS, pinned=True, memory_type=MemoryType.PROCEDURAL
    )
    assert {tier_of(mem, m.id) for m in (used, important, faded, pinned)} == {Tier.HOT}

    use(mem, "what car does the user drive", used.id)
    clock.advance(hours=73)
    report = mem.maintain()
    assert tier_of(mem, used.id) is Tier.WARM  # used since capture
    assert tier_of(mem, important.id) is Tier.WARM  # importance >= 0.5
    assert tier_of(mem, faded.id) is Tier.COLD
    assert tier_of(mem, pinned.id) is Tier.WARM  # settles, never cold
    assert report.count("hot_to_warm") == 3
    assert report.count("hot_to_cold") == 1
    assert mem.maintain().moved == {}  # idempotent at the same time

    # 3 uses on 2 distinct days bring a COLD memory back to WARM
    use(mem, "octopuses documentary", faded.id, deep=True)
    use(mem, "octopuses documentary", faded.id, deep=True)
    mem.maintain()
    assert tier_of(mem, faded.id) is Tier.COLD  # 2 uses on one day is not enough
    clock.advance(days=1)
    use(mem, "octopuses documentary", faded.id, deep=True)
    assert mem.maintain().count("cold_to_warm") == 1
    assert tier_of(mem, faded.id) is Tier.WARM

    # 60 idle days send WARM to COLD; pinned stays
    clock.advance(days=61)
    report = mem.maintain()
    assert report.count("warm_to_cold") == 3
    assert {tier_of(mem, m.id) for m in (used, important, faded)} == {Tier.COLD}
    assert tier_of(mem, pinned.id) is Tier.WARM

    # 180 days in COLD archive it: summary searchable with deep, original in the store
    clock.advance(days=181)
    report = mem.maintain()
    assert report.count("cold_to_archived") == 3
    assert report.errors == []
    assert tier_of(mem, important.id) is Tier.ARCHIVED
    assert tier_of(mem, pinned.id) is Tier.WARM
    live_only = mem.search(
        "penicillin allergy", namespace=NS, tiers=[Tier.HOT, Tier.WARM, Tier.COLD]
    )
    assert all(not h.archived for h in live_only)
    deep = mem.search("penicillin allergy", namespace=NS, deep=True)
    archived_hits = [h for h in deep if h.archived]
    assert archived_hits[0].memory.id == important.id
    assert archived_hits[0].terms.tier_factor == pytest.approx(1 / 1.2)
    inj = mem.recall("penicillin allergy", namespace=NS, deep=True)
    assert f"[archived id={important.id}]" in inj.text

    original = mem.expand(important.id, namespace=NS)
    assert original["content"] == "The user is allergic to penicillin"
    assert original["schema_version"] == 2
    assert len(original["embedding"]) == 384  # decoded from its compact form
    assert original["memory"]["embedding"] == original["embedding"]
    assert original["original_id"] == important.id
    assert original["archive_reason"] == "cold_ttl_expired"
    assert tier_of(mem, important.id) is Tier.ARCHIVED
    mem.expand(important.id, namespace=NS)
    clock.advance(days=2)
    mem.expand(important.id, namespace=NS)  # third within 30 days: restored
    back = mem.get(important.id, namespace=NS)
    assert back is not None
    assert back.tier is Tier.WARM
    assert back.content == "The user is allergic to penicillin"
    assert back.importance == 0.8
    assert tier_of(mem, pinned.id) is Tier.WARM


def test_core_memories_never_move(mem: TieredMemory, clock: ManualClock) -> None:
    habit = mem.add(
        "The user runs 5 km every morning before work",
        namespace=NS,
        memory_type=MemoryType.PROCEDURAL,
        importance=0.6,
    )
    for _ in range(4):  # 8 uses on 4 days
        use(mem, "morning run before work", habit.id)
        use(mem, "morning run before work", habit.id)
        clock.advance(days=1)
    report = mem.maintain()
    assert report.count("core_promoted") == 1
    core = mem.get(habit.id, namespace=NS)
    assert core is not None
    assert core.core
    clock.advance(days=400)
    mem.maintain()
    assert tier_of(mem, habit.id) is Tier.WARM
    assert mem.explain(habit.id, namespace=NS).terms.retention > 0.6
    clock.advance(days=20_000)
    mem.maintain()
    assert tier_of(mem, habit.id) is Tier.WARM
    assert mem.explain(habit.id, namespace=NS).terms.retention == pytest.approx(0.6)


def test_dry_run_reports_and_estimates_without_changing_anything(
    mem: TieredMemory, clock: ManualClock
) -> None:
    texts = distinct_texts(5, lambda i: f"Low value note {i}:")  # one summary each
    ids = [mem.add(text, namespace=NS, importance=0.1).id for text in texts]
    clock.advance(days=4)
    mem.maintain()
    clock.advance(days=200)
    before = {i: tier_of(mem, i) for i in ids}
    dry = mem.maintain(dry_run=True)
    assert dry.dry_run
    assert dry.count("cold_to_archived") == 5
    assert dry.archive_estimate is not None
    assert dry.archive_estimate.summarizer_calls == 5
    assert dry.archive_estimate.input_tokens > 5 * 80
    assert dry.archive_estimate.bytes > 5 * 1000  # originals carry their embeddings
    assert {i: tier_of(mem, i) for i in ids} == before
    real = mem.maintain()
    assert real.count("cold_to_archived") == 5
    assert {tier_of(mem, i) for i in ids} == {Tier.ARCHIVED}


STEPS = [
    ("summarizer", "summarize"),
    ("embedder", "aembed_documents"),
    ("objects", "put"),
    ("objects", "head"),
    ("graph", "drop_nodes"),
    ("store", "archive_many"),
]


@pytest.mark.parametrize(("port", "method"), STEPS)
async def test_a_failure_at_any_archival_step_loses_nothing(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory, port: str, method: str
) -> None:
    fast = Policy(archival=ArchivalPolicy(backoff_base_seconds=0.0))
    amem = await memories.open(tmp_path / "f.db", clock=clock, policy=fast)
    try:
        await _failure_scenario(amem, clock, port, method)
    finally:
        await amem.close()


async def _failure_scenario(
    amem: AsyncTieredMemory, clock: ManualClock, port: str, method: str
) -> None:
    a = await amem.add("Ava's school play is on the 12th of June", namespace=NS)
    b = await amem.add("Ava will be a tree in the school play", namespace=NS)
    assert await amem.links(a.id, namespace=NS)
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    target = getattr(amem.archiver, port)
    original = getattr(target, method)
    calls = {"n": 0}

    async def broken(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if method == "head":  # a store that lies about what it holds
            return None
        raise TieredMemoryError(f"injected failure in {method}")

    setattr(target, method, broken)
    try:
        report = await amem.maintain()
    finally:
        setattr(target, method, original)
    assert calls["n"] >= 1
    assert report.count("cold_to_archived") == 0
    assert report.errors
    for m in (a, b):
        still = await amem.get(m.id, namespace=NS)
        assert still is not None
        assert still.tier is Tier.COLD
        assert still.content == m.content
        assert await amem.store.get_archives(NS, [m.id]) == {}

    report = await amem.maintain()  # the rerun completes
    assert report.count("cold_to_archived") == 2
    for m in (a, b):
        record = (await amem.store.get_archives(NS, [m.id]))[m.id]
        data = await amem.archiver.verified_original(NS, record)
        assert sha256_hex(data) == record.checksum
        assert decode_document(data)["content"] == m.content
        assert record.storage_verified
        assert await amem.store.get_many(NS, [m.id]) == {}
    records = await amem.store.get_archives(NS, [a.id, b.id])
    kept = {
        (m.id, link.target)
        for m in (a, b)
        for link in document_links(
            decode_document(await amem.archiver.verified_original(NS, records[m.id]))
        )
    }
    assert kept  # the association survives in the verified originals
    assert kept <= {(a.id, b.id), (b.id, a.id)}
    assert await amem.graph.links_of(NS, [a.id, b.id]) == []  # and none left dangling
    assert await amem.restore_archive([a.id, b.id], namespace=NS) == 2
    assert await amem.links(a.id, namespace=NS)  # restored from the originals


async def test_archival_pauses_when_more_than_5_percent_fail(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    policy = Policy(archival=ArchivalPolicy(backoff_base_seconds=0.0, max_retries=1))
    amem = await memories.open(tmp_path / "p.db", clock=clock, policy=policy)
    try:
        await _pause_scenario(amem, clock)
    finally:
        await amem.close()


async def _pause_scenario(amem: AsyncTieredMemory, clock: ManualClock) -> None:
    for i in range(30):
        await amem.add(
            f"Routine log line {i}: service {i * 13} restarted", namespace=NS, importance=0.1
        )
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    original = amem.archiver.summarizer.summarize

    async def flaky(request: Any) -> Any:
        if "restarted" in request.content and hash(request.content) % 2:
            raise TieredMemoryError("summariser overloaded")
        return await original(request)

    amem.archiver.summarizer.summarize = flaky  # type: ignore[method-assign]
    try:
        report = await amem.maintain()
    finally:
        amem.archiver.summarizer.summarize = original  # type: ignore[method-assign]
    assert report.archive_paused
    assert any("paused" in e for e in report.errors)
    stats = await amem.stats(namespace=NS)
    assert stats.tiers[Tier.ARCHIVED].count + stats.tiers[Tier.COLD].count == 30
    assert stats.tiers[Tier.COLD].count > 0
    report = await amem.maintain()
    assert not report.archive_paused
    assert (await amem.stats(namespace=NS)).tiers[Tier.ARCHIVED].count == 30


def test_consolidation_merges_fading_near_duplicates(mem: TieredMemory, clock: ManualClock) -> None:
    texts = [
        "Went for a run in the park on Monday morning",
        "Went for a run in the park on Tuesday morning",
        "Went for a long run in the park on Wednesday morning",
    ]
    ids = [mem.add(t, namespace=NS, importance=0.6).id for t in texts]
    assert len(set(ids)) == 3
    other = mem.add("Filed the quarterly VAT return", namespace=NS, importance=0.6)
    clock.advance(days=4)
    mem.maintain()
    clock.advance(days=30)  # episodic half-life 10 d: retention 0.125 < 0.2
    report = mem.maintain()
    assert report.count("consolidated") == 3
    originals = [mem.get(i, namespace=NS) for i in ids]
    assert all(m is not None and m.superseded_by and m.tier is Tier.COLD for m in originals)
    summary_id = originals[0].superseded_by  # type: ignore[union-attr]
    summary = mem.get(summary_id, namespace=NS)  # type: ignore[arg-type]
    assert summary is not None
    assert summary.tier is Tier.WARM
    assert sorted(summary.consolidated_from) == sorted(ids)
    assert "run in the park" in summary.content
    assert tier_of(mem, other.id) is Tier.WARM


def test_restore_archive_brings_everything_back(mem: TieredMemory, clock: ManualClock) -> None:
    ids = [
        mem.add(f"Archived fact {i}: the locker code is {1000 + i}", namespace=NS).id
        for i in range(4)
    ]
    assert mem.archive(ids[:3], namespace=NS) == 3
    assert mem.stats(namespace=NS).tiers[Tier.ARCHIVED].count == 3
    restored = mem.restore(ids[0], namespace=NS)
    assert restored.tier is Tier.WARM
    assert mem.restore_archive(namespace=NS) == 2
    assert {tier_of(mem, i) for i in ids[:3]} == {Tier.WARM}
    assert mem.stats(namespace=NS).tiers[Tier.ARCHIVED].count == 0
    assert mem.get(ids[1], namespace=NS).content.endswith("1001")  # type: ignore[union-attr]


def test_archived_summaries_found_when_nothing_active_matches(
    mem: TieredMemory, clock: ManualClock
) -> None:
    old = mem.add("The user's first employer was Acme Rockets in Leeds", namespace=NS)
    mem.archive([old.id], namespace=NS)
    mem.add("Groceries: milk, eggs, bread", namespace=NS)
    hits = mem.search("Acme Rockets employer", namespace=NS)
    assert [h.memory.id for h in hits if h.archived] == [old.id]
    with pytest.raises(TieredMemoryError):
        mem.expand("not-archived", namespace=NS)
    with pytest.raises(TieredMemoryError):
        mem.expand(old.id, namespace="another-tenant")


def test_cold_is_searched_when_active_tiers_find_too_little(
    mem: TieredMemory, clock: ManualClock
) -> None:
    cold = mem.add("The spare house key is under the blue flowerpot", namespace=NS)
    mem.demote(cold.id, Tier.COLD, namespace=NS)
    mem.add("Meeting notes: budget approved", namespace=NS)
    hits = mem.search("where is the spare house key", namespace=NS, k=3)
    assert hits[0].memory.id == cold.id
    assert hits[0].tier is Tier.COLD
    assert hits[0].phase == 3


def test_background_runner_repeats_and_stops(mem: TieredMemory, clock: ManualClock) -> None:
    mem.add("something new", namespace=NS)
    clock.advance(days=4)
    reports = []
    runner = mem.start_maintenance(timedelta(milliseconds=50), on_report=reports.append)
    deadline = time.monotonic() + 5
    while len(reports) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    mem.stop_maintenance()
    assert not runner.running
    assert len(reports) >= 3
    assert reports[0].count("hot_to_cold") == 1
    assert all(r.moved == {} for r in reports[1:])
    n = len(reports)
    time.sleep(0.15)
    assert len(reports) == n  # really stopped


def test_no_two_sweeps_across_processes(tmp_path: Path, clock: ManualClock) -> None:
    # One backend: the sweep lock is a file beside the SQLite file, whatever the graph
    # and object store are.
    db = tmp_path / "shared.db"
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=clock)
    try:
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(f"""
                import sys, time
                from tiered_memory.locks import FileLock
                lock = FileLock({str(db) + ".sweep.lock"!r})
                assert lock.try_acquire()
                print('locked', flush=True)
                time.sleep(30)
            """),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "locked"
            assert mem.maintain().skipped
        finally:
            holder.kill()
            holder.wait()
        assert not mem.maintain().skipped
    finally:
        mem.close()
