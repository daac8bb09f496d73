"""One archive record as one compact row of the `archives` table, and back.

The row keeps only what search and display need, in the smallest exact form:
everything needed to get the memory back exactly is in its original in object storage,
verified by the record's checksum.

- the summary embedding as a ternary code (`codes`);
- real columns instead of pydantic JSON: integer microseconds, the checksum as 32 raw
  bytes, a memory-type code, NULL for defaults (source 'api', no metadata, no links,
  no expansions), and the storage pointer and archive reason interned in
  `archives_strings` (a pointer is stored as the template it shares with the other
  records of its folder, e.g. `file:///data/ns/{id}%40{checksum}.json`);
- what a search filters on, as for a live memory: the memory type and metadata, and the
  memory's flags (`do_not_inject`, `superseded`; NULL while unknown, in rows written
  before they were kept).

The table itself (WITHOUT ROWID, keyed by (namespace, id)) is in `schema`.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tiered_memory.epoch import from_micros, from_micros_or_none, to_micros, to_micros_or_none
from tiered_memory.errors import ValidationError
from tiered_memory.models import ArchiveRecord, Link, LinkKind, MemoryType
from tiered_memory.validation import check_id, check_vector

from .codes import CodeRows, code_size, decode_code, encode_code
from .sql import IN_JSON, json_list
from .vectors import TYPE_CODES, flags_of

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
# Rows whose flags are not known yet (written before schema 4 kept them): the sweep reads
# them back from the originals (`ArchivalPipeline.backfill_flags`).
FLAGS_UNKNOWN = "(do_not_inject IS NULL OR superseded IS NULL)"
_COLUMN_NAMES = [c.strip() for c in COLUMNS.split(",")]
UPSERT = (
    f"INSERT INTO archives ({COLUMNS}) VALUES ({', '.join('?' * len(_COLUMN_NAMES))}) "
    "ON CONFLICT (namespace, id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMN_NAMES[2:])
)
UPDATE = (
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
            to_micros_or_none(link.created_at),
            to_micros_or_none(link.updated_at),
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
            created_at=from_micros_or_none(row[3]),
            updated_at=from_micros_or_none(row[4]),
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
        to_micros(record.created_at),
        to_micros(record.archived_at),
        intern(conn, record.archive_reason),
        record.use_count,
        _json([to_micros(t) for t in record.expansions], "expansions")
        if record.expansions
        else None,
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
        created_at=from_micros(row["created_at"]),
        archived_at=from_micros(row["archived_at"]),
        archive_reason=strings[row["archive_reason"]],
        use_count=row["use_count"],
        expansions=[from_micros(t) for t in json.loads(expansions)] if expansions else [],
        do_not_inject=_unflag(row["do_not_inject"]),
        superseded=_unflag(row["superseded"]),
    )


def records(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[ArchiveRecord]:
    keys = [row["storage_ref"] for row in rows] + [row["archive_reason"] for row in rows]
    strings = _strings(conn, keys)
    found = conn.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
    dimension = None if found is None else int(found[0])
    return [_record(row, strings, dimension) for row in rows]


def keep_code(
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


def select(where: str) -> str:
    return f"SELECT {COLUMNS} FROM archives WHERE namespace = ? AND {where}"


def code_rows(conn: sqlite3.Connection, ns: str, ids: Sequence[str] | None = None) -> CodeRows:
    """Ids, summary codes and filter facts of a namespace's records (of `ids` only, if
    given): what the cache's archive partition holds (`codes.CalibratedIndex`)."""
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
