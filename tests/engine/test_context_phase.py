"""Phase 5: a strong hit brings the memory written just before and after it (the
answer to a question is often the next turn, which shares none of its words)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.matrix import MemoryFactory
from tiered_memory import HashingEmbedder, ManualClock, Policy, RetrievalPolicy, TieredMemory

# Ranking rules read the store alone: the graph and the object store take no part, so
# the other backend combinations run with --matrix (tests/matrix.py).
pytestmark = pytest.mark.matrix

QUESTION = "Melanie: which city did you move to after the wedding in Lisbon?"
ANSWER = "Caroline: Porto, we took a small flat near the river"


def converse(mem: TieredMemory, clock: ManualClock, namespace: str = "ns") -> None:
    mem.add("Caroline: the garden tomatoes are finally ripe", namespace=namespace)
    clock.advance(timedelta(hours=5))
    mem.add(QUESTION, namespace=namespace)
    clock.advance(timedelta(seconds=30))
    mem.add(ANSWER, namespace=namespace)
    clock.advance(timedelta(hours=5))
    for i in range(20):
        mem.add(f"Melanie: unrelated chatter number {i} about painting", namespace=namespace)
        clock.advance(timedelta(minutes=1))


def test_the_turn_after_a_strong_hit_follows_it(mem: TieredMemory, clock: ManualClock) -> None:
    converse(mem, clock)
    inj = mem.recall("wedding in Lisbon city move", namespace="ns", record_use=False)
    ids = [h.memory.content for h in inj.items]
    assert QUESTION in ids
    assert ANSWER in ids
    hits = {h.memory.content: h for h in inj.items}
    answer, question = hits[ANSWER], hits[QUESTION]
    assert answer.phase == 5
    assert answer.via == question.memory.id
    assert answer.score >= 0.8 * question.score - 1e-9
    assert answer.score <= question.score


def test_without_the_phase_the_answer_is_not_found(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory
) -> None:
    policy = Policy(retrieval=RetrievalPolicy(context_seeds=0))
    mem = memories.open_sync(
        tmp_path / "off.db", embedder=HashingEmbedder(), clock=clock, policy=policy
    )
    try:
        converse(mem, clock)
        inj = mem.recall(
            "wedding in Lisbon city move", namespace="ns", budget_tokens=40, record_use=False
        )
        assert ANSWER not in [h.memory.content for h in inj.items]
    finally:
        mem.close()


def test_a_memory_written_long_after_is_no_context(mem: TieredMemory, clock: ManualClock) -> None:
    mem.add(QUESTION, namespace="ns")
    clock.advance(timedelta(days=2))
    mem.add(ANSWER, namespace="ns")
    hits = mem.search("wedding in Lisbon city move", namespace="ns")
    assert all(h.phase != 5 for h in hits)


def test_context_never_crosses_namespaces(mem: TieredMemory, clock: ManualClock) -> None:
    mem.add(QUESTION, namespace="a")
    clock.advance(timedelta(seconds=30))
    mem.add(ANSWER, namespace="b")
    hits = mem.search("wedding in Lisbon city move", namespace="a")
    assert [h.memory.content for h in hits] == [QUESTION]


def test_filters_the_store_applies_switch_the_phase_off(
    mem: TieredMemory, clock: ManualClock
) -> None:
    mem.add(QUESTION, namespace="ns", metadata={"topic": "moves"})
    clock.advance(timedelta(seconds=30))
    mem.add(ANSWER, namespace="ns", metadata={"topic": "other"})
    hits = mem.search("wedding in Lisbon city move", namespace="ns", metadata={"topic": "moves"})
    assert [h.memory.content for h in hits] == [QUESTION]
    forgotten = mem.search("wedding Lisbon", namespace="ns")
    assert ANSWER in [h.memory.content for h in forgotten]
    (answer,) = [h.memory.id for h in forgotten if h.memory.content == ANSWER]
    mem.forget(answer, namespace="ns")
    again = mem.search("wedding in Lisbon city move", namespace="ns")
    assert ANSWER not in [h.memory.content for h in again]


def test_context_is_one_step_never_a_chain(mem: TieredMemory, clock: ManualClock) -> None:
    mem.add_many([f"grocery list number {i}: apples and bread" for i in range(8)], namespace="ns")
    clock.advance(timedelta(hours=1))
    mem.add(QUESTION, namespace="ns")
    for text in ("Caroline: Porto, of course", "Melanie: how lovely", "Caroline: thanks"):
        clock.advance(timedelta(seconds=30))
        mem.add(text, namespace="ns")
    hits = {h.memory.content: h for h in mem.search("wedding in Lisbon city move", namespace="ns")}
    top = hits[QUESTION].score
    assert hits["Caroline: Porto, of course"].score >= 0.8 * top - 1e-9
    two_away = hits.get("Melanie: how lovely")
    assert two_away is None or two_away.score < 0.8 * 0.8 * top


def test_only_another_speakers_turn_is_context(mem: TieredMemory, clock: ManualClock) -> None:
    """A user's consecutive statements are separate memories, not one another's answer;
    a neighbour without a known speaker is no reply either."""
    mem.add("Melanie: which city did you move to after the wedding in Lisbon?", namespace="a")
    clock.advance(timedelta(seconds=30))
    mem.add("Melanie: also my sister bought a red bicycle", namespace="a")
    mem.add("which city did you move to after the wedding in Lisbon?", namespace="b")
    clock.advance(timedelta(seconds=30))
    mem.add("my sister bought a red bicycle", namespace="b")
    for namespace in ("a", "b"):
        hits = mem.search("wedding in Lisbon city move", namespace=namespace)
        assert all(h.phase != 5 for h in hits), namespace


def test_hits_without_a_speaker_read_no_neighbours(
    mem: TieredMemory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a turn with a known speaker can have replies, so a search whose hits have
    none asks the store for no neighbours; one hit with a speaker is enough to ask."""
    asked: list[list[str]] = []
    store = mem.aio.store
    adjacent = store.adjacent  # type: ignore[attr-defined]  # SupportsAdjacent

    async def spy(namespace: str, ids: list[str], **kwargs: object) -> object:
        asked.append(list(ids))
        return await adjacent(namespace, ids, **kwargs)

    monkeypatch.setattr(store, "adjacent", spy)
    mem.add("which city did you move to after the wedding in Lisbon?", namespace="ns")
    clock.advance(timedelta(seconds=30))
    mem.add("Porto, we took a small flat near the river", namespace="ns")
    mem.search("wedding in Lisbon city move", namespace="ns")
    assert asked == []
    mem.add(QUESTION, namespace="ns")
    hits = mem.search("wedding in Lisbon city move", namespace="ns")
    (question,) = [h.memory.id for h in hits if h.memory.content == QUESTION]
    assert asked
    assert all(ids == [question] for ids in asked)
