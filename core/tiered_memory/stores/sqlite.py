"""The embedded default MemoryStore: one SQLite file, a per-namespace lexical index, numpy
for vectors.

Build it with `store = await SQLiteMemoryStore.open("memory.db")`; the association
graph lives in the same file: `SQLiteAssociationGraph(store.database)`.

- Durability: WAL with `synchronous=FULL`: once a call returns, its write survives a
  crash or a power loss (details in `sqlite_schema`). `stats` and `scan` read one
  snapshot; `snapshot()` spans many calls (an export).
- Namespaces: every statement filters by namespace in its own WHERE clause.
- Vector search: exact brute-force cosine over per-(namespace, tier) float32 matrices
  kept in memory (`sqlite_vectors`), updated in place by this store's writes, dropped
  on a rollback and when `PRAGMA data_version` shows another connection or process
  wrote to the file. The cheap filters are masks over cached flags; metadata filters
  run in SQL on growing batches of the best-scoring rows.
- Lexical search: BM25 over a lexical index kept per namespace (`sqlite_lexicon`;
  words by FTS5's unicode61 rules, Snowball English stems: `tiered_memory.lexicon`).
  Every statistic BM25 uses (documents, lengths, document frequencies) is the
  namespace's own, so its results and scores are the same whatever other namespaces
  hold, and reveal nothing of them. Terms found in half the namespace's texts or more
  are left out of the query (their idf is 1e-6), and above `lexical_rows` texts only
  the rarest terms are scored, so one search scores at most that many texts
  (`_lexical_terms`). Scoring reads postings alone; the tier and filters are checked
  on the best rows afterwards.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import date, datetime, timedelta
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from tiered_memory.errors import (
    ConfigurationError,
    DimensionMismatchError,
    ValidationError,
)
from tiered_memory.lexicon import LexicalStatistics, bm25, query_terms
from tiered_memory.models import (
    LIVE_TIERS,
    ArchiveRecord,
    Memory,
    MemoryType,
    Stats,
    Tier,
    TierStats,
    utc,
)
from tiered_memory.policy import TierPolicy
from tiered_memory.ports import (
    AccessRecord,
    Matrix,
    MemoryPatch,
    ScanQuery,
    ScoredMemory,
    SearchFilter,
    Vector,
)
from tiered_memory.validation import (
    check_id,
    check_importance,
    check_k,
    check_vector,
)
from tiered_memory.validation import (
    check_namespace as _check_namespace,
)

from . import sqlite_lexicon as lexicon
from .sqlite_archival import SQLiteArchivalMixin
from .sqlite_archives import ARCHIVE_KEY, SQLiteArchiveMixin
from .sqlite_query import (
    EPOCH,
    IN_JSON,
    from_us,
    json_list,
    metadata_sql,
    placeholders,
    scan_sql,
    search_filter_sql,
    tier_values,
    to_us,
    to_us_or_none,
)
from .sqlite_schema import DEFAULT_BUSY_TIMEOUT, SQLiteDatabase
from .sqlite_sweep import SQLiteSweepMixin, scan_index, tier_literal
from .sqlite_vectors import (
    FORGOTTEN,
    PINNED,
    SUPERSEDED,
    TYPE_CODES,
    Mask,
    Scores,
    VectorCache,
    VectorIndex,
    flags_of,
    unit,
    unit_rows,
)

_FIELDS = (
    "namespace, id, content, memory_type, tier, importance, pinned, core, do_not_inject, "
    "superseded_by, consolidated_from, source, metadata, embedding, created_at, updated_at, "
    "last_accessed_at, last_used_at, use_count, use_days, uses_since_cold, cold_since, "
    "tier_changed_at"
)
# `_memory_row` builds rows in `_FIELDS` order; the embedding (position _EMBEDDING) goes
# to `memory_vectors` (schema 3), the other columns to `memories`.
_EMBEDDING = [n.strip() for n in _FIELDS.split(",")].index("embedding")
_ROW_FIELDS = _FIELDS.replace(" embedding,", "")
_INSERT = (
    f"INSERT INTO memories ({_ROW_FIELDS}) VALUES ({placeholders(_ROW_FIELDS.count(',') + 1)})"
)
_INSERT_VECTOR = (
    "INSERT INTO memory_vectors (pk, embedding) "
    "SELECT pk, ? FROM memories WHERE namespace = ? AND id = ?"
)
# `_CACHE_FROM` joins each memory to its vector: memories without one are left out.
_CACHE_COLUMNS = (
    "m.id, m.tier, v.embedding, m.do_not_inject, m.superseded_by, m.pinned, m.memory_type"
)
_CACHE_FROM = "memories AS m JOIN memory_vectors AS v ON v.pk = m.pk"
DEFAULT_CACHE_ROWS = 2_000_000
# Texts one lexical search may score with BM25 (~1.5 us each): in a bigger store only
# the rarest query words are used, as many as fit under this many matches. On LoCoMo
# (1,200 turns) a cap of 1,000 ranks exactly as no cap; 300 and 100 rank slightly better.
DEFAULT_LEXICAL_ROWS = 1_000
_NO_FILTER = SearchFilter()
_METADATA_BATCH = 4  # metadata-filtered search checks k*4, then k*16, ... candidates
_QUERY_BLOCK = 64  # queries per matrix product in vector_search_many (bounds the scores)


def _columns(alias: str, with_embeddings: bool) -> str:
    """The `_FIELDS` of `alias`; the embedding is `v.embedding` (join `_VECTOR_JOIN`)."""
    names = [n.strip() for n in _FIELDS.split(",")]
    if not with_embeddings:
        names.remove("embedding")
    return ", ".join("v.embedding" if n == "embedding" else f"{alias}.{n}" for n in names)


_VECTOR_JOIN = " LEFT JOIN memory_vectors AS v ON v.pk = m.pk"


def _blob(vector: Vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _from_blob(blob: bytes) -> Vector:
    vector: Vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    return vector


def _check_dimension(dimension: int) -> int:
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise ConfigurationError(f"an embedding dimension is a positive integer, not {dimension!r}")
    return dimension


def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValidationError(f"{what} must be JSON-serialisable without NaN: {e}") from e


_MEMORY_FIELDS = frozenset(Memory.model_fields)
_MEMORY_TYPES = {t.value: t for t in MemoryType}
_TIERS = {t.value: t for t in Tier}


def _json_value(text: str) -> Any:
    """json.loads, minus its cost for the empty list and object most rows hold."""
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def _memory(row: sqlite3.Row, with_embedding: bool) -> Memory:
    """A Memory from a row this store wrote (validated on the way in), without
    validating it again.

    A recall turns 100-150 candidate rows into Memory objects. Validation (and
    pydantic's `model_construct`, which still walks every field) cost about 10 us a
    row; filling the instance the way `model_construct` does costs 1.5 us. Every
    field is set, with the types validation would have produced (the contract tests
    compare these objects with validated ones).
    """
    values: dict[str, Any] = {
        "id": row["id"],
        "namespace": row["namespace"],
        "content": row["content"],
        "memory_type": _MEMORY_TYPES[row["memory_type"]],
        "tier": _TIERS[row["tier"]],
        "importance": float(row["importance"]),
        "pinned": bool(row["pinned"]),
        "core": bool(row["core"]),
        "do_not_inject": bool(row["do_not_inject"]),
        "superseded_by": row["superseded_by"],
        "consolidated_from": _json_value(row["consolidated_from"]),
        "source": row["source"],
        "metadata": _json_value(row["metadata"]),
        "embedding": (
            _from_blob(row["embedding"]).tolist()
            if with_embedding and row["embedding"] is not None
            else None
        ),
        "created_at": EPOCH + timedelta(microseconds=row["created_at"]),
        "updated_at": EPOCH + timedelta(microseconds=row["updated_at"]),
        "last_accessed_at": from_us(row["last_accessed_at"]),
        "use_count": row["use_count"],
        "use_days": [date.fromisoformat(d) for d in _json_value(row["use_days"])],
        "uses_since_cold": row["uses_since_cold"],
        "cold_since": from_us(row["cold_since"]),
        "tier_changed_at": from_us(row["tier_changed_at"]),
    }
    if values.keys() != _MEMORY_FIELDS:  # Memory gained a field this mapping lacks
        return Memory.model_validate(values)
    memory = Memory.__new__(Memory)
    object.__setattr__(memory, "__dict__", values)
    object.__setattr__(memory, "__pydantic_fields_set__", set(_MEMORY_FIELDS))
    object.__setattr__(memory, "__pydantic_extra__", None)
    object.__setattr__(memory, "__pydantic_private__", None)
    return memory


def _best_first(scores: dict[int, float]) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _use_days(days: Iterable[date], keep: int) -> str:
    """Distinct days, oldest first, only the most recent `keep` of them."""
    return json.dumps([d.isoformat() for d in sorted(set(days))[-keep:]])


class SQLiteMemoryStore(SQLiteSweepMixin, SQLiteArchiveMixin, SQLiteArchivalMixin):
    """MemoryStore over one SQLite file. Build it with `await SQLiteMemoryStore.open(path)`."""

    def __init__(
        self,
        database: SQLiteDatabase,
        *,
        owns_database: bool = False,
        use_days_kept: int = TierPolicy().use_days_kept,
        cache_rows: int = DEFAULT_CACHE_ROWS,
        lexical_rows: int = DEFAULT_LEXICAL_ROWS,
    ) -> None:
        self._db = database
        self._lexical_rows = lexical_rows
        self._last_scores: (
            tuple[tuple[int, tuple[str, ...], int, int], list[tuple[int, float]]] | None
        ) = None
        self._owns_database = owns_database
        self._use_days_kept = use_days_kept
        self._cache = VectorCache(cache_rows)
        self._data_version: int | None = None
        self._cache_dirty = False  # the cache holds writes not yet committed
        database.on_rollback(self._rolled_back)
        database.on_commit(self._committed)

    def _rolled_back(self) -> None:
        # Cached rows may mirror writes that no longer exist; a rejected batch that never
        # reached the cache keeps it (reloading 100k vectors takes a second).
        if self._cache_dirty:
            self._cache.clear()
            self._cache_dirty = False

    def _committed(self) -> None:
        self._cache_dirty = False

    @classmethod
    async def open(
        cls,
        path: str | PathLike[str],
        *,
        verify: bool = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        use_days_kept: int = TierPolicy().use_days_kept,
        cache_rows: int = DEFAULT_CACHE_ROWS,
        lexical_rows: int = DEFAULT_LEXICAL_ROWS,
        dimension: int | None = None,
    ) -> SQLiteMemoryStore:
        """Open or create the file (schema included); `close()` closes it again.

        `dimension` is the size of the embeddings it will hold (the engine passes its
        embedder's): recorded before the first write, and a file holding vectors of
        another size is refused here (`ensure_dimension`).

        `verify=False` skips the integrity check that reads the whole file at open.
        `cache_rows` bounds the vectors kept in memory (about 1.5 KB each at 384-d).
        `lexical_rows` bounds the texts one lexical search scores with BM25 (see
        `_lexical_match`).
        """
        database = await SQLiteDatabase.open(path, verify=verify, busy_timeout=busy_timeout)
        store = cls(
            database,
            owns_database=True,
            use_days_kept=use_days_kept,
            cache_rows=cache_rows,
            lexical_rows=lexical_rows,
        )
        if dimension is not None:
            try:
                await store.ensure_dimension(dimension)
            except BaseException:
                await store.close()
                raise
        return store

    @property
    def database(self) -> SQLiteDatabase:
        """The open file, to build the graph on: `SQLiteAssociationGraph(store.database)`."""
        return self._db

    # -- dimension -----------------------------------------------------------------------

    async def dimension(self) -> int | None:
        await self._db.gate()
        with self._db.read() as conn:
            return self._dimension(conn)

    @staticmethod
    def _dimension(conn: sqlite3.Connection) -> int | None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
        return None if row is None else int(row[0])

    async def ensure_dimension(self, dimension: int) -> None:
        wanted = _check_dimension(dimension)
        await self._db.gate()
        with self._db.read() as conn:
            if self._dimension(conn) == wanted:
                return  # the usual case: one read, no write lock
        with self._db.write() as conn:
            stored = self._dimension(conn)
            if stored == wanted:
                return
            if stored is not None and not self._empty(conn):
                raise ConfigurationError(
                    f"{self._db.path} holds {stored}-d embeddings, not {wanted}-d ones: open "
                    f"it with the embedding model that wrote it (or dimension={stored}), "
                    "or use a new file"
                )
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('dimension', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(wanted),),
            )
            self._cache.clear()  # no cached matrix may keep the old width

    def _fix_dimension(self, conn: sqlite3.Connection, dimension: int | None) -> None:
        """Vectors written must have the recorded dimension (`ensure_dimension`); a store
        used without the engine, which records none, takes its first vector's."""
        if dimension is None:
            return
        stored = self._dimension(conn)
        if stored is None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('dimension', ?)", (dimension,))
        elif stored != dimension:
            raise DimensionMismatchError(
                f"embedding has dimension {dimension}, but this store holds {stored}-d "
                "vectors (use the same embedding model, or a new store)"
            )

    @staticmethod
    def _empty(conn: sqlite3.Connection) -> bool:
        return bool(
            conn.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM memories) AND NOT EXISTS (SELECT 1 FROM archives)"
            ).fetchone()[0]
        )

    @classmethod
    def _forget_dimension_if_empty(cls, conn: sqlite3.Connection) -> None:
        if cls._empty(conn):
            conn.execute("DELETE FROM meta WHERE key = 'dimension'")

    @staticmethod
    def _batch_dimension(vectors: Iterable[Vector | None]) -> int | None:
        dimension: int | None = None
        for vector in vectors:
            if vector is None:
                continue
            if dimension is None:
                dimension = int(vector.size)
            elif vector.size != dimension:
                raise DimensionMismatchError(
                    f"one batch mixes {dimension}-d and {vector.size}-d embeddings"
                )
        return dimension

    # -- writing memories ---------------------------------------------------------------

    def _memory_row(self, namespace: str, memory: Memory, vector: Vector | None) -> tuple[Any, ...]:
        if memory.tier not in LIVE_TIERS:
            raise ValidationError(
                f"memory {memory.id!r} has tier {memory.tier.value}; a live memory is HOT, "
                "WARM or COLD (archive it with archive_many)"
            )
        check_id(memory.id)
        return (
            namespace,
            memory.id,
            memory.content,
            memory.memory_type.value,
            memory.tier.value,
            check_importance(memory.importance),
            int(memory.pinned),
            int(memory.core),
            int(memory.do_not_inject),
            memory.superseded_by,
            _json(memory.consolidated_from, "consolidated_from"),
            memory.source,
            _json(memory.metadata, "metadata"),
            None if vector is None else _blob(vector),
            to_us(memory.created_at),
            to_us(memory.updated_at),
            to_us_or_none(memory.last_accessed_at),
            to_us(memory.last_used_at),
            memory.use_count,
            _use_days(memory.use_days, self._use_days_kept),
            memory.uses_since_cold,
            to_us_or_none(memory.cold_since),
            to_us_or_none(memory.tier_changed_at),
        )

    def _prepare(
        self, namespace: str, memories: Sequence[Memory], *, need_embedding: bool
    ) -> tuple[list[tuple[Any, ...]], int | None]:
        """Validate a batch completely before anything is written."""
        seen: set[str] = set()
        vectors: list[Vector | None] = []
        for memory in memories:
            if memory.id in seen:
                raise ValidationError(f"id {memory.id!r} appears twice in one batch")
            seen.add(memory.id)
            if memory.embedding is None:
                if need_embedding:
                    raise ValidationError(
                        f"memory {memory.id!r} has no embedding; embed it before put_many"
                    )
                vectors.append(None)
            else:
                vectors.append(check_vector(memory.embedding, None))
        dimension = self._batch_dimension(vectors)
        rows = [self._memory_row(namespace, m, v) for m, v in zip(memories, vectors, strict=True)]
        return rows, dimension

    async def put_many(self, namespace: str, memories: Sequence[Memory]) -> None:
        ns = _check_namespace(namespace)
        if not memories:
            return
        rows, dimension = self._prepare(ns, memories, need_embedding=True)
        ids = [m.id for m in memories]
        await self._db.gate()
        with self._db.write() as conn:
            self._fix_dimension(conn, dimension)
            taken = self._existing(conn, "memories", ns, ids) | self._existing(
                conn, "archives", ns, ids
            )
            if taken:
                raise ValidationError(
                    f"ids already exist in namespace {ns!r}: {sorted(taken)[:5]} "
                    "(ids are unique across live and archived memories)"
                )
            self._insert_memories(conn, rows)
            self._refresh(conn, ns, ids)

    async def replace_many(self, namespace: str, memories: Sequence[Memory]) -> list[ArchiveRecord]:
        """One transaction: the old rows (live, or archive records) go and the new ones
        come in together, so a failure at any step keeps the old ones."""
        ns = _check_namespace(namespace)
        if not memories:
            return []
        rows, dimension = self._prepare(ns, memories, need_embedding=True)
        ids = [m.id for m in memories]
        await self._db.gate()
        with self._db.write() as conn:
            self._fix_dimension(conn, dimension)
            archived = self._get_archives(conn, ns, ids)
            conn.execute(
                f"DELETE FROM memories WHERE namespace = ? AND id {IN_JSON}", (ns, json_list(ids))
            )
            if archived:
                conn.execute(
                    f"DELETE FROM archives WHERE namespace = ? AND id {IN_JSON}",
                    (ns, json_list(sorted(archived))),
                )
            self._insert_memories(conn, rows)
            self._refresh(conn, ns, ids)
        return [archived[i] for i in sorted(archived)]

    def _insert_memories(self, conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows built by `_prepare` (put_many, replace_many, unarchive_many).

        Each memory and its vector go in the caller's transaction, so a crash keeps
        both or neither (docs/durability.md).
        """
        conn.executemany(_INSERT, [r[:_EMBEDDING] + r[_EMBEDDING + 1 :] for r in rows])
        conn.executemany(
            _INSERT_VECTOR, [(r[_EMBEDDING], r[0], r[1]) for r in rows if r[_EMBEDDING] is not None]
        )

    @staticmethod
    def _existing(conn: sqlite3.Connection, table: str, ns: str, ids: Sequence[str]) -> set[str]:
        sql = f"SELECT id FROM {table} WHERE namespace = ? AND id {IN_JSON}"
        return {row[0] for row in conn.execute(sql, (ns, json_list(ids)))}

    async def get_many(
        self, namespace: str, ids: Sequence[str], *, with_embeddings: bool = False
    ) -> dict[str, Memory]:
        ns = _check_namespace(namespace)
        if not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            return self._get(conn, ns, ids, with_embeddings)

    @staticmethod
    def _get(
        conn: sqlite3.Connection, ns: str, ids: Sequence[str], with_embeddings: bool
    ) -> dict[str, Memory]:
        sql = (
            f"SELECT {_columns('m', with_embeddings)} FROM memories AS m"
            f"{_VECTOR_JOIN if with_embeddings else ''} "
            f"WHERE m.namespace = ? AND m.id {IN_JSON}"
        )
        rows = conn.execute(sql, (ns, json_list(ids))).fetchall()
        return {row["id"]: _memory(row, with_embeddings) for row in rows}

    async def patch_many(self, namespace: str, ids: Sequence[str], patch: MemoryPatch) -> int:
        ns = _check_namespace(namespace)
        sets: list[str] = []
        params: list[Any] = []
        for column in ("pinned", "core", "do_not_inject"):
            value = getattr(patch, column)
            if value is not None:
                sets.append(f"{column} = ?")
                params.append(int(value))
        if patch.importance is not None:
            sets.append("importance = ?")
            params.append(check_importance(patch.importance))
        if patch.superseded_by is not None and patch.clear_superseded:
            raise ValidationError("a patch cannot both set and clear superseded_by")
        if patch.superseded_by is not None:
            sets.append("superseded_by = ?")
            params.append(check_id(patch.superseded_by))
        if patch.clear_superseded:
            sets.append("superseded_by = NULL")
        if patch.metadata is not None:
            sets.append("metadata = ?")
            params.append(_json(patch.metadata, "metadata"))
        if patch.updated_at is not None:
            sets.append("updated_at = ?")
            params.append(to_us(patch.updated_at))
        if not sets or not ids:
            return 0
        sql = f"UPDATE memories SET {', '.join(sets)} WHERE namespace = ? AND id {IN_JSON}"
        await self._db.gate()
        with self._db.write() as conn:
            changed = conn.execute(sql, (*params, ns, json_list(ids))).rowcount
            self._refresh(conn, ns, ids)
        return changed

    async def delete_many(self, namespace: str, ids: Sequence[str]) -> int:
        ns = _check_namespace(namespace)
        if not ids:
            return 0
        await self._db.gate()
        with self._db.write() as conn:
            sql = f"DELETE FROM memories WHERE namespace = ? AND id {IN_JSON}"
            deleted = conn.execute(sql, (ns, json_list(ids))).rowcount
            self._refresh(conn, ns, ids)
            self._forget_dimension_if_empty(conn)
        return deleted

    async def set_tier(self, namespace: str, ids: Sequence[str], tier: Tier, when: datetime) -> int:
        ns = _check_namespace(namespace)
        target = Tier.parse(tier)
        if target not in LIVE_TIERS:
            raise ValidationError(
                f"set_tier moves live memories to HOT, WARM or COLD, not {target.value} "
                "(use archive_many)"
            )
        if not ids:
            return 0
        at = to_us(when)
        # Only rows that actually change tier are touched, which makes reruns no-ops.
        # Rows are matched through their pk set, so they are rewritten in file order:
        # in id (random) order, a bulk move of 100k rows took three times as long.
        sql = f"""UPDATE memories SET
                tier = :tier,
                tier_changed_at = :at,
                cold_since = CASE WHEN :tier = 'cold' THEN :at ELSE NULL END,
                uses_since_cold = CASE WHEN :tier = 'cold' THEN 0 ELSE uses_since_cold END
            WHERE pk IN (SELECT pk FROM memories WHERE namespace = :ns
                         AND id {IN_JSON.replace("?", ":ids")})
                AND tier <> :tier"""
        await self._db.gate()
        with self._bulk_page_cache(len(ids)), self._db.write() as conn:
            moved = conn.execute(
                sql, {"tier": target.value, "at": at, "ns": ns, "ids": json_list(ids)}
            ).rowcount
            self._refresh_moved(conn, ns, ids, target)
        return moved

    async def record_access(self, namespace: str, accesses: Sequence[AccessRecord]) -> None:
        ns = _check_namespace(namespace)
        if not accesses:
            return
        uses: dict[str, list[datetime]] = {}
        for access in accesses:
            uses.setdefault(access.id, []).append(access.when)
        await self._db.gate()
        with self._db.write(fsync=False) as conn:  # bookkeeping: see SQLiteDatabase.write
            rows = conn.execute(
                "SELECT id, tier, use_count, last_accessed_at, created_at, use_days, "
                f"uses_since_cold FROM memories WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(uses)),
            ).fetchall()
            updates = []
            for row in rows:
                whens = uses[row["id"]]
                stamps = [to_us(w) for w in whens]
                if row["last_accessed_at"] is not None:
                    stamps.append(row["last_accessed_at"])
                last = max(stamps)  # never moves back, whatever order uses arrive in
                days = [date.fromisoformat(d) for d in json.loads(row["use_days"])]
                days.extend(utc(w).date() for w in whens)
                cold_uses = len(whens) if row["tier"] == Tier.COLD.value else 0
                updates.append(
                    (
                        row["use_count"] + len(whens),
                        last,
                        last,  # last_used_at = coalesce(last_accessed_at, created_at)
                        _use_days(days, self._use_days_kept),
                        row["uses_since_cold"] + cold_uses,
                        ns,
                        row["id"],
                    )
                )
            conn.executemany(
                "UPDATE memories SET use_count = ?, last_accessed_at = ?, last_used_at = ?, "
                "use_days = ?, uses_since_cold = ? WHERE namespace = ? AND id = ?",
                updates,
            )

    # -- search ----------------------------------------------------------------------------

    def _sync_cache(self, conn: sqlite3.Connection) -> None:
        """Drop every cached matrix once another connection has written to the file."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:
            self._cache.clear()
            self._data_version = version

    def _index(self, conn: sqlite3.Connection, ns: str, part: str, dim: int) -> VectorIndex:
        """The cached matrix of one tier (or of the archive records), loaded on a miss."""
        key = (ns, part)
        index = self._cache.get(key)
        if index is not None:
            return index
        ids: list[str] = []
        blobs: list[bytes] = []
        flags: list[int] = []
        types: list[int] = []
        if part == ARCHIVE_KEY:  # quantised codes (sqlite_archives)
            index = self._archive_index(conn, ns, dim)
            self._cache.put(key, index)
            return index
        else:
            cursor = conn.execute(
                f"SELECT {_CACHE_COLUMNS} FROM {_CACHE_FROM} WHERE m.namespace = ? AND m.tier = ?",
                (ns, part),
            )
            for row in cursor:
                ids.append(row["id"])
                blobs.append(row["embedding"])
                flags.append(
                    flags_of(
                        bool(row["do_not_inject"]),
                        row["superseded_by"] is not None,
                        bool(row["pinned"]),
                    )
                )
                types.append(TYPE_CODES[MemoryType(row["memory_type"])])
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), dim)
        index = VectorIndex.build(dim, ids, matrix.astype(np.float32), flags, types)
        self._cache.put(key, index)
        return index

    def _refresh(self, conn: sqlite3.Connection, ns: str, ids: Sequence[str]) -> None:
        """Bring the cached matrices of `ns` in step with the rows of `ids` (after a write)."""
        loaded = [key for key in self._cache if key[0] == ns]
        if not loaded or not ids:
            return
        self._cache_dirty = True
        indexes = {key[1]: self._cache.get(key) for key in loaded}
        for index in indexes.values():
            if index is not None:
                for memory_id in ids:
                    index.remove(memory_id)
        wanted = json_list(ids)
        if any(part != ARCHIVE_KEY for part in indexes):
            for row in conn.execute(
                f"SELECT {_CACHE_COLUMNS} FROM {_CACHE_FROM} "
                f"WHERE m.namespace = ? AND m.id {IN_JSON}",
                (ns, wanted),
            ):
                target = indexes.get(row["tier"])
                if target is not None:
                    target.add(
                        row["id"],
                        _from_blob(row["embedding"]),
                        flags_of(
                            bool(row["do_not_inject"]),
                            row["superseded_by"] is not None,
                            bool(row["pinned"]),
                        ),
                        TYPE_CODES[MemoryType(row["memory_type"])],
                    )
        archive = indexes.get(ARCHIVE_KEY)
        if archive is not None:
            self._refresh_archive_index(conn, ns, archive, ids)

    def _query_vector(self, conn: sqlite3.Connection, query: Vector) -> tuple[Vector, int] | None:
        """The unit query and the store's dimension. The query is finite and flat (the
        engine checked it); only its size is compared, with what this file holds."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        dim = self._dimension(conn)
        if dim is None:
            return None
        if vector.size != dim:
            raise DimensionMismatchError(
                f"query vector has dimension {vector.size}, but this store holds {dim}-d "
                "vectors (embed the query with the model used for the memories)"
            )
        return unit(vector), dim

    @staticmethod
    def _mask(index: VectorIndex, filters: SearchFilter) -> Mask | None:
        """The cheap filters, answered from the flags cached beside the vectors."""
        mask: Mask | None = None

        def both(extra: Mask) -> None:
            nonlocal mask
            mask = extra if mask is None else mask & extra

        hidden = (0 if filters.include_forgotten else FORGOTTEN) | (
            0 if filters.include_superseded else SUPERSEDED
        )
        if hidden:
            both(index.without_flags(hidden))
        if filters.pinned is not None:
            both(index.with_flags(PINNED, filters.pinned))
        if filters.memory_types is not None:
            both(index.of_types(TYPE_CODES[t] for t in filters.memory_types))
        if filters.ids is not None:
            both(index.of_ids(filters.ids))
        return mask

    async def cosines(self, namespace: str, query: Vector, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of `query` to each live memory of `ids` that has an embedding.

        The retriever needs the cosine of candidates found another way (lexically,
        through the graph); the cached unit rows give it without reading and decoding
        the embeddings. Ids in no loaded partition are read from SQLite.
        """
        ns = _check_namespace(namespace)
        if not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            prepared = self._query_vector(conn, query)
            if prepared is None:
                return {}
            q = prepared[0]
            self._sync_cache(conn)
            out: dict[str, float] = {}
            for tier in LIVE_TIERS:
                index = self._cache.get((ns, tier.value))
                if index is not None:
                    out.update(index.cosines(q, [i for i in ids if i not in out]))
            missing = [i for i in ids if i not in out]
            if missing:
                for row in conn.execute(
                    f"SELECT m.id, v.embedding FROM {_CACHE_FROM} "
                    f"WHERE m.namespace = ? AND m.id {IN_JSON}",
                    (ns, json_list(missing)),
                ):
                    out[row[0]] = float(unit(_from_blob(row[1])) @ q)
        return out

    async def adjacent(
        self, namespace: str, ids: Sequence[str], *, within: timedelta, per_side: int
    ) -> dict[str, list[Memory]]:
        """The live memories written just before and after each of `ids` (at most
        `per_side` each way, no further apart than `within`), for a hit's context.

        Insertion order breaks ties between memories of one timestamp, so a batch added
        at once keeps its order. Forgotten and superseded memories are left out.
        """
        ns = _check_namespace(namespace)
        out: dict[str, list[Memory]] = {}
        if not ids or per_side <= 0:
            return out
        gap = int(within.total_seconds() * 1_000_000)
        live = "tier IN ('hot', 'warm', 'cold') AND do_not_inject = 0 AND superseded_by IS NULL"
        await self._db.gate()
        with self._db.read() as conn:
            origins = conn.execute(
                f"SELECT id, created_at, pk FROM memories WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(list(dict.fromkeys(ids)))),
            ).fetchall()
            for origin_id, created, pk in origins:
                rows: list[sqlite3.Row] = []
                for before in (True, False):
                    if before:
                        order = "created_at DESC, pk DESC"
                        side = "(created_at < ? OR (created_at = ? AND pk < ?)) AND created_at >= ?"
                        bound = created - gap
                    else:
                        order = "created_at, pk"
                        side = "(created_at > ? OR (created_at = ? AND pk > ?)) AND created_at <= ?"
                        bound = created + gap
                    rows.extend(
                        conn.execute(
                            f"SELECT {_columns('m', False)} FROM memories AS m "
                            f"INDEXED BY memories_created WHERE namespace = ? AND {side} "
                            f"AND {live} ORDER BY {order} LIMIT ?",
                            (ns, created, created, pk, bound, per_side),
                        ).fetchall()
                    )
                out[origin_id] = [_memory(row, False) for row in rows]
        return out

    async def vector_search(
        self,
        namespace: str,
        query: Vector,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = _NO_FILTER,
    ) -> list[ScoredMemory]:
        ns = _check_namespace(namespace)
        check_k(k)
        parts = tier_values(frozenset(tiers) & LIVE_TIERS)
        await self._db.gate()
        with self._db.read() as conn:
            prepared = self._query_vector(conn, query)
            if prepared is None or not parts:
                return []
            q, dim = prepared
            self._sync_cache(conn)
            best: list[tuple[str, float]] = []
            for part in parts:
                index = self._index(conn, ns, part, dim)
                if index.size == 0:
                    continue
                scores, allowed = index.scores(q, self._mask(index, filters))
                if filters.metadata:
                    best.extend(
                        self._best_matching(conn, ns, part, index, scores, allowed, k, filters)
                    )
                else:
                    best.extend(index.best(scores, min(k, allowed)))
            best.sort(key=lambda pair: (-pair[1], pair[0]))
            best = best[:k]
            found = self._get(conn, ns, [i for i, _ in best], False)
        return [ScoredMemory(found[i], score) for i, score in best if i in found]

    async def vector_search_many(
        self,
        namespace: str,
        queries: Matrix,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = _NO_FILTER,
    ) -> list[list[tuple[str, float]]]:
        """The (id, cosine) pairs `vector_search` would rank, for many queries at once:
        one matrix product per tier and block of queries instead of one pass over the
        matrix per query (add_many's deduplication and auto-linking)."""
        ns = _check_namespace(namespace)
        check_k(k)
        matrix = np.asarray(queries, dtype=np.float32)
        if filters.metadata or matrix.ndim != 2:  # metadata needs SQL: one query at a time
            return [
                [(s.memory.id, s.score) for s in found]
                for found in [
                    await self.vector_search(ns, q, tiers=tiers, k=k, filters=filters)
                    for q in matrix
                ]
            ]
        parts = tier_values(frozenset(tiers) & LIVE_TIERS)
        best: list[list[tuple[str, float]]] = [[] for _ in range(matrix.shape[0])]
        if not best:
            return best
        await self._db.gate()
        with self._db.read() as conn:
            dim = self._dimension(conn)
            if dim is None or not parts:
                return best
            if matrix.shape[1] != dim:
                raise DimensionMismatchError(
                    f"query vectors have dimension {matrix.shape[1]}, but this store holds "
                    f"{dim}-d vectors (embed them with the model used for the memories)"
                )
            units = unit_rows(matrix)
            self._sync_cache(conn)
            for part in parts:
                index = self._index(conn, ns, part, dim)
                if index.size == 0:
                    continue
                mask = self._mask(index, filters)
                for start in range(0, units.shape[0], _QUERY_BLOCK):
                    block, allowed = index.scores_many(units[start : start + _QUERY_BLOCK], mask)
                    for j in range(block.shape[1]):
                        column = np.ascontiguousarray(block[:, j])
                        best[start + j].extend(index.best(column, min(k, allowed)))
        for pairs in best:
            pairs.sort(key=lambda pair: (-pair[1], pair[0]))
            del pairs[k:]
        return best

    @staticmethod
    def _best_matching(
        conn: sqlite3.Connection,
        ns: str,
        part: str,
        index: VectorIndex,
        scores: Scores,
        allowed: int,
        k: int,
        filters: SearchFilter,
    ) -> list[tuple[str, float]]:
        """Top k that pass the metadata filters (which only SQL can evaluate).

        The best-scoring rows are checked in growing batches; once k rows of a
        best-first prefix pass, no row outside it can beat them, so this is exact.
        A filter so selective that batches reach a quarter of the partition is
        checked once over the whole partition instead. The archive partition's rows
        are archive records, whose metadata column has the same encoding.
        """
        clauses: list[str] = []
        params: list[Any] = []
        for condition in filters.metadata:
            sql, values = metadata_sql(condition)
            clauses.append(sql)
            params.extend(values)
        conditions = " AND ".join(clauses)
        table = "archives" if part == ARCHIVE_KEY else "memories"
        batch = k * _METADATA_BATCH
        while batch * _METADATA_BATCH <= allowed:
            candidates = index.best(scores, batch)
            ids = json_list(i for i, _ in candidates)
            passing = {
                row[0]
                for row in conn.execute(
                    f"SELECT m.id FROM {table} AS m WHERE m.namespace = ? "
                    f"AND m.id {IN_JSON} AND {conditions}",
                    (ns, ids, *params),
                )
            }
            matched = [pair for pair in candidates if pair[0] in passing]
            if len(matched) >= k:
                return matched[:k]
            batch *= _METADATA_BATCH
        tier: tuple[str, ...] = () if part == ARCHIVE_KEY else (part,)
        everywhere = {
            row[0]
            for row in conn.execute(
                f"SELECT m.id FROM {table} AS m WHERE m.namespace = ?"
                f"{' AND m.tier = ?' if tier else ''} AND {conditions}",
                (ns, *tier, *params),
            )
        }
        usable = index.of_ids(everywhere) & np.isfinite(scores)
        count = int(np.count_nonzero(usable))
        return index.best(np.where(usable, scores, -np.inf).astype(np.float32), min(k, count))

    async def lexical_search(
        self,
        namespace: str,
        text: str,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = _NO_FILTER,
    ) -> list[ScoredMemory]:
        ns = _check_namespace(namespace)
        check_k(k)
        parts = tier_values(frozenset(tiers) & LIVE_TIERS)
        terms = query_terms(text) if isinstance(text, str) else []
        if not terms or not parts:
            return []
        clauses, params = search_filter_sql(filters, "m")
        where = "".join(f" AND {c}" for c in clauses)
        rows_sql = (
            f"SELECT m.pk, {_columns('m', False)} FROM json_each(?) AS j "
            "CROSS JOIN memories AS m ON m.pk = j.value "
            f"WHERE m.namespace = ? AND m.tier IN ({placeholders(len(parts))}){where}"
        )
        await self._db.gate()
        with self._db.read() as conn:
            if not self._any_in(conn, ns, parts):
                return []  # e.g. the COLD phase of a store without COLD memories
            lexicon_id, stats = lexicon.statistics(conn, ns, terms, cap=self._lexical_rows)
            kept = self._lexical_terms(stats, terms)
            if lexicon_id is None or not kept:
                scored = []
            elif filters.ids is not None:
                scored = self._lexical_among_ids(conn, ns, lexicon_id, stats, kept, filters.ids)
            else:
                scored = self._lexical_scores(conn, lexicon_id, stats, kept)
            found: list[tuple[float, sqlite3.Row]] = []
            start, batch = 0, k
            while start < len(scored) and len(found) < k:
                end = min(len(scored), start + batch)
                while end < len(scored) and scored[end][1] == scored[end - 1][1]:
                    end += 1  # a batch ends between two scores, never inside a tie
                score_of = dict(scored[start:end])
                wanted = json.dumps(list(score_of))
                for row in conn.execute(rows_sql, (wanted, ns, *parts, *params)):
                    found.append((score_of[row["pk"]], row))
                start, batch = end, batch * 4
        # Once k rows of a best-first prefix pass, no later (lower-scored) row can beat them.
        found.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
        return [ScoredMemory(_memory(row, False), max(0.0, score)) for score, row in found[:k]]

    async def lexical_statistics(self, namespace: str, text: str) -> LexicalStatistics:
        """The namespace's BM25 statistics for the terms of `text`: its documents and
        tokens, and each term's document frequency (keyed by `lexicon.query_terms`).
        Counted over this namespace only, like the scores of `lexical_search`."""
        ns = _check_namespace(namespace)
        terms = query_terms(text) if isinstance(text, str) else []
        await self._db.gate()
        with self._db.read() as conn:
            return lexicon.statistics(conn, ns, terms)[1]

    def _lexical_terms(self, stats: LexicalStatistics, terms: list[str]) -> list[str]:
        """The query terms worth scoring, with the work bounded; from the namespace's
        own statistics only, so which terms count never depends on other namespaces.

        Terms found in half of the namespace's texts or more are left out, unless all
        are (their idf is 1e-6: they add nothing to any score). In a namespace of more
        than `lexical_rows` texts, only the rarest terms are kept, as many as fit with
        their summed document frequencies under `lexical_rows`: the rare terms are the
        ones whose BM25 weight decides the ranking. When no term is that rare, there
        is no lexical signal worth its cost, and no lexical hit (the vector half still
        ranks everything).
        """
        cap = self._lexical_rows
        frequency = stats.frequencies
        matching = [t for t in terms if frequency.get(t, 0) > 0]
        if stats.documents <= cap:  # a small namespace bounds the work by itself
            informative = [t for t in matching if 2 * frequency[t] < stats.documents]
            return informative or matching
        kept: list[str] = []
        budget = cap
        for term in sorted(matching, key=lambda t: frequency[t]):
            if frequency[term] > budget:
                break
            kept.append(term)
            budget -= frequency[term]
        return [t for t in terms if t in kept]  # in query order, which fixes the sums

    @staticmethod
    def _any_in(conn: sqlite3.Connection, ns: str, parts: Sequence[str]) -> bool:
        """Whether the namespace has a memory in these tiers (one index probe)."""
        return any(
            conn.execute(
                "SELECT 1 FROM memories WHERE namespace = ? AND tier = ? LIMIT 1", (ns, part)
            ).fetchone()
            for part in parts
        )

    def _lexical_scores(
        self, conn: sqlite3.Connection, ns: int, stats: LexicalStatistics, terms: list[str]
    ) -> list[tuple[int, float]]:
        """(pk, BM25) of every text of the namespace holding one of `terms`, best first,
        before any filter. The last result is reused while nothing was written (this
        connection's change count and `PRAGMA data_version` for other connections
        unchanged): a search that reaches the COLD phase asks for the same terms again.
        """
        key = (
            ns,
            tuple(terms),
            conn.total_changes,
            int(conn.execute("PRAGMA data_version").fetchone()[0]),
        )
        if self._last_scores is not None and self._last_scores[0] == key:
            return self._last_scores[1]
        scored = _best_first(bm25(stats, terms, lexicon.postings(conn, ns, terms)))
        self._last_scores = (key, scored)
        return scored

    @staticmethod
    def _lexical_among_ids(
        conn: sqlite3.Connection,
        ns: str,
        lexicon_id: int,
        stats: LexicalStatistics,
        terms: list[str],
        ids: frozenset[str],
    ) -> list[tuple[int, float]]:
        """BM25 of the given memories only (explain, pinned memories). The terms are
        those a search without `ids` scores, so a memory gets the same lexical score
        either way."""
        pks = [
            int(row[0])
            for row in conn.execute(
                f"SELECT pk FROM memories WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(sorted(ids))),
            )
        ]
        if not pks:
            return []
        return _best_first(bm25(stats, terms, lexicon.postings(conn, lexicon_id, terms, pks)))

    # -- scans and counts ----------------------------------------------------------------

    async def scan(self, namespace: str, query: ScanQuery) -> list[Memory]:
        ns = _check_namespace(namespace)
        check_k(query.limit, "limit")
        parts = tier_values(frozenset(query.tiers) & LIVE_TIERS)
        if not parts:
            return []
        clauses, params = scan_sql(query, "m")
        where = "".join(f" AND {c}" for c in clauses)
        # One query per tier: each can walk its (namespace, tier, ...) index, where a
        # `tier IN (...)` query would scan the whole namespace in id order. Merging the
        # per-tier pages by id gives the same page (UTF-8 and str order agree).
        rows: list[sqlite3.Row] = []
        await self._db.gate()
        with self._db.snapshot() as conn:  # a memory changing tier meanwhile is seen once
            for part in parts:
                sql = (
                    f"SELECT {_columns('m', False)} FROM memories AS m{scan_index(query, part)} "
                    f"WHERE namespace = ? AND tier = {tier_literal(part)}{where} "
                    "ORDER BY id LIMIT ?"
                )
                rows.extend(conn.execute(sql, (ns, *params, query.limit)).fetchall())
        rows.sort(key=lambda row: str(row["id"]))
        return [_memory(row, False) for row in rows[: query.limit]]

    async def list_ids(
        self,
        namespace: str,
        *,
        tiers: frozenset[Tier] | None = None,
        after_id: str | None = None,
        limit: int = 1000,
    ) -> list[str]:
        ns = _check_namespace(namespace)
        check_k(limit, "limit")
        wanted = LIVE_TIERS if tiers is None else frozenset(tiers)
        parts = tier_values(wanted & LIVE_TIERS)
        after = "" if after_id is None else " AND id > ?"
        bound = () if after_id is None else (after_id,)
        selects: list[str] = []
        params: list[Any] = []
        if parts:
            selects.append(
                f"SELECT id FROM memories WHERE namespace = ? "
                f"AND tier IN ({placeholders(len(parts))}){after}"
            )
            params.extend((ns, *parts, *bound))
        if Tier.ARCHIVED in wanted:
            selects.append(f"SELECT id FROM archives WHERE namespace = ?{after}")
            params.extend((ns, *bound))
        if not selects:
            return []
        sql = f"{' UNION ALL '.join(selects)} ORDER BY id LIMIT ?"
        await self._db.gate()
        with self._db.read() as conn:
            return [row[0] for row in conn.execute(sql, (*params, limit))]

    async def stats(self, namespace: str) -> Stats:
        ns = _check_namespace(namespace)
        tiers = {tier: TierStats() for tier in Tier}
        await self._db.gate()
        with self._db.snapshot() as conn:  # live and archived counts of one moment
            rows = conn.execute(
                "SELECT m.tier, count(*), "
                "sum(length(CAST(m.content AS BLOB)) + coalesce(length(v.embedding), 0) "
                "+ length(CAST(m.metadata AS BLOB))), "
                "sum(m.pinned), sum(m.core), sum(m.do_not_inject) "
                f"FROM memories AS m{_VECTOR_JOIN} WHERE m.namespace = ? GROUP BY m.tier",
                (ns,),
            ).fetchall()
            archived = conn.execute(
                "SELECT count(*), sum(length(CAST(summary AS BLOB)) "
                "+ coalesce(length(summary_code), 0) + length(checksum) "
                "+ coalesce(length(CAST(metadata AS BLOB)), 0) "
                "+ coalesce(length(CAST(links AS BLOB)), 0)) FROM archives WHERE namespace = ?",
                (ns,),
            ).fetchone()
        pinned = core = forgotten = 0
        for row in rows:
            tiers[Tier(row[0])] = TierStats(count=row[1], bytes=row[2] or 0)
            pinned += row[3] or 0
            core += row[4] or 0
            forgotten += row[5] or 0
        tiers[Tier.ARCHIVED] = TierStats(count=archived[0], bytes=archived[1] or 0)
        return Stats(namespace=ns, tiers=tiers, pinned=pinned, core=core, forgotten=forgotten)

    async def namespaces(self) -> list[str]:
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT namespace FROM memories UNION SELECT namespace FROM archives ORDER BY 1"
            ).fetchall()
        return [row[0] for row in rows]

    # -- archive records: SQLiteArchiveMixin (sqlite_archives) ---------------------------

    # -- housekeeping --------------------------------------------------------------------

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """Writes inside commit together or roll back together (graph writes included)."""
        return self._db.transaction()

    def snapshot(self) -> AbstractAsyncContextManager[None]:
        """Reads inside see one state of the file (graph reads included): one SQLite
        read transaction, which other processes' commits do not change."""
        return self._db.read_transaction()

    async def checkpoint(self) -> None:
        """Copy the WAL into the main file (`SQLiteDatabase.checkpoint`)."""
        await self._db.gate()
        self._db.checkpoint()

    async def backup(self, target: str | PathLike[str]) -> None:
        """A consistent copy of the whole file (every namespace, the graph too) in the
        new file `target`, taken with SQLite's online backup API while writers go on.
        The archived originals are not in it (`tiered_memory.backup` copies them)."""
        await self._db.gate()
        self._db.backup(Path(target))

    async def clear(self, namespace: str | None = None) -> None:
        await self._db.gate()
        with self._db.write() as conn:
            if namespace is None:
                conn.execute("DELETE FROM memories")
                conn.execute("DELETE FROM memory_vectors")  # the trigger did; no orphans
                conn.execute("DELETE FROM archival")  # likewise
                conn.execute("DELETE FROM archives")
                conn.execute("DELETE FROM meta WHERE key = 'dimension'")
                self._cache.clear()
                return
            ns = _check_namespace(namespace)
            conn.execute("DELETE FROM memories WHERE namespace = ?", (ns,))
            conn.execute("DELETE FROM archives WHERE namespace = ?", (ns,))
            self._forget_dimension_if_empty(conn)
            self._cache.drop(key for key in self._cache if key[0] == ns)

    async def close(self) -> None:
        """Closes the file when this store opened it (`open()`); the graph never does."""
        self._cache.clear()
        if self._owns_database:
            await self._db.close()
