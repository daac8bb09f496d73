"""A recall's lexical phases on the embedded store: the COLD phase scores the same words
as the active phase, and reads on from the rows the active phase read (`lexical._Passing`)
instead of reading them again. Its answer must be the one a search of COLD alone gives."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sql_trace import traced
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import Memory, Tier
from tiered_memory.ports import ScoredMemory, SearchFilter

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "lex"
WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime"]
ACTIVE = frozenset({Tier.HOT, Tier.WARM})
COLD = frozenset({Tier.COLD})

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
rows = st.lists(
    st.tuples(texts, st.sampled_from(list(Tier)[:3]), st.booleans(), st.booleans()),
    min_size=1,
    max_size=40,
)


def _memories(spec: list[tuple[str, Tier, bool, bool]]) -> list[Memory]:
    return [
        Memory(
            id=f"m{i:03d}",
            namespace=NS,
            content=text,
            embedding=[1.0, float(i)],
            tier=tier,
            pinned=pinned,
            do_not_inject=forgotten,
            created_at=T0 + timedelta(minutes=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i, (text, tier, pinned, forgotten) in enumerate(spec)
    ]


def _ids(found: list[ScoredMemory]) -> list[tuple[str, float]]:
    return [(s.memory.id, round(s.score, 9)) for s in found]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=rows,
    query=texts,
    k_active=st.integers(1, 6),
    k_cold=st.integers(1, 6),
    include_forgotten=st.booleans(),
    pinned=st.sampled_from([None, True, False]),
)
def test_the_cold_phase_answers_what_a_search_of_cold_alone_answers(
    spec: list[tuple[str, Tier, bool, bool]],
    query: str,
    k_active: int,
    k_cold: int,
    include_forgotten: bool,
    pinned: bool | None,
) -> None:
    filters = SearchFilter(include_forgotten=include_forgotten, pinned=pinned)

    async def run(path: Path) -> None:
        store = await SQLiteMemoryStore.open(path)
        try:
            await store.put_many(NS, _memories(spec))
            active = await store.lexical_search(
                NS, query, tiers=ACTIVE, k=k_active, filters=filters
            )
            cold = await store.lexical_search(NS, query, tiers=COLD, k=k_cold, filters=filters)
            again = await store.lexical_search(NS, query, tiers=ACTIVE, k=k_active, filters=filters)
        finally:
            await store.close()
        alone = await SQLiteMemoryStore.open(path)  # nothing read before
        try:
            want_cold = await alone.lexical_search(NS, query, tiers=COLD, k=k_cold, filters=filters)
        finally:
            await alone.close()
        assert _ids(cold) == _ids(want_cold)
        assert _ids(again) == _ids(active)
        assert all(s.memory.tier is Tier.COLD for s in cold)

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp) / "a.db"))


async def test_the_cold_phase_reads_no_row_twice(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        # "kiwi" in 24 of 60 texts (an informative word), in every tier
        batch = _memories(
            [
                (
                    "kiwi " * (1 + i % 3) + WORDS[i % 4] if i % 5 < 2 else WORDS[i % 4],
                    list(Tier)[i % 3],
                    False,
                    False,
                )
                for i in range(60)
            ]
        )
        await store.put_many(NS, batch)
        with traced(store) as statements:
            await store.lexical_search(NS, "kiwi", tiers=ACTIVE, k=4)
            first = len(statements)
            cold = await store.lexical_search(NS, "kiwi", tiers=COLD, k=3)
        row_reads = [s for s in statements[first:] if "CROSS JOIN memories" in s]
        assert row_reads == []  # before: the batches were read again for COLD
        assert len(cold) == 3
    finally:
        await store.close()


async def test_a_first_batch_that_passes_is_read_once(tmp_path: Path) -> None:
    """When the best k matches all pass the tier and filters (every match is in the
    searched tiers), the batch that checked them is the answer: one read of the rows
    (a second read of the same k rows by pk cost k more seeks at 1M memories)."""
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        spec = [(f"kiwi {WORDS[i % 4]}", Tier.HOT, False, False) for i in range(12)]
        spec += [(WORDS[i % 4], Tier.HOT, False, False) for i in range(30)]
        await store.put_many(NS, _memories(spec))
        with traced(store) as statements:
            found = await store.lexical_search(NS, "kiwi", tiers=ACTIVE, k=5)
        assert len(found) == 5
        assert all("kiwi" in s.memory.content for s in found)
        row_reads = [s for s in statements if "memories AS m" in s]
        assert len(row_reads) == 1
    finally:
        await store.close()
