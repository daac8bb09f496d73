"""The production AssociationGraph: Neo4j (or any server that speaks Bolt and Cypher).

    graph = await Neo4jAssociationGraph.connect("neo4j://db:7687", ("neo4j", "secret"))
    # or share the application's driver; it stays open when the graph closes
    graph = Neo4jAssociationGraph(driver=driver, database="memory")
    await graph.open()

Storage. Each memory is a `(:Memory {namespace, id})` node, unique per (namespace, id).
An association is ONE `ASSOCIATED {kind, weight, created_at, updated_at}` relationship
per unordered pair, stored from the smaller id to the larger and always matched
undirected. One record per link means strengthening and upserts touch a single row
(the two directions can never drift apart), `count_links` counts rows, and undirected
patterns read the same on every Cypher server. Timestamps are integer microseconds
since the Unix epoch (UTC): exact, ordered, and portable to servers without temporal
types.

Queries. Every value travels as a parameter; the only text ever put into a query is
fixed Cypher, and the traversal depth, which Cypher cannot take as a parameter, picks
one of three prewritten queries. Every statement names the namespace in its MATCH or
MERGE. Each operation is a single statement run in a managed transaction, so the
driver retries transient failures and each statement is atomic on its own (the only
atomicity FalkorDB offers: its Bolt BEGIN/COMMIT are no-ops).

Weights travel as integers scaled by 2**62 and are divided back in Cypher: division by
a power of two is exact in IEEE-754, and FalkorDB's Bolt layer prints float parameters
with six decimals, which would otherwise round every weight.

Dialects. The server is recognised once, when the graph opens (FalkorDB lists its
`db.idx.*` procedures; `CALL dbms.components()` answers on Neo4j), and the differences
are kept in two small classes below: how the (namespace, id) index is created, and how
parameters must be shaped for FalkorDB, whose Bolt layer splices them into the query
text (single quotes and backslashes must be escaped, NUL cannot be carried) inside a
4 KiB buffer (larger statements crash the server, so batches are split to fit).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NoReturn
from urllib.parse import urlsplit

from tiered_memory.epoch import from_micros_or_none, to_micros_or_none
from tiered_memory.errors import (
    BackendUnavailableError,
    ConfigurationError,
    TieredMemoryError,
    ValidationError,
    missing_extra,
)
from tiered_memory.models import Link, LinkKind, Neighbor
from tiered_memory.validation import check_id, check_k
from tiered_memory.validation import check_namespace as _check_namespace

if TYPE_CHECKING:
    from neo4j import AsyncDriver, AsyncManagedTransaction, AsyncSession

log = logging.getLogger(__name__)

DEPTHS = frozenset({1, 2, 3})
# The driver also speaks HTTP (a preview); this adapter relies on Bolt sessions.
BOLT_SCHEMES = frozenset({"bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc"})
DialectName = Literal["neo4j", "falkordb"]

# Exact transport of weights in [0, 1] (see the module docstring).
WEIGHT_SCALE = 2**62

# Rows per statement on servers without a statement-size limit: bounds transaction size.
MAX_ROWS_PER_STATEMENT = 1000
# Nodes removed per transaction by `clear`, so clearing a big namespace stays bounded.
CLEAR_BATCH = 10_000
# FalkorDB formats "CYPHER <params> <query>" into a 4096-byte stack buffer; leave margin.
FALKORDB_STATEMENT_BYTES = 3500


# -- Cypher ----------------------------------------------------------------------------
# Row keys are one letter: on FalkorDB every byte of a parameter counts against 4 KiB.

_UPSERT = """
UNWIND $rows AS row
MERGE (a:Memory {namespace: $ns, id: row.a})
MERGE (b:Memory {namespace: $ns, id: row.b})
MERGE (a)-[r:ASSOCIATED]->(b)
  ON CREATE SET r.weight = row.w / 4611686018427387904.0, r.kind = row.k,
                r.created_at = row.c, r.updated_at = row.u
WITH r, row, row.w / 4611686018427387904.0 AS weight
WITH r, row, weight, weight > r.weight AS stronger
SET r.kind = CASE WHEN stronger THEN row.k ELSE r.kind END,
    r.updated_at = CASE WHEN stronger THEN coalesce(row.u, r.updated_at) ELSE r.updated_at END,
    r.weight = CASE WHEN stronger THEN weight ELSE r.weight END
"""

_STRENGTHEN = """
UNWIND $rows AS row
MERGE (a:Memory {namespace: $ns, id: row.a})
MERGE (b:Memory {namespace: $ns, id: row.b})
MERGE (a)-[r:ASSOCIATED]->(b)
  ON CREATE SET r.weight = 0.0, r.kind = $kind, r.created_at = $at
WITH r, r.weight + $delta / 4611686018427387904.0 AS raised
SET r.weight = CASE WHEN raised > 1.0 THEN 1.0 ELSE raised END, r.updated_at = $at
"""

# Paths never pass through a seed (with weights <= 1 such a path is never better than
# the same path started at that seed), and the best path per node is chosen by a
# reduce over its candidates, so ties resolve the same way on every server.
_NEIGHBORS_MATCH = """
MATCH p = (s:Memory {namespace: $ns})-[:ASSOCIATED"""
_NEIGHBORS_REST = """]-(n:Memory {namespace: $ns})
WHERE s.id IN $seeds AND NOT n.id IN $seeds
  AND all(x IN nodes(p) WHERE x.namespace = $ns)
  AND none(x IN nodes(p)[1..-1] WHERE x.id IN $seeds)
  AND all(r IN relationships(p) WHERE r.weight >= $min_weight / 4611686018427387904.0)
WITH n.id AS id, s.id AS seed, length(p) AS depth,
     max(reduce(acc = 1.0, r IN relationships(p) | acc * r.weight)) AS strength
WITH id, collect({strength: strength, depth: depth, seed: seed}) AS paths
WITH id, reduce(best = head(paths), x IN tail(paths) |
       CASE WHEN x.strength > best.strength
              OR (x.strength = best.strength AND x.depth < best.depth)
              OR (x.strength = best.strength AND x.depth = best.depth AND x.seed < best.seed)
            THEN x ELSE best END) AS best
RETURN id, best.strength AS strength, best.depth AS depth, best.seed AS seed
ORDER BY strength DESC, id ASC
LIMIT $limit
"""
# The allow-list: the only way a depth reaches query text.
_NEIGHBORS: Mapping[int, str] = {
    1: _NEIGHBORS_MATCH + "*1..1" + _NEIGHBORS_REST,
    2: _NEIGHBORS_MATCH + "*1..2" + _NEIGHBORS_REST,
    3: _NEIGHBORS_MATCH + "*1..3" + _NEIGHBORS_REST,
}

_LINKS_OF = """
MATCH (m:Memory {namespace: $ns})-[r:ASSOCIATED]-(o:Memory {namespace: $ns})
WHERE m.id IN $ids
RETURN m.id AS source, o.id AS target, r.weight AS weight, r.kind AS kind,
       r.created_at AS created_at, r.updated_at AS updated_at
"""

_UNLINK = """
UNWIND $rows AS row
MATCH (a:Memory {namespace: $ns, id: row.a})-[r:ASSOCIATED]->(b:Memory {namespace: $ns, id: row.b})
DELETE r
RETURN count(r) AS removed
"""

# The links are read and the nodes deleted in one statement: nothing can link to a
# node between the two. Properties are read before DETACH DELETE (Neo4j refuses to
# read a deleted node).
_DROP_NODES = """
MATCH (m:Memory {namespace: $ns})
WHERE m.id IN $ids
OPTIONAL MATCH (m)-[r:ASSOCIATED]-(o:Memory {namespace: $ns})
WITH m, m.id AS source,
     collect(CASE WHEN r IS NULL THEN NULL ELSE {target: o.id, weight: r.weight, kind: r.kind,
             created_at: r.created_at, updated_at: r.updated_at} END) AS links
DETACH DELETE m
RETURN source, links
"""

_COUNT = """
MATCH (:Memory {namespace: $ns})-[r:ASSOCIATED]->(:Memory {namespace: $ns})
RETURN count(r) AS links
"""

_CLEAR_NAMESPACE = """
MATCH (m:Memory {namespace: $ns})
WITH m LIMIT $batch
DETACH DELETE m
RETURN count(*) AS deleted
"""

# Only :Memory nodes: a shared database keeps everything else.
_CLEAR_ALL = """
MATCH (m:Memory)
WITH m LIMIT $batch
DETACH DELETE m
RETURN count(*) AS deleted
"""

_COMPONENTS = "CALL dbms.components() YIELD name, versions, edition RETURN name, versions, edition"
_PROCEDURES = "CALL dbms.procedures() YIELD name RETURN name"

_NEO4J_CONSTRAINT = """
CREATE CONSTRAINT tiered_memory_namespace_id IF NOT EXISTS
FOR (m:Memory) REQUIRE (m.namespace, m.id) IS UNIQUE
"""
_NEO4J_INDEX = """
CREATE INDEX tiered_memory_namespace_id IF NOT EXISTS
FOR (m:Memory) ON (m.namespace, m.id)
"""
_FALKORDB_INDEXES = "CALL db.indexes() YIELD label, properties RETURN label, properties"
# FalkorDB has neither IF NOT EXISTS nor named indexes: look first, then create.
_FALKORDB_INDEX = "CREATE INDEX FOR (m:Memory) ON (m.namespace, m.id)"

Rows = list[dict[str, Any]]
Runner = Callable[[str, dict[str, Any], bool], Awaitable[Rows]]


# -- dialects --------------------------------------------------------------------------


class Dialect:
    """What differs between the Bolt servers this adapter speaks to."""

    name: ClassVar[DialectName]

    def encode(self, params: dict[str, Any]) -> dict[str, Any]:
        """Shape parameters for the wire."""
        return params

    def batches(
        self, query: str, fixed: dict[str, Any], key: str, items: Sequence[Any]
    ) -> Iterator[dict[str, Any]]:
        """Encoded parameters for as many statements as `items` need (under `key`)."""
        base = self.encode(fixed)
        for start in range(0, len(items), MAX_ROWS_PER_STATEMENT):
            chunk = list(items[start : start + MAX_ROWS_PER_STATEMENT])
            yield {**base, **self.encode({key: chunk})}

    async def ensure_schema(self, run: Runner) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.name} dialect>"


class Neo4jDialect(Dialect):
    """Neo4j 5+: a named composite uniqueness constraint, created idempotently."""

    name = "neo4j"

    async def ensure_schema(self, run: Runner) -> None:
        from neo4j.exceptions import ClientError

        try:
            await run(_NEO4J_CONSTRAINT, {}, True)
        except ClientError as e:
            # An older index on the same properties blocks the constraint; MERGE still
            # finds nodes through an index, so settle for one.
            log.warning("uniqueness constraint not created (%s); using an index", e.code)
            await run(_NEO4J_INDEX, {}, True)


class FalkorDBDialect(Dialect):
    """FalkorDB 4.x through its Bolt module (what the test suite runs against)."""

    name = "falkordb"

    def encode(self, params: dict[str, Any]) -> dict[str, Any]:
        return {k: falkordb_escape(v) for k, v in params.items()}

    def batches(
        self, query: str, fixed: dict[str, Any], key: str, items: Sequence[Any]
    ) -> Iterator[dict[str, Any]]:
        """Greedy batches whose printed statement stays inside FalkorDB's buffer."""
        base = self.encode(fixed)
        empty = falkordb_statement_bytes(query, {**base, key: []})
        batch: list[Any] = []
        used = empty
        for item in items:
            encoded = falkordb_escape(item)
            size = len(_falkordb_literal(encoded).encode("utf-8"))
            if empty + size > FALKORDB_STATEMENT_BYTES:
                raise ValidationError(
                    f"one entry needs {size} bytes, more than a FalkorDB statement can "
                    f"carry (about {FALKORDB_STATEMENT_BYTES - empty}); use shorter ids or "
                    "namespaces"
                )
            separator = 2 if batch else 0  # ", "
            if batch and (
                used + separator + size > FALKORDB_STATEMENT_BYTES
                or len(batch) >= MAX_ROWS_PER_STATEMENT
            ):
                yield {**base, key: batch}
                batch, used, separator = [], empty, 0
            batch.append(encoded)
            used += separator + size
        if batch:
            yield {**base, key: batch}

    async def ensure_schema(self, run: Runner) -> None:
        from neo4j.exceptions import Neo4jError

        if _falkordb_has_index(await run(_FALKORDB_INDEXES, {}, False)):
            return
        try:
            await run(_FALKORDB_INDEX, {}, True)
        except Neo4jError:
            # another client may have created it in between; anything else is real
            if not _falkordb_has_index(await run(_FALKORDB_INDEXES, {}, False)):
                raise


DIALECTS: Mapping[str, Dialect] = {"neo4j": Neo4jDialect(), "falkordb": FalkorDBDialect()}


def _falkordb_has_index(rows: Rows) -> bool:
    return any(
        row.get("label") == "Memory" and {"namespace", "id"} <= set(row.get("properties") or ())
        for row in rows
    )


def choose_dialect(
    components: Sequence[Mapping[str, Any]] | None, procedures: Collection[str] | None
) -> Dialect:
    """Pick the dialect from what the server said at open.

    `components` are the rows of `CALL dbms.components()` (None when the server refused
    it); `procedures` the names from `CALL dbms.procedures()` (None when refused). The
    Bolt agent string cannot decide it: FalkorDB introduces itself as "Neo4j/5.13.0".
    """
    for row in components or ():
        if str(row.get("name", "")).lower().startswith("neo4j"):
            versions = [str(v) for v in row.get("versions") or ()]
            major = _major(versions[0]) if versions else None
            if major is not None and major < 5:
                raise ConfigurationError(
                    f"Neo4j {versions[0]} is too old; this adapter needs Neo4j 5 or later"
                )
            return DIALECTS["neo4j"]
    if procedures is not None and any(p.startswith("db.idx.") for p in procedures):
        return DIALECTS["falkordb"]
    raise ConfigurationError(
        "could not tell which graph server this is (neither dbms.components() nor "
        "FalkorDB's procedures answered); pass dialect='neo4j' or dialect='falkordb'"
    )


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def falkordb_escape(value: Any) -> Any:
    """Escape strings for FalkorDB's Bolt layer, which prints parameters into the query
    text between single quotes without escaping them (a quote would end the literal and
    let the rest of the value run as Cypher). Cypher's string syntax reads them back."""
    if isinstance(value, str):
        if "\x00" in value:  # the server cuts C strings at NUL: refuse, never truncate
            raise ValidationError("FalkorDB cannot store text containing a NUL character")
        return value.replace("\\", "\\\\").replace("'", "\\'")
    if isinstance(value, list | tuple):
        return [falkordb_escape(v) for v in value]
    if isinstance(value, dict):
        return {k: falkordb_escape(v) for k, v in value.items()}
    return value


def _falkordb_literal(value: Any) -> str:
    """The text FalkorDB's Bolt layer prints for an (already escaped) parameter."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:f}"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_falkordb_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_falkordb_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no FalkorDB literal for {type(value).__name__}")


def falkordb_statement_bytes(query: str, params: Mapping[str, Any]) -> int:
    """Bytes of "CYPHER k=v ... <query>" as FalkorDB assembles it."""
    head = "CYPHER " + "".join(f"{k}={_falkordb_literal(v)} " for k, v in params.items())
    return len(head.encode("utf-8")) + len(query.encode("utf-8"))


# -- small pure helpers ------------------------------------------------------------------


def _ids(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(check_id(i) for i in ids))


def _pair(source: str, target: str) -> tuple[str, str]:
    """The stored direction of a link: from the smaller id to the larger."""
    check_id(source)
    check_id(target)
    if source == target:
        raise ValidationError(f"a memory cannot be linked to itself ({source!r})")
    return (source, target) if source < target else (target, source)


def _scaled(weight: float) -> int:
    return round(float(weight) * WEIGHT_SCALE)


def _link(source: str, row: Mapping[str, Any]) -> Link:
    return Link(
        source=source,
        target=row["target"],
        weight=min(1.0, max(0.0, float(row["weight"]))),
        kind=LinkKind(row["kind"]),
        created_at=from_micros_or_none(row.get("created_at")),
        updated_at=from_micros_or_none(row.get("updated_at")),
    )


def _link_order(link: Link) -> tuple[str, float, str]:
    return (link.source, -link.weight, link.target)


def best_neighbors(
    candidates: Iterable[Neighbor], seeds: Collection[str], limit: int
) -> list[Neighbor]:
    """Merge neighbour answers (one per batch of seeds) into the final list: seeds out,
    the best path per node (strength, then fewer hops, then seed id), strongest first."""
    best: dict[str, Neighbor] = {}
    for n in candidates:
        if n.id in seeds:
            continue
        held = best.get(n.id)
        if held is None or (-n.strength, n.depth, n.seed) < (-held.strength, held.depth, held.seed):
            best[n.id] = n
    return sorted(best.values(), key=lambda n: (-n.strength, n.id))[:limit]


# -- the adapter -------------------------------------------------------------------------


async def _work(tx: AsyncManagedTransaction, query: str, params: dict[str, Any]) -> Rows:
    result = await tx.run(query, params)
    return await result.data()


@dataclass(frozen=True)
class _Timeouts:
    connection: float
    acquisition: float
    retry: float


class Neo4jAssociationGraph:
    """AssociationGraph over the official neo4j async driver.

    Construction does no I/O. `open()` (or `connect()`, or `async with`) checks the
    server, recognises its dialect and creates the (namespace, id) index. Operations
    also run that set-up on first use if `open()` was skipped or failed (a graph that
    was down at start-up heals when the server comes back).

    `connection_timeout`, `acquisition_timeout` and `retry_time` bound how long an
    operation may wait for an unreachable server before BackendUnavailableError; the
    last two also apply to a driver passed in (they are session settings).
    """

    def __init__(
        self,
        uri: str | None = None,
        auth: tuple[str, str] | None = None,
        *,
        database: str | None = None,
        driver: AsyncDriver | None = None,
        dialect: Literal["auto", "neo4j", "falkordb"] = "auto",
        connection_timeout: float = 5.0,
        acquisition_timeout: float = 10.0,
        retry_time: float = 5.0,
        driver_config: Mapping[str, Any] | None = None,
    ) -> None:
        if (uri is None) == (driver is None):
            raise ConfigurationError(
                "pass either uri= (and auth=) or driver= to Neo4jAssociationGraph, not both"
            )
        if driver is not None and (auth is not None or driver_config):
            raise ConfigurationError("auth= and driver_config= apply only with uri=")
        if uri is not None and urlsplit(uri).scheme.lower() not in BOLT_SCHEMES:
            raise ConfigurationError(
                f"{uri!r} is not a Bolt URI; use one of "
                + ", ".join(f"{scheme}://" for scheme in sorted(BOLT_SCHEMES))
            )
        if dialect not in ("auto", "neo4j", "falkordb"):
            raise ConfigurationError(
                f"unknown dialect {dialect!r}; expected 'auto', 'neo4j' or 'falkordb'"
            )
        for name, value in (
            ("connection_timeout", connection_timeout),
            ("acquisition_timeout", acquisition_timeout),
            ("retry_time", retry_time),
        ):
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative number of seconds")
        self._uri = uri
        self._auth = auth
        self._database = database
        self._driver: AsyncDriver | None = driver
        self._owns_driver = driver is None
        self._driver_config = dict(driver_config or {})
        self._timeouts = _Timeouts(connection_timeout, acquisition_timeout, retry_time)
        self._dialect: Dialect | None = None if dialect == "auto" else DIALECTS[dialect]
        self._ready = False
        self._closed = False
        self._lock = asyncio.Lock()

    # -- life cycle ----------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        uri: str,
        auth: tuple[str, str] | None = None,
        **options: Any,
    ) -> Neo4jAssociationGraph:
        """Build and open a graph with a driver of its own."""
        graph = cls(uri, auth, **options)
        try:
            await graph.open()
        except BaseException:
            await graph.close()
            raise
        return graph

    async def open(self) -> Neo4jAssociationGraph:
        """Check the server, recognise its dialect, create the index (idempotent)."""
        await self._ensure_ready()
        return self

    async def close(self) -> None:
        """Closes the driver only when this graph created it."""
        self._closed = True
        driver, self._driver = self._driver, None
        if driver is not None and self._owns_driver:
            await driver.close()

    async def __aenter__(self) -> Neo4jAssociationGraph:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def dialect(self) -> DialectName | None:
        """The server's dialect, once known."""
        return None if self._dialect is None else self._dialect.name

    def _where(self) -> str:
        return f"the graph server at {self._uri}" if self._uri else "the driver's graph server"

    def _get_driver(self) -> AsyncDriver:
        if self._closed:
            raise ConfigurationError("this Neo4jAssociationGraph is closed; open a new one")
        if self._driver is None:
            try:
                from neo4j import AsyncGraphDatabase
            except ImportError as e:
                raise missing_extra("neo4j", "neo4j") from e
            assert self._uri is not None
            config: dict[str, Any] = {
                "connection_timeout": self._timeouts.connection,
                "connection_acquisition_timeout": self._timeouts.acquisition,
                "max_transaction_retry_time": self._timeouts.retry,
                **self._driver_config,
            }
            try:
                self._driver = AsyncGraphDatabase.driver(self._uri, auth=self._auth, **config)
            except Exception as e:
                raise ConfigurationError(
                    f"cannot build a driver for {self._uri!r} ({e}); check the URI and "
                    "driver_config"
                ) from e
        return self._driver

    async def _ensure_ready(self) -> Dialect:
        if self._ready and self._dialect is not None:
            return self._dialect
        async with self._lock:
            if not self._ready or self._dialect is None:
                try:
                    self._get_driver()  # a missing extra is reported before anything else
                    if self._dialect is None:
                        self._dialect = await self._detect()
                    await self._dialect.ensure_schema(self._raw_runner(self._dialect))
                except Exception as e:
                    self._reraise(e)
                self._ready = True
        return self._dialect

    async def _detect(self) -> Dialect:
        """Ask for FalkorDB's procedure list first (one refused call on Neo4j, once per
        process), because FalkorDB's error path is slow; then for Neo4j's components."""
        from neo4j.exceptions import Neo4jError

        procedures: list[str] | None
        try:
            rows = await self._execute(_PROCEDURES, {}, write=False)
            procedures = [str(row["name"]) for row in rows]
        except Neo4jError:  # the server answered, but has no dbms.procedures()
            procedures = None
        components: Rows | None = None
        if procedures is None or not any(p.startswith("db.idx.") for p in procedures):
            try:
                components = await self._execute(_COMPONENTS, {}, write=False)
            except Neo4jError:
                components = None
        dialect = choose_dialect(components, procedures)
        log.info("%s speaks the %s dialect", self._where(), dialect.name)
        return dialect

    def _session(self) -> AsyncSession:
        return self._get_driver().session(
            database=self._database,
            connection_acquisition_timeout=self._timeouts.acquisition,
            max_transaction_retry_time=self._timeouts.retry,
        )

    async def _execute(self, query: str, params: dict[str, Any], *, write: bool) -> Rows:
        """A managed transaction, so the driver retries what is transient; read or write
        also tells a cluster where to route it. `params` are already encoded."""
        async with self._session() as session:
            if write:
                return await session.execute_write(_work, query, params)
            return await session.execute_read(_work, query, params)

    def _raw_runner(self, dialect: Dialect) -> Runner:
        async def run(query: str, params: dict[str, Any], write: bool) -> Rows:
            return await self._execute(query, dialect.encode(params), write=write)

        return run

    async def _run(self, query: str, params: dict[str, Any], *, write: bool) -> Rows:
        """Run one statement whose parameters are encoded by the caller."""
        await self._ensure_ready()
        try:
            return await self._execute(query, params, write=write)
        except Exception as e:
            self._reraise(e)

    async def _run_batched(
        self,
        query: str,
        fixed: dict[str, Any],
        key: str,
        items: Sequence[Any],
        *,
        write: bool,
    ) -> Rows:
        dialect = await self._ensure_ready()
        out: Rows = []
        for params in dialect.batches(query, fixed, key, items):
            out.extend(await self._run(query, params, write=write))
        return out

    def _reraise(self, e: Exception) -> NoReturn:
        translated = self._translate(e)
        if translated is e:
            raise e
        raise translated from e

    def _translate(self, e: Exception) -> Exception:
        """Driver errors -> the library's typed errors; anything else is left alone."""
        if isinstance(e, TieredMemoryError):
            return e
        try:
            from neo4j import exceptions as nx
        except ImportError:  # pragma: no cover - a driver was passed in, so neo4j exists
            return e
        where = self._where()
        if isinstance(e, nx.AuthError):
            return ConfigurationError(
                f"{where} refused the credentials; check the user and password passed "
                "as auth= (graph.neo4j.user / graph.neo4j.password in the settings)"
            )
        unreachable = (
            nx.ServiceUnavailable,
            nx.SessionExpired,
            nx.ConnectionAcquisitionTimeoutError,
            OSError,
            asyncio.TimeoutError,
        )
        if isinstance(e, unreachable):
            return BackendUnavailableError(
                f"{where} is unreachable ({e}); check that the server is running, that the "
                "URI, port and TLS scheme are right and that nothing blocks the connection"
            )
        if isinstance(e, nx.TransientError):
            return BackendUnavailableError(
                f"{where} stayed busy through {self._timeouts.retry:g}s of retries "
                f"({e.code}); try again later or raise retry_time"
            )
        if isinstance(e, nx.ClientError):
            if e.code == "Neo.ClientError.Database.DatabaseNotFound":
                return ConfigurationError(
                    f"database {self._database!r} does not exist on {where}; pass "
                    "database= with an existing name (or None for the default)"
                )
            return ConfigurationError(
                f"{where} rejected a query ({e.code}: {e.message}); this adapter needs "
                "Neo4j 5+ or FalkorDB 4.x"
            )
        if isinstance(e, nx.ConfigurationError):
            return ConfigurationError(f"the neo4j driver is misconfigured: {e}")
        if isinstance(e, nx.Neo4jError | nx.DriverError):
            return BackendUnavailableError(
                f"{where} failed the request ({type(e).__name__}: {e}); check the server log"
            )
        return e

    # -- AssociationGraph ----------------------------------------------------------------

    async def upsert_links(self, namespace: str, links: Sequence[Link]) -> None:
        ns = _check_namespace(namespace)
        best: dict[tuple[str, str], Link] = {}
        for link in links:
            key = _pair(link.source, link.target)
            if key not in best or link.weight > best[key].weight:
                best[key] = link
        rows = [
            {
                "a": a,
                "b": b,
                "w": _scaled(link.weight),
                "k": LinkKind(link.kind).value,
                "c": to_micros_or_none(link.created_at or link.updated_at),
                "u": to_micros_or_none(link.updated_at or link.created_at),
            }
            for (a, b), link in best.items()
        ]
        if rows:
            await self._run_batched(_UPSERT, {"ns": ns}, "rows", rows, write=True)

    async def strengthen(
        self, namespace: str, pairs: Sequence[tuple[str, str]], delta: float, when: datetime
    ) -> None:
        """Each distinct pair is strengthened once per call, however often it is listed."""
        ns = _check_namespace(namespace)
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise ValidationError("delta must be a number between 0 and 1")
        if not math.isfinite(delta) or not 0.0 <= delta <= 1.0:
            raise ValidationError(f"delta must be between 0 and 1, got {delta!r}")
        if not isinstance(when, datetime):
            raise ValidationError("when must be a datetime")
        keys = list(dict.fromkeys(_pair(a, b) for a, b in pairs))
        if not keys:
            return
        fixed = {
            "ns": ns,
            "delta": _scaled(delta),
            "kind": LinkKind.CO_RECALLED.value,
            "at": to_micros_or_none(when),
        }
        rows = [{"a": a, "b": b} for a, b in keys]
        await self._run_batched(_STRENGTHEN, fixed, "rows", rows, write=True)

    async def neighbors(
        self,
        namespace: str,
        seeds: Sequence[str],
        *,
        depth: int = 1,
        min_weight: float = 0.0,
        limit: int = 50,
    ) -> list[Neighbor]:
        """`min_weight` is per link: weaker links are not followed."""
        ns = _check_namespace(namespace)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth not in DEPTHS:
            raise ValidationError(f"depth must be 1, 2 or 3, got {depth!r}")
        query = _NEIGHBORS[depth]
        check_k(limit, "limit")
        if (
            isinstance(min_weight, bool)
            or not isinstance(min_weight, int | float)
            or not math.isfinite(min_weight)
        ):
            raise ValidationError("min_weight must be a finite number")
        wanted = _ids(seeds)
        if not wanted or min_weight > 1.0:
            return []
        # A batch of seeds only excludes its own seeds, so ask for enough extra rows to
        # cover the other seeds, which best_neighbors removes (see its docstring).
        fixed = {
            "ns": ns,
            "min_weight": _scaled(max(0.0, float(min_weight))),
            "limit": limit + len(wanted),
        }
        rows = await self._run_batched(query, fixed, "seeds", wanted, write=False)
        found = (
            Neighbor(
                id=row["id"],
                strength=float(row["strength"]),
                depth=int(row["depth"]),
                seed=row["seed"],
            )
            for row in rows
        )
        return best_neighbors(found, set(wanted), limit)

    async def links_of(self, namespace: str, ids: Sequence[str]) -> list[Link]:
        """When both ends are in `ids`, the link is reported once from each side."""
        ns = _check_namespace(namespace)
        wanted = _ids(ids)
        if not wanted:
            return []
        rows = await self._run_batched(_LINKS_OF, {"ns": ns}, "ids", wanted, write=False)
        return sorted((_link(row["source"], row) for row in rows), key=_link_order)

    async def unlink(self, namespace: str, pairs: Sequence[tuple[str, str]]) -> int:
        """Returns how many links were removed."""
        ns = _check_namespace(namespace)
        keys = list(dict.fromkeys(_pair(a, b) for a, b in pairs))
        if not keys:
            return 0
        rows = [{"a": a, "b": b} for a, b in keys]
        answers = await self._run_batched(_UNLINK, {"ns": ns}, "rows", rows, write=True)
        return sum(int(row["removed"]) for row in answers)

    async def drop_nodes(self, namespace: str, ids: Sequence[str]) -> list[Link]:
        """The removed links are reported from the dropped node's side (once per side
        when both ends are dropped), ready to be kept with an archive record."""
        ns = _check_namespace(namespace)
        wanted = _ids(ids)
        if not wanted:
            return []
        rows = await self._run_batched(_DROP_NODES, {"ns": ns}, "ids", wanted, write=True)
        removed = [_link(row["source"], link) for row in rows for link in row["links"] or ()]
        return sorted(removed, key=_link_order)

    async def count_links(self, namespace: str) -> int:
        ns = _check_namespace(namespace)
        dialect = await self._ensure_ready()
        rows = await self._run(_COUNT, dialect.encode({"ns": ns}), write=False)
        return int(rows[0]["links"]) if rows else 0

    async def clear(self, namespace: str | None = None) -> None:
        """Deletes :Memory nodes only (all of them when `namespace` is None), in bounded
        transactions."""
        params: dict[str, Any]
        if namespace is None:
            query, params = _CLEAR_ALL, {"batch": CLEAR_BATCH}
        else:
            query = _CLEAR_NAMESPACE
            params = {"ns": _check_namespace(namespace), "batch": CLEAR_BATCH}
        dialect = await self._ensure_ready()
        encoded = dialect.encode(params)
        while True:
            rows = await self._run(query, encoded, write=True)
            if not rows or int(rows[0]["deleted"]) < CLEAR_BATCH:
                return


__all__ = [
    "DEPTHS",
    "Dialect",
    "FalkorDBDialect",
    "Neo4jAssociationGraph",
    "Neo4jDialect",
    "best_neighbors",
    "choose_dialect",
    "falkordb_escape",
    "falkordb_statement_bytes",
]
