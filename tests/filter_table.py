"""One table of metadata filters and what each selects, run through every face and
store (tests/unit/test_filters.py, tests/langchain, tests/llamaindex)."""

from __future__ import annotations

from typing import Any

DOCS: dict[str, dict[str, Any]] = {
    "a": {"color": "red", "n": 1, "tags": ["x", "y"]},
    "b": {"color": "green", "n": 2, "tags": ["y"]},
    "c": {"color": "blue", "n": 3, "extra": True},
    "d": {"color": "red", "n": 4.5},
    "e": {"shape": "round"},
}
TEXT = {key: f"document {key} about fruit" for key in DOCS}

# (id, Mongo-style filter, the ids it selects)
ROWS: list[tuple[str, dict[str, Any], set[str]]] = [
    ("implicit-eq", {"color": "red"}, {"a", "d"}),
    ("eq", {"color": {"$eq": "red"}}, {"a", "d"}),
    ("eq-number", {"n": {"$eq": 2.0}}, {"b"}),
    ("ne", {"color": {"$ne": "red"}}, {"b", "c", "e"}),
    ("gt", {"n": {"$gt": 2}}, {"c", "d"}),
    ("gte", {"n": {"$gte": 2}}, {"b", "c", "d"}),
    ("lt", {"n": {"$lt": 3}}, {"a", "b"}),
    ("lte", {"n": {"$lte": 3}}, {"a", "b", "c"}),
    ("in", {"color": {"$in": ["green", "blue"]}}, {"b", "c"}),
    ("nin", {"color": {"$nin": ["green", "blue"]}}, {"a", "d", "e"}),
    ("exists", {"extra": {"$exists": True}}, {"c"}),
    ("not-exists", {"color": {"$exists": False}}, {"e"}),
    ("contains", {"tags": {"$contains": "y"}}, {"a", "b"}),
    ("range", {"n": {"$gt": 1, "$lt": 4}}, {"b", "c"}),
    ("and", {"$and": [{"color": "red"}, {"n": {"$gt": 2}}]}, {"d"}),
    ("or", {"$or": [{"color": "green"}, {"n": {"$gte": 4}}]}, {"b", "d"}),
    ("not", {"$not": {"color": "red"}}, {"b", "c", "e"}),
    ("field-not", {"n": {"$not": {"$gt": 2}}}, {"a", "b", "e"}),
    (
        "nested",
        {
            "$or": [
                {"$and": [{"color": "red"}, {"n": {"$lt": 2}}]},
                {"$not": {"n": {"$exists": True}}},
            ]
        },
        {"a", "e"},
    ),
    ("not-or", {"$not": {"$or": [{"color": "red"}, {"shape": "round"}]}}, {"b", "c"}),
]
