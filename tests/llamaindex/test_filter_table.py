"""The shared filter table through the LlamaIndex face: each Mongo-style row written
as LlamaIndex `MetadataFilters` (AND/OR/NOT groups, nested) and evaluated by
get_nodes and query in the store's own query. LlamaIndex has no `exists` operator,
so those rows are skipped here (they run in the other faces)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from llamaindex_tiered_memory import TieredMemoryVectorStore
from tests.filter_table import DOCS, ROWS, TEXT
from tiered_memory import HashingEmbedder, TieredMemory

from .helpers import DIM, HashingEmbedding

_OPS = {
    "$eq": FilterOperator.EQ,
    "$ne": FilterOperator.NE,
    "$gt": FilterOperator.GT,
    "$gte": FilterOperator.GTE,
    "$lt": FilterOperator.LT,
    "$lte": FilterOperator.LTE,
    "$in": FilterOperator.IN,
    "$nin": FilterOperator.NIN,
    "$contains": FilterOperator.CONTAINS,
}


def to_llamaindex(spec: dict[str, Any]) -> MetadataFilters:
    parts: list[MetadataFilter | MetadataFilters] = []
    for key, value in spec.items():
        if key in ("$and", "$or"):
            condition = FilterCondition.AND if key == "$and" else FilterCondition.OR
            parts.append(
                MetadataFilters(filters=[to_llamaindex(v) for v in value], condition=condition)
            )
        elif key == "$not":
            parts.append(
                MetadataFilters(filters=[to_llamaindex(value)], condition=FilterCondition.NOT)
            )
        elif isinstance(value, dict):
            for op, operand in value.items():
                if op == "$not":
                    inner = to_llamaindex({key: operand})
                    parts.append(MetadataFilters(filters=[inner], condition=FilterCondition.NOT))
                else:
                    parts.append(MetadataFilter(key=key, value=operand, operator=_OPS[op]))
        else:
            parts.append(MetadataFilter(key=key, value=value))
    return MetadataFilters(filters=parts, condition=FilterCondition.AND)


TRANSLATABLE = [r for r in ROWS if "$exists" not in repr(r[1])]
CASES = pytest.mark.parametrize(
    ("spec", "expected"), [r[1:] for r in TRANSLATABLE], ids=[r[0] for r in TRANSLATABLE]
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredMemoryVectorStore]:
    path: Path = tmp_path_factory.mktemp("li") / "li.db"
    with TieredMemory.embedded(path, embedder=HashingEmbedding()) as mem:
        vs = TieredMemoryVectorStore(mem, namespace="t")
        embed = HashingEmbedder(DIM)
        vs.add(
            [
                TextNode(
                    id_=key,
                    text=TEXT[key],
                    metadata=meta,
                    embedding=embed.embed_query(TEXT[key]),
                )
                for key, meta in DOCS.items()
            ]
        )
        yield vs


@CASES
def test_get_nodes_and_query(
    store: TieredMemoryVectorStore, spec: dict[str, Any], expected: set[str]
) -> None:
    filters = to_llamaindex(spec)
    assert {n.node_id for n in store.get_nodes(filters=filters)} == expected
    query = VectorStoreQuery(
        query_embedding=HashingEmbedder(DIM).embed_query("document fruit"),
        query_str="document fruit",
        similarity_top_k=10,
        filters=filters,
    )
    assert set(store.query(query).ids or []) == expected
