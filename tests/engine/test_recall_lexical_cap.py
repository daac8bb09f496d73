"""recall() above the embedded store's lexical cap: rare words still count, and a query
of common words only still gets the memories closest in meaning."""

from __future__ import annotations

import pytest

from tiered_memory import AsyncTieredMemory
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore

# Ranking rules read the store alone: the graph and the object store take no part, so
# the other backend combinations run with --matrix (tests/matrix.py).
pytestmark = pytest.mark.matrix


async def _fill(amem: AsyncTieredMemory) -> None:
    assert isinstance(amem.store, SQLiteMemoryStore)
    amem.store._lexical.rows = 20  # a cap the test store exceeds (the default is 1,000)
    await amem.add_many(
        [f"the user said hello and talked about the weather, take {i}" for i in range(40)]
        + [
            "the user said the deploy key for zanzibar is rotated monthly",
            "the user prefers green tea in the morning",
        ],
        dedup=False,
        link=False,
    )


async def test_a_rare_word_finds_its_memory_above_the_cap(amem: AsyncTieredMemory) -> None:
    await _fill(amem)
    hits = await amem.search("what did the user say about zanzibar", k=3)
    assert hits[0].memory.content.startswith("the user said the deploy key for zanzibar")
    assert hits[0].terms.lexical > 0


async def test_common_words_only_still_recall_by_meaning(amem: AsyncTieredMemory) -> None:
    """Every word is in more texts than the cap: no lexical signal, but the vector
    half still ranks, and the recall injects what it found."""
    await _fill(amem)
    injection = await amem.recall("the user said", budget_tokens=200)
    assert injection.items
    assert all(item.terms.lexical == 0 for item in injection.items)
    assert any("the user said" in item.memory.content for item in injection.items)
