"""Associations (`associations`): auto-links from neighbours, explicit links, co-recall
pairs, what a replaced memory loses, and graph writes that never fail the caller."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pytest

from tiered_memory import ValidationError
from tiered_memory.associations import (
    Associations,
    co_recall_pairs,
    derived,
    explicit_link,
    similarity_links,
)
from tiered_memory.breaker import CircuitBreaker
from tiered_memory.models import Link, LinkKind
from tiered_memory.policy import AssociationPolicy

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_auto_links_go_to_the_nearest_memories_above_the_similarity_floor() -> None:
    ap = AssociationPolicy(autolink_top_k=3, autolink_min_similarity=0.3)
    near = [("self", 1.0), ("a", 0.9), ("b", 0.29), ("c", 0.8), ("d", 0.7)]
    links = similarity_links("self", near, ap, NOW)
    # the first three neighbours are looked at: itself and b (below 0.3) are not linked
    assert [(x.target, x.weight, x.kind) for x in links] == [("a", 0.9, LinkKind.SIMILAR)]
    assert all(x.source == "self" and x.created_at == NOW for x in links)
    assert similarity_links("self", near, AssociationPolicy(autolink_top_k=0), NOW) == []
    capped = similarity_links("n", [("a", 1.0000001)], ap, NOW)
    assert capped[0].weight == 1.0  # float error above 1 is a weight of 1


def test_explicit_links_are_weighted_and_never_loops() -> None:
    link = explicit_link("a", "b", 0.5, NOW)
    assert (link.source, link.target, link.weight, link.kind) == ("a", "b", 0.5, LinkKind.EXPLICIT)
    with pytest.raises(ValidationError, match="itself"):
        explicit_link("a", "a", 0.5, NOW)
    with pytest.raises(ValidationError, match="between 0 and 1"):
        explicit_link("a", "b", 1.5, NOW)


def test_co_recall_pairs_are_each_pair_once() -> None:
    assert co_recall_pairs(["c", "a", "b"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert co_recall_pairs(["a"]) == []


def test_a_replaced_memory_loses_only_the_links_not_asked_for() -> None:
    links = [
        Link(source="m", target=t, weight=0.5, kind=kind)
        for t, kind in (
            ("a", LinkKind.SIMILAR),
            ("b", LinkKind.EXPLICIT),
            ("c", LinkKind.CO_RECALLED),
        )
    ]
    assert derived(links) == [("m", "a"), ("m", "c")]


class FakeStore:
    def __init__(self, live: set[str]) -> None:
        self.live = live

    async def get_many(self, ns: str, ids: Sequence[str]) -> dict[str, Any]:
        return {i: object() for i in ids if i in self.live}


class FakeGraph:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.links: dict[tuple[str, str], Link] = {}
        self.calls = 0

    def _call(self) -> None:
        self.calls += 1
        if self.fail:
            raise ConnectionError("graph down")

    async def upsert_links(self, ns: str, links: Sequence[Link]) -> None:
        self._call()
        self.links.update(((x.source, x.target), x) for x in links)

    async def strengthen(
        self, ns: str, pairs: Sequence[tuple[str, str]], boost: float, now: datetime
    ) -> None:
        self._call()
        for a, b in pairs:
            self.links[(a, b)] = Link(source=a, target=b, weight=boost, kind=LinkKind.CO_RECALLED)

    async def links_of(self, ns: str, ids: Sequence[str]) -> list[Link]:
        self._call()
        return [x for x in self.links.values() if x.source in ids]

    async def unlink(self, ns: str, pairs: Sequence[tuple[str, str]]) -> None:
        self._call()
        for pair in pairs:
            self.links.pop(pair, None)


def associations(
    graph: FakeGraph, live: set[str], boost: float = 0.0
) -> tuple[Associations, CircuitBreaker]:
    breaker = CircuitBreaker(60.0)
    policy = AssociationPolicy(co_recall_boost=boost)
    return Associations(FakeStore(live), graph, policy, breaker), breaker  # type: ignore[arg-type]


def test_a_link_to_a_memory_gone_meanwhile_is_undone() -> None:
    graph = FakeGraph()
    assoc, _ = associations(graph, live={"a", "b"})
    links = [Link(source="a", target=t, weight=0.5) for t in ("b", "archived")]
    asyncio.run(assoc.link_new("ns", links))
    assert set(graph.links) == {("a", "b")}


def test_co_recall_strengthens_only_when_boosted() -> None:
    graph = FakeGraph()
    off, _ = associations(graph, live={"a", "b"})
    asyncio.run(off.co_recalled("ns", ["b", "a"], NOW))
    assert graph.calls == 0  # at 0, no zero-weight links are written
    on, _ = associations(graph, live={"a", "b"}, boost=0.1)
    asyncio.run(on.co_recalled("ns", ["b", "a"], NOW))
    assert graph.links[("a", "b")].weight == 0.1


def test_replacing_drops_derived_links_and_keeps_explicit_ones() -> None:
    graph = FakeGraph()
    graph.links = {
        ("m", "a"): Link(source="m", target="a", weight=0.5, kind=LinkKind.SIMILAR),
        ("m", "b"): Link(source="m", target="b", weight=0.5, kind=LinkKind.EXPLICIT),
    }
    assoc, _ = associations(graph, live={"m", "a", "b"})
    asyncio.run(assoc.unlink_replaced("ns", ["m"]))
    assert set(graph.links) == {("m", "b")}


def test_graph_failures_never_reach_the_caller_and_open_the_breaker() -> None:
    graph = FakeGraph(fail=True)
    assoc, breaker = associations(graph, live={"a", "b"}, boost=0.1)
    asyncio.run(assoc.link_new("ns", [Link(source="a", target="b", weight=0.5)]))
    assert graph.calls == 1
    assert not breaker.allow()
    # skipped at once while the graph is known to be down
    asyncio.run(assoc.co_recalled("ns", ["a", "b"], NOW))
    asyncio.run(assoc.unlink_replaced("ns", ["a"]))
    assert graph.calls == 1
