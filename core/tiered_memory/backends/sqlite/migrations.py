"""How a file of any earlier schema version becomes one of the current version.

`upgrade` runs when a file is opened, in one transaction: the current tables
(`schema`), then each conversion the file's version needs, then the version number.
A crash at any step leaves the file as it was.

Versions:
1. archive records as pydantic JSON with a float32 summary embedding.
2. compact archive rows (`archive_rows`); version-1 files are converted (`migrate_v1`).
3. embeddings in `memory_vectors`, out of the `memories` rows (`migrate_v2`).
4. the archival journal (`archival`): claims, written originals, quarantine; and the
   archive records' flags (`do_not_inject`, `superseded`). Both are added to older
   files, the journal empty and the flags NULL ("not known yet": the sweep reads them
   from the originals); a library older than 4 would not honour the claims.
5. the lexical index per namespace (`lexicon`) instead of one FTS5 table whose BM25
   statistics spanned every namespace; built from the memories when opened.
6. the lexical index written per batch (`lexicon`): the insert trigger only queues
   the row (`tm_queue`), new postings go to `lexicon_recent` first, and deletes take
   a memory's length from `lexicon_documents`. The schema-5 triggers are replaced when
   opened (`lexicon.SCHEMA`); the index itself stays as it is. A library of schema 5
   would index through its own insert trigger as well, so it must refuse the file.
7. the postings in three trees (`lexicon_middle` between the recent and the big one).
   The tables are created when opened; the triggers that delete a memory's postings
   are created again to name all three (`lexicon.replace_triggers`). A library of
   schema 6 would neither read nor delete the middle tree's postings. Also new with
   7, though it needs no version of its own: the queue of originals to delete
   (`pending`, `schema.PENDING_ORIGINALS`), created in any file when opened (a
   library without it would ignore the table and delete originals as it always did;
   what it left queued is deleted by the next library that sweeps).
   Later, also without a version: the index `links_target` is dropped when a file is
   opened (`schema.STATEMENTS`; a node's target rows are the mirrors of its source
   rows, `graph.drop_nodes`). A library that still creates it recreates it at open,
   and its deletes by target work with or without it.
   Later, also without a version: each posting carries its document's length
   (`lexicon.ensure_lengths` adds the column when a file is opened, NULL in the rows
   already there, and the triggers that fill it). A search takes a NULL length from
   `lexicon_documents`, so postings written by a library without the column (which
   names its columns) still rank the same.
8. the memories' texts in `memory_texts`, out of the `memories` rows (`migrate_v7`),
   which a sweep rewrites when it moves them between tiers. The lexicon's triggers
   that read the text are created again to read it there. A library of schema 7
   would insert memories without their text, so it must refuse the file.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from tiered_memory.errors import ConfigurationError
from tiered_memory.models import ArchiveRecord

from . import lexicon, schema, tier_rows
from .archive_rows import FLAGS_UNKNOWN, UPSERT, archive_row

SCHEMA_VERSION = 8

# Columns added to the archive table after it was first laid out (NULL in the rows
# before), with schema version 4: `add_columns` adds them to older files, by presence,
# so a version-4 file written before them gets them too (and such a library, which
# names its columns, still writes the file, leaving them NULL: unknown).
ADDED_COLUMNS = {"do_not_inject": "INTEGER", "superseded": "INTEGER"}


def upgrade(conn: sqlite3.Connection, path: str) -> None:
    """Create what is missing and convert what is old, in one transaction; refuse a
    file written by a newer library."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in schema.STATEMENTS:
            conn.execute(statement)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise ConfigurationError(
                f"{path} has schema version {row[0]}, newer than this library's "
                f"{SCHEMA_VERSION}; upgrade tiered-memory"
            )
        if row is not None and int(row[0]) < 2:
            migrate_v1(conn)
        if row is not None and int(row[0]) < 3:
            migrate_v2(conn)
        add_columns(conn)  # by presence: also a version-4 file written before them
        migrate_v7(conn)  # by presence, before anything reads the texts
        if row is not None and int(row[0]) < 8:
            lexicon.replace_triggers(conn)
        lexicon.ensure_lengths(conn)  # by presence, before a rebuild writes lengths
        lexicon.ensure_current(conn)
        tier_rows.ensure(conn)
        if row is None or int(row[0]) < SCHEMA_VERSION:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def migrate_v1(conn: sqlite3.Connection) -> int:
    """Convert an `archives` table of schema version 1 (pydantic JSON in `record`, the
    summary embedding as float32) into the compact layout; returns the rows converted.
    """
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(archives)")}
    if "record" not in columns:
        return 0
    conn.execute("ALTER TABLE archives RENAME TO archives_v1")
    conn.execute(schema.ARCHIVES)
    converted = 0
    for namespace, blob, body in conn.execute(
        "SELECT namespace, summary_embedding, record FROM archives_v1 ORDER BY pk"
    ).fetchall():
        data = json.loads(body)
        data["namespace"] = namespace
        data["summary_embedding"] = (
            None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float64).tolist()
        )
        record = ArchiveRecord.model_validate(data)
        conn.execute(UPSERT, archive_row(conn, namespace, record))
        converted += 1
    conn.execute("DROP TABLE archives_v1")
    return converted


def migrate_v2(conn: sqlite3.Connection) -> int:
    """Move the inline `memories.embedding` blobs of a schema-1/2 file into
    `memory_vectors`, byte for byte, and drop the column; returns the vectors moved.

    The column is dropped (the table is rewritten once, a few seconds at 100k memories)
    so no reader can see a stale copy; the pages it frees are reused by later writes.
    """
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(memories)")}
    if "embedding" not in columns:
        return 0  # already split (a file whose archive table alone was rewritten)
    moved = conn.execute(
        "INSERT INTO memory_vectors (pk, embedding) "
        "SELECT pk, embedding FROM memories WHERE embedding IS NOT NULL ORDER BY pk"
    ).rowcount
    conn.execute("ALTER TABLE memories DROP COLUMN embedding")
    return int(moved)


def add_columns(conn: sqlite3.Connection) -> list[str]:
    """Add the `ADDED_COLUMNS` a file's `archives` table lacks; returns their names.

    Their values are unknown (NULL) in the rows already there: the flags are read back
    from each record's original by the sweep (`ArchivalPipeline.backfill_flags`)."""
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(archives)")}
    added = [name for name in ADDED_COLUMNS if name not in columns]
    for name in added:
        conn.execute(f"ALTER TABLE archives ADD COLUMN {name} {ADDED_COLUMNS[name]}")
    # the records still to backfill (`scan_archives(flags_unknown=True)`): empty once done
    conn.execute(
        "CREATE INDEX IF NOT EXISTS archives_flags_unknown ON archives (namespace, id) "
        f"WHERE {FLAGS_UNKNOWN}"
    )
    return added


def migrate_v7(conn: sqlite3.Connection) -> int:
    """Move the `memories.content` texts of a file of schema 7 or earlier into
    `memory_texts`, byte for byte, and build `memories` again without them; returns
    the texts moved.

    Built again, not `DROP COLUMN` as `migrate_v2` did: that shortens each row where it
    is, so the table keeps its pages, two thirds empty (at 1M memories 326 MB of pages
    for 125 MB of rows), and a sweep's move still rewrote all of them. The new table is
    written in pk order (pks kept), the old one dropped with its indexes and triggers,
    and those created again from `schema` (the caller runs `lexicon.replace_triggers`
    next). The old pages go to the file's free list, for its next writes. 20 s once
    for the 1M store of `benchmarks/scale.py` (2-core EPYC).
    """
    columns = [str(row[1]) for row in conn.execute("PRAGMA table_info(memories)")]
    if "content" not in columns:
        return 0
    moved = conn.execute(
        "INSERT INTO memory_texts (pk, content) SELECT pk, content FROM memories ORDER BY pk"
    ).rowcount
    kept = ", ".join(c for c in columns if c != "content")
    conn.execute("DROP TABLE IF EXISTS memories_v8")
    conn.execute(schema.memories_table("memories_v8"))
    conn.execute(f"INSERT INTO memories_v8 ({kept}) SELECT {kept} FROM memories ORDER BY pk")
    conn.execute("DROP TABLE memories")
    # Legacy renaming: the triggers of other tables that name `memories` (which is
    # gone for a moment) are left as they are, and name the new table once renamed.
    legacy = int(conn.execute("PRAGMA legacy_alter_table").fetchone()[0])
    conn.execute("PRAGMA legacy_alter_table = ON")
    try:
        conn.execute("ALTER TABLE memories_v8 RENAME TO memories")
    finally:
        conn.execute(f"PRAGMA legacy_alter_table = {'ON' if legacy else 'OFF'}")
    for statement in schema.STATEMENTS:  # the indexes and triggers of `memories`
        conn.execute(statement)
    return int(moved)
