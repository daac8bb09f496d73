"""The contract suites against the embedded default: SQLite file and local folder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np
import pytest

from tiered_memory.backends.local.objects import (
    MAX_NAME,
    LocalFolderObjectStore,
    decode_name,
    encode_name,
)
from tiered_memory.backends.sqlite.codes import fidelity_of
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.migrations import SCHEMA_VERSION
from tiered_memory.backends.sqlite.sql import metadata_sql
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.errors import BackendUnavailableError, ConfigurationError, ValidationError
from tiered_memory.lexicon import MAX_QUERY_TERMS, query_terms
from tiered_memory.models import ACTIVE_TIERS, LIVE_TIERS, ArchiveRecord, Link, Memory, Tier
from tiered_memory.ports import (
    AccessRecord,
    MemoryPatch,
    MetadataFilter,
    ScanQuery,
    SearchFilter,
)

from .graph_contract import AssociationGraphContract
from .object_store_contract import HOSTILE_KEYS, ObjectStoreContract
from .store_contract import MemoryStoreContract


class TestSQLiteMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SQLiteMemoryStore]:
        store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
        try:
            yield store
        finally:
            await store.close()


class TestSQLiteAssociationGraph(AssociationGraphContract):
    @pytest.fixture
    async def graph(self, tmp_path: Path) -> AsyncIterator[SQLiteAssociationGraph]:
        # the documented wiring: the graph lives in the store's file
        store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
        graph = SQLiteAssociationGraph(store.database)
        try:
            yield graph
        finally:
            await graph.close()
            await store.close()


class TestLocalFolderObjectStore(ObjectStoreContract):
    @pytest.fixture
    async def objects(self, tmp_path: Path) -> AsyncIterator[LocalFolderObjectStore]:
        objects = LocalFolderObjectStore(tmp_path / "archive")
        try:
            yield objects
        finally:
            await objects.close()


# -- what only the embedded backends promise -----------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def memory(memory_id: str, vector: list[float], **fields: Any) -> Memory:
    return Memory(
        id=memory_id,
        content=fields.pop("content", f"memory {memory_id}"),
        embedding=vector,
        created_at=T0,
        updated_at=T0,
        **fields,
    )


class TestSQLiteFile:
    async def test_durability_pragmas_and_schema_version(self, store: SQLiteMemoryStore) -> None:
        with store.database.read() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert version.fetchone()[0] == str(SCHEMA_VERSION)

    async def test_data_survives_reopening(self, tmp_path: Path) -> None:
        path = tmp_path / "memory.db"
        first = await SQLiteMemoryStore.open(path)
        await first.put_many("ns", [memory("a", [1.0, 0.0])])
        await first.close()
        again = await SQLiteMemoryStore.open(path)  # schema creation is idempotent
        try:
            assert set(await again.get_many("ns", ["a"])) == {"a"}
            assert await again.dimension() == 2
        finally:
            await again.close()

    async def test_garbage_file_is_refused_at_open(self, tmp_path: Path) -> None:
        path = tmp_path / "garbage.db"
        path.write_bytes(b"this is not a database" * 500)
        with pytest.raises(BackendUnavailableError, match="not a SQLite database"):
            await SQLiteMemoryStore.open(path)

    @pytest.mark.parametrize("verify", [True, False])
    async def test_truncated_file_is_refused_at_open(self, tmp_path: Path, verify: bool) -> None:
        path = tmp_path / "memory.db"
        store = await SQLiteMemoryStore.open(path)
        await store.put_many(
            "ns", [memory(f"m{i}", [float(i), 1.0], content="x" * 2000) for i in range(200)]
        )
        await store.close()  # checkpoints the WAL into the main file
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(BackendUnavailableError):
            await SQLiteMemoryStore.open(path, verify=verify)

    async def test_a_short_tail_is_caught_without_the_full_check(self, tmp_path: Path) -> None:
        """Only the last page is missing: the schema still reads, the header does not add
        up, and the O(1) header check refuses the file even with verify=False."""
        path = tmp_path / "memory.db"
        store = await SQLiteMemoryStore.open(path)
        await store.put_many(
            "ns", [memory(f"m{i}", [float(i), 1.0], content="z" * 2000) for i in range(100)]
        )
        await store.close()
        data = path.read_bytes()
        path.write_bytes(data[:-4096])
        with pytest.raises(BackendUnavailableError, match="truncated"):
            await SQLiteMemoryStore.open(path, verify=False)

    async def test_a_wal_removed_by_another_process_s_close_during_open(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another process's last close checkpoints and deletes the `-wal` file; an
        open that looked for it just before must not fail on its absence (seen in the
        reliability suite's concurrent writers as a FileNotFoundError)."""
        path = tmp_path / "memory.db"
        store = await SQLiteMemoryStore.open(path)
        await store.put_many("ns", [memory("a", [1.0, 0.0])])
        await store.close()
        wal = path.with_name(path.name + "-wal")
        stat = Path.stat

        def vanished(self: Path, **kwargs: object) -> object:
            if self == wal:
                raise FileNotFoundError(2, "No such file or directory", str(self))
            return stat(self, **kwargs)  # type: ignore[arg-type]

        # seen, then gone when asked its size
        monkeypatch.setattr(Path, "exists", lambda self, **kw: self == wal or os.path.exists(self))
        monkeypatch.setattr(Path, "stat", vanished)
        again = await SQLiteMemoryStore.open(path)
        monkeypatch.undo()
        try:
            assert set(await again.get_many("ns", ["a"])) == {"a"}
        finally:
            await again.close()

    async def test_corrupt_pages_are_refused_at_open(self, tmp_path: Path) -> None:
        path = tmp_path / "memory.db"
        store = await SQLiteMemoryStore.open(path)
        await store.put_many(
            "ns", [memory(f"m{i}", [1.0, 1.0], content="y" * 3000) for i in range(50)]
        )
        await store.close()
        data = bytearray(path.read_bytes())
        page = 4096
        data[page * 3 : page * 6] = b"\xff" * (page * 3)  # scribble over b-tree pages
        path.write_bytes(bytes(data))
        with pytest.raises(BackendUnavailableError):
            await SQLiteMemoryStore.open(path)

    async def test_a_directory_is_a_configuration_error(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError):
            await SQLiteMemoryStore.open(tmp_path)

    async def test_newer_schema_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "memory.db"
        store = await SQLiteMemoryStore.open(path)
        with store.database.write() as conn:
            conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
        await store.close()
        with pytest.raises(ConfigurationError, match="upgrade"):
            await SQLiteMemoryStore.open(path)

    async def test_closed_store_raises_a_typed_error(self, tmp_path: Path) -> None:
        store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
        await store.close()
        await store.close()  # idempotent
        with pytest.raises(BackendUnavailableError, match="closed"):
            await store.get_many("ns", ["a"])

    async def test_a_locked_file_times_out_with_a_typed_error(self, tmp_path: Path) -> None:
        path = tmp_path / "memory.db"
        store = await SQLiteMemoryStore.open(path, busy_timeout=0.2)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holding the write lock
            with pytest.raises(BackendUnavailableError, match="locked"):
                await store.put_many("ns", [memory("a", [1.0, 0.0])])
            other.execute("ROLLBACK")
            await store.put_many("ns", [memory("a", [1.0, 0.0])])
            assert set(await store.get_many("ns", ["a"])) == {"a"}
        finally:
            other.close()
            await store.close()

    async def test_in_memory_database_for_tests(self) -> None:
        store = await SQLiteMemoryStore.open(":memory:")
        try:
            await store.put_many("ns", [memory("a", [1.0, 0.0])])
            assert set(await store.get_many("ns", ["a"])) == {"a"}
        finally:
            await store.close()

    async def test_dimension_is_forgotten_once_the_file_is_empty(
        self, store: SQLiteMemoryStore
    ) -> None:
        await store.put_many("ns", [memory("a", [1.0, 0.0])])
        await store.delete_many("ns", ["a"])
        assert await store.dimension() is None
        await store.put_many("ns", [memory("b", [1.0, 0.0, 0.0])])
        assert await store.dimension() == 3
        await store.clear(None)
        assert await store.dimension() is None


class TestSQLiteConcurrency:
    async def test_writes_from_another_connection_reach_the_vector_cache(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "memory.db"
        reader = await SQLiteMemoryStore.open(path)
        writer = await SQLiteMemoryStore.open(path)
        try:
            await writer.put_many("ns", [memory("a", [1.0, 0.0])])
            q = np.asarray([1.0, 0.0], dtype=np.float32)
            hits = await reader.vector_search("ns", q, tiers=LIVE_TIERS, k=5)
            assert [h.memory.id for h in hits] == ["a"]  # the reader's cache is now warm
            await writer.put_many("ns", [memory("b", [1.0, 0.1])])
            await writer.patch_many("ns", ["a"], MemoryPatch(do_not_inject=True))
            hits = await reader.vector_search("ns", q, tiers=LIVE_TIERS, k=5)
            assert [h.memory.id for h in hits] == ["b"]
            await writer.set_tier("ns", ["b"], Tier.COLD, T0)
            assert await reader.vector_search("ns", q, tiers=ACTIVE_TIERS, k=5) == []
        finally:
            await reader.close()
            await writer.close()

    async def test_other_tasks_wait_for_an_open_transaction(self, store: SQLiteMemoryStore) -> None:
        inside = asyncio.Event()
        release = asyncio.Event()
        order: list[str] = []

        async def transaction_that_fails() -> None:
            async with store.transaction():
                await store.put_many("ns", [memory("tx", [1.0, 0.0])])
                inside.set()
                await release.wait()
                order.append("tx done")
                raise RuntimeError("rolled back")

        async def bystander() -> None:
            await inside.wait()
            await store.put_many("ns", [memory("other", [0.0, 1.0])])
            order.append("bystander wrote")

        tx = asyncio.create_task(transaction_that_fails())
        by = asyncio.create_task(bystander())
        await inside.wait()
        await asyncio.sleep(0.05)
        assert order == []  # the bystander is waiting, not writing into the transaction
        release.set()
        with pytest.raises(RuntimeError):
            await tx
        await by
        assert order == ["tx done", "bystander wrote"]
        # the rollback took only the transaction's own write
        assert set(await store.get_many("ns", ["tx", "other"])) == {"other"}

    async def test_tasks_started_inside_a_transaction_join_it(
        self, store: SQLiteMemoryStore
    ) -> None:
        async def fail() -> None:
            async with store.transaction():
                await asyncio.gather(
                    store.put_many("ns", [memory("a", [1.0, 0.0])]),
                    store.put_many("ns", [memory("b", [0.0, 1.0])]),
                )
                raise RuntimeError("undo both")

        with pytest.raises(RuntimeError):
            await asyncio.wait_for(fail(), timeout=5)
        assert await store.get_many("ns", ["a", "b"]) == {}

    async def test_nested_transactions_use_savepoints(self, store: SQLiteMemoryStore) -> None:
        async with store.transaction():
            await store.put_many("ns", [memory("outer", [1.0, 0.0])])
            with contextlib.suppress(RuntimeError):
                async with store.transaction():
                    await store.put_many("ns", [memory("inner", [0.0, 1.0])])
                    raise RuntimeError("undo the inner block only")
        assert set(await store.get_many("ns", ["outer", "inner"])) == {"outer"}

    async def test_store_and_graph_roll_back_together(self, store: SQLiteMemoryStore) -> None:
        graph = SQLiteAssociationGraph(store.database)

        async def fail() -> None:
            async with store.transaction():
                await store.put_many("ns", [memory("a", [1.0, 0.0]), memory("b", [0.0, 1.0])])
                await graph.upsert_links("ns", [Link(source="a", target="b", weight=0.5)])
                raise RuntimeError("undo")

        with pytest.raises(RuntimeError):
            await fail()
        assert await store.get_many("ns", ["a", "b"]) == {}
        assert await graph.count_links("ns") == 0
        await graph.close()  # does not close the store's file
        assert await store.get_many("ns", ["a"]) == {}

    async def test_graph_opened_on_its_own(self, tmp_path: Path) -> None:
        graph = await SQLiteAssociationGraph.open(tmp_path / "graph.db")
        try:
            await graph.upsert_links("ns", [Link(source="a", target="b", weight=0.5)])
            assert await graph.count_links("ns") == 1
        finally:
            await graph.close()
        with pytest.raises(BackendUnavailableError):
            await graph.count_links("ns")


class TestLexicalPruning:
    async def test_words_in_half_the_texts_are_dropped_when_rarer_ones_exist(
        self, store: SQLiteMemoryStore
    ) -> None:
        """FTS5 gives such words idf 1e-6: they would only make every text a match."""
        texts = {f"c{i}": f"common filler number {i}" for i in range(9)}
        texts["r"] = "common and rare"
        await store.put_many("ns", [memory(i, [1.0, 0.0], content=t) for i, t in texts.items()])
        hits = await store.lexical_search("ns", "COMMON rare", tiers=LIVE_TIERS, k=20)
        assert [h.memory.id for h in hits] == ["r"]
        everything = await store.lexical_search("ns", "common", tiers=LIVE_TIERS, k=20)
        assert len(everything) == 10  # when every word is common, all of them are kept
        assert all(h.score >= 0 for h in everything)

    async def test_pruning_counts_the_whole_index(self, store: SQLiteMemoryStore) -> None:
        await store.put_many("ns", [memory("a", [1.0, 0.0], content="alpha beta")])
        await store.put_many(
            "other", [memory(f"o{i}", [1.0, 0.0], content=f"gamma {i}") for i in range(5)]
        )
        hits = await store.lexical_search("ns", "alpha beta", tiers=LIVE_TIERS, k=5)
        assert [h.memory.id for h in hits] == ["a"]

    @staticmethod
    async def _capped(tmp_path: Path) -> SQLiteMemoryStore:
        """60 texts of common words, two with a rare one, over a cap of 20 matches."""
        store = await SQLiteMemoryStore.open(tmp_path / "capped.db", lexical_rows=20)
        texts = {f"c{i}": f"the user said hello number {i}" for i in range(58)}
        texts["r1"] = "the user said zanzibar once"
        texts["r2"] = "zanzibar zanzibar again said the user"
        await store.put_many("ns", [memory(i, [1.0, 0.0], content=t) for i, t in texts.items()])
        await store.put_many("other", [memory("o", [1.0, 0.0], content="zanzibar elsewhere")])
        return store

    async def test_the_cap_keeps_rare_words(self, tmp_path: Path) -> None:
        """Above the cap, common words are left out of the query; the rare one still
        finds its texts, ranked by BM25, and never another namespace's."""
        store = await self._capped(tmp_path)
        try:
            hits = await store.lexical_search(
                "ns", "what the user said about Zanzibar", tiers=LIVE_TIERS, k=10
            )
            assert [h.memory.id for h in hits] == ["r2", "r1"]
            assert hits[0].score > hits[1].score > 0
            few = await store.lexical_search("ns", "zanzibar", tiers=LIVE_TIERS, k=1)
            assert [h.memory.id for h in few] == ["r2"]
        finally:
            await store.close()

    async def test_only_common_words_above_the_cap(self, tmp_path: Path) -> None:
        """No word is rare enough to be worth scoring: no lexical hit (and no pass over
        the whole index). `ids` lookups (explain, pinned memories) score the same words
        as a search, so a memory's lexical score does not depend on how it was found."""
        store = await self._capped(tmp_path)
        try:
            assert await store.lexical_search("ns", "the user said", tiers=LIVE_TIERS, k=5) == []
            ids = SearchFilter(ids=frozenset({"c3", "r1", "o"}))
            common = await store.lexical_search(
                "ns", "the user said hello", tiers=LIVE_TIERS, k=5, filters=ids
            )
            assert common == []
            rare = await store.lexical_search(
                "ns", "the user said zanzibar", tiers=LIVE_TIERS, k=5, filters=ids
            )
            everywhere = await store.lexical_search(
                "ns", "the user said zanzibar", tiers=LIVE_TIERS, k=5
            )
            assert [h.memory.id for h in rare] == ["r1"]  # "o" lives in another namespace
            assert rare[0].score == next(h.score for h in everywhere if h.memory.id == "r1")
        finally:
            await store.close()

    async def test_remembered_frequencies_follow_the_store(self, tmp_path: Path) -> None:
        """Frequencies are remembered between searches, but counted again once more
        than a tenth of the cap of rows were added: a word that became common is
        dropped like any other."""
        store = await self._capped(tmp_path)
        try:
            hits = await store.lexical_search("ns", "zanzibar", tiers=LIVE_TIERS, k=50)
            assert len(hits) == 2
            await store.put_many(
                "ns",
                [memory(f"z{i}", [1.0, 0.0], content=f"zanzibar {i}") for i in range(25)],
            )
            assert await store.lexical_search("ns", "zanzibar", tiers=LIVE_TIERS, k=50) == []
        finally:
            await store.close()

    async def test_reused_scores_see_every_write(self, tmp_path: Path) -> None:
        """The BM25 scores of the last words are reused only while nothing changed,
        whether this store or another connection to the file wrote."""
        path = tmp_path / "shared.db"
        store = await SQLiteMemoryStore.open(path)
        other = await SQLiteMemoryStore.open(path)
        try:
            await store.put_many("ns", [memory("a", [1.0, 0.0], content="quokka one")])
            await store.put_many("ns", [memory("x", [1.0, 0.0], content="unrelated")])
            assert len(await store.lexical_search("ns", "quokka", tiers=LIVE_TIERS, k=9)) == 1
            await store.put_many("ns", [memory("b", [1.0, 0.0], content="quokka two")])
            assert len(await store.lexical_search("ns", "quokka", tiers=LIVE_TIERS, k=9)) == 2
            await other.put_many("ns", [memory("c", [1.0, 0.0], content="quokka three")])
            hits = await store.lexical_search("ns", "quokka", tiers=LIVE_TIERS, k=9)
            assert {h.memory.id for h in hits} == {"a", "b", "c"}
            cold = await store.lexical_search("ns", "quokka", tiers=frozenset({Tier.COLD}), k=9)
            assert cold == []
        finally:
            await other.close()
            await store.close()

    async def test_ties_across_a_batch_boundary_come_newest_first(
        self, store: SQLiteMemoryStore
    ) -> None:
        """Equal BM25 scores come back newest first (not by id: these ids sort the other
        way), even when they span the rows fetched at once."""
        texts = {f"t{i:02d}": "same words here" for i in range(40)}
        for i, t in texts.items():  # one write each: the order they were remembered in
            await store.put_many("ns", [memory(i, [1.0, 0.0], content=t)])
        await store.put_many("ns", [memory("z", [1.0, 0.0], content="same words")])
        hits = await store.lexical_search("ns", "same words here", tiers=LIVE_TIERS, k=35)
        assert [h.memory.id for h in hits] == list(reversed(texts))[:35]

    async def test_filters_apply_before_k(self, store: SQLiteMemoryStore) -> None:
        texts = {f"a{i:02d}": "apple apple pie" for i in range(40)}
        texts["keep"] = "apple crumble and a long tail of other words"
        await store.put_many("ns", [memory(i, [1.0, 0.0], content=t) for i, t in texts.items()])
        await store.patch_many("ns", [i for i in texts if i != "keep"], MemoryPatch(pinned=True))
        hits = await store.lexical_search(
            "ns", "apple", tiers=LIVE_TIERS, k=3, filters=SearchFilter(pinned=False)
        )
        assert [h.memory.id for h in hits] == ["keep"]


class TestCosines:
    async def test_cosines_by_id_cached_or_not_and_per_namespace(
        self, store: SQLiteMemoryStore
    ) -> None:
        """The retriever's cosines for candidates found another way: from the cached
        rows when loaded, from SQLite otherwise; never another namespace's memory."""
        await store.put_many(
            "ns", [memory("a", [3.0, 4.0]), memory("b", [0.0, 2.0], tier=Tier.COLD)]
        )
        await store.put_many("other", [memory("o", [1.0, 0.0])])
        query = np.array([1.0, 0.0], dtype=np.float32)
        cold = await store.cosines("ns", query, ["a", "b", "o", "missing"])
        await store.vector_search("ns", query, tiers=LIVE_TIERS, k=5)  # loads the cache
        warm = await store.cosines("ns", query, ["a", "b", "o", "missing"])
        for found in (cold, warm):
            assert set(found) == {"a", "b"}
            assert found["a"] == pytest.approx(0.6)
            assert found["b"] == pytest.approx(0.0)


class TestRowMapping:
    async def test_rows_become_the_memories_validation_would_build(
        self, store: SQLiteMemoryStore
    ) -> None:
        """Rows are mapped without validation; the result must not differ from a
        validated Memory in any field, type or dump."""
        stored = memory(
            "a",
            [0.5, 0.25],
            tier=Tier.COLD,
            importance=0.7,
            pinned=True,
            metadata={"k": [1, "x"]},
            consolidated_from=["p", "q"],
            cold_since=T0,
            tier_changed_at=T0,
        )
        await store.put_many("ns", [stored, memory("b", [1.0, 0.0])])
        await store.record_access("ns", [AccessRecord("a", T0)])
        for with_embeddings in (False, True):
            for got in (
                await store.get_many("ns", ["a", "b"], with_embeddings=with_embeddings)
            ).values():
                again = Memory.model_validate(got.model_dump())
                assert got == again
                assert got.model_dump_json() == again.model_dump_json()
                assert got.model_fields_set == again.model_fields_set
                for name in Memory.model_fields:
                    assert type(getattr(got, name)) is type(getattr(again, name)), name


class TestUseBookkeeping:
    async def test_unsynced_writes_restore_full_sync(self, store: SQLiteMemoryStore) -> None:
        """Use counts commit with synchronous=NORMAL; everything else stays FULL (2),
        also after a failed bookkeeping write, and inside another transaction."""
        db = store.database

        def level() -> int:
            with db.read() as conn:
                return int(conn.execute("PRAGMA synchronous").fetchone()[0])

        await store.put_many("ns", [memory("a", [1.0, 0.0])])
        await store.record_access("ns", [AccessRecord("a", T0)])
        assert level() == 2
        seen: list[int] = []

        def fail() -> None:
            with db.write(fsync=False) as conn:
                seen.append(int(conn.execute("PRAGMA synchronous").fetchone()[0]))
                raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            fail()
        assert seen == [1]
        assert level() == 2
        async with store.transaction():
            await store.record_access("ns", [AccessRecord("a", T0)])
            assert level() == 2  # the outer commit is a synced one
        assert (await store.get_many("ns", ["a"]))["a"].use_count == 2


class TestVectorCacheConsistency:
    async def test_cache_matches_brute_force_after_random_writes(
        self, store: SQLiteMemoryStore
    ) -> None:
        """Every kind of write, interleaved with searches, against a numpy oracle."""
        rng = random.Random(7)
        dim = 6
        ns_list = ["n1", "n2"]
        next_id = 0
        for step in range(300):
            ns = rng.choice(ns_list)
            live = await store.list_ids(ns, limit=10_000)
            archived = await store.list_ids(ns, tiers=frozenset({Tier.ARCHIVED}), limit=10_000)
            action = rng.random()
            if action < 0.35 or not live:
                batch = []
                for _ in range(rng.randint(1, 4)):
                    next_id += 1
                    vector = [rng.uniform(-1, 1) for _ in range(dim)]
                    tier = rng.choice([Tier.HOT, Tier.WARM, Tier.COLD])
                    batch.append(memory(f"m{next_id:04d}", vector, tier=tier))
                await store.put_many(ns, batch)
            elif action < 0.5:
                await store.set_tier(
                    ns, rng.sample(live, min(3, len(live))), rng.choice(list(LIVE_TIERS)), T0
                )
            elif action < 0.65:
                await store.patch_many(
                    ns,
                    rng.sample(live, min(2, len(live))),
                    MemoryPatch(do_not_inject=rng.random() < 0.5, pinned=rng.random() < 0.5),
                )
            elif action < 0.75:
                await store.delete_many(ns, [rng.choice(live)])
            elif action < 0.87:
                victim = rng.choice(live)
                record = ArchiveRecord(
                    id=victim,
                    namespace=ns,
                    summary="s",
                    summary_embedding=[rng.uniform(-1, 1) for _ in range(dim)],
                    storage_ref="file:///x",
                    size_bytes=1,
                    checksum="0" * 64,
                    created_at=T0,
                    archived_at=T0,
                    archive_reason="test",
                )
                await store.archive_many(ns, [record])
            elif archived:
                back = rng.choice(archived)
                await store.unarchive_many(
                    ns, [memory(back, [rng.uniform(-1, 1) for _ in range(dim)])]
                )
            if step % 3 == 0:
                await self._check(store, ns, dim, rng)

    async def _check(self, store: SQLiteMemoryStore, ns: str, dim: int, rng: random.Random) -> None:
        q = np.asarray([rng.uniform(-1, 1) for _ in range(dim)], dtype=np.float32)
        tiers = frozenset(rng.sample(sorted(LIVE_TIERS), rng.randint(1, 3)))
        filters = SearchFilter(pinned=rng.choice([None, True, False]))
        got = await store.vector_search(ns, q, tiers=tiers, k=5, filters=filters)
        everything = await store.scan(ns, ScanQuery(tiers=tiers, limit=10_000))
        allowed = [
            m
            for m in everything
            if not m.do_not_inject and (filters.pinned is None or m.pinned == filters.pinned)
        ]
        full = await store.get_many(ns, [m.id for m in allowed], with_embeddings=True)
        qn = q / np.linalg.norm(q)
        expected = sorted(
            (
                (float(np.dot(qn, v) / np.linalg.norm(v)), mid)
                for mid, m in full.items()
                for v in [np.asarray(m.embedding, dtype=np.float32)]
            ),
            key=lambda t: (-t[0], t[1]),
        )[:5]
        assert [h.memory.id for h in got] == [mid for _, mid in expected]
        assert [h.score for h in got] == pytest.approx([s for s, _ in expected], abs=1e-5)
        archive_hits = await store.search_archives(ns, q, k=3)
        records = await store.scan_archives(ns, limit=10_000)
        # Archive scores are calibrated: cosine to the stored code / the code's fidelity.
        with store.database.read() as conn:
            fidelity = {
                row[0]: fidelity_of(row[1], dim)
                for row in conn.execute(
                    "SELECT id, summary_code FROM archives WHERE namespace = ?", (ns,)
                )
            }
        oracle = sorted(
            (
                float(np.dot(qn, v) / np.linalg.norm(v)) / fidelity[r.id],
                r.id,
            )
            for r in records
            for v in [np.asarray(r.summary_embedding, dtype=np.float32)]
        )
        best = sorted(oracle, key=lambda t: (-t[0], t[1]))[:3]
        assert [h.record.id for h in archive_hits] == [rid for _, rid in best]
        assert [h.score for h in archive_hits] == pytest.approx(
            [max(-1.0, min(1.0, s)) for s, _ in best], abs=1e-4
        )


class TestVectorCacheLifetime:
    async def test_a_rejected_batch_keeps_the_cache(self, store: SQLiteMemoryStore) -> None:
        q = np.asarray([1.0, 0.0], dtype=np.float32)
        await store.put_many("ns", [memory("a", [1.0, 0.0])])
        await store.vector_search("ns", q, tiers=LIVE_TIERS, k=1)
        cached = store._vectors.cache.get(("ns", "hot"))
        assert cached is not None
        with pytest.raises(ValidationError):
            await store.put_many("ns", [memory("b", [1.0, 0.0]), memory("a", [0.0, 1.0])])
        assert store._vectors.cache.get(("ns", "hot")) is cached

    async def test_a_rolled_back_write_drops_the_cache(self, store: SQLiteMemoryStore) -> None:
        q = np.asarray([1.0, 0.0], dtype=np.float32)
        await store.put_many("ns", [memory("a", [0.0, 1.0])])
        await store.vector_search("ns", q, tiers=LIVE_TIERS, k=1)

        async def fail() -> None:
            async with store.transaction():
                await store.put_many("ns", [memory("b", [1.0, 0.0])])
                raise RuntimeError("undo")

        with pytest.raises(RuntimeError):
            await fail()
        assert store._vectors.cache.get(("ns", "hot")) is None
        hits = await store.vector_search("ns", q, tiers=LIVE_TIERS, k=1)
        assert [h.memory.id for h in hits] == ["a"]


class TestQueryTranslation:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("hello world", ["hello", "world"]),
            ('say "hi"', ["say", "hi"]),
            ("AND OR NOT", ["and", "or", "not"]),
            ("NEAR(a, b)", ["near", "a", "b"]),
            ("'; DROP TABLE memories; --", ["drop", "tabl", "memori"]),
            ("col:value*", ["col", "valu"]),
            ("caf\u00e9 CAFE", ["cafe"]),
            ("NA\u00cfVE", ["naiv"]),
            ("snake_case", ["snake", "case"]),
            ("running runs ran", ["run", "ran"]),
            ('" * ) (', []),
            ("", []),
        ],
    )
    def test_query_terms_are_plain_words(self, text: str, expected: list[str]) -> None:
        """No query syntax exists: operators, quotes and columns are words or nothing."""
        assert query_terms(text) == expected

    def test_query_terms_are_capped(self) -> None:
        terms = query_terms(" ".join(f"w{i}" for i in range(500)))
        assert len(terms) == MAX_QUERY_TERMS

    @pytest.mark.parametrize("op", ["gt", "lt"])
    def test_ordering_filters_refuse_non_scalars(self, op: str) -> None:
        with pytest.raises(ValidationError):
            metadata_sql(MetadataFilter("k", op, [1, 2]))  # type: ignore[arg-type]

    def test_unknown_filter_op_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="unknown metadata filter op"):
            metadata_sql(MetadataFilter("k", "regex", "x"))  # type: ignore[arg-type]


def _tree(root: Path) -> list[Path]:
    return list(root.rglob("*"))


def _read(path: Path) -> bytes:
    return path.read_bytes()


class TestLocalFolderLayout:
    @pytest.mark.parametrize("key", HOSTILE_KEYS)
    def test_encoded_names_are_plain_and_short(self, key: str) -> None:
        name = encode_name(key)
        assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_%ABCDEF~")
        assert not name.startswith(".")
        assert len(name) <= MAX_NAME
        assert decode_name(name) in (key, None)

    def test_names_are_case_and_normalisation_safe(self) -> None:
        names = {encode_name(k) for k in ("Key", "key", "KEY", "\u00e9", "e\u0301")}
        assert len({n.lower() for n in names}) == 5

    def test_windows_device_names_are_escaped(self) -> None:
        assert encode_name("con") == "%63on"
        assert decode_name("%63on") == "con"

    async def test_hostile_names_stay_inside_the_root(self, tmp_path: Path) -> None:
        root = tmp_path / "archive"
        objects = LocalFolderObjectStore(root)
        for ns in ("../up", "/", ".."):
            for key in HOSTILE_KEYS:
                await objects.put(ns, key, b"x")
        everything = _tree(tmp_path)
        assert [p for p in everything if root not in p.parents and p != root] == []
        files = [p for p in everything if p.is_file()]
        # every file sits exactly at {root}/{namespace}/{name}, and none is left half-written
        assert {p.parent.parent for p in files} == {root}
        assert len({p.parent for p in files}) == 3
        assert not [p for p in files if p.name.endswith(".tmp")]

    async def test_ref_is_a_file_uri_of_the_object(self, tmp_path: Path) -> None:
        objects = LocalFolderObjectStore(tmp_path / "archive")
        await objects.put("ns", "a/b", b"payload")
        ref = objects.ref("ns", "a/b")
        assert ref.startswith("file://")
        assert _read(Path(url2pathname(urlparse(ref).path))) == b"payload"

    async def test_nothing_is_created_before_the_first_write(self, tmp_path: Path) -> None:
        objects = LocalFolderObjectStore(tmp_path / "archive")
        assert await objects.list("ns") == []
        assert await objects.head("ns", "k") is None
        assert not (tmp_path / "archive").exists()
