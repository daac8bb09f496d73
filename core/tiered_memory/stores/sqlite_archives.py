"""The SQLite store's archive records: a compact row per archived memory.

An archive record exists so that an archived memory stays findable at a fraction of
the cost of a live one (seed 001: "~85 % smaller"); everything needed to get the memory
back exactly is in its original in object storage, verified by the record's checksum.
So the row keeps only what search and display need, in the smallest exact form:

- the summary embedding as a ternary code (`encode_code`): each dimension -1, 0 or +1
  times one scale, 5 dimensions a byte (77 bytes for 384-d instead of 1,536 as
  float32). The support is the k largest magnitudes, k chosen to maximise the cosine
  between the vector and its code ("fidelity", about 0.9 for dense sentence
  embeddings, 1.0 for vectors with a single magnitude such as axis vectors). Search
  scores the cached codes and divides by the record's fidelity, which makes the score
  an unbiased estimate of the cosine to the float vector (mean error 0.017 on LoCoMo
  with MiniLM, against 0.053 uncalibrated); a query equal to the summary's own
  embedding scores 1.0 on its own record. The port hands back the dequantised vector
  (scale x code), which is exact for single-magnitude vectors.
- real columns instead of pydantic JSON: integer microseconds, the checksum as 32 raw
  bytes, a memory-type code, NULL for defaults (source 'api', no metadata, no links,
  no expansions), and the storage pointer and archive reason interned in
  `archives_strings` (a pointer is stored as the template it shares with the other
  records of its folder, e.g. `file:///data/ns/{id}%40{checksum}.json`).
- the table is WITHOUT ROWID with (namespace, id) as its key, so no second index
  repeats the id.
- what a search filters on, as for a live memory: the memory type and metadata, and the
  memory's flags (`do_not_inject`, `superseded`; NULL while unknown, in rows written
  before they were kept). The vector cache holds the type and flags beside each code,
  so `search_archives` answers types, ids and flags from a mask and metadata by SQL.

Files of schema version 1 (pydantic JSON plus a float32 blob) are converted once when
opened (`migrate_v1`); a summary embedding then goes through the same quantiser.
`SQLiteMemoryStore` inherits `SQLiteArchiveMixin`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tiered_memory.errors import (
    DimensionMismatchError,
    NotFoundError,
    ValidationError,
)
from tiered_memory.models import ArchiveRecord, Link, LinkKind, Memory, MemoryType
from tiered_memory.ports import Matrix, MetadataFilter, ScoredArchive, SearchFilter, Vector
from tiered_memory.validation import check_id, check_k, check_vector
from tiered_memory.validation import check_namespace as _namespace

from .sqlite_query import IN_JSON, from_us, json_list, metadata_sql, to_us, to_us_or_none
from .sqlite_vectors import TYPE_CODES, Mask, Scores, VectorIndex, flags_of

if TYPE_CHECKING:
    from .sqlite_schema import SQLiteDatabase
    from .sqlite_vectors import VectorCache

ARCHIVE_KEY = "archived"  # vector-cache partition of a namespace's archive records
_NO_FILTER = SearchFilter()

# -- the summary-embedding code ------------------------------------------------------------

# scale (float32), fidelity (uint8, 1/255 steps: far finer than the estimate's own
# error), then the trits. The dimension is the store's (meta); the layout is the
# schema version's (sqlite_schema).
_HEADER = struct.Struct("<fB")
_TRITS = 5  # dimensions per byte: 3**5 = 243 <= 256
_POWERS = 3 ** np.arange(_TRITS, dtype=np.int64)


def code_size(dimension: int) -> int:
    return _HEADER.size + -(-dimension // _TRITS)


def encode_code(vector: Vector) -> bytes:
    """The ternary code of a finite vector (see the module docstring)."""
    v = np.asarray(vector, dtype=np.float64)
    magnitude = np.abs(v)
    order = np.argsort(-magnitude, kind="stable")
    sums = np.cumsum(magnitude[order])
    norm = float(np.linalg.norm(v))
    trits = np.zeros(v.size, dtype=np.int64)
    if norm == 0.0:
        scale, fidelity = 0.0, 1.0
    else:
        # cos(v, code of the k largest) = sums[k-1] / (sqrt(k) * |v|): maximise over k.
        k = int(np.argmax(sums / np.sqrt(np.arange(1, v.size + 1)))) + 1
        support = order[:k]
        trits[support] = np.where(v[support] > 0, 1, -1)
        scale = float(sums[k - 1]) / k  # least squares: the mean kept magnitude
        fidelity = min(1.0, float(sums[k - 1]) / (np.sqrt(k) * norm))
    digits = np.ones(-(-v.size // _TRITS) * _TRITS, dtype=np.int64)
    digits[: v.size] = trits + 1
    packed = (digits.reshape(-1, _TRITS) * _POWERS).sum(axis=1).astype(np.uint8)
    level = max(1, round(fidelity * 255))
    return _HEADER.pack(scale, level) + bytes(packed.tobytes())


def _header(code: bytes, dimension: int) -> tuple[float, float]:
    """(scale, fidelity) of a code of a `dimension`-d vector."""
    if len(code) != code_size(dimension):
        raise ValidationError(
            f"a summary-embedding code of {len(code)} bytes is not one of a {dimension}-d vector"
        )
    scale, level = _HEADER.unpack_from(code)
    return float(scale), level / 255


def _trits(payload: bytes, rows: int, dimension: int) -> Matrix:
    packed = np.frombuffer(payload, dtype=np.uint8).astype(np.int64).reshape(rows, -1)
    digits = (packed[:, :, None] // _POWERS) % 3
    out: Matrix = (digits.reshape(rows, -1)[:, :dimension] - 1).astype(np.float32)
    return out


def decode_code(code: bytes, dimension: int) -> tuple[Vector, float]:
    """The dequantised vector (scale x code) and the code's fidelity."""
    scale, fidelity = _header(code, dimension)
    vector: Vector = _trits(code[_HEADER.size :], 1, dimension)[0] * np.float32(scale)
    return vector, fidelity


def fidelity_of(code: bytes, dimension: int) -> float:
    return _header(code, dimension)[1]


def decode_directions(codes: Sequence[bytes], dimension: int) -> Matrix:
    """The codes of many records as rows of -1/0/+1 (their directions), vectorised."""
    if not codes:
        return np.zeros((0, dimension), dtype=np.float32)
    for code in codes:
        _header(code, dimension)
    payload = b"".join(code[_HEADER.size :] for code in codes)
    return _trits(payload, len(codes), dimension)


# ids, summary codes, and the filter facts the cache keeps beside them (`flags_of`
# of the record's flags, unknown read as unset; `TYPE_CODES` of its memory type)
CodeRows = tuple[list[str], list[bytes], list[int], list[int]]


class CalibratedIndex(VectorIndex):
    """The archive partition of the vector cache: each row is the unit direction of a
    code divided by the code's fidelity, so the dot product with a unit query is the
    calibrated cosine estimate itself, and ranking by it is exact (no re-ranking)."""

    @classmethod
    def of_codes(cls, dimension: int, rows: CodeRows) -> VectorIndex:
        ids, codes, flags, types = rows
        n = len(ids)
        index = cls.build(dimension, ids, decode_directions(codes, dimension), flags, types)
        index._vectors[:n] /= _fidelities(codes, dimension)[:, None]
        return index

    def add_codes(self, rows: CodeRows) -> None:
        ids, codes, flags, types = rows
        if not ids:
            return
        directions = decode_directions(codes, self.dimension)
        for memory_id, direction, fidelity, flag, type_code in zip(
            ids, directions, _fidelities(codes, self.dimension), flags, types, strict=True
        ):
            self.add(memory_id, direction, flag, type_code)
            self._vectors[self._pos[memory_id]] /= fidelity


def _fidelities(codes: Sequence[bytes], dimension: int) -> Matrix:
    out: Matrix = np.array([fidelity_of(c, dimension) for c in codes], dtype=np.float32)
    return out


# -- the row -------------------------------------------------------------------------------

_TYPE_CODES = {
    MemoryType.EPISODIC: 0,
    MemoryType.FACTUAL: 1,
    MemoryType.PROJECT: 2,
    MemoryType.PROCEDURAL: 3,
}
_TYPES = {code: t for t, code in _TYPE_CODES.items()}
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_ID_SLOT = "\x00"  # where a storage template takes the record's id (never in a ref)
_SUM_SLOT = "\x01"  # ... and its checksum (ids never hold control characters)
DEFAULT_SOURCE = "api"

COLUMNS = (
    "namespace, id, summary, summary_code, memory_type, importance, source, metadata, "
    "links, storage_ref, size_bytes, checksum, storage_verified, created_at, archived_at, "
    "archive_reason, use_count, expansions, do_not_inject, superseded"
)
# Columns added to the table after it was first laid out (NULL in the rows before), with
# schema version 4: `add_columns` adds them to older files, by presence, so a version-4
# file written before them gets them too (and such a library, which names its columns,
# still writes the file, leaving them NULL: unknown).
ADDED_COLUMNS = {"do_not_inject": "INTEGER", "superseded": "INTEGER"}
_FLAGS_UNKNOWN = "(do_not_inject IS NULL OR superseded IS NULL)"
_COLUMN_NAMES = [c.strip() for c in COLUMNS.split(",")]
_UPSERT = (
    f"INSERT INTO archives ({COLUMNS}) VALUES ({', '.join('?' * len(_COLUMN_NAMES))}) "
    "ON CONFLICT (namespace, id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMN_NAMES[2:])
)
_UPDATE = (
    f"UPDATE archives SET {', '.join(f'{c} = ?' for c in _COLUMN_NAMES[2:])} "
    "WHERE namespace = ? AND id = ?"
)


def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValidationError(f"{what} must be JSON-serialisable without NaN: {e}") from e


def intern(conn: sqlite3.Connection, value: str) -> int:
    """The key of `value` in `archives_strings`, added if new (inside the write)."""
    row = conn.execute("SELECT pk FROM archives_strings WHERE value = ?", (value,)).fetchone()
    if row is not None:
        return int(row[0])
    cur = conn.execute("INSERT INTO archives_strings (value) VALUES (?)", (value,))
    return int(cur.lastrowid or 0)


def _strings(conn: sqlite3.Connection, keys: Iterable[Any]) -> dict[int, str]:
    wanted = sorted({k for k in keys if isinstance(k, int)})
    if not wanted:
        return {}
    rows = conn.execute(
        "SELECT pk, value FROM archives_strings WHERE pk IN (SELECT value FROM json_each(?))",
        (json.dumps(wanted),),
    )
    return {int(pk): str(value) for pk, value in rows}


def _encode_links(record: ArchiveRecord) -> str | None:
    """[target, weight, kind, created_us, updated_us(, source)]: the source is the
    record's id unless it says otherwise; floats keep their exact repr."""
    if not record.links:
        return None
    rows: list[list[Any]] = []
    for link in record.links:
        row: list[Any] = [
            link.target,
            link.weight,
            link.kind.value,
            to_us_or_none(link.created_at),
            to_us_or_none(link.updated_at),
        ]
        if link.source != record.id:
            row.append(link.source)
        rows.append(row)
    return _json(rows, "links")


def _decode_links(text: str | None, memory_id: str) -> list[Link]:
    if text is None:
        return []
    return [
        Link(
            source=row[5] if len(row) > 5 else memory_id,
            target=row[0],
            weight=row[1],
            kind=LinkKind(row[2]),
            created_at=from_us(row[3]),
            updated_at=from_us(row[4]),
        )
        for row in json.loads(text)
    ]


def archive_row(conn: sqlite3.Connection, ns: str, record: ArchiveRecord) -> tuple[Any, ...]:
    """The row of `record`, in `COLUMNS` order (interns its strings: call it in a write)."""
    check_id(record.id)
    code = (
        None
        if record.summary_embedding is None
        else encode_code(check_vector(record.summary_embedding, None, what="summary embedding"))
    )
    ref = record.storage_ref
    template = ref
    if _HEX_DIGEST.fullmatch(record.checksum) and _SUM_SLOT not in ref:
        head, found_sum, tail = ref.rpartition(record.checksum)
        if found_sum:  # a content-addressed key (archive.original_key)
            template = head + _SUM_SLOT + tail
    prefix, found, suffix = template.rpartition(record.id)
    storage: int | str = ref
    if found and _ID_SLOT not in ref:
        storage = intern(conn, prefix + _ID_SLOT + suffix)
    checksum: bytes | str = (
        bytes.fromhex(record.checksum)
        if _HEX_DIGEST.fullmatch(record.checksum)
        else record.checksum
    )
    return (
        ns,
        record.id,
        record.summary,
        code,
        _TYPE_CODES[record.memory_type],
        record.importance,
        None if record.source == DEFAULT_SOURCE else record.source,
        _json(record.metadata, "metadata") if record.metadata else None,
        _encode_links(record),
        storage,
        record.size_bytes,
        checksum,
        int(record.storage_verified),
        to_us(record.created_at),
        to_us(record.archived_at),
        intern(conn, record.archive_reason),
        record.use_count,
        _json([to_us(t) for t in record.expansions], "expansions") if record.expansions else None,
        _flag(record.do_not_inject),
        _flag(record.superseded),
    )


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _unflag(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def _record(row: sqlite3.Row, strings: dict[int, str], dimension: int | None) -> ArchiveRecord:
    memory_id = str(row["id"])
    storage = row["storage_ref"]
    checksum = row["checksum"]
    digest = checksum.hex() if isinstance(checksum, bytes) else checksum
    ref = (
        strings[storage].replace(_ID_SLOT, memory_id).replace(_SUM_SLOT, digest)
        if isinstance(storage, int)
        else storage
    )
    code = row["summary_code"]
    expansions = row["expansions"]
    return ArchiveRecord(
        id=memory_id,
        namespace=row["namespace"],
        summary=row["summary"],
        summary_embedding=(
            None if code is None or dimension is None else decode_code(code, dimension)[0].tolist()
        ),
        memory_type=_TYPES[row["memory_type"]],
        importance=row["importance"],
        source=row["source"] if row["source"] is not None else DEFAULT_SOURCE,
        metadata=json.loads(row["metadata"]) if row["metadata"] is not None else {},
        links=_decode_links(row["links"], memory_id),
        storage_ref=ref,
        size_bytes=row["size_bytes"],
        checksum=digest,
        storage_verified=bool(row["storage_verified"]),
        created_at=from_us(row["created_at"]),
        archived_at=from_us(row["archived_at"]),
        archive_reason=strings[row["archive_reason"]],
        use_count=row["use_count"],
        expansions=[from_us(t) for t in json.loads(expansions)] if expansions else [],
        do_not_inject=_unflag(row["do_not_inject"]),
        superseded=_unflag(row["superseded"]),
    )


def records(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[ArchiveRecord]:
    keys = [row["storage_ref"] for row in rows] + [row["archive_reason"] for row in rows]
    strings = _strings(conn, keys)
    found = conn.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
    dimension = None if found is None else int(found[0])
    return [_record(row, strings, dimension) for row in rows]


# -- schema version 1 ------------------------------------------------------------------------


def migrate_v1(conn: sqlite3.Connection, create_archives: str) -> int:
    """Convert an `archives` table of schema version 1 (pydantic JSON in `record`, the
    summary embedding as float32) into the compact layout; returns the rows converted.

    Runs inside the opening transaction, so a crash leaves the file as it was."""
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(archives)")}
    if "record" not in columns:
        return 0
    conn.execute("ALTER TABLE archives RENAME TO archives_v1")
    conn.execute(create_archives)
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
        conn.execute(_UPSERT, archive_row(conn, namespace, record))
        converted += 1
    conn.execute("DROP TABLE archives_v1")
    return converted


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
        f"WHERE {_FLAGS_UNKNOWN}"
    )
    return added


# -- the store's archive methods -----------------------------------------------------------


def _keep_code(
    conn: sqlite3.Connection, ns: str, record: ArchiveRecord, row: tuple[Any, ...]
) -> tuple[Any, ...]:
    """`row` with the stored summary code kept when the record carries the vector that
    code reads back as (an update of a record as read: an expansion, a backfill).

    Coding the read-back vector again would give the same trits with fidelity 1.0, so
    the record's calibrated scores would drop by its true fidelity (about 0.9)."""
    if record.summary_embedding is None:
        return row
    found = conn.execute(
        "SELECT summary_code FROM archives WHERE namespace = ? AND id = ?", (ns, record.id)
    ).fetchone()
    dimension = len(record.summary_embedding)
    if found is None or found[0] is None or len(found[0]) != code_size(dimension):
        return row
    stored, _ = decode_code(found[0], dimension)
    if not np.array_equal(stored, np.asarray(record.summary_embedding, dtype=np.float32)):
        return row
    return (*row[:3], found[0], *row[4:])


def _select(where: str) -> str:
    return f"SELECT {COLUMNS} FROM archives WHERE namespace = ? AND {where}"


class SQLiteArchiveMixin:
    """Archive records of `SQLiteMemoryStore` (MemoryStore port); uses its connection,
    its dimension bookkeeping and its vector cache."""

    _db: SQLiteDatabase
    _cache: VectorCache

    # -- provided by SQLiteMemoryStore ---------------------------------------------------

    def _fix_dimension(self, conn: sqlite3.Connection, dimension: int | None) -> None:
        raise NotImplementedError

    def _refresh(self, conn: sqlite3.Connection, ns: str, ids: Sequence[str]) -> None:
        raise NotImplementedError

    def _sync_cache(self, conn: sqlite3.Connection) -> None:
        raise NotImplementedError

    def _index(self, conn: sqlite3.Connection, ns: str, part: str, dim: int) -> VectorIndex:
        raise NotImplementedError

    def _query_vector(self, conn: sqlite3.Connection, query: Vector) -> tuple[Vector, int] | None:
        raise NotImplementedError

    @staticmethod
    def _mask(index: VectorIndex, filters: SearchFilter) -> Mask | None:
        raise NotImplementedError

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
        raise NotImplementedError

    def _prepare(
        self, namespace: str, memories: Sequence[Memory], *, need_embedding: bool
    ) -> tuple[list[tuple[Any, ...]], int | None]:
        raise NotImplementedError

    def _insert_memories(self, conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _ids_in(conn: sqlite3.Connection, table: str, ns: str, ids: Sequence[str]) -> set[str]:
        sql = f"SELECT id FROM {table} WHERE namespace = ? AND id {IN_JSON}"
        return {row[0] for row in conn.execute(sql, (ns, json_list(ids)))}

    @staticmethod
    def _records_dimension(records: Sequence[ArchiveRecord]) -> int | None:
        sizes = {len(r.summary_embedding) for r in records if r.summary_embedding is not None}
        if len(sizes) > 1:
            raise DimensionMismatchError(
                f"one batch mixes summary embeddings of dimensions {sorted(sizes)}"
            )
        return sizes.pop() if sizes else None

    @staticmethod
    def _archive_codes(
        conn: sqlite3.Connection, ns: str, ids: Sequence[str] | None = None
    ) -> CodeRows:
        """Ids, summary codes and filter facts of a namespace's records (of `ids` only,
        if given)."""
        sql = (
            "SELECT id, summary_code, memory_type, do_not_inject, superseded "
            "FROM archives WHERE namespace = ? "
        )
        params: tuple[Any, ...] = (ns,)
        if ids is not None:
            sql += f"AND id {IN_JSON} "
            params = (ns, json_list(ids))
        rows = conn.execute(sql + "AND summary_code IS NOT NULL", params).fetchall()
        return (
            [row[0] for row in rows],
            [row[1] for row in rows],
            [flags_of(bool(row[3]), bool(row[4]), False) for row in rows],
            [TYPE_CODES[_TYPES[row[2]]] for row in rows],
        )

    def _archive_index(self, conn: sqlite3.Connection, ns: str, dim: int) -> VectorIndex:
        """The archive partition of the vector cache, loaded from the codes."""
        return CalibratedIndex.of_codes(dim, self._archive_codes(conn, ns))

    def _refresh_archive_index(
        self, conn: sqlite3.Connection, ns: str, index: VectorIndex, ids: Sequence[str]
    ) -> None:
        """Re-add the cached rows of `ids` after a write (the caller removed them)."""
        if not isinstance(index, CalibratedIndex):  # never: _archive_index builds them
            raise TypeError("the archive partition of the cache is not a CalibratedIndex")
        index.add_codes(self._archive_codes(conn, ns, ids))

    @staticmethod
    def _get_archives(
        conn: sqlite3.Connection, ns: str, ids: Sequence[str]
    ) -> dict[str, ArchiveRecord]:
        rows = conn.execute(_select(f"id {IN_JSON}"), (ns, json_list(ids))).fetchall()
        return {r.id: r for r in records(conn, rows)}

    # -- the port ------------------------------------------------------------------------

    async def archive_many(
        self, namespace: str, records: Sequence[ArchiveRecord], *, claimant: str | None = None
    ) -> int:
        """One transaction: each record replaces its live memory. A record whose memory is
        not live (already archived, or gone) is skipped, so reruns are no-ops; with
        `claimant`, so is one whose memory `claimant` does not hold a claim on. The
        journal row leaves with the live row (a trigger, `sqlite_archival`)."""
        ns = _namespace(namespace)
        if not records:
            return 0
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            raise ValidationError("a batch of archive records repeats an id")
        for record in records:  # validated before anything is written
            check_id(record.id)
            if record.summary_embedding is not None:
                check_vector(record.summary_embedding, None, what="summary embedding")
        dimension = self._records_dimension(records)
        by_id = {r.id: r for r in records}
        await self._db.gate()
        with self._db.write() as conn:
            self._fix_dimension(conn, dimension)
            live = self._ids_in(conn, "memories", ns, ids)
            if claimant is not None:
                sql = "SELECT id FROM archival WHERE namespace = ? AND claimant = ? AND id "
                held = conn.execute(sql + IN_JSON, (ns, claimant, json_list(ids)))
                live &= {row[0] for row in held}
            moving = [i for i in ids if i in live]
            if not moving:
                return 0
            conn.executemany(_UPSERT, [archive_row(conn, ns, by_id[i]) for i in moving])
            conn.execute(
                f"DELETE FROM memories WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(moving)),
            )
            self._refresh(conn, ns, moving)
        return len(moving)

    async def get_archives(self, namespace: str, ids: Sequence[str]) -> dict[str, ArchiveRecord]:
        ns = _namespace(namespace)
        if not ids:
            return {}
        await self._db.gate()
        with self._db.read() as conn:
            return self._get_archives(conn, ns, ids)

    async def search_archives(
        self, namespace: str, query: Vector, *, k: int, filters: SearchFilter = _NO_FILTER
    ) -> list[ScoredArchive]:
        """The k records whose summary embeddings are closest to `query` among those
        `filters` allow, scored by the calibrated estimate of the cosine to the float
        vector (`CalibratedIndex`). Types, ids and flags are answered from the cache,
        metadata by SQL over the best-first prefix, as for live memories."""
        ns = _namespace(namespace)
        check_k(k)
        await self._db.gate()
        with self._db.read() as conn:
            prepared = self._query_vector(conn, query)
            if prepared is None:
                return []
            q, dim = prepared
            self._sync_cache(conn)
            index = self._index(conn, ns, ARCHIVE_KEY, dim)
            if index.size == 0:
                return []
            scores, allowed = index.scores(q, self._mask(index, filters))
            if filters.metadata:
                best = self._best_matching(
                    conn, ns, ARCHIVE_KEY, index, scores, allowed, k, filters
                )
            else:
                best = index.best(scores, min(k, allowed))
            found = self._get_archives(conn, ns, [i for i, _ in best])
        # An estimate can pass 1 by a little (a near-duplicate of a low-fidelity code).
        return [
            ScoredArchive(found[i], max(-1.0, min(1.0, score))) for i, score in best if i in found
        ]

    async def update_archive(self, namespace: str, record: ArchiveRecord) -> None:
        ns = _namespace(namespace)
        check_id(record.id)
        dimension = self._records_dimension([record])
        await self._db.gate()
        with self._db.write() as conn:
            self._fix_dimension(conn, dimension)
            row = _keep_code(conn, ns, record, archive_row(conn, ns, record))
            changed = conn.execute(_UPDATE, (*row[2:], ns, record.id)).rowcount
            if not changed:
                raise NotFoundError(
                    f"no archive record {record.id!r} in namespace {ns!r}; "
                    "archive_many creates records"
                )
            self._refresh(conn, ns, [record.id])

    async def unarchive_many(self, namespace: str, memories: Sequence[Memory]) -> int:
        """One transaction: each memory replaces its archive record. A memory without an
        archive record is skipped, so reruns are no-ops; an embedding is optional here."""
        ns = _namespace(namespace)
        if not memories:
            return 0
        rows, dimension = self._prepare(ns, memories, need_embedding=False)
        ids = [m.id for m in memories]
        await self._db.gate()
        with self._db.write() as conn:
            self._fix_dimension(conn, dimension)
            archived = self._ids_in(conn, "archives", ns, ids)
            live = self._ids_in(conn, "memories", ns, ids)
            inserts = [
                row for row, i in zip(rows, ids, strict=True) if i in archived and i not in live
            ]
            self._insert_memories(conn, inserts)
            conn.execute(
                f"DELETE FROM archives WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(archived)),
            )
            self._refresh(conn, ns, sorted(archived))
        return len(archived)

    async def delete_archives(self, namespace: str, ids: Sequence[str]) -> int:
        ns = _namespace(namespace)
        if not ids:
            return 0
        await self._db.gate()
        with self._db.write() as conn:
            cur = conn.execute(
                f"DELETE FROM archives WHERE namespace = ? AND id {IN_JSON}",
                (ns, json_list(list(ids))),
            )
            self._refresh(conn, ns, list(ids))
            return int(cur.rowcount)

    async def scan_archives(
        self,
        namespace: str,
        *,
        after_id: str | None = None,
        limit: int = 500,
        flags_unknown: bool = False,
        metadata: tuple[MetadataFilter, ...] = (),
    ) -> list[ArchiveRecord]:
        ns = _namespace(namespace)
        check_k(limit, "limit")
        where = "1" if after_id is None else "id > ?"
        params: tuple[Any, ...] = (ns,) if after_id is None else (ns, after_id)
        if flags_unknown:
            where += f" AND {_FLAGS_UNKNOWN}"
        for condition in metadata:
            sql, values = metadata_sql(condition, "archives")
            where += f" AND {sql}"
            params += tuple(values)
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(
                _select(where) + " ORDER BY id LIMIT ?", (*params, limit)
            ).fetchall()
            return records(conn, rows)
