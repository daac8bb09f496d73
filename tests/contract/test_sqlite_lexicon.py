"""Schema 5: the per-namespace lexical index (`backends.sqlite.lexicon`).

A schema-3 or -4 file (one FTS5 table whose BM25 statistics spanned every namespace)
is re-indexed when opened; so is a file indexed by another tokenizer version (another
stemmer release or Unicode table). Whatever the writes, the index the triggers keep
equals one rebuilt from the memories.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiered_memory.backends.sqlite import lexicon as sqlite_lexicon
from tiered_memory.backends.sqlite.migrations import SCHEMA_VERSION
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.lexicon import tokenizer_version
from tiered_memory.models import LIVE_TIERS, ArchiveRecord, Memory, Tier

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

# The lexical index of schemas 3 and 4, as sqlite_schema created it.
_SCHEMA_3_FTS = [
    """CREATE VIRTUAL TABLE memories_fts USING fts5(
        content, content='memories', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 2'
    )""",
    """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, content) VALUES (new.pk, new.content);
    END""",
    """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.pk, old.content);
    END""",
    """CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.pk, old.content);
        INSERT INTO memories_fts (rowid, content) VALUES (new.pk, new.content);
    END""",
    "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')",
]

TEXTS = {
    "a": ["the vault code is 4711", "coding the garden gate", "Ava likes the piano"],
    "b": ["vault codes everywhere", "nothing about it", "the codes of the vault"],
}


def _memory(memory_id: str, content: str) -> Memory:
    return Memory(id=memory_id, content=content, embedding=[1.0, 0.0], created_at=T0, updated_at=T0)


async def _fill(path: Path) -> None:
    store = await SQLiteMemoryStore.open(path)
    try:
        for ns, texts in TEXTS.items():
            await store.put_many(ns, [_memory(f"{ns}{i}", t) for i, t in enumerate(texts)])
    finally:
        await store.close()


def _rewrite_as_version(path: Path, version: int) -> None:
    """Drop the per-namespace index and build the FTS5 index of schemas 3-4 in its place."""
    conn = sqlite3.connect(path)
    try:
        for name in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER memories_lexicon_{name}")
        for table in ("lexicon_postings", "lexicon_documents", "lexicon_namespaces"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM meta WHERE key = 'lexicon_tokenizer'")
        for statement in _SCHEMA_3_FTS:
            conn.execute(statement)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        conn.commit()
    finally:
        conn.close()


def _index(conn: sqlite3.Connection) -> tuple[list[tuple[object, ...]], ...]:
    """The whole lexical index, by namespace name (numbers of `lexicon_namespaces` may
    differ between an index kept by triggers and a rebuilt one)."""
    return (
        conn.execute(
            "SELECT namespace, documents, tokens FROM lexicon_namespaces "
            "WHERE documents > 0 ORDER BY 1"
        ).fetchall(),
        conn.execute("SELECT pk, length FROM lexicon_documents ORDER BY 1").fetchall(),
        conn.execute(
            "SELECT n.namespace, p.term, p.pk, p.tf FROM lexicon_postings AS p "
            "JOIN lexicon_namespaces AS n ON n.id = p.ns ORDER BY 1, 2, 3"
        ).fetchall(),
    )


def _kept_equals_rebuilt(store: SQLiteMemoryStore) -> None:
    with store.database.write() as conn:
        conn.row_factory = None
        try:
            kept = _index(conn)
            conn.execute("SAVEPOINT rebuilt")
            sqlite_lexicon.rebuild(conn)
            rebuilt = _index(conn)
            conn.execute("ROLLBACK TO rebuilt")
            conn.execute("RELEASE rebuilt")
        finally:
            conn.row_factory = sqlite3.Row
    assert kept == rebuilt


async def _search(store: SQLiteMemoryStore, ns: str, text: str) -> list[tuple[str, float]]:
    hits = await store.lexical_search(ns, text, tiers=LIVE_TIERS, k=10)
    return [(h.memory.id, h.score) for h in hits]


@pytest.mark.parametrize("version", [3, 4])
async def test_an_fts5_file_is_reindexed_per_namespace(tmp_path: Path, version: int) -> None:
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    await _fill(fresh)
    await _fill(old)
    _rewrite_as_version(old, version)
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0] == 6

    migrated = await SQLiteMemoryStore.open(old)
    reference = await SQLiteMemoryStore.open(fresh)
    try:
        with migrated.database.read() as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        assert not {n for n in names if n.startswith("memories_fts")}
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        assert meta["lexicon_tokenizer"] == tokenizer_version()
        for ns in TEXTS:
            for query in ("vault code", "the codes", "piano garden"):
                assert await _search(migrated, ns, query) == await _search(reference, ns, query)
        assert [i for i, _ in await _search(migrated, "a", "vault")] == ["a0"]
        # and it stays in step with later writes
        await migrated.put_many("a", [_memory("a9", "a new vault")])
        await migrated.delete_many("b", ["b0"])
        _kept_equals_rebuilt(migrated)
    finally:
        await migrated.close()
        await reference.close()


async def test_an_index_of_another_tokenizer_version_is_rebuilt(tmp_path: Path) -> None:
    """Another stemmer release could stem a stored word differently; the delete trigger
    would then miss its postings. So the index is rebuilt, not trusted."""
    path = tmp_path / "memory.db"
    await _fill(path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE meta SET value = 'snowball-english-0.1' WHERE key = 'lexicon_tokenizer'"
        )
        conn.execute("UPDATE lexicon_postings SET term = term || 'x'")  # stems of another version
    store = await SQLiteMemoryStore.open(path)
    try:
        assert [i for i, _ in await _search(store, "b", "vault")] == ["b0", "b2"]
        _kept_equals_rebuilt(store)
    finally:
        await store.close()


_WORDS = st.sampled_from(["vault", "codes", "coding", "the", "Caf\u00e9", "CAFE", "piano", "4711"])
_TEXT = st.lists(_WORDS, min_size=0, max_size=6).map(" ".join)
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "cold", "archive"]),
        st.sampled_from(["a", "b"]),
        st.integers(0, 5),
        _TEXT,
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_the_triggers_keep_the_index_a_rebuild_would_build(
    ops: list[tuple[str, str, int, str]],
) -> None:
    async def run(folder: Path) -> None:
        store = await SQLiteMemoryStore.open(folder / "memory.db")
        try:
            for op, ns, n, text in ops:
                memory_id = f"m{n}"
                live = await store.get_many(ns, [memory_id])
                if op == "put" and not live and not await store.get_archives(ns, [memory_id]):
                    await store.put_many(ns, [_memory(memory_id, text)])
                elif op == "delete":
                    await store.delete_many(ns, [memory_id])
                elif op == "cold" and live:
                    await store.set_tier(ns, [memory_id], Tier.COLD, T0)
                elif op == "archive" and live:
                    record = ArchiveRecord(
                        id=memory_id,
                        namespace=ns,
                        summary="s",
                        storage_ref="x",
                        size_bytes=1,
                        checksum="0" * 64,
                        created_at=T0,
                        archived_at=T0,
                        archive_reason="test",
                    )
                    await store.archive_many(ns, [record])
            _kept_equals_rebuilt(store)
        finally:
            await store.close()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))
