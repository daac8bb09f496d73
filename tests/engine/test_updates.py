"""A later memory on the same subject ranks just above the one it updates."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from tiered_memory import HashingEmbedder, ManualClock, Policy, RetrievalPolicy, TieredMemory

OLD = "The user lives in Leeds, in a flat by the canal"
NEW = "The user lives in York now, they moved in March"
OTHER = "The user likes long walks by the canal"


def _vector(*weights: float) -> list[float]:
    v = np.zeros(HashingEmbedder().dimension, dtype=np.float32)
    v[: len(weights)] = weights
    return (v / np.linalg.norm(v)).tolist()


def _tell(mem: TieredMemory, clock: ManualClock, gap: timedelta) -> None:
    # the old statement matches the question a little better than its update
    mem.add(OLD, namespace="ns", memory_type="factual", embedding=_vector(1.0, 0.30, 0.0))
    mem.add(OTHER, namespace="ns", embedding=_vector(0.2, 0.0, 1.0))
    clock.advance(gap)
    mem.add(NEW, namespace="ns", memory_type="factual", embedding=_vector(1.0, 0.0, 0.30))


def _ask(mem: TieredMemory) -> list[str]:
    hits = mem.search("", namespace="ns", query_embedding=_vector(1.0, 0.2, 0.0), k=3)
    return [h.memory.content for h in hits]


@pytest.fixture
def mem_without_updates(tmp_path: Path, clock: ManualClock) -> TieredMemory:
    policy = Policy(retrieval=RetrievalPolicy(update_similarity=None))
    memory = TieredMemory.embedded(
        tmp_path / "off.db", embedder=HashingEmbedder(), clock=clock, policy=policy
    )
    yield memory  # type: ignore[misc]
    memory.close()


def test_the_newer_statement_comes_first(mem: TieredMemory, clock: ManualClock) -> None:
    _tell(mem, clock, timedelta(days=30))
    order = _ask(mem)
    assert order.index(NEW) < order.index(OLD)
    hits = {
        h.memory.content: h
        for h in mem.search("", namespace="ns", query_embedding=_vector(1.0, 0.2, 0.0), k=3)
    }
    assert hits[NEW].score > hits[OLD].score
    # lifted to just above: a third memory ranked below both stays below
    assert hits[NEW].score - hits[OLD].score < 1e-3


def test_without_the_rule_the_older_wins(
    mem_without_updates: TieredMemory, clock: ManualClock
) -> None:
    _tell(mem_without_updates, clock, timedelta(days=30))
    order = _ask(mem_without_updates)
    assert order.index(OLD) < order.index(NEW)


def test_statements_of_one_moment_are_not_updates(mem: TieredMemory, clock: ManualClock) -> None:
    _tell(mem, clock, timedelta(minutes=5))  # below update_min_gap: two phrasings, no update
    order = _ask(mem)
    assert order.index(OLD) < order.index(NEW)


def test_an_unrelated_later_memory_is_not_lifted(mem: TieredMemory, clock: ManualClock) -> None:
    mem.add(OLD, namespace="ns", memory_type="factual", embedding=_vector(1.0, 0.30, 0.0))
    clock.advance(timedelta(days=30))
    mem.add(OTHER, namespace="ns", embedding=_vector(0.5, 0.0, 1.0))  # cosine ~0.45 to OLD
    hits = {
        h.memory.content: h
        for h in mem.search("", namespace="ns", query_embedding=_vector(1.0, 0.2, 0.0), k=3)
    }
    assert hits[OTHER].score < hits[OLD].score
