"""Schemas 5 and 6: the per-namespace lexical index (`backends.sqlite.lexicon`).

A schema-3 or -4 file (one FTS5 table whose BM25 statistics spanned every namespace)
is re-indexed when opened; so is a file indexed by another tokenizer version (another
stemmer release or Unicode table). A schema-5 file (per-row insert trigger) gets the
batch write path of schema 6 and keeps its index. Whatever the writes, the index kept
equals one rebuilt from the memories, and the batch path writes the postings the
per-row triggers of schema 5 wrote.
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

from tests.schema_7 import put_texts_back, schema_7_triggers
from tiered_memory.backends.sqlite import lexicon as sqlite_lexicon
from tiered_memory.backends.sqlite.migrations import SCHEMA_VERSION
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.lexicon import query_terms, tokenizer_version
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
        put_texts_back(conn)
        for name in ("queue", "unindex", "reindex"):
            conn.execute(f"DROP TRIGGER memories_lexicon_{name}")
        for table in (
            "lexicon_postings",
            "lexicon_middle",
            "lexicon_recent",
            "lexicon_documents",
            "lexicon_namespaces",
        ):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM meta WHERE key = 'lexicon_tokenizer'")
        for statement in _SCHEMA_3_FTS:
            conn.execute(statement)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        conn.commit()
    finally:
        conn.close()


def _index(
    conn: sqlite3.Connection, *, lengths: bool = True
) -> tuple[list[tuple[object, ...]], ...]:
    """The whole lexical index, by namespace name (numbers of `lexicon_namespaces` may
    differ between an index kept by triggers and a rebuilt one)."""
    return (
        conn.execute(
            "SELECT namespace, documents, tokens FROM lexicon_namespaces "
            "WHERE documents > 0 ORDER BY 1"
        ).fetchall(),
        conn.execute("SELECT pk, length FROM lexicon_documents ORDER BY 1").fetchall(),
        conn.execute(
            f"SELECT n.namespace, p.term, p.pk, p.tf{', p.length' if lengths else ''} FROM "
            "(SELECT * FROM lexicon_postings UNION ALL SELECT * FROM lexicon_middle "
            "UNION ALL SELECT * FROM lexicon_recent) AS p "
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
            # its temporary table of term counts is gone again
            assert not conn.execute("SELECT name FROM temp.sqlite_master").fetchall()
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
        for table in ("lexicon_postings", "lexicon_middle", "lexicon_recent"):  # another version
            conn.execute(f"UPDATE {table} SET term = term || 'x'")
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
        limits = sqlite_lexicon.RECENT_POSTINGS, sqlite_lexicon.MIDDLE_POSTINGS
        # postings in all three trees, and moves between them
        sqlite_lexicon.RECENT_POSTINGS, sqlite_lexicon.MIDDLE_POSTINGS = 3, 7
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
            sqlite_lexicon.RECENT_POSTINGS, sqlite_lexicon.MIDDLE_POSTINGS = limits
            await store.close()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))


# -- schema 6: the batch write path --------------------------------------------------

# The per-row triggers of schema 5, verbatim: the reference the batch path must equal.
_SCHEMA_5_NS = "(SELECT id FROM lexicon_namespaces WHERE namespace = {row}.namespace)"


def _schema_5_index(row: str) -> list[str]:
    return [
        f"""INSERT INTO lexicon_namespaces (namespace, documents, tokens)
            VALUES ({row}.namespace, 1, tm_length({row}.content))
            ON CONFLICT (namespace) DO UPDATE
            SET documents = documents + 1, tokens = tokens + excluded.tokens""",
        f"""INSERT INTO lexicon_documents (pk, length)
            VALUES ({row}.pk, tm_length({row}.content))""",
        f"""INSERT INTO lexicon_postings (ns, term, pk, tf)
            SELECT {_SCHEMA_5_NS.format(row=row)}, j.key, {row}.pk, j.value
            FROM json_each(tm_terms({row}.content)) AS j""",
    ]


def _schema_5_unindex(row: str) -> list[str]:
    return [
        f"""DELETE FROM lexicon_postings WHERE ns = {_SCHEMA_5_NS.format(row=row)}
            AND pk = {row}.pk
            AND term IN (SELECT key FROM json_each(tm_terms({row}.content)))""",
        f"DELETE FROM lexicon_documents WHERE pk = {row}.pk",
        f"""UPDATE lexicon_namespaces
            SET documents = documents - 1, tokens = tokens - tm_length({row}.content)
            WHERE namespace = {row}.namespace""",
    ]


def _schema_5_triggers() -> list[str]:
    def trigger(name: str, event: str, statements: list[str]) -> str:
        body = ";\n".join(statements)
        return f"CREATE TRIGGER {name} AFTER {event} ON memories BEGIN\n{body};\nEND"

    return [
        trigger("memories_lexicon_insert", "INSERT", _schema_5_index("new")),
        trigger("memories_lexicon_delete", "DELETE", _schema_5_unindex("old")),
        trigger(
            "memories_lexicon_update",
            "UPDATE OF content, namespace",
            [*_schema_5_unindex("old"), *_schema_5_index("new")],
        ),
    ]


_PIECES = st.sampled_from(
    [
        "vault",
        "codes",
        "Coding",
        "the",
        "4711",
        "Caf\u00e9",
        "cafe\u0301",
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
        "\U0001f600\U0001f680",
        "snake_case",
        "",
    ]
)
_DOC = st.one_of(st.lists(_PIECES, max_size=8).map(" ".join), st.text(max_size=20))
_BATCHES = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.lists(_DOC, min_size=1, max_size=8)),
    min_size=1,
    max_size=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=_BATCHES, repeat=st.booleans())
def test_the_batch_path_writes_what_the_per_row_triggers_wrote(
    batches: list[tuple[str, list[str]]], repeat: bool
) -> None:
    """Random texts (empty, emoji, CJK, combining marks; the same text several times in
    one batch when `repeat`), put in batches: the index equals the one schema 5's
    per-row insert trigger builds from the same rows, one INSERT at a time."""

    async def run(folder: Path) -> None:
        store = await SQLiteMemoryStore.open(folder / "memory.db")
        try:
            for b, (ns, texts) in enumerate(batches):
                docs = [t for t in texts for _ in range(2 if repeat else 1)]
                await store.put_many(
                    ns, [_memory(f"m{b}-{i}", text) for i, text in enumerate(docs)]
                )
            with store.database.read() as conn:
                conn.row_factory = None
                try:
                    rows = conn.execute(
                        "SELECT m.pk, m.namespace, t.content FROM memories AS m "
                        "JOIN memory_texts AS t ON t.pk = m.pk ORDER BY m.pk"
                    ).fetchall()
                    kept = _index(conn)
                finally:
                    conn.row_factory = sqlite3.Row
        finally:
            await store.close()
        reference = sqlite3.connect(":memory:")
        try:
            sqlite_lexicon.register_functions(reference)
            reference.execute(
                "CREATE TABLE memories (pk INTEGER PRIMARY KEY, namespace TEXT, content TEXT)"
            )
            reference.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            for statement in sqlite_lexicon.SCHEMA[:5]:  # the tables, not the triggers
                reference.execute(statement)
            for statement in _schema_5_triggers():
                reference.execute(statement)
            for row in rows:  # one row at a time, as the per-row triggers saw them
                reference.execute("INSERT INTO memories VALUES (?, ?, ?)", row)
            # schema 5's postings had no length: compared without it (the lengths are
            # `test_postings_carry_their_documents_length`'s)
            assert kept[:2] == _index(reference)[:2]
            assert [r[:4] for r in kept[2]] == list(_index(reference, lengths=False)[2])
        finally:
            reference.close()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))


def _rewrite_as_schema_5(path: Path) -> None:
    """The file as schema 5 left it: one postings table, the per-row triggers."""
    conn = sqlite3.connect(path)
    try:
        sqlite_lexicon.register_functions(conn)
        sqlite_lexicon.merge(conn)
        put_texts_back(conn)
        for name in ("queue", "unindex", "reindex"):
            conn.execute(f"DROP TRIGGER memories_lexicon_{name}")
        conn.execute("DROP TABLE lexicon_recent")
        conn.execute("DROP TABLE lexicon_middle")
        for statement in _schema_5_triggers():
            conn.execute(statement)
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()


async def test_a_schema_5_file_gets_the_batch_write_path(tmp_path: Path) -> None:
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    await _fill(fresh)
    await _fill(old)
    _rewrite_as_schema_5(old)

    migrated = await SQLiteMemoryStore.open(old)
    reference = await SQLiteMemoryStore.open(fresh)
    try:
        with migrated.database.read() as conn:
            triggers = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            }
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        assert {"memories_lexicon_queue", "memories_lexicon_unindex"} <= triggers
        assert not triggers & {"memories_lexicon_insert", "memories_lexicon_delete"}
        assert meta["schema_version"] == str(SCHEMA_VERSION) == "8"
        for ns in TEXTS:
            for query in ("vault code", "the codes", "piano garden"):
                assert await _search(migrated, ns, query) == await _search(reference, ns, query)
        await migrated.put_many("a", [_memory("a9", "a new vault")])
        await migrated.delete_many("b", ["b0"])
        _kept_equals_rebuilt(migrated)
        assert {i for i, _ in await _search(migrated, "a", "vault")} == {"a0", "a9"}
    finally:
        await migrated.close()
        await reference.close()


def _copy_row(conn: sqlite3.Connection, source: str, memory_id: str, content: str) -> None:
    """Insert a copy of memory `source` of namespace "a" with another id and text, by
    plain SQL (not through the store)."""
    names = [
        str(r[1]) for r in conn.execute("PRAGMA table_info(memories)") if r[1] not in ("pk", "id")
    ]
    conn.execute(
        f"INSERT INTO memories (id, {', '.join(names)}) "
        f"SELECT ?, {', '.join(names)} FROM memories WHERE namespace = 'a' AND id = ?",
        (memory_id, source),
    )
    conn.execute(
        "INSERT INTO memory_texts (pk, content) VALUES (last_insert_rowid(), ?)", (content,)
    )


async def test_a_connection_without_the_functions_cannot_insert_a_memory(
    tmp_path: Path,
) -> None:
    """The sqlite3 shell can read the file, but an INSERT fails instead of leaving a
    memory out of the index."""
    path = tmp_path / "memory.db"
    await _fill(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 6
        with pytest.raises(sqlite3.OperationalError, match="tm_queue"):
            _copy_row(conn, "a0", "x", "vault")
    finally:
        conn.close()


async def test_a_row_inserted_another_way_is_indexed_before_it_commits(tmp_path: Path) -> None:
    """Only `MemoryTable.insert` indexes its rows at once; any other INSERT on the
    library's connection is indexed when its transaction (or savepoint) commits."""
    store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
    try:
        await store.put_many("a", [_memory("a0", "the vault code")])
        with store.database.write() as conn:
            _copy_row(conn, "a0", "x", "a vault of codes")
        _kept_equals_rebuilt(store)
        assert {i for i, _ in await _search(store, "a", "codes")} == {"a0", "x"}
    finally:
        await store.close()


async def test_recent_postings_are_merged_into_the_big_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past RECENT_POSTINGS, the recent postings move into `lexicon_middle`, and past
    MIDDLE_POSTINGS those into `lexicon_postings`; scores and the index are the same as
    without a move."""
    merged, kept = tmp_path / "merged.db", tmp_path / "kept.db"
    await _fill(kept)
    monkeypatch.setattr(sqlite_lexicon, "RECENT_POSTINGS", 2)
    monkeypatch.setattr(sqlite_lexicon, "MIDDLE_POSTINGS", 5)
    await _fill(merged)
    store = await SQLiteMemoryStore.open(merged)
    reference = await SQLiteMemoryStore.open(kept)
    try:
        with store.database.read() as conn:
            count = {
                table: conn.execute(f"SELECT count(*) FROM lexicon_{table}").fetchone()[0]
                for table in ("recent", "middle", "postings")
            }
        assert count["recent"] < 2
        assert count["middle"] < 5
        assert count["postings"] > 0
        with reference.database.read() as conn:
            assert conn.execute("SELECT count(*) FROM lexicon_postings").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM lexicon_middle").fetchone()[0] == 0
        for ns in TEXTS:
            for query in ("vault code", "the codes", "piano garden"):
                assert await _search(store, ns, query) == await _search(reference, ns, query)
            assert await store.lexical_statistics(
                ns, "vault codes"
            ) == await reference.lexical_statistics(ns, "vault codes")
        await store.delete_many("b", ["b0"])
        _kept_equals_rebuilt(store)
    finally:
        await store.close()
        await reference.close()


def _tree_counts(store: SQLiteMemoryStore) -> dict[str, int]:
    with store.database.read() as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM lexicon_{table}").fetchone()[0]
            for table in ("recent", "middle", "postings")
        }


async def test_a_full_middle_tree_drains_into_the_big_one_a_slice_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MIDDLE_POSTINGS, the middle tree moves into the big one DRAIN_POSTINGS
    postings a write, in key order, not all in one write: at 1M memories the move of
    its ~1M postings took one add_many 3.2-3.8 s and ~360 MB of WAL and checkpoint,
    holding the write lock all along. Every write sees one whole index meanwhile:
    the scores are those of a store that never moved a posting, and the index is the
    one a rebuild makes."""
    merged, kept = tmp_path / "merged.db", tmp_path / "kept.db"
    monkeypatch.setattr(sqlite_lexicon, "RECENT_POSTINGS", 4)
    monkeypatch.setattr(sqlite_lexicon, "MIDDLE_POSTINGS", 30)
    monkeypatch.setattr(sqlite_lexicon, "DRAIN_POSTINGS", 7)
    store = await SQLiteMemoryStore.open(merged)
    reference = await SQLiteMemoryStore.open(kept)
    words = ["vault", "code", "piano", "garden", "gate", "river", "lamp", "coffee"]
    try:
        grown = []
        for batch in range(40):
            memories = [
                _memory(f"m{batch}-{i}", " ".join(words[(batch + i + j) % 8] for j in range(3)))
                for i in range(2)
            ]
            before = _tree_counts(store)["postings"]
            await store.put_many("a", memories)
            with monkeypatch.context() as unmoved:  # the reference never moves a posting
                unmoved.setattr(sqlite_lexicon, "RECENT_POSTINGS", 10**9)
                await reference.put_many("a", [m.model_copy() for m in memories])
            counts = _tree_counts(store)
            grown.append(counts["postings"] - before)
            assert counts["postings"] - before <= 7  # one slice a write at most
            for query in ("vault code", "garden lamp", "coffee"):
                assert await _search(store, "a", query) == await _search(reference, "a", query)
            with store.database.read() as conn:
                noted = conn.execute(
                    "SELECT value FROM meta WHERE key = 'lexicon_middle_postings'"
                ).fetchone()
            assert noted is not None
            assert int(noted[0]) == counts["middle"]
        assert sum(grown) > 30  # the middle did move on, over several writes
        assert sum(1 for g in grown if g) >= 5
        _kept_equals_rebuilt(store)
        await store.delete_many("a", ["m3-0", "m30-1"])
        _kept_equals_rebuilt(store)
        assert _tree_counts(reference)["middle"] == _tree_counts(reference)["postings"] == 0
    finally:
        await store.close()
        await reference.close()


def _rewrite_as_schema_6(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file as schema 6 left it: two postings trees, triggers that name both."""
    conn = sqlite3.connect(path)
    try:
        sqlite_lexicon.register_functions(conn)
        sqlite_lexicon.merge(conn)
        conn.execute("DROP TABLE lexicon_middle")
        put_texts_back(conn)
        with monkeypatch.context() as patch:
            patch.setattr(sqlite_lexicon, "_POSTINGS", ("lexicon_postings", "lexicon_recent"))
            triggers = schema_7_triggers()  # schema 6's: the same, naming two trees
        for name in ("unindex", "reindex"):
            conn.execute(f"DROP TRIGGER memories_lexicon_{name}")
        for statement in triggers:
            conn.execute(statement)
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()


async def test_a_schema_6_file_deletes_postings_from_every_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened by this library, a schema-6 file gets the middle tree, and the triggers
    that delete or re-index a memory find its postings there too."""
    path = tmp_path / "memory.db"
    await _fill(path)
    _rewrite_as_schema_6(path, monkeypatch)
    monkeypatch.setattr(sqlite_lexicon, "RECENT_POSTINGS", 1)  # every batch moves on
    store = await SQLiteMemoryStore.open(path)
    try:
        await store.put_many("a", [_memory("a8", "a vault of codes"), _memory("a9", "piano")])
        with store.database.read() as conn:
            assert conn.execute("SELECT count(*) FROM lexicon_middle").fetchone()[0] > 0
        await store.delete_many("a", ["a8"])
        await store.replace_many("a", [_memory("a9", "a garden")])
        _kept_equals_rebuilt(store)
        assert "a8" not in {i for i, _ in await _search(store, "a", "codes")}
    finally:
        await store.close()


def _postings_without_lengths(path: Path) -> None:
    """The file as a library before postings carried lengths left it: the three trees
    without the column, and its triggers (dropped here; opening recreates them)."""
    conn = sqlite3.connect(path)
    try:
        put_texts_back(conn)  # it was a library of schema 7
        for name in ("unindex", "reindex"):
            conn.execute(f"DROP TRIGGER memories_lexicon_{name}")
        for table in ("lexicon_postings", "lexicon_middle", "lexicon_recent"):
            conn.execute(f"ALTER TABLE {table} RENAME TO old_{table}")
            conn.execute(
                f"CREATE TABLE {table} (ns INTEGER NOT NULL, term TEXT NOT NULL, "
                "pk INTEGER NOT NULL, tf INTEGER NOT NULL, PRIMARY KEY (ns, term, pk)) "
                "WITHOUT ROWID"
            )
            conn.execute(f"INSERT INTO {table} SELECT ns, term, pk, tf FROM old_{table}")
            conn.execute(f"DROP TABLE old_{table}")
        conn.commit()
    finally:
        conn.close()


async def test_postings_carry_their_documents_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each posting holds its document's length, through batch writes, content updates
    and moves between the trees, so BM25 reads no document row: scores stay the same
    when `lexicon_documents` is made wrong underneath."""
    monkeypatch.setattr(sqlite_lexicon, "RECENT_POSTINGS", 3)  # moves on most batches
    path = tmp_path / "memory.db"
    await _fill(path)
    store = await SQLiteMemoryStore.open(path)
    try:
        await store.replace_many("a", [_memory("a1", "coding the vault gate twice, coding")])
        with store.database.read() as conn:
            wrong = conn.execute(
                "SELECT count(*) FROM (SELECT * FROM lexicon_postings UNION ALL "
                "SELECT * FROM lexicon_middle UNION ALL SELECT * FROM lexicon_recent) AS p "
                "JOIN lexicon_documents AS d ON d.pk = p.pk "
                "WHERE p.length IS NOT d.length"
            ).fetchone()[0]
        assert wrong == 0
        before = {ns: await _search(store, ns, "vault codes gate") for ns in TEXTS}
        with store.database.write() as conn:
            conn.execute("UPDATE lexicon_documents SET length = length + 7")
        after = {ns: await _search(store, ns, "vault codes gate") for ns in TEXTS}
        assert after == before
        assert any(hits for hits in before.values())
    finally:
        await store.close()


async def test_postings_written_without_lengths_rank_the_same(tmp_path: Path) -> None:
    """A file whose postings have no length (an older library's) gets the column when
    opened; its old postings take their lengths from `lexicon_documents`, new ones
    carry theirs, and every score equals a fresh file's."""
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    await _fill(fresh)
    await _fill(old)
    _postings_without_lengths(old)
    migrated = await SQLiteMemoryStore.open(old)
    reference = await SQLiteMemoryStore.open(fresh)
    try:
        for store in (migrated, reference):
            await store.put_many("a", [_memory("a7", "the vault gate codes")])
        with migrated.database.read() as conn:
            lengths = dict(
                conn.execute(
                    "SELECT m.id, max(p.length) FROM memories AS m "
                    "JOIN lexicon_recent AS p ON p.pk = m.pk GROUP BY m.id"
                ).fetchall()
            )
        assert lengths.pop("a7") is not None  # written after the upgrade
        assert set(lengths.values()) == {None}  # written before it
        for ns in TEXTS:
            for query in ("vault code", "the codes", "piano garden gate"):
                assert await _search(migrated, ns, query) == await _search(reference, ns, query)
        await migrated.delete_many("a", ["a0"])
        await migrated.replace_many("b", [_memory("b1", "codes of a vault")])
        assert "a0" not in {i for i, _ in await _search(migrated, "a", "vault")}
    finally:
        await migrated.close()
        await reference.close()


async def test_document_frequencies_stop_at_the_cap_across_the_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term's document frequency is exact up to the cap and cap + 1 above it, however
    its postings are spread over the three trees; a term over the cap in the biggest
    tree is not counted in the others (each tree counted up to the cap read a common
    term's entries two or three times; counted in SQLite VM steps, not time)."""
    monkeypatch.setattr(sqlite_lexicon, "RECENT_POSTINGS", 40)
    monkeypatch.setattr(sqlite_lexicon, "MIDDLE_POSTINGS", 90)
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        for batch in range(30):  # 305 memories hold "vault"; every tree gets some
            await store.put_many(
                "a",
                [_memory(f"m{batch}-{i}", f"vault number {batch} {i}") for i in range(10)],
            )
        await store.put_many("a", [_memory(f"last{i}", "vault") for i in range(5)])
        (term,) = query_terms("vault")
        with store.database.read() as conn:
            spread = [
                conn.execute(
                    f"SELECT count(*) FROM lexicon_{t} WHERE term = ?", (term,)
                ).fetchone()[0]
                for t in ("postings", "middle", "recent")
            ]
            assert all(spread)
            assert sum(spread) == 305
            for cap in (0, 1, 5, 39, 150, 299, 304, 305, 1000):
                _, stats = sqlite_lexicon.statistics(conn, "a", [term], cap=cap)
                assert stats.frequencies[term] == min(305, cap + 1)
            assert sqlite_lexicon.statistics(conn, "a", [term])[1].frequencies[term] == 305
            steps = 0

            def count() -> int:
                nonlocal steps
                steps += 1
                return 0

            conn.set_progress_handler(count, 1)
            try:
                sqlite_lexicon.statistics(conn, "a", [term], cap=20)
            finally:
                conn.set_progress_handler(None, 1)
        assert steps < 200  # ~8 steps an entry in each of the trees before: 500+
    finally:
        await store.close()


async def test_a_schema_7_file_moves_every_text_out_of_the_rows(tmp_path: Path) -> None:
    """Opened by this library, a file of schema 7 (each text in its `memories` row) has
    every text in `memory_texts`, byte for byte, and none left in the rows; search,
    reads and deletes go on as in a fresh file."""
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    await _fill(fresh)
    await _fill(old)
    conn = sqlite3.connect(old)
    try:
        put_texts_back(conn)
        conn.commit()
        texts = dict(conn.execute("SELECT id, content FROM memories").fetchall())
    finally:
        conn.close()
    assert sorted(texts.values()) == sorted(t for ts in TEXTS.values() for t in ts)

    migrated = await SQLiteMemoryStore.open(old)
    reference = await SQLiteMemoryStore.open(fresh)
    try:
        with migrated.database.read() as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(memories)")}
            moved = dict(
                conn.execute(
                    "SELECT m.id, t.content FROM memories AS m "
                    "JOIN memory_texts AS t ON t.pk = m.pk"
                ).fetchall()
            )
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        assert "content" not in columns
        assert moved == texts
        for ns, ids in (("a", ["a0", "a1", "a2"]), ("b", ["b0", "b1", "b2"])):
            got = await migrated.get_many(ns, ids)
            assert {i: m.content for i, m in got.items()} == {i: texts[i] for i in ids}
            assert await _search(migrated, ns, "vault codes") == await _search(
                reference, ns, "vault codes"
            )
        _kept_equals_rebuilt(migrated)
        assert await migrated.delete_many("b", ["b2"]) == 1
        _kept_equals_rebuilt(migrated)
        assert "b2" not in {i for i, _ in await _search(migrated, "b", "vault")}
        with migrated.database.read() as conn:
            assert conn.execute("SELECT count(*) FROM memory_texts").fetchone()[0] == 5
    finally:
        await migrated.close()
        await reference.close()


async def test_a_memorys_text_goes_with_it(tmp_path: Path) -> None:
    """Deleting memories, or clearing a namespace or the store, leaves no text behind:
    the rows of `memory_texts` are those of the live memories."""
    store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
    try:
        for ns, texts in TEXTS.items():
            await store.put_many(ns, [_memory(f"{ns}{i}", t) for i, t in enumerate(texts)])

        def orphans() -> int:
            with store.database.read() as conn:
                return int(
                    conn.execute(
                        "SELECT count(*) FROM memory_texts "
                        "WHERE pk NOT IN (SELECT pk FROM memories)"
                    ).fetchone()[0]
                )

        await store.delete_many("a", ["a1"])
        assert orphans() == 0
        await store.clear("b")
        assert orphans() == 0
        with store.database.read() as conn:
            assert conn.execute("SELECT count(*) FROM memory_texts").fetchone()[0] == 2
        await store.clear()
        with store.database.read() as conn:
            assert conn.execute("SELECT count(*) FROM memory_texts").fetchone()[0] == 0
    finally:
        await store.close()


async def test_a_text_edited_another_way_is_indexed_again(tmp_path: Path) -> None:
    """The library never updates a text; one edited by plain SQL on its connection is
    unindexed and indexed again by the trigger on `memory_texts`."""
    store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
    try:
        await store.put_many("a", [_memory("a0", "the vault code"), _memory("a1", "a piano")])
        with store.database.write() as conn:
            conn.execute(
                "UPDATE memory_texts SET content = 'a garden gate' "
                "WHERE pk = (SELECT pk FROM memories WHERE namespace = 'a' AND id = 'a0')"
            )
        _kept_equals_rebuilt(store)
        assert await _search(store, "a", "vault") == []
        assert [i for i, _ in await _search(store, "a", "garden")] == ["a0"]
        assert (await store.get_many("a", ["a0"]))["a0"].content == "a garden gate"
    finally:
        await store.close()


async def test_a_converted_schema_7_file_keeps_its_rows_as_compact_as_a_fresh_one(
    tmp_path: Path,
) -> None:
    """The rows without their texts take the pages of a fresh file's, not the pages the
    texts took: a sweep's move rewrites every page of the rows it moves."""
    text = " ".join(f"word{i}" for i in range(60))
    batch = [_memory(f"m{i}", f"{text} {i}") for i in range(500)]
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    for path in (fresh, old):
        store = await SQLiteMemoryStore.open(path)
        await store.put_many("a", batch)
        await store.close()
    conn = sqlite3.connect(old)
    try:
        put_texts_back(conn)
        conn.commit()
    finally:
        conn.close()

    def pages(path: Path) -> int:
        with sqlite3.connect(path) as conn:
            return int(
                conn.execute("SELECT count(*) FROM dbstat WHERE name = 'memories'").fetchone()[0]
            )

    with_texts = pages(old)
    await (await SQLiteMemoryStore.open(old)).close()
    assert pages(old) <= pages(fresh) + 1 < with_texts
    migrated = await SQLiteMemoryStore.open(old)
    try:
        got = await migrated.get_many("a", ["m0", "m499"])
        assert got["m499"].content == f"{text} 499"
        with migrated.database.read() as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            objects = conn.execute(_OBJECTS).fetchall()
        with sqlite3.connect(fresh) as conn:
            assert [tuple(r) for r in objects] == conn.execute(_OBJECTS).fetchall()
    finally:
        await migrated.close()


# the file's tables, indexes and triggers, as SQLite keeps their definitions (but the
# quotes SQLite puts around a renamed table's name)
_OBJECTS = (
    "SELECT type, name, tbl_name, replace(sql, 'TABLE \"memories\"', 'TABLE memories') "
    "FROM sqlite_master ORDER BY type, name"
)


async def test_a_failed_conversion_leaves_the_schema_7_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversion runs in the opening transaction: failing after the table was
    built again, it leaves the file of schema 7 whole, and the next open converts it."""
    path = tmp_path / "old.db"
    await _fill(path)
    conn = sqlite3.connect(path)
    try:
        put_texts_back(conn)
        conn.commit()
        before = conn.execute(_OBJECTS).fetchall()
        texts = dict(conn.execute("SELECT id, content FROM memories").fetchall())
    finally:
        conn.close()

    def broken(conn: sqlite3.Connection) -> None:
        raise RuntimeError("the disk is gone")

    with monkeypatch.context() as patch:
        patch.setattr(sqlite_lexicon, "replace_triggers", broken)
        with pytest.raises(Exception, match="the disk is gone"):
            await SQLiteMemoryStore.open(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute(_OBJECTS).fetchall() == before
        assert dict(conn.execute("SELECT id, content FROM memories").fetchall()) == texts
    store = await SQLiteMemoryStore.open(path)
    try:
        got = await store.get_many("a", ["a0", "a1", "a2"])
        assert {i: m.content for i, m in got.items()} == {i: texts[i] for i in got}
        assert len(got) == 3
    finally:
        await store.close()
