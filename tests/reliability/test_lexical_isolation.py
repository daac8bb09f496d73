"""No tenant can read another through lexical scores (issue 16, item 5).

With BM25 statistics counted over the whole file, a tenant could store two probes,
search a word, and learn from its own scores whether the word occurs in any other
tenant's memories; and other tenants' writes changed its results. Lexical statistics
are now kept per namespace: a namespace's results and every term of their scores are
bit-identical whatever other namespaces hold.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiered_memory import HashingEmbedder, ManualClock, Memory, TieredMemory
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import LIVE_TIERS

from .conftest import START

# A small shared vocabulary, so namespace B's texts hold the words A's queries use.
WORDS = (
    "vault",
    "code",
    "codes",
    "coding",
    "ava",
    "school",
    "rent",
    "budget",
    "paris",
    "train",
    "piano",
    "doctor",
    "garden",
    "the",
    "and",
)
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


# One backend: the lexical statistics are the SQLite store's, and neither the graph nor
# the object store takes part (the memories of one test would also share a Bolt graph).
def _open(folder: Path) -> TieredMemory:
    return TieredMemory.embedded(
        folder / "memory.db", embedder=HashingEmbedder(), clock=ManualClock(START)
    )


def _observe(mem: TieredMemory, queries: list[str]) -> list[list[tuple[str, float, Any]]]:
    """What tenant A sees: every hit's id, score and score terms, for every query."""
    seen = []
    for query in queries:
        hits = mem.search(query, namespace="a", k=10, deep=True)
        seen.append([(h.memory.id, h.score, h.terms.model_dump()) for h in hits])
    return seen


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    own=st.lists(texts, min_size=1, max_size=8),
    foreign=st.lists(texts, min_size=1, max_size=25),
    queries=st.lists(texts, min_size=1, max_size=4),
)
def test_other_namespaces_change_nothing_in_search(
    own: list[str], foreign: list[str], queries: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        mem = _open(Path(folder))
        try:
            mem.add_many(own, namespace="a", dedup=False)
            before = _observe(mem, queries)
            mem.add_many(foreign, namespace="b", dedup=False)
            assert _observe(mem, queries) == before
        finally:
            mem.close()


def _memory(memory_id: str, content: str) -> Memory:
    return Memory(
        id=memory_id, content=content, embedding=[1.0, 0.0], created_at=START, updated_at=START
    )


async def _probe(path: Path, secret: str) -> list[tuple[str, float]]:
    store = await SQLiteMemoryStore.open(path)
    try:
        await store.put_many("victim", [_memory("s", secret), _memory("f", "filler words")])
        await store.put_many(
            "attacker", [_memory("p1", "probe vault"), _memory("p2", "probe other words")]
        )
        hits = await store.lexical_search("attacker", "vault", tiers=LIVE_TIERS, k=5)
        return [(h.memory.id, h.score) for h in hits]
    finally:
        await store.close()


async def test_probes_learn_nothing_of_other_namespaces(tmp_path: Path) -> None:
    """The attack of the issue: two probes in one's own namespace, then a search.
    Whether another tenant holds the word or not, the probe's score is the same."""
    with_word = await _probe(tmp_path / "with.db", "the vault code is 4711")
    without = await _probe(tmp_path / "without.db", "nothing to see here")
    assert [i for i, _ in with_word] == ["p1"]
    assert with_word == without


async def test_statistics_are_the_namespace_own(tmp_path: Path) -> None:
    """What the ranking may read (`lexical_statistics`) is counted in one namespace."""
    store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
    try:
        await store.put_many("victim", [_memory("s", "the vault codes are secret")])
        await store.put_many("attacker", [_memory("p1", "probe vault"), _memory("p2", "x y z")])
        stats = await store.lexical_statistics("attacker", "Vault CODE")
        assert (stats.documents, stats.tokens) == (2, 5)
        assert dict(stats.frequencies) == {"vault": 1, "code": 0}
        assert stats.average_length == 2.5
        empty = await store.lexical_statistics("nobody", "vault")
        assert (empty.documents, dict(empty.frequencies)) == (0, {"vault": 0})
    finally:
        await store.close()
