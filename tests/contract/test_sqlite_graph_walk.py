"""A big HNSW graph is walked on another thread (`VectorTable.walk_for`, `GraphWalk`):
faiss releases the GIL while it walks, so the event loop goes on (a recall's lexical
phase). The answers are those of a walk on the spot, and a write that lands while the
walk runs is not missed: the walk stands only for the file it was prepared on.
`WALK_OFF_LOOP_ROWS` is lowered so that test data takes that path."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.contract.test_sqlite_ann import _memories as _ann_memories
from tests.contract.test_sqlite_ann import _queries
from tiered_memory.backends.sqlite import ann, vector_table
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import LIVE_TIERS, Memory
from tiered_memory.ports import SearchFilter

NS = "walk"

pytestmark = pytest.mark.skipif(
    not ann.available(), reason="faiss (the ann extra) is not installed"
)


def _memories(n: int, start: int = 0) -> list[Memory]:
    return _ann_memories(n, start=start, seed=start, ns=NS)


async def _search(store: SQLiteMemoryStore, query: np.ndarray) -> list[tuple[str, float]]:
    found = await store.vector_search(NS, query, tiers=LIVE_TIERS, k=5, exact_scores=False)
    return [(s.memory.id, s.score) for s in found]


@pytest.fixture
async def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SQLiteMemoryStore:
    monkeypatch.setattr(ann, "FOLD_ROWS", 64)  # the rows reach the graph, not only the buffer
    opened = await SQLiteMemoryStore.open(tmp_path / "a.db", ann_min_rows=50)
    await opened.put_many(NS, _memories(300))
    await opened.vector_search(NS, _queries()[0], tiers=LIVE_TIERS, k=5)  # builds the index
    await opened.settle_vector_index(NS)
    assert opened._vectors._anns[NS].graph_rows == 300
    yield opened
    await opened.close()


def _walks_on(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lower the threshold; returns the threads each walk ran on."""
    monkeypatch.setattr(vector_table, "WALK_OFF_LOOP_ROWS", 1)
    threads: list[int] = []
    run = vector_table.GraphWalk.run

    def spy(walk: vector_table.GraphWalk) -> None:
        threads.append(threading.get_ident())
        run(walk)

    monkeypatch.setattr(vector_table.GraphWalk, "run", spy)
    return threads


async def test_a_big_graph_is_walked_off_the_loop_with_the_same_answers(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store._vectors._graph_candidates = None  # no answer kept from the fixture's search
    on_the_spot = [await _search(store, q) for q in _queries()]
    threads = _walks_on(monkeypatch)
    store._vectors._graph_candidates = None  # nor from the searches above
    walked = [await _search(store, q) for q in _queries()]
    assert walked == on_the_spot
    assert len(threads) == len(_queries())
    assert threading.get_ident() not in threads


async def test_a_small_graph_is_walked_on_the_spot(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _walks_on(monkeypatch)
    monkeypatch.setattr(vector_table, "WALK_OFF_LOOP_ROWS", 301)
    await _search(store, _queries()[0])
    assert threads == []  # a hop to a thread would cost more than it saves


async def test_the_event_loop_runs_other_tasks_during_the_walk(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _walks_on(monkeypatch)
    other_task_ran = threading.Event()
    run = vector_table.GraphWalk.run

    def waiting_walk(walk: vector_table.GraphWalk) -> None:
        # a walk on the loop's thread would wait here for a task that cannot run
        assert other_task_ran.wait(timeout=5)
        run(walk)

    monkeypatch.setattr(vector_table.GraphWalk, "run", waiting_walk)

    async def other_task() -> None:
        other_task_ran.set()

    found, _ = await asyncio.gather(_search(store, _queries()[0]), other_task())
    assert len(found) == 5


async def test_a_write_during_the_walk_is_found(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _walks_on(monkeypatch)
    query = _queries()[1]  # not the fixture's query: no kept candidates answer it
    written = threading.Event()
    run = vector_table.GraphWalk.run
    used: list[bool] = []
    result_for = vector_table.GraphWalk.result_for

    def waiting_walk(walk: vector_table.GraphWalk) -> None:
        assert written.wait(timeout=5)  # the walk sees the file before the write
        run(walk)

    def spy_result(walk: vector_table.GraphWalk, *args: object) -> object:
        found = result_for(walk, *args)  # type: ignore[arg-type]
        used.append(found is not None)
        return found

    monkeypatch.setattr(vector_table.GraphWalk, "run", waiting_walk)
    monkeypatch.setattr(vector_table.GraphWalk, "result_for", spy_result)
    twin = _memories(1, start=1000)[0]
    twin.embedding = [float(x) for x in query]  # the best match there can be

    async def write() -> None:
        await store.put_many(NS, [twin])
        written.set()

    found, _ = await asyncio.gather(_search(store, query), write())
    assert len(threads) == 1  # the walk ran, and the write landed while it waited
    assert found[0][0] == twin.id
    assert found[0][1] == pytest.approx(1.0, abs=ann.FLOAT16_ERROR)
    assert used == [False]  # prepared on the file before the write: searched again


async def test_an_exact_search_never_walks(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _walks_on(monkeypatch)
    exact = SearchFilter(exact=True)
    await store.vector_search(NS, _queries()[0], tiers=LIVE_TIERS, k=5, filters=exact)
    assert threads == []
