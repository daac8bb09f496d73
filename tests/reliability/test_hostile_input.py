"""Hostile and malformed input (issue 11, part 3), generated with hypothesis.

Every input gets either a typed error (a `TieredMemoryError`) or a correct result;
on an error nothing was written (the SQLite connection's `total_changes`, the
archive folder, and what the graph and object servers hold are unchanged), and
nothing else is ever raised.

The probes run on every backend combination with --matrix (tests/matrix.py); by
default the embedded one, and the injection-shaped namespaces and ids also on the
Bolt graph with S3, where they reach Cypher and object keys. Where the rules of
DESIGN.md section 8 say which inputs are bad, the test predicts the outcome and
checks the library agrees.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.matrix import MemoryFactory
from tiered_memory import (
    ArchiveIntegrityError,
    AsyncTieredMemory,
    BackendUnavailableError,
    DimensionMismatchError,
    HashingEmbedder,
    ManualClock,
    Memory,
    NamespaceError,
    Tier,
    TieredMemory,
    TieredMemoryError,
    ValidationError,
)
from tiered_memory.archive import decode_document, original_key, sha256_hex
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.ports import MetadataFilter

from . import surface
from .conftest import START
from .invariants import sqlite_store
from .state import state_of

pytestmark = pytest.mark.matrix

T = TypeVar("T")
DIM = 64
LIMITS_CONTENT = 32_000

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Characters that break naive code: NUL, bidi overrides and marks, zero-width joiners,
# a BOM, lone surrogates of both halves, combining marks, and astral emoji.
NASTY = [
    "\x00",
    "\u202e",
    "\u202d",
    "\u200f",
    "\u200e",
    "\u2066",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\ud800",
    "\udfff",
    "\u0301",
    "\U0001f600",
    "\n",
    "\t",
    "\r",
    "'",
    '"',
    "\\",
    "%",
    "/",
]
INJECTIONS = [
    "'; DROP TABLE memories; --",
    "' OR '1'='1",
    'x" OR 1=1 --',
    "1; DELETE FROM archives",
    "') UNION SELECT * FROM links --",
    "MATCH (n) DETACH DELETE n",
    "x'}) MATCH (m) RETURN m //",
    "`n` WHERE 1=1",
    "$ns",
    "{ __schema { types { name } } }",
    'query { memories(namespace: "*") { id content } }',
    "../../etc/passwd",
    "..",
    ".",
    "CON",
    "nul",
    "%2e%2e%2f",
    "a/b\\c",
    "*",
    "?",
    "%",
    "_",
    "ns\u202eevil",
    "\u200b",
    "default",
]

hostile_text = st.text(
    alphabet=st.one_of(st.characters(codec=None), st.sampled_from(NASTY)), max_size=60
)
identifiers = st.one_of(st.sampled_from(INJECTIONS), hostile_text)


@dataclass
class Probe:
    """A memory under attack, and how to see whether a call wrote anything."""

    mem: TieredMemory
    archive: Path
    memories: MemoryFactory

    def changes(self) -> tuple[int, int, frozenset[tuple[Any, ...]]]:
        with sqlite_store(self.mem.aio).database.read() as conn:
            rows = conn.total_changes
        files = (
            sum(1 for p in self.archive.rglob("*") if p.is_file()) if self.archive.exists() else 0
        )
        return rows, files, self.memories.elsewhere()

    def attempt(self, call: Callable[[], T]) -> T | TieredMemoryError:
        """Run `call`; a typed error is returned (after checking nothing was written),
        anything else that is raised fails the test."""
        before = self.changes()
        try:
            return call()
        except TieredMemoryError as e:
            error = e
        assert self.changes() == before, f"{type(error).__name__} after a write: {error}"
        return error


@pytest.fixture
def probe(tmp_path: Path, memories: MemoryFactory) -> Iterator[Probe]:
    mem = memories.open_sync(
        tmp_path / "hostile.db",
        embedder=HashingEmbedder(DIM),
        clock=ManualClock(START),
        archive_dir=tmp_path / "archive",
    )
    try:
        mem.add("the sentinel memory that must survive every attack", namespace="sentinel")
        yield Probe(mem, tmp_path / "archive", memories)
        assert mem.stats(namespace="sentinel").total == 1
    finally:
        mem.close()


def content_is_valid(content: str) -> bool:
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(content.strip()) and "\x00" not in content and len(content) <= LIMITS_CONTENT


# -- content -------------------------------------------------------------------------------


@SETTINGS
@given(content=hostile_text)
def test_any_text_is_stored_exactly_or_refused(probe: Probe, content: str) -> None:
    mem = probe.mem
    added = probe.attempt(lambda: mem.add_many([content], namespace="text", dedup=False))
    if not content_is_valid(content):
        assert isinstance(added, ValidationError), repr(content)
        assert isinstance(
            probe.attempt(lambda: mem.add(content, namespace="text")), ValidationError
        )
        return
    assert isinstance(added, list), added
    stored = mem.get(added[0].id, namespace="text")
    assert stored is not None
    assert stored.content == content
    hits = mem.search(content, namespace="text", k=3)
    assert all(h.memory.namespace == "text" for h in hits)
    injection = mem.recall(content, namespace="text", budget_tokens=200)
    assert injection.tokens <= 200


@SETTINGS
@given(
    size=st.sampled_from([LIMITS_CONTENT - 1, LIMITS_CONTENT, LIMITS_CONTENT + 1, 1_000_000]),
    unit=st.sampled_from(["a", "é", "\U0001f600", "word "]),
)
def test_very_long_content(probe: Probe, size: int, unit: str) -> None:
    content = (unit * size)[:size]
    result = probe.attempt(lambda: probe.mem.add_many([content], namespace="long", dedup=False))
    if size > LIMITS_CONTENT:
        assert isinstance(result, ValidationError)
        assert "limit" in str(result)
    else:
        assert isinstance(result, list)
        got = probe.mem.get(result[0].id, namespace="long")
        assert got is not None
        assert got.content == content
        injection = probe.mem.recall(unit, namespace="long", budget_tokens=50)
        assert injection.tokens <= 50  # a huge memory never overshoots the budget


# -- metadata ------------------------------------------------------------------------------

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
odd_leaves = st.one_of(
    st.binary(max_size=8),
    st.sets(st.integers(), max_size=3),
    st.tuples(st.integers(), st.text(max_size=3)),
    st.just(datetime(2026, 1, 1, tzinfo=timezone.utc)),
    st.just(Decimal("1.5")),
    st.just(complex(1, 2)),
    st.builds(object),
)
keys = st.one_of(hostile_text, st.integers(), st.none(), st.tuples(st.integers()))
metadata_values = st.recursive(
    st.one_of(json_leaves, odd_leaves),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=12,
)


def json_form(value: Any) -> Any | None:
    """What the metadata is as JSON (what the store keeps), or None if it is not JSON."""
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
        encoded.encode("utf-8")
    except (TypeError, ValueError):
        return None
    loaded = json.loads(encoded)
    if _has_wide_int(loaded):  # beyond a signed 64-bit integer: no backend compares it
        return None
    return loaded


def _has_wide_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_wide_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_wide_int(v) for v in value)
    return isinstance(value, int) and not -(2**63) <= value < 2**63


@SETTINGS
@given(metadata=st.dictionaries(keys, metadata_values, max_size=5))
def test_metadata_of_odd_types(probe: Probe, metadata: dict[Any, Any]) -> None:
    mem = probe.mem
    content = f"metadata case {len(probe.mem.list(namespace='meta', limit=1000))}"
    result = probe.attempt(lambda: mem.add(content, namespace="meta", metadata=metadata))
    expected = json_form(metadata)
    if expected is None or any(not isinstance(k, str) for k in metadata):
        assert isinstance(result, ValidationError), metadata
        return
    assert isinstance(result, Memory), result
    got = mem.get(result.id, namespace="meta")
    assert got is not None
    assert got.metadata == expected
    for key, value in list(expected.items())[:2]:  # filters on what was stored find it
        found = probe.attempt(
            lambda k=key, v=value: mem.search(content, namespace="meta", metadata={k: v}, k=50)
        )
        if not isinstance(found, TieredMemoryError):
            assert all(h.memory.namespace == "meta" for h in found)
            if not isinstance(value, (dict, list)) and value is not None:
                assert result.id in [h.memory.id for h in found], (key, value)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


def test_deep_and_circular_metadata_is_refused(probe: Probe) -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    for metadata in (_nested(5_000), circular, {"list": [_nested(3_000)]}):
        result = probe.attempt(lambda m=metadata: probe.mem.add("deep", metadata=m))
        assert isinstance(result, ValidationError), type(result)


OPS = ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "exists", "lava"]
hostile_filters = st.one_of(
    st.dictionaries(keys, metadata_values, max_size=3),
    st.lists(
        st.builds(
            MetadataFilter,
            key=st.one_of(identifiers, st.sampled_from(["$.a", "a.b", "a[0]", "*"])),
            op=st.sampled_from(OPS),
            value=metadata_values,
        ),
        max_size=3,
    ),
    st.text(max_size=5),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)


@SETTINGS
@given(filters=hostile_filters)
def test_hostile_metadata_filters(probe: Probe, filters: Any) -> None:
    mem = probe.mem
    if not mem.list(namespace="filters", limit=1):
        mem.add("a memory to filter", namespace="filters", metadata={"a": 1, "b": "x'y"})
    result = probe.attempt(lambda: mem.search("memory", namespace="filters", metadata=filters))
    if not isinstance(result, TieredMemoryError):
        assert all(h.memory.namespace == "filters" for h in result)


@SETTINGS
@given(query=st.one_of(hostile_text, st.sampled_from(['"', "NEAR(", "a AND", "*", "x:y", "^"])))
def test_hostile_queries(probe: Probe, query: str) -> None:
    for call in (
        lambda: probe.mem.search(query, namespace="sentinel", deep=True),
        lambda: probe.mem.recall(query, namespace="sentinel", budget_tokens=100),
    ):
        result = probe.attempt(call)
        if isinstance(result, TieredMemoryError):
            assert isinstance(result, ValidationError), result


# -- namespaces and ids that look like injections -----------------------------------------


def namespace_is_valid(ns: str) -> bool:
    try:
        ns.encode("utf-8")
    except UnicodeEncodeError:
        return False
    control = any(
        (ord(c) < 32 and c != "\t") or 0x7F <= ord(c) < 0xA0 for c in ns
    )  # Unicode category Cc
    return bool(ns.strip()) and len(ns) <= 256 and not control


@pytest.mark.matrix(diagonal=True)
@SETTINGS
@given(ns=identifiers, memory_id=identifiers)
def test_injection_shaped_namespaces_and_ids(probe: Probe, ns: str, memory_id: str) -> None:
    mem = probe.mem
    content = "a memory stored under a hostile namespace and id"
    result = probe.attempt(lambda: mem.add(content, namespace=ns, id=memory_id))
    if not namespace_is_valid(ns):
        assert isinstance(result, NamespaceError), repr(ns)
        return
    if not namespace_is_valid(memory_id):  # ids follow the same rules (no length limit)
        assert isinstance(result, ValidationError), repr(memory_id)
        return
    if isinstance(result, ValidationError) and "already exist" in str(result):
        return  # hypothesis repeated a pair
    assert isinstance(result, Memory), result
    assert result.id == memory_id
    got = mem.get(memory_id, namespace=ns)
    assert got is not None
    assert got.namespace == ns
    other = "sentinel" if ns != "sentinel" else "default"
    assert mem.get(memory_id, namespace=other) is None
    for hit in mem.search(content, namespace=ns, k=10):
        assert hit.memory.namespace == ns
    assert memory_id in [m.id for m in mem.list(namespace=ns, limit=1000)]
    assert ns in mem.namespaces()
    assert mem.stats(namespace="sentinel").total == 1
    mem.forget(memory_id, namespace=ns, hard=True)
    assert mem.get(memory_id, namespace=ns) is None


# -- budgets -------------------------------------------------------------------------------


@SETTINGS
@given(
    budget=st.one_of(
        st.integers(min_value=-5, max_value=5),
        st.integers(min_value=10**6, max_value=10**18),
        st.floats(allow_nan=True),
        st.booleans(),
        st.text(max_size=3),
    ),
    max_items=st.one_of(st.none(), st.integers(min_value=-2, max_value=3), st.just(10**9)),
)
def test_budgets_zero_huge_and_wrong(probe: Probe, budget: Any, max_items: int | None) -> None:
    mem = probe.mem
    if not mem.list(namespace="budget", limit=1):
        for i in range(5):
            mem.add(f"budget fact number {i}: the rent is due on day {i + 1}", namespace="budget")
    result = probe.attempt(
        lambda: mem.recall(
            "rent due", namespace="budget", budget_tokens=budget, max_items=max_items
        )
    )
    budget_ok = isinstance(budget, int) and not isinstance(budget, bool) and budget >= 0
    items_ok = max_items is None or 1 <= max_items <= mem.policy.limits.max_results
    if not (budget_ok and items_ok):
        assert isinstance(result, ValidationError), (budget, max_items)
        return
    assert not isinstance(result, TieredMemoryError), result
    assert result.tokens <= budget
    assert result.budget_tokens == budget
    if budget == 0:
        assert result.items == []
        assert result.text == ""
    if budget >= 10**6:
        assert 1 <= len(result.items) <= min(5, max_items or 20)


# -- vectors -------------------------------------------------------------------------------

vectors = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=0, max_size=80),
    st.lists(st.floats(-1, 1, width=32), min_size=DIM, max_size=DIM),
    st.lists(st.lists(st.floats(-1, 1), max_size=3), max_size=3),
    st.lists(st.text(max_size=2), max_size=DIM),
    st.just(np.full(DIM, np.nan, dtype=np.float32)),
    st.just(np.ones((DIM, 1), dtype=np.float32)),
    st.just(np.ones(DIM, dtype=np.float64)),
)


def vector_is_valid(v: Any) -> bool:
    try:
        array = np.asarray(v, dtype=np.float32)
    except (TypeError, ValueError):
        return False
    return array.ndim == 1 and array.size == DIM and bool(np.isfinite(array).all())


@SETTINGS
@given(vector=vectors)
def test_wrong_dimension_and_nan_vectors(probe: Probe, vector: Any) -> None:
    mem = probe.mem
    added = probe.attempt(lambda: mem.add("a memory with its own vector", embedding=vector))
    searched = probe.attempt(lambda: mem.search("anything", query_embedding=vector))
    if vector_is_valid(vector):
        assert isinstance(added, Memory), added
        assert not isinstance(searched, TieredMemoryError), searched
        return
    for outcome in (added, searched):
        assert isinstance(outcome, ValidationError), outcome
    array = np.asarray(vector, dtype=np.float32) if _numeric(vector) else None
    if array is not None and array.ndim == 1 and array.size and np.isfinite(array).all():
        assert isinstance(added, DimensionMismatchError)


def _numeric(v: Any) -> bool:
    try:
        np.asarray(v, dtype=np.float32)
    except (TypeError, ValueError):
        return False
    return True


# -- corrupt archived originals ------------------------------------------------------------


def _mutations(original: bytes) -> st.SearchStrategy[bytes]:
    document = json.loads(original)
    return st.one_of(
        st.binary(max_size=200),
        st.integers(min_value=0, max_value=len(original) - 1).map(lambda n: original[:n]),
        st.tuples(st.integers(min_value=0, max_value=len(original) - 1), st.integers(1, 255)).map(
            lambda t: original[: t[0]] + bytes([original[t[0]] ^ t[1]]) + original[t[0] + 1 :]
        ),
        st.just(b"[" * 3000 + b"]" * 3000),
        st.just(json.dumps({**document, "schema_version": 2}).encode()),
        st.just(json.dumps({**document, "original_id": "someone-else"}).encode()),
        st.just(json.dumps({**document, "content": "tampered"}).encode()),
        st.just(json.dumps(document).encode()),  # same content, other bytes
        st.just(b"\xff\xfe not utf-8"),
    )


@dataclass(repr=False)
class Archived:
    """One archived memory and its original, read and written through the object
    store (kept out of hypothesis' reports)."""

    probe: Probe
    memory_id: str
    key: str
    original: bytes

    def write(self, data: bytes) -> None:
        mem = self.probe.mem
        mem.run(mem.aio.objects.put("arc", self.key, data))

    def __repr__(self) -> str:
        return f"Archived({self.memory_id!r})"


@pytest.fixture
def archived(probe: Probe) -> Archived:
    mem = probe.mem
    m = mem.add("the original that will be corrupted: Ava's locker code is 4711", namespace="arc")
    assert mem.archive([m.id], namespace="arc") == 1
    (key,) = mem.run(mem.aio.objects.list("arc"))
    return Archived(probe, m.id, key, mem.run(mem.aio.objects.get("arc", key)))


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_corrupt_originals_raise_integrity_errors_and_keep_the_record(
    archived: Archived, data: st.DataObject
) -> None:
    probe, memory_id, original = archived.probe, archived.memory_id, archived.original
    corrupt = data.draw(_mutations(original), label="corrupt original")
    assume(corrupt != original)
    mem = probe.mem
    archived.write(corrupt)
    try:
        for call in (
            lambda: mem.expand(memory_id, namespace="arc"),
            lambda: mem.restore(memory_id, namespace="arc"),
            lambda: mem.restore_archive(namespace="arc"),
        ):
            outcome = probe.attempt(call)
            assert isinstance(outcome, ArchiveIntegrityError), outcome
        still = mem.get(memory_id, namespace="arc")
        assert still is not None
        assert still.tier is Tier.ARCHIVED
        assert mem.stats(namespace="arc").tiers[Tier.ARCHIVED].count == 1
    finally:
        archived.write(original)


def test_the_intact_original_still_expands_after_the_attacks(archived: Archived) -> None:
    mem = archived.probe.mem
    document = mem.expand(archived.memory_id, namespace="arc")
    assert document["content"].endswith("4711")


def test_a_missing_original_is_an_integrity_error(archived: Archived) -> None:
    probe, memory_id = archived.probe, archived.memory_id
    probe.mem.run(probe.mem.aio.objects.delete("arc", archived.key))
    for call in (
        lambda: probe.mem.expand(memory_id, namespace="arc"),
        lambda: probe.mem.restore(memory_id, namespace="arc"),
    ):
        outcome = probe.attempt(call)
        assert isinstance(outcome, ArchiveIntegrityError), outcome
    still = probe.mem.get(memory_id, namespace="arc")
    assert still is not None
    assert still.tier is Tier.ARCHIVED


@pytest.mark.parametrize(
    "leftover",
    [
        b"not json at all",
        b"[" * 3000 + b"]" * 3000,
        b'{"schema_version": 1}',
        None,  # a well-formed original whose links are junk (filled in below)
    ],
    ids=["garbage", "deep", "partial", "junk-links"],
)
def test_a_corrupt_leftover_original_does_not_block_archival(
    probe: Probe, leftover: bytes | None
) -> None:
    """A run that stopped after writing an original leaves it behind, named in the
    archival journal, for the rerun (which reads the links it saved, then deletes it); if
    that leftover is damaged, the rerun writes a good one instead of failing forever."""
    mem = probe.mem
    m = mem.add("a lonely memory without links: the boiler was serviced in May", namespace="o")
    assert mem.links(m.id, namespace="o") == []
    if leftover is None:
        leftover = json.dumps(
            {
                "schema_version": 1,
                "original_id": m.id,
                "content": m.content,
                "memory": {},
                "links": ["junk", {"source": 1}],
            }
        ).encode()
    checksum = sha256_hex(leftover)
    mem.run(_left_behind(mem.aio, "o", m.id, checksum, leftover))
    mem.demote(m.id, Tier.COLD, namespace="o")
    report = mem.maintain(now=START + timedelta(days=400))
    assert report.errors == []
    assert report.count("cold_to_archived") == 1
    assert mem.expand(m.id, namespace="o")["content"] == m.content
    assert original_key(m.id, checksum) not in mem.run(mem.aio.objects.list("o"))


async def _left_behind(
    amem: AsyncTieredMemory, ns: str, memory_id: str, checksum: str, data: bytes
) -> None:
    """What a killed archival leaves: its original, noted in the journal, its claim
    ended (as the next run finds a dead process's claim)."""
    wall = datetime.now(timezone.utc)
    await amem.store.claim_archival(ns, [memory_id], claimant="gone", until=wall, now=wall)
    assert await amem.store.note_archival(ns, "gone", {memory_id: checksum}) == {memory_id}
    await amem.objects.put(ns, original_key(memory_id, checksum), data)
    await amem.store.release_archival(ns, "gone", [memory_id], now=wall, quarantine_after=3)


def _loop_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "tiered-memory")


def test_a_failed_open_leaves_no_thread_behind(tmp_path: Path) -> None:
    # One backend: what fails to open is a SQLite file.
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 100)
    before = _loop_threads()
    for _ in range(3):
        with pytest.raises(BackendUnavailableError):
            TieredMemory.embedded(bad, embedder=HashingEmbedder(DIM))
    assert _loop_threads() == before


@SETTINGS
@given(data=st.binary(max_size=300) | st.integers(0, 5000).map(lambda n: b"[" * n + b"]" * n))
def test_decoding_any_bytes_gives_a_document_or_an_integrity_error(data: bytes) -> None:
    try:
        document = decode_document(data)
    except ArchiveIntegrityError:
        return
    assert isinstance(document, dict)
    assert isinstance(document["content"], str)


# -- a truncated SQLite file ---------------------------------------------------------------
# (one backend: these are about the SQLite file)


@pytest.fixture(scope="module")
def full_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("truncate")
    mem = TieredMemory.embedded(
        folder / "full.db", embedder=HashingEmbedder(DIM), clock=ManualClock(START)
    )
    try:
        mem.add_many([f"memory number {i} about topic {i % 7}" for i in range(300)], namespace="t")
    finally:
        mem.close()
    return folder / "full.db"


@settings(max_examples=60, deadline=None)
@given(fraction=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_a_truncated_sqlite_file_is_refused_with_a_typed_error(
    full_database: Path, tmp_path_factory: pytest.TempPathFactory, fraction: float
) -> None:
    size = full_database.stat().st_size
    keep = max(1, math.floor(size * fraction))
    folder = tmp_path_factory.mktemp("cut")
    cut = folder / "cut.db"
    shutil.copyfile(full_database, cut)
    with cut.open("r+b") as f:
        f.truncate(keep)
    with pytest.raises(TieredMemoryError) as raised:
        TieredMemory.embedded(cut, embedder=HashingEmbedder(DIM)).close()
    assert isinstance(raised.value, BackendUnavailableError), raised.value
    assert cut.stat().st_size == keep  # refused, not "repaired" into an empty store
    shutil.rmtree(folder)


def test_a_database_of_garbage_is_refused(tmp_path: Path) -> None:
    for name, data in {
        "text.db": b"this is not a database at all" * 10,
        "header.db": b"SQLite format 3\x00" + bytes(84),
        "zeros.db": bytes(8192),
    }.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(BackendUnavailableError):
            TieredMemory.embedded(path, embedder=HashingEmbedder(DIM)).close()
        assert path.read_bytes() == data


def _half_copy(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    os.truncate(target, source.stat().st_size // 2)
    return target


async def test_the_store_alone_refuses_a_truncated_file(
    full_database: Path, tmp_path: Path
) -> None:
    cut = _half_copy(full_database, tmp_path / "cut.db")
    with pytest.raises(BackendUnavailableError, match="truncated"):
        await SQLiteMemoryStore.open(cut)


# -- every public method with any arguments (issue 17) -------------------------------------


@pytest.fixture
def world(tmp_path: Path, memories: MemoryFactory) -> Iterator[surface.World]:
    built = surface.build_world(memories, tmp_path)
    try:
        yield built
    finally:
        built.mem.close()


def _attack(world: surface.World, data: st.DataObject) -> None:
    """One call of one public method with drawn arguments: it succeeds, or raises a
    TieredMemoryError after writing nothing (no row, link or original).

    A framework's own check that refuses an argument before any of our code runs
    (LangGraph's InvalidNamespaceError, a LlamaIndex event model) is the framework's
    documented behaviour, and allowed; once our code has run, only our errors leave.
    """
    targets = surface.surface(world)
    target = data.draw(st.sampled_from(targets), label="method")
    args, kwargs = surface.arguments(data, world, target)
    before = state_of(world.mem.aio, world.archive, world.elsewhere)
    try:
        target.call(*args, **kwargs)
        return
    except TieredMemoryError as e:
        error = e
    except Exception as e:
        if surface.ran_our_code(e):
            raise
        error = e
    after = state_of(world.mem.aio, world.archive, world.elsewhere)
    assert after == before, f"{target.name}: {error!r} after writing {before.diff(after)}"


HOSTILE_CALLS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HOSTILE_CALLS
@given(data=st.data())
def test_every_public_method_takes_any_argument(world: surface.World, data: st.DataObject) -> None:
    _attack(world, data)


def test_the_surface_is_every_public_method(world: surface.World) -> None:
    """A method added to the facade is attacked without editing the test."""
    names = {t.name for t in surface.surface(world)}
    assert {"core.add", "core.add_many", "core.search", "core.recall", "core.list"} <= names
    assert {"core.archive", "core.maintain", "core.forget_many", "core.namespaces"} <= names
    assert "langgraph.store.put" in names
    assert "llamaindex.vectorstore.query" in names
    assert "langchain.tool.memory_store.invoke" in names
    assert len(names) >= 50


@pytest.mark.soak
@settings(HOSTILE_CALLS, max_examples=5_000)
@given(data=st.data())
def test_every_public_method_takes_any_argument_soak(
    world: surface.World, data: st.DataObject
) -> None:
    _attack(world, data)


# -- an import of any document (issue 16 item 4 under issue 17's rules) ----------------------

FIELDS = {
    "top": ["format", "version", "namespace", "dimension", "memories", "archives", "links"],
    "memory": [
        *("id", "content", "source", "metadata", "embedding", "tier", "importance"),
        *("use_count", "superseded_by", "consolidated_from", "created_at", "pinned"),
    ],
    "archive": [
        *("id", "summary", "summary_embedding", "checksum", "archive_reason", "source"),
        *("size_bytes", "metadata", "archived_at"),
    ],
    "original": ["original", "record"],
    "link": ["source", "target", "weight", "kind"],
}


def _listed(value: Any) -> list[Any]:
    """The records of one part of a document, or one empty record to change."""
    return value if isinstance(value, list) and value else [{}]


def _hostile_document(data: st.DataObject, exported: dict[str, Any]) -> dict[str, Any]:
    """An export with a few fields set to anything (or removed): a key of the document,
    a field of one memory, archive record, original or link."""
    document = json.loads(json.dumps(exported))
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        where = data.draw(st.sampled_from(sorted(FIELDS)), label="where")
        archives = _listed(document.get("archives"))
        records: dict[str, list[Any]] = {
            "memory": _listed(document.get("memories")),
            "archive": [a.get("record") if isinstance(a, dict) else None for a in archives],
            "original": archives,
            "link": _listed(document.get("links")),
        }
        target = document if where == "top" else data.draw(st.sampled_from(records[where]))
        fields = FIELDS[where]
        if not isinstance(target, dict):
            continue
        field_name = data.draw(st.sampled_from(fields), label=f"{where} field")
        if data.draw(st.booleans(), label="remove"):
            target.pop(field_name, None)
        else:
            target[field_name] = data.draw(surface.hostile, label=f"{where}.{field_name}")
    return document


def _mostly(data: st.DataObject, good: st.SearchStrategy[Any], label: str) -> Any:
    """A plausible argument four times in five, so most calls reach the document."""
    hostile = data.draw(st.integers(0, 4), label=f"{label} hostile") == 0
    return data.draw(surface.hostile if hostile else good, label=label)


def _import(world: surface.World, data: st.DataObject, exported: dict[str, Any]) -> None:
    from tiered_memory.transfer import import_document

    document = _hostile_document(data, exported)
    namespace = _mostly(data, st.sampled_from(["imported", "default", None]), "into")
    keep = _mostly(data, st.booleans(), "keep_namespace")
    skip = _mostly(data, st.booleans(), "skip_existing")
    before = state_of(world.mem.aio, world.archive, world.elsewhere)
    try:
        world.mem.run(
            import_document(
                world.mem.aio,
                document,
                namespace=namespace,
                keep_namespace=keep,
                skip_existing=skip,
            )
        )
        event("imported")
        return
    except TieredMemoryError as e:
        error = e
    event(f"refused: {type(error).__name__}")
    after = state_of(world.mem.aio, world.archive, world.elsewhere)
    assert after == before, f"import: {error!r} after writing {before.diff(after)}"


@pytest.fixture
def exported(world: surface.World) -> dict[str, Any]:
    from tiered_memory.transfer import dumps, export_namespace

    document = world.mem.run(export_namespace(world.mem.aio, "default"))
    loaded: dict[str, Any] = json.loads(dumps(document))
    return loaded


IMPORTS = settings(HOSTILE_CALLS, max_examples=100)


@IMPORTS
@given(data=st.data())
def test_an_import_takes_any_document(
    world: surface.World, exported: dict[str, Any], data: st.DataObject
) -> None:
    _import(world, data, exported)


@pytest.mark.soak
@settings(HOSTILE_CALLS, max_examples=2_000)
@given(data=st.data())
def test_an_import_takes_any_document_soak(
    world: surface.World, exported: dict[str, Any], data: st.DataObject
) -> None:
    _import(world, data, exported)
