"""The public API of DESIGN.md section 7 on the embedded default."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from tests.matrix import MemoryFactory
from tiered_memory import (
    AssociationPolicy,
    AsyncTieredMemory,
    DimensionMismatchError,
    HashingEmbedder,
    Limits,
    ManualClock,
    MemoryType,
    NotFoundError,
    Policy,
    RetrievalPolicy,
    ScoringWeights,
    Tier,
    TieredMemory,
    TieredMemoryError,
    ValidationError,
)


def test_design_snippet_runs_as_written(tmp_path: Path) -> None:
    # The documented snippet, so on the embedded default it documents.
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    mem = TieredMemory.embedded(tmp_path / "memory.db", embedder=HashingEmbedder(), clock=clock)
    try:
        m = mem.add(
            "User's daughter is called Ava",
            namespace="user-42",
            memory_type=MemoryType.FACTUAL,
            importance=0.8,
        )
        hits = mem.search("daughter name", namespace="user-42", k=5)
        assert hits[0].memory.id == m.id
        inj = mem.recall("what is my kid called?", namespace="user-42", budget_tokens=1000)
        assert "Ava" in inj.text
        assert 0 < inj.tokens <= 1000
        assert inj.by_tier[Tier.HOT] == inj.tokens
        clock.advance(days=4)
        ns = "user-42"
        mem.forget(m.id, namespace=ns)
        mem.restore(m.id, namespace=ns)
        mem.pin(m.id, namespace=ns)
        mem.unpin(m.id, namespace=ns)
        mem.promote(m.id, Tier.HOT, namespace=ns) if m.tier is not Tier.HOT else None
        mem.demote(m.id, Tier.WARM, namespace=ns)
        assert mem.promote(m.id, Tier.HOT, namespace=ns).tier is Tier.HOT
        assert mem.demote(m.id, Tier.COLD, namespace=ns).tier is Tier.COLD
        e = mem.explain(m.id, query="daughter", namespace=ns)
        assert e.terms.cosine > 0
        assert e.terms.tier_factor == mem.policy.scoring.tier_factor[Tier.COLD]
        assert mem.stats(namespace=ns).tiers[Tier.COLD].count == 1
        assert mem.get(m.id, namespace="other") is None
    finally:
        mem.close()


def test_add_goes_hot_with_every_field(mem: TieredMemory, clock: ManualClock) -> None:
    m = mem.add(
        "Deploys go through the staging cluster first",
        namespace="ns",
        memory_type="procedural",
        importance=0.9,
        metadata={"team": "infra", "n": 3},
        source="slack",
        pinned=True,
    )
    got = mem.get(m.id, namespace="ns")
    assert got is not None
    assert got.tier is Tier.HOT
    assert got.memory_type is MemoryType.PROCEDURAL
    assert (got.importance, got.pinned, got.source) == (0.9, True, "slack")
    assert got.metadata == {"team": "infra", "n": 3}
    assert got.created_at == clock.now()
    assert got.use_count == 0


# Validation before anything is written: the other combinations run with --matrix.
@pytest.mark.matrix
@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": ""},
        {"content": "   "},
        {"content": "x" * 40_000},
        {"content": "ok", "memory_type": "dream"},
        {"content": "ok", "importance": 2.0},
        {"content": "ok", "embedding": [float("nan")] * 384},
        {"content": "ok", "metadata": {"bad": float("nan")}},
        {"content": "ok", "namespace": ""},
    ],
)
def test_bad_input_is_a_typed_error_and_writes_nothing(
    mem: TieredMemory, kwargs: dict[str, object]
) -> None:
    mem.add("an existing memory", namespace="ns")
    kwargs = {"namespace": "ns", **kwargs}
    with pytest.raises(ValidationError):
        mem.add(**kwargs)  # type: ignore[arg-type]
    assert mem.stats(namespace="ns").total == 1


# Validation before anything is written: the other combinations run with --matrix.
@pytest.mark.matrix
def test_wrong_embedding_dimension_is_rejected_before_writing(mem: TieredMemory) -> None:
    mem.add("first", namespace="ns")  # fixes the store at 384 dimensions
    with pytest.raises(DimensionMismatchError):
        mem.add("second", namespace="ns", embedding=[0.1] * 17)
    assert mem.stats(namespace="ns").total == 1


async def test_precomputed_embedding_is_stored_as_given(amem: AsyncTieredMemory) -> None:
    vec = np.zeros(384, dtype=np.float32)
    vec[7] = 1.0
    m = await amem.add("opaque", namespace="ns", embedding=vec)
    found = await amem.store.get_many("ns", [m.id], with_embeddings=True)
    stored = found[m.id].embedding
    assert stored is not None
    assert stored[7] == pytest.approx(1.0)
    assert sum(abs(x) for x in stored) == pytest.approx(1.0)


def test_near_duplicate_strengthens_instead_of_inserting(mem: TieredMemory) -> None:
    a = mem.add("The user's favourite colour is green", namespace="ns")
    b = mem.add("The user's favourite colour is green!", namespace="ns")
    assert b.id == a.id
    assert b.use_count == 1
    assert mem.stats(namespace="ns").total == 1


def test_dedup_can_be_turned_off(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    policy = Policy(limits=Limits(dedup_similarity=None))
    mem = memories.open_sync(tmp_path / "m.db", clock=clock, policy=policy)
    try:
        a = mem.add("same words", namespace="ns")
        b = mem.add("same words", namespace="ns")
        assert a.id != b.id
        assert mem.stats(namespace="ns").total == 2
    finally:
        mem.close()


def test_add_links_new_memories_to_their_nearest_neighbours(mem: TieredMemory) -> None:
    a = mem.add("Ava plays the violin at school concerts", namespace="ns")
    b = mem.add("Ava practises violin every evening", namespace="ns")
    mem.add("The quarterly tax report is due in April", namespace="ns")
    links = mem.links(b.id, namespace="ns")
    assert [link.target for link in links] == [a.id]
    assert 0.3 <= links[0].weight <= 1.0
    # bidirectional
    assert [link.target for link in mem.links(a.id, namespace="ns")] == [b.id]


def test_search_ranks_relevant_first_and_never_crosses_namespaces(mem: TieredMemory) -> None:
    mem.add("The user's dog is a beagle called Max", namespace="alice")
    mem.add("The user prefers dark roast coffee", namespace="alice")
    mem.add("The user's dog is a poodle called Rex", namespace="bob")
    hits = mem.search("what breed is the dog", namespace="alice", k=5)
    assert "beagle" in hits[0].memory.content
    assert all(h.memory.namespace == "alice" for h in hits)
    assert all("Rex" not in h.memory.content for h in hits)


def test_search_does_not_count_use_but_recall_counts_only_injected(mem: TieredMemory) -> None:
    a = mem.add("Project Falcon ships on March 3", namespace="ns")
    b = mem.add("Lunch order: pizza margherita", namespace="ns")
    mem.search("Falcon ship date", namespace="ns")
    assert mem.get(a.id, namespace="ns").use_count == 0  # type: ignore[union-attr]
    inj = mem.recall("Falcon ship date", namespace="ns", budget_tokens=12)
    assert [h.memory.id for h in inj.items] == [a.id]
    assert mem.get(a.id, namespace="ns").use_count == 1  # type: ignore[union-attr]
    assert mem.get(b.id, namespace="ns").use_count == 0  # type: ignore[union-attr]


def test_co_injected_memories_strengthen_their_link(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    policy = Policy(associations=AssociationPolicy(co_recall_boost=0.1))
    mem = memories.open_sync(
        tmp_path / "co.db", embedder=HashingEmbedder(), clock=clock, policy=policy
    )
    try:
        a = mem.add("Ava plays the violin", namespace="ns")
        b = mem.add("Ava has violin lessons on Tuesday", namespace="ns")
        before = {link.target: link.weight for link in mem.links(a.id, namespace="ns")}
        inj = mem.recall("Ava violin", namespace="ns", budget_tokens=200)
        assert {h.memory.id for h in inj.items} == {a.id, b.id}
        after = {link.target: link.weight for link in mem.links(a.id, namespace="ns")}
        assert after[b.id] == pytest.approx(min(1.0, before.get(b.id, 0.0) + 0.1))
    finally:
        mem.close()


def test_co_injection_writes_no_links_by_default(mem: TieredMemory) -> None:
    assert mem.policy.associations.co_recall_boost == 0.0  # tuned off on the dev split
    a, b = mem.add_many(
        ["Ava plays the violin", "The quarterly report is due on Friday"],
        namespace="ns",
        link=False,
    )
    before = mem.links(a.id, namespace="ns")
    inj = mem.recall("Ava violin quarterly report", namespace="ns", budget_tokens=200)
    assert {h.memory.id for h in inj.items} == {a.id, b.id}
    assert mem.links(a.id, namespace="ns") == before


def test_forget_hides_and_restore_brings_back(mem: TieredMemory) -> None:
    m = mem.add("The wifi password is hunter2", namespace="ns")
    mem.forget(m.id, namespace="ns")
    assert mem.search("wifi password", namespace="ns") == []
    assert mem.recall("wifi password", namespace="ns").items == []
    assert mem.get(m.id, namespace="ns").do_not_inject  # type: ignore[union-attr]
    mem.restore(m.id, namespace="ns")
    assert mem.search("wifi password", namespace="ns")[0].memory.id == m.id


def test_hard_forget_deletes_memory_and_links(mem: TieredMemory) -> None:
    a = mem.add("Ava plays the violin", namespace="ns")
    b = mem.add("Ava practises the violin daily", namespace="ns")
    mem.forget(a.id, namespace="ns", hard=True)
    assert mem.get(a.id, namespace="ns") is None
    assert mem.links(b.id, namespace="ns") == []
    with pytest.raises(NotFoundError):
        mem.forget(a.id, namespace="ns", hard=True)


def test_pinned_memory_is_always_injected(mem: TieredMemory) -> None:
    p = mem.add("Always answer in British English", namespace="ns", pinned=True)
    mem.add("The build uses Python 3.11", namespace="ns")
    inj = mem.recall("which python version", namespace="ns", budget_tokens=300)
    assert inj.items[0].memory.id == p.id
    with pytest.raises(ValidationError, match="pinned"):
        mem.demote(p.id, Tier.COLD, namespace="ns")


def test_promote_and_demote_rules(mem: TieredMemory) -> None:
    m = mem.add("A fact", namespace="ns")
    with pytest.raises(ValidationError):
        mem.promote(m.id, Tier.HOT, namespace="ns")  # already HOT
    with pytest.raises(ValidationError, match="unknown tier"):
        mem.demote(m.id, "tepid", namespace="ns")
    with pytest.raises(ValidationError):
        mem.demote(m.id, Tier.ARCHIVED, namespace="ns")
    assert mem.demote(m.id, "cold", namespace="ns").cold_since is not None
    w = mem.promote(m.id, namespace="ns")
    assert (w.tier, w.cold_since) == (Tier.WARM, None)


@pytest.mark.parametrize("cold_factor", [1.0, 0.5])  # the default, DESIGN.md's first
def test_cold_is_searched_on_deep_or_explicit_tiers_with_its_factor(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory, cold_factor: float
) -> None:
    factors = {**ScoringWeights().tier_factor, Tier.COLD: cold_factor}
    policy = Policy(scoring=ScoringWeights(tier_factor=factors))
    mem = memories.open_sync(
        tmp_path / "cold.db", embedder=HashingEmbedder(), clock=clock, policy=policy
    )
    m = mem.add("The old office was on Baker Street", namespace="ns")
    warm_score = mem.search("Baker Street office", namespace="ns")[0].score
    mem.demote(m.id, Tier.COLD, namespace="ns")
    deep = mem.search("Baker Street office", namespace="ns", deep=True)
    assert deep[0].memory.id == m.id
    assert deep[0].tier is Tier.COLD
    assert deep[0].terms.tier_factor == cold_factor
    assert deep[0].score == pytest.approx(warm_score * cold_factor, rel=0.05)
    only = mem.search("Baker Street office", namespace="ns", tiers=[Tier.COLD])
    assert [h.memory.id for h in only] == [m.id]
    mem.close()


def test_cold_neighbour_reached_through_a_link_is_reactivated(mem: TieredMemory) -> None:
    seed = mem.add("Ava's recital is on Friday", namespace="ns")
    cold = mem.add("Remember to buy flowers", namespace="ns")
    mem.link(seed.id, cold.id, namespace="ns", weight=0.9)
    mem.demote(cold.id, Tier.COLD, namespace="ns")
    inj = mem.recall("when is Ava's recital", namespace="ns", budget_tokens=500)
    via_graph = [h for h in inj.items if h.memory.id == cold.id]
    assert via_graph
    assert via_graph[0].phase == 2
    assert via_graph[0].via == seed.id
    back = mem.get(cold.id, namespace="ns")
    assert back is not None
    assert back.tier is Tier.WARM
    assert back.cold_since is None


def test_explain_matches_the_search_score(mem: TieredMemory) -> None:
    m = mem.add("Invoices are paid on the 15th", namespace="ns")
    mem.add("The team offsite is in May", namespace="ns")
    hit = mem.search("when are invoices paid", namespace="ns")[0]
    e = mem.explain(m.id, query="when are invoices paid", namespace="ns")
    assert hit.memory.id == m.id
    assert e.terms.score == pytest.approx(hit.score)
    assert "tier_factor" in e.formula
    plain = mem.explain(m.id, namespace="ns")
    assert plain.terms.retention == pytest.approx(1.0)
    with pytest.raises(NotFoundError):
        mem.explain("nope", namespace="ns")


def test_ids_never_cross_namespaces(mem: TieredMemory) -> None:
    m = mem.add("secret of tenant A", namespace="A")
    mem.add("secret of tenant B", namespace="B")
    assert mem.get(m.id, namespace="B") is None
    for call in (
        lambda: mem.forget(m.id, namespace="B"),
        lambda: mem.restore(m.id, namespace="B"),
        lambda: mem.pin(m.id, namespace="B"),
        lambda: mem.unpin(m.id, namespace="B"),
        lambda: mem.promote(m.id, Tier.HOT, namespace="B"),
        lambda: mem.demote(m.id, Tier.COLD, namespace="B"),
        lambda: mem.explain(m.id, namespace="B"),
        lambda: mem.forget(m.id, namespace="B", hard=True),
    ):
        with pytest.raises(NotFoundError):
            call()
    other = mem.add("another B memory", namespace="B")
    with pytest.raises(NotFoundError):
        mem.link(m.id, other.id, namespace="B")
    assert mem.stats(namespace="A").total == 1
    assert mem.stats(namespace="B").total == 2
    assert [x.id for x in mem.list(namespace="A")] == [m.id]
    assert all(h.memory.namespace == "B" for h in mem.search("secret", namespace="B"))
    got = mem.get(m.id, namespace="A")
    assert got is not None
    assert got.do_not_inject is False


async def test_graph_outage_degrades_search_async(amem: AsyncTieredMemory) -> None:
    await amem.add("Ava plays the violin", namespace="ns")
    await amem.add("Ava practises the violin", namespace="ns")

    async def down(*args: object, **kwargs: object) -> list[object]:
        raise TieredMemoryError("graph server unreachable")

    amem.graph.neighbors = down  # type: ignore[method-assign]
    hits = await amem.search("violin", namespace="ns")
    assert hits
    assert hits.degraded
    assert "unreachable" in hits.reasons[0]
    inj = await amem.recall("violin", namespace="ns")
    assert inj.degraded
    assert inj.items


def test_sync_facade_works_inside_a_running_loop(mem: TieredMemory) -> None:
    async def notebook_cell() -> str:
        m = mem.add("Jupyter users call the sync API from a running loop", namespace="nb")
        return m.id

    mid = asyncio.run(notebook_cell())
    assert mem.get(mid, namespace="nb") is not None


def test_add_many_returns_one_memory_per_item(mem: TieredMemory) -> None:
    out = mem.add_many(
        [
            "first fact about apples",
            {"content": "second fact about pears", "importance": 0.9},
            "first fact about apples",
        ],
        namespace="ns",
    )
    assert len(out) == 3
    assert out[0].id == out[2].id  # in-batch duplicate folded
    assert out[1].importance == 0.9
    assert mem.stats(namespace="ns").total == 2
    with pytest.raises(ValidationError):
        mem.add_many(["fine", ""], namespace="ns")
    assert mem.stats(namespace="ns").total == 2


def test_explicit_ids_are_kept_and_collisions_rejected(mem: TieredMemory) -> None:
    m = mem.add("with my own id", namespace="ns", id="doc-1")
    assert m.id == "doc-1"
    with pytest.raises(ValidationError, match="already exist"):
        mem.add("another text", namespace="ns", id="doc-1")
    # the same id in another namespace is a different memory
    assert mem.add("other tenant", namespace="ns2", id="doc-1").namespace == "ns2"


# Validation before anything is written: the other combinations run with --matrix.
@pytest.mark.matrix
def test_negative_budget_and_bad_k_are_rejected(mem: TieredMemory) -> None:
    with pytest.raises(ValidationError):
        mem.recall("x", namespace="ns", budget_tokens=-1)
    with pytest.raises(ValidationError):
        mem.search("x", namespace="ns", k=0)
    assert mem.recall("x", namespace="ns", budget_tokens=0).items == []


# The SQLite store's JSON: the other combinations run with --matrix.
@pytest.mark.matrix
def test_metadata_text_holding_nul_is_found_by_its_filter(mem: TieredMemory) -> None:
    """Regression: SQLite's JSON functions cut "a\\x00b" to "a", so the filter missed it."""
    nul = mem.add("a memory with a NUL in its metadata", namespace="ns", metadata={"k": "a\x00b"})
    plain = mem.add("a memory with plain metadata", namespace="ns", metadata={"k": "a"})
    for value, wanted in (("a\x00b", nul.id), ("a", plain.id)):
        hits = mem.search("memory metadata", namespace="ns", metadata={"k": value}, k=10)
        assert [h.memory.id for h in hits] == [wanted]


# The SQLite store's JSON: the other combinations run with --matrix.
@pytest.mark.matrix
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_integers_beyond_64_bits_are_refused_in_metadata_and_filters(
    mem: TieredMemory, value: int
) -> None:
    """Regression: a filter on 2**63 raised a raw OverflowError from SQLite."""
    kept = mem.add("a memory at the limit", namespace="ns", metadata={"n": 2**63 - 1})
    with pytest.raises(ValidationError, match="64-bit"):
        mem.search("memory", namespace="ns", metadata={"n": value})
    with pytest.raises(ValidationError, match="64-bit"):
        mem.add("a memory beyond the limit", namespace="ns", metadata={"n": value})
    assert [m.id for m in mem.list(namespace="ns")] == [kept.id]
    hits = mem.search("memory", namespace="ns", metadata={"n": 2**63 - 1})
    assert [h.memory.id for h in hits] == [kept.id]


def test_cold_phase_fetches_what_the_active_tiers_lacked(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    def engine(cold_candidates: int) -> TieredMemory:
        # no context phase: this counts what the COLD phase fetched
        retrieval = RetrievalPolicy(cold_candidates=cold_candidates, context_seeds=0)
        policy = Policy(retrieval=retrieval)
        return memories.open_sync(
            tmp_path / f"c{cold_candidates}.db",
            embedder=HashingEmbedder(),
            clock=clock,
            policy=policy,
        )

    considered = {}
    for n in (10, 60):
        mem = engine(n)
        try:
            added = mem.add_many(
                [f"harbour note {i}: the ferry left pier {i % 7}" for i in range(120)],
                namespace="ns",
                dedup=False,
                link=False,
            )
            for m in added:
                mem.demote(m.id, Tier.COLD, namespace="ns")
            inj = mem.recall("ferry harbour pier", namespace="ns", max_items=5, record_use=False)
            assert len(inj.items) == 5  # COLD still fills the budget when nothing is active
            assert all(h.tier is Tier.COLD for h in inj.items)
            considered[n] = inj.considered
        finally:
            mem.close()
    assert considered[10] <= 2 * 10 < considered[60]
