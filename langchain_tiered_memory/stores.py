"""`TieredMemoryStore`: tiered memory as LangGraph's long-term store (`BaseStore`).

LangGraph agents, and LangMem's memory tools, read and write through `BaseStore`;
this adapter lets them use tiered memory unchanged. The mapping:

- a LangGraph namespace tuple is one memory namespace, the core's
  `PathNamespace((prefix, *labels))`: reversible whatever the labels hold, no two
  tuples share one, and no namespace a direct caller can type is one of them
  (namespaces stored by earlier versions as `langgraph:[...]` are not read; see
  docs/namespaces.md);
- an item key is the memory id, its value is the memory's metadata (a JSON object),
  and the text embedded and searched is the value's `index` fields (or the whole
  value as JSON);
- `put` over an existing key replaces the memory in one step (the core's `upsert`:
  a value that fails validation or embedding leaves the old item; the replacement
  starts in HOT again); `put(..., None)` deletes it;
- `search` with a query is the engine's ranked search (HOT and WARM first, COLD when
  needed, archived summaries when nothing else fits) and its score is the memory's
  final score; items the memory ranks as noise (below its noise floor) follow in key
  order with score None, so `limit` items come back whenever that many exist, as
  with `InMemoryStore`. Without a query it lists items in key order. A filter means
  the same either way: the core's Mongo-style filter language (`$eq $ne $gt $gte $lt
  $lte $in $nin $exists $and $or $not`), applied in the store's own query.

Every operation runs on the memory's own loop (`memory.run`, `await memory.arun`),
where its backends were opened.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path

from tiered_memory import (
    ConfigurationError,
    Memory,
    NotFoundError,
    PathNamespace,
    Tier,
    TieredMemory,
    ValidationError,
    validation,
)
from tiered_memory.filters import Condition, parse_filter

DEFAULT_PREFIX = "langgraph"
_PAGE = 500
_LIVE = (Tier.HOT, Tier.WARM, Tier.COLD)


class TieredMemoryStore(BaseStore):
    """LangGraph's `BaseStore` over a `TieredMemory`.

    Example:
        ```python
        store = TieredMemoryStore(mem, index={"fields": ["content"]})
        store.put(("memories", "user-42"), "k1", {"content": "Likes green tea"})
        store.search(("memories", "user-42"), query="what does the user drink?")
        agent = create_agent(model, tools=[...], store=store)
        ```

    `index` takes LangGraph's `IndexConfig`, of which only `fields` applies: the
    memory's own embedder embeds (give your embeddings to the memory instead). TTLs
    are not supported; memories age through their tiers instead.
    """

    supports_ttl: bool = False

    def __init__(
        self,
        memory: TieredMemory,
        *,
        index: IndexConfig | None = None,
        namespace_prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if index is not None and index.get("embed") is not None:
            raise ConfigurationError(
                "TieredMemoryStore embeds with the memory's embedder; pass your "
                "embeddings to TieredMemory.embedded(embedder=...) and give index only "
                "'fields'"
            )
        if not isinstance(namespace_prefix, str) or not namespace_prefix.strip():
            raise ConfigurationError("namespace_prefix must be a non-empty string")
        self.memory = memory
        self.index_fields: list[str] = list((index or {}).get("fields") or ["$"])
        self.namespace_prefix = namespace_prefix
        self._listing_prefix = PathNamespace((namespace_prefix,)).descendants_prefix

    # -- namespace mapping ------------------------------------------------------------

    def encode_namespace(self, namespace: tuple[str, ...]) -> PathNamespace:
        """The memory namespace of a LangGraph namespace (pass it as `namespace=`)."""
        return PathNamespace((self.namespace_prefix, *namespace))

    def decode_namespace(self, name: str) -> tuple[str, ...] | None:
        """The LangGraph namespace of a memory namespace, or None if not one of ours."""
        path = PathNamespace.parse(name)
        if path is None:
            return None
        prefix, *labels = path.labels
        if prefix != self.namespace_prefix or not labels:
            return None
        return tuple(labels)

    # -- batch ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.memory.run(self._batch(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.memory.arun(self._batch(ops))

    async def _batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order; a read sees the writes of earlier ops of the batch."""
        ops = validation.check_list(ops, "ops")
        for op in ops:
            _check_op(op)
            validate_op_namespace(op)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            else:
                results.append(await self._list_namespaces(op))
        return results

    async def _get(self, op: GetOp) -> Item | None:
        memory = await self.memory.aio.get(op.key, namespace=self.encode_namespace(op.namespace))
        return None if memory is None else _item(memory, op.namespace)

    async def _put(self, op: PutOp) -> None:
        if op.ttl is not None:
            raise ValidationError(
                "TieredMemoryStore does not support ttl; memories age through their tiers"
            )
        engine = self.memory.aio
        ns = self.encode_namespace(op.namespace)
        if op.value is None:
            with contextlib.suppress(NotFoundError):  # deleting a missing key is fine
                await engine.forget(op.key, namespace=ns, hard=True)
            return
        try:  # the text is the value's JSON (or fields of it): a value must be JSON first
            text = self._text(op.value, op.index)
        except (TypeError, ValueError) as e:
            raise ValidationError(
                f"an item's value must be a JSON object (string keys, JSON values): {e}"
            ) from e
        # One atomic replace: a value that fails validation or embedding keeps the old item.
        await engine.upsert(
            text,
            id=op.key,
            namespace=ns,
            metadata=dict(op.value),
            source="langgraph",
        )

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        """The text to embed: the `index` fields of the op, else of the store."""
        fields = index if isinstance(index, list) else self.index_fields
        texts: list[str] = []
        for path in fields:
            texts.extend(t for t in get_text_at_path(value, path) if t.strip())
        if not texts:  # none of the fields present: the value itself is the text
            texts = get_text_at_path(value, "$")
        return "\n".join(texts)

    async def _namespaces(self) -> list[tuple[str, ...]]:
        names = await self.memory.aio.namespaces(prefix=self._listing_prefix)
        decoded = (self.decode_namespace(n) for n in names)
        return sorted(ns for ns in decoded if ns is not None)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        namespaces = [ns for ns in await self._namespaces() if ns[: len(prefix)] == prefix]
        conditions = translate_filter(op.filter)
        wanted = op.offset + op.limit
        if op.limit <= 0 or not namespaces:
            return []
        found: list[SearchItem] = []
        if op.query:
            for ns in namespaces:
                hits = await self.memory.aio.search(
                    op.query, namespace=self.encode_namespace(ns), k=wanted, metadata=conditions
                )
                found.extend(_search_item(h.memory, ns, h.score) for h in hits)
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
            found = found[:wanted]
            # The memory drops matches below its noise floor; InMemoryStore returns
            # `limit` items whenever that many exist, so the rest follow unranked.
            seen = {(item.namespace, item.key) for item in found}
            for ns in namespaces:
                if len(found) >= wanted:
                    break
                rest = await self._scan(ns, conditions, wanted - len(found) + len(seen))
                found.extend(i for i in rest if (i.namespace, i.key) not in seen)
                found = found[:wanted]
        else:
            for ns in namespaces:
                found.extend(await self._scan(ns, conditions, wanted - len(found)))
                if len(found) >= wanted:
                    break
        return found[op.offset : wanted]

    async def _scan(
        self, ns: tuple[str, ...], conditions: tuple[Condition, ...], limit: int
    ) -> list[SearchItem]:
        """The first `limit` live, unforgotten items of one namespace in key order."""
        out: list[SearchItem] = []
        items = self.memory.aio.iterate(
            namespace=self.encode_namespace(ns), tiers=_LIVE, metadata=conditions, page=_PAGE
        )
        async for memory in items:
            if not memory.do_not_inject:
                out.append(_search_item(memory, ns, None))
                if len(out) >= limit:
                    break
        return out

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [
            ns
            for ns in await self._namespaces()
            if all(_namespace_matches(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]


def _check_op(op: object) -> None:
    """The fields LangGraph's dataclasses leave unchecked, before any op of a batch runs
    (a bad limit or filter must not fail a batch halfway, after earlier puts)."""
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise ValidationError(
            f"unknown store operation {type(op).__name__}; pass GetOp, PutOp, SearchOp "
            "or ListNamespacesOp"
        )
    if isinstance(op, (SearchOp, ListNamespacesOp)):
        for name in ("limit", "offset"):
            value = getattr(op, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"{name} must be an integer >= 0, got {value!r:.60}")
    if isinstance(op, ListNamespacesOp) and op.max_depth is not None:
        validation.check_k(op.max_depth, "max_depth")
    if isinstance(op, SearchOp):
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise ValidationError("a search filter is a dict of field -> value or {$op: value}")
        if op.query is not None and not isinstance(op.query, str):
            raise ValidationError(f"query must be a string, got {type(op.query).__name__}")
    if isinstance(op, PutOp):
        if op.value is not None and not isinstance(op.value, Mapping):
            raise ValidationError(f"an item's value is a dict, got {type(op.value).__name__}")
        # by identity: `in (None, False)` compared with ==, which an array answers
        # element by element (numpy's ValueError), and which let 0 pass as False
        if (
            op.index is not None
            and op.index is not False
            and not (isinstance(op.index, list) and all(isinstance(f, str) for f in op.index))
        ):
            raise ValidationError("index is False, None or a list of field paths")


def _item(memory: Memory, namespace: tuple[str, ...]) -> Item:
    return Item(
        value=dict(memory.metadata),
        key=memory.id,
        namespace=namespace,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
    )


def _search_item(memory: Memory, namespace: tuple[str, ...], score: float | None) -> SearchItem:
    return SearchItem(
        namespace=namespace,
        key=memory.id,
        value=dict(memory.metadata),
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        score=score,
    )


def translate_filter(filter: Mapping[str, Any] | None) -> tuple[Condition, ...]:
    """A LangGraph search filter as the core's filter trees.

    LangGraph's syntax is the core's Mongo-style language (`{"k": v}`, `{"k": {"$gte":
    v}}`), which also takes `$in $nin $exists $and $or $not`; a condition on a nested
    object raises `UnsupportedFilterError` rather than being dropped.
    """
    return parse_filter(filter) if filter else ()


def _namespace_matches(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(ns, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(ns), reversed(path), strict=False)
    else:
        raise ValidationError(f"unsupported namespace match type {condition.match_type!r}")
    return all(want == "*" or have == want for have, want in pairs)
