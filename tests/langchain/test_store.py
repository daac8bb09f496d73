"""TieredMemoryStore: LangGraph's BaseStore over tiered memory."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from typing_extensions import TypedDict

from langchain_tiered_memory import TieredMemoryStore
from tiered_memory import (
    ConfigurationError,
    ManualClock,
    NamespaceError,
    Tier,
    TieredMemory,
    TieredMemoryError,
    ValidationError,
)
from tiered_memory.embeddings import LangChainEmbedder
from tiered_memory.validation import check_namespace

from .fakes import FailingEmbeddings

USER = ("memories", "user-42")


@pytest.fixture
def store(mem: TieredMemory) -> TieredMemoryStore:
    return TieredMemoryStore(mem, index={"fields": ["content"]})


def test_put_then_get_round_trips_the_value(
    store: TieredMemoryStore, mem: TieredMemory, clock: ManualClock
) -> None:
    value = {"content": "The user likes green tea", "tags": ["drink"], "stars": 4}
    store.put(USER, "tea", value)
    item = store.get(USER, "tea")
    assert item is not None
    assert item.value == value
    assert item.key == "tea"
    assert item.namespace == USER
    assert item.created_at == item.updated_at == clock.now()
    # under the hood: one HOT memory whose text is the indexed field
    memory = mem.get("tea", namespace=store.encode_namespace(USER))
    assert memory is not None
    assert memory.content == "The user likes green tea"
    assert memory.tier is Tier.HOT
    assert store.get(USER, "missing") is None
    assert store.get(("memories", "someone-else"), "tea") is None


def test_put_over_a_key_replaces_and_none_deletes(
    store: TieredMemoryStore, clock: ManualClock
) -> None:
    store.put(USER, "drink", {"content": "The user likes green tea"})
    clock.advance(hours=1)
    store.put(USER, "drink", {"content": "The user switched to black coffee"})
    item = store.get(USER, "drink")
    assert item is not None
    assert item.value == {"content": "The user switched to black coffee"}
    [hit] = store.search(USER, query="coffee")
    assert hit.key == "drink"
    store.delete(USER, "drink")
    assert store.get(USER, "drink") is None
    assert store.search(USER, query="coffee") == []
    store.delete(USER, "drink")  # deleting what is gone is fine


def test_semantic_search_ranks_and_scores(store: TieredMemoryStore) -> None:
    store.put(USER, "tea", {"content": "The user drinks green tea every morning"})
    store.put(USER, "bike", {"content": "The user cycles to work on a red bicycle"})
    store.put(USER, "cat", {"content": "The user has a cat called Miso"})
    results = store.search(USER, query="what tea does the user drink?", limit=2)
    assert results[0].key == "tea"
    assert len(results) <= 2
    assert all(r.score is not None and 0.0 <= r.score <= 1.0 for r in results)
    assert results == sorted(results, key=lambda r: r.score or 0.0, reverse=True)
    assert results[0].value == {"content": "The user drinks green tea every morning"}


def test_search_filters_offsets_and_prefixes(store: TieredMemoryStore) -> None:
    for i in range(5):
        store.put(USER, f"k{i}", {"content": f"Fact number {i} about tea", "n": i, "kind": "a"})
    store.put(("memories", "user-7"), "other", {"content": "Fact about tea", "n": 9})
    store.put(("notes",), "note", {"content": "A note about tea", "n": 1})

    listed = store.search(USER, limit=3)
    assert [r.key for r in listed] == ["k0", "k1", "k2"]
    assert all(r.score is None for r in listed)
    assert [r.key for r in store.search(USER, limit=3, offset=3)] == ["k3", "k4"]
    assert [r.key for r in store.search(USER, filter={"n": {"$gte": 3}})] == ["k3", "k4"]
    assert [r.key for r in store.search(USER, filter={"n": 2, "kind": "a"})] == ["k2"]

    semantic = store.search(USER, query="tea fact", filter={"n": {"$lt": 2}})
    assert {r.key for r in semantic} == {"k0", "k1"}

    everyone = store.search(("memories",), query="tea", limit=10)
    assert {r.namespace for r in everyone} == {USER, ("memories", "user-7")}
    assert len(store.search((), limit=100)) == 7


def test_untranslatable_filters_raise(store: TieredMemoryStore) -> None:
    store.put(USER, "k", {"content": "x", "meta": {"a": 1}})
    with pytest.raises(ValidationError, match="nested"):
        store.search(USER, filter={"meta": {"a": 1}})
    with pytest.raises(ValidationError, match="operator"):
        store.search(USER, query="x", filter={"n": {"$regex": "a"}})


def test_list_namespaces(store: TieredMemoryStore, mem: TieredMemory) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]:
        store.put(ns, "k", {"content": "something"})
    mem.add("not a LangGraph namespace", namespace="plain")
    assert store.list_namespaces() == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "x"),
        ("z", "b", "c"),
    ]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("b", "c")) == [("a", "b", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("z", "b", "c"),
    ]
    assert store.list_namespaces(max_depth=1) == [("a",), ("z",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]


@pytest.mark.parametrize(
    "namespace",
    [("user:1", "notes"), ('quote"s', "back\\slash"), ("ünïcödé", "日本"), ("[", "]")],
)
def test_namespace_mapping_is_reversible(
    store: TieredMemoryStore, namespace: tuple[str, ...]
) -> None:
    encoded = store.encode_namespace(namespace)
    assert store.decode_namespace(encoded) == namespace
    store.put(namespace, "k", {"content": "a value"})
    assert namespace in store.list_namespaces()
    assert store.get(namespace, "k") is not None


def test_decode_ignores_foreign_namespaces(store: TieredMemoryStore) -> None:
    assert store.decode_namespace("user-42") is None
    assert store.decode_namespace("langgraph:not json") is None
    assert store.decode_namespace('other:["a"]') is None
    assert store.decode_namespace('langgraph:["user-42"]') is None  # the old, typeable form
    assert (
        store.decode_namespace(
            TieredMemoryStore(store.memory, namespace_prefix="other").encode_namespace(("a",))
        )
        is None
    )


# LangGraph labels: non-empty, no '.', no NUL; ours also refuse control characters.
_label = st.text(
    st.characters(
        blacklist_categories=("Cc", "Cs"), blacklist_characters=".", whitelist_characters="\t\ufdd0"
    ),
    min_size=1,
    max_size=10,
)
_tuples = st.lists(_label, min_size=1, max_size=4).map(tuple)
_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(_tuples, _tuples)
def test_namespace_mapping_is_injective(
    store: TieredMemoryStore, a: tuple[str, ...], b: tuple[str, ...]
) -> None:
    encoded = store.encode_namespace(a)
    assert store.decode_namespace(encoded) == a
    assert (encoded == store.encode_namespace(b)) == (a == b)


@_SETTINGS
@given(_tuples, st.text(max_size=60))
def test_no_namespace_a_direct_caller_can_name_is_a_store_namespace(
    store: TieredMemoryStore, labels: tuple[str, ...], plain: str
) -> None:
    """Whatever text a caller passes as `namespace=`, the core either refuses it or it
    is none of the store's namespaces: not `labels` joined, quoted or encoded."""
    encoded = store.encode_namespace(labels)
    for text in (plain, ".".join(labels), ":".join(labels), str(encoded)):
        try:
            accepted = check_namespace(text, store.memory.aio.policy.limits)
        except NamespaceError:
            continue
        assert accepted != encoded
        assert store.decode_namespace(accepted) is None


def test_direct_namespaces_and_store_namespaces_never_meet(
    store: TieredMemoryStore, mem: TieredMemory
) -> None:
    """("user-42",) in the store and namespace="user-42" are different memories, and no
    text a caller can pass, the store's old `langgraph:[...]` form included, is one of
    the store's namespaces."""
    mem.add("Direct caller: the user drinks coffee", namespace="user-42")
    mem.add("Planted: the user drinks whisky", namespace='langgraph:["user-42"]')
    store.put(("user-42",), "tea", {"content": "Store: the user drinks green tea"})
    assert [i.key for i in store.search(("user-42",))] == ["tea"]
    assert [h.value["content"] for h in store.search(("user-42",), query="drinks")] == [
        "Store: the user drinks green tea"
    ]
    assert store.list_namespaces() == [("user-42",)]
    assert [m.content for m in mem.list(namespace="user-42")] == [
        "Direct caller: the user drinks coffee"
    ]
    with pytest.raises(NamespaceError):
        mem.add("Planted", namespace=str(store.encode_namespace(("user-42",))))
    assert store.list_namespaces() == [("user-42",)]
    assert [i.key for i in store.search(("user-42",))] == ["tea"]


def test_batch_runs_ops_in_order(store: TieredMemoryStore) -> None:
    results = store.batch(
        [
            PutOp(USER, "a", {"content": "first"}),
            GetOp(USER, "a"),
            PutOp(USER, "a", None),
            GetOp(USER, "a"),
            SearchOp(USER),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("memories",)),)),
        ]
    )
    assert results[0] is None
    assert results[1] is not None
    assert results[1].value == {"content": "first"}  # type: ignore[union-attr]
    assert results[3] is None
    assert results[4] == []


async def test_async_store(store: TieredMemoryStore) -> None:
    await store.aput(USER, "tea", {"content": "The user drinks green tea"})
    item = await store.aget(USER, "tea")
    assert item is not None
    assert item.value["content"] == "The user drinks green tea"
    [hit] = await store.asearch(USER, query="green tea")
    assert hit.key == "tea"
    assert await store.alist_namespaces() == [USER]
    await store.adelete(USER, "tea")
    assert await store.aget(USER, "tea") is None


def test_whole_value_is_the_text_without_index_fields(mem: TieredMemory) -> None:
    store = TieredMemoryStore(mem)
    store.put(USER, "k", {"food": "risotto", "for": "Ava"})
    memory = mem.get("k", namespace=store.encode_namespace(USER))
    assert memory is not None
    assert memory.content == '{"food": "risotto", "for": "Ava"}'
    # a per-put index overrides the store's fields
    store.put(USER, "k2", {"food": "pasta", "for": "Leo"}, index=["for"])
    assert mem.get("k2", namespace=store.encode_namespace(USER)).content == "Leo"  # type: ignore[union-attr]


def test_items_age_like_memories(
    store: TieredMemoryStore, mem: TieredMemory, clock: ManualClock
) -> None:
    store.put(USER, "tea", {"content": "The user drinks green tea"})
    ns = store.encode_namespace(USER)
    clock.advance(days=4)
    mem.maintain()  # HOT lasts 72 h
    assert mem.get("tea", namespace=ns).tier in {Tier.WARM, Tier.COLD}  # type: ignore[union-attr]
    clock.advance(days=61)  # and WARM unused for 60 days fades
    mem.maintain()
    assert mem.get("tea", namespace=ns).tier is Tier.COLD  # type: ignore[union-attr]
    [hit] = store.search(USER, query="green tea")  # COLD is still found when needed
    assert hit.key == "tea"
    assert hit.score is not None
    factor = mem.policy.scoring.tier_factor[Tier.COLD]
    assert hit.score <= factor  # relevance and retention are in [0, 1], times COLD's factor
    assert clock.now() - hit.created_at == timedelta(days=65)


def test_stores_with_other_prefixes_do_not_meet(mem: TieredMemory) -> None:
    stores = [TieredMemoryStore(mem, namespace_prefix=p) for p in ("a", "a:b", 'a","b', "ab")]
    for i, store in enumerate(stores):
        store.put(("b",), "k", {"content": f"item of store {i}"})
    for i, store in enumerate(stores):
        assert store.list_namespaces() == [("b",)]
        assert [item.value["content"] for item in store.search(("b",))] == [f"item of store {i}"]


def test_configuration_errors(mem: TieredMemory) -> None:
    with pytest.raises(ConfigurationError, match="embedder"):
        TieredMemoryStore(mem, index={"dims": 3, "embed": lambda texts: [[0.0] * 3]})
    with pytest.raises(ConfigurationError):
        TieredMemoryStore(mem, namespace_prefix=" ")
    store = TieredMemoryStore(mem)
    with pytest.raises(NotImplementedError):
        store.put(USER, "k", {"content": "x"}, ttl=5)


def test_a_langgraph_graph_uses_it_as_its_store(store: TieredMemoryStore) -> None:
    """Nodes reach it through `runtime.store`, as LangMem's tools and agents do."""

    class State(TypedDict):
        said: str
        recalled: list[str]

    def remember_then_recall(state: State, runtime: Runtime[None]) -> dict[str, list[str]]:
        assert runtime.store is not None
        runtime.store.put(("memories", "u1"), "ava", {"content": state["said"]})
        hits = runtime.store.search(("memories", "u1"), query="what is the daughter called?")
        return {"recalled": [h.value["content"] for h in hits]}

    graph = (
        StateGraph(State)
        .add_node("remember_then_recall", remember_then_recall)
        .add_edge(START, "remember_then_recall")
        .compile(store=store)
    )
    result = graph.invoke({"said": "The user's daughter is called Ava", "recalled": []})
    assert result["recalled"] == ["The user's daughter is called Ava"]
    assert store.list_namespaces() == [("memories", "u1")]


def test_a_refused_put_keeps_the_stored_item(store: TieredMemoryStore) -> None:
    store.put(USER, "k", {"content": "original"})
    with pytest.raises(ValidationError, match="NaN"):
        store.put(USER, "k", {"content": "replacement", "x": float("nan")})
    item = store.get(USER, "k")
    assert item is not None
    assert item.value == {"content": "original"}


@pytest.mark.parametrize(
    ("value", "index"),
    [({"when": timedelta(days=1)}, None), ({"a": None, 0: None}, None), ({"x": {1, 2}}, ["x"])],
)
def test_a_value_that_is_not_json_is_refused_and_keeps_the_stored_item(
    store: TieredMemoryStore, value: dict[object, object], index: list[str] | None
) -> None:
    """Its text is computed from its JSON before the core sees it: that used to raise
    json's TypeError (not JSON serialisable, or keys that cannot be sorted)."""
    store.put(USER, "k", {"content": "original"})
    with pytest.raises(ValidationError, match="JSON"):
        store.put(USER, "k", value, index=index)  # type: ignore[arg-type]
    item = store.get(USER, "k")
    assert item is not None
    assert item.value == {"content": "original"}


@pytest.mark.parametrize(
    "index", [np.ones(3, dtype=np.float32), np.array(["content"]), 0, "content", ["content", 1]]
)
def test_an_index_that_is_not_a_list_of_fields_is_refused(
    store: TieredMemoryStore, index: object
) -> None:
    """`index` is False, None or a list of field paths. It was compared with `in (None,
    False)`: an array raised numpy's ValueError (the truth value of an array is
    ambiguous, found by the hostile-input suite), and 0 passed as False."""
    store.put(USER, "k", {"content": "original"})
    with pytest.raises(ValidationError, match="index is False, None or a list"):
        store.put(USER, "k", {"content": "replacement"}, index=index)  # type: ignore[arg-type]
    item = store.get(USER, "k")
    assert item is not None
    assert item.value == {"content": "original"}


def test_a_put_whose_embedding_fails_keeps_the_stored_item(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The replacement is embedded before the old item is touched, and swapped in one
    transaction: an embedding service failing on the new value loses nothing."""
    embeddings = FailingEmbeddings(size=32)
    with TieredMemory.embedded(
        tmp_path / "flaky.db", embedder=LangChainEmbedder(embeddings), clock=clock
    ) as memory:
        store = TieredMemoryStore(memory, index={"fields": ["content"]})
        store.put(USER, "k", {"content": "The user likes green tea"})
        with pytest.raises((ConnectionError, TieredMemoryError)):
            store.put(USER, "k", {"content": "boom: the user likes coffee"})
        item = store.get(USER, "k")
        assert item is not None
        assert item.value == {"content": "The user likes green tea"}
        assert [hit.key for hit in store.search(USER, query="green tea")] == ["k"]
        store.put(USER, "k", {"content": "The user likes coffee"})  # and a good one replaces
        assert store.get(USER, "k").value == {"content": "The user likes coffee"}  # type: ignore[union-attr]
