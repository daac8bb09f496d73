"""Query cues in the ranking: a question about a person favours what that person said;
a question asking when favours memories that carry time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tiered_memory import ManualClock, TieredMemory

# Ranking rules read the store alone: the graph and the object store take no part, so
# the other backend combinations run with --matrix (tests/matrix.py).
pytestmark = pytest.mark.matrix


def test_the_named_speaker_outranks_an_equal_line_of_another(
    mem: TieredMemory, clock: ManualClock
) -> None:
    mem.add("Melanie: I painted a lake at sunrise", namespace="ns")
    clock.advance(timedelta(hours=1))
    mem.add("Caroline: I painted a lake at sunrise", namespace="ns")
    for who in ("Caroline", "Melanie"):
        hits = mem.search(f"What did {who} paint?", namespace="ns")
        assert hits[0].memory.content.startswith(who)
        assert hits[0].terms.cues > 0
        assert hits[1].terms.cues == 0
    plain = mem.search("What did Caroline paint?", namespace="ns", weights={"vector": 1})
    assert all(h.terms.cues == 0 for h in plain)  # per-call weights name every signal


def test_a_when_question_favours_a_memory_that_carries_time(
    mem: TieredMemory, clock: ManualClock
) -> None:
    # other memories spread the min-max normalisation, as in any real namespace
    mem.add_many([f"grocery list number {i}: apples and bread" for i in range(8)], namespace="ns")
    mem.add("we went to the pottery class together", namespace="ns")
    clock.advance(timedelta(hours=1))
    mem.add("we went to the pottery class last Friday", namespace="ns")
    query = "When did we go to the pottery class?"
    hits = {h.memory.content: h for h in mem.search(query, namespace="ns")}
    f = mem.policy.fusion
    untimed = {"vector": f.vector, "keyword": f.keyword, "graph": f.graph, "speaker": f.speaker}
    without = {h.memory.content: h for h in mem.search(query, namespace="ns", weights=untimed)}
    friday = "we went to the pottery class last Friday"
    together = "we went to the pottery class together"
    assert hits[friday].terms.cues == pytest.approx(0.15)
    assert hits[friday].terms.relevance == pytest.approx(without[friday].terms.relevance + 0.15)
    assert hits[together].terms.cues == 0
    what = mem.search("Which pottery class did we go to?", namespace="ns")
    assert all(h.terms.cues == 0 for h in what)
