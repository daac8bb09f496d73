"""Neo4jAssociationGraph against real Bolt servers: the shared contract, then what is
particular to this adapter (hostile text on the wire, outages, dialects, batching)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from neo4j import AsyncGraphDatabase
from neo4j.exceptions import ClientError, ServiceUnavailable, SessionExpired, TransientError

from tests.contract.graph_contract import AssociationGraphContract, link, unique_namespace
from tiered_memory.backends.neo4j.graph import (
    FALKORDB_STATEMENT_BYTES,
    FalkorDBDialect,
    Neo4jAssociationGraph,
    Neo4jDialect,
    best_neighbors,
    choose_dialect,
    falkordb_escape,
    falkordb_statement_bytes,
)
from tiered_memory.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    NamespaceError,
    ValidationError,
)
from tiered_memory.models import LinkKind, Neighbor

from .conftest import FAST, OUTAGE, Backend, FalkorDBServer, GraphFactory

pytestmark = pytest.mark.neo4j

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class TestNeo4jAssociationGraph(AssociationGraphContract):
    """The AssociationGraph contract on every available Bolt server."""

    @pytest.fixture
    async def graph(self, graph_factory: GraphFactory) -> Neo4jAssociationGraph:
        return await graph_factory()


@pytest.fixture
async def graph(graph_factory: GraphFactory) -> Neo4jAssociationGraph:
    return await graph_factory()


@pytest.fixture
async def namespace(graph: Neo4jAssociationGraph) -> AsyncIterator[str]:
    ns = unique_namespace("neo4j")
    yield ns
    await graph.clear(ns)


async def raw_query(backend: Backend, query: str, **params: Any) -> list[dict[str, Any]]:
    """Read the server directly, bypassing the adapter (and its escaping)."""
    driver = AsyncGraphDatabase.driver(backend.uri, auth=backend.auth)
    try:
        async with driver.session() as session:

            async def work(tx: Any) -> list[dict[str, Any]]:
                return await (await tx.run(query, params)).data()

            return await session.execute_read(work)
    finally:
        await driver.close()
        backend.heal()


# -- hostile text --------------------------------------------------------------------------

# Every one of these breaks out of a naively built query, or of FalkorDB's unescaped
# parameter printing, if anything is formatted into Cypher text.
HOSTILE = [
    "}) DETACH DELETE n //",
    "x' MATCH (n) DETACH DELETE n //",
    "'; MATCH (n) DETACH DELETE n //",
    "it's",
    "''",
    'say "hi"',
    "{brace}",
    "`backtick`",
    "back\\slash",
    "ends with \\",
    "\\'",
    "\\\\'",
    "a\\nb",
    "$ns",
    "tab\there",
    "日本語-😀",
    "é\u0301\u200b",
]


async def test_hostile_ids_and_namespaces_are_stored_and_matched_literally(
    graph: Neo4jAssociationGraph, bolt_backend: Backend
) -> None:
    canary = unique_namespace("canary")
    await graph.upsert_links(canary, [link("c1", "c2", 0.5)])
    # hostile text at the end of a namespace, and at its start
    namespaces = [f"{unique_namespace('hostile')}{h}" for h in HOSTILE[:5]] + [
        f"{h}{unique_namespace('hostile')}" for h in HOSTILE[5:9]
    ]
    try:
        for ns in namespaces:
            hub = HOSTILE[-1]
            others = [h for h in HOSTILE if h != hub]
            await graph.upsert_links(ns, [link(hub, o, 0.5) for o in others])
            assert await graph.count_links(ns) == len(others)
            found = await graph.neighbors(ns, [hub], depth=1, limit=100)
            assert {n.id for n in found} == set(others)
            assert {n.seed for n in found} == {hub}
            for other in others:
                links = await graph.links_of(ns, [other])
                assert [(x.source, x.target) for x in links] == [(other, hub)]
            await graph.strengthen(ns, [(others[0], others[1])], 0.25, T0)
            assert [x.target for x in await graph.links_of(ns, [others[1]])] == [
                hub,  # 0.5 before 0.25
                others[0],
            ]
            assert await graph.unlink(ns, [(others[1], others[0])]) == 1
            dropped = await graph.drop_nodes(ns, [others[2]])
            assert [(x.source, x.target) for x in dropped] == [(others[2], hub)]
            assert await graph.count_links(ns) == len(others) - 1
        # what the server holds is the text itself, not an escaped form of it
        rows = await raw_query(
            bolt_backend,
            "MATCH (m:Memory {namespace: $ns}) RETURN m.id AS id",
            ns=namespaces[0] if bolt_backend.name != "falkordb" else falkordb_escape(namespaces[0]),
        )
        assert {row["id"] for row in rows} == {h for h in HOSTILE if h != HOSTILE[2]}
        # and nothing leaked into, or deleted from, any other namespace
        assert await graph.count_links(canary) == 1
        assert await graph.links_of(canary, [HOSTILE[-1]]) == []
    finally:
        for ns in [*namespaces, canary]:
            await graph.clear(ns)
    for ns in namespaces:
        assert await graph.count_links(ns) == 0


@pytest.mark.parametrize("bad", ["", "nul\x00byte", "\ud800"])
async def test_unstorable_namespaces_are_rejected(graph: Neo4jAssociationGraph, bad: str) -> None:
    with pytest.raises(NamespaceError):
        await graph.upsert_links(bad, [link("a", "b", 0.5)])
    with pytest.raises(NamespaceError):
        await graph.neighbors(bad, ["a"])


@pytest.mark.parametrize("bad", ["", "nul\x00byte", "line\nbreak", "\ud800"])
async def test_unstorable_ids_are_rejected_before_anything_is_written(
    graph: Neo4jAssociationGraph, namespace: str, bad: str
) -> None:
    with pytest.raises(ValidationError):
        await graph.upsert_links(namespace, [link("ok", "fine", 0.5), link("a", bad, 0.5)])
    with pytest.raises(ValidationError):
        await graph.links_of(namespace, [bad])
    assert await graph.count_links(namespace) == 0


# -- traversal ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [True, 2.0, "2", None])
async def test_depth_must_be_one_of_the_allow_listed_ints(depth: Any) -> None:
    """Checked before any I/O: this graph points at a port where nothing listens."""
    graph = Neo4jAssociationGraph("bolt://127.0.0.1:9", **FAST)
    with pytest.raises(ValidationError, match="depth"):
        await graph.neighbors("ns", ["a"], depth=depth)
    assert graph.dialect is None  # never reached the server


async def test_min_weight_above_one_and_bad_limits(
    graph: Neo4jAssociationGraph, namespace: str
) -> None:
    await graph.upsert_links(namespace, [link("a", "b", 1.0)])
    assert [n.id for n in await graph.neighbors(namespace, ["a"], min_weight=1.0)] == ["b"]
    assert await graph.neighbors(namespace, ["a"], min_weight=1.01) == []
    assert [n.id for n in await graph.neighbors(namespace, ["a"], min_weight=-5)] == ["b"]
    for bad in (0, -1, True):
        with pytest.raises(ValidationError):
            await graph.neighbors(namespace, ["a"], limit=bad)
    with pytest.raises(ValidationError):
        await graph.neighbors(namespace, ["a"], min_weight=float("nan"))


async def test_weights_travel_exactly(graph: Neo4jAssociationGraph, namespace: str) -> None:
    """FalkorDB prints float parameters with six decimals; weights must not be rounded."""
    w = 0.123456789012345
    await graph.upsert_links(namespace, [link("a", "b", w), link("b", "c", 1e-9)])
    by_target = {x.target: x.weight for x in await graph.links_of(namespace, ["b"])}
    assert by_target["a"] == pytest.approx(w, abs=1e-15)
    assert by_target["c"] == pytest.approx(1e-9, abs=1e-15)
    await graph.strengthen(namespace, [("a", "b")], 0.000000123, T0)
    assert (await graph.links_of(namespace, ["a"]))[0].weight == pytest.approx(
        w + 0.000000123, abs=1e-15
    )
    found = await graph.neighbors(namespace, ["a"], depth=2, min_weight=0.0)
    assert {n.id: n.strength for n in found}["c"] == pytest.approx((w + 1.23e-7) * 1e-9)
    # min_weight is compared exactly too: just above the link's weight excludes it
    assert await graph.neighbors(namespace, ["b"], depth=1, min_weight=w + 1.24e-7) == []


async def test_timestamps_and_kinds_survive_the_round_trip(
    graph: Neo4jAssociationGraph, namespace: str
) -> None:
    created = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=timezone.utc)
    naive_later = datetime(2026, 3, 5, 0, 0, 0, 1)  # naive datetimes are UTC
    await graph.upsert_links(
        namespace,
        [
            link("a", "b", 0.4, LinkKind.EXPLICIT).model_copy(
                update={"created_at": created, "updated_at": created}
            ),
            link("a", "c", 0.4, LinkKind.CONSOLIDATED).model_copy(
                update={"created_at": None, "updated_at": None}
            ),
        ],
    )
    await graph.strengthen(namespace, [("b", "a")], 0.1, naive_later)
    ab, ac = await graph.links_of(namespace, ["a"])
    assert (ab.target, ab.kind, ab.created_at) == ("b", LinkKind.EXPLICIT, created)
    assert ab.updated_at == naive_later.replace(tzinfo=timezone.utc)
    assert (ac.target, ac.kind, ac.created_at, ac.updated_at) == (
        "c",
        LinkKind.CONSOLIDATED,
        None,
        None,
    )


async def test_one_relationship_per_pair_stored_from_the_smaller_id(
    graph: Neo4jAssociationGraph, namespace: str, bolt_backend: Backend
) -> None:
    await graph.upsert_links(namespace, [link("z", "a", 0.3), link("a", "z", 0.6)])
    await graph.strengthen(namespace, [("z", "a"), ("a", "z")], 0.1, T0)
    ns = falkordb_escape(namespace) if bolt_backend.name == "falkordb" else namespace
    rows = await raw_query(
        bolt_backend,
        "MATCH (s:Memory {namespace: $ns})-[r:ASSOCIATED]->(t:Memory {namespace: $ns}) "
        "RETURN s.id AS s, t.id AS t, r.weight AS w",
        ns=ns,
    )
    assert [(r["s"], r["t"], round(r["w"], 9)) for r in rows] == [("a", "z", 0.7)]


async def test_concurrent_writers_never_duplicate_a_link(graph_factory: GraphFactory) -> None:
    # several connections at once (a small pool keeps FalkorDB's GOODBYE debris small)
    graph = await graph_factory(driver_config={"max_connection_pool_size": 6})
    namespace = unique_namespace("concurrent")
    weights = [i / 40 for i in range(1, 41)]
    await asyncio.gather(*(graph.upsert_links(namespace, [link("p", "q", w)]) for w in weights))
    assert await graph.count_links(namespace) == 1
    assert (await graph.links_of(namespace, ["p"]))[0].weight == pytest.approx(1.0)
    await asyncio.gather(*(graph.strengthen(namespace, [("x", "y")], 0.01, T0) for _ in range(20)))
    assert await graph.count_links(namespace) == 2
    assert (await graph.links_of(namespace, ["x"]))[0].weight == pytest.approx(0.2)
    await graph.clear(namespace)


async def test_large_batches_are_split_to_fit_the_server(
    graph: Neo4jAssociationGraph, namespace: str
) -> None:
    """On FalkorDB a statement over 4 KiB crashes the server; batches must be split."""
    hub = "h" * 200
    spokes = [f"{i:04d}-" + "s" * 100 for i in range(200)]
    await graph.upsert_links(namespace, [link(hub, s, 0.5) for s in spokes])
    assert await graph.count_links(namespace) == len(spokes)
    await graph.strengthen(namespace, [(hub, s) for s in spokes], 0.25, T0)
    links = await graph.links_of(namespace, spokes)
    assert len(links) == len(spokes)
    assert {x.weight for x in links} == {0.75}
    many_seeds = await graph.neighbors(namespace, spokes, depth=2, limit=400)
    assert [n.id for n in many_seeds] == [hub]  # the other spokes are seeds
    assert await graph.unlink(namespace, [(s, hub) for s in spokes[:120]]) == 120
    dropped = await graph.drop_nodes(namespace, spokes[100:])
    assert len(dropped) == len(spokes) - 120
    assert {(x.target, x.weight) for x in dropped} == {(hub, 0.75)}
    assert await graph.count_links(namespace) == 0


# -- life cycle and outages ----------------------------------------------------------------


async def test_open_recognises_the_server_and_is_idempotent(
    graph_factory: GraphFactory, bolt_backend: Backend
) -> None:
    first = await graph_factory()
    assert first.dialect == bolt_backend.name
    second = await graph_factory()  # the index/constraint already exists: no error
    assert second.dialect == bolt_backend.name
    assert await second.open() is second
    ns = unique_namespace()
    await first.upsert_links(ns, [link("a", "b", 0.5)])
    assert await second.count_links(ns) == 1
    await second.clear(ns)


async def test_the_namespace_id_index_exists(
    graph: Neo4jAssociationGraph, bolt_backend: Backend
) -> None:
    if bolt_backend.name == "falkordb":
        rows = await raw_query(bolt_backend, "CALL db.indexes() YIELD label, properties")
        assert any(
            r["label"] == "Memory" and {"namespace", "id"} <= set(r["properties"]) for r in rows
        )
    else:
        rows = await raw_query(bolt_backend, "SHOW CONSTRAINTS YIELD name RETURN name")
        rows += await raw_query(bolt_backend, "SHOW INDEXES YIELD name RETURN name")
        assert "tiered_memory_namespace_id" in {r["name"] for r in rows}


async def test_construction_does_no_io_and_checks_its_arguments() -> None:
    graph = Neo4jAssociationGraph("bolt://127.0.0.1:9", ("u", "p"))  # nothing listens
    assert graph.dialect is None
    await graph.close()  # never opened: nothing to close, no error
    with pytest.raises(ConfigurationError):
        Neo4jAssociationGraph()
    with pytest.raises(ConfigurationError):
        Neo4jAssociationGraph("bolt://x", driver=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Neo4jAssociationGraph("bolt://x", dialect="sqlite")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Neo4jAssociationGraph("bolt://x", retry_time=-1)
    for not_bolt in ("http://127.0.0.1:9", "redis://127.0.0.1:9", "127.0.0.1:7687"):
        with pytest.raises(ConfigurationError, match="not a Bolt URI"):
            Neo4jAssociationGraph(not_bolt)
    with pytest.raises(ConfigurationError, match="driver_config"):
        await Neo4jAssociationGraph("bolt://127.0.0.1:9", driver_config={"nope": 1}).open()


async def test_a_closed_graph_refuses_work(graph_factory: GraphFactory) -> None:
    graph = await graph_factory()
    await graph.close()
    await graph.close()  # idempotent
    with pytest.raises(ConfigurationError, match="closed"):
        await graph.count_links("ns")


async def test_a_driver_passed_in_stays_open(bolt_backend: Backend) -> None:
    bolt_backend.heal()
    driver = AsyncGraphDatabase.driver(bolt_backend.uri, auth=bolt_backend.auth)
    try:
        async with Neo4jAssociationGraph(driver=driver, **FAST) as graph:
            ns = unique_namespace()
            await graph.upsert_links(ns, [link("a", "b", 0.5)])
            assert graph.dialect == bolt_backend.name
        records, _, _ = await driver.execute_query("RETURN 1 AS one")  # still usable
        assert records[0]["one"] == 1
        async with Neo4jAssociationGraph(driver=driver, **FAST) as again:
            await again.clear(ns)
            assert await again.count_links(ns) == 0
    finally:
        await driver.close()
        bolt_backend.heal()


async def test_a_stopped_server_is_a_backend_unavailable_error_not_a_hang(
    outage_server: FalkorDBServer,
) -> None:
    graph = await Neo4jAssociationGraph.connect(outage_server.uri, **OUTAGE)
    try:
        ns = unique_namespace()
        await graph.upsert_links(ns, [link("a", "b", 0.5)])
        outage_server.stop()
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: graph.neighbors(ns, ["a"]),
            lambda: graph.upsert_links(ns, [link("a", "c", 0.5)]),
            lambda: graph.count_links(ns),
        ]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(BackendUnavailableError) as caught:
                await call()
            assert time.monotonic() - started < 10
            message = str(caught.value)
            assert outage_server.uri in message
            assert "running" in message
            assert isinstance(caught.value.__cause__, ServiceUnavailable | SessionExpired)
        # the same graph recovers once the server is back (its data did not persist)
        outage_server.start()
        outage_server.heal()
        await graph.upsert_links(ns, [link("a", "b", 0.5)])
        assert [n.id for n in await graph.neighbors(ns, ["a"])] == ["b"]
    finally:
        await graph.close()


async def test_a_server_down_at_open_heals_when_it_comes_back(
    outage_server: FalkorDBServer,
) -> None:
    outage_server.stop()
    graph = Neo4jAssociationGraph(outage_server.uri, **OUTAGE)
    try:
        with pytest.raises(BackendUnavailableError, match="unreachable"):
            await graph.open()
        assert graph.dialect is None
        outage_server.start()
        ns = unique_namespace()
        await graph.upsert_links(ns, [link("a", "b", 0.5)])  # set-up runs on first use
        assert graph.dialect == "falkordb"
        assert await graph.count_links(ns) == 1
    finally:
        await graph.close()


def test_tiered_memory_imports_without_the_neo4j_extra() -> None:
    code = (
        "import sys; sys.modules['neo4j'] = None\n"
        "import tiered_memory, tiered_memory.backends.neo4j.graph as m\n"
        "g = m.Neo4jAssociationGraph('bolt://127.0.0.1:9')\n"
        "import asyncio\n"
        "try:\n"
        "    asyncio.run(g.open())\n"
        "except tiered_memory.MissingDependencyError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'tiered-memory[neo4j]'" in done.stdout


def test_missing_extra_is_a_missing_dependency_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "neo4j", None)
    graph = Neo4jAssociationGraph("bolt://127.0.0.1:9")
    with pytest.raises(MissingDependencyError, match=r"tiered-memory\[neo4j\]"):
        asyncio.run(graph.open())


# -- dialects (pure: the server's answers are faked) -------------------------------------------

NEO4J_COMPONENTS = [{"name": "Neo4j Kernel", "versions": ["5.26.1"], "edition": "community"}]
FALKORDB_PROCEDURES = ["algo.pageRank", "db.idx.fulltext.createNodeIndex", "db.labels"]


def test_neo4j_is_recognised_by_its_components() -> None:
    assert choose_dialect(NEO4J_COMPONENTS, None).name == "neo4j"
    enterprise = [{"name": "Neo4j Kernel", "versions": ["2025.01.0"], "edition": "enterprise"}]
    assert choose_dialect(enterprise, FALKORDB_PROCEDURES).name == "neo4j"


def test_falkordb_is_recognised_by_its_procedures() -> None:
    # FalkorDB refuses dbms.components() and calls itself "Neo4j/5.13.0" over Bolt
    assert choose_dialect(None, FALKORDB_PROCEDURES).name == "falkordb"
    assert choose_dialect([], FALKORDB_PROCEDURES).name == "falkordb"


def test_old_or_unknown_servers_are_configuration_errors() -> None:
    old = [{"name": "Neo4j Kernel", "versions": ["4.4.30"], "edition": "community"}]
    with pytest.raises(ConfigurationError, match="Neo4j 5"):
        choose_dialect(old, None)
    for components, procedures in ((None, None), ([], ["db.labels"]), ([{"name": "Memgraph"}], [])):
        with pytest.raises(ConfigurationError, match="dialect="):
            choose_dialect(components, procedures)


class FakeRunner:
    """Records statements; answers db.indexes() with `indexes`; raises `fail` once."""

    def __init__(self, indexes: list[dict[str, Any]], fail: dict[str, Exception]) -> None:
        self.indexes = indexes
        self.fail = fail
        self.calls: list[tuple[str, bool]] = []

    async def __call__(self, query: str, params: dict[str, Any], write: bool) -> list[Any]:
        self.calls.append((" ".join(query.split()), write))
        for marker, error in list(self.fail.items()):
            if marker in query:
                del self.fail[marker]
                raise error
        return self.indexes if "db.indexes" in query else []


async def test_open_takes_the_neo4j_branch_on_a_neo4j_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole open() of a Neo4j server, its answers faked: no dbms.procedures(),
    a Neo4j kernel in dbms.components(), then the constraint."""
    graph = Neo4jAssociationGraph("bolt://neo4j.example:7687", ("u", "p"))
    sent: list[tuple[str, dict[str, Any], bool]] = []

    async def answer(query: str, params: dict[str, Any], *, write: bool) -> list[Any]:
        sent.append((" ".join(query.split()), params, write))
        if "dbms.procedures" in query:
            raise ClientError("There is no procedure with the name `dbms.procedures`")
        if "dbms.components" in query:
            return NEO4J_COMPONENTS
        return []

    monkeypatch.setattr(graph, "_execute", answer)
    await graph.open()
    assert graph.dialect == "neo4j"
    assert [q.split(" ")[:2] for q, _, _ in sent] == [
        ["CALL", "dbms.procedures()"],
        ["CALL", "dbms.components()"],
        ["CREATE", "CONSTRAINT"],
    ]
    await graph.upsert_links("it's", [link("a'", "b", 0.5)])
    _, params, write = sent[-1]
    assert write
    assert params["ns"] == "it's"  # Neo4j gets raw values: no FalkorDB escaping
    assert params["rows"][0]["a"] == "a'"
    await graph.open()  # ready: nothing more is sent
    assert len(sent) == 4


async def test_neo4j_schema_is_a_constraint_with_an_index_fallback() -> None:
    runner = FakeRunner([], {})
    await Neo4jDialect().ensure_schema(runner)
    assert runner.calls == [
        (
            "CREATE CONSTRAINT tiered_memory_namespace_id IF NOT EXISTS "
            "FOR (m:Memory) REQUIRE (m.namespace, m.id) IS UNIQUE",
            True,
        )
    ]
    blocked = FakeRunner([], {"CONSTRAINT": ClientError("an equivalent index exists")})
    await Neo4jDialect().ensure_schema(blocked)
    assert [q.split(" FOR ")[0] for q, _ in blocked.calls] == [
        "CREATE CONSTRAINT tiered_memory_namespace_id IF NOT EXISTS",
        "CREATE INDEX tiered_memory_namespace_id IF NOT EXISTS",
    ]


async def test_falkordb_schema_looks_before_creating() -> None:
    missing = FakeRunner([{"label": "Other", "properties": ["id"]}], {})
    await FalkorDBDialect().ensure_schema(missing)
    assert [q for q, _ in missing.calls][-1] == "CREATE INDEX FOR (m:Memory) ON (m.namespace, m.id)"
    present = FakeRunner([{"label": "Memory", "properties": ["namespace", "id"]}], {})
    await FalkorDBDialect().ensure_schema(present)
    assert [w for _, w in present.calls] == [False]  # read only: nothing created


def test_falkordb_parameters_are_escaped_for_its_text_splicing() -> None:
    assert falkordb_escape("it's") == "it\\'s"
    assert falkordb_escape("a\\'b") == "a\\\\\\'b"
    assert falkordb_escape({"k": ["x'", 1, None, {"n": "\\"}]}) == {
        "k": ["x\\'", 1, None, {"n": "\\\\"}]
    }
    with pytest.raises(ValidationError, match="NUL"):
        falkordb_escape("a\x00b")
    assert Neo4jDialect().encode({"ns": "it's"}) == {"ns": "it's"}  # Neo4j gets raw values


def test_falkordb_statement_size_matches_its_printing() -> None:
    query = "RETURN $a"
    params = {"a": "é'", "n": 3, "f": 0.5, "l": [True, None], "m": {"k": "v"}}
    printed = "CYPHER a='é'' n=3 f=0.500000 l=[true, NULL] m={k: 'v'} RETURN $a"
    assert falkordb_statement_bytes(query, params) == len(printed.encode())


def test_falkordb_batches_stay_inside_the_buffer() -> None:
    dialect = FalkorDBDialect()
    rows = [{"a": f"{i:05d}" + "x" * 90, "b": "it's" * 10} for i in range(400)]
    batches = list(dialect.batches("UNWIND $rows AS row RETURN row", {"ns": "n'"}, "rows", rows))
    assert len(batches) > 10
    assert sum(len(b["rows"]) for b in batches) == len(rows)
    for b in batches:
        assert b["ns"] == "n\\'"
        size = falkordb_statement_bytes("UNWIND $rows AS row RETURN row", b)
        assert size <= FALKORDB_STATEMENT_BYTES
    assert batches[0]["rows"][0]["b"].startswith("it\\'s")
    with pytest.raises(ValidationError, match="more than a FalkorDB statement can carry"):
        list(dialect.batches("RETURN $ids", {}, "ids", ["ok", "x" * FALKORDB_STATEMENT_BYTES]))
    neo4j_batches = list(Neo4jDialect().batches("q", {"ns": "n"}, "rows", rows * 3))
    assert [len(b["rows"]) for b in neo4j_batches] == [1000, 200]


def test_best_neighbors_merges_batches_like_one_query() -> None:
    def nb(id: str, strength: float, depth: int, seed: str) -> Neighbor:
        return Neighbor(id=id, strength=strength, depth=depth, seed=seed)

    merged = best_neighbors(
        [
            nb("x", 0.5, 2, "s2"),
            nb("x", 0.5, 1, "s9"),  # same strength, fewer hops: wins
            nb("y", 0.4, 1, "s2"),
            nb("y", 0.4, 1, "s1"),  # same strength and hops: smaller seed wins
            nb("s1", 0.9, 1, "s2"),  # a seed reached from another batch: dropped
            nb("z", 0.4, 3, "s1"),
            nb("w", 0.1, 1, "s1"),
        ],
        {"s1", "s2", "s9"},
        limit=3,
    )
    assert [(n.id, n.strength, n.depth, n.seed) for n in merged] == [
        ("x", 0.5, 1, "s9"),
        ("y", 0.4, 1, "s1"),
        ("z", 0.4, 3, "s1"),
    ]


@pytest.mark.parametrize(
    ("error", "expected", "says"),
    [
        (ServiceUnavailable("refused"), BackendUnavailableError, "running"),
        (SessionExpired("gone"), BackendUnavailableError, "unreachable"),
        (OSError("reset"), BackendUnavailableError, "unreachable"),
        (TransientError("deadlock"), BackendUnavailableError, "retry_time"),
        (ClientError("bad"), ConfigurationError, "Neo4j 5+ or FalkorDB"),
    ],
)
def test_driver_errors_become_typed_errors(
    error: Exception, expected: type[Exception], says: str
) -> None:
    graph = Neo4jAssociationGraph("bolt://db.example:7687", ("user", "hunter2"))
    translated = graph._translate(error)
    assert isinstance(translated, expected)
    assert says in str(translated)
    assert "bolt://db.example:7687" in str(translated)
    assert "hunter2" not in str(translated)
    bug = KeyError("ours")
    assert graph._translate(bug) is bug  # our own mistakes are not disguised


def test_timestamps_before_and_after_the_epoch_are_exact() -> None:
    """The graph stores times with the library's one conversion (`tiered_memory.epoch`)."""
    from tiered_memory.backends.neo4j import graph
    from tiered_memory.epoch import from_micros_or_none, to_micros_or_none

    assert graph.to_micros_or_none is to_micros_or_none
    assert graph.from_micros_or_none is from_micros_or_none
    for when in (
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        T0 + timedelta(microseconds=1),
        datetime(2262, 1, 1, tzinfo=timezone.utc),
    ):
        assert from_micros_or_none(to_micros_or_none(when)) == when
    assert to_micros_or_none(None) is None
