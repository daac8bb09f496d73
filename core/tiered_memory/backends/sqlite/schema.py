"""The tables, indexes and triggers of the embedded store's file, as of the current
schema version (`migrations` brings older files here).

Timestamps are integer microseconds since the Unix epoch, UTC (`tiered_memory.epoch`):
exact and ordered. Every statement is idempotent (IF NOT EXISTS), so opening a file
runs them all.
"""

from __future__ import annotations

from . import ann, lexicon, tier_rows
from .events import EVENTS, EVENTS_INDEX


def memories_table(name: str) -> str:
    """The `memories` table under `name` (`migrations.migrate_v7` builds it anew as
    another name and renames it)."""
    # `pk` is the integer key the lexical index points at; (namespace, id) is the real
    # key. Timestamps are integer microseconds since the Unix epoch, UTC: exact and
    # ordered. The text is beside, in `memory_texts` (below).
    return f"""CREATE TABLE IF NOT EXISTS {name} (
        pk INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        memory_type TEXT NOT NULL,
        tier TEXT NOT NULL CHECK (tier IN ('hot', 'warm', 'cold')),
        importance REAL NOT NULL,
        pinned INTEGER NOT NULL DEFAULT 0,
        core INTEGER NOT NULL DEFAULT 0,
        do_not_inject INTEGER NOT NULL DEFAULT 0,
        superseded_by TEXT,
        consolidated_from TEXT NOT NULL DEFAULT '[]',
        source TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{{}}',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        last_accessed_at INTEGER,
        last_used_at INTEGER NOT NULL,
        use_count INTEGER NOT NULL DEFAULT 0,
        use_days TEXT NOT NULL DEFAULT '[]',
        uses_since_cold INTEGER NOT NULL DEFAULT 0,
        cold_since INTEGER,
        tier_changed_at INTEGER,
        UNIQUE (namespace, id)
    )"""


# One compact row per archived memory (layout and encodings: `archive_rows`). WITHOUT
# ROWID: the (namespace, id) key is the table itself, no second index repeats the id.
# The memory's flags (`do_not_inject`, `superseded`) came with version 4: NULL is "not
# known yet" (`migrations.add_columns`).
# `storage_ref` and `archive_reason` have no declared type: an integer is a key of
# `archives_strings`, text a value kept as it is.
ARCHIVES = """CREATE TABLE IF NOT EXISTS archives (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        summary TEXT NOT NULL,
        summary_code BLOB,
        memory_type INTEGER NOT NULL,
        importance REAL NOT NULL,
        source TEXT,
        metadata TEXT,
        links TEXT,
        storage_ref,
        size_bytes INTEGER NOT NULL,
        checksum,
        storage_verified INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        archived_at INTEGER NOT NULL,
        archive_reason,
        use_count INTEGER NOT NULL,
        expansions TEXT,
        do_not_inject INTEGER,
        superseded INTEGER,
        PRIMARY KEY (namespace, id)
    ) WITHOUT ROWID"""

# The archival journal (`archival`), schema 4: one row per live memory being archived
# or that failed to be. WITHOUT ROWID: (namespace, id) is the table itself. The row goes
# with its memory: the trigger deletes it when the live row is deleted, which is what
# committing the archive record does (`archive_many`), and `delete_many` and `clear`.
ARCHIVAL = [
    """CREATE TABLE IF NOT EXISTS archival (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        claimant TEXT,
        claimed_until INTEGER,
        written TEXT,
        failures INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        failed_at INTEGER,
        quarantined INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (namespace, id)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER IF NOT EXISTS memories_archival_delete AFTER DELETE ON memories BEGIN
        DELETE FROM archival WHERE namespace = old.namespace AND id = old.id;
    END""",
]

# Originals to delete from object storage (`pending`): written in the transaction of
# the hard delete, replace or restore that let go of them, so an unreachable object
# store blocks none of them and no original is left that nothing names. Added without
# a schema version: an older library ignores the table (its deletes do as they did).
PENDING_ORIGINALS = """CREATE TABLE IF NOT EXISTS pending_originals (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        checksum TEXT NOT NULL,
        hand_on INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (namespace, id, checksum)
    ) WITHOUT ROWID"""

STATEMENTS = [
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    memories_table("memories"),
    # A memory's embedding (little-endian float32), keyed by its `memories.pk`; no row
    # when it has none. Kept out of `memories` so the rows the sweep reads and rewrites
    # (tier moves) are about 0.6 KB instead of 2.1 KB at 384-d: moving 100k rows rewrote
    # 100k embeddings that did not change. Written in the memory's transaction (put_many,
    # unarchive_many), deleted with it by the trigger below.
    """CREATE TABLE IF NOT EXISTS memory_vectors (
        pk INTEGER PRIMARY KEY,
        embedding BLOB NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS memories_vector_delete AFTER DELETE ON memories BEGIN
        DELETE FROM memory_vectors WHERE pk = old.pk;
    END""",
    # A memory's text, keyed by its `memories.pk` (schema 8). Kept out of `memories` for
    # the reason the embedding is: a sweep rewrites the rows of the memories it moves,
    # and at 1M memories (181 characters of text on average) moving 976k of them
    # rewrote 311 MB of rows, 4.5 s of UPDATE and 4.1 s of commit and checkpoint;
    # without the text the same rows are about a third of that. Metadata stays in the
    # rows: filters read it for every candidate, and most memories have none. Written
    # in the memory's transaction (`MemoryTable.insert`); deleted with it by the
    # lexicon's delete trigger, after the postings it names (`lexicon`).
    """CREATE TABLE IF NOT EXISTS memory_texts (
        pk INTEGER PRIMARY KEY,
        content TEXT NOT NULL
    )""",
    # The sweep's scans: one tier of one namespace, by id, or bounded by the timestamp
    # of its rule (`sweep.scan_index`). The bounded ones are partial indexes of
    # the one tier their rule reads, not (namespace, tier, timestamp) over every tier:
    # a tier move then updates the entries of the tiers it leaves and enters (two or
    # three) instead of all four indexes, twice each. Moving 98k rows HOT -> WARM took
    # 2.2-3.3 s with the four full indexes, 1.2 s without them.
    "CREATE INDEX IF NOT EXISTS memories_tier_id ON memories (namespace, tier, id)",
    """CREATE INDEX IF NOT EXISTS memories_hot_changed
        ON memories (namespace, tier_changed_at) WHERE tier = 'hot'""",
    """CREATE INDEX IF NOT EXISTS memories_warm_used
        ON memories (namespace, last_used_at) WHERE tier = 'warm'""",
    """CREATE INDEX IF NOT EXISTS memories_cold_since
        ON memories (namespace, cold_since) WHERE tier = 'cold'""",
    """CREATE INDEX IF NOT EXISTS memories_cold_created
        ON memories (namespace, created_at) WHERE tier = 'cold'""",
    # The rules with no timestamp bound (`sweep.scan_index`): superseded memories, COLD
    # ones used since they went cold, used ones (core candidates). Each reads the few
    # rows that can qualify; through the tier index, an idle sweep read every row of a
    # tier three times over (0.2 s at 100k memories, linear in the store).
    """CREATE INDEX IF NOT EXISTS memories_superseded
        ON memories (namespace, tier, id) WHERE superseded_by IS NOT NULL""",
    """CREATE INDEX IF NOT EXISTS memories_cold_used
        ON memories (namespace, id) WHERE tier = 'cold' AND uses_since_cold > 0""",
    """CREATE INDEX IF NOT EXISTS memories_used
        ON memories (namespace, tier, id) WHERE use_count > 0""",
    # Their schema-2 (and early schema-3) predecessors, over every tier. A no-op once gone.
    "DROP INDEX IF EXISTS memories_tier_created",
    "DROP INDEX IF EXISTS memories_tier_used",
    "DROP INDEX IF EXISTS memories_tier_cold",
    "DROP INDEX IF EXISTS memories_tier_changed",
    # A hit's context: the memories written just before and after it (`adjacent`).
    """CREATE INDEX IF NOT EXISTS memories_created
        ON memories (namespace, created_at, pk)""",
    # The few pinned memories, which recall() scans for on every call.
    """CREATE INDEX IF NOT EXISTS memories_pinned
        ON memories (namespace, tier, id) WHERE pinned = 1""",
    # The lexical index, per namespace (`lexicon`), kept in step by triggers.
    *lexicon.SCHEMA,
    ARCHIVES,
    # Strings many archive records share: storage templates and archive reasons.
    """CREATE TABLE IF NOT EXISTS archives_strings (
        pk INTEGER PRIMARY KEY,
        value TEXT NOT NULL UNIQUE
    )""",
    # Associations: both directions are stored as rows, so a node's links are one
    # prefix of the primary key whichever side it was linked from, and the rows naming
    # it as a target are the mirrors of those (`graph.drop_nodes` deletes them by key).
    """CREATE TABLE IF NOT EXISTS links (
        namespace TEXT NOT NULL,
        source TEXT NOT NULL,
        target TEXT NOT NULL,
        weight REAL NOT NULL CHECK (weight >= 0.0 AND weight <= 1.0),
        kind TEXT NOT NULL,
        created_at INTEGER,
        updated_at INTEGER,
        PRIMARY KEY (namespace, source, target),
        CHECK (source <> target)
    ) WITHOUT ROWID""",
    # An index on (namespace, target) until this version; only dropping a node used it,
    # and every auto-link of add_many wrote two entries in it at random places (a
    # seventh of the pages an add_many with links wrote at 100k memories). A no-op once
    # gone; an older library recreates it when it opens the file, which is harmless.
    "DROP INDEX IF EXISTS links_target",
    *ARCHIVAL,
    PENDING_ORIGINALS,
    # The operations log behind stats()'s dashboard numbers (`events`).
    EVENTS,
    EVENTS_INDEX,
    # The log of deleted vectors the approximate indexes catch up from (`ann`).
    *ann.SCHEMA,
    # Memories per (namespace, tier), which steer a vector search (`tier_rows`).
    *tier_rows.SCHEMA,
]
