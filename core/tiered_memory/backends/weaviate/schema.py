"""The fixed schema of the Weaviate store's collections, kept as data so it reads as a
table (`Prop`): the live memories' properties, the archive records', the archival
journal's and the registry's, and the typed metadata properties added on first use
(`meta_schema`; their naming is `mapping`'s)."""

from __future__ import annotations

from dataclasses import dataclass

from weaviate.classes.config import DataType, Property, Tokenization

from .mapping import MetaKind


@dataclass(frozen=True)
class Prop:
    """One property of the fixed schema, kept as data so it reads as a table."""

    name: str
    type: DataType
    filterable: bool = True
    range: bool = False
    tokenization: Tokenization | None = None  # text only
    searchable: bool = False  # text only: BM25

    def build(self) -> Property:
        text = self.type in (DataType.TEXT, DataType.TEXT_ARRAY)
        return Property(
            name=self.name,
            data_type=self.type,
            index_filterable=self.filterable,
            index_range_filters=self.range if self.type in _RANGE_TYPES else None,
            index_searchable=self.searchable if text else None,
            tokenization=(self.tokenization or Tokenization.FIELD) if text else None,
        )


_RANGE_TYPES = (DataType.INT, DataType.NUMBER, DataType.DATE)
_T, _TA = DataType.TEXT, DataType.TEXT_ARRAY

LIVE_SCHEMA: tuple[Prop, ...] = (
    Prop("memory_id", _T),
    Prop("id_key", _T),  # hex of the id: the sort and paging key
    Prop("content", _T, filterable=False, searchable=True, tokenization=Tokenization.WORD),
    Prop("memory_type", _T),
    Prop("tier", _T),
    Prop("importance", DataType.NUMBER, range=True),
    Prop("pinned", DataType.BOOL),
    Prop("core", DataType.BOOL),
    Prop("do_not_inject", DataType.BOOL),
    Prop("superseded", DataType.BOOL),
    Prop("superseded_by", _T),
    Prop("consolidated_from", _TA),
    Prop("source", _T),
    Prop("metadata_json", _T, filterable=False),
    Prop("meta_keys", _TA),
    Prop("created_at", DataType.DATE, range=True),
    Prop("updated_at", DataType.DATE, filterable=False),
    Prop("last_accessed_at", DataType.DATE, filterable=False),
    Prop("last_used_at", DataType.DATE, range=True),
    Prop("use_count", DataType.INT, range=True),
    Prop("use_days", _TA, filterable=False),
    Prop("uses_since_cold", DataType.INT, range=True),
    Prop("cold_since", DataType.DATE, range=True),
    Prop("tier_changed_at", DataType.DATE, range=True),
    Prop("approx_bytes", DataType.INT),
)

ARCHIVE_SCHEMA: tuple[Prop, ...] = (
    Prop("memory_id", _T),
    Prop("id_key", _T),
    Prop("summary", _T, filterable=False),
    Prop("memory_type", _T),
    Prop("importance", DataType.NUMBER),
    Prop("source", _T),
    Prop("metadata_json", _T, filterable=False),
    Prop("meta_keys", _TA),  # and the typed meta_* properties, as in LIVE_SCHEMA
    Prop("do_not_inject", DataType.BOOL),
    Prop("superseded", DataType.BOOL),
    Prop("links_json", _T, filterable=False),
    Prop("storage_ref", _T, filterable=False),
    Prop("size_bytes", DataType.INT),
    Prop("checksum", _T, filterable=False),
    Prop("storage_verified", DataType.BOOL),
    Prop("created_at", DataType.DATE),
    Prop("archived_at", DataType.DATE),
    Prop("archive_reason", _T),
    Prop("use_count", DataType.INT),
    Prop("expansions", _TA, filterable=False),
    Prop("approx_bytes", DataType.INT),
)

# The archival journal (`tiered_memory.journal`): one object per row, read by id.
ARCHIVAL_SCHEMA: tuple[Prop, ...] = (
    Prop("memory_id", _T),
    Prop("id_key", _T),
    Prop("state_json", _T, filterable=False),
)

# Originals to delete from object storage (`ports.PendingOriginal`): one object per
# original, its object id that of the key `<memory id>@<checksum>`, per tenant.
PENDING_SCHEMA: tuple[Prop, ...] = (
    Prop("memory_id", _T),
    Prop("id_key", _T),  # of the key, for paging in key order
    Prop("checksum", _T, filterable=False),
    Prop("hand_on", DataType.BOOL, filterable=False),
)

REGISTRY_SCHEMA: tuple[Prop, ...] = (
    Prop("kind", _T),  # "dimension", "namespace" or "migration" (one done, by name)
    Prop("tenant", _T),
    Prop("value", _T, filterable=False),
)

_META_TYPES: dict[MetaKind, Prop] = {
    "s": Prop("", _T),
    "n": Prop("", DataType.NUMBER, range=True),
    "b": Prop("", DataType.BOOL),
    "sa": Prop("", _TA),
    "na": Prop("", DataType.NUMBER_ARRAY),
    "ba": Prop("", DataType.BOOL_ARRAY),
}


def meta_schema(name: str, kind: MetaKind) -> Prop:
    template = _META_TYPES[kind]
    return Prop(name, template.type, range=template.range)
