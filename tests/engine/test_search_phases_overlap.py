"""A search phase's vector and lexical searches run concurrently
(`Retriever._search_tiers`): a remote store answers both at once, and the embedded one
walks a big HNSW graph on another thread meanwhile. The hits join the pool in the same
order as before, and a failure of either search is raised, never left unobserved."""

from __future__ import annotations

import asyncio

import pytest

from tiered_memory import AsyncTieredMemory
from tiered_memory.errors import BackendUnavailableError


async def test_the_lexical_search_runs_while_the_vector_search_waits(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await amem.add("the wedding was in Lisbon, in June", namespace="ns")
    store = amem.store
    vector_search, lexical_search = store.vector_search, store.lexical_search
    lexical_began = asyncio.Event()

    async def slow_vector(*args: object, **kwargs: object) -> object:
        # one after the other, the lexical search would begin only after this returned
        await asyncio.wait_for(lexical_began.wait(), timeout=5)
        return await vector_search(*args, **kwargs)  # type: ignore[arg-type]

    async def lexical(*args: object, **kwargs: object) -> object:
        lexical_began.set()
        return await lexical_search(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "vector_search", slow_vector)
    monkeypatch.setattr(store, "lexical_search", lexical)
    injection = await amem.recall("where was the wedding", namespace="ns", record_use=False)
    assert [h.memory.content for h in injection.items] == ["the wedding was in Lisbon, in June"]


async def test_a_failing_search_fails_the_recall_after_both_ended(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await amem.add("the wedding was in Lisbon, in June", namespace="ns")
    store = amem.store
    vector_search = store.vector_search
    ended: list[str] = []

    async def vector(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(0.05)  # still running when the lexical search fails
        found = await vector_search(*args, **kwargs)  # type: ignore[arg-type]
        ended.append("vector")
        return found

    async def failing_lexical(*args: object, **kwargs: object) -> object:
        raise BackendUnavailableError("the lexical index is gone")

    monkeypatch.setattr(store, "vector_search", vector)
    monkeypatch.setattr(store, "lexical_search", failing_lexical)
    with pytest.raises(BackendUnavailableError, match="lexical index is gone"):
        await amem.recall("where was the wedding", namespace="ns", record_use=False)
    assert ended == ["vector"]  # awaited to its end, not left running behind the error


async def test_the_vector_search_s_failure_comes_first(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await amem.add("the wedding was in Lisbon, in June", namespace="ns")
    store = amem.store

    async def failing_vector(*args: object, **kwargs: object) -> object:
        raise BackendUnavailableError("vectors")

    async def failing_lexical(*args: object, **kwargs: object) -> object:
        raise BackendUnavailableError("words")

    monkeypatch.setattr(store, "vector_search", failing_vector)
    monkeypatch.setattr(store, "lexical_search", failing_lexical)
    with pytest.raises(BackendUnavailableError, match="vectors"):
        await amem.search("where was the wedding", namespace="ns")
