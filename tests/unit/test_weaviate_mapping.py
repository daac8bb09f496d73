"""The pure parts of the Weaviate store: tenant names, ids, properties, filters, errors.

Nothing here talks to a server. Filters are compared in the form the client sends them
(the gRPC message), so two filters are equal exactly when Weaviate would see the same
request.
"""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from weaviate.classes.query import Filter, FilterReturn
from weaviate.collections.filters import _FilterToGRPC
from weaviate.exceptions import (
    InsufficientPermissionsError,
    UnexpectedStatusCodeError,
    WeaviateConnectionError,
    WeaviateQueryError,
    WeaviateRetryError,
    WeaviateTimeoutError,
)

from tiered_memory.backends.weaviate.errors import (
    WeaviateRequestError,
    is_missing_tenant,
    translate_error,
)
from tiered_memory.backends.weaviate.filters import (
    NoMatches,
    after_condition,
    archive_where,
    flags_unknown_where,
    ids_condition,
    metadata_condition,
    metadata_properties,
    scan_where,
    search_where,
    tier_condition,
)
from tiered_memory.backends.weaviate.mapping import (
    HASHED_TENANT_PREFIX,
    META_KINDS,
    apply_patch,
    archive_from_properties,
    archive_to_properties,
    flatten_metadata,
    id_key,
    is_hashed_tenant,
    is_valid_tenant_name,
    memory_from_properties,
    memory_to_properties,
    meta_property,
    metadata_kinds,
    namespace_from_tenant,
    newest_copy,
    object_uuid,
    tenant_name,
)
from tiered_memory.backends.weaviate.schema import (
    ARCHIVE_SCHEMA,
    LIVE_SCHEMA,
    REGISTRY_SCHEMA,
    meta_schema,
)
from tiered_memory.backends.weaviate.store import WeaviateMemoryStore
from tiered_memory.errors import (
    BackendUnavailableError,
    ConfigurationError,
    NamespaceError,
    ValidationError,
)
from tiered_memory.models import ArchiveRecord, Link, LinkKind, Memory, MemoryType, Tier
from tiered_memory.ports import MemoryPatch, MetadataFilter, ScanQuery, SearchFilter
from tiered_memory.validation import check_namespace

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)
TENANT_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Weaviate's ShardNameRegexCore
PROPERTY_RE = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*$")  # Weaviate's PropertyNameRegex
ACTIVE = frozenset({Tier.HOT, Tier.WARM})
COLD = frozenset({Tier.COLD})
LIVE = ACTIVE | COLD


def wire(f: FilterReturn | None) -> Any:
    """What the client would send for `f` (None for no filter)."""
    return None if f is None else _FilterToGRPC.convert(f)


def prop(key: str, kind: Any) -> Any:
    return Filter.by_property(meta_property(key, kind))


# -- tenant names -------------------------------------------------------------------------

HOSTILE_NAMESPACES = [
    "default",
    "user-42",
    "User-42",
    "with space",
    " leading",
    "trailing ",
    "a_b",
    "a%",
    "_",
    "__",
    "-",
    "a'b",
    'a"b',
    "x'; DROP TABLE memories; --",
    "}) DETACH DELETE n //",
    "../../etc/passwd",
    "\u540d\u524d \u7a7a\u9593",
    "caf\u00e9",
    "cafe\u0301",
    "\U0001f600",
    "tab\there",
    "x" * 64,
    "x" * 65,
    "\u00e9" * 256,
]


@pytest.mark.parametrize("namespace", HOSTILE_NAMESPACES)
def test_tenant_names_are_valid_and_round_trip(namespace: str) -> None:
    name = tenant_name(namespace)
    assert TENANT_RE.match(name), name
    assert is_valid_tenant_name(name)
    assert name == name.lower()  # never depends on case-sensitive tenant names
    assert tenant_name(namespace) == name  # stable
    if is_hashed_tenant(name):
        assert namespace_from_tenant(name) is None
    else:
        assert namespace_from_tenant(name) == namespace


def test_plain_namespaces_keep_a_readable_tenant_name() -> None:
    assert tenant_name("user-42") == "user-42"
    assert tenant_name("User 42") == "_55ser_2042"
    assert tenant_name("a_b") == "a_5fb"
    assert tenant_name("caf\u00e9") == "caf_c3_a9"


def test_tenant_names_switch_to_a_hash_exactly_past_64_characters() -> None:
    assert tenant_name("x" * 64) == "x" * 64
    hashed = tenant_name("x" * 65)
    assert hashed.startswith(HASHED_TENANT_PREFIX)
    assert len(hashed) == 42
    assert tenant_name("X" * 21) == "_58" * 21  # 63 characters: still readable
    assert is_hashed_tenant(tenant_name("X" * 22))  # 66 characters: hashed


def test_near_identical_namespaces_never_share_a_tenant() -> None:
    near = [
        "a",
        "A",
        "a ",
        " a",
        "a_",
        "a-",
        "a%",
        "a_25",
        "a_5f",
        "\u00e4",
        "a\u0308",
        "x" * 100,
        "x" * 99 + "y",
        "x" * 101,
        "X" * 100,
    ]
    names = [tenant_name(n) for n in near]
    assert len(set(names)) == len(near)


def _is_namespace(text: str) -> bool:
    try:
        check_namespace(text)
    except NamespaceError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=80).filter(_is_namespace))
def test_every_namespace_maps_to_a_valid_reversible_tenant(namespace: str) -> None:
    name = tenant_name(namespace)
    assert TENANT_RE.match(name)
    decoded = namespace_from_tenant(name)
    assert decoded is None if is_hashed_tenant(name) else decoded == namespace


def test_readable_names_never_look_hashed() -> None:
    # an escape is "_" plus two hex digits, so "__" only ever starts a hashed name
    for namespace in ["_", "__", "_x", "_5f", "a__b"]:
        name = tenant_name(namespace)
        assert not is_hashed_tenant(name)
        assert namespace_from_tenant(name) == namespace


@pytest.mark.parametrize("bad", ["_zz", "_4", "Abc", "a b", "_c3", "a.b"])
def test_foreign_tenant_names_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        namespace_from_tenant(bad)


@pytest.mark.parametrize("bad", ["bad \ud800", "", "   ", "nul\x00"])
def test_what_is_not_a_namespace_has_no_tenant(bad: str) -> None:
    with pytest.raises(NamespaceError):
        tenant_name(bad)


# -- object ids and keys ------------------------------------------------------------------


def test_object_ids_are_deterministic_and_never_ambiguous() -> None:
    assert object_uuid("ns", "m1") == object_uuid("ns", "m1")
    assert isinstance(object_uuid("ns", "m1"), uuid.UUID)
    ids = {
        object_uuid("ns", "m1"),
        object_uuid("ns2", "m1"),
        object_uuid("ns", "m2"),
        object_uuid("a:b", "c"),
        object_uuid("a", "b:c"),
        object_uuid("1:a", ""),
    }
    assert len(ids) == 6


def test_id_keys_sort_exactly_like_ids() -> None:
    ids = ["b", "a", "a ", " a", "A", "a\u00e9", "\u65e5", "\U0001f600", "10", "9", "x" * 300]
    keys = {i: id_key(i) for i in ids}
    assert sorted(ids) == sorted(ids, key=lambda i: keys[i])
    for key in keys.values():
        assert re.fullmatch(r"[0-9a-f]+", key)
    assert bytes.fromhex(id_key("it's \u65e5")).decode() == "it's \u65e5"


# -- metadata properties ------------------------------------------------------------------


def test_meta_property_names_are_valid_and_distinct() -> None:
    keys = ["color", "Color", "col or", "c.o.l", "", "\u65e5\u672c", "x" * 500, "meta_keys"]
    names = {meta_property(k, kind) for k in keys for kind in META_KINDS}
    assert len(names) == len(keys) * len(META_KINDS)
    for name in names:
        assert PROPERTY_RE.match(name), name
        assert name == name.lower()
        assert name.startswith("meta_")
        assert len(name) < 100
    assert meta_property("color", "s") == meta_property("color", "s")


def test_metadata_is_flattened_by_type() -> None:
    metadata = {
        "s": "red",
        "i": 3,
        "f": 2.5,
        "b": True,
        "list": ["a", 1, 2.0, False, None, {"x": 1}],
        "empty": [],
        "nested": {"k": [1, 2]},
        "null": None,
        "huge": 10**400,
    }
    props = flatten_metadata(metadata)
    assert props[meta_property("s", "s")] == "red"
    assert props[meta_property("i", "n")] == 3.0
    assert props[meta_property("f", "n")] == 2.5
    assert props[meta_property("b", "b")] is True
    assert meta_property("b", "n") not in props  # a bool is not a number
    assert props[meta_property("list", "sa")] == ["a"]
    assert props[meta_property("list", "na")] == [1.0, 2.0]
    assert props[meta_property("list", "ba")] == [False]
    assert props["meta_keys"] == sorted(metadata)
    unindexed = ("empty", "nested", "null", "huge")
    for key in unindexed:
        assert not any(meta_property(key, kind) in props for kind in META_KINDS)
    assert '"huge": 1' in props["metadata_json"]  # kept whole in the JSON
    kinds = metadata_kinds(metadata)
    assert set(kinds) == {p for p in props if p not in ("metadata_json", "meta_keys")}
    assert kinds[meta_property("list", "na")] == "na"


# -- memories and archive records ---------------------------------------------------------


def full_memory() -> Memory:
    return Memory(
        id="m-1 it's",
        namespace="ns",
        content="The user's daughter is called Ava",
        memory_type=MemoryType.FACTUAL,
        tier=Tier.WARM,
        importance=0.75,
        pinned=True,
        core=True,
        do_not_inject=True,
        superseded_by="m-9",
        consolidated_from=["m-2", "m-3"],
        source="chat",
        metadata={"topic": "family", "n": 3, "tags": ["a", "b"], "nested": {"k": [1, 2]}},
        embedding=[0.5, -0.25, 0.0],
        created_at=T0,
        updated_at=T0 + timedelta(hours=1),
        last_accessed_at=T0 + timedelta(hours=2),
        use_count=3,
        use_days=[date(2026, 1, 2), date(2026, 1, 1)],
        uses_since_cold=2,
        cold_since=T0 + timedelta(hours=3),
        tier_changed_at=T0 + timedelta(hours=1),
    )


def test_memory_round_trips_every_field() -> None:
    original = full_memory()
    props = memory_to_properties(original)
    back = memory_from_properties(props, namespace="ns", vector=original.embedding)
    assert back.model_dump(exclude={"use_days"}) == original.model_dump(exclude={"use_days"})
    assert back.use_days == [date(2026, 1, 1), date(2026, 1, 2)]
    without_vector = memory_from_properties(props, namespace="ns")
    assert without_vector.embedding is None


def test_memory_properties_hold_the_indexed_helpers() -> None:
    m = full_memory()
    props = memory_to_properties(m)
    assert props["id_key"] == id_key(m.id)
    assert props["superseded"] is True
    assert props["last_used_at"] == T0 + timedelta(hours=2)
    assert props["tier"] == "warm"
    assert props["use_days"] == ["2026-01-01", "2026-01-02"]
    assert props["approx_bytes"] >= len(m.content) + 3 * 4
    for value in props.values():
        if isinstance(value, datetime):
            assert value.utcoffset() == timedelta(0)


def test_unset_optional_fields_are_omitted_and_read_back_as_none() -> None:
    m = Memory(id="a", content="x", created_at=T0, updated_at=T0)
    props = memory_to_properties(m)
    for name in ("superseded_by", "last_accessed_at", "cold_since", "tier_changed_at"):
        assert name not in props
    assert props["last_used_at"] == T0  # never used: decay runs from creation
    assert props["superseded"] is False
    back = memory_from_properties(props, namespace="ns")
    assert (back.last_accessed_at, back.cold_since, back.superseded_by) == (None, None, None)
    assert back.metadata == {}
    assert back.namespace == "ns"


def test_dates_read_back_timezone_aware_in_utc() -> None:
    props = memory_to_properties(full_memory())
    plus_two = timezone(timedelta(hours=2))
    props["created_at"] = "2026-01-01T02:00:00+02:00"  # ISO text, as a REST reply has it
    props["updated_at"] = (T0 + DAY).astimezone(plus_two)
    props["cold_since"] = "2026-01-03T00:00:00.123456Z"
    back = memory_from_properties(props, namespace="ns")
    assert back.created_at == T0
    assert back.created_at.tzinfo == timezone.utc
    assert back.updated_at == T0 + DAY
    assert back.updated_at.tzinfo == timezone.utc
    assert back.cold_since == datetime(2026, 1, 3, 0, 0, 0, 123456, tzinfo=timezone.utc)


def full_record() -> ArchiveRecord:
    return ArchiveRecord(
        id="r-1",
        namespace="ns",
        summary="Ava is the user's daughter.",
        summary_embedding=[0.1, 0.2, 0.3],
        memory_type=MemoryType.FACTUAL,
        importance=0.2,
        source="test",
        metadata={"k": "v", "n": [1, 2]},
        links=[
            Link(source="r-1", target="m-2", weight=0.7, kind=LinkKind.SIMILAR, created_at=T0),
            Link(source="r-1", target="m-3", weight=1.0, kind=LinkKind.EXPLICIT),
        ],
        storage_ref="s3://bucket/ns/r-1.json",
        size_bytes=123,
        checksum="0" * 64,
        storage_verified=True,
        created_at=T0,
        archived_at=T0 + 200 * DAY,
        archive_reason="cold for 180 days",
        use_count=2,
        expansions=[T0 + 201 * DAY, T0 + 202 * DAY],
    )


def test_archive_record_round_trips_every_field() -> None:
    original = full_record()
    props = archive_to_properties(original)
    back = archive_from_properties(props, namespace="ns", vector=original.summary_embedding)
    assert back == original
    assert all(e.tzinfo == timezone.utc for e in back.expansions)
    assert props["id_key"] == id_key("r-1")
    assert props["approx_bytes"] > 0


# -- the schema covers what is written ----------------------------------------------------


def test_live_schema_declares_every_written_property() -> None:
    declared = {p.name for p in LIVE_SCHEMA}
    written = set(memory_to_properties(full_memory()))
    meta = {n for n in written if n.startswith("meta_") and n != "meta_keys"}
    assert written - meta <= declared
    assert {"superseded_by", "last_accessed_at", "cold_since", "tier_changed_at"} <= declared


def test_archive_schema_declares_every_written_property() -> None:
    flagged = full_record().model_copy(update={"do_not_inject": False, "superseded": True})
    written = set(archive_to_properties(flagged))
    meta = {n for n in written if n.startswith("meta_") and n != "meta_keys"}
    assert written - meta == {p.name for p in ARCHIVE_SCHEMA}


def test_archive_records_flatten_metadata_like_live_memories() -> None:
    """The same typed metadata properties as a live memory, so one filter fits both."""
    record = full_record()
    props = archive_to_properties(record)
    assert {k: v for k, v in props.items() if k.startswith("meta")} == {
        k: v for k, v in flatten_metadata(record.metadata).items() if k.startswith("meta")
    }
    assert props["meta_keys"] == ["k", "n"]
    assert props[meta_property("n", "na")] == [1.0, 2.0]


@pytest.mark.parametrize("flags", [(None, None), (True, False), (False, True)])
def test_archive_flags_round_trip_and_unknown_ones_are_absent(
    flags: tuple[bool | None, bool | None],
) -> None:
    do_not_inject, superseded = flags
    record = full_record().model_copy(
        update={"do_not_inject": do_not_inject, "superseded": superseded}
    )
    props = archive_to_properties(record)
    assert ("do_not_inject" in props, "superseded" in props) == (
        do_not_inject is not None,
        superseded is not None,
    )
    back = archive_from_properties(props, namespace="ns", vector=record.summary_embedding)
    assert (back.do_not_inject, back.superseded) == flags


@pytest.mark.parametrize("schema", [LIVE_SCHEMA, ARCHIVE_SCHEMA, REGISTRY_SCHEMA])
def test_schema_properties_build_with_valid_names(schema: Any) -> None:
    names = [p.name for p in schema]
    assert len(names) == len(set(names))
    for p in schema:
        built = p.build()
        assert PROPERTY_RE.match(built.name)


def test_only_content_is_searchable_and_filtered_props_are_indexed() -> None:
    by_name = {p.name: p.build() for p in LIVE_SCHEMA}
    searchable = {n for n, p in by_name.items() if p.indexSearchable}
    assert searchable == {"content"}
    assert by_name["content"].tokenization is not None
    assert by_name["content"].tokenization.value == "word"
    filtered = {"memory_id", "id_key", "tier", "memory_type", "meta_keys", "superseded"}
    for name in filtered | {"pinned", "do_not_inject", "created_at", "last_used_at"}:
        assert by_name[name].indexFilterable is True, name
    for name in ("id_key", "tier", "memory_type"):
        tokenization = by_name[name].tokenization
        assert tokenization is not None
        assert tokenization.value == "field"  # whole-value matches


@pytest.mark.parametrize(
    ("kind", "data_type"),
    [
        ("s", "text"),
        ("n", "number"),
        ("b", "boolean"),
        ("sa", "text[]"),
        ("na", "number[]"),
        ("ba", "boolean[]"),
    ],
)
def test_meta_properties_get_the_type_of_their_kind(kind: Any, data_type: str) -> None:
    built = meta_schema(meta_property("k", kind), kind).build()
    assert built.dataType.value == data_type
    assert built.indexFilterable is True


# -- what writes do -----------------------------------------------------------------------


def test_apply_patch_sets_and_clears() -> None:
    m = Memory(id="a", content="x", created_at=T0, updated_at=T0, superseded_by="z")
    patched = apply_patch(
        m,
        MemoryPatch(
            pinned=True,
            core=True,
            do_not_inject=True,
            importance=0.9,
            metadata={"new": 1},
            updated_at=T0 + DAY,
        ),
    )
    assert (patched.pinned, patched.core, patched.do_not_inject) == (True, True, True)
    assert (patched.importance, patched.metadata, patched.updated_at) == (0.9, {"new": 1}, T0 + DAY)
    assert patched.superseded_by == "z"
    assert m.pinned is False  # a copy, the input is untouched
    assert apply_patch(m, MemoryPatch(clear_superseded=True)).superseded_by is None
    assert apply_patch(m, MemoryPatch(superseded_by="q")).superseded_by == "q"
    assert apply_patch(m, MemoryPatch()) == m


@pytest.mark.parametrize(
    "patch",
    [
        MemoryPatch(superseded_by="q", clear_superseded=True),
        MemoryPatch(importance=1.5),
        MemoryPatch(importance=float("nan")),
    ],
)
def test_apply_patch_refuses_contradictions_and_bad_values(patch: MemoryPatch) -> None:
    m = Memory(id="a", content="x", created_at=T0, updated_at=T0)
    with pytest.raises(ValidationError):
        apply_patch(m, patch)


def test_newest_copy_prefers_the_latest_move() -> None:
    base = Memory(id="a", content="x", created_at=T0, updated_at=T0)
    stale = base.model_copy(update={"tier": Tier.HOT})
    moved = base.model_copy(update={"tier": Tier.COLD, "tier_changed_at": T0 + DAY})
    assert newest_copy([stale, moved]) is moved
    assert newest_copy([moved, stale]) is moved
    assert newest_copy([stale]) is stale


# -- filters: search ----------------------------------------------------------------------

DEFAULTS = [
    Filter.by_property("do_not_inject").equal(False),
    Filter.by_property("superseded").equal(False),
]


def test_default_search_hides_forgotten_and_superseded() -> None:
    assert wire(search_where("ns", ACTIVE, ACTIVE, SearchFilter())) == wire(Filter.all_of(DEFAULTS))


def test_search_with_everything_included_has_no_filter() -> None:
    everything = SearchFilter(include_forgotten=True, include_superseded=True)
    assert search_where("ns", LIVE, ACTIVE, everything) is None
    assert search_where("ns", LIVE, COLD, everything) is None


@pytest.mark.parametrize(
    ("tiers", "held", "expected"),
    [
        (ACTIVE, ACTIVE, None),
        (LIVE, ACTIVE, None),
        (frozenset({Tier.HOT}), ACTIVE, Filter.by_property("tier").equal("hot")),
        (frozenset({Tier.WARM, Tier.COLD}), ACTIVE, Filter.by_property("tier").equal("warm")),
        (COLD, COLD, None),
        (frozenset(Tier), COLD, None),
        (
            frozenset({Tier.HOT, Tier.WARM}),
            frozenset({Tier.HOT, Tier.WARM, Tier.COLD}),
            Filter.by_property("tier").contains_any(["hot", "warm"]),
        ),
    ],
)
def test_tier_condition(
    tiers: frozenset[Tier], held: frozenset[Tier], expected: FilterReturn | None
) -> None:
    assert wire(tier_condition(tiers, held)) == wire(expected)


@pytest.mark.parametrize(("tiers", "held"), [(COLD, ACTIVE), (ACTIVE, COLD), (frozenset(), ACTIVE)])
def test_tier_condition_outside_the_collection_matches_nothing(
    tiers: frozenset[Tier], held: frozenset[Tier]
) -> None:
    with pytest.raises(NoMatches):
        tier_condition(tiers, held)
    with pytest.raises(NoMatches):
        search_where("ns", tiers, held, SearchFilter())


def everything(**fields: Any) -> SearchFilter:
    """A filter showing forgotten and superseded memories, plus `fields`."""
    return SearchFilter(include_forgotten=True, include_superseded=True, **fields)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (everything(pinned=True), Filter.by_property("pinned").equal(True)),
        (everything(pinned=False), Filter.by_property("pinned").equal(False)),
        (
            everything(memory_types=frozenset({MemoryType.PROJECT})),
            Filter.by_property("memory_type").contains_any(["project"]),
        ),
        (
            everything(memory_types=frozenset({MemoryType.EPISODIC, MemoryType.FACTUAL})),
            Filter.by_property("memory_type").contains_any(["episodic", "factual"]),
        ),
        (
            everything(ids=frozenset({"b", "a"})),
            Filter.by_id().contains_any([object_uuid("ns", "a"), object_uuid("ns", "b")]),
        ),
        (
            everything(metadata=(MetadataFilter("color", "eq", "red"),)),
            prop("color", "s").equal("red"),
        ),
    ],
)
def test_each_search_filter_field(filters: SearchFilter, expected: FilterReturn) -> None:
    assert wire(search_where("ns", ACTIVE, ACTIVE, filters)) == wire(expected)


def test_search_filter_fields_are_anded_in_order() -> None:
    filters = SearchFilter(
        pinned=False,
        memory_types=frozenset({MemoryType.FACTUAL}),
        ids=frozenset({"x"}),
        metadata=(MetadataFilter("a", "eq", 1), MetadataFilter("b", "nin", [])),
    )
    expected = Filter.all_of(
        [
            Filter.by_property("tier").equal("hot"),
            *DEFAULTS,
            Filter.by_property("pinned").equal(False),
            Filter.by_property("memory_type").contains_any(["factual"]),
            Filter.by_id().contains_any([object_uuid("ns", "x")]),
            prop("a", "n").equal(1.0),
        ]
    )
    got = search_where("ns", frozenset({Tier.HOT}), ACTIVE, filters)
    assert wire(got) == wire(expected)


def test_ids_filter_is_scoped_by_namespace() -> None:
    a = wire(search_where("a", ACTIVE, ACTIVE, SearchFilter(ids=frozenset({"x"}))))
    b = wire(search_where("b", ACTIVE, ACTIVE, SearchFilter(ids=frozenset({"x"}))))
    assert a != b


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilter(ids=frozenset()),
        SearchFilter(memory_types=frozenset()),
        SearchFilter(metadata=(MetadataFilter("k", "in", []),)),
    ],
)
def test_empty_sets_match_nothing(filters: SearchFilter) -> None:
    with pytest.raises(NoMatches):
        search_where("ns", ACTIVE, ACTIVE, filters)


# -- filters: archive records --------------------------------------------------------------

ARCHIVE_DEFAULTS = [
    Filter.by_property("do_not_inject").not_equal(True),
    Filter.by_property("superseded").not_equal(True),
]


def test_default_archive_search_hides_forgotten_and_superseded_records() -> None:
    """`not_equal(True)`: a record whose flags are unknown (absent) still passes."""
    assert wire(archive_where("ns", SearchFilter())) == wire(Filter.all_of(ARCHIVE_DEFAULTS))
    assert archive_where("ns", everything()) is None
    assert archive_where("ns", everything(pinned=False)) is None  # never pinned


def test_an_archive_search_for_pinned_memories_matches_nothing() -> None:
    with pytest.raises(NoMatches):
        archive_where("ns", SearchFilter(pinned=True))


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilter(ids=frozenset()),
        SearchFilter(memory_types=frozenset()),
        SearchFilter(metadata=(MetadataFilter("k", "in", []),)),
    ],
)
def test_empty_sets_match_no_archive_record(filters: SearchFilter) -> None:
    with pytest.raises(NoMatches):
        archive_where("ns", filters)


archive_filters = st.builds(
    SearchFilter,
    include_forgotten=st.booleans(),
    include_superseded=st.booleans(),
    pinned=st.sampled_from([None, False]),
    memory_types=st.none() | st.frozensets(st.sampled_from(list(MemoryType)), min_size=1),
    metadata=st.lists(
        st.sampled_from(
            [
                MetadataFilter("color", "eq", "red"),
                MetadataFilter("size", "gt", 2),
                MetadataFilter("tags", "contains", "a"),
                MetadataFilter("code", "nin", [1, "x", True]),
                MetadataFilter("note", "exists", False),
                MetadataFilter("empty", "nin", []),
            ]
        ),
        max_size=3,
    ).map(tuple),
    ids=st.none() | st.frozensets(st.sampled_from(["a", "b", "it's"]), min_size=1),
)


@settings(max_examples=200)
@given(archive_filters)
def test_archive_records_are_filtered_exactly_as_live_memories(filters: SearchFilter) -> None:
    """Types, ids and metadata translate to the very conditions a live search sends;
    only the flags differ (absent flags pass) and `pinned` (never set) adds nothing."""
    kept: list[FilterReturn] = []
    if filters.memory_types is not None:
        types = sorted(t.value for t in filters.memory_types)
        kept.append(Filter.by_property("memory_type").contains_any(types))
    if filters.ids is not None:
        kept.append(ids_condition("ns", filters.ids))
    kept += [c for f in filters.metadata if (c := metadata_condition(f)) is not None]
    flags = [
        part
        for part, hidden in zip(
            ARCHIVE_DEFAULTS,
            (not filters.include_forgotten, not filters.include_superseded),
            strict=True,
        )
        if hidden
    ]
    live = everything(memory_types=filters.memory_types, ids=filters.ids, metadata=filters.metadata)
    assert wire(search_where("ns", ACTIVE, ACTIVE, live)) == wire(
        Filter.all_of(kept) if kept else None
    )
    expected = flags + kept
    assert wire(archive_where("ns", filters)) == wire(Filter.all_of(expected) if expected else None)


def test_records_with_unknown_flags_are_those_neither_true_nor_false() -> None:
    def unknown(name: str) -> FilterReturn:
        by = Filter.by_property(name)
        return Filter.all_of([by.not_equal(True), by.not_equal(False)])

    assert wire(flags_unknown_where()) == wire(
        Filter.any_of([unknown("do_not_inject"), unknown("superseded")])
    )


def test_ids_condition_and_after_condition() -> None:
    assert wire(ids_condition("ns", ["b", "a"])) == wire(
        Filter.by_id().contains_any([object_uuid("ns", "a"), object_uuid("ns", "b")])
    )
    with pytest.raises(NoMatches):
        ids_condition("ns", [])
    assert after_condition(None) is None
    assert wire(after_condition("p09")) == wire(
        Filter.by_property("id_key").greater_than(id_key("p09"))
    )


# -- filters: every metadata op -----------------------------------------------------------

METADATA_TRANSLATIONS: list[tuple[MetadataFilter, FilterReturn | None]] = [
    (MetadataFilter("color", "eq", "red"), prop("color", "s").equal("red")),
    (MetadataFilter("size", "eq", 1), prop("size", "n").equal(1.0)),
    (MetadataFilter("size", "eq", 2.5), prop("size", "n").equal(2.5)),
    (MetadataFilter("flag", "eq", True), prop("flag", "b").equal(True)),
    (MetadataFilter("color", "ne", "red"), prop("color", "s").not_equal("red")),
    (MetadataFilter("size", "ne", 3), prop("size", "n").not_equal(3.0)),
    (MetadataFilter("flag", "ne", False), prop("flag", "b").not_equal(False)),
    (MetadataFilter("size", "gt", 2), prop("size", "n").greater_than(2.0)),
    (MetadataFilter("size", "gte", 2.5), prop("size", "n").greater_or_equal(2.5)),
    (MetadataFilter("size", "lt", -1), prop("size", "n").less_than(-1.0)),
    (MetadataFilter("size", "lte", 0), prop("size", "n").less_or_equal(0.0)),
    (MetadataFilter("day", "gte", "2026-01-01"), prop("day", "s").greater_or_equal("2026-01-01")),
    (MetadataFilter("day", "lt", "2026-02"), prop("day", "s").less_than("2026-02")),
    (
        MetadataFilter("color", "in", ["red", "green", "red"]),
        Filter.any_of([prop("color", "s").contains_any(["green", "red"])]),
    ),
    (
        MetadataFilter("v", "in", ["a", 2, True, 1.5]),
        Filter.any_of(
            [
                prop("v", "b").contains_any([True]),
                prop("v", "n").contains_any([1.5, 2.0]),
                prop("v", "s").contains_any(["a"]),
            ]
        ),
    ),
    (
        MetadataFilter("color", "nin", ("red", "green")),
        Filter.all_of([prop("color", "s").not_equal("green"), prop("color", "s").not_equal("red")]),
    ),
    (MetadataFilter("v", "nin", [7]), prop("v", "n").not_equal(7.0)),
    (MetadataFilter("v", "nin", []), None),
    (
        MetadataFilter("tags", "contains", "b"),
        Filter.any_of([prop("tags", "sa").contains_any(["b"]), prop("tags", "s").like("*b*")]),
    ),
    (MetadataFilter("nums", "contains", 3), prop("nums", "na").contains_any([3.0])),
    (MetadataFilter("flags", "contains", False), prop("flags", "ba").contains_any([False])),
    (MetadataFilter("tags", "exists"), Filter.by_property("meta_keys").equal("tags")),
    (MetadataFilter("tags", "exists", True), Filter.by_property("meta_keys").equal("tags")),
    (MetadataFilter("tags", "exists", False), Filter.by_property("meta_keys").not_equal("tags")),
]


@pytest.mark.parametrize(("condition", "expected"), METADATA_TRANSLATIONS)
def test_every_metadata_op_translates(
    condition: MetadataFilter, expected: FilterReturn | None
) -> None:
    assert wire(metadata_condition(condition)) == wire(expected)


def test_metadata_ops_cover_the_port() -> None:
    ops = {c.op for c, _ in METADATA_TRANSLATIONS}
    assert ops == {"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "exists"}


UNTRANSLATABLE = [
    MetadataFilter("k", "eq", None),
    MetadataFilter("k", "eq", ["a"]),
    MetadataFilter("k", "eq", {"a": 1}),
    MetadataFilter("k", "ne", None),
    MetadataFilter("k", "eq", ""),
    MetadataFilter("k", "eq", " padded"),
    MetadataFilter("k", "eq", "padded "),
    MetadataFilter("k", "gt", True),
    MetadataFilter("k", "lt", None),
    MetadataFilter("k", "gte", [1]),
    MetadataFilter("k", "in", "abc"),
    MetadataFilter("k", "in", 3),
    MetadataFilter("k", "in", [["nested"]]),
    MetadataFilter("k", "in", [None]),
    MetadataFilter("k", "nin", [{"a": 1}]),
    MetadataFilter("k", "contains", "wild*card"),
    MetadataFilter("k", "contains", "what?"),
    MetadataFilter("k", "contains", ""),
    MetadataFilter("k", "contains", None),
    MetadataFilter("k", "contains", ["a"]),
    MetadataFilter("k", "exists", "yes"),
    MetadataFilter("k", "exists", 1),
    MetadataFilter("", "eq", "a"),
    MetadataFilter("k", "regex", "a.*"),  # type: ignore[arg-type]
    # integers beyond a signed 64-bit integer, as every store and `add` refuse them
    MetadataFilter("k", "eq", 2**63),
    MetadataFilter("k", "lt", -(2**63) - 1),
    MetadataFilter("k", "in", [1, 2**70]),
    MetadataFilter("k", "contains", 10**400),
]


@pytest.mark.parametrize("condition", UNTRANSLATABLE)
def test_untranslatable_metadata_filters_are_validation_errors(condition: MetadataFilter) -> None:
    with pytest.raises(ValidationError):
        metadata_condition(condition)
    with pytest.raises(ValidationError):
        search_where("ns", ACTIVE, ACTIVE, SearchFilter(metadata=(condition,)))


def test_metadata_properties_names_what_a_query_reads() -> None:
    filters = (
        MetadataFilter("a", "eq", "x"),
        MetadataFilter("b", "gt", 1),
        MetadataFilter("c", "in", ["x", 1, False]),
        MetadataFilter("d", "contains", "sub"),
        MetadataFilter("e", "contains", 2),
        MetadataFilter("f", "contains", True),
        MetadataFilter("g", "exists"),
    )
    expected = {
        meta_property("a", "s"): "s",
        meta_property("b", "n"): "n",
        meta_property("c", "s"): "s",
        meta_property("c", "n"): "n",
        meta_property("c", "b"): "b",
        meta_property("d", "sa"): "sa",
        meta_property("d", "s"): "s",
        meta_property("e", "na"): "na",
        meta_property("f", "ba"): "ba",
    }
    assert metadata_properties(filters) == expected
    with pytest.raises(ValidationError):
        metadata_properties((MetadataFilter("a", "eq", None),))


# -- filters: sweep scans -----------------------------------------------------------------

WHEN = T0 + 10 * DAY

SCAN_TRANSLATIONS: list[tuple[dict[str, Any], FilterReturn]] = [
    ({"created_before": WHEN}, Filter.by_property("created_at").less_than(WHEN)),
    ({"last_used_before": WHEN}, Filter.by_property("last_used_at").less_than(WHEN)),
    ({"cold_since_before": WHEN}, Filter.by_property("cold_since").less_than(WHEN)),
    ({"tier_changed_before": WHEN}, Filter.by_property("tier_changed_at").less_than(WHEN)),
    ({"importance_at_most": 0.3}, Filter.by_property("importance").less_or_equal(0.3)),
    ({"importance_at_least": 1}, Filter.by_property("importance").greater_or_equal(1.0)),
    ({"min_uses_since_cold": 3}, Filter.by_property("uses_since_cold").greater_or_equal(3)),
    ({"min_use_count": 1}, Filter.by_property("use_count").greater_or_equal(1)),
    ({"pinned": True}, Filter.by_property("pinned").equal(True)),
    ({"pinned": False}, Filter.by_property("pinned").equal(False)),
    ({"core": True}, Filter.by_property("core").equal(True)),
    ({"superseded": False}, Filter.by_property("superseded").equal(False)),
    ({"used": True}, Filter.by_property("use_count").greater_than(0)),
    ({"used": False}, Filter.by_property("use_count").equal(0)),
    ({"after_id": "s2"}, Filter.by_property("id_key").greater_than(id_key("s2"))),
    ({"tiers": frozenset({Tier.WARM})}, Filter.by_property("tier").equal("warm")),
    (
        {"metadata": (MetadataFilter("doc", "eq", "d-1"),)},
        Filter.by_property(meta_property("doc", "s")).equal("d-1"),
    ),
]


@pytest.mark.parametrize(("fields", "expected"), SCAN_TRANSLATIONS)
def test_each_scan_condition(fields: dict[str, Any], expected: FilterReturn) -> None:
    query = ScanQuery(**{"tiers": LIVE, **fields})
    assert wire(scan_where(query, ACTIVE)) == wire(expected)


def test_scan_conditions_cover_the_port() -> None:
    covered = {name for fields, _ in SCAN_TRANSLATIONS for name in fields}
    every = set(ScanQuery.__dataclass_fields__) - {"limit"}
    assert covered == every


def test_scan_without_conditions_reads_the_whole_collection() -> None:
    assert scan_where(ScanQuery(tiers=LIVE), ACTIVE) is None
    assert scan_where(ScanQuery(tiers=COLD), COLD) is None


def test_scan_datetimes_are_sent_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    local = ScanQuery(tiers=LIVE, created_before=WHEN.astimezone(plus_two))
    naive = ScanQuery(tiers=LIVE, created_before=WHEN.replace(tzinfo=None))
    expected = wire(Filter.by_property("created_at").less_than(WHEN))
    assert wire(scan_where(local, ACTIVE)) == expected
    assert wire(scan_where(naive, ACTIVE)) == expected


def test_scan_conditions_are_anded() -> None:
    query = ScanQuery(
        tiers=frozenset({Tier.HOT}),
        tier_changed_before=WHEN,
        pinned=False,
        used=False,
        after_id="m",
    )
    expected = Filter.all_of(
        [
            Filter.by_property("tier").equal("hot"),
            Filter.by_property("tier_changed_at").less_than(WHEN),
            Filter.by_property("id_key").greater_than(id_key("m")),
            Filter.by_property("pinned").equal(False),
            Filter.by_property("use_count").equal(0),
        ]
    )
    assert wire(scan_where(query, ACTIVE)) == wire(expected)


def test_scan_of_tiers_a_collection_does_not_hold_matches_nothing() -> None:
    with pytest.raises(NoMatches):
        scan_where(ScanQuery(tiers=COLD), ACTIVE)
    with pytest.raises(NoMatches):
        scan_where(ScanQuery(tiers=frozenset({Tier.ARCHIVED})), COLD)


# -- errors and construction --------------------------------------------------------------


def status_error(code: int) -> UnexpectedStatusCodeError:
    request = httpx.Request("GET", "http://weaviate.test/v1/objects")
    return UnexpectedStatusCodeError("test", httpx.Response(code, json={}, request=request))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (WeaviateConnectionError("refused"), BackendUnavailableError),
        (WeaviateTimeoutError("slow"), BackendUnavailableError),
        (status_error(503), BackendUnavailableError),
        (status_error(401), ConfigurationError),
        (status_error(403), ConfigurationError),
        (status_error(422), WeaviateRequestError),
        (WeaviateQueryError("no such prop", "GRPC search"), WeaviateRequestError),
    ],
)
def test_weaviate_errors_map_to_typed_errors(error: Exception, expected: type[Exception]) -> None:
    mapped = translate_error(error, "reading", "http://weaviate.test")  # type: ignore[arg-type]
    assert type(mapped) is expected
    assert "reading" in str(mapped)


def test_a_query_error_caused_by_an_outage_is_an_outage() -> None:
    try:
        try:
            raise WeaviateRetryError("unavailable", 5)
        except WeaviateRetryError:
            raise WeaviateQueryError("failed after retries", "GRPC search")  # noqa: B904
    except WeaviateQueryError as e:
        mapped = translate_error(e, "searching", "http://weaviate.test")
    assert isinstance(mapped, BackendUnavailableError)
    assert "docker compose up -d weaviate" in str(mapped)


def test_permission_errors_name_the_key() -> None:
    request = httpx.Request("GET", "http://weaviate.test/v1/objects")
    error = InsufficientPermissionsError(httpx.Response(403, json={}, request=request))
    mapped = translate_error(error, "reading", "http://weaviate.test")
    assert isinstance(mapped, ConfigurationError)
    assert "API key" in str(mapped)


def test_missing_tenant_errors_are_recognised() -> None:
    assert is_missing_tenant(WeaviateQueryError('tenant not found: "abc"', "GRPC search"))
    assert is_missing_tenant(Exception("Tenant abc does not exist"))
    assert not is_missing_tenant(WeaviateQueryError("no such prop", "GRPC search"))


def test_construction_does_no_io_and_checks_arguments() -> None:
    store = WeaviateMemoryStore(url="http://localhost:1", prefix="TmUnit")
    assert (store.active_name, store.cold_name, store.archive_name) == (
        "TmUnitActive",
        "TmUnitCold",
        "TmUnitArchive",
    )
    with pytest.raises(ConfigurationError):
        _ = store.client  # nothing built before open()
    for bad in ({}, {"url": "http://x", "client": object()}):
        with pytest.raises(ConfigurationError):
            WeaviateMemoryStore(**bad)  # type: ignore[arg-type]
    for prefix in ("lower", "Has-Dash", "", "Ünicode", "With Space"):
        with pytest.raises(ConfigurationError):
            WeaviateMemoryStore(url="http://x", prefix=prefix)
    with pytest.raises(ConfigurationError):
        WeaviateMemoryStore(url="http://x", write_batch_size=0)


async def test_a_non_http_url_is_a_configuration_error() -> None:
    store = WeaviateMemoryStore(url="localhost:8080")
    with pytest.raises(ConfigurationError, match="http"):
        await store.open()


async def test_transaction_is_a_no_op_context() -> None:
    store = WeaviateMemoryStore(url="http://localhost:1")
    async with store.transaction():
        pass
    with pytest.raises(RuntimeError):
        async with store.transaction():
            raise RuntimeError("propagates")


async def test_connect_closes_what_it_built_when_opening_fails() -> None:
    with pytest.raises(ConfigurationError):
        await WeaviateMemoryStore.connect(url="not-a-url")
    with pytest.raises(ConfigurationError):
        await WeaviateMemoryStore.connect(url="http://x", prefix="bad prefix")
