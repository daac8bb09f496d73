"""The Weaviate store's archive records, offline: searches send the query's filters,
the flags backfill finds only records without them, and archive objects written before
records were filterable are rewritten once (no server; the I/O primitives are stubbed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from weaviate.collections.filters import _FilterToGRPC

from tiered_memory.backends.weaviate.filters import (
    after_condition,
    all_of,
    archive_where,
    flags_unknown_where,
)
from tiered_memory.backends.weaviate.mapping import (
    MetaKind,
    archive_to_properties,
    meta_property,
)
from tiered_memory.backends.weaviate.store import VECTOR, WeaviateMemoryStore
from tiered_memory.models import ArchiveRecord, MemoryType
from tiered_memory.ports import MetadataFilter, SearchFilter

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
QUERY = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)


def record(memory_id: str, **fields: Any) -> ArchiveRecord:
    base: dict[str, Any] = {
        "summary": f"summary of {memory_id}",
        "summary_embedding": [1.0, 0.0, 0.0],
        "memory_type": MemoryType.FACTUAL,
        "metadata": {"topic": "work"},
        "storage_ref": f"file:///a/{memory_id}.json",
        "size_bytes": 1,
        "checksum": "0" * 64,
        "created_at": T0,
        "archived_at": T0 + timedelta(days=200),
        "archive_reason": "test",
    }
    return ArchiveRecord(id=memory_id, namespace="ns", **{**base, **fields})


def as_object(r: ArchiveRecord) -> Any:
    return SimpleNamespace(
        properties=archive_to_properties(r),
        vector={VECTOR: r.summary_embedding},
        metadata=SimpleNamespace(distance=0.25),
    )


class Stubbed(WeaviateMemoryStore):
    """Reads answer from `objects` and record what was asked; writes are recorded."""

    def __init__(self, objects: Sequence[ArchiveRecord] = ()) -> None:
        super().__init__(url="http://localhost:1", prefix="TmUnit")
        self.objects = [as_object(r) for r in objects]
        self.queries: list[tuple[str, dict[str, Any]]] = []
        self.ensured: list[tuple[dict[str, MetaKind], tuple[str, ...]]] = []
        self.upserts: list[tuple[str, str | None, list[Any]]] = []

    async def dimension(self) -> int | None:
        return 3

    async def _ensure_meta(
        self, kinds: Mapping[str, MetaKind], collections: Sequence[str] | None = None
    ) -> None:
        self.ensured.append((dict(kinds), tuple(collections or ())))

    async def _upsert(self, collection: str, namespace: str | None, rows: Sequence[Any]) -> None:
        self.upserts.append((collection, namespace, list(rows)))

    async def _read(
        self,
        collection: str,
        namespace: str,
        action: str,
        call: Callable[[Any], Awaitable[Any]],
    ) -> Any:
        store = self

        class Query:
            async def near_vector(self, **kwargs: Any) -> Any:
                store.queries.append(("near_vector", kwargs))
                return SimpleNamespace(objects=store.objects)

            async def fetch_objects(self, **kwargs: Any) -> Any:
                store.queries.append(("fetch_objects", kwargs))
                return SimpleNamespace(objects=store.objects)

        assert collection == self.archive_name
        return await call(SimpleNamespace(query=Query()))


def wire(f: Any) -> Any:
    return None if f is None else _FilterToGRPC.convert(f)


async def test_search_archives_sends_the_query_s_filters() -> None:
    store = Stubbed([record("a")])
    filters = SearchFilter(
        memory_types=frozenset({MemoryType.FACTUAL}),
        metadata=(MetadataFilter("topic", "eq", "work"),),
        ids=frozenset({"a", "b"}),
    )
    hits = await store.search_archives("ns", QUERY, k=3, filters=filters)
    assert [(h.record.id, h.score) for h in hits] == [("a", 0.75)]
    [(kind, sent)] = store.queries
    assert kind == "near_vector"
    assert sent["limit"] == 3
    assert wire(sent["filters"]) == wire(archive_where("ns", filters))
    # the typed metadata property the filter reads exists on the archive collection
    assert store.ensured == [({meta_property("topic", "s"): "s"}, (store.archive_name,))]


async def test_search_archives_defaults_to_hiding_forgotten_and_superseded() -> None:
    store = Stubbed()
    await store.search_archives("ns", QUERY, k=3)
    assert wire(store.queries[0][1]["filters"]) == wire(archive_where("ns", SearchFilter()))


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilter(pinned=True),
        SearchFilter(ids=frozenset()),
        SearchFilter(memory_types=frozenset()),
    ],
)
async def test_an_archive_search_that_can_match_nothing_sends_nothing(
    filters: SearchFilter,
) -> None:
    store = Stubbed([record("a")])
    assert await store.search_archives("ns", QUERY, k=3, filters=filters) == []
    assert store.queries == []


async def test_scan_for_unknown_flags_asks_for_them_and_trusts_only_what_it_reads() -> None:
    """Whatever a server makes of absent properties, only records whose flags are
    really unknown come back."""
    known = record("k", do_not_inject=False, superseded=False)
    half = record("h", do_not_inject=True)
    store = Stubbed([record("u"), known, half])
    found = await store.scan_archives("ns", after_id="a", limit=7, flags_unknown=True)
    assert [r.id for r in found] == ["u", "h"]
    sent = store.queries[0][1]
    assert sent["limit"] == 7
    assert wire(sent["filters"]) == wire(all_of([after_condition("a"), flags_unknown_where()]))
    store.queries.clear()
    assert [r.id for r in await store.scan_archives("ns")] == ["u", "k", "h"]
    assert store.queries[0][1]["filters"] is None


async def test_written_records_get_their_typed_metadata_properties() -> None:
    store = Stubbed()
    await store._write_records("ns", [record("a", metadata={"topic": "work", "year": 2020})])
    assert store.ensured == [
        (
            {meta_property("topic", "s"): "s", meta_property("year", "n"): "n"},
            (store.archive_name,),
        )
    ]
    [(collection, namespace, rows)] = store.upserts
    assert (collection, namespace) == (store.archive_name, "ns")
    assert rows[0][1][meta_property("year", "n")] == 2020.0


class Migrating(Stubbed):
    """Archive pages per namespace, and the registry mark, in memory."""

    def __init__(self, pages: dict[str, list[list[ArchiveRecord]]], marked: bool) -> None:
        super().__init__()
        self.pages = pages
        self.marks: list[str] = ["archive-filters"] if marked else []
        self.written: list[tuple[str, list[str]]] = []
        self._read_batch = 2

    async def namespaces(self) -> list[str]:
        return sorted(self.pages)

    async def scan_archives(
        self,
        namespace: str,
        *,
        after_id: str | None = None,
        limit: int = 500,
        flags_unknown: bool = False,
    ) -> list[ArchiveRecord]:
        assert limit == self._read_batch
        assert not flags_unknown
        pages = self.pages[namespace]
        index = (
            0
            if after_id is None
            else next(i + 1 for i, page in enumerate(pages) if page and page[-1].id == after_id)
        )
        return pages[index] if index < len(pages) else []

    async def _write_records(self, namespace: str, records: Sequence[ArchiveRecord]) -> None:
        self.written.append((namespace, [r.id for r in records]))

    async def _marked(self, migration: str) -> bool:
        return migration in self.marks

    async def _mark(self, migration: str) -> None:
        self.marks.append(migration)


async def test_old_archive_objects_are_rewritten_once_then_marked() -> None:
    pages = {
        "a": [[record("1"), record("2")], [record("3")]],
        "b": [[record("4"), record("5")], []],
    }
    store = Migrating(pages, marked=False)
    await store._migrate_archives()
    written = [(ns, ids) for ns, ids in store.written if ids]
    assert written == [("a", ["1", "2"]), ("a", ["3"]), ("b", ["4", "5"])]
    assert store.marks == ["archive-filters"]
    store.written.clear()
    await store._migrate_archives()  # marked: nothing is read or written again
    assert store.written == []


async def test_a_migration_that_fails_is_not_marked_done() -> None:
    class Failing(Migrating):
        async def _write_records(self, namespace: str, records: Sequence[ArchiveRecord]) -> None:
            raise RuntimeError("server went away")

    store = Failing({"a": [[record("1")]]}, marked=False)
    with pytest.raises(RuntimeError):
        await store._migrate_archives()
    assert store.marks == []
