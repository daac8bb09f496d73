"""The shape of add_many's writes in the embedded store (issue 19): which indexes and
statements a write pays for. Counted (statements, plans, rows), never timed."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.backends.sqlite.bulk import insert_rows
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.errors import ValidationError
from tiered_memory.models import LIVE_TIERS, Link, LinkKind, Memory
from tiered_memory.ports import Vector

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "adds"
DIM = 8


def _memories(n: int, start: int = 0) -> list[Memory]:
    rng = np.random.default_rng(start)
    return [
        Memory(
            id=f"m{i:04d}",
            namespace=NS,
            content=f"memory number {i} about topic {i % 7}",
            embedding=[float(x) for x in rng.normal(size=DIM)],
            created_at=T0 + timedelta(seconds=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(start, start + n)
    ]


def _link(a: str, b: str, weight: float = 0.5) -> Link:
    return Link(source=a, target=b, weight=weight, kind=LinkKind.SIMILAR)


def _indexes(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
            )
        }


async def test_links_have_no_index_by_target(tmp_path: Path) -> None:
    """Every auto-link wrote two entries at random places of an index on (namespace,
    target) that only dropping a node read; a file that has it loses it when opened."""
    path = tmp_path / "m.db"
    store = await SQLiteMemoryStore.open(path)
    await store.close()
    assert "links_target" not in _indexes(path, "links")
    with sqlite3.connect(path) as conn:  # as an older library left the file
        conn.execute("CREATE INDEX links_target ON links (namespace, target)")
    store = await SQLiteMemoryStore.open(path)
    await store.close()
    assert "links_target" not in _indexes(path, "links")


async def test_dropping_nodes_deletes_both_rows_of_each_link_by_key(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    graph = SQLiteAssociationGraph(store.database)
    try:
        await store.put_many(NS, _memories(6))
        await graph.upsert_links(
            NS,
            [
                _link("m0000", "m0001"),
                _link("m0002", "m0000"),
                _link("m0001", "m0002"),
                _link("m0003", "m0004"),
                _link("m0000", "m0005"),
            ],
        )
        await graph.upsert_links("other", [_link("m0000", "m0001")])
        dropped = await graph.drop_nodes(NS, ["m0000", "m0005"])
        assert sorted((x.source, x.target) for x in dropped) == [
            ("m0000", "m0001"),
            ("m0000", "m0002"),
            ("m0000", "m0005"),
            ("m0005", "m0000"),
        ]
        with store.database.read() as conn:
            left = sorted(
                (r[0], r[1], r[2])
                for r in conn.execute("SELECT namespace, source, target FROM links")
            )
            plan = " ".join(
                str(r[3])
                for r in conn.execute(
                    "EXPLAIN QUERY PLAN DELETE FROM links "
                    "WHERE namespace = ? AND source = ? AND target = ?",
                    (NS, "a", "b"),
                )
            )
        assert left == [
            ("adds", "m0001", "m0002"),
            ("adds", "m0002", "m0001"),
            ("adds", "m0003", "m0004"),
            ("adds", "m0004", "m0003"),
            ("other", "m0000", "m0001"),
            ("other", "m0001", "m0000"),
        ]
        assert "PRIMARY KEY" in plan
        assert "SCAN" not in plan
    finally:
        await store.close()


async def test_put_vectors_many_stores_the_arrays_bit_exact(tmp_path: Path) -> None:
    """add_many's path (`SupportsPutVectors`): the embeddings come as float32 arrays
    beside memories that carry none, and are stored byte for byte as put_many would."""
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    try:
        batch = _memories(5)
        vectors = [np.asarray(m.embedding, dtype=np.float32) for m in batch]
        vectors[0][:3] = [-0.0, np.float32(1e-45), 1.5e18]
        bare = [m.model_copy(update={"embedding": None}) for m in batch]
        await store.put_vectors_many(NS, bare, vectors)
        with store.database.read() as conn:
            stored = dict(
                conn.execute(
                    "SELECT m.id, v.embedding FROM memories AS m "
                    "JOIN memory_vectors AS v ON v.pk = m.pk"
                ).fetchall()
            )
        expected = {m.id: v.astype("<f4").tobytes() for m, v in zip(batch, vectors, strict=True)}
        assert stored == expected
        bad = np.full(DIM, np.nan, dtype=np.float32)
        with pytest.raises(ValidationError):
            await store.put_vectors_many(NS, _memories(1, 10), [bad])
        with pytest.raises(ValidationError):
            await store.put_vectors_many(NS, _memories(2, 20), vectors[:1])
        assert len(await store.get_many(NS, ["m0010", "m0020"])) == 0
    finally:
        await store.close()


async def test_add_many_hands_the_embedded_store_its_arrays(tmp_path: Path) -> None:
    """No embedding becomes a list of floats on the way in (~25 us a 384-d memory)."""
    memory = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), clock=ManualClock(T0)
    )
    calls: list[str] = []
    store = memory.store
    assert isinstance(store, SQLiteMemoryStore)
    put_many, put_vectors_many = store.put_many, store.put_vectors_many

    async def spy_lists(namespace: str, memories: Sequence[Memory]) -> None:
        calls.append("put_many")
        await put_many(namespace, memories)

    async def spy_arrays(
        namespace: str, memories: Sequence[Memory], vectors: Sequence[Vector]
    ) -> None:
        calls.append("put_vectors_many")
        assert all(m.embedding is None for m in memories)
        await put_vectors_many(namespace, memories, vectors)

    store.put_many = spy_lists  # type: ignore[method-assign]
    store.put_vectors_many = spy_arrays  # type: ignore[method-assign]
    try:
        added = await memory.add_many(["the garden needs water", "the car needs oil"], namespace=NS)
        found = await memory.search("garden water", namespace=NS, k=1)
    finally:
        await memory.close()
    assert calls == ["put_vectors_many"]
    assert [m.embedding for m in added] == [None, None]
    assert found[0].memory.id == added[0].id


class _Counting:
    """The store's connection, counting the runs of each statement: one per `execute`,
    one per row of `executemany` (each row runs the statement again)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.runs: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self.runs.append(" ".join(sql.split()))
        return self._conn.execute(sql, *args)

    def executemany(self, sql: str, rows: Iterable[Any]) -> sqlite3.Cursor:
        listed = list(rows)
        self.runs.extend([" ".join(sql.split())] * len(listed))
        return self._conn.executemany(sql, listed)

    def count(self, prefix: str) -> int:
        return sum(sql.startswith(prefix) for sql in self.runs)


@contextlib.contextmanager
def _counting(store: SQLiteMemoryStore) -> Iterator[_Counting]:
    database = store.database
    conn = database._connection()
    counting = _Counting(conn)
    database._conn = counting  # type: ignore[assignment]
    try:
        yield counting
    finally:
        database._conn = conn


async def test_a_batch_is_written_in_a_few_statements_per_table(tmp_path: Path) -> None:
    """Memories, vectors, documents and postings go in as multi-row statements (`bulk`):
    run once per row, each INSERT on `memories` (which has triggers) opened a statement
    transaction of its own, and the batch took twice as long. The vectors go in by the
    pks given to the rows, and the texts are indexed from the batch, not read back."""
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    try:
        with _counting(store) as counted:
            await store.put_many(NS, _memories(300))
        # 300 = 256 + 32 + 4 * 3: five statements each
        assert counted.count("INSERT INTO memories ") == 5
        assert counted.count("INSERT INTO memory_vectors ") == 5
        assert counted.count("INSERT INTO lexicon_documents ") == 5
        assert 0 < counted.count("INSERT INTO lexicon_recent ") < 300 // 4
        assert counted.count("SELECT m.pk, m.namespace, m.content") == 0
        with store.database.read() as read:
            joined = read.execute(
                "SELECT count(*) FROM memories AS m JOIN memory_vectors AS v ON v.pk = m.pk "
                "JOIN lexicon_documents AS d ON d.pk = m.pk"
            ).fetchone()[0]
            pks = [r[0] for r in read.execute("SELECT pk FROM memories ORDER BY id")]
        assert joined == 300
        assert pks == list(range(1, 301))
        found = await store.lexical_search(NS, "topic", tiers=LIVE_TIERS, k=400)
        assert len(found) == 300
    finally:
        await store.close()


async def test_links_are_upserted_in_a_few_statements(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "m.db")
    graph = SQLiteAssociationGraph(store.database)
    try:
        await store.put_many(NS, _memories(60))
        links = [_link(f"m{i:04d}", f"m{j:04d}", 0.4) for i in range(20) for j in (i + 20, i + 40)]
        await graph.upsert_links(NS, links)
        # stronger on half: those take the new weight and kind, the rest keep theirs
        again = [
            Link(source=x.source, target=x.target, weight=w, kind=LinkKind.EXPLICIT)
            for x, w in zip(links, [0.9, 0.1] * 20, strict=True)
        ]
        with _counting(store) as counted:
            await graph.upsert_links(NS, again)
        # 80 rows = 32 * 2 + 4 * 4
        assert counted.count("INSERT INTO links") == 6
        mine = await graph.links_of(NS, ["m0000"])
        out = {(x.source, x.target): (x.weight, x.kind) for x in mine}
        assert out == {
            ("m0000", "m0020"): (0.9, LinkKind.EXPLICIT),
            ("m0000", "m0040"): (0.4, LinkKind.SIMILAR),
        }
        assert await graph.count_links(NS) == 40
    finally:
        await store.close()


@pytest.mark.parametrize("limit", [None, 100, 7])
def test_bulk_rows_keep_their_order_within_the_variable_limit(limit: int | None) -> None:
    conn = sqlite3.connect(":memory:")
    if limit is not None:
        if not hasattr(conn, "setlimit"):
            pytest.skip("sqlite3 cannot lower its limits before Python 3.11")
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT, c BLOB)")
    rows = [(i, f"row {i}", bytes([i % 256])) for i in range(1000)]
    insert_rows(conn, "INSERT INTO t (a, b, c)", iter(rows), 3)
    assert conn.execute("SELECT a, b, c FROM t ORDER BY rowid").fetchall() == rows
    with pytest.raises(ValueError, match="rows of 3"):
        insert_rows(conn, "INSERT INTO t (a, b, c)", [(1, "x")], 3)
    insert_rows(conn, "INSERT INTO t (a, b, c)", [], 3)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1000
