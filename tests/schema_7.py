"""A current file laid out again as schema 7 left it, for the migration tests: each
memory's text in `memories.content`, no `memory_texts`, and the lexicon's triggers
reading the text from the row (`migrations.migrate_v7` undoes this)."""

from __future__ import annotations

import sqlite3

from tiered_memory.backends.sqlite import lexicon

OLD = lexicon._Row("old.pk", "old.namespace", "old.content")
NEW = lexicon._Row("new.pk", "new.namespace", "new.content")


def schema_7_triggers() -> list[str]:
    """The lexicon's delete and update triggers of schema 7 (naming the postings trees
    of `lexicon._POSTINGS` as it is when called)."""
    return [
        lexicon._trigger("memories_lexicon_unindex", "DELETE", lexicon._unindex(OLD)),
        lexicon._trigger(
            "memories_lexicon_reindex",
            "UPDATE OF content, namespace",
            [*lexicon._unindex(OLD), *lexicon._index(NEW)],
        ),
    ]


def put_texts_back(conn: sqlite3.Connection) -> None:
    """Move the texts back into `memories` and set the schema version to 7 (in the
    caller's transaction)."""
    conn.execute("ALTER TABLE memories ADD COLUMN content TEXT NOT NULL DEFAULT ''")
    conn.execute(
        "UPDATE memories SET content = "
        "(SELECT t.content FROM memory_texts AS t WHERE t.pk = memories.pk)"
    )
    for name in (
        "memories_lexicon_unindex",
        "memories_lexicon_reindex",
        "memory_texts_lexicon_reindex",
    ):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP TABLE memory_texts")
    for statement in schema_7_triggers():
        conn.execute(statement)
    conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
