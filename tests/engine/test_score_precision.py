"""Which cosines a search asks its store for: a recall's and a search's ranking fuse the
cosine with other signals and take an index's (`exact_scores=False`, within ~1e-3 of
the exact one, which spares the embedded store reading float32 vectors); `explain`
shows each term and asks for the exact one."""

from __future__ import annotations

import pytest

from tiered_memory import TieredMemory


@pytest.fixture
def asked(mem: TieredMemory, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The `exact_scores` of each vector search the engine asks its store for."""
    seen: list[bool] = []
    store = mem.aio.store
    search = store.vector_search

    async def spy(*args: object, **kwargs: object) -> object:
        seen.append(bool(kwargs.get("exact_scores", True)))
        return await search(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "vector_search", spy)
    return seen


def test_recall_and_search_rank_on_the_index_s_cosines(
    mem: TieredMemory, asked: list[bool]
) -> None:
    mem.add("the wedding was in Lisbon, in June", namespace="ns")
    mem.recall("where was the wedding", namespace="ns", record_use=False)
    mem.search("where was the wedding", namespace="ns")
    assert asked
    assert not any(asked)


def test_explain_asks_for_exact_cosines(mem: TieredMemory, asked: list[bool]) -> None:
    memory = mem.add("the wedding was in Lisbon, in June", namespace="ns")
    mem.explain(memory.id, query="where was the wedding", namespace="ns")
    assert asked
    assert all(asked)
