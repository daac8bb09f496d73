"""The MemoryStore contract, written once and run against every backend.

Subclass `MemoryStoreContract` in a `Test...` class and provide an async `store`
fixture that yields a ready store:

    class TestMyStore(MemoryStoreContract):
        @pytest.fixture
        async def store(self) -> AsyncIterator[MemoryStore]:
            store = await MyStore.open(...)
            yield store
            await store.close()

Every test works in fresh uuid namespaces (cleared afterwards), so the suite also runs
against a shared server; only `test_clear_everything` calls `clear(None)`, so give the
fixture a store of its own there (its own collection prefix, database or file).
Override `dimension` if the backend's vectors are fixed to a size, and set
`transactional = False` when `transaction()` is documented as a no-op.

Conventions the suite pins down (the port leaves them open):
- Ids are unique per namespace across live memories and archive records.
- `set_tier` returns how many memories changed tier; a rerun returns 0.
- `patch_many` returns how many live memories the patch was applied to.
- `last_accessed_at` never moves back when an older use is recorded.
- A ScanQuery `*_before` bound never matches an unset timestamp; only
  `last_used_before` falls back to created_at.
- `list_ids(tiers=None)` lists live memories only.
- `archive_many` skips records whose memory is not live; `unarchive_many` skips
  memories that have no archive record; both return how many they moved.
- `update_archive` of a missing record is a NotFoundError.
- The archival journal: a claim holds until its claimant releases it, it expires
  (`claimed_until <= now`), or a caller names it stale; only live memories are
  claimed; a released row with no failure and no original noted is deleted, and a row
  goes with its memory (archived or deleted).
- The queue of originals to delete: one entry per (id, checksum), `hand_on` kept if
  either queueing asked; per namespace; written in a transaction, rolled back with it
  where the backend has them; `clear` empties it (of the namespace).
- Metadata filters match top-level keys literally. eq/ne/in/nin compare JSON values by
  type (1 == 1.0, but "1" != 1 and true != 1), and ne/nin also match memories that
  lack the key; gt..lte compare numbers with numbers, strings with strings (by UTF-8
  bytes); contains is list membership or substring; exists (value True or None) /
  not exists (False).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from typing import Any, ClassVar

import numpy as np
import pytest

from tiered_memory.errors import (
    ConfigurationError,
    DimensionMismatchError,
    NotFoundError,
    ValidationError,
)
from tiered_memory.models import (
    LIVE_TIERS,
    ArchiveRecord,
    Memory,
    MemoryType,
    Tier,
)
from tiered_memory.ports import (
    NO_TIME,
    AccessRecord,
    ArchivalFailure,
    MemoryFacts,
    MemoryPatch,
    MemoryStore,
    MetadataFilter,
    PendingOriginal,
    ScanQuery,
    SearchFilter,
    to_micros,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)
ALL_LIVE = LIVE_TIERS
EVERYTHING = SearchFilter(include_forgotten=True, include_superseded=True)

HOSTILE_QUERIES = [
    '"',
    '""',
    "*",
    ")",
    "(",
    "'",
    "AND OR NOT",
    "NEAR(",
    "NEAR(a b, 3)",
    "content:secret",
    "^start",
    "a -b +c",
    "'; DROP TABLE memories; --",
    '" OR 1=1 --',
    "{}[]\\/%_",
    "\u00e9t\u00e9 \u65e5\u672c \U0001f600",
    "x" * 5000,
]

# (hostile namespace suffix, a sibling a sloppy backend could confuse it with)
HOSTILE_NAMESPACES = [
    ("a%", "abc"),
    ("a_", "ab"),
    ("a'b", "a"),
    ('a"b', "a"),
    ("x'; DROP TABLE memories; --", "x"),
    ("}) DETACH DELETE n //", "}"),
    ("../../etc/passwd", "etc"),
    ("\u540d\u524d \u7a7a\u9593", "\u540d\u524d"),
    ("with space", "with"),
]

HOSTILE_IDS = [
    "it's",
    'say "hi"',
    "a%b",
    "a_b",
    "../../x",
    "}) DETACH DELETE n //",
    "'; DROP TABLE memories; --",
    "\u65e5\u672c\u8a9e-\U0001f600",
    "x" * 300,
    "123",
]

# Metadata of four memories, and (filters, ids they match) for every FilterOp.
METADATA: dict[str, dict[str, Any]] = {
    "m1": {
        "color": "red",
        "size": 1,
        "tags": ["a", "b"],
        "note": "hello world",
        "flag": True,
        "code": "1",
    },
    "m2": {"color": "blue", "size": 5, "tags": ["b"], "note": "goodbye", "flag": False, "code": 1},
    "m3": {
        "color": "green",
        "size": 10,
        "tags": [],
        "note": "hello there",
        "flag": True,
        "code": True,
    },
    "m4": {"color": "red", "size": 2.5},
}
METADATA_CASES: list[tuple[tuple[MetadataFilter, ...], set[str]]] = [
    ((MetadataFilter("color", "eq", "red"),), {"m1", "m4"}),
    ((MetadataFilter("size", "eq", 1.0),), {"m1"}),
    ((MetadataFilter("flag", "eq", True),), {"m1", "m3"}),
    ((MetadataFilter("color", "ne", "red"),), {"m2", "m3"}),
    ((MetadataFilter("size", "gt", 2.5),), {"m2", "m3"}),
    ((MetadataFilter("size", "gte", 2.5),), {"m2", "m3", "m4"}),
    ((MetadataFilter("size", "lt", 2.5),), {"m1"}),
    ((MetadataFilter("size", "lte", 2.5),), {"m1", "m4"}),
    ((MetadataFilter("color", "in", ["red", "green"]),), {"m1", "m3", "m4"}),
    ((MetadataFilter("color", "nin", ["red", "green"]),), {"m2"}),
    ((MetadataFilter("tags", "contains", "b"),), {"m1", "m2"}),
    ((MetadataFilter("note", "contains", "hello"),), {"m1", "m3"}),
    ((MetadataFilter("tags", "exists"),), {"m1", "m2", "m3"}),
    ((MetadataFilter("tags", "exists", False),), {"m4"}),
    ((MetadataFilter("color", "eq", "red"), MetadataFilter("size", "gt", 1)), {"m4"}),
    # equality is typed: "1", 1 and true are three different values
    ((MetadataFilter("code", "eq", 1),), {"m2"}),
    ((MetadataFilter("code", "eq", "1"),), {"m1"}),
    ((MetadataFilter("code", "eq", True),), {"m3"}),
    ((MetadataFilter("code", "in", [1, "x"]),), {"m2"}),
    # ne and nin also match memories that lack the key
    ((MetadataFilter("code", "ne", 1),), {"m1", "m3", "m4"}),
    ((MetadataFilter("code", "nin", ["1", True]),), {"m2", "m4"}),
]

# Text holding U+0000, next to text that equals what comes before the NUL.
NUL_METADATA: dict[str, dict[str, Any]] = {
    "nul_b": {"k": "a\x00b", "tags": ["x\x00y"]},
    "nul_c": {"k": "a\x00c", "a\x00key": "v"},
    "plain": {"k": "a", "a": "v", "tags": ["x"]},
}
NUL_METADATA_CASES: list[tuple[tuple[MetadataFilter, ...], set[str]]] = [
    ((MetadataFilter("k", "eq", "a\x00b"),), {"nul_b"}),
    ((MetadataFilter("k", "eq", "a"),), {"plain"}),
    ((MetadataFilter("k", "ne", "a"),), {"nul_b", "nul_c"}),
    ((MetadataFilter("k", "ne", "a\x00b"),), {"nul_c", "plain"}),
    ((MetadataFilter("k", "in", ["a\x00c", "a"]),), {"nul_c", "plain"}),
    ((MetadataFilter("k", "nin", ["a\x00c"]),), {"nul_b", "plain"}),
    ((MetadataFilter("k", "gt", "a"),), {"nul_b", "nul_c"}),
    ((MetadataFilter("k", "lt", "a\x00c"),), {"nul_b", "plain"}),
    ((MetadataFilter("k", "contains", "\x00c"),), {"nul_c"}),
    ((MetadataFilter("tags", "contains", "x\x00y"),), {"nul_b"}),
    ((MetadataFilter("tags", "contains", "x"),), {"plain"}),
    ((MetadataFilter("a\x00key", "eq", "v"),), {"nul_c"}),
    ((MetadataFilter("a", "eq", "v"),), {"plain"}),
    ((MetadataFilter("a", "exists"),), {"plain"}),
    ((MetadataFilter("a\x00key", "exists", False),), {"nul_b", "plain"}),
]


def axis_vector(dimension: int, *axes: int, weights: Sequence[float] | None = None) -> list[float]:
    """A vector along the given axes; with unit axes, cosines are easy to predict."""
    v = [0.0] * dimension
    for i, axis in enumerate(axes):
        v[axis] = 1.0 if weights is None else float(weights[i])
    return v


def unique_namespace(label: str = "ns") -> str:
    return f"contract-{label}-{uuid.uuid4().hex[:12]}"


class MemoryStoreContract:
    """Behaviour every MemoryStore must have. Subclasses provide the `store` fixture."""

    dimension: ClassVar[int] = 8
    transactional: ClassVar[bool] = True

    # -- fixtures and builders ---------------------------------------------------------

    @pytest.fixture
    async def namespace(self, store: MemoryStore) -> AsyncIterator[str]:
        ns = unique_namespace()
        yield ns
        await store.clear(ns)

    @pytest.fixture
    async def other_namespace(self, store: MemoryStore) -> AsyncIterator[str]:
        ns = unique_namespace("other")
        yield ns
        await store.clear(ns)

    def vec(self, *axes: int, weights: Sequence[float] | None = None) -> list[float]:
        return axis_vector(self.dimension, *axes, weights=weights)

    def memory(
        self,
        memory_id: str,
        content: str | None = None,
        *,
        namespace: str = "default",
        axis: int = 0,
        embedding: list[float] | None = None,
        **fields: Any,
    ) -> Memory:
        fields.setdefault("created_at", T0)
        fields.setdefault("updated_at", fields["created_at"])
        return Memory(
            id=memory_id,
            namespace=namespace,
            content=content if content is not None else f"memory {memory_id}",
            embedding=embedding if embedding is not None else self.vec(axis),
            **fields,
        )

    def record(
        self, memory_id: str, namespace: str, *, axis: int = 0, summary: str | None = None
    ) -> ArchiveRecord:
        return ArchiveRecord(
            id=memory_id,
            namespace=namespace,
            summary=summary or f"summary of {memory_id}",
            summary_embedding=self.vec(axis),
            memory_type=MemoryType.FACTUAL,
            importance=0.2,
            source="test",
            metadata={"k": "v"},
            storage_ref=f"file:///archive/{memory_id}.json",
            size_bytes=123,
            checksum="0" * 64,
            storage_verified=True,
            created_at=T0,
            archived_at=T0 + 200 * DAY,
            archive_reason="cold for 180 days",
            use_count=2,
        )

    async def put(self, store: MemoryStore, namespace: str, *memories: Memory) -> None:
        await store.put_many(
            namespace, [m.model_copy(update={"namespace": namespace}) for m in memories]
        )

    async def one(self, store: MemoryStore, namespace: str, memory_id: str) -> Memory:
        found = await store.get_many(namespace, [memory_id])
        assert memory_id in found, f"{memory_id!r} missing from {namespace!r}"
        return found[memory_id]

    # -- CRUD ------------------------------------------------------------------------------

    async def test_round_trip_keeps_every_field(self, store: MemoryStore, namespace: str) -> None:
        original = Memory(
            id="m-1",
            namespace=namespace,
            content="The user's daughter is called Ava",
            memory_type=MemoryType.FACTUAL,
            tier=Tier.WARM,
            importance=0.75,
            pinned=True,
            core=True,
            do_not_inject=True,
            superseded_by="m-9",
            consolidated_from=["m-2", "m-3"],
            source="chat",
            metadata={"topic": "family", "n": 3, "tags": ["a", "b"], "nested": {"k": [1, 2]}},
            embedding=self.vec(0, 1, weights=[0.5, -0.25]),
            created_at=T0,
            updated_at=T0 + timedelta(hours=1),
            last_accessed_at=T0 + timedelta(hours=2),
            use_count=3,
            use_days=[date(2026, 1, 1), date(2026, 1, 2)],
            uses_since_cold=2,
            cold_since=T0 + timedelta(hours=3),
            tier_changed_at=T0 + timedelta(hours=1),
        )
        await store.put_many(namespace, [original])

        plain = await self.one(store, namespace, "m-1")
        assert plain.embedding is None
        assert plain.model_dump(exclude={"embedding"}) == original.model_dump(exclude={"embedding"})
        full = (await store.get_many(namespace, ["m-1"], with_embeddings=True))["m-1"]
        assert full.embedding is not None
        assert np.allclose(full.embedding, original.embedding or [], atol=1e-6)

    async def test_get_many_returns_only_known_ids(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"), self.memory("b"))
        found = await store.get_many(namespace, ["a", "nope", "b", "also-nope"])
        assert set(found) == {"a", "b"}
        assert found["a"].content == "memory a"
        assert await store.get_many(namespace, []) == {}
        assert await store.get_many(namespace, ["nope"]) == {}

    async def test_put_many_writes_a_large_batch(self, store: MemoryStore, namespace: str) -> None:
        batch = [self.memory(f"b{i:03d}", axis=i % self.dimension) for i in range(200)]
        await self.put(store, namespace, *batch)
        found = await store.get_many(namespace, [m.id for m in batch])
        assert len(found) == 200
        ids = await store.list_ids(namespace, limit=1000)
        assert ids == sorted(m.id for m in batch)

    async def test_existing_id_is_a_validation_error(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", "first"))
        with pytest.raises(ValidationError):
            await self.put(store, namespace, self.memory("b", "new"), self.memory("a", "second"))
        assert (await self.one(store, namespace, "a")).content == "first"
        assert await store.get_many(namespace, ["b"]) == {}

    async def test_repeated_id_in_one_batch_is_a_validation_error(
        self, store: MemoryStore, namespace: str
    ) -> None:
        with pytest.raises(ValidationError):
            await self.put(store, namespace, self.memory("a", "one"), self.memory("a", "two"))
        assert await store.get_many(namespace, ["a"]) == {}

    async def test_memory_without_embedding_is_a_validation_error(
        self, store: MemoryStore, namespace: str
    ) -> None:
        bare = self.memory("a").model_copy(update={"embedding": None})
        with pytest.raises(ValidationError):
            await store.put_many(namespace, [bare])
        assert await store.get_many(namespace, ["a"]) == {}

    async def test_dimension_is_fixed_by_the_first_write(
        self, store: MemoryStore, namespace: str
    ) -> None:
        assert await store.dimension() in (None, self.dimension)
        await self.put(store, namespace, self.memory("a"))
        assert await store.dimension() == self.dimension

    async def test_other_dimensions_are_rejected_before_writing(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"))
        wrong = [1.0] * (self.dimension + 1)
        with pytest.raises(DimensionMismatchError):
            await self.put(store, namespace, self.memory("b"), self.memory("c", embedding=wrong))
        assert await store.get_many(namespace, ["b", "c"]) == {}
        with pytest.raises(DimensionMismatchError):
            await store.vector_search(
                namespace, np.ones(self.dimension + 1, dtype=np.float32), tiers=ALL_LIVE, k=3
            )
        assert await store.dimension() == self.dimension

    async def test_ensure_dimension_records_it_and_refuses_another_once_written(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"))
        await store.ensure_dimension(self.dimension)  # the same: nothing to do
        with pytest.raises(ConfigurationError, match=f"{self.dimension}-d"):
            await store.ensure_dimension(self.dimension + 1)
        assert await store.dimension() == self.dimension

    # -- replacing -------------------------------------------------------------------------

    async def test_replace_many_replaces_live_memories_and_inserts_new_ones(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", "old a", axis=0, tier=Tier.COLD))
        new_a = self.memory("a", "new a", axis=1, namespace=namespace, metadata={"v": 2})
        new_b = self.memory("b", "new b", axis=2, namespace=namespace)
        assert await store.replace_many(namespace, [new_a, new_b]) == []
        found = await store.get_many(namespace, ["a", "b"])
        assert {i: (m.content, m.tier) for i, m in found.items()} == {
            "a": ("new a", Tier.HOT),
            "b": ("new b", Tier.HOT),
        }
        assert found["a"].metadata == {"v": 2}
        # searches see the new vector and text only, and one copy of each id
        hits = await store.vector_search(namespace, np.array(self.vec(1)), tiers=ALL_LIVE, k=5)
        assert [h.memory.id for h in hits][:1] == ["a"]
        assert sorted(h.memory.id for h in hits) == ["a", "b"]
        assert [h.memory.id for h in await self.lexical(store, namespace, "old")] == []
        assert await store.list_ids(namespace, tiers=frozenset(Tier)) == ["a", "b"]

    async def test_replace_many_replaces_archive_records(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"))
        assert await store.archive_many(namespace, [self.record("a", namespace)]) == 1
        replaced = self.memory("a", "back again", namespace=namespace)
        [record] = await store.replace_many(namespace, [replaced])
        assert (record.id, record.summary) == ("a", "summary of a")
        assert await store.get_archives(namespace, ["a"]) == {}
        assert (await self.one(store, namespace, "a")).content == "back again"
        assert (await store.stats(namespace)).total == 1

    async def test_a_refused_replace_keeps_what_was_stored(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", "old a"), self.memory("b", "old b"))
        wrong = [1.0] * (self.dimension + 1)
        with pytest.raises(DimensionMismatchError):
            await store.replace_many(
                namespace,
                [
                    self.memory("a", "new a", namespace=namespace),
                    self.memory("b", "new b", namespace=namespace, embedding=wrong),
                ],
            )
        bare = self.memory("a", "new a", namespace=namespace).model_copy(update={"embedding": None})
        with pytest.raises(ValidationError):
            await store.replace_many(namespace, [bare])
        found = await store.get_many(namespace, ["a", "b"])
        assert {i: m.content for i, m in found.items()} == {"a": "old a", "b": "old b"}

    async def lexical(self, store: MemoryStore, namespace: str, text: str) -> list[Any]:
        return await store.lexical_search(namespace, text, tiers=ALL_LIVE, k=5)

    async def test_patch_many_applies_each_field(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, self.memory("a"), self.memory("b"), self.memory("c"))
        later = T0 + 5 * DAY
        changed = await store.patch_many(
            namespace,
            ["a", "b", "unknown"],
            MemoryPatch(
                pinned=True,
                core=True,
                do_not_inject=True,
                importance=0.9,
                superseded_by="c",
                metadata={"new": "dict"},
                updated_at=later,
            ),
        )
        assert changed == 2
        for memory_id in ("a", "b"):
            m = await self.one(store, namespace, memory_id)
            assert (m.pinned, m.core, m.do_not_inject) == (True, True, True)
            assert m.importance == pytest.approx(0.9)
            assert m.superseded_by == "c"
            assert m.metadata == {"new": "dict"}
            assert m.updated_at == later
            assert m.content == f"memory {memory_id}"
            assert m.tier is Tier.HOT
        untouched = await self.one(store, namespace, "c")
        assert (untouched.pinned, untouched.superseded_by, untouched.metadata) == (False, None, {})

    async def test_patch_many_unsets_flags_and_clears_superseded(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("a", pinned=True, do_not_inject=True, superseded_by="z", metadata={"x": 1}),
        )
        await store.patch_many(
            namespace, ["a"], MemoryPatch(pinned=False, do_not_inject=False, clear_superseded=True)
        )
        m = await self.one(store, namespace, "a")
        assert (m.pinned, m.do_not_inject, m.superseded_by) == (False, False, None)
        assert m.metadata == {"x": 1}

    async def test_delete_many_removes_only_named_memories(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("a", "alpha words"),
            self.memory("b", "beta words"),
            self.memory("c", "gamma words"),
        )
        assert await store.delete_many(namespace, ["a", "b", "unknown"]) == 2
        assert set(await store.get_many(namespace, ["a", "b", "c"])) == {"c"}
        hits = await store.vector_search(
            namespace, np.asarray(self.vec(0), dtype=np.float32), tiers=ALL_LIVE, k=10
        )
        assert [h.memory.id for h in hits] == ["c"]
        lexical = await store.lexical_search(namespace, "words", tiers=ALL_LIVE, k=10)
        assert [h.memory.id for h in lexical] == ["c"]
        assert await store.delete_many(namespace, ["a"]) == 0

    # -- vector search -------------------------------------------------------------------

    def q(self, *axes: int, weights: Sequence[float] | None = None) -> np.ndarray[Any, Any]:
        return np.asarray(self.vec(*axes, weights=weights), dtype=np.float32)

    async def test_vector_search_ranks_by_cosine_best_first(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("same", embedding=self.vec(0, weights=[3.0])),
            self.memory("half", embedding=self.vec(0, 1)),
            self.memory("orthogonal", axis=1),
            self.memory("opposite", embedding=self.vec(0, weights=[-2.0])),
        )
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=4)
        assert [h.memory.id for h in hits] == ["same", "half", "orthogonal", "opposite"]
        assert [h.score for h in hits] == pytest.approx([1.0, 0.5**0.5, 0.0, -1.0], abs=1e-4)
        assert hits[0].memory.content == "memory same"
        assert hits[0].memory.namespace == namespace

    async def test_vector_search_returns_at_most_k(
        self, store: MemoryStore, namespace: str
    ) -> None:
        memories = [
            self.memory(f"m{i}", embedding=self.vec(0, 1, weights=[1.0, i / 10])) for i in range(10)
        ]
        await self.put(store, namespace, *memories)
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=3)
        assert [h.memory.id for h in hits] == ["m0", "m1", "m2"]

    async def test_vector_search_only_looks_in_requested_tiers(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("hot", tier=Tier.HOT),
            self.memory("warm", tier=Tier.WARM),
            self.memory("cold", tier=Tier.COLD),
        )

        async def ids(tiers: frozenset[Tier]) -> set[str]:
            hits = await store.vector_search(namespace, self.q(0), tiers=tiers, k=10)
            return {h.memory.id for h in hits}

        assert await ids(frozenset({Tier.HOT})) == {"hot"}
        assert await ids(frozenset({Tier.WARM, Tier.COLD})) == {"warm", "cold"}
        assert await ids(frozenset({Tier.COLD})) == {"cold"}
        assert await ids(ALL_LIVE) == {"hot", "warm", "cold"}
        assert await ids(frozenset()) == set()

    async def test_vector_search_in_an_empty_namespace_finds_nothing(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        await self.put(store, other_namespace, self.memory("a"))
        assert await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5) == []

    async def test_vector_search_hides_forgotten_and_superseded_by_default(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("plain"),
            self.memory("forgotten", do_not_inject=True),
            self.memory("superseded", superseded_by="plain"),
        )

        async def ids(filters: SearchFilter) -> set[str]:
            hits = await store.vector_search(
                namespace, self.q(0), tiers=ALL_LIVE, k=10, filters=filters
            )
            return {h.memory.id for h in hits}

        assert await ids(SearchFilter()) == {"plain"}
        assert await ids(SearchFilter(include_forgotten=True)) == {"plain", "forgotten"}
        assert await ids(SearchFilter(include_superseded=True)) == {"plain", "superseded"}
        assert await ids(EVERYTHING) == {"plain", "forgotten", "superseded"}

    async def test_vector_search_filters_pinned_types_and_ids(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("p", pinned=True, memory_type=MemoryType.FACTUAL),
            self.memory("f", memory_type=MemoryType.FACTUAL),
            self.memory("e", memory_type=MemoryType.EPISODIC),
            self.memory("r", memory_type=MemoryType.PROCEDURAL),
        )

        async def ids(filters: SearchFilter) -> set[str]:
            hits = await store.vector_search(
                namespace, self.q(0), tiers=ALL_LIVE, k=10, filters=filters
            )
            return {h.memory.id for h in hits}

        assert await ids(SearchFilter(pinned=True)) == {"p"}
        assert await ids(SearchFilter(pinned=False)) == {"f", "e", "r"}
        factual = frozenset({MemoryType.FACTUAL})
        assert await ids(SearchFilter(memory_types=factual)) == {"p", "f"}
        two_types = frozenset({MemoryType.EPISODIC, MemoryType.PROCEDURAL})
        assert await ids(SearchFilter(memory_types=two_types)) == {"e", "r"}
        assert await ids(SearchFilter(ids=frozenset({"f", "r", "unknown"}))) == {"f", "r"}
        assert await ids(SearchFilter(ids=frozenset())) == set()
        both = SearchFilter(pinned=False, memory_types=factual)
        assert await ids(both) == {"f"}

    @pytest.mark.parametrize(("conditions", "expected"), METADATA_CASES)
    async def test_metadata_filters_in_both_searches(
        self,
        store: MemoryStore,
        namespace: str,
        conditions: tuple[MetadataFilter, ...],
        expected: set[str],
    ) -> None:
        await self.assert_both_searches_filter(store, namespace, METADATA, conditions, expected)

    async def assert_both_searches_filter(
        self,
        store: MemoryStore,
        namespace: str,
        metadata_by_id: dict[str, dict[str, Any]],
        conditions: tuple[MetadataFilter, ...],
        expected: set[str],
    ) -> None:
        """Vector and lexical search honour the same metadata filter, in the store."""
        await self.put(
            store,
            namespace,
            *(
                self.memory(i, f"shared text {i}", metadata=meta)
                for i, meta in metadata_by_id.items()
            ),
        )
        filters = SearchFilter(metadata=conditions)
        vector = await store.vector_search(
            namespace, self.q(0), tiers=ALL_LIVE, k=10, filters=filters
        )
        assert {h.memory.id for h in vector} == expected
        lexical = await store.lexical_search(
            namespace, "shared", tiers=ALL_LIVE, k=10, filters=filters
        )
        assert {h.memory.id for h in lexical} == expected

    @pytest.mark.parametrize(("conditions", "expected"), NUL_METADATA_CASES)
    async def test_metadata_filters_on_text_holding_nul(
        self,
        store: MemoryStore,
        namespace: str,
        conditions: tuple[MetadataFilter, ...],
        expected: set[str],
    ) -> None:
        """U+0000 is an ordinary character: "a\x00b" equals only itself, never "a"
        (SQLite's JSON functions cut text at a NUL; the store must not)."""
        await self.assert_both_searches_filter(store, namespace, NUL_METADATA, conditions, expected)
        assert (await self.one(store, namespace, "nul_b")).metadata == NUL_METADATA["nul_b"]

    @pytest.mark.parametrize(
        "condition",
        [
            MetadataFilter("n", "eq", 2**63),
            MetadataFilter("n", "ne", -(2**63) - 1),
            MetadataFilter("n", "gt", 2**64),
            MetadataFilter("n", "in", [1, 2**70]),
            MetadataFilter("n", "contains", 2**63),
        ],
    )
    async def test_metadata_filter_integers_beyond_64_bits_are_refused(
        self, store: MemoryStore, namespace: str, condition: MetadataFilter
    ) -> None:
        await self.put(store, namespace, self.memory("a", metadata={"n": 2**63 - 1}))
        filters = SearchFilter(metadata=(condition,))
        with pytest.raises(ValidationError, match="64-bit"):
            await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5, filters=filters)
        with pytest.raises(ValidationError, match="64-bit"):
            await store.lexical_search(namespace, "memory", tiers=ALL_LIVE, k=5, filters=filters)
        limits = SearchFilter(metadata=(MetadataFilter("n", "eq", 2**63 - 1),))
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5, filters=limits)
        assert [h.memory.id for h in hits] == ["a"]

    async def test_filters_apply_before_k(self, store: MemoryStore, namespace: str) -> None:
        """The few matching memories rank far below many others: a store that cut to k
        first and filtered afterwards would return too few, or the wrong ones."""
        near = [
            self.memory(f"near{i:03d}", embedding=self.vec(0, 1, weights=[1.0, i / 1000]))
            for i in range(120)
        ]
        wanted = [
            self.memory(
                f"want{i}",
                "needle",
                embedding=self.vec(0, 1, weights=[1.0, 2.0 + i]),
                metadata={"keep": True},
            )
            for i in range(3)
        ]
        await self.put(store, namespace, *near, *wanted)
        keep = SearchFilter(metadata=(MetadataFilter("keep", "eq", True),))
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=2, filters=keep)
        assert [h.memory.id for h in hits] == ["want0", "want1"]
        by_id = SearchFilter(ids=frozenset({"want2", "near119"}))
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=1, filters=by_id)
        assert [h.memory.id for h in hits] == ["near119"]

    async def test_vector_search_follows_tier_and_flag_changes(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"), self.memory("b", axis=1))
        hot = frozenset({Tier.HOT})
        assert [
            h.memory.id for h in await store.vector_search(namespace, self.q(0), tiers=hot, k=1)
        ] == ["a"]
        await store.set_tier(namespace, ["a"], Tier.WARM, T0 + DAY)
        assert [
            h.memory.id for h in await store.vector_search(namespace, self.q(0), tiers=hot, k=1)
        ] == ["b"]
        warm = frozenset({Tier.WARM})
        hits = await store.vector_search(namespace, self.q(0), tiers=warm, k=5)
        assert [h.memory.id for h in hits] == ["a"]
        assert hits[0].memory.tier is Tier.WARM
        await store.patch_many(namespace, ["a"], MemoryPatch(do_not_inject=True))
        assert await store.vector_search(namespace, self.q(0), tiers=warm, k=5) == []
        await self.put(store, namespace, self.memory("c", tier=Tier.WARM))
        hits = await store.vector_search(namespace, self.q(0), tiers=warm, k=5)
        assert [h.memory.id for h in hits] == ["c"]

    # -- lexical search ------------------------------------------------------------------

    async def test_lexical_search_ranks_by_bm25(self, store: MemoryStore, namespace: str) -> None:
        await self.put(
            store,
            namespace,
            self.memory("twice", "apple apple banana"),
            self.memory("once", "apple cherry grape"),
            self.memory("none", "cherry grape melon"),
        )
        hits = await store.lexical_search(namespace, "apple", tiers=ALL_LIVE, k=10)
        assert [h.memory.id for h in hits] == ["twice", "once"]
        scores = [h.score for h in hits]
        assert all(s >= 0 for s in scores)
        assert scores[0] > scores[1]
        assert hits[0].memory.content == "apple apple banana"

    async def test_lexical_search_matches_any_word_and_respects_k(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("a", "red fox"),
            self.memory("b", "blue whale"),
            self.memory("c", "green frog"),
        )
        hits = await store.lexical_search(namespace, "fox whale", tiers=ALL_LIVE, k=10)
        assert {h.memory.id for h in hits} == {"a", "b"}
        assert len(await store.lexical_search(namespace, "fox whale", tiers=ALL_LIVE, k=1)) == 1

    async def test_lexical_search_respects_tiers_and_default_filters(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("hot", "needle hot", tier=Tier.HOT),
            self.memory("cold", "needle cold", tier=Tier.COLD),
            self.memory("forgotten", "needle forgotten", do_not_inject=True),
            self.memory("superseded", "needle superseded", superseded_by="hot"),
        )

        async def ids(tiers: frozenset[Tier], filters: SearchFilter | None = None) -> set[str]:
            hits = await store.lexical_search(
                namespace, "needle", tiers=tiers, k=10, filters=filters or SearchFilter()
            )
            return {h.memory.id for h in hits}

        assert await ids(frozenset({Tier.HOT})) == {"hot"}
        assert await ids(frozenset({Tier.COLD})) == {"cold"}
        assert await ids(ALL_LIVE) == {"hot", "cold"}
        assert await ids(ALL_LIVE, EVERYTHING) == {"hot", "cold", "forgotten", "superseded"}
        assert await ids(ALL_LIVE, SearchFilter(ids=frozenset({"cold"}))) == {"cold"}
        assert await ids(frozenset()) == set()

    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    async def test_lexical_search_survives_hostile_queries(
        self, store: MemoryStore, namespace: str, query: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("a", "please drop table memories now"),
            self.memory("b", "the NEAR operator and a secret"),
        )
        hits = await store.lexical_search(namespace, query, tiers=ALL_LIVE, k=10)
        assert all(h.memory.namespace == namespace for h in hits)
        assert all(h.score >= 0 for h in hits)
        assert set(await store.get_many(namespace, ["a", "b"])) == {"a", "b"}

    @pytest.mark.parametrize("query", ['"', '""', "*", ")", "(", "'", "  ", ""])
    async def test_lexical_search_without_words_finds_nothing(
        self, store: MemoryStore, namespace: str, query: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", 'quote " star * paren )'))
        assert await store.lexical_search(namespace, query, tiers=ALL_LIVE, k=10) == []

    async def test_lexical_search_treats_operators_and_sql_as_words(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("sql", "please drop table memories now"),
            self.memory("near", "the NEAR operator"),
            self.memory("other", "nothing relevant here"),
        )
        sql = await store.lexical_search(
            namespace, "'; DROP TABLE memories; --", tiers=ALL_LIVE, k=10
        )
        assert [h.memory.id for h in sql] == ["sql"]
        near = await store.lexical_search(namespace, "NEAR(", tiers=ALL_LIVE, k=10)
        assert [h.memory.id for h in near] == ["near"]
        assert set(await store.get_many(namespace, ["sql", "near", "other"])) == {
            "sql",
            "near",
            "other",
        }

    async def test_lexical_search_handles_unicode(self, store: MemoryStore, namespace: str) -> None:
        await self.put(
            store,
            namespace,
            self.memory("fr", "un caf\u00e9 au lait"),
            self.memory("en", "a cup of tea"),
        )
        hits = await store.lexical_search(namespace, "caf\u00e9", tiers=ALL_LIVE, k=10)
        assert [h.memory.id for h in hits] == ["fr"]

    # -- tiers and uses --------------------------------------------------------------------

    async def test_entering_cold_sets_cold_since_and_resets_cold_uses(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.WARM, uses_since_cold=5))
        when = T0 + 10 * DAY
        assert await store.set_tier(namespace, ["a", "unknown"], Tier.COLD, when) == 1
        m = await self.one(store, namespace, "a")
        assert m.tier is Tier.COLD
        assert m.cold_since == when
        assert m.uses_since_cold == 0
        assert m.tier_changed_at == when

    async def test_leaving_cold_clears_cold_since(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, self.memory("a"))
        await store.set_tier(namespace, ["a"], Tier.COLD, T0 + DAY)
        back = T0 + 3 * DAY
        assert await store.set_tier(namespace, ["a"], Tier.WARM, back) == 1
        m = await self.one(store, namespace, "a")
        assert (m.tier, m.cold_since, m.tier_changed_at) == (Tier.WARM, None, back)

    async def test_set_tier_is_idempotent(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, self.memory("a"), self.memory("b"))
        first = T0 + DAY
        assert await store.set_tier(namespace, ["a", "b"], Tier.COLD, first) == 2
        assert await store.set_tier(namespace, ["a", "b"], Tier.COLD, T0 + 2 * DAY) == 0
        for memory_id in ("a", "b"):
            m = await self.one(store, namespace, memory_id)
            assert (m.tier, m.cold_since, m.tier_changed_at) == (Tier.COLD, first, first)

    async def test_set_tier_refuses_archived(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, self.memory("a"))
        with pytest.raises(ValidationError):
            await store.set_tier(namespace, ["a"], Tier.ARCHIVED, T0)
        assert (await self.one(store, namespace, "a")).tier is Tier.HOT

    async def test_record_access_counts_uses_and_distinct_days(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"), self.memory("b"))
        day1, day3 = T0 + DAY, T0 + 3 * DAY
        await store.record_access(
            namespace,
            [
                AccessRecord("a", day1 + timedelta(hours=10)),
                AccessRecord("a", day1 + timedelta(hours=12)),
                AccessRecord("a", day3),
                AccessRecord("unknown", day3),
            ],
        )
        a = await self.one(store, namespace, "a")
        assert a.use_count == 3
        assert a.last_accessed_at == day3
        assert a.use_days == [day1.date(), day3.date()]
        assert a.uses_since_cold == 0
        b = await self.one(store, namespace, "b")
        assert (b.use_count, b.last_accessed_at, b.use_days) == (0, None, [])

        await store.record_access(namespace, [AccessRecord("a", T0 + 2 * DAY)])
        a = await self.one(store, namespace, "a")
        assert a.use_count == 4
        assert a.last_accessed_at == day3  # an older use never moves it back
        assert a.use_days == [day1.date(), (T0 + 2 * DAY).date(), day3.date()]

    async def test_cold_uses_count_only_while_cold(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("c"), self.memory("w", tier=Tier.WARM))
        await store.record_access(namespace, [AccessRecord("c", T0 + DAY)])
        await store.set_tier(namespace, ["c"], Tier.COLD, T0 + 2 * DAY)
        await store.record_access(
            namespace,
            [
                AccessRecord("c", T0 + 3 * DAY),
                AccessRecord("c", T0 + 4 * DAY),
                AccessRecord("w", T0 + 4 * DAY),
            ],
        )
        c = await self.one(store, namespace, "c")
        assert (c.use_count, c.uses_since_cold) == (3, 2)
        w = await self.one(store, namespace, "w")
        assert (w.use_count, w.uses_since_cold) == (1, 0)

    # -- scans ---------------------------------------------------------------------------

    async def _scan_fixture(self, store: MemoryStore, namespace: str) -> None:
        await self.put(
            store,
            namespace,
            self.memory("s1", tier=Tier.HOT, importance=0.2),
            self.memory("s2", tier=Tier.HOT, importance=0.9, pinned=True, created_at=T0 + 5 * DAY),
            self.memory(
                "s3",
                tier=Tier.WARM,
                core=True,
                use_count=4,
                last_accessed_at=T0 + 10 * DAY,
                tier_changed_at=T0 + 40 * DAY,
            ),
            self.memory(
                "s4",
                tier=Tier.COLD,
                importance=0.3,
                superseded_by="s3",
                created_at=T0 - 30 * DAY,
                cold_since=T0 + 20 * DAY,
                tier_changed_at=T0 + 20 * DAY,
                uses_since_cold=3,
            ),
            self.memory(
                "s5",
                tier=Tier.COLD,
                created_at=T0 - 60 * DAY,
                cold_since=T0 + 40 * DAY,
                tier_changed_at=T0 + 40 * DAY,
                use_count=1,
                last_accessed_at=T0 + DAY,
            ),
        )

    SCAN_CASES: ClassVar[list[tuple[dict[str, Any], list[str]]]] = [
        ({"tiers": frozenset({Tier.HOT})}, ["s1", "s2"]),
        ({"tiers": frozenset({Tier.COLD})}, ["s4", "s5"]),
        ({}, ["s1", "s2", "s3", "s4", "s5"]),
        ({"created_before": T0 + DAY}, ["s1", "s3", "s4", "s5"]),
        ({"last_used_before": T0 + 2 * DAY}, ["s1", "s4", "s5"]),
        ({"cold_since_before": T0 + 30 * DAY}, ["s4"]),
        ({"tier_changed_before": T0 + 30 * DAY}, ["s4"]),
        ({"importance_at_most": 0.3}, ["s1", "s4"]),
        ({"importance_at_least": 0.9}, ["s2"]),
        ({"min_uses_since_cold": 3}, ["s4"]),
        ({"min_use_count": 1}, ["s3", "s5"]),
        ({"pinned": True}, ["s2"]),
        ({"pinned": False}, ["s1", "s3", "s4", "s5"]),
        ({"core": True}, ["s3"]),
        ({"superseded": True}, ["s4"]),
        ({"superseded": False}, ["s1", "s2", "s3", "s5"]),
        ({"used": True}, ["s3", "s5"]),
        ({"used": False}, ["s1", "s2", "s4"]),
        ({"tiers": frozenset({Tier.COLD}), "importance_at_most": 0.3}, ["s4"]),
        ({"after_id": "s2", "limit": 2}, ["s3", "s4"]),
    ]

    @pytest.mark.parametrize(("conditions", "expected"), SCAN_CASES)
    async def test_scan_applies_every_condition(
        self,
        store: MemoryStore,
        namespace: str,
        conditions: dict[str, Any],
        expected: list[str],
    ) -> None:
        await self._scan_fixture(store, namespace)
        conditions = {"tiers": ALL_LIVE, **conditions}
        found = await store.scan(namespace, ScanQuery(**conditions))
        assert [m.id for m in found] == expected

    async def test_scan_sees_recorded_uses(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, self.memory("a"), self.memory("b"))
        await store.record_access(namespace, [AccessRecord("a", T0 + 10 * DAY)])
        idle = await store.scan(namespace, ScanQuery(tiers=ALL_LIVE, last_used_before=T0 + DAY))
        assert [m.id for m in idle] == ["b"]
        used = await store.scan(namespace, ScanQuery(tiers=ALL_LIVE, used=True))
        assert [m.id for m in used] == ["a"]

    async def test_scan_pages_by_id(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, *(self.memory(f"p{i:02d}") for i in reversed(range(25))))
        pages: list[list[str]] = []
        after: str | None = None
        while True:
            page = await store.scan(namespace, ScanQuery(tiers=ALL_LIVE, after_id=after, limit=10))
            if not page:
                break
            pages.append([m.id for m in page])
            after = page[-1].id
        assert [len(p) for p in pages] == [10, 10, 5]
        assert [i for p in pages for i in p] == [f"p{i:02d}" for i in range(25)]

    # -- the sweep's column reads -----------------------------------------------------------

    @pytest.mark.parametrize(("conditions", "expected"), SCAN_CASES)
    async def test_scan_ids_answers_what_scan_answers(
        self,
        store: MemoryStore,
        namespace: str,
        conditions: dict[str, Any],
        expected: list[str],
    ) -> None:
        await self._scan_fixture(store, namespace)
        query = ScanQuery(**{"tiers": ALL_LIVE, **conditions})
        assert await store.scan_ids(namespace, query) == expected

    @pytest.mark.parametrize(("conditions", "expected"), SCAN_CASES)
    async def test_scan_facts_are_the_columns_of_scan(
        self,
        store: MemoryStore,
        namespace: str,
        conditions: dict[str, Any],
        expected: list[str],
    ) -> None:
        await self._scan_fixture(store, namespace)
        await store.record_access(
            namespace, [AccessRecord("s5", T0 + 41 * DAY), AccessRecord("s5", T0 + 43 * DAY)]
        )
        query = ScanQuery(**{"tiers": ALL_LIVE, **conditions})
        for use_days in (False, True):
            facts = await store.scan_facts(namespace, query, use_days=use_days)
            want = MemoryFacts.of(await store.scan(namespace, query), use_days=use_days)
            assert facts.ids == want.ids
            assert facts.memory_types == want.memory_types
            for column in (
                "importance",
                "use_count",
                "pinned",
                "core",
                "do_not_inject",
                "created_at",
                "last_used_at",
                "cold_since",
            ):
                got, wanted = getattr(facts, column), getattr(want, column)
                assert got.dtype == wanted.dtype, column
                assert got.tolist() == wanted.tolist(), column
            assert facts.use_days == want.use_days

    async def test_scan_facts_timestamps_are_exact_microseconds(
        self, store: MemoryStore, namespace: str
    ) -> None:
        odd = T0 + timedelta(days=3, microseconds=7)
        await self.put(
            store,
            namespace,
            self.memory("a", created_at=odd, tier=Tier.COLD, cold_since=odd + DAY),
            self.memory("b", created_at=odd, last_accessed_at=odd + 2 * DAY),
        )
        facts = await store.scan_facts(namespace, ScanQuery(tiers=ALL_LIVE))
        assert facts.ids == ["a", "b"]
        assert facts.created_at.tolist() == [to_micros(odd)] * 2
        assert facts.last_used_at.tolist() == [to_micros(odd), to_micros(odd + 2 * DAY)]
        assert facts.cold_since.tolist() == [to_micros(odd + DAY), NO_TIME]

    async def test_scan_ids_and_facts_page_by_id(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, *(self.memory(f"p{i:02d}") for i in reversed(range(25))))
        ids: list[str] = []
        after: str | None = None
        while True:
            query = ScanQuery(tiers=ALL_LIVE, after_id=after, limit=10)
            page = await store.scan_ids(namespace, query)
            assert (await store.scan_facts(namespace, query)).ids == page
            if not page:
                break
            ids.extend(page)
            after = page[-1]
        assert ids == [f"p{i:02d}" for i in range(25)]

    async def test_scan_facts_of_nothing_are_empty_columns(
        self, store: MemoryStore, namespace: str
    ) -> None:
        facts = await store.scan_facts(namespace, ScanQuery(tiers=ALL_LIVE), use_days=True)
        assert len(facts) == 0
        assert facts.ids == []
        assert facts.use_days == []
        assert facts.last_used_at.shape == (0,)

    async def test_embeddings_follow_the_order_asked_for(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("a", axis=0),
            self.memory("b", axis=1, embedding=self.vec(1, 2, weights=[0.6, 0.8])),
            self.memory("c", axis=2, tier=Tier.COLD),
        )
        assert await store.archive_many(namespace, [self.record("c", namespace)]) == 1
        ids, matrix = await store.embeddings(namespace, ["b", "unknown", "a", "c", "b"])
        assert ids == ["b", "a"]  # archived, unknown and repeated ids are left out
        assert matrix.dtype == np.float32
        assert matrix.shape == (2, self.dimension)
        np.testing.assert_allclose(matrix[0], self.vec(1, 2, weights=[0.6, 0.8]), atol=1e-6)
        np.testing.assert_allclose(matrix[1], self.vec(0), atol=1e-6)
        empty_ids, empty = await store.embeddings(namespace, [])
        assert empty_ids == []
        assert empty.size == 0

    async def test_sweep_reads_never_cross_namespaces(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("x", axis=0))
        await self.put(store, other_namespace, self.memory("y", axis=1))
        query = ScanQuery(tiers=ALL_LIVE)
        assert await store.scan_ids(namespace, query) == ["x"]
        assert (await store.scan_facts(other_namespace, query)).ids == ["y"]
        assert (await store.embeddings(namespace, ["x", "y"]))[0] == ["x"]
        assert (await store.embeddings(other_namespace, ["x", "y"]))[0] == ["y"]

    async def test_list_ids_pages_and_filters_tiers(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("a", tier=Tier.HOT),
            self.memory("b", tier=Tier.WARM),
            self.memory("c", tier=Tier.COLD),
            self.memory("d", tier=Tier.COLD),
        )
        assert await store.archive_many(namespace, [self.record("d", namespace)]) == 1
        assert await store.list_ids(namespace) == ["a", "b", "c"]
        assert await store.list_ids(namespace, limit=2) == ["a", "b"]
        assert await store.list_ids(namespace, after_id="a", limit=1) == ["b"]
        assert await store.list_ids(namespace, tiers=frozenset({Tier.COLD})) == ["c"]
        assert await store.list_ids(namespace, tiers=frozenset({Tier.ARCHIVED})) == ["d"]
        everything = frozenset(Tier)
        assert await store.list_ids(namespace, tiers=everything) == ["a", "b", "c", "d"]
        assert await store.list_ids(namespace, tiers=everything, after_id="b") == ["c", "d"]

    # -- counts ------------------------------------------------------------------------------

    async def test_stats_count_every_tier_and_flag(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(
            store,
            namespace,
            self.memory("h1", tier=Tier.HOT, pinned=True),
            self.memory("h2", tier=Tier.HOT),
            self.memory("w1", tier=Tier.WARM, core=True),
            self.memory("c1", tier=Tier.COLD, do_not_inject=True),
            self.memory("c2", tier=Tier.COLD),
        )
        await store.archive_many(namespace, [self.record("c2", namespace)])
        stats = await store.stats(namespace)
        assert stats.namespace == namespace
        counts = {tier: stats.tiers[tier].count for tier in Tier}
        assert counts == {Tier.HOT: 2, Tier.WARM: 1, Tier.COLD: 1, Tier.ARCHIVED: 1}
        assert all(stats.tiers[tier].bytes > 0 for tier in Tier)
        assert (stats.pinned, stats.core, stats.forgotten) == (1, 1, 1)
        assert stats.total == 5

    async def test_stats_of_an_empty_namespace_are_zero(
        self, store: MemoryStore, namespace: str
    ) -> None:
        stats = await store.stats(namespace)
        assert stats.total == 0
        assert all(stats.tiers[tier].count == 0 for tier in Tier)
        assert (stats.pinned, stats.core, stats.forgotten) == (0, 0, 0)

    async def test_namespaces_lists_live_and_archive_only_namespaces(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"))
        await self.put(store, other_namespace, self.memory("b"))
        await store.archive_many(other_namespace, [self.record("b", other_namespace)])
        listed = await store.namespaces()
        assert namespace in listed
        assert other_namespace in listed
        await store.clear(other_namespace)
        assert other_namespace not in await store.namespaces()

    # -- archive records ---------------------------------------------------------------------

    async def test_archive_many_replaces_live_memories(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD), self.memory("b"))
        record = self.record("a", namespace)
        assert await store.archive_many(namespace, [record, self.record("ghost", namespace)]) == 1
        assert await store.get_many(namespace, ["a"]) == {}
        archives = await store.get_archives(namespace, ["a", "b", "ghost"])
        assert set(archives) == {"a"}
        got = archives["a"]
        assert got.model_dump(exclude={"summary_embedding"}) == record.model_dump(
            exclude={"summary_embedding"}
        )
        assert np.allclose(got.summary_embedding or [], record.summary_embedding or [])
        # a rerun converges: nothing left to move, nothing duplicated
        assert await store.archive_many(namespace, [record]) == 0
        assert set(await store.get_archives(namespace, ["a"])) == {"a"}
        assert set(await store.get_many(namespace, ["a", "b"])) == {"b"}

    async def test_archived_memories_leave_live_searches_and_scans(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", "unique zebra", tier=Tier.COLD))
        assert len(await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5)) == 1
        await store.archive_many(namespace, [self.record("a", namespace)])
        assert await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5) == []
        assert await store.lexical_search(namespace, "zebra", tiers=ALL_LIVE, k=5) == []
        assert await store.scan(namespace, ScanQuery(tiers=ALL_LIVE)) == []
        assert await store.list_ids(namespace) == []

    async def test_archived_id_cannot_be_reused(self, store: MemoryStore, namespace: str) -> None:
        await self.put(store, namespace, self.memory("a"))
        await store.archive_many(namespace, [self.record("a", namespace)])
        with pytest.raises(ValidationError):
            await self.put(store, namespace, self.memory("a"))
        assert await store.get_many(namespace, ["a"]) == {}

    async def test_search_archives_ranks_by_cosine(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, *(self.memory(i) for i in ("x", "y", "z")))
        records = [
            self.record("x", namespace, axis=1),
            self.record("y", namespace, axis=0),
            self.record("z", namespace, axis=2),
        ]
        records[2] = records[2].model_copy(update={"summary_embedding": self.vec(0, 2)})
        await store.archive_many(namespace, records)
        hits = await store.search_archives(namespace, self.q(0), k=3)
        assert [h.record.id for h in hits] == ["y", "z", "x"]
        assert [h.score for h in hits] == pytest.approx([1.0, 0.5**0.5, 0.0], abs=1e-4)
        assert [h.record.id for h in await store.search_archives(namespace, self.q(0), k=1)] == [
            "y"
        ]

    async def archive_all(
        self, store: MemoryStore, namespace: str, records: Sequence[ArchiveRecord]
    ) -> None:
        """Archive records the only way the port allows: each replaces a live memory."""
        await self.put(store, namespace, *(self.memory(r.id) for r in records))
        assert await store.archive_many(namespace, list(records)) == len(records)

    async def archived_ids(
        self, store: MemoryStore, namespace: str, filters: SearchFilter, *, k: int = 10
    ) -> set[str]:
        hits = await store.search_archives(namespace, self.q(0), k=k, filters=filters)
        return {h.record.id for h in hits}

    @pytest.mark.parametrize(
        ("metadata", "conditions", "expected"),
        [(METADATA, *case) for case in METADATA_CASES]
        + [(NUL_METADATA, *case) for case in NUL_METADATA_CASES],
    )
    async def test_search_archives_honours_metadata_filters(
        self,
        store: MemoryStore,
        namespace: str,
        metadata: dict[str, dict[str, Any]],
        conditions: tuple[MetadataFilter, ...],
        expected: set[str],
    ) -> None:
        """An archive record keeps its memory's metadata, and a search filtered by it
        returns exactly the records a live search would return (same semantics)."""
        records = [
            self.record(i, namespace).model_copy(update={"metadata": meta})
            for i, meta in metadata.items()
        ]
        await self.archive_all(store, namespace, records)
        filters = SearchFilter(metadata=conditions)
        assert await self.archived_ids(store, namespace, filters) == expected

    @pytest.mark.parametrize(
        "case",
        [(METADATA, *case) for case in METADATA_CASES]
        + [(NUL_METADATA, *case) for case in NUL_METADATA_CASES],
    )
    async def test_listings_honour_metadata_filters_as_searches_do(
        self, store: MemoryStore, namespace: str, case: tuple[Any, ...]
    ) -> None:
        """`scan` and `scan_archives` filter metadata in the store's query with the
        search semantics, so a page holds `limit` matches (the engine's `list` and
        `iterate` page through them)."""
        metadata, conditions, expected = case
        await self.put(
            store, namespace, *(self.memory(i, metadata=meta) for i, meta in metadata.items())
        )
        live = await store.scan(namespace, ScanQuery(tiers=ALL_LIVE, metadata=conditions))
        assert {m.id for m in live} == expected
        first = await store.scan(namespace, ScanQuery(tiers=ALL_LIVE, metadata=conditions, limit=1))
        assert [m.id for m in first] == sorted(expected)[:1]
        records = [
            self.record(i, namespace).model_copy(update={"metadata": meta})
            for i, meta in metadata.items()
        ]
        await store.archive_many(namespace, records)
        archived = await store.scan_archives(namespace, metadata=conditions)
        assert {r.id for r in archived} == expected
        assert [
            r.id for r in await store.scan_archives(namespace, metadata=conditions, limit=1)
        ] == (sorted(expected)[:1])

    async def test_search_archives_filters_types_ids_pinned_and_flags(
        self, store: MemoryStore, namespace: str
    ) -> None:
        """Every SearchFilter field applies to archive records: memory types, ids, the
        forgotten and superseded flags they keep, and `pinned` (an archived memory is
        never pinned). Records archived before the flags were kept (None) read as not
        forgotten and not superseded."""
        kinds = {
            "f": {"memory_type": MemoryType.FACTUAL, "do_not_inject": False, "superseded": False},
            "e": {"memory_type": MemoryType.EPISODIC, "do_not_inject": False, "superseded": False},
            "gone": {"memory_type": MemoryType.FACTUAL, "do_not_inject": True, "superseded": False},
            "old": {"memory_type": MemoryType.FACTUAL, "do_not_inject": False, "superseded": True},
            "legacy": {"memory_type": MemoryType.PROCEDURAL},
        }
        records = [
            self.record(i, namespace).model_copy(update=fields) for i, fields in kinds.items()
        ]
        await self.archive_all(store, namespace, records)
        got = await store.get_archives(namespace, list(kinds))
        assert (got["gone"].do_not_inject, got["gone"].superseded) == (True, False)
        assert (got["old"].do_not_inject, got["old"].superseded) == (False, True)
        assert (got["legacy"].do_not_inject, got["legacy"].superseded) == (None, None)

        async def ids(filters: SearchFilter) -> set[str]:
            return await self.archived_ids(store, namespace, filters)

        assert await ids(SearchFilter()) == {"f", "e", "legacy"}
        assert await ids(SearchFilter(include_forgotten=True)) == {"f", "e", "legacy", "gone"}
        assert await ids(SearchFilter(include_superseded=True)) == {"f", "e", "legacy", "old"}
        assert await ids(EVERYTHING) == set(kinds)
        factual = frozenset({MemoryType.FACTUAL})
        assert await ids(SearchFilter(memory_types=factual)) == {"f"}
        assert await ids(replace(EVERYTHING, memory_types=factual)) == {"f", "gone", "old"}
        two = frozenset({MemoryType.EPISODIC, MemoryType.PROCEDURAL})
        assert await ids(SearchFilter(memory_types=two)) == {"e", "legacy"}
        assert await ids(SearchFilter(memory_types=frozenset())) == set()
        assert await ids(SearchFilter(ids=frozenset({"e", "gone", "nope"}))) == {"e"}
        assert await ids(SearchFilter(ids=frozenset())) == set()
        assert await ids(SearchFilter(pinned=True)) == set()
        assert await ids(SearchFilter(pinned=False)) == {"f", "e", "legacy"}

    async def test_search_archives_filters_apply_before_k(
        self, store: MemoryStore, namespace: str
    ) -> None:
        """The few matching records rank far below many others: a store that cut to k
        first and filtered afterwards would return too few, or the wrong ones."""
        near = [
            self.record(f"near{i:03d}", namespace).model_copy(
                update={"summary_embedding": self.vec(0, 1, weights=[1.0, i / 1000])}
            )
            for i in range(60)
        ]
        wanted = [
            self.record(f"want{i}", namespace).model_copy(
                update={
                    "summary_embedding": self.vec(0, 1, weights=[1.0, 2.0 + i]),
                    "metadata": {"keep": True},
                    "memory_type": MemoryType.PROJECT,
                }
            )
            for i in range(3)
        ]
        await self.archive_all(store, namespace, [*near, *wanted])
        for filters in (
            SearchFilter(metadata=(MetadataFilter("keep", "eq", True),)),
            SearchFilter(memory_types=frozenset({MemoryType.PROJECT})),
        ):
            hits = await store.search_archives(namespace, self.q(0), k=2, filters=filters)
            assert [h.record.id for h in hits] == ["want0", "want1"]
        by_id = SearchFilter(ids=frozenset({"want2", "near059"}))
        hits = await store.search_archives(namespace, self.q(0), k=1, filters=by_id)
        assert [h.record.id for h in hits] == ["near059"]

    async def test_update_archive_overwrites_the_record(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a"))
        record = self.record("a", namespace)
        await store.archive_many(namespace, [record])
        expanded = record.model_copy(
            update={
                "expansions": [T0 + 201 * DAY, T0 + 202 * DAY],
                "storage_verified": False,
                "summary": "a better summary",
            }
        )
        await store.update_archive(namespace, expanded)
        got = (await store.get_archives(namespace, ["a"]))["a"]
        assert got.expansions == [T0 + 201 * DAY, T0 + 202 * DAY]
        assert got.storage_verified is False
        assert got.summary == "a better summary"
        with pytest.raises(NotFoundError):
            await store.update_archive(namespace, self.record("ghost", namespace))
        assert await store.get_archives(namespace, ["ghost"]) == {}

    async def test_unarchive_many_restores_live_memories(
        self, store: MemoryStore, namespace: str
    ) -> None:
        original = self.memory("a", "restored content", tier=Tier.COLD)
        await self.put(store, namespace, original)
        await store.archive_many(namespace, [self.record("a", namespace)])
        back = original.model_copy(update={"namespace": namespace, "tier": Tier.WARM})
        assert await store.unarchive_many(namespace, [back, self.memory("ghost")]) == 1
        assert await store.get_archives(namespace, ["a"]) == {}
        assert await store.get_many(namespace, ["ghost"]) == {}
        restored = await self.one(store, namespace, "a")
        assert (restored.content, restored.tier) == ("restored content", Tier.WARM)
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5)
        assert [h.memory.id for h in hits] == ["a"]
        assert await store.unarchive_many(namespace, [back]) == 0
        assert (await self.one(store, namespace, "a")).content == "restored content"

    async def test_delete_archives_removes_only_those_records(
        self, store: MemoryStore, namespace: str
    ) -> None:
        other = f"{namespace}-other"
        for ns in (namespace, other):
            await self.put(store, ns, self.memory("a"), self.memory("b"))
            await store.archive_many(ns, [self.record("a", ns), self.record("b", ns)])
        assert await store.delete_archives(namespace, ["a", "ghost"]) == 1
        assert list(await store.get_archives(namespace, ["a", "b"])) == ["b"]
        assert sorted(await store.get_archives(other, ["a", "b"])) == ["a", "b"]
        assert await store.delete_archives(namespace, ["a"]) == 0
        assert await store.get_many(namespace, ["a"]) == {}
        await store.clear(other)

    async def test_scan_archives_pages_by_id(self, store: MemoryStore, namespace: str) -> None:
        ids = [f"r{i:02d}" for i in range(7)]
        await self.put(store, namespace, *(self.memory(i) for i in ids))
        await store.archive_many(namespace, [self.record(i, namespace) for i in reversed(ids)])
        first = await store.scan_archives(namespace, limit=4)
        assert [r.id for r in first] == ids[:4]
        rest = await store.scan_archives(namespace, after_id=first[-1].id, limit=4)
        assert [r.id for r in rest] == ids[4:]
        assert await store.scan_archives(namespace, after_id=ids[-1]) == []

    # -- housekeeping ------------------------------------------------------------------------

    # -- the archival journal (tiered_memory.journal) ----------------------------------

    async def claim(
        self, store: MemoryStore, namespace: str, who: str, *ids: str, **options: Any
    ) -> set[str]:
        options.setdefault("until", T0 + DAY)
        options.setdefault("now", T0)
        return set(await store.claim_archival(namespace, list(ids), claimant=who, **options))

    async def test_a_claim_is_exclusive_until_released(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD), self.memory("b"))
        assert await self.claim(store, namespace, "p1", "a", "b", "ghost") == {"a", "b"}
        assert await self.claim(store, namespace, "p2", "a") == set()
        assert await self.claim(store, namespace, "p1", "a") == {"a"}  # its own: renewed
        states = await store.archival_states(namespace)
        assert {i: s.claimant for i, s in states.items()} == {"a": "p1", "b": "p1"}
        await store.release_archival(namespace, "p2", ["a"], now=T0, quarantine_after=3)
        assert (await store.archival_states(namespace, ["a"]))["a"].claimant == "p1"
        await store.release_archival(namespace, "p1", ["a", "b"], now=T0, quarantine_after=3)
        assert await store.archival_states(namespace) == {}  # nothing left to remember
        assert await self.claim(store, namespace, "p2", "a") == {"a"}

    async def test_an_expired_or_stale_claim_is_taken_over(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD))
        assert await self.claim(store, namespace, "p1", "a", until=T0 + DAY) == {"a"}
        assert await self.claim(store, namespace, "p2", "a", now=T0 + DAY / 2) == set()
        assert await self.claim(store, namespace, "p2", "a", now=T0 + DAY) == {"a"}
        stale = {"a": "p2"}  # a claimant the caller found dead
        assert await self.claim(store, namespace, "p3", "a", replacing={"a": "p1"}) == set()
        assert await self.claim(store, namespace, "p3", "a", replacing=stale) == {"a"}

    async def test_only_the_claimant_notes_originals_and_they_outlive_its_claim(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD))
        await self.claim(store, namespace, "p1", "a")
        assert await store.note_archival(namespace, "p2", {"a": "1" * 64}) == set()
        assert await store.note_archival(namespace, "p1", {"a": "2" * 64}) == {"a"}
        assert await store.note_archival(namespace, "p1", {"a": "2" * 64}) == {"a"}  # once
        await store.release_archival(namespace, "p1", ["a"], now=T0, quarantine_after=3)
        claimed = await store.claim_archival(
            namespace, ["a"], claimant="p2", until=T0 + DAY, now=T0
        )
        assert claimed["a"].written == ("2" * 64,)  # the next attempt cleans it up

    async def test_counted_failures_quarantine_and_outages_do_not(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD))
        bad, down = ArchivalFailure("rejected"), ArchivalFailure("down", counts=False)
        for n, failure in enumerate([bad, down, bad, bad], start=1):
            await self.claim(store, namespace, f"p{n}", "a")
            set_aside = await store.release_archival(
                namespace, f"p{n}", ["a"], failures={"a": failure}, now=T0, quarantine_after=3
            )
            assert set_aside == (["a"] if n == 4 else [])
        state = (await store.archival_states(namespace, ["a"]))["a"]
        assert (state.failures, state.error, state.quarantined) == (3, "rejected", True)
        assert state.failed_at == T0
        assert await self.claim(store, namespace, "p5", "a") == set()
        assert await self.claim(store, namespace, "p5", "a", release_quarantine=True) == {"a"}
        assert not (await store.archival_states(namespace, ["a"]))["a"].quarantined

    async def test_archive_many_for_a_claimant_takes_only_its_claims(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD), self.memory("b"))
        await self.put(store, other_namespace, self.memory("a", tier=Tier.COLD))
        await self.claim(store, namespace, "p1", "a")
        await self.claim(store, other_namespace, "p2", "a")
        records = [self.record("a", namespace), self.record("b", namespace)]
        assert await store.archive_many(namespace, records, claimant="p2") == 0
        assert await store.archive_many(namespace, records, claimant="p1") == 1
        assert set(await store.get_archives(namespace, ["a", "b"])) == {"a"}
        assert await store.archival_states(namespace) == {}  # the row left with the memory
        assert set(await store.archival_states(other_namespace)) == {"a"}
        await store.delete_many(other_namespace, ["a"])
        assert await store.archival_states(other_namespace) == {}
        await self.claim(store, namespace, "p1", "b")
        await store.clear(namespace)
        assert await store.archival_states(namespace) == {}

    async def test_replace_many_ends_the_archivals_of_the_replaced_memories(
        self, store: MemoryStore, namespace: str
    ) -> None:
        """An archival drafted from the old value must not commit over the new one: the
        replaced memory's journal row goes with its old value (the caller read its noted
        originals before, and deletes them after)."""
        await self.put(store, namespace, self.memory("a", tier=Tier.COLD), self.memory("b"))
        await self.claim(store, namespace, "p1", "a", "b")
        await store.note_archival(namespace, "p1", {"a": "2" * 64})
        await store.replace_many(namespace, [self.memory("a", content="the new value")])
        assert set(await store.archival_states(namespace)) == {"b"}
        record = self.record("a", namespace)
        assert await store.archive_many(namespace, [record], claimant="p1") == 0
        assert (await store.get_many(namespace, ["a"]))["a"].content == "the new value"

    async def test_transaction_rolls_back_on_exception(
        self, store: MemoryStore, namespace: str
    ) -> None:
        await self.put(store, namespace, self.memory("kept", embedding=self.vec(0, 1)))
        # warm any search cache first, so a rollback must also undo cached state
        await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5)

        async def fail_midway() -> None:
            async with store.transaction():
                await self.put(store, namespace, self.memory("a", axis=0))  # closer to q(0)
                await store.patch_many(namespace, ["kept"], MemoryPatch(pinned=True))
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            await fail_midway()
        found = await store.get_many(namespace, ["a", "kept"])
        if self.transactional:
            assert set(found) == {"kept"}
            assert found["kept"].pinned is False
            hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=1)
            assert [h.memory.id for h in hits] == ["kept"]
            pinned = SearchFilter(pinned=True)
            assert (
                await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=5, filters=pinned)
                == []
            )
        else:
            assert set(found) == {"a", "kept"}

    async def test_transaction_commits_every_write(
        self, store: MemoryStore, namespace: str
    ) -> None:
        async with store.transaction():
            await self.put(store, namespace, self.memory("a"), self.memory("b"))
            await store.set_tier(namespace, ["a"], Tier.COLD, T0 + DAY)
            await store.archive_many(namespace, [self.record("b", namespace)])
        assert (await self.one(store, namespace, "a")).tier is Tier.COLD
        assert set(await store.get_archives(namespace, ["b"])) == {"b"}

    async def test_clear_namespace_leaves_other_namespaces(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        for ns in (namespace, other_namespace):
            await self.put(store, ns, self.memory("a", "same words"), self.memory("b"))
            await store.archive_many(ns, [self.record("b", ns)])
        await store.clear(namespace)
        assert await store.get_many(namespace, ["a"]) == {}
        assert await store.get_archives(namespace, ["b"]) == {}
        assert (await store.stats(namespace)).total == 0
        assert set(await store.get_many(other_namespace, ["a"])) == {"a"}
        assert set(await store.get_archives(other_namespace, ["b"])) == {"b"}
        hits = await store.lexical_search(other_namespace, "words", tiers=ALL_LIVE, k=5)
        assert [h.memory.id for h in hits] == ["a"]

    async def test_clear_everything(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        for ns in (namespace, other_namespace):
            await self.put(store, ns, self.memory("a"), self.memory("b"))
            await store.archive_many(ns, [self.record("b", ns)])
        await store.clear(None)
        listed = await store.namespaces()
        assert namespace not in listed
        assert other_namespace not in listed
        for ns in (namespace, other_namespace):
            assert (await store.stats(ns)).total == 0
            assert await store.vector_search(ns, self.q(0), tiers=ALL_LIVE, k=5) == []

    # -- originals to delete ------------------------------------------------------------------

    async def test_queued_originals_round_trip_per_namespace(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        a, b = PendingOriginal("m1", "a" * 64), PendingOriginal("m1", "b" * 64, hand_on=True)
        await store.queue_originals(namespace, [b, a])
        await store.queue_originals(namespace, [PendingOriginal("m1", "b" * 64)])  # again
        await store.queue_originals(namespace, [PendingOriginal("m1", "a" * 64, hand_on=True)])
        await store.queue_originals(other_namespace, [PendingOriginal("m2", "c" * 64)])
        assert await store.pending_originals(namespace) == [
            PendingOriginal("m1", "a" * 64, hand_on=True),
            b,
        ]
        assert await store.pending_originals(namespace, limit=1) == [
            PendingOriginal("m1", "a" * 64, hand_on=True)
        ]
        listed = await store.pending_namespaces()
        assert namespace in listed
        assert other_namespace in listed
        assert (await store.stats(namespace)).total == 0
        assert namespace not in await store.namespaces()
        assert await store.drop_pending_originals(namespace, [a]) == 1
        assert await store.pending_originals(namespace) == [b]
        await store.clear(namespace)
        assert await store.pending_originals(namespace) == []
        assert namespace not in await store.pending_namespaces()
        assert await store.pending_originals(other_namespace) == [PendingOriginal("m2", "c" * 64)]

    async def test_queued_originals_roll_back_with_their_transaction(
        self, store: MemoryStore, namespace: str
    ) -> None:
        if not self.transactional:
            pytest.skip("transaction() is a no-op here")
        await self.put(store, namespace, self.memory("a"))
        await store.archive_many(namespace, [self.record("a", namespace)])

        async def failing_delete() -> None:
            async with store.transaction():
                await store.queue_originals(namespace, [PendingOriginal("a", "0" * 64)])
                await store.delete_archives(namespace, ["a"])
                raise RuntimeError("the write failed")

        with pytest.raises(RuntimeError):
            await failing_delete()
        assert set(await store.get_archives(namespace, ["a"])) == {"a"}
        assert await store.pending_originals(namespace) == []

    # -- namespace isolation -----------------------------------------------------------------

    async def _twins(self, store: MemoryStore, a: str, b: str) -> None:
        """Identical ids, content and vectors in two namespaces; metadata says whose."""
        for ns in (a, b):
            await self.put(
                store,
                ns,
                *(
                    self.memory(f"x{i}", f"twin text {i}", tier=Tier.COLD, metadata={"owner": ns})
                    for i in range(3)
                ),
            )

    async def test_reads_never_cross_namespaces(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        a, b = namespace, other_namespace
        await self._twins(store, a, b)
        ids = ["x0", "x1", "x2"]
        for ns in (a, b):
            found = await store.get_many(ns, ids)
            assert {m.metadata["owner"] for m in found.values()} == {ns}
            assert {m.namespace for m in found.values()} == {ns}
            vector = await store.vector_search(ns, self.q(0), tiers=ALL_LIVE, k=10)
            assert len(vector) == 3
            assert {h.memory.metadata["owner"] for h in vector} == {ns}
            lexical = await store.lexical_search(ns, "twin", tiers=ALL_LIVE, k=10)
            assert len(lexical) == 3
            assert {h.memory.metadata["owner"] for h in lexical} == {ns}
            scanned = await store.scan(ns, ScanQuery(tiers=ALL_LIVE))
            assert [m.id for m in scanned] == ids
            assert {m.metadata["owner"] for m in scanned} == {ns}
            assert await store.list_ids(ns) == ids
            assert (await store.stats(ns)).tiers[Tier.COLD].count == 3

    async def test_writes_never_cross_namespaces(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        a, b = namespace, other_namespace
        await self._twins(store, a, b)
        assert await store.patch_many(a, ["x0", "x1"], MemoryPatch(pinned=True)) == 2
        assert await store.set_tier(a, ["x0"], Tier.WARM, T0 + DAY) == 1
        await store.record_access(a, [AccessRecord("x0", T0 + DAY)])
        assert await store.delete_many(a, ["x2"]) == 1
        twins = await store.get_many(b, ["x0", "x1", "x2"])
        assert set(twins) == {"x0", "x1", "x2"}
        for m in twins.values():
            assert (m.pinned, m.tier, m.use_count, m.cold_since) == (False, Tier.COLD, 0, None)
        stats = await store.stats(b)
        assert (stats.pinned, stats.tiers[Tier.COLD].count) == (0, 3)
        assert (await store.stats(a)).pinned == 2

    async def test_archives_never_cross_namespaces(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        a, b = namespace, other_namespace
        await self._twins(store, a, b)
        assert await store.archive_many(a, [self.record("x0", a)]) == 1
        assert set(await store.get_many(b, ["x0"])) == {"x0"}
        assert await store.get_archives(b, ["x0"]) == {}
        assert await store.search_archives(b, self.q(0), k=5) == []
        assert await store.scan_archives(b) == []
        assert await store.list_ids(b, tiers=frozenset({Tier.ARCHIVED})) == []
        assert (await store.stats(b)).tiers[Tier.ARCHIVED].count == 0
        with pytest.raises(NotFoundError):
            await store.update_archive(b, self.record("x0", b))
        assert await store.unarchive_many(b, [self.memory("x0", "intruder")]) == 0
        assert (await self.one(store, b, "x0")).content == "twin text 0"
        assert set(await store.get_archives(a, ["x0"])) == {"x0"}
        assert [h.record.id for h in await store.search_archives(a, self.q(0), k=5)] == ["x0"]
        # archiving in b touches only b
        assert await store.archive_many(b, [self.record("x1", b)]) == 1
        assert set(await store.get_many(a, ["x1"])) == {"x1"}

    async def test_clearing_one_namespace_keeps_its_twin(
        self, store: MemoryStore, namespace: str, other_namespace: str
    ) -> None:
        a, b = namespace, other_namespace
        await self._twins(store, a, b)
        await store.clear(a)
        assert len(await store.get_many(b, ["x0", "x1", "x2"])) == 3
        assert len(await store.vector_search(b, self.q(0), tiers=ALL_LIVE, k=10)) == 3

    @pytest.mark.parametrize(("hostile", "sibling"), HOSTILE_NAMESPACES)
    async def test_hostile_namespaces_are_stored_literally(
        self, store: MemoryStore, hostile: str, sibling: str
    ) -> None:
        prefix = unique_namespace("hostile")
        evil, near = f"{prefix}-{hostile}", f"{prefix}-{sibling}"
        try:
            await self.put(store, evil, self.memory("h", "hostile text", metadata={"who": "evil"}))
            await self.put(store, near, self.memory("h", "hostile text", metadata={"who": "near"}))
            for ns, who in ((evil, "evil"), (near, "near")):
                found = await store.get_many(ns, ["h"])
                assert found["h"].metadata == {"who": who}
                assert found["h"].namespace == ns
                hits = await store.lexical_search(ns, "hostile", tiers=ALL_LIVE, k=10)
                assert [h.memory.metadata["who"] for h in hits] == [who]
                hits = await store.vector_search(ns, self.q(0), tiers=ALL_LIVE, k=10)
                assert [h.memory.metadata["who"] for h in hits] == [who]
                assert (await store.stats(ns)).total == 1
            assert {evil, near} <= set(await store.namespaces())
            assert await store.delete_many(evil, ["h"]) == 1
            assert set(await store.get_many(near, ["h"])) == {"h"}
        finally:
            await store.clear(evil)
            await store.clear(near)

    async def test_hostile_ids_are_stored_literally(
        self, store: MemoryStore, namespace: str
    ) -> None:
        memories = [self.memory(i, f"hostile id {n}") for n, i in enumerate(HOSTILE_IDS)]
        await self.put(store, namespace, *memories)
        found = await store.get_many(namespace, HOSTILE_IDS)
        assert set(found) == set(HOSTILE_IDS)
        for n, memory_id in enumerate(HOSTILE_IDS):
            assert found[memory_id].content == f"hostile id {n}"
        assert await store.list_ids(namespace) == sorted(HOSTILE_IDS)
        only = SearchFilter(ids=frozenset({HOSTILE_IDS[0], HOSTILE_IDS[5]}))
        hits = await store.vector_search(namespace, self.q(0), tiers=ALL_LIVE, k=20, filters=only)
        assert {h.memory.id for h in hits} == {HOSTILE_IDS[0], HOSTILE_IDS[5]}
        assert await store.delete_many(namespace, [HOSTILE_IDS[6]]) == 1
        assert len(await store.get_many(namespace, HOSTILE_IDS)) == len(HOSTILE_IDS) - 1
