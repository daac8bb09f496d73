"""A later memory on the same subject ranks just above the one it updates."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from tests.matrix import MemoryFactory
from tiered_memory import HashingEmbedder, ManualClock, Policy, RetrievalPolicy, TieredMemory

# Ranking rules read the store alone: the graph and the object store take no part, so
# the other backend combinations run with --matrix (tests/matrix.py).
pytestmark = pytest.mark.matrix

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
def updating(tmp_path: Path, clock: ManualClock, memories: MemoryFactory) -> TieredMemory:
    """The rule is opt-in (off by default: no measured gain on the dev sets)."""
    policy = Policy(retrieval=RetrievalPolicy(update_similarity=0.8))
    memory = memories.open_sync(
        tmp_path / "on.db", embedder=HashingEmbedder(), clock=clock, policy=policy
    )
    yield memory  # type: ignore[misc]
    memory.close()


def test_the_newer_statement_comes_first(updating: TieredMemory, clock: ManualClock) -> None:
    mem = updating
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


def test_by_default_the_older_wins(mem: TieredMemory, clock: ManualClock) -> None:
    _tell(mem, clock, timedelta(days=30))
    order = _ask(mem)
    assert order.index(OLD) < order.index(NEW)


def test_statements_of_one_moment_are_not_updates(
    updating: TieredMemory, clock: ManualClock
) -> None:
    mem = updating
    _tell(mem, clock, timedelta(minutes=5))  # below update_min_gap: two phrasings, no update
    order = _ask(mem)
    assert order.index(OLD) < order.index(NEW)


def test_an_unrelated_later_memory_is_not_lifted(
    updating: TieredMemory, clock: ManualClock
) -> None:
    mem = updating
    mem.add(OLD, namespace="ns", memory_type="factual", embedding=_vector(1.0, 0.30, 0.0))
    clock.advance(timedelta(days=30))
    mem.add(OTHER, namespace="ns", embedding=_vector(0.5, 0.0, 1.0))  # cosine ~0.45 to OLD
    hits = {
        h.memory.content: h
        for h in mem.search("", namespace="ns", query_embedding=_vector(1.0, 0.2, 0.0), k=3)
    }
    assert hits[OTHER].score < hits[OLD].score
