"""Per-namespace lexical index of the SQLite store, written in the transaction that
writes a memory.

Why not FTS5: its BM25 counts documents, lengths and frequencies over the whole table,
so one tenant's writes moved another's lexical scores, and a tenant could learn
whether a word occurs in anyone else's memories (issue 16). Here every row is keyed
by namespace, and a search reads its own namespace's rows only:

- `lexicon_recent`, `lexicon_middle` and `lexicon_postings`: one row per (namespace,
  term, memory) with the term's frequency there and the memory's length (so BM25 needs
  no lookup per posting), in one of the three; scoring a term,
  or counting its documents, is one range of each primary key. A batch's ~25 postings
  a memory land on thousands of distinct terms, one leaf page each: in the big tree
  every batch of 1,000 dirtied ~6,000 pages (24 MB of WAL, 0.35 ms a memory at 100k
  memories). So new postings go to the small `lexicon_recent`, whose few pages a batch
  shares; past `RECENT_POSTINGS` one sorted pass moves them into `lexicon_middle`, and
  past `MIDDLE_POSTINGS` that drains into `lexicon_postings`, `DRAIN_POSTINGS` a write
  in key order (`_move`, `_drain`): each pass writes each page it touches once for
  many batches. Two levels were not enough: a recent
  tree big enough to spare the big one (1M postings, ~3,600 pages) had most of its
  pages dirtied by every batch (~2,400 of a batch of 500's ~4,300 pages at 1M
  memories). The levels are those of a log-structured merge tree, kept as B-trees so a
  term stays one range per level.
- `lexicon_documents`: each memory's length in terms.
- `lexicon_namespaces`: documents and terms per namespace (BM25's N and avgdl).

Document frequencies are counted from the postings when a query asks, up to a cap
(`statistics`), rather than kept in a table of their own: keeping them cost one more
upsert per term of every written memory (writes 1.6x slower), and a search needs the
exact count only of the terms it scores, which are the rare ones.

Writing (schema 6). The insert trigger does not index: it queues the new row's pk
with `tm_queue(pk)`, a Python function registered on the library's connections
(`register_functions`), and `index_queued` indexes the queued rows of the transaction
in one pass: each text tokenized once, the postings written sorted, one statement per
table. The insert path calls it right after its INSERT (`MemoryTable.insert`), and
`SQLiteDatabase` calls it again before every commit or savepoint release, so a row
inserted any other way on the library's connection is indexed before it can commit. A
connection without the functions (the sqlite3 shell) can read the file but not insert
memories (the trigger's call fails), instead of writing them unindexed. The queue is
only a hint: `index_queued` indexes the queued pks that are memories without a
`lexicon_documents` row, so a pk whose insert was rolled back, or a row indexed
already, costs nothing. Deletes and content updates still go through triggers, per
row: they call `tm_terms(content)` to find a memory's postings (and the update trigger
indexes the new text the same way). They take a memory's length from
`lexicon_documents`, and touch the counts only if it has a row there, so a row still
in the queue is no one's document yet. The delete trigger's lookup by tokenizing
again means the index must be built by the same tokenizer: its version is kept in
`meta`, and a file indexed by another version is re-indexed when opened
(`ensure_current`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from tiered_memory.lexicon import (
    LexicalStatistics,
    bm25,
    term_counts,
    tokenizer_version,
)

from .bulk import insert_flat, insert_rows
from .memory_columns import TEXT_JOIN
from .sql import IN_JSON

TERMS_FUNCTION = "tm_terms"
LENGTH_FUNCTION = "tm_length"
QUEUE_FUNCTION = "tm_queue"

# Postings a smaller tree may hold before it is emptied into the next one (`_move`; the
# middle tree over several writes, `_drain`). Bigger: rarer moves, each writing a larger
# share of the next tree's pages once, but more pages of this tree dirtied per batch.
# ~2k and ~40k memories of ~25 terms.
RECENT_POSTINGS = 50_000  # lexicon_recent -> lexicon_middle
MIDDLE_POSTINGS = 1_000_000  # lexicon_middle -> lexicon_postings
# Postings one write moves from a full `lexicon_middle` into `lexicon_postings`, the next
# in key order (`_drain`). Moved in one write, a middle tree of ~1M postings (1M
# memories) took 3.2-3.8 s and ~360 MB of WAL and checkpoint, all under the write lock:
# every other writer, and every recall's use count, waited that long. A slice is one
# range of terms, so it rewrites only the big tree's pages of those terms, and the
# slices together write about what the one move did.
DRAIN_POSTINGS = 100_000
# in `meta`: the postings each smaller tree holds (counted up by writes; deletes do not
# count down, so a move may come a little early, never late)
_COUNT_KEYS = {
    "lexicon_recent": "lexicon_recent_postings",
    "lexicon_middle": "lexicon_middle_postings",
}
# in `meta` while the middle tree drains: the key (JSON [ns, term, pk]) the next slice
# starts at
_DRAIN_KEY = "lexicon_middle_drain"

_NS = "(SELECT id FROM lexicon_namespaces WHERE namespace = {ns})"
_POSTINGS = ("lexicon_postings", "lexicon_middle", "lexicon_recent")


class _Row(NamedTuple):
    """A trigger's row as SQL expressions: its pk, namespace and text. The text is in
    `memory_texts` and the namespace in `memories` (schema 8), so a trigger on one
    table reads the other by pk."""

    pk: str
    namespace: str
    content: str


def _memory_row(row: str) -> _Row:
    """`row` ('new' or 'old') of a trigger on `memories`."""
    return _Row(
        f"{row}.pk", f"{row}.namespace", f"(SELECT content FROM memory_texts WHERE pk = {row}.pk)"
    )


def _text_row(row: str) -> _Row:
    """`row` of a trigger on `memory_texts`."""
    return _Row(
        f"{row}.pk", f"(SELECT namespace FROM memories WHERE pk = {row}.pk)", f"{row}.content"
    )


def _index(row: _Row) -> list[str]:
    """Index one row (the update triggers' second half)."""
    return [
        f"""INSERT INTO lexicon_namespaces (namespace, documents, tokens)
            VALUES ({row.namespace}, 1, tm_length({row.content}))
            ON CONFLICT (namespace) DO UPDATE
            SET documents = documents + 1, tokens = tokens + excluded.tokens""",
        f"""INSERT INTO lexicon_documents (pk, length)
            VALUES ({row.pk}, tm_length({row.content}))""",
        f"""INSERT INTO lexicon_recent (ns, term, pk, tf, length)
            SELECT {_NS.format(ns=row.namespace)}, j.key, {row.pk}, j.value,
            tm_length({row.content})
            FROM json_each(tm_terms({row.content})) AS j""",
    ]


def _unindex(row: _Row) -> list[str]:
    """Unindex one row, if it was indexed (a queued row was not)."""
    return [
        f"""UPDATE lexicon_namespaces SET documents = documents - 1,
            tokens = tokens - (SELECT length FROM lexicon_documents WHERE pk = {row.pk})
            WHERE namespace = {row.namespace}
            AND EXISTS (SELECT 1 FROM lexicon_documents WHERE pk = {row.pk})""",
        *(
            f"""DELETE FROM {table} WHERE ns = {_NS.format(ns=row.namespace)} AND pk = {row.pk}
            AND term IN (SELECT key FROM json_each(tm_terms({row.content})))"""
            for table in _POSTINGS
        ),
        f"DELETE FROM lexicon_documents WHERE pk = {row.pk}",
    ]


def _trigger(name: str, event: str, statements: Sequence[str], table: str = "memories") -> str:
    body = ";\n".join(statements)
    return f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON {table} BEGIN\n{body};\nEND"


def _postings_table(name: str) -> str:
    # `length`: the document's length in terms, beside each of its postings, so BM25
    # reads a term's postings as one range and no lookup per posting (NULL in rows
    # written before it: `ranked` takes those from `lexicon_documents`).
    return f"""CREATE TABLE IF NOT EXISTS {name} (
        ns INTEGER NOT NULL,
        term TEXT NOT NULL,
        pk INTEGER NOT NULL,
        tf INTEGER NOT NULL,
        length INTEGER,
        PRIMARY KEY (ns, term, pk)
    ) WITHOUT ROWID"""


def ensure_lengths(conn: sqlite3.Connection) -> bool:
    """Give the postings trees of an older file their `length` column (NULL in the
    rows already there) and the triggers that fill it; returns whether it did."""
    added = False
    for table in _POSTINGS:
        columns = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
        if "length" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN length INTEGER")
            added = True
    if added:
        replace_triggers(conn)
    return added


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
    *(_postings_table(name) for name in _POSTINGS),
    # The per-row triggers of schema 5 (a no-op once gone); their index stays valid.
    "DROP TRIGGER IF EXISTS memories_lexicon_insert",
    "DROP TRIGGER IF EXISTS memories_lexicon_delete",
    "DROP TRIGGER IF EXISTS memories_lexicon_update",
    _trigger("memories_lexicon_queue", "INSERT", [f"SELECT {QUEUE_FUNCTION}(new.pk)"]),
]
# The triggers that name every postings tree: created with the tables, and created
# again by `replace_triggers` when a file of schema 6 (two trees) or 7 (the text in
# `memories`) is opened. A deleted memory's text goes last, after the postings that
# are found by tokenizing it (one trigger: SQLite does not promise an order between
# two). The text is never updated by the library; the update triggers keep an edit
# made some other way on a connection of the library indexed.
_TREE_TRIGGERS: dict[str, tuple[str, str, list[str]]] = {
    "memories_lexicon_unindex": (
        "memories",
        "DELETE",
        [*_unindex(_memory_row("old")), "DELETE FROM memory_texts WHERE pk = old.pk"],
    ),
    "memories_lexicon_reindex": (
        "memories",
        "UPDATE OF namespace",
        [*_unindex(_memory_row("old")), *_index(_memory_row("new"))],
    ),
    "memory_texts_lexicon_reindex": (
        "memory_texts",
        "UPDATE OF content",
        [*_unindex(_text_row("old")), *_index(_text_row("new"))],
    ),
}
SCHEMA += [
    _trigger(name, event, body, table) for name, (table, event, body) in _TREE_TRIGGERS.items()
]


def replace_triggers(conn: sqlite3.Connection) -> None:
    """Create the triggers that delete a memory's postings again, naming every tree
    (a file of schema 6 has them for two; `CREATE IF NOT EXISTS` keeps old ones)."""
    for name, (table, event, body) in _TREE_TRIGGERS.items():
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute(_trigger(name, event, body, table))


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


class IndexQueue:
    """The pks the insert trigger queued on one connection, until `index_queued`."""

    def __init__(self) -> None:
        self.pks: list[int] = []

    def add(self, pk: int) -> None:
        self.pks.append(pk)

    def take(self) -> list[int]:
        pks, self.pks = self.pks, []
        return pks


def register_functions(conn: sqlite3.Connection) -> IndexQueue:
    """The tokenizer the triggers call and the insert trigger's queue; register them on
    every connection that writes the file, and pass the queue to `index_queued`."""
    memo = _Memo()
    queue = IndexQueue()
    conn.create_function(TERMS_FUNCTION, 1, memo.terms, deterministic=True)
    conn.create_function(LENGTH_FUNCTION, 1, memo.length_of, deterministic=True)
    conn.create_function(QUEUE_FUNCTION, 1, queue.add)
    return queue


def index_queued(
    conn: sqlite3.Connection,
    queue: IndexQueue,
    known: Mapping[int, tuple[str, str]] | None = None,
) -> int:
    """Index the memories inserted since the last call, in the caller's transaction;
    returns how many. Each text is tokenized once, and each table gets few statements
    with its rows in key order (the postings sorted by (namespace, term, pk)).

    `known`: the (namespace, content) of rows the caller has just inserted, by pk, so
    they are not read back; the other queued pks are read from the file (those of a
    rolled-back insert, or indexed already, are skipped there)."""
    pks = queue.take()
    if not pks:
        return 0
    fresh = [] if known is None else sorted(pk for pk in set(pks) if pk in known)
    rest = pks if known is None else [pk for pk in pks if pk not in known]
    rows: list[tuple[int, str, str]] = [(pk, *known[pk]) for pk in fresh] if known else []
    if rest:
        rows += conn.execute(
            f"SELECT m.pk, m.namespace, t.content FROM memories AS m{TEXT_JOIN} "
            f"WHERE m.pk {IN_JSON} "
            "AND NOT EXISTS (SELECT 1 FROM lexicon_documents AS d WHERE d.pk = m.pk) "
            "ORDER BY m.pk",
            (json.dumps(rest),),
        ).fetchall()
        rows.sort(key=lambda row: int(row[0]))
    if not rows:
        return 0
    counted = [(int(pk), str(ns), term_counts(content)) for pk, ns, content in rows]
    totals: dict[str, list[int]] = {}
    lengths: list[tuple[int, int]] = []
    length_of: dict[int, int] = {}
    for pk, ns, counts in counted:
        length = length_of[pk] = sum(counts.values())
        lengths.append((pk, length))
        total = totals.setdefault(ns, [0, 0])
        total[0] += 1
        total[1] += length
    numbers: dict[str, int] = {}
    for ns, (documents, tokens) in totals.items():
        conn.execute(
            "INSERT INTO lexicon_namespaces (namespace, documents, tokens) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace) DO UPDATE "
            "SET documents = documents + excluded.documents, tokens = tokens + excluded.tokens",
            (ns, documents, tokens),
        )
        numbers[ns] = int(
            conn.execute("SELECT id FROM lexicon_namespaces WHERE namespace = ?", (ns,)).fetchone()[
                0
            ]
        )
    insert_rows(conn, "INSERT INTO lexicon_documents (pk, length)", lengths, 2)
    # (pk, tf) pairs, flat, by namespace number and term; in pk order, as `counted` is.
    # Sorting the ~6,000 terms of a batch instead of its ~25,000 postings, and making
    # the rows as SQLite reads them, halved this step.
    by_term: dict[int, dict[str, list[int]]] = {}
    for pk, ns, counts in counted:
        terms = by_term.setdefault(numbers[ns], {})
        for term, tf in counts.items():
            pairs = terms.get(term)
            if pairs is None:
                terms[term] = [pk, tf]
            else:
                pairs += (pk, tf)
    written = sum(len(pairs) for terms in by_term.values() for pairs in terms.values()) // 2

    # The statement's values, flat (no tuple a posting, then flattened): ~4 us a memory
    values: list[int | str] = []
    extend = values.extend
    for number in sorted(by_term):
        terms = by_term[number]
        for term in sorted(terms):
            pairs = terms[term]
            for i in range(0, len(pairs), 2):
                pk = pairs[i]
                extend((number, term, pk, pairs[i + 1], length_of[pk]))
    insert_flat(conn, "INSERT INTO lexicon_recent (ns, term, pk, tf, length)", values, 5)
    _note_recent(conn, written)
    return len(rows)


def _note_recent(conn: sqlite3.Connection, added: int) -> None:
    """Count the postings written to `lexicon_recent`; move it into the middle tree
    once it holds enough, and the middle tree into the big one, a slice a write, from
    when it holds enough until it is through (`_drain`)."""
    recent = _count(conn, "lexicon_recent") + added
    middle = counted = _count(conn, "lexicon_middle")
    if recent < RECENT_POSTINGS:
        _set_count(conn, "lexicon_recent", recent)
    else:
        middle += _move(conn, "lexicon_recent", "lexicon_middle")
    start = _drain_start(conn)
    if start is None and middle >= MIDDLE_POSTINGS:
        start = ()
    if start is not None:
        moved, done = _drain(conn, start)
        # deletes do not count down: once through, the rows left are counted (those
        # moved in behind the slices), so a stale count cannot start drain after drain
        middle = _exact_count(conn, "lexicon_middle") if done else middle - moved
    if middle != counted:  # most writes move nothing: no second row of `meta` rewritten
        _set_count(conn, "lexicon_middle", middle)


def _drain_start(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
    """Where the middle tree's drain goes on from; None when it is not draining."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_DRAIN_KEY,)).fetchone()
    return None if row is None else tuple(json.loads(row[0]))


def _drain(conn: sqlite3.Connection, start: tuple[Any, ...]) -> tuple[int, bool]:
    """Move the next `DRAIN_POSTINGS` postings of `lexicon_middle` from the key `start`
    (() for its first) into `lexicon_postings`; returns how many moved and whether the
    drain is through. Postings moved into the middle tree behind `start` meanwhile stay
    there for the next drain: every posting is in one tree at any commit, which is all
    a search needs."""
    where = "WHERE (ns, term, pk) >= (?, ?, ?)" if start else ""
    end = conn.execute(
        f"SELECT ns, term, pk FROM lexicon_middle {where} ORDER BY ns, term, pk LIMIT 1 OFFSET ?",
        (*start, DRAIN_POSTINGS),
    ).fetchone()
    params: tuple[Any, ...] = start
    if end is not None:
        where += (" AND " if where else "WHERE ") + "(ns, term, pk) < (?, ?, ?)"
        params = (*start, *end)
    moved = conn.execute(
        "INSERT INTO lexicon_postings (ns, term, pk, tf, length) "
        f"SELECT ns, term, pk, tf, length FROM lexicon_middle {where} ORDER BY ns, term, pk",
        params,
    ).rowcount
    conn.execute(f"DELETE FROM lexicon_middle {where}", params)
    if end is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (_DRAIN_KEY,))
    else:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (_DRAIN_KEY, json.dumps(list(end))),
        )
    return int(moved), end is None


def _exact_count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _count(conn: sqlite3.Connection, table: str) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_COUNT_KEYS[table],)).fetchone()
    return 0 if row is None else int(row[0])


def _set_count(conn: sqlite3.Connection, table: str, count: int) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_COUNT_KEYS[table], str(count)),
    )


def _move(conn: sqlite3.Connection, source: str, target: str) -> int:
    """Move every posting of `source` into `target`, in key order (each page of the
    target is written once); returns how many moved."""
    moved = conn.execute(
        f"INSERT INTO {target} (ns, term, pk, tf, length) "
        f"SELECT ns, term, pk, tf, length FROM {source} ORDER BY ns, term, pk"
    ).rowcount
    conn.execute(f"DELETE FROM {source}")
    conn.execute("DELETE FROM meta WHERE key = ?", (_COUNT_KEYS[source],))
    return int(moved)


def merge(conn: sqlite3.Connection) -> int:
    """Move every posting of the smaller trees into `lexicon_postings`; returns how
    many moved."""
    conn.execute("DELETE FROM meta WHERE key = ?", (_DRAIN_KEY,))
    return _move(conn, "lexicon_recent", "lexicon_postings") + _move(
        conn, "lexicon_middle", "lexicon_postings"
    )


_REINDEX = "temp.tm_reindex"


def rebuild(conn: sqlite3.Connection) -> int:
    """Index every memory again (schema migration, tokenizer change); returns how many.

    Runs in the caller's transaction, so a crash keeps the old index whole.
    """
    for table in _POSTINGS:
        conn.execute(f"DELETE FROM {table}")
    for key in (*_COUNT_KEYS.values(), _DRAIN_KEY):
        conn.execute("DELETE FROM meta WHERE key = ?", (key,))
    conn.execute("DELETE FROM lexicon_documents")
    conn.execute("DELETE FROM lexicon_namespaces")
    # Each text tokenized once, into a temporary table the three statements read: read
    # from the memories, statement by statement, each tokenized them again (the memo
    # holds only the last text), and at 100k memories the first two of 14.1 s went to
    # that.
    conn.execute(f"DROP TABLE IF EXISTS {_REINDEX}")
    conn.execute(
        f"CREATE TABLE {_REINDEX} (pk INTEGER PRIMARY KEY, namespace TEXT NOT NULL, "
        "terms TEXT NOT NULL, length INTEGER NOT NULL)"
    )
    try:
        conn.execute(
            f"INSERT INTO {_REINDEX} (pk, namespace, terms, length) "
            "SELECT m.pk, m.namespace, tm_terms(t.content), tm_length(t.content) "
            f"FROM memories AS m{TEXT_JOIN}"
        )
        conn.execute(
            "INSERT INTO lexicon_namespaces (namespace, documents, tokens) "
            f"SELECT namespace, count(*), sum(length) FROM {_REINDEX} GROUP BY namespace"
        )
        conn.execute(
            f"INSERT INTO lexicon_documents (pk, length) SELECT pk, length FROM {_REINDEX}"
        )
        # In key order, so the tree is written front to back instead of at random places.
        conn.execute(
            "INSERT INTO lexicon_postings (ns, term, pk, tf, length) "
            "SELECT n.id, j.key, r.pk, j.value, r.length "
            f"FROM {_REINDEX} AS r JOIN lexicon_namespaces AS n ON n.namespace = r.namespace, "
            "json_each(r.terms) AS j ORDER BY 1, 2, 3"
        )
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {_REINDEX}")
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


# A term's documents in one tree, or :left when it holds at least that many: the probe
# skips :left - 1 entries (about 3 VM steps each) where counting them costs about 8, and
# a search only needs to know that a common term is over the cap.
_FREQUENCY = {
    table: f"SELECT CASE WHEN EXISTS (SELECT 1 FROM {table} WHERE ns = :ns AND term = :term "
    f"LIMIT 1 OFFSET :left - 1) THEN :left "
    f"ELSE (SELECT count(*) FROM {table} WHERE ns = :ns AND term = :term) END"
    for table in _POSTINGS
}
_EXACT_FREQUENCY = {
    table: f"SELECT count(*) FROM {table} WHERE ns = :ns AND term = :term" for table in _POSTINGS
}


def _documents(conn: sqlite3.Connection, sql: str, params: dict[str, object]) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def statistics(
    conn: sqlite3.Connection, namespace: str, terms: Sequence[str], *, cap: int | None = None
) -> tuple[int | None, LexicalStatistics]:
    """The namespace's lexicon number and its statistics for `terms`.

    A document frequency above `cap` is reported as `cap + 1` (its exact value costs a
    read of every posting; a search never scores such a term). Without `cap`, exact.
    The trees are counted biggest first, and a term stops at the first tree that
    takes it over the cap: counting each tree up to the cap read a common term's 1,001
    entries in two trees (about 16k VM steps a term, two thirds of a recall's SQL).
    """
    found = namespace_id(conn, namespace)
    if found is None:
        return None, LexicalStatistics(frequencies=dict.fromkeys(terms, 0))
    ns, documents, total = found
    frequencies: dict[str, int] = {}
    for term in terms:
        params = {"ns": ns, "term": term}
        if cap is None:
            frequencies[term] = sum(
                _documents(conn, _EXACT_FREQUENCY[t], params) for t in _POSTINGS
            )
            continue
        count = 0
        for table in _POSTINGS:  # the biggest tree first
            count += _documents(conn, _FREQUENCY[table], {**params, "left": cap + 1 - count})
            if count > cap:
                break
        frequencies[term] = min(count, cap + 1)
    return ns, LexicalStatistics(documents=documents, tokens=total, frequencies=frequencies)


# A term's postings in every tree, each with its document's length (`ranked`): the
# posting's own, or for a posting written before postings had one, its document's row
# (coalesce evaluates that lookup only then). Joining every posting to
# `lexicon_documents` cost 0.9 of 1.2 us a posting at 1M memories (up to 1,000 a search).
_LENGTH = "coalesce(p.length, (SELECT d.length FROM lexicon_documents AS d WHERE d.pk = p.pk))"
_POSTINGS_OF = " UNION ALL ".join(
    f"SELECT p.pk, p.tf, {_LENGTH} FROM {table} AS p WHERE p.ns = :ns AND p.term = :term"
    for table in _POSTINGS
)
_POSTINGS_AMONG = " UNION ALL ".join(
    f"SELECT p.pk, p.tf, {_LENGTH} FROM {table} AS p WHERE p.ns = :ns AND p.term = :term "
    "AND p.pk IN (SELECT value FROM json_each(:pks))"
    for table in _POSTINGS
)


class Ranked(NamedTuple):
    """Documents (pks) best first and their BM25 scores, as two lists: a search keeps
    up to 1,000 of them for its next phase, and a (pk, score) tuple each, alive through
    a recall, set off one or two of the garbage collector's passes per recall."""

    pks: list[int]
    scores: list[float]


def ranked(
    conn: sqlite3.Connection,
    ns: int,
    stats: LexicalStatistics,
    terms: Sequence[str],
    pks: Sequence[int] | None = None,
) -> Ranked:
    """Every document of namespace number `ns` (of `pks` only, if given) holding one
    of `terms` with its BM25, best first, equal scores newest first (higher pk).

    Scored by `tiered_memory.lexicon.bm25` over arrays. A statement a term: one
    UNION ALL of every term's postings took longer (1.6 against 1.3 ms for 4 terms).
    """
    if not terms:
        return Ranked([], [])
    among = None if pks is None else json.dumps(list(pks))
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples
    parts: list[np.ndarray] = []
    for i, term in enumerate(terms):
        if among is None:
            rows = cursor.execute(_POSTINGS_OF, {"ns": ns, "term": term}).fetchall()
        else:
            rows = cursor.execute(
                _POSTINGS_AMONG, {"ns": ns, "term": term, "pks": among}
            ).fetchall()
        if rows:
            found = np.empty((len(rows), 4), dtype=np.int64)
            found[:, 0] = i
            found[:, 1:] = rows
            parts.append(found)
    if not parts:
        return Ranked([], [])
    table = np.concatenate(parts)
    documents, scores = bm25(stats, terms, table[:, 0], table[:, 1], table[:, 2], table[:, 3])
    order = np.lexsort((-documents, -scores))
    return Ranked(documents[order].tolist(), scores[order].tolist())
