"""Pure translation between the library's models and Weaviate objects.

Nothing here imports `weaviate` or does I/O, so every rule the Weaviate store relies on
(tenant names, object ids, the property layout, how a patch changes a memory) is
testable without a server. What a use or a tier move changes is the same on every
backend: `tiered_memory.bookkeeping`.

Tenant names. Weaviate allows tenant names matching `[A-Za-z0-9_-]{1,64}`; namespaces
are any text up to 256 characters. A namespace is encoded reversibly when it fits:
`a-z`, `0-9` and `-` stay as they are and every other character becomes `_` plus the
lowercase hex of its UTF-8 bytes (`User 42` -> `_55ser_2042`). Upper case is escaped
too, so the encoding never depends on whether a deployment treats tenant names
case-sensitively. A namespace whose encoding would exceed 64 characters gets `__` plus
40 base32 characters of its SHA-256 instead; the reversible form can never start with
`__` (an escape is always followed by a hex digit), so the two forms cannot collide, and
the store keeps hashed names in a small registry collection to map them back.

Metadata. The whole dict is kept as JSON text (`metadata_json`), which is what a read
returns. To make it filterable, every JSON scalar and every list of scalars is also
written to a typed property named after a hash of its key (`meta_<kind>_<slug>_<hash>`):
strings, numbers and booleans each get their own kind, so one key may hold different
types in different memories without a schema conflict. `meta_keys` lists the keys
present, for `exists`. Nested objects and nulls are only in the JSON (and `meta_keys`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any, Literal

import numpy as np

from tiered_memory.errors import ValidationError
from tiered_memory.models import ArchiveRecord, Link, Memory, MemoryType, Tier, utc
from tiered_memory.ports import ArchivalState, Matrix, MemoryPatch, PendingOriginal
from tiered_memory.validation import check_importance, check_namespace

TENANT_MAX_CHARS = 64
HASHED_TENANT_PREFIX = "__"
_TENANT_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_HEX = frozenset("0123456789abcdef")

# Object ids are uuid5 under this project-wide namespace, so every process and every
# collection agrees on the id of (namespace, memory id) without a lookup.
OBJECT_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/tiered-memory/weaviate")

MetaKind = Literal["s", "n", "b", "sa", "na", "ba"]
META_KINDS: tuple[MetaKind, ...] = ("s", "n", "b", "sa", "na", "ba")


# -- tenants and ids ---------------------------------------------------------------------


def tenant_name(namespace: str) -> str:
    """The Weaviate tenant holding `namespace` (see the module docstring)."""
    raw = check_namespace(namespace).encode("utf-8")
    parts: list[str] = []
    for ch in namespace:
        if ch in _TENANT_SAFE:
            parts.append(ch)
        else:
            parts.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    encoded = "".join(parts)
    if 0 < len(encoded) <= TENANT_MAX_CHARS:
        return encoded
    digest = base64.b32encode(hashlib.sha256(raw).digest()).decode("ascii").lower()
    return HASHED_TENANT_PREFIX + digest[:40]


def is_hashed_tenant(name: str) -> bool:
    """True for tenant names that only the registry can map back to a namespace."""
    return name.startswith(HASHED_TENANT_PREFIX)


def is_valid_tenant_name(name: str) -> bool:
    return bool(_TENANT_NAME.match(name))


def namespace_from_tenant(name: str) -> str | None:
    """Decode a reversible tenant name; None for a hashed one (ask the registry).

    Raises ValidationError for a name this encoding cannot have produced.
    """
    if is_hashed_tenant(name):
        return None
    out = bytearray()
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "_":
            pair = name[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise ValidationError(f"{name!r} is not a tenant name made by this store")
            out.append(int(pair, 16))
            i += 3
        elif ch in _TENANT_SAFE:
            out.append(ord(ch))
            i += 1
        else:
            raise ValidationError(f"{name!r} is not a tenant name made by this store")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValidationError(f"{name!r} is not a tenant name made by this store") from e


def object_uuid(namespace: str, memory_id: str) -> uuid.UUID:
    """The object id of a memory: the same in every collection, so a tier move or an
    archival is copy-then-delete by one id, and a rerun overwrites instead of doubling."""
    return uuid.uuid5(OBJECT_ID_NAMESPACE, f"{len(namespace)}:{namespace}:{memory_id}")


def id_key(memory_id: str) -> str:
    """A sortable, whitespace-free stand-in for the id: hex of its UTF-8 bytes.

    Hex keeps byte order, so sorting and `>` on it order ids exactly as Python does,
    and, unlike the raw id, it survives Weaviate's `field` tokenisation (which trims
    surrounding whitespace) unchanged.
    """
    return memory_id.encode("utf-8").hex()


# -- metadata ------------------------------------------------------------------------------


def meta_property(key: str, kind: MetaKind) -> str:
    """The property that holds metadata `key` as `kind`; valid for any key."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).hexdigest()
    slug = re.sub(r"[^a-z0-9]", "", key.lower())[:24]
    return f"meta_{kind}_{slug}_{digest}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_float(value: int | float) -> float | None:
    """Numbers are indexed as floats; integers beyond float range are left unindexed."""
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def _typed_values(metadata: Mapping[str, Any]) -> list[tuple[str, MetaKind, Any]]:
    """(property, kind, value) for every filterable part of a metadata dict."""
    out: list[tuple[str, MetaKind, Any]] = []
    for key, value in metadata.items():
        if isinstance(value, bool):
            out.append((meta_property(key, "b"), "b", value))
        elif _is_number(value):
            number = _as_float(value)
            if number is not None:
                out.append((meta_property(key, "n"), "n", number))
        elif isinstance(value, str):
            out.append((meta_property(key, "s"), "s", value))
        elif isinstance(value, list):
            strings = [v for v in value if isinstance(v, str)]
            numbers = [n for v in value if _is_number(v) if (n := _as_float(v)) is not None]
            booleans = [v for v in value if isinstance(v, bool)]
            if strings:
                out.append((meta_property(key, "sa"), "sa", strings))
            if numbers:
                out.append((meta_property(key, "na"), "na", numbers))
            if booleans:
                out.append((meta_property(key, "ba"), "ba", booleans))
    return out


def flatten_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The filterable properties of a metadata dict (plus the JSON and the key list)."""
    props: dict[str, Any] = {
        "metadata_json": json.dumps(metadata, ensure_ascii=False, allow_nan=False),
        "meta_keys": sorted(metadata),
    }
    for name, _, value in _typed_values(metadata):
        props[name] = value
    return props


def metadata_kinds(metadata: Mapping[str, Any]) -> dict[str, MetaKind]:
    """The typed metadata properties `flatten_metadata` writes for this dict."""
    return {name: kind for name, kind, _ in _typed_values(metadata)}


# -- memories --------------------------------------------------------------------------------


def approx_bytes(text: str, metadata_json: str, vector: Sequence[float] | None) -> int:
    """What one object roughly costs: its text, its metadata and a float32 vector."""
    return (
        len(text.encode("utf-8"))
        + len(metadata_json.encode("utf-8"))
        + 4 * (len(vector) if vector is not None else 0)
    )


def memory_to_properties(memory: Memory) -> dict[str, Any]:
    """The properties of a live memory. Unset optional fields are omitted: a batch write
    replaces the whole object, so an omitted property reads back as absent (None)."""
    meta = flatten_metadata(memory.metadata)
    props: dict[str, Any] = {
        "memory_id": memory.id,
        "id_key": id_key(memory.id),
        "content": memory.content,
        "memory_type": memory.memory_type.value,
        "tier": memory.tier.value,
        "importance": float(memory.importance),
        "pinned": memory.pinned,
        "core": memory.core,
        "do_not_inject": memory.do_not_inject,
        "superseded": memory.superseded_by is not None,
        "consolidated_from": list(memory.consolidated_from),
        "source": memory.source,
        "created_at": utc(memory.created_at),
        "updated_at": utc(memory.updated_at),
        "last_used_at": utc(memory.last_used_at),
        "use_count": memory.use_count,
        "use_days": [d.isoformat() for d in sorted(set(memory.use_days))],
        "uses_since_cold": memory.uses_since_cold,
        "approx_bytes": approx_bytes(memory.content, meta["metadata_json"], memory.embedding),
        **meta,
    }
    optional: dict[str, Any] = {
        "superseded_by": memory.superseded_by,
        "last_accessed_at": memory.last_accessed_at,
        "cold_since": memory.cold_since,
        "tier_changed_at": memory.tier_changed_at,
    }
    for name, value in optional.items():
        if value is not None:
            props[name] = utc(value) if isinstance(value, datetime) else value
    return props


def _datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, str):
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    raise ValidationError(f"expected a date from Weaviate, got {type(value).__name__}")


def _optional_datetime(value: Any) -> datetime | None:
    return None if value is None else _datetime(value)


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _metadata(props: Mapping[str, Any]) -> dict[str, Any]:
    raw = props.get("metadata_json")
    if not raw:
        return {}
    loaded = json.loads(str(raw))
    return loaded if isinstance(loaded, dict) else {}


def memory_from_properties(
    props: Mapping[str, Any], *, namespace: str, vector: Sequence[float] | None = None
) -> Memory:
    """Rebuild a live memory from what a query returned."""
    return Memory(
        id=str(props["memory_id"]),
        namespace=namespace,
        content=str(props["content"]),
        memory_type=MemoryType(str(props["memory_type"])),
        tier=Tier(str(props["tier"])),
        importance=float(props.get("importance") or 0.0),
        pinned=bool(props.get("pinned")),
        core=bool(props.get("core")),
        do_not_inject=bool(props.get("do_not_inject")),
        superseded_by=(
            str(props["superseded_by"]) if props.get("superseded_by") is not None else None
        ),
        consolidated_from=_strings(props.get("consolidated_from")),
        source=str(props.get("source") or "api"),
        metadata=_metadata(props),
        embedding=[float(x) for x in vector] if vector is not None else None,
        created_at=_datetime(props["created_at"]),
        updated_at=_datetime(props["updated_at"]),
        last_accessed_at=_optional_datetime(props.get("last_accessed_at")),
        use_count=int(props.get("use_count") or 0),
        use_days=sorted({date.fromisoformat(d) for d in _strings(props.get("use_days"))}),
        uses_since_cold=int(props.get("uses_since_cold") or 0),
        cold_since=_optional_datetime(props.get("cold_since")),
        tier_changed_at=_optional_datetime(props.get("tier_changed_at")),
    )


# -- archive records ---------------------------------------------------------------------------


def archive_to_properties(record: ArchiveRecord) -> dict[str, Any]:
    """The properties of an archive record: its memory's metadata flattened as for a
    live memory, and its flags, so searches filter it the same way. Unknown flags are
    omitted (absent reads back as None)."""
    meta = flatten_metadata(record.metadata)
    metadata_json = meta["metadata_json"]
    flags = {
        name: value
        for name, value in (
            ("do_not_inject", record.do_not_inject),
            ("superseded", record.superseded),
        )
        if value is not None
    }
    return {
        **meta,
        **flags,
        "memory_id": record.id,
        "id_key": id_key(record.id),
        "summary": record.summary,
        "memory_type": record.memory_type.value,
        "importance": float(record.importance),
        "source": record.source,
        "links_json": json.dumps([link.model_dump(mode="json") for link in record.links]),
        "storage_ref": record.storage_ref,
        "size_bytes": record.size_bytes,
        "checksum": record.checksum,
        "storage_verified": record.storage_verified,
        "created_at": utc(record.created_at),
        "archived_at": utc(record.archived_at),
        "archive_reason": record.archive_reason,
        "use_count": record.use_count,
        "expansions": [utc(e).isoformat() for e in record.expansions],
        "approx_bytes": approx_bytes(record.summary, metadata_json, record.summary_embedding),
    }


def archive_from_properties(
    props: Mapping[str, Any], *, namespace: str, vector: Sequence[float] | None = None
) -> ArchiveRecord:
    links_raw = props.get("links_json")
    links = [Link.model_validate(item) for item in json.loads(str(links_raw))] if links_raw else []
    return ArchiveRecord(
        id=str(props["memory_id"]),
        namespace=namespace,
        summary=str(props["summary"]),
        summary_embedding=[float(x) for x in vector] if vector is not None else None,
        memory_type=MemoryType(str(props["memory_type"])),
        importance=float(props.get("importance") or 0.0),
        source=str(props.get("source") or "api"),
        metadata=_metadata(props),
        links=links,
        storage_ref=str(props["storage_ref"]),
        size_bytes=int(props.get("size_bytes") or 0),
        checksum=str(props["checksum"]),
        storage_verified=bool(props.get("storage_verified")),
        created_at=_datetime(props["created_at"]),
        archived_at=_datetime(props["archived_at"]),
        archive_reason=str(props.get("archive_reason") or ""),
        use_count=int(props.get("use_count") or 0),
        expansions=[_datetime(e) for e in _strings(props.get("expansions"))],
        do_not_inject=_optional_bool(props.get("do_not_inject")),
        superseded=_optional_bool(props.get("superseded")),
    )


def _optional_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


# -- the archival journal ------------------------------------------------------------------------
# One object per journal row, under the memory's object id: the row as JSON text (it is
# read whole, by id, and never filtered on), plus the id key for paging.


def pending_key(original: PendingOriginal) -> str:
    """The label of a queued original: its object id and paging order derive from it."""
    return f"{original.id}@{original.checksum}"


def pending_to_properties(original: PendingOriginal) -> dict[str, Any]:
    return {
        "memory_id": original.id,
        "id_key": id_key(pending_key(original)),
        "checksum": original.checksum,
        "hand_on": original.hand_on,
    }


def pending_from_properties(props: Mapping[str, Any]) -> PendingOriginal:
    return PendingOriginal(
        id=str(props["memory_id"]),
        checksum=str(props["checksum"]),
        hand_on=bool(props.get("hand_on")),
    )


def archival_to_properties(state: ArchivalState) -> dict[str, Any]:
    row = {
        "claimant": state.claimant,
        "claimed_until": state.claimed_until.isoformat() if state.claimed_until else None,
        "written": list(state.written),
        "failures": state.failures,
        "error": state.error,
        "failed_at": state.failed_at.isoformat() if state.failed_at else None,
        "quarantined": state.quarantined,
    }
    return {
        "memory_id": state.id,
        "id_key": id_key(state.id),
        "state_json": json.dumps(row, ensure_ascii=False),
    }


def archival_from_properties(props: Mapping[str, Any]) -> ArchivalState:
    row = json.loads(str(props["state_json"]))
    until, failed_at = row.get("claimed_until"), row.get("failed_at")
    return ArchivalState(
        id=str(props["memory_id"]),
        claimant=row.get("claimant"),
        claimed_until=datetime.fromisoformat(until) if until else None,
        written=tuple(str(c) for c in row.get("written") or ()),
        failures=int(row.get("failures") or 0),
        error=row.get("error"),
        failed_at=datetime.fromisoformat(failed_at) if failed_at else None,
        quarantined=bool(row.get("quarantined")),
    )


# -- what writes do to a memory ------------------------------------------------------------------
# Weaviate has no partial in-place updates we can batch, so the store reads memories,
# applies these (and `bookkeeping`'s uses and tier moves), and writes them back whole.


def apply_patch(memory: Memory, patch: MemoryPatch) -> Memory:
    """A copy of `memory` with `patch` applied."""
    if patch.clear_superseded and patch.superseded_by is not None:
        raise ValidationError("a patch cannot both set superseded_by and clear it")
    changes: dict[str, Any] = {}
    for name in ("pinned", "core", "do_not_inject"):
        value = getattr(patch, name)
        if value is not None:
            changes[name] = bool(value)
    if patch.importance is not None:
        changes["importance"] = check_importance(patch.importance)
    if patch.superseded_by is not None:
        changes["superseded_by"] = patch.superseded_by
    if patch.clear_superseded:
        changes["superseded_by"] = None
    if patch.metadata is not None:
        changes["metadata"] = json.loads(json.dumps(patch.metadata, allow_nan=False))
    if patch.updated_at is not None:
        changes["updated_at"] = utc(patch.updated_at)
    return memory.model_copy(update=changes, deep=True)


def newest_copy(copies: Sequence[Memory]) -> Memory:
    """Pick one of the copies a crashed tier move left behind: the one moved last."""
    floor = datetime.min.replace(tzinfo=timezone.utc)
    return max(copies, key=lambda m: m.tier_changed_at or floor)


def embedding_matrix(ids: Sequence[str], found: Mapping[str, Memory]) -> tuple[list[str], Matrix]:
    """`MemoryStore.embeddings` from memories read with their vectors: the ids of `ids`
    (first occurrence, in order) that were found with an embedding, and their rows."""
    order = [i for i in dict.fromkeys(ids) if i in found and found[i].embedding]
    if not order:
        return [], np.zeros((0, 0), dtype=np.float32)
    matrix: Matrix = np.asarray([found[i].embedding for i in order], dtype=np.float32)
    return order, matrix
