"""Per-namespace lexical index of the SQLite store, kept by triggers inside the
transaction that writes a memory.

Why not FTS5: its BM25 counts documents, lengths and frequencies over the whole table,
so one tenant's writes moved another's lexical scores, and a tenant could learn
whether a word occurs in anyone else's memories (issue 16). Here every row is keyed
by namespace, and a search reads its own namespace's rows only:

- `lexicon_postings`: one row per (namespace, term, memory) with the term's frequency
  there; scoring a term, or counting its documents, is one range of the primary key.
- `lexicon_documents`: each memory's length in terms (kept out of the postings, which
  are written at random places of their tree: smaller rows, fewer pages per write).
- `lexicon_namespaces`: documents and terms per namespace (BM25's N and avgdl).

Document frequencies are counted from the postings when a query asks, up to a cap
(`statistics`), rather than kept in a table of their own: keeping them cost one more
upsert per term of every written memory (writes 1.6x slower), and a search needs the
exact count only of the terms it scores, which are the rare ones.

The triggers call `tm_terms(content)` and `tm_length(content)`, Python functions
registered on every connection (`register_functions`); a connection without them (the
sqlite3 shell) can read the file but not write memories, instead of writing them
unindexed. The delete trigger finds a memory's postings by tokenizing it again, so the
index must be built by the same tokenizer: its version is kept in `meta`, and a file
indexed by another version is re-indexed when opened (`ensure_current`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from tiered_memory.lexicon import LexicalStatistics, Posting, term_counts, tokenizer_version

from .sql import IN_JSON

TERMS_FUNCTION = "tm_terms"
LENGTH_FUNCTION = "tm_length"

_NS = "(SELECT id FROM lexicon_namespaces WHERE namespace = {row}.namespace)"


def _index(row: str) -> list[str]:
    return [
        f"""INSERT INTO lexicon_namespaces (namespace, documents, tokens)
            VALUES ({row}.namespace, 1, tm_length({row}.content))
            ON CONFLICT (namespace) DO UPDATE
            SET documents = documents + 1, tokens = tokens + excluded.tokens""",
        f"""INSERT INTO lexicon_documents (pk, length)
            VALUES ({row}.pk, tm_length({row}.content))""",
        f"""INSERT INTO lexicon_postings (ns, term, pk, tf)
            SELECT {_NS.format(row=row)}, j.key, {row}.pk, j.value
            FROM json_each(tm_terms({row}.content)) AS j""",
    ]


def _unindex(row: str) -> list[str]:
    return [
        f"""DELETE FROM lexicon_postings WHERE ns = {_NS.format(row=row)} AND pk = {row}.pk
            AND term IN (SELECT key FROM json_each(tm_terms({row}.content)))""",
        f"DELETE FROM lexicon_documents WHERE pk = {row}.pk",
        f"""UPDATE lexicon_namespaces
            SET documents = documents - 1, tokens = tokens - tm_length({row}.content)
            WHERE namespace = {row}.namespace""",
    ]


def _trigger(name: str, event: str, statements: Sequence[str]) -> str:
    body = ";\n".join(statements)
    return f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON memories BEGIN\n{body};\nEND"


SCHEMA = [
    """CREATE TABLE IF NOT EXISTS lexicon_namespaces (
        id INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL UNIQUE,
        documents INTEGER NOT NULL,
        tokens INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS lexicon_documents (
        pk INTEGER PRIMARY KEY,
        length INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS lexicon_postings (
        ns INTEGER NOT NULL,
        term TEXT NOT NULL,
        pk INTEGER NOT NULL,
        tf INTEGER NOT NULL,
        PRIMARY KEY (ns, term, pk)
    ) WITHOUT ROWID""",
    _trigger("memories_lexicon_insert", "INSERT", _index("new")),
    _trigger("memories_lexicon_delete", "DELETE", _unindex("old")),
    _trigger(
        "memories_lexicon_update",
        "UPDATE OF content, namespace",
        [*_unindex("old"), *_index("new")],
    ),
]

# The FTS5 index of schema 3 and earlier, whose statistics spanned every namespace.
DROP_FTS = [
    "DROP TRIGGER IF EXISTS memories_fts_insert",
    "DROP TRIGGER IF EXISTS memories_fts_delete",
    "DROP TRIGGER IF EXISTS memories_fts_update",
    "DROP TABLE IF EXISTS memories_fts",
]

_NOTHING = object()


class _Memo:
    """The last content's term counts: each trigger asks for them several times."""

    def __init__(self) -> None:
        self.content: object = _NOTHING
        self.json = "{}"
        self.length = 0

    def _load(self, content: str | None) -> None:
        if content != self.content:
            counts = term_counts(content or "")
            self.json = json.dumps(counts, ensure_ascii=False)
            self.length = sum(counts.values())
            self.content = content

    def terms(self, content: str | None) -> str:
        self._load(content)
        return self.json

    def length_of(self, content: str | None) -> int:
        self._load(content)
        return self.length


def register_functions(conn: sqlite3.Connection) -> None:
    """The tokenizer the triggers call; register it on every connection to the file."""
    memo = _Memo()
    conn.create_function(TERMS_FUNCTION, 1, memo.terms, deterministic=True)
    conn.create_function(LENGTH_FUNCTION, 1, memo.length_of, deterministic=True)


def rebuild(conn: sqlite3.Connection) -> int:
    """Index every memory again (schema migration, tokenizer change); returns how many.

    Runs in the caller's transaction, so a crash keeps the old index whole.
    """
    conn.execute("DELETE FROM lexicon_postings")
    conn.execute("DELETE FROM lexicon_documents")
    conn.execute("DELETE FROM lexicon_namespaces")
    conn.execute(
        "INSERT INTO lexicon_namespaces (namespace, documents, tokens) "
        "SELECT namespace, count(*), sum(tm_length(content)) FROM memories GROUP BY namespace"
    )
    conn.execute(
        "INSERT INTO lexicon_documents (pk, length) SELECT pk, tm_length(content) FROM memories"
    )
    # In key order, so the tree is written front to back instead of at random places.
    conn.execute(
        "INSERT INTO lexicon_postings (ns, term, pk, tf) "
        "SELECT n.id, j.key, m.pk, j.value "
        "FROM memories AS m JOIN lexicon_namespaces AS n ON n.namespace = m.namespace, "
        "json_each(tm_terms(m.content)) AS j ORDER BY 1, 2, 3"
    )
    return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])


def ensure_current(conn: sqlite3.Connection) -> None:
    """Re-index when the file's index was built by another tokenizer version (or by
    FTS5, before schema 5). Call inside the opening transaction."""
    version = tokenizer_version()
    row = conn.execute("SELECT value FROM meta WHERE key = 'lexicon_tokenizer'").fetchone()
    if row is not None and row[0] == version:
        return
    for statement in DROP_FTS:
        conn.execute(statement)
    rebuild(conn)
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('lexicon_tokenizer', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (version,),
    )


# -- reading ---------------------------------------------------------------------------


def namespace_id(conn: sqlite3.Connection, namespace: str) -> tuple[int, int, int] | None:
    """(number, documents, tokens) of a namespace's lexicon, None if it never held text."""
    row = conn.execute(
        "SELECT id, documents, tokens FROM lexicon_namespaces WHERE namespace = ?",
        (namespace,),
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]), int(row[2]))


def statistics(
    conn: sqlite3.Connection, namespace: str, terms: Sequence[str], *, cap: int | None = None
) -> tuple[int | None, LexicalStatistics]:
    """The namespace's lexicon number and its statistics for `terms`.

    A document frequency above `cap` is reported as `cap + 1` (its exact value costs a
    read of every posting; a search never scores such a term). Without `cap`, exact.
    """
    found = namespace_id(conn, namespace)
    if found is None:
        return None, LexicalStatistics(frequencies=dict.fromkeys(terms, 0))
    ns, documents, total = found
    limit = -1 if cap is None else cap + 1
    frequencies = {
        term: int(
            conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM lexicon_postings "
                "WHERE ns = ? AND term = ? LIMIT ?)",
                (ns, term, limit),
            ).fetchone()[0]
        )
        for term in terms
    }
    return ns, LexicalStatistics(documents=documents, tokens=total, frequencies=frequencies)


def postings(
    conn: sqlite3.Connection, ns: int, terms: Sequence[str], pks: Sequence[int] | None = None
) -> list[Posting]:
    """The postings of `terms` in namespace number `ns`, of the documents `pks` only if
    given."""
    counts: list[tuple[str, int, int]] = []
    for term in terms:
        if pks is None:
            rows = conn.execute(
                "SELECT pk, tf FROM lexicon_postings WHERE ns = ? AND term = ?", (ns, term)
            )
        else:
            rows = conn.execute(
                f"SELECT pk, tf FROM lexicon_postings WHERE ns = ? AND term = ? AND pk {IN_JSON}",
                (ns, term, json.dumps(list(pks))),
            )
        counts.extend((term, int(pk), int(tf)) for pk, tf in rows)
    if not counts:
        return []
    lengths = dict(
        conn.execute(
            f"SELECT pk, length FROM lexicon_documents WHERE pk {IN_JSON}",
            (json.dumps(sorted({pk for _, pk, _ in counts})),),
        ).fetchall()
    )
    return [Posting(term, pk, tf, int(lengths[pk])) for term, pk, tf in counts]
