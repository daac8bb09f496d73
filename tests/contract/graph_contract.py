"""The AssociationGraph contract, written once and run against every backend.

Subclass `AssociationGraphContract` in a `Test...` class and provide an async `graph`
fixture that yields a ready graph. Every test works in fresh uuid namespaces (cleared
afterwards), so the suite also runs against a shared server; only
`test_clear_namespace_and_everything` calls `clear(None)`, so give the fixture a graph
of its own there.

Conventions the suite pins down (the port leaves them open):
- A link from a memory to itself is a ValidationError (upsert, strengthen, unlink).
- `strengthen` needs 0 <= delta <= 1; a link it creates has kind CO_RECALLED, weight
  delta, and every link it touches gets updated_at = when.
- `min_weight` applies per link: weaker links are not followed.
- `links_of` and `drop_nodes` report a link from the side of the id asked about (once
  per side when both ends are in `ids`); `unlink` returns how many links it removed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

import pytest

from tiered_memory.errors import ValidationError
from tiered_memory.models import Link, LinkKind, Neighbor
from tiered_memory.ports import AssociationGraph

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

HOSTILE_IDS = [
    "it's",
    'say "hi"',
    "{brace}",
    "}) DETACH DELETE n //",
    "'; DROP TABLE links; --",
    "a%b_c",
    "\u65e5\u672c\u8a9e-\U0001f600",
    "../../x",
]
HOSTILE_NAMESPACES = ["}) DETACH DELETE n //", "ns'; DROP TABLE links; --", "{ns}", "\u540d\u524d"]

# a -0.9- b -0.8- d -0.5- e ; a -0.5- c -0.2- f   (a chain, for depths 1..3)
CHAIN = [("a", "b", 0.9), ("a", "c", 0.5), ("b", "d", 0.8), ("d", "e", 0.5), ("c", "f", 0.2)]


def unique_namespace(label: str = "graph") -> str:
    return f"contract-{label}-{uuid.uuid4().hex[:12]}"


def link(source: str, target: str, weight: float, kind: LinkKind = LinkKind.SIMILAR) -> Link:
    return Link(
        source=source, target=target, weight=weight, kind=kind, created_at=T0, updated_at=T0
    )


def summary(neighbours: list[Neighbor]) -> list[tuple[str, float, int]]:
    return [(n.id, round(n.strength, 6), n.depth) for n in neighbours]


def weights(links: list[Link]) -> dict[tuple[str, str], float]:
    return {(x.source, x.target): round(x.weight, 6) for x in links}


class AssociationGraphContract:
    """Behaviour every AssociationGraph must have. Subclasses provide `graph`."""

    @pytest.fixture
    async def namespace(self, graph: AssociationGraph) -> AsyncIterator[str]:
        ns = unique_namespace()
        yield ns
        await graph.clear(ns)

    @pytest.fixture
    async def other_namespace(self, graph: AssociationGraph) -> AsyncIterator[str]:
        ns = unique_namespace("other")
        yield ns
        await graph.clear(ns)

    async def chain(self, graph: AssociationGraph, namespace: str) -> None:
        await graph.upsert_links(namespace, [link(s, t, w) for s, t, w in CHAIN])

    # -- links ---------------------------------------------------------------------------

    async def test_links_are_bidirectional(self, graph: AssociationGraph, namespace: str) -> None:
        await graph.upsert_links(namespace, [link("a", "b", 0.7, LinkKind.EXPLICIT)])
        from_a = await graph.links_of(namespace, ["a"])
        from_b = await graph.links_of(namespace, ["b"])
        assert [(x.source, x.target, x.kind) for x in from_a] == [("a", "b", LinkKind.EXPLICIT)]
        assert [(x.source, x.target, x.kind) for x in from_b] == [("b", "a", LinkKind.EXPLICIT)]
        assert from_a[0].weight == pytest.approx(0.7)
        assert from_b[0].weight == pytest.approx(0.7)
        assert await graph.count_links(namespace) == 1

    async def test_upsert_keeps_the_larger_weight(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await graph.upsert_links(namespace, [link("a", "b", 0.5)])
        await graph.upsert_links(namespace, [link("a", "b", 0.3)])
        assert weights(await graph.links_of(namespace, ["a"])) == {("a", "b"): 0.5}
        await graph.upsert_links(namespace, [link("b", "a", 0.8)])  # from the other side
        assert weights(await graph.links_of(namespace, ["a", "b"])) == {
            ("a", "b"): 0.8,
            ("b", "a"): 0.8,
        }
        await graph.upsert_links(namespace, [link("a", "b", 0.6), link("b", "a", 0.95)])
        assert weights(await graph.links_of(namespace, ["a"])) == {("a", "b"): 0.95}
        assert await graph.count_links(namespace) == 1

    async def test_count_links_counts_each_link_once(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        assert await graph.count_links(namespace) == 0
        await self.chain(graph, namespace)
        assert await graph.count_links(namespace) == len(CHAIN)

    async def test_links_of_reports_from_the_asked_side(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        assert weights(await graph.links_of(namespace, ["b", "f", "unknown"])) == {
            ("b", "a"): 0.9,
            ("b", "d"): 0.8,
            ("f", "c"): 0.2,
        }
        assert await graph.links_of(namespace, ["unknown"]) == []
        assert await graph.links_of(namespace, []) == []

    async def test_self_links_are_rejected(self, graph: AssociationGraph, namespace: str) -> None:
        with pytest.raises(ValidationError):
            await graph.upsert_links(namespace, [link("a", "b", 0.5), link("a", "a", 0.5)])
        with pytest.raises(ValidationError):
            await graph.strengthen(namespace, [("a", "a")], 0.1, T0)
        assert await graph.count_links(namespace) == 0

    async def test_strengthen_adds_and_caps_at_one(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await graph.upsert_links(namespace, [link("a", "b", 0.5)])
        await graph.strengthen(namespace, [("a", "b")], 0.1, T0 + timedelta(days=1))
        assert weights(await graph.links_of(namespace, ["a", "b"])) == {
            ("a", "b"): 0.6,
            ("b", "a"): 0.6,
        }
        await graph.strengthen(namespace, [("b", "a")], 0.3, T0)
        assert weights(await graph.links_of(namespace, ["a"])) == {("a", "b"): 0.9}
        later = T0 + timedelta(days=2)
        await graph.strengthen(namespace, [("a", "b")], 0.3, later)
        after = await graph.links_of(namespace, ["a", "b"])
        assert weights(after) == {("a", "b"): 1.0, ("b", "a"): 1.0}
        assert {x.updated_at for x in after} == {later}
        assert {x.kind for x in after} == {LinkKind.SIMILAR}

    async def test_strengthen_creates_missing_links(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await graph.strengthen(namespace, [("x", "y"), ("y", "z")], 0.1, T0)
        assert await graph.count_links(namespace) == 2
        from_y = await graph.links_of(namespace, ["y"])
        assert weights(from_y) == {("y", "x"): 0.1, ("y", "z"): 0.1}
        assert {x.kind for x in from_y} == {LinkKind.CO_RECALLED}
        assert {x.updated_at for x in from_y} == {T0}

    @pytest.mark.parametrize("delta", [-0.1, 1.5, float("nan"), float("inf")])
    async def test_strengthen_rejects_bad_deltas(
        self, graph: AssociationGraph, namespace: str, delta: float
    ) -> None:
        with pytest.raises(ValidationError):
            await graph.strengthen(namespace, [("x", "y")], delta, T0)
        assert await graph.count_links(namespace) == 0

    # -- neighbours ------------------------------------------------------------------------

    async def test_neighbors_at_depth_one(self, graph: AssociationGraph, namespace: str) -> None:
        await self.chain(graph, namespace)
        found = await graph.neighbors(namespace, ["a"], depth=1)
        assert summary(found) == [("b", 0.9, 1), ("c", 0.5, 1)]
        assert {n.seed for n in found} == {"a"}

    async def test_neighbors_multiply_weights_along_paths(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        assert summary(await graph.neighbors(namespace, ["a"], depth=2)) == [
            ("b", 0.9, 1),
            ("d", 0.72, 2),
            ("c", 0.5, 1),
            ("f", 0.1, 2),
        ]
        assert summary(await graph.neighbors(namespace, ["a"], depth=3)) == [
            ("b", 0.9, 1),
            ("d", 0.72, 2),
            ("c", 0.5, 1),
            ("e", 0.36, 3),
            ("f", 0.1, 2),
        ]

    async def test_neighbors_keep_the_best_path_per_node(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await graph.upsert_links(
            namespace,
            [
                link("s", "x", 0.3),  # direct but weak
                link("s", "p", 0.5),
                link("p", "x", 0.5),  # 0.25 through p
                link("s", "q", 0.9),
                link("q", "x", 0.9),  # 0.81 through q: the best
            ],
        )
        found = {n.id: n for n in await graph.neighbors(namespace, ["s"], depth=2)}
        assert found["x"].strength == pytest.approx(0.81)
        assert found["x"].depth == 2
        assert set(found) == {"x", "p", "q"}
        direct = {n.id: n for n in await graph.neighbors(namespace, ["s"], depth=1)}
        assert direct["x"].strength == pytest.approx(0.3)

    async def test_neighbors_exclude_seeds_and_name_the_best_seed(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        found = await graph.neighbors(namespace, ["a", "d"], depth=2)
        ids = {n.id for n in found}
        assert "a" not in ids
        assert "d" not in ids
        by_id = {n.id: n for n in found}
        assert (by_id["b"].seed, round(by_id["b"].strength, 6)) == ("a", 0.9)
        assert (by_id["e"].seed, round(by_id["e"].strength, 6), by_id["e"].depth) == ("d", 0.5, 1)
        assert summary(found)[0] == ("b", 0.9, 1)

    async def test_neighbors_min_weight_limit_and_order(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        strong = await graph.neighbors(namespace, ["a"], depth=3, min_weight=0.6)
        assert summary(strong) == [("b", 0.9, 1), ("d", 0.72, 2)]
        top = await graph.neighbors(namespace, ["a"], depth=3, limit=2)
        assert [n.id for n in top] == ["b", "d"]
        everything = await graph.neighbors(namespace, ["a"], depth=3)
        strengths = [n.strength for n in everything]
        assert strengths == sorted(strengths, reverse=True)

    @pytest.mark.parametrize("depth", [0, 4, -1, 10])
    async def test_neighbors_depth_outside_one_to_three_is_rejected(
        self, graph: AssociationGraph, namespace: str, depth: int
    ) -> None:
        await self.chain(graph, namespace)
        with pytest.raises(ValidationError):
            await graph.neighbors(namespace, ["a"], depth=depth)

    async def test_neighbors_of_unknown_seeds_are_empty(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        assert await graph.neighbors(namespace, ["nobody"], depth=3) == []
        assert await graph.neighbors(namespace, [], depth=1) == []

    # -- removal ---------------------------------------------------------------------------

    async def test_unlink_removes_both_directions(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        assert await graph.unlink(namespace, [("b", "a"), ("c", "f"), ("a", "zzz")]) == 2
        assert weights(await graph.links_of(namespace, ["a"])) == {("a", "c"): 0.5}
        assert await graph.links_of(namespace, ["f"]) == []
        assert [n.id for n in await graph.neighbors(namespace, ["b"], depth=1)] == ["d"]
        assert await graph.count_links(namespace) == len(CHAIN) - 2
        assert await graph.unlink(namespace, [("a", "b")]) == 0

    async def test_drop_nodes_returns_the_removed_links(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        removed = await graph.drop_nodes(namespace, ["b"])
        assert weights(removed) == {("b", "a"): 0.9, ("b", "d"): 0.8}
        assert await graph.links_of(namespace, ["b"]) == []
        assert weights(await graph.links_of(namespace, ["d"])) == {("d", "e"): 0.5}
        assert "b" not in {n.id for n in await graph.neighbors(namespace, ["a"], depth=3)}
        assert await graph.count_links(namespace) == len(CHAIN) - 2
        assert await graph.drop_nodes(namespace, ["b"]) == []

    async def test_clear_namespace_and_everything(
        self, graph: AssociationGraph, namespace: str, other_namespace: str
    ) -> None:
        await self.chain(graph, namespace)
        await self.chain(graph, other_namespace)
        await graph.clear(namespace)
        assert await graph.count_links(namespace) == 0
        assert await graph.count_links(other_namespace) == len(CHAIN)
        await graph.clear(None)
        assert await graph.count_links(other_namespace) == 0

    # -- namespace isolation -----------------------------------------------------------------

    async def test_namespaces_never_share_links(
        self, graph: AssociationGraph, namespace: str, other_namespace: str
    ) -> None:
        a, b = namespace, other_namespace
        await self.chain(graph, a)
        await self.chain(graph, b)
        # paths that exist only in b must never be walked from a, at any depth
        await graph.upsert_links(b, [link("b", "b-only", 1.0), link("b-only", "b-far", 1.0)])
        assert await graph.links_of(a, ["b-only"]) == []
        deep = {n.id for n in await graph.neighbors(a, ["a"], depth=3)}
        assert deep == {"b", "c", "d", "e", "f"}
        await graph.strengthen(a, [("a", "b"), ("a", "new")], 0.05, T0)
        await graph.upsert_links(a, [link("c", "f", 0.99)])
        assert await graph.unlink(a, [("d", "e")]) == 1
        assert weights(await graph.drop_nodes(a, ["c"])) == {("c", "a"): 0.5, ("c", "f"): 0.99}
        # b is exactly as it was
        assert await graph.count_links(b) == len(CHAIN) + 2
        assert weights(await graph.links_of(b, ["a", "c", "d"])) == {
            ("a", "b"): 0.9,
            ("a", "c"): 0.5,
            ("c", "a"): 0.5,
            ("c", "f"): 0.2,
            ("d", "b"): 0.8,
            ("d", "e"): 0.5,
        }
        assert await graph.links_of(b, ["new"]) == []
        assert summary(await graph.neighbors(b, ["a"], depth=1)) == [("b", 0.9, 1), ("c", 0.5, 1)]
        # and a sees only its own changes
        assert summary(await graph.neighbors(a, ["a"], depth=1)) == [
            ("b", 0.95, 1),
            ("new", 0.05, 1),
        ]
        await graph.clear(a)
        assert await graph.count_links(b) == len(CHAIN) + 2

    async def test_hostile_ids_are_matched_literally(
        self, graph: AssociationGraph, namespace: str
    ) -> None:
        hub = HOSTILE_IDS[0]
        others = HOSTILE_IDS[1:]
        await graph.upsert_links(
            namespace, [link(hub, other, 0.5 + i / 100) for i, other in enumerate(others)]
        )
        assert await graph.count_links(namespace) == len(others)
        found = await graph.neighbors(namespace, [hub], depth=1, limit=100)
        assert {n.id for n in found} == set(others)
        for other in others:
            assert [x.target for x in await graph.links_of(namespace, [other])] == [hub]
        removed = await graph.drop_nodes(namespace, [others[2]])
        assert [(x.source, x.target) for x in removed] == [(others[2], hub)]
        assert await graph.count_links(namespace) == len(others) - 1

    @pytest.mark.parametrize("hostile", HOSTILE_NAMESPACES)
    async def test_hostile_namespaces_are_matched_literally(
        self, graph: AssociationGraph, hostile: str
    ) -> None:
        prefix = unique_namespace("hostile")
        evil, near = f"{prefix}{hostile}", prefix
        try:
            await graph.upsert_links(evil, [link("a", "b", 0.4)])
            await graph.upsert_links(near, [link("a", "c", 0.6)])
            assert summary(await graph.neighbors(evil, ["a"])) == [("b", 0.4, 1)]
            assert summary(await graph.neighbors(near, ["a"])) == [("c", 0.6, 1)]
            assert await graph.count_links(evil) == 1
            await graph.clear(evil)
            assert await graph.count_links(evil) == 0
            assert await graph.count_links(near) == 1
        finally:
            await graph.clear(evil)
            await graph.clear(near)
