"""Every bad input named by issue 17 gets a typed error that says what to do, and
writes nothing (no row, no link, no archived original).

The property test in `test_hostile_input.py` generates arguments; these are the cases
found by hand, each pinned down with its message.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    BackendUnavailableError,
    ConfigurationError,
    EmbedderError,
    HashingEmbedder,
    ManualClock,
    Memory,
    NamespaceError,
    Policy,
    TieredMemory,
    TieredMemoryError,
    ValidationError,
)
from tiered_memory.backends.s3.objects import S3ObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.policy import Limits
from tiered_memory.ports import Matrix, Vector
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

from .conftest import START
from .invariants import sqlite_store
from .state import State, state_of

# Checks made before anything reaches a port: the server combinations run with
# --matrix (tests/matrix.py; the hostile namespaces and ids of test_hostile_input.py
# run on the servers by default).
pytestmark = pytest.mark.matrix

T = TypeVar("T")
DIM = 64


class Probe:
    """A memory with one sentinel, and `refused` to run a call that must fail cleanly."""

    def __init__(self, mem: TieredMemory, archive: Path, memories: MemoryFactory) -> None:
        self.mem = mem
        self.archive = archive
        self.elsewhere = memories.elsewhere
        self.sentinel = mem.add("the sentinel: the boiler was serviced in May")

    def state(self) -> State:
        return state_of(self.mem.aio, self.archive, self.elsewhere)

    def refused(
        self,
        call: Callable[[], object],
        error: type[TieredMemoryError] = ValidationError,
        *needles: str,
    ) -> TieredMemoryError:
        before = self.state()
        with pytest.raises(error) as raised:
            call()
        after = self.state()
        assert after == before, f"{raised.value!r} after writing {before.diff(after)}"
        for needle in needles:
            assert needle in str(raised.value), str(raised.value)
        return raised.value


@pytest.fixture
def probe(tmp_path: Path, memories: MemoryFactory) -> Iterator[Probe]:
    mem = memories.open_sync(
        tmp_path / "boundary.db",
        embedder=HashingEmbedder(DIM),
        clock=ManualClock(START),
        archive_dir=tmp_path / "archive",
    )
    try:
        yield Probe(mem, tmp_path / "archive", memories)
    finally:
        mem.close()


# -- what add and add_many take ------------------------------------------------------------


@pytest.mark.parametrize("items", ["abc", b"abc", None, 42, {"content": "a dict, not a list"}])
def test_add_many_wants_a_list(probe: Probe, items: Any) -> None:
    probe.refused(lambda: probe.mem.add_many(items), ValidationError, "list")


@pytest.mark.parametrize("content", [None, b"bytes are not text", 42, 4.2, ["a"], {"a": 1}])
def test_content_must_be_text(probe: Probe, content: Any) -> None:
    mem = probe.mem
    for call in (
        lambda: mem.add(content),
        lambda: mem.add_many([content]),
        lambda: mem.add_many([{"content": content}]),
    ):
        probe.refused(call, ValidationError, "content")


@pytest.mark.parametrize(
    ("field", "value"),
    [("source", None), ("source", b"bytes"), ("id", b"bytes"), ("id", 7), ("pinned", "maybe")],
)
def test_other_fields_of_a_memory_are_typed(probe: Probe, field: str, value: Any) -> None:
    probe.refused(lambda: probe.mem.add("a memory", **{field: value}), ValidationError, field)


def test_ids_and_sources_have_a_length_limit(probe: Probe) -> None:
    limits = probe.mem.policy.limits
    mem = probe.mem
    probe.refused(lambda: mem.add("big id", id="x" * 5_000_000), ValidationError, "limit")
    probe.refused(lambda: mem.add("big source", source="s" * 20_000_000), ValidationError, "limit")
    probe.refused(
        lambda: mem.add("id", id="i" * (limits.max_id_chars + 1)), ValidationError, "max_id_chars"
    )
    probe.refused(
        lambda: mem.add("source", source="s" * (limits.max_source_chars + 1)),
        ValidationError,
        "max_source_chars",
    )
    kept = mem.add(
        "at the limits", id="i" * limits.max_id_chars, source="s" * limits.max_source_chars
    )
    got = mem.get(kept.id)
    assert got is not None
    assert got.source == "s" * limits.max_source_chars


def test_the_limits_are_policy(tmp_path: Path, memories: MemoryFactory) -> None:
    policy = Policy(limits=Limits(max_id_chars=4, max_source_chars=3))
    with memories.open_sync(tmp_path / "p.db", embedder=HashingEmbedder(DIM), policy=policy) as mem:
        with pytest.raises(ValidationError, match="max_id_chars"):
            mem.add("x", id="12345")
        with pytest.raises(ValidationError, match="max_source_chars"):
            mem.add("x", source="abcd")
        assert mem.add("x", id="1234", source="abc").id == "1234"


def test_an_empty_or_blank_namespace_is_refused_everywhere(probe: Probe) -> None:
    mem = probe.mem
    for ns in ("", "   ", "\t"):
        probe.refused(lambda n=ns: mem.add("x", namespace=n), NamespaceError, "namespace")
        probe.refused(lambda n=ns: mem.search("x", namespace=n), NamespaceError)
        probe.refused(lambda n=ns: mem.list(namespace=n), NamespaceError)


# -- replacing (issue 16 item 2) under the same rules -------------------------------------


@pytest.mark.parametrize("replace", ["no", "yes", 1, None])
def test_replace_is_a_boolean(probe: Probe, replace: Any) -> None:
    """'no' is truthy: taken as is, it replaced the memory it was meant to protect."""
    mem, sentinel = probe.mem, probe.sentinel
    probe.refused(lambda: mem.add("new text", id=sentinel.id, replace=replace), ValidationError)
    probe.refused(lambda: mem.add_many(["new text"], replace=replace), ValidationError, "replace")
    kept = mem.get(sentinel.id)
    assert kept is not None
    assert kept.content == sentinel.content


def test_upsert_needs_an_id(probe: Probe) -> None:
    """Without one, add would store the value under a new id: not a replace."""
    probe.refused(lambda: probe.mem.upsert("a value", id=None), ValidationError, "id")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", b"bytes"),
        ("content", None),
        ("id", "i" * 513),
        ("source", "s" * 4_097),
        ("pinned", "maybe"),
        ("metadata", {"n": 2**70}),
        ("embedding", [math.nan] * DIM),
        ("embedding", [0.5] * (DIM + 1)),
    ],
)
def test_upsert_checks_like_add_and_keeps_the_old_value(
    probe: Probe, field: str, value: Any
) -> None:
    mem, sentinel = probe.mem, probe.sentinel
    fields: dict[str, Any] = {"id": sentinel.id, "content": "a replacement", field: value}
    content = fields.pop("content")
    probe.refused(lambda: mem.upsert(content, **fields), ValidationError)
    kept = mem.get(sentinel.id)
    assert kept is not None
    assert kept.content == sentinel.content


# -- search and recall arguments ---------------------------------------------------------


@pytest.mark.parametrize(
    "weights",
    [
        [1, 2],
        "vector",
        {"vector": math.inf},
        {"vector": math.nan},
        {"vector": 1e308},
        {"vector": 1e308, "keyword": 1e308, "graph": 1e308},
        {"vector": -1},
        {"vector": True},
        {"vector": "1"},
        {"vector": 0, "keyword": 0},
        {1: 0.5},
    ],
)
def test_bad_fusion_weights(probe: Probe, weights: Any) -> None:
    error = probe.refused(lambda: probe.mem.search("boiler", weights=weights))
    assert "weight" in str(error)
    probe.refused(lambda: probe.mem.recall("boiler", weights=weights))


@pytest.mark.parametrize("field", ["memory_types", "tiers", "ids"])
def test_an_array_is_not_a_list_of_names(probe: Probe, field: str) -> None:
    """A numpy array of numbers used to reach `if memory_types:` (a ValueError)."""
    values = np.ones(3)
    probe.refused(lambda: probe.mem.search("boiler", **{field: values}), ValidationError)
    probe.refused(lambda: probe.mem.recall("boiler", **{field: values}), ValidationError)


def test_good_fusion_weights_give_finite_scores(probe: Probe) -> None:
    hits = probe.mem.search("boiler", weights={"vector": 1e6, "keyword": 1e6, "graph": 1e6})
    assert hits
    assert all(math.isfinite(h.score) for h in hits)


@pytest.mark.parametrize("size", [2**63, 2**64, 10**20])
def test_huge_counts_are_refused(probe: Probe, size: int) -> None:
    mem = probe.mem
    probe.refused(lambda: mem.list(limit=size), ValidationError, "limit")
    probe.refused(lambda: mem.list(limit=size, tier="archived"), ValidationError, "limit")
    probe.refused(lambda: mem.search("boiler", k=size), ValidationError, "k")
    probe.refused(lambda: mem.recall("boiler", max_items=size), ValidationError, "max_items")


def test_the_largest_count_still_works(probe: Probe) -> None:
    most = probe.mem.policy.limits.max_results
    assert len(probe.mem.list(limit=most)) == 1
    assert len(probe.mem.search("boiler", k=most)) == 1


@pytest.mark.parametrize("after", [[1], 1, b"id", {"id": "x"}])
def test_after_id_must_be_an_id(probe: Probe, after: Any) -> None:
    for tier in (None, "archived"):
        error = probe.refused(lambda t=tier: probe.mem.list(after_id=after, tier=t))
        assert "corrupt" not in str(error)
        assert "after_id" in str(error)


@pytest.mark.parametrize("query", [None, 42, b"boiler", ["boiler"]])
def test_a_query_must_be_text(probe: Probe, query: Any) -> None:
    probe.refused(lambda: probe.mem.search(query), ValidationError, "query")
    probe.refused(lambda: probe.mem.recall(query), ValidationError, "query")


# -- archive and maintain ----------------------------------------------------------------


@pytest.mark.parametrize("reason", [None, 42, b"why", "r" * 100_000])
def test_archive_checks_its_reason_before_writing(probe: Probe, reason: Any) -> None:
    """It used to write the original, then fail on the record: an orphan file."""
    probe.refused(lambda: probe.mem.archive([probe.sentinel.id], reason=reason), ValidationError)
    still = probe.mem.get(probe.sentinel.id)
    assert still is not None
    assert still.tier.value == "hot"


@pytest.mark.parametrize("now", ["2026-01-01", 1767225600, 1.5, object()])
def test_maintain_wants_a_datetime(probe: Probe, now: Any) -> None:
    probe.refused(lambda: probe.mem.maintain(now=now), ValidationError, "datetime")


@pytest.mark.parametrize("flag", ["dry_run"])
def test_maintain_flags_are_booleans(probe: Probe, flag: str) -> None:
    probe.refused(lambda: probe.mem.maintain(**{flag: "no"}), ValidationError, flag)


class NaiveClock:
    def now(self) -> datetime:
        return datetime(2026, 1, 1)  # local time without a zone: the classic mistake


class BrokenClock:
    def now(self) -> datetime:
        raise RuntimeError("the time server is down")


class StringClock:
    def now(self) -> Any:
        return "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("clock", [NaiveClock(), BrokenClock(), StringClock()])
def test_a_clock_that_misbehaves_is_named(
    tmp_path: Path, memories: MemoryFactory, clock: Any
) -> None:
    with memories.open_sync(tmp_path / "c.db", embedder=HashingEmbedder(DIM), clock=clock) as mem:
        for call in (lambda: mem.add("x"), lambda: mem.maintain(), lambda: mem.recall("x")):
            with pytest.raises(ConfigurationError, match=type(clock).__name__):
                call()
        assert mem.namespaces() == []


# -- embedders that misbehave --------------------------------------------------------------


class OddEmbedder:
    """An embedder whose output is whatever `make` returns (or raises)."""

    def __init__(self, make: Callable[[int], Any]) -> None:
        self.make = make

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        result: Matrix = self.make(len(texts))
        return result

    async def aembed_query(self, text: str) -> Vector:
        rows = self.make(1)
        first: Vector = rows[0] if isinstance(rows, np.ndarray) and rows.ndim == 2 else rows
        return first


def _raise(n: int) -> Any:
    raise RuntimeError("the embedding service returned 500")


ODD_OUTPUTS: dict[str, Callable[[int], Any]] = {
    "raises": _raise,
    # lists of floats are LangChain's return type, and read; lists of anything else are not
    "a list of text": lambda n: [["a"] * DIM for _ in range(n)],
    "None": lambda n: None,
    "too few rows": lambda n: np.ones((max(n - 1, 0), DIM), dtype=np.float32),
    "three dimensions": lambda n: np.ones((n, DIM, 2), dtype=np.float32),
    "a string": lambda n: "vector",
    "NaN": lambda n: np.full((n, DIM), np.nan, dtype=np.float32),
    "inf": lambda n: np.full((n, DIM), np.inf, dtype=np.float32),
    "text dtype": lambda n: np.array([["a"] * DIM] * n),
}


@pytest.mark.parametrize("odd", list(ODD_OUTPUTS))
def test_an_embedder_that_misbehaves_is_named(
    tmp_path: Path, memories: MemoryFactory, odd: str
) -> None:
    with memories.open_sync(tmp_path / "e.db", embedder=OddEmbedder(ODD_OUTPUTS[odd])) as mem:
        for call in (
            lambda: mem.add("the boiler was serviced"),
            lambda: mem.add_many(["one", "two"]),
            lambda: mem.search("boiler"),
            lambda: mem.recall("boiler"),
        ):
            with pytest.raises(EmbedderError, match="OddEmbedder"):
                call()
        assert mem.namespaces() == []


class HangingEmbedder:
    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def aembed_query(self, text: str) -> Vector:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


def test_an_embedder_that_hangs_times_out(tmp_path: Path, memories: MemoryFactory) -> None:
    policy = Policy(limits=Limits(embed_timeout_seconds=0.2))
    with memories.open_sync(tmp_path / "h.db", embedder=HangingEmbedder(), policy=policy) as mem:
        for call in (lambda: mem.add("x"), lambda: mem.search("x")):
            with pytest.raises(EmbedderError, match=r"HangingEmbedder.*0\.2"):
                call()
        assert mem.namespaces() == []


def test_a_good_embedder_is_still_itself(tmp_path: Path, memories: MemoryFactory) -> None:
    """The guard forwards what callers read from the embedder they passed."""
    inner = HashingEmbedder(DIM)
    with memories.open_sync(tmp_path / "g.db", embedder=inner) as mem:
        assert mem.aio.embedder.dimension == DIM  # type: ignore[attr-defined]
        assert mem.add("the boiler").content == "the boiler"


# -- the disk --------------------------------------------------------------------------------


def test_a_full_disk_is_reported_as_full(probe: Probe) -> None:
    with sqlite_store(probe.mem.aio).database.read() as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
    text = "a long memory to fill the last page " * 200
    error = probe.refused(
        lambda: probe.mem.add_many([f"{i} {text}" for i in range(50)]), BackendUnavailableError
    )
    assert "full" in str(error)
    assert "corrupt" not in str(error)
    assert "backup" not in str(error)


def test_a_type_sqlite_cannot_bind_is_not_called_corruption(probe: Probe) -> None:
    import sqlite3

    from tiered_memory.backends.sqlite.database import translate_error

    error = translate_error(sqlite3.ProgrammingError("Error binding parameter 2"), "x.db")
    assert isinstance(error, TieredMemoryError)
    assert "corrupt" not in str(error)


def test_an_explicit_typed_error_is_the_only_thing_raised(probe: Probe) -> None:
    """A summary of the cases above as one loop (the issue's list of 13 escapes)."""
    mem = probe.mem
    calls: list[Callable[[], object]] = [
        lambda: mem.add_many("abc"),
        lambda: mem.add_many(None),  # type: ignore[arg-type]
        lambda: mem.search("x", weights=[1, 2]),  # type: ignore[arg-type]
        lambda: mem.list(limit=2**63),
        lambda: mem.recall("x", max_items=2**64),
        lambda: mem.list(after_id=[1]),  # type: ignore[arg-type]
        lambda: mem.archive([probe.sentinel.id], reason=None),  # type: ignore[arg-type]
        lambda: mem.maintain(now="2026-01-01"),  # type: ignore[arg-type]
    ]
    for call in calls:
        probe.refused(call, TieredMemoryError)


def test_valid_calls_still_work(probe: Probe) -> None:
    mem = probe.mem
    added = mem.add_many(["one fact about tea", {"content": "another about coffee"}])
    assert [type(m) for m in added] == [Memory, Memory]
    assert mem.maintain(now=datetime(2026, 1, 2, tzinfo=timezone.utc)).errors == []
    assert mem.archive([probe.sentinel.id], reason="cleanup") == 1


# -- what an adapter needs, checked when a namespace or id is first used ---------------------


async def _memory_over_s3(path: Path) -> AsyncTieredMemory:
    """An embedded store with S3 for originals (never reached: keys are computed locally)."""
    store = await SQLiteMemoryStore.open(path)
    return AsyncTieredMemory(
        store=store,
        graph=SQLiteAssociationGraph(store.database),
        objects=S3ObjectStore("bucket", endpoint_url="http://127.0.0.1:9", region_name="us-east-1"),
        summarizer=ExtractiveSummarizer(),
        embedder=HashingEmbedder(DIM),
        clock=ManualClock(START),
    )


@pytest.mark.parametrize(
    ("namespace", "memory_id"),
    [("\U0001f600" * 256, None), ("n", "\U0001f600" * 255), ("\u00e9" * 256, "\u00e9" * 300)],
    ids=["256-emoji-namespace", "1000-byte-id", "both"],
)
def test_an_s3_key_too_long_is_refused_when_first_written(
    tmp_path: Path, namespace: str, memory_id: str | None
) -> None:
    """It used to be accepted, then never archived (pausing archival on every sweep)."""
    mem = TieredMemory.from_async(_memory_over_s3(tmp_path / "s3.db"))
    try:
        before = state_of(mem.aio, tmp_path / "none")
        with pytest.raises(ValidationError, match="S3 allows 1024"):
            mem.add("a memory that could never be archived", namespace=namespace, id=memory_id)
        assert state_of(mem.aio, tmp_path / "none") == before
        assert mem.add("a short key is fine", namespace="n", id="short").id == "short"
    finally:
        mem.close()


def test_an_import_checks_s3_keys_before_writing(tmp_path: Path) -> None:
    """An import passes the checks of add, the object store's key length included."""
    from tiered_memory.transfer import export_namespace, import_document

    with TieredMemory.embedded(
        tmp_path / "src.db", embedder=HashingEmbedder(DIM), clock=ManualClock(START)
    ) as source:
        source.add_many(["one fact", "another fact"], namespace="n")
        document = source.run(export_namespace(source.aio, "n"))
    mem = TieredMemory.from_async(_memory_over_s3(tmp_path / "s3.db"))
    try:
        mem.run(mem.aio.dimension())  # the embedder's, recorded as the factories do at open
        before = state_of(mem.aio, tmp_path / "none")
        with pytest.raises(ValidationError, match="S3 allows 1024"):
            mem.run(import_document(mem.aio, document, namespace="\U0001f600" * 256))
        assert state_of(mem.aio, tmp_path / "none") == before
        assert mem.run(import_document(mem.aio, document, namespace="n")).memories == 2
    finally:
        mem.close()


@pytest.mark.parametrize(
    ("part", "value"),
    [
        ("archives", np.ones(4, dtype=np.float32)),  # its entries were indexed by "record"
        ("archives", [1.5]),
        ("memories", "not an array"),
        ("links", {"source": "a"}),
    ],
)
def test_an_import_refuses_parts_that_are_not_arrays_of_objects(
    tmp_path: Path, part: str, value: object
) -> None:
    """Found by the hostile-document property: an array of numbers as `archives` raised
    numpy's IndexError, not the typed error."""
    from tiered_memory.transfer import export_namespace, import_document

    with TieredMemory.embedded(
        tmp_path / "src.db", embedder=HashingEmbedder(DIM), clock=ManualClock(START)
    ) as mem:
        mem.add_many(["one fact", "another fact"], namespace="n")
        document = mem.run(export_namespace(mem.aio, "n"))
        document[part] = value
        with pytest.raises(ValidationError, match="malformed export document"):
            mem.run(import_document(mem.aio, document, namespace="m"))
        assert mem.stats(namespace="m").total == 0


# -- one boundary ------------------------------------------------------------------------

PACKAGES = [
    Path(__file__).parents[2] / p
    for p in ("core/tiered_memory", "langchain_tiered_memory", "llamaindex_tiered_memory")
]


def test_one_definition_of_a_valid_namespace() -> None:
    """Only the boundary says what a namespace is; adapters call it (they used to keep
    five copies, one of which accepted '   '). It lives with the path namespaces it must
    tell apart from typed text, and `validation` hands out the same function."""
    from tiered_memory import namespaces, validation

    defining = sorted(
        str(path.relative_to(path.parents[1]))
        for package in PACKAGES
        for path in package.rglob("*.py")
        if "raise NamespaceError" in path.read_text(encoding="utf-8")
    )
    assert defining == ["tiered_memory/namespaces.py"], defining
    assert validation.check_namespace is namespaces.check_namespace


def test_a_search_checks_its_query_vector_once(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller's query vector is checked once, by the engine; one the embedder made is
    checked once, by the embedder's guard. The retriever and the stores check neither."""
    from tiered_memory import validation
    from tiered_memory.backends.sqlite import archive_rows, archives, memories
    from tiered_memory.embeddings import CheckedEmbedder

    calls: list[str] = []
    real = validation.check_vector
    guarded = CheckedEmbedder._array

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("what", "embedding"))
        return real(*args, **kwargs)

    def guard(self: CheckedEmbedder, value: Any, method: str, *, ndim: int) -> Any:
        calls.append(f"guard:{method}")
        return guarded(self, value, method, ndim=ndim)

    for module in (validation, memories, archives, archive_rows):
        monkeypatch.setattr(module, "check_vector", counted, raising=False)
    monkeypatch.setattr(CheckedEmbedder, "_array", guard)
    probe.mem.archive([probe.sentinel.id])
    probe.mem.add_many([f"fact {i} about the boiler" for i in range(10)])
    calls.clear()
    probe.mem.search("boiler", deep=True, include_archived=True)
    assert calls == ["guard:aembed_query"]
    calls.clear()
    probe.mem.search("boiler", deep=True, query_embedding=np.ones(DIM, dtype=np.float32))
    assert calls == ["query_embedding"]
    calls.clear()
    probe.mem.recall("boiler", deep=True, query_embedding=np.ones(DIM, dtype=np.float32))
    assert calls == ["query_embedding"]
