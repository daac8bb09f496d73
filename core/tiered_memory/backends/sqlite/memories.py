"""The live memories of the embedded store: the `memories` table and its rows.

A row holds a memory's columns (its embedding is in `memory_vectors`, one row per
memory that has one, and its text in `memory_texts`, each written in the same
transaction; `memory_columns`); every statement filters by
namespace in its own WHERE clause. Reads build `Memory` objects straight from the rows
this store wrote (`memory_of`), without validating them again.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from tiered_memory.bookkeeping import after_uses, kept_days, tier_move, uses_by_id
from tiered_memory.epoch import (
    from_micros,
    from_micros_or_none,
    to_micros,
    to_micros_or_none,
)
from tiered_memory.errors import ValidationError
from tiered_memory.models import LIVE_TIERS, Memory, MemoryType, Tier, filled
from tiered_memory.ports import AccessRecord, MemoryPatch, Vector
from tiered_memory.validation import check_id, check_importance, check_namespace, check_vector

from . import lexicon
from .bulk import insert_rows
from .database import SQLiteDatabase
from .memory_columns import CONTENT, EMBEDDING, FIELDS, NAMES, TEXT_JOIN, columns
from .sql import IN_JSON, json_list
from .vector_table import VectorTable, batch_dimension, from_blob, to_blob

# `_row` builds rows in `FIELDS` order; the embedding (position _EMBEDDING) goes to
# `memory_vectors` (schema 3), the text (position _CONTENT) to `memory_texts` (schema
# 8), the other columns to `memories`.
_NAMES = NAMES
_EMBEDDING = EMBEDDING
_CONTENT = CONTENT
assert _CONTENT < _EMBEDDING  # `insert` slices the row around both
_ROW_FIELDS = FIELDS.replace(" embedding,", "").replace(" content,", "")
# Rows go in with their pks given (`MemoryTable.insert`), as multi-row statements (`bulk`).
_INSERT = f"INSERT INTO memories (pk, {_ROW_FIELDS})"
_INSERT_WIDTH = _ROW_FIELDS.count(",") + 2
_INSERT_TEXT = "INSERT INTO memory_texts (pk, content)"
_INSERT_VECTOR = "INSERT INTO memory_vectors (pk, embedding)"
_MAX_PK = (1 << 63) - 1
VECTOR_JOIN = " LEFT JOIN memory_vectors AS v ON v.pk = m.pk"

# `adjacent`'s seeks, for every hit at once: per side, the pks of the nearest live
# memories (a JSON array, nearest first). Each side is a UNION ALL of the two seeks
# (the hit's own timestamp past its pk, then the timestamps beyond); its LIMIT ends it
# as soon as the first seek found enough, so the second runs only when needed.
_LIVE = "tier IN ('hot', 'warm', 'cold') AND do_not_inject = 0 AND superseded_by IS NULL"


def _side(sign: str, reach: str, bound: str, order: str) -> str:
    seek = "SELECT pk FROM memories INDEXED BY memories_created WHERE namespace = :ns AND "
    return (
        "(SELECT json_group_array(pk) FROM ("
        f"SELECT pk FROM ({seek}created_at = o.created_at AND pk {sign} o.pk AND {_LIVE} "
        f"ORDER BY pk {order} LIMIT :n) "
        f"UNION ALL SELECT pk FROM ({seek}created_at {sign} o.created_at "
        f"AND created_at {reach} {bound} AND {_LIVE} "
        f"ORDER BY created_at {order}, pk {order} LIMIT :n) "
        "LIMIT :n))"
    )


_NEIGHBOURS = (
    f"SELECT o.id, {_side('<', '>=', 'o.created_at - :gap', 'DESC')}, "
    f"{_side('>', '<=', 'o.created_at + :gap', 'ASC')} "
    "FROM memories AS o WHERE o.namespace = :ns AND o.id IN (SELECT value FROM json_each(:ids))"
)


def to_json(value: Any, what: str) -> str:
    if not value and isinstance(value, (list, dict)):  # most rows: no metadata, no sources
        return "[]" if isinstance(value, list) else "{}"
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValidationError(f"{what} must be JSON-serialisable without NaN: {e}") from e


_MEMORY_TYPES = {t.value: t for t in MemoryType}
_TIERS = {t.value: t for t in Tier}


def _json_value(text: str) -> Any:
    """json.loads, minus its cost for the empty list and object most rows hold."""
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def memory_of(row: sqlite3.Row, with_embedding: bool, *, keep_embedding: bool = True) -> Memory:
    """A Memory from a row this store wrote (validated on the way in), without
    validating it again. `with_embedding`: the row has the embedding column;
    `keep_embedding=False` leaves it undecoded (a search's hits never carry one).

    A recall turns 100-150 candidate rows into Memory objects. Validation (and
    pydantic's `model_construct`, which still walks every field) cost about 10 us a
    row; filling the instance the way `model_construct` does costs 1.5 us. Every
    field is set, with the types validation would have produced (the contract tests
    compare these objects with validated ones).
    """
    # by position (`columns` order; extra columns after them are ignored): a name
    # lookup in a sqlite3.Row is a scan of its names, ~3.7 of 7.6 us a row
    (
        namespace, id_, content, memory_type, tier, importance, pinned, core,
        do_not_inject, superseded_by, consolidated_from, source, metadata,
    ) = row[:_EMBEDDING]  # fmt: skip
    rest = _EMBEDDING + 1 if with_embedding else _EMBEDDING
    (
        created_at, updated_at, last_accessed_at, _last_used_at, use_count, use_days,
        uses_since_cold, cold_since, tier_changed_at,
    ) = row[rest : rest + 9]  # fmt: skip
    blob = row[_EMBEDDING] if with_embedding and keep_embedding else None
    created = from_micros(created_at)
    values: dict[str, Any] = {
        "id": id_,
        "namespace": namespace,
        "content": content,
        "memory_type": _MEMORY_TYPES[memory_type],
        "tier": _TIERS[tier],
        "importance": float(importance),
        "pinned": bool(pinned),
        "core": bool(core),
        "do_not_inject": bool(do_not_inject),
        "superseded_by": superseded_by,
        "consolidated_from": _json_value(consolidated_from),
        "source": source,
        "metadata": _json_value(metadata),
        "embedding": from_blob(blob).tolist() if blob is not None else None,
        "created_at": created,
        "updated_at": created if updated_at == created_at else from_micros(updated_at),
        "last_accessed_at": from_micros_or_none(last_accessed_at),
        "use_count": use_count,
        "use_days": [date.fromisoformat(d) for d in _json_value(use_days)],
        "uses_since_cold": uses_since_cold,
        "cold_since": from_micros_or_none(cold_since),
        # most rows never changed tier: one datetime (immutable) serves both fields
        "tier_changed_at": created
        if tier_changed_at == created_at
        else from_micros_or_none(tier_changed_at),
    }
    return filled(Memory, values)


def _use_days(days: Sequence[date], keep: int) -> str:
    if not days:  # a new memory's
        return "[]"
    return json.dumps([d.isoformat() for d in kept_days(days, keep)])


def ids_in(conn: sqlite3.Connection, table: str, ns: str, ids: Sequence[str]) -> set[str]:
    """The ids among `ids` that have a row in `table` ('memories' or 'archives')."""
    sql = f"SELECT id FROM {table} WHERE namespace = ? AND id {IN_JSON}"
    return {row[0] for row in conn.execute(sql, (ns, json_list(ids)))}


Rows = list[tuple[Any, ...]]


class MemoryTable:
    """The `memories` table of one open file; keeps the vector cache in step."""

    def __init__(self, database: SQLiteDatabase, vectors: VectorTable, *, use_days_kept: int):
        self._db = database
        self._vectors = vectors
        self._use_days_kept = use_days_kept

    # -- rows written ------------------------------------------------------------------

    def _row(self, namespace: str, memory: Memory, vector: Vector | None) -> tuple[Any, ...]:
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
            to_json(memory.consolidated_from, "consolidated_from"),
            memory.source,
            to_json(memory.metadata, "metadata"),
            None if vector is None else to_blob(vector),
            to_micros(memory.created_at),
            to_micros(memory.updated_at),
            to_micros_or_none(memory.last_accessed_at),
            to_micros(memory.last_used_at),
            memory.use_count,
            _use_days(memory.use_days, self._use_days_kept),
            memory.uses_since_cold,
            to_micros_or_none(memory.cold_since),
            to_micros_or_none(memory.tier_changed_at),
        )

    def prepare(
        self,
        namespace: str,
        memories: Sequence[Memory],
        *,
        need_embedding: bool,
        vectors: Sequence[Vector] | None = None,
    ) -> tuple[Rows, int | None]:
        """The rows of a batch and its vectors' dimension, validated completely before
        anything is written; `vectors`, when given, are the memories' embeddings (their
        own are ignored)."""
        seen: set[str] = set()
        checked: list[Vector | None] = []
        for i, memory in enumerate(memories):
            if memory.id in seen:
                raise ValidationError(f"id {memory.id!r} appears twice in one batch")
            seen.add(memory.id)
            if vectors is not None:
                checked.append(check_vector(vectors[i], None))
            elif memory.embedding is None:
                if need_embedding:
                    raise ValidationError(
                        f"memory {memory.id!r} has no embedding; embed it before put_many"
                    )
                checked.append(None)
            else:
                checked.append(check_vector(memory.embedding, None))
        dimension = batch_dimension(checked)
        rows = [self._row(namespace, m, v) for m, v in zip(memories, checked, strict=True)]
        return rows, dimension

    def insert(self, conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows built by `prepare` (put_many, replace_many, unarchive_many).

        Each memory, its vector and its lexical index entries go in the caller's
        transaction, so a crash keeps all or none (docs/durability.md). The insert
        trigger queues the rows; `lexicon.index_queued` indexes them in one pass, from
        the texts in hand.

        The rows get the pks SQLite would give them (one more than the largest, in
        order), given explicitly: the vectors then go in by pk, where each was an
        INSERT ... SELECT that looked its memory up by (namespace, id).
        """
        if not rows:
            return
        first = int(conn.execute("SELECT coalesce(max(pk), 0) FROM memories").fetchone()[0]) + 1
        if first + len(rows) - 1 > _MAX_PK:  # SQLite would pick unused pks at random
            raise ValidationError("the memories table has run out of row keys")
        pks = range(first, first + len(rows))
        insert_rows(
            conn,
            _INSERT,
            [
                (pk, *r[:_CONTENT], *r[_CONTENT + 1 : _EMBEDDING], *r[_EMBEDDING + 1 :])
                for pk, r in zip(pks, rows, strict=True)
            ],
            _INSERT_WIDTH,
        )
        insert_rows(
            conn, _INSERT_TEXT, [(pk, r[_CONTENT]) for pk, r in zip(pks, rows, strict=True)], 2
        )
        lexicon.index_queued(
            conn,
            self._db.lexicon_queue,
            known={pk: (r[0], r[2]) for pk, r in zip(pks, rows, strict=True)},
        )
        insert_rows(
            conn,
            _INSERT_VECTOR,
            [
                (pk, r[_EMBEDDING])
                for pk, r in zip(pks, rows, strict=True)
                if r[_EMBEDDING] is not None
            ],
            2,
        )

    @staticmethod
    def get(
        conn: sqlite3.Connection, ns: str, ids: Sequence[str], with_embeddings: bool
    ) -> dict[str, Memory]:
        sql = (
            f"SELECT {columns('m', with_embeddings)} FROM memories AS m{TEXT_JOIN}"
            f"{VECTOR_JOIN if with_embeddings else ''} "
            f"WHERE m.namespace = ? AND m.id {IN_JSON}"
        )
        rows = conn.execute(sql, (ns, json_list(ids))).fetchall()
        return {row["id"]: memory_of(row, with_embeddings) for row in rows}

    # -- the port's calls on live memories ---------------------------------------------

    async def get_many(
        self, namespace: str, ids: Sequence[str], *, with_embeddings: bool = False
    ) -> dict[str, Memory]:
        ns = check_namespace(namespace)
        if not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            return self.get(conn, ns, ids, with_embeddings)

    async def live_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        """Which of `ids` are live memories (`SupportsLiveIds`)."""
        ns = check_namespace(namespace)
        if not ids:
            return set()
        await self._db.gate()
        with self._db.read() as conn:
            return ids_in(conn, "memories", ns, ids)

    async def patch_many(self, namespace: str, ids: Sequence[str], patch: MemoryPatch) -> int:
        ns = check_namespace(namespace)
        sets: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("pinned", patch.pinned),
            ("core", patch.core),
            ("do_not_inject", patch.do_not_inject),
        ):
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
            params.append(to_json(patch.metadata, "metadata"))
        if patch.updated_at is not None:
            sets.append("updated_at = ?")
            params.append(to_micros(patch.updated_at))
        if not sets or not ids:
            return 0
        sql = f"UPDATE memories SET {', '.join(sets)} WHERE namespace = ? AND id {IN_JSON}"
        await self._db.gate()
        with self._db.write() as conn:
            changed = conn.execute(sql, (*params, ns, json_list(ids))).rowcount
            self._vectors.refresh(conn, ns, ids)
        return changed

    async def delete_many(self, namespace: str, ids: Sequence[str]) -> int:
        ns = check_namespace(namespace)
        if not ids:
            return 0
        await self._db.gate()
        with self._db.write() as conn:
            sql = f"DELETE FROM memories WHERE namespace = ? AND id {IN_JSON}"
            deleted = conn.execute(sql, (ns, json_list(ids))).rowcount
            self._vectors.refresh(conn, ns, ids)
            self._vectors.forget_dimension_if_empty(conn)
        return deleted

    async def set_tier(self, namespace: str, ids: Sequence[str], tier: Tier, when: datetime) -> int:
        ns = check_namespace(namespace)
        move = tier_move(tier, when)
        if not ids:
            return 0
        # Only rows that actually change tier are touched, which makes reruns no-ops.
        # Rows are matched through their pk set, so they are rewritten in file order:
        # in id (random) order, a bulk move of 100k rows took three times as long.
        sql = f"""UPDATE memories SET
                tier = :tier,
                tier_changed_at = :at,
                cold_since = :cold_since,
                uses_since_cold = CASE WHEN :reset THEN 0 ELSE uses_since_cold END
            WHERE pk IN (SELECT pk FROM memories WHERE namespace = :ns
                         AND id {IN_JSON.replace("?", ":ids")})
                AND tier <> :tier"""
        params = {
            "tier": move.tier.value,
            "at": to_micros(move.tier_changed_at),
            "cold_since": to_micros_or_none(move.cold_since),
            "reset": int(move.resets_cold_uses),
            "ns": ns,
            "ids": json_list(ids),
        }
        await self._db.gate()
        with self._db.write() as conn:
            moved = conn.execute(sql, params).rowcount
            self._vectors.refresh_moved(conn, ns, ids, move.tier)
        return moved

    async def record_access(self, namespace: str, accesses: Sequence[AccessRecord]) -> None:
        ns = check_namespace(namespace)
        if not accesses:
            return
        uses = uses_by_id(accesses)
        await self._db.gate()
        with self._db.write(fsync=False) as conn:  # bookkeeping: see SQLiteDatabase.write
            rows = conn.execute(
                "SELECT id, tier, use_count, last_accessed_at, use_days, uses_since_cold, pk "
                f"FROM memories WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(uses)),
            ).fetchall()
            updates = []
            for row in rows:
                counts = after_uses(
                    tier=_TIERS[row["tier"]],
                    use_count=row["use_count"],
                    last_accessed_at=from_micros_or_none(row["last_accessed_at"]),
                    use_days=[date.fromisoformat(d) for d in json.loads(row["use_days"])],
                    uses_since_cold=row["uses_since_cold"],
                    whens=uses[row["id"]],
                    keep_days=self._use_days_kept,
                )
                last = to_micros(counts.last_accessed_at)
                updates.append(
                    (
                        counts.use_count,
                        last,
                        last,  # last_used_at = coalesce(last_accessed_at, created_at)
                        _use_days(counts.use_days, self._use_days_kept),
                        counts.uses_since_cold,
                        row["pk"],
                    )
                )
            # by the pk the read just found (same transaction): no second walk of the
            # (namespace, id) index a row
            conn.executemany(
                "UPDATE memories SET use_count = ?, last_accessed_at = ?, last_used_at = ?, "
                "use_days = ?, uses_since_cold = ? WHERE pk = ?",
                updates,
            )

    async def adjacent(
        self, namespace: str, ids: Sequence[str], *, within: timedelta, per_side: int
    ) -> dict[str, list[Memory]]:
        """The live memories written just before and after each of `ids` (at most
        `per_side` each way, no further apart than `within`), for a hit's context.

        Insertion order breaks ties between memories of one timestamp, so a batch added
        at once keeps its order. Forgotten and superseded memories are left out. Each
        side is two seeks of the index on (namespace, created_at, pk): the hit's own
        timestamp past its pk, then the timestamps beyond, only if that found too few.
        As one condition, with an OR or a row value `(created_at, pk) < (?, ?)`, SQLite
        bounded the range by `created_at` alone and read the rows of the hit's
        timestamp one by one (with a table lookup each) up to the hit: about 3.4 ms a
        side in a bulk import of 60k memories sharing one timestamp, against 0.1 ms.

        All hits' seeks are one statement (`_NEIGHBOURS`) and their rows one more: a
        recall asks for 10 hits, and a statement each (up to 41) cost about 1 ms of
        its time at 1M memories, most of it the round trips, not the seeks.
        """
        ns = check_namespace(namespace)
        out: dict[str, list[Memory]] = {}
        if not ids or per_side <= 0:
            return out
        gap = int(within.total_seconds() * 1_000_000)
        await self._db.gate()
        with self._db.read() as conn:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples
            around = [
                (origin_id, json.loads(before) + json.loads(after))
                for origin_id, before, after in cursor.execute(
                    _NEIGHBOURS,
                    {
                        "ns": ns,
                        "ids": json_list(list(dict.fromkeys(ids))),
                        "n": per_side,
                        "gap": gap,
                    },
                )
            ]
            wanted = [pk for _, pks in around for pk in pks]
            rows = {
                row[-1]: row
                for row in conn.execute(
                    f"SELECT {columns('m', False)}, m.pk FROM memories AS m{TEXT_JOIN} "
                    "WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ?",
                    (json.dumps(wanted), ns),
                )
            }
        for origin_id, pks in around:
            out[origin_id] = [memory_of(rows[pk], False) for pk in pks if pk in rows]
        return out
