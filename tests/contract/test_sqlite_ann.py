"""The HNSW index of large namespaces (`backends.sqlite.ann`): same answers as a scan,
kept consistent with the file through every kind of write (this store's, another
connection's, rolled back, after a save), persisted beside the file, and exact search
still available per call. A tiny `ann_min_rows` puts small test data on that path."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from tests.ann_mirror import assert_mirrors
from tests.blas import blas_threads_of
from tests.sql_trace import traced
from tiered_memory.backends.sqlite import ann, graph_candidates, hnsw, vector_table
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import LIVE_TIERS, Memory, Tier
from tiered_memory.ports import MemoryPatch, SearchFilter

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "ann"
DIM = 16
EXACT = SearchFilter(exact=True)
ANY = SearchFilter()

pytestmark = pytest.mark.skipif(
    not ann.available(), reason="faiss (the ann extra) is not installed"
)


@pytest.fixture(autouse=True, params=["buffered", "folding"])
def fold_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: new rows stay in the exact buffer (no fold), or a background
    thread folds them into the graph a few rows at a time while the test runs."""
    if request.param == "buffered":
        monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    else:
        monkeypatch.setattr(ann, "FOLD_ROWS", 32)
        monkeypatch.setattr(ann, "FOLD_CHUNK", 8)
    return str(request.param)


def _index(store: SQLiteMemoryStore) -> ann.AnnIndex:
    return store._vectors._anns[NS]


def _memories(n: int, start: int = 0, seed: int = 0, ns: str = NS) -> list[Memory]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    return [
        Memory(
            id=f"m{start + i:05d}",
            namespace=ns,
            content=f"memory number {start + i}",
            embedding=[float(x) for x in vectors[i]],
            created_at=T0 + timedelta(minutes=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(n)
    ]


def _with_copies(n: int) -> list[Memory]:
    """`_memories(n)` where rows 1-5 of every 50 are exact copies of the 50th's vector:
    ties at every rank."""
    batch = _memories(n)
    for i, memory in enumerate(batch):
        if i % 50 < 6:
            memory.embedding = batch[i - i % 50].embedding
    return batch


def _queries(n: int = 20, seed: int = 99) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


async def _search(
    store: SQLiteMemoryStore,
    query: np.ndarray,
    *,
    tiers: frozenset[Tier] = LIVE_TIERS,
    k: int = 5,
    filters: SearchFilter = ANY,
) -> list[tuple[str, float]]:
    found = await store.vector_search(NS, query, tiers=tiers, k=k, filters=filters)
    return [(s.memory.id, s.score) for s in found]


async def _same_as_scan(store: SQLiteMemoryStore, **kwargs: object) -> None:
    """Every query answers what a scan answers (small data: the graph finds them all)."""
    for q in _queries():
        exact_filters = SearchFilter(exact=True, **kwargs)  # type: ignore[arg-type]
        approximate = SearchFilter(**kwargs)  # type: ignore[arg-type]
        got = await _search(store, q, filters=approximate)
        want = await _search(store, q, filters=exact_filters)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)


async def _open(path: Path, min_rows: int | None = 50) -> SQLiteMemoryStore:
    return await SQLiteMemoryStore.open(path, ann_min_rows=min_rows)


async def test_a_large_namespace_is_searched_through_the_index_not_the_matrices(
    tmp_path: Path,
) -> None:
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))
        await _search(store, _queries()[0])
        assert NS in store._vectors._anns  # the index answered
        assert list(store._vectors.cache) == []  # no float32 matrix was loaded
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_a_small_namespace_stays_exact(tmp_path: Path) -> None:
    store = await _open(tmp_path / "a.db", min_rows=1000)
    try:
        await store.put_many(NS, _memories(300))
        await _search(store, _queries()[0])
        assert store._vectors._anns == {}
        assert list(store._vectors.cache)  # scanned the cached matrices
    finally:
        await store.close()


async def test_the_batched_search_uses_the_index_and_matches_a_scan(tmp_path: Path) -> None:
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))
        queries = _queries()
        approximate = await store.vector_search_many(NS, queries, tiers=LIVE_TIERS, k=4)
        assert NS in store._vectors._anns
        assert list(store._vectors.cache) == []
        exact = await store.vector_search_many(NS, queries, tiers=LIVE_TIERS, k=4, filters=EXACT)
        assert [[i for i, _ in r] for r in approximate] == [[i for i, _ in r] for r in exact]
    finally:
        await store.close()


async def test_tier_moves_flags_deletes_and_restores_keep_it_consistent(tmp_path: Path) -> None:
    store = await _open(tmp_path / "a.db")
    try:
        batch = _memories(300)
        await store.put_many(NS, batch)
        await _search(store, _queries()[0])  # built
        cold = [m.id for m in batch[:150]]
        await store.set_tier(NS, cold, Tier.COLD, T0)
        for q in _queries():
            hot = await _search(store, q, tiers=frozenset({Tier.HOT}))
            assert not {i for i, _ in hot} & set(cold)
            want = await _search(store, q, tiers=frozenset({Tier.HOT}), filters=EXACT)
            assert [i for i, _ in hot] == [i for i, _ in want]
        await store.patch_many(NS, [m.id for m in batch[150:200]], MemoryPatch(do_not_inject=True))
        await _same_as_scan(store)
        await store.delete_many(NS, [m.id for m in batch[200:260]])
        await _same_as_scan(store)
        # the deleted rows' pks are the largest: new rows take them again (other vectors)
        await store.put_many(NS, _memories(60, start=1000, seed=5))
        await _same_as_scan(store)
        await _same_as_scan(store, include_forgotten=True)
    finally:
        await store.close()


async def test_a_rolled_back_write_leaves_no_row_in_the_index(tmp_path: Path) -> None:
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))

        async def write_then_fail() -> None:
            async with store.transaction():
                await store.put_many(NS, _memories(40, start=500, seed=3))
                await _search(store, _queries()[0])  # caught up inside the transaction
                raise RuntimeError("abort")

        with pytest.raises(RuntimeError):
            await write_then_fail()
        # the rolled-back rows' pks go to other vectors now
        await store.put_many(NS, _memories(40, start=700, seed=4))
        await _same_as_scan(store)
        ids = {i for q in _queries() for i, _ in await _search(store, q, k=20)}
        assert not any("m005" in i for i in ids)
    finally:
        await store.close()


async def test_another_connection_s_writes_are_seen(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    first = await _open(path)
    second = await _open(path, min_rows=None)  # writes without any index
    try:
        await first.put_many(NS, _memories(300))
        await _search(first, _queries()[0])
        await second.delete_many(NS, [f"m{i:05d}" for i in range(250, 300)])
        await second.put_many(NS, _memories(80, start=2000, seed=8))
        await second.set_tier(NS, [f"m{i:05d}" for i in range(0, 100)], Tier.WARM, T0)
        await _same_as_scan(first)
    finally:
        await second.close()
        await first.close()


async def test_the_index_is_saved_on_close_and_loaded_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.db"
    store = await _open(path)
    await store.put_many(NS, _memories(300))
    expected = [await _search(store, q, filters=EXACT) for q in _queries()]
    await _search(store, _queries()[0])
    await store.close()
    assert list((tmp_path / "a.db.ann").glob("*.hnsw"))

    def no_build(dimension: int) -> ann.AnnIndex:
        raise AssertionError("the saved index should have been loaded")

    monkeypatch.setattr(ann.AnnIndex, "empty", staticmethod(no_build))
    store = await _open(path)
    try:
        got = [await _search(store, q) for q in _queries()]
        assert [[i for i, _ in row] for row in got] == [[i for i, _ in row] for row in expected]
    finally:
        await store.close()


async def test_a_graph_saved_by_the_library_before_is_built_again_and_dropped(
    tmp_path: Path,
) -> None:
    """Stores saved their graphs with usearch before faiss: such a file is never read
    (another format), the graph is built from the file instead, and the old file goes
    with the namespace's next save."""
    path = tmp_path / "a.db"
    store = await _open(path)
    await store.put_many(NS, _memories(300))
    expected = [await _search(store, q, filters=EXACT) for q in _queries()]
    await store.close()
    folder = tmp_path / "a.db.ann"
    folder.mkdir(exist_ok=True)
    for saved in folder.iterdir():
        saved.unlink()
    old = folder / f"{ann.digest_of(NS)}.0.300.usearch"
    old.write_bytes(b"usearch graph of an earlier release")
    store = await _open(path)
    try:
        got = [await _search(store, q) for q in _queries()]
        assert [[i for i, _ in row] for row in got] == [[i for i, _ in row] for row in expected]
    finally:
        await store.close()
    assert not old.exists()
    assert list(folder.glob("*.hnsw"))


async def test_a_graph_mostly_of_removed_rows_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removed rows stay in a faiss graph as tombstones; once they outnumber the live
    ones (and `REBUILD_REMOVED`), the catch-up starts a build over, and searches stay
    those of a scan throughout."""
    monkeypatch.setattr(ann, "REBUILD_REMOVED", 50)
    store = await _open(tmp_path / "a.db")
    try:
        await _folded(store, _memories(300))
        await store.delete_many(NS, [f"m{i:05d}" for i in range(0, 140)])
        await _same_as_scan(store)
        assert _index(store)._index.removed == 140  # fewer than the 160 live: kept
        await store.delete_many(NS, [f"m{i:05d}" for i in range(140, 200)])
        await _same_as_scan(store)
        index = _index(store)
        assert index._index.removed == 0
        assert index.size == 100
        index.fold()
        assert index.graph_rows == 100
        assert index.buffered == 0
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_a_saved_index_older_than_the_file_catches_up(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await _open(path)
    await store.put_many(NS, _memories(300))
    await _search(store, _queries()[0])
    await store.close()  # saved
    other = await _open(path, min_rows=None)  # a writer that never saves the index
    await other.delete_many(NS, [f"m{i:05d}" for i in range(200, 300)])
    await other.put_many(NS, _memories(100, start=3000, seed=9))  # the freed pks again
    await other.close()
    store = await _open(path)
    try:
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_a_saved_index_ahead_of_the_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await _open(path)
    await store.put_many(NS, _memories(300))
    await store.delete_many(NS, ["m00000"])  # seq 1
    await _search(store, _queries()[0])
    await store.close()
    # the file as it was before any deletion (an older copy restored over it)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM vector_deletes")
    store = await _open(path)
    try:
        await store.put_many(NS, _memories(20, start=4000, seed=2))
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_clear_removes_the_saved_index(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await _open(path)
    try:
        await store.put_many(NS, _memories(300))
        await _search(store, _queries()[0])
        await store.close()
        store = await _open(path)
        await store.clear(NS)
        assert not list((tmp_path / "a.db.ann").glob("*.hnsw"))
        await store.put_many(NS, _memories(300, seed=11))
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_filters_that_few_candidates_pass_fall_back_to_a_scan(tmp_path: Path) -> None:
    store = await _open(tmp_path / "a.db")
    try:
        batch = _memories(300)
        await store.put_many(NS, batch)
        await store.patch_many(NS, [m.id for m in batch[:3]], MemoryPatch(pinned=True))
        await _same_as_scan(store, pinned=True)
        await _same_as_scan(store, ids=frozenset({"m00007", "m00100"}))
    finally:
        await store.close()


async def test_rows_taking_pks_freed_before_the_index_was_built_are_found(
    tmp_path: Path,
) -> None:
    """pks 98 and 99 are freed before the build, the top (100) after it: new rows take
    98, 99 and 100 again, below the top the index was built with."""
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(100))  # pks 1..100
        await store.delete_many(NS, ["m00097", "m00098"])
        await _search(store, _queries()[0])  # built, top 100
        await store.delete_many(NS, ["m00099"])
        fresh = _memories(3, start=500, seed=21)
        await store.put_many(NS, fresh)  # pks 98, 99, 100
        for memory in fresh:
            assert memory.embedding is not None
            vector = np.asarray(memory.embedding, dtype=np.float32)
            assert (await _search(store, vector, k=1))[0][0] == memory.id
    finally:
        await store.close()


# -- the delta buffer ------------------------------------------------------------------


def _vector(memory: Memory) -> np.ndarray:
    assert memory.embedding is not None
    return np.asarray(memory.embedding, dtype=np.float32)


async def _folded(store: SQLiteMemoryStore, batch: list[Memory]) -> ann.AnnIndex:
    """Store `batch`, search once, fold every row into the graph now."""
    await store.put_many(NS, batch)
    await _search(store, _queries()[0])
    index = _index(store)
    index.fold()
    assert index.buffered == 0
    assert index.graph_rows == len(batch)
    return index


async def test_a_row_just_written_is_found_before_any_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    store = await _open(tmp_path / "a.db")
    try:
        index = await _folded(store, _memories(300))
        fresh = _memories(5, start=900, seed=13)
        await store.put_many(NS, fresh)
        for memory in fresh:
            assert (await _search(store, _vector(memory), k=1))[0][0] == memory.id
        assert index.buffered == 5
        assert index.graph_rows == 300
        many = await store.vector_search_many(
            NS, np.stack([_vector(m) for m in fresh]), tiers=LIVE_TIERS, k=1
        )
        assert [r[0][0] for r in many] == [m.id for m in fresh]
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_deletes_tier_moves_and_restores_of_buffered_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    store = await _open(tmp_path / "a.db")
    try:
        index = await _folded(store, _memories(300))
        fresh = _memories(100, start=1000, seed=6)
        await store.put_many(NS, fresh)
        await _search(store, _queries()[0])
        assert index.buffered == 100
        ids = [m.id for m in fresh]
        await store.delete_many(NS, ids[:10] + ids[-5:])  # the buffer's largest pks too
        await _same_as_scan(store)
        assert index.buffered == 85
        await store.set_tier(NS, ids[10:50], Tier.COLD, T0)
        for q in _queries():
            hot = await _search(store, q, tiers=frozenset({Tier.HOT}))
            assert not {i for i, _ in hot} & set(ids[10:50])
        await store.set_tier(NS, ids[10:50], Tier.HOT, T0)  # restored
        await store.patch_many(NS, ids[50:60], MemoryPatch(do_not_inject=True))
        await _same_as_scan(store)
        await store.patch_many(NS, ids[50:60], MemoryPatch(do_not_inject=False))
        await _same_as_scan(store)
        again = _memories(5, start=2000, seed=17)  # the freed top pks, other vectors
        await store.put_many(NS, again)
        for memory in again:
            assert (await _search(store, _vector(memory), k=1))[0][0] == memory.id
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_a_fold_keeps_results_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    store = await _open(tmp_path / "a.db")
    try:
        index = await _folded(store, _memories(300))
        await store.put_many(NS, _memories(200, start=1000, seed=7))
        before = [await _search(store, q, k=8) for q in _queries()]
        assert index.buffered == 200
        assert index.fold() == 200
        assert index.buffered == 0
        assert index.graph_rows == 500
        after = [await _search(store, q, k=8) for q in _queries()]
        assert [[i for i, _ in r] for r in after] == [[i for i, _ in r] for r in before]
        assert np.allclose([s for r in after for _, s in r], [s for r in before for _, s in r])
    finally:
        await store.close()


async def test_the_first_search_answers_from_the_buffer_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A namespace without a saved graph is answered at once from the buffer's exact
    scan; the graph is built by the background fold, not by that search."""
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))
        await _same_as_scan(store)
        index = _index(store)
        assert index.graph_rows == 0
        assert index.buffered == 300
        assert not index.folding
        monkeypatch.setattr(ann, "FOLD_ROWS", 100)
        await store.put_many(NS, _memories(1, start=5000, seed=1))
        await _search(store, _queries()[0])  # over the threshold: the folder starts
        index.stop_folding()  # waits for its current step
        assert index.graph_rows + index.buffered == 301
        await _same_as_scan(store)
    finally:
        await store.close()


async def test_a_rolled_back_fold_leaves_no_row_in_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    store = await _open(tmp_path / "a.db")
    try:
        await _folded(store, _memories(300))

        async def write_then_fail() -> None:
            async with store.transaction():
                await store.put_many(NS, _memories(40, start=500, seed=3))
                await _search(store, _queries()[0])  # caught up inside the transaction
                _index(store).fold()  # the uncommitted rows reach the graph
                raise RuntimeError("abort")

        with pytest.raises(RuntimeError):
            await write_then_fail()
        await store.put_many(NS, _memories(40, start=700, seed=4))  # the same pks
        await _same_as_scan(store)
        ids = {i for q in _queries() for i, _ in await _search(store, q, k=20)}
        assert not any("m005" in i for i in ids)
    finally:
        await store.close()


async def test_the_saved_file_holds_the_graph_and_the_buffer_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    path = tmp_path / "a.db"
    store = await _open(path)
    await _folded(store, _memories(300))
    await store.put_many(NS, _memories(50, start=1000, seed=8))
    await _search(store, _queries()[0])
    await store.close()
    saved = list((tmp_path / "a.db.ann").glob("*.hnsw"))
    assert [p.name.split(".")[2] for p in saved] == ["300"]  # the graph's top pk
    store = await _open(path)
    try:
        await _same_as_scan(store)
        index = _index(store)
        assert index.graph_rows == 300
        assert index.buffered == 50
    finally:
        await store.close()


async def test_the_batched_search_ranks_as_one_search_per_query(tmp_path: Path) -> None:
    """`vector_search_many` (add_many's deduplication and auto-linking) ranks each
    query's candidates as `vector_search` does: the same ids in the same order, ties
    (exact copies under other ids) broken by id, and a query that too few candidates
    pass (a rare filter) asks again on its own, as a single search would."""
    store = await _open(tmp_path / "a.db")
    try:
        batch = _with_copies(300)
        for i, memory in enumerate(batch):
            memory.pinned = i % 11 == 0
            if i % 3 == 0:
                memory.tier = Tier.WARM
        await store.put_many(NS, batch)
        queries = np.concatenate([_queries(30), _vector(batch[50])[None, :]])
        for tiers, filters in [
            (LIVE_TIERS, ANY),
            (LIVE_TIERS, SearchFilter(pinned=True)),
            (frozenset({Tier.HOT}), ANY),
        ]:
            many = await store.vector_search_many(NS, queries, tiers=tiers, k=4, filters=filters)
            for q, got in zip(queries, many, strict=True):
                one = await store.vector_search(NS, q, tiers=tiers, k=4, filters=filters)
                assert [i for i, _ in got] == [s.memory.id for s in one]
                assert np.allclose([s for _, s in got], [s.score for s in one], atol=1e-6)
        assert NS in store._vectors._anns  # the graph answered, not a scan
    finally:
        await store.close()


def _log_rows(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT seq FROM vector_deletes ORDER BY seq")]


def _mirrors_the_file(store: SQLiteMemoryStore, path: Path) -> None:
    assert_mirrors(_index(store), path, NS)


async def test_the_delete_log_is_pruned_to_what_every_index_applied(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await _open(path)
    try:
        await store.put_many(NS, _memories(300))
        await _search(store, _queries()[0])
        await store.delete_many(NS, [f"m{i:05d}" for i in range(40)])
        await _search(store, _queries()[0])  # applied by this process's index
        assert len(_log_rows(path)) == 40
        await store.checkpoint()
        assert _log_rows(path) == [40]  # the last entry stays: seq keeps rising
        await store.delete_many(NS, ["m00100"])
        assert _log_rows(path) == [40, 41]
        await _same_as_scan(store)
        _mirrors_the_file(store, path)
    finally:
        await store.close()
    store = await _open(path)  # the saved file (seq 41) is past the pruned horizon
    try:
        await _same_as_scan(store)
        _mirrors_the_file(store, path)
    finally:
        await store.close()


async def test_nothing_is_pruned_while_no_index_exists(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = await _open(path, min_rows=None)  # exact search only: no index to consult
    try:
        await store.put_many(NS, _memories(100))
        await store.delete_many(NS, [f"m{i:05d}" for i in range(10)])
        await store.checkpoint()
        assert len(_log_rows(path)) == 10  # another process may be building one
    finally:
        await store.close()


async def _behind_a_saved_index(path: Path, deleted: int) -> SQLiteMemoryStore:
    """A store whose index has applied no deletion, while another process deleted the
    `deleted` largest pks, added rows that took them again, and saved its index."""
    behind = await _open(path)
    await behind.put_many(NS, _memories(300))
    await _search(behind, _queries()[0])
    other = await _open(path)
    await other.delete_many(NS, [f"m{i:05d}" for i in range(300 - deleted, 300)])
    await other.put_many(NS, _memories(10, start=5000, seed=7))
    await _search(other, _queries()[0])
    await other.close()  # saves its index at seq `deleted`
    return behind


async def test_an_index_behind_the_pruned_log_reloads_the_saved_file(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    behind = await _behind_a_saved_index(path, deleted=10)  # saved at seq 10
    try:
        pruner = await _open(path)
        await pruner.checkpoint()
        await pruner.close()
        assert _log_rows(path) == [10]
        await _same_as_scan(behind)
        _mirrors_the_file(behind, path)  # not the old vectors of the reused pks
    finally:
        await behind.close()


async def test_a_log_pruned_between_the_check_and_the_catch_up_reloads_the_saved_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process may prune the delete log after an index checked it had not
    missed anything and before it read the entries: reading only
    what was left, it kept rows deleted meanwhile and saved them as live (the
    concurrent writers of tests/reliability, now and then on 2 busy cores). The
    catch-up reads the log's start with the entries, in one statement."""
    path = tmp_path / "a.db"
    behind = await _behind_a_saved_index(path, deleted=20)  # saved at seq 20
    try:
        real = ann.log_state
        pruned: list[int] = []

        def state_then_pruned(conn: sqlite3.Connection) -> tuple[int, int, int]:
            state = real(conn)
            if not pruned:  # once: the pruner commits right after the check
                with sqlite3.connect(path) as pruner:
                    pruned.append(
                        pruner.execute("DELETE FROM vector_deletes WHERE seq <= 19").rowcount
                    )
            return state

        monkeypatch.setattr(ann, "log_state", state_then_pruned)
        await _search(behind, _queries()[1])
        assert pruned == [19]
        assert _log_rows(path) == [20]
        await _same_as_scan(behind)
        _mirrors_the_file(behind, path)  # no deleted row, no old vector of a reused pk
    finally:
        await behind.close()


async def test_cosines_of_the_graph_s_candidates_come_without_reading_the_file(
    tmp_path: Path,
) -> None:
    """A recall asks for the cosines of its lexical hits right after the vector search
    for the same query: those among the graph's candidates come from the candidates'
    exact scores, the others from the file, and all equal a fresh computation."""
    store = await _open(tmp_path / "a.db")
    try:
        memories = _memories(300)
        await store.put_many(NS, memories)
        query = _queries()[0]
        found = await _search(store, query, k=5)  # reads 2k = 10 candidates
        near = [i for i, _ in found]
        far = [m.id for m in memories if m.id not in near][:3]
        with traced(store) as statements:
            cached = await store.cosines(NS, query, near)
            mixed = await store.cosines(NS, query, near + far)
        reads = [s for s in statements if "memory_vectors" in s]
        assert len(reads) == 1  # the far ones only, once
        by_id = {m.id: m for m in memories}
        q = query / np.linalg.norm(query)
        for memory_id, cosine in mixed.items():
            v = _vector(by_id[memory_id])
            assert cosine == pytest.approx(float(v @ q / np.linalg.norm(v)), abs=1e-5)
        assert cached == {i: mixed[i] for i in near}
        await store.put_many(NS, _memories(1, start=900, seed=5))  # the file changed
        with traced(store) as statements:
            await store.cosines(NS, query, near)
        assert any("memory_vectors" in s for s in statements)  # read again, not kept
    finally:
        await store.close()


async def test_cosines_of_lexical_hits_are_read_by_the_pk_the_search_just_read(
    tmp_path: Path,
) -> None:
    """The lexical search reads its hits by pk; without the namespace's index at hand,
    their cosines are then read by that pk, not through the (namespace, id) index. A
    pk that now holds another memory (the hit was deleted and its pk reused) is no
    answer: that id is read by id, and a deleted memory has no cosine."""
    store = await _open(tmp_path / "a.db")
    try:
        memories = _memories(300)
        await store.put_many(NS, memories)
        query = _queries()[0]
        words = " ".join(str(i) for i in range(0, 200, 5))  # one memory each
        hits = await store.lexical_search(NS, words, tiers=LIVE_TIERS, k=40)
        ids = [h.memory.id for h in hits]
        assert len(ids) == 40
        assert NS not in store._vectors._anns  # no vector search loaded it yet
        with traced(store) as statements:
            cosines = await store.cosines(NS, query, ids)
        reads = [s for s in statements if "memory_vectors" in s]
        assert reads
        assert all("m.id IN" not in s for s in reads)
        by_id = {m.id: m for m in memories}
        q = query / np.linalg.norm(query)
        assert set(cosines) == set(ids)
        for memory_id, cosine in cosines.items():
            v = _vector(by_id[memory_id])
            assert cosine == pytest.approx(float(v @ q / np.linalg.norm(v)), abs=1e-5)

        last = memories[-1].id  # the highest pk: SQLite hands it out again
        hits = await store.lexical_search(NS, "memory number 299", tiers=LIVE_TIERS, k=5)
        assert last in [h.memory.id for h in hits]
        await store.delete_many(NS, [last])
        newcomer = _memories(1, start=777, seed=3)[0]
        await store.put_many(NS, [newcomer])
        with store.database.read() as conn:
            pk = conn.execute("SELECT pk FROM memories WHERE id = ?", (newcomer.id,)).fetchone()
            assert store._vectors.locator.pks(NS, [last]) == {last: pk[0]}  # a stale hint
        again = await store.cosines(NS, query, [last, newcomer.id])
        assert last not in again
        v = _vector(newcomer)
        assert again[newcomer.id] == pytest.approx(float(v @ q / np.linalg.norm(v)), abs=1e-5)
    finally:
        await store.close()


async def test_cosines_of_lexical_hits_come_from_the_index_while_the_file_is_unchanged(
    tmp_path: Path,
) -> None:
    """After a vector search (as in a recall), the cosines of lexical hits the graph
    search did not return come from the index's rows, without reading the file,
    within the float16 error of the exact ones. Once anyone writes, the rows the
    lexical search read may have changed: the cosines are read from the file again,
    exact, and a deleted hit gets none."""
    store = await _open(tmp_path / "a.db")
    try:
        memories = _memories(300)
        await store.put_many(NS, memories)
        query = _queries()[0]
        await _search(store, query, k=5)  # loads the index, as a recall's first phase
        words = " ".join(str(i) for i in range(0, 200, 5))
        hits = await store.lexical_search(NS, words, tiers=LIVE_TIERS, k=40)
        ids = [h.memory.id for h in hits]
        with traced(store) as statements:
            cosines = await store.cosines(NS, query, ids)
        assert not [s for s in statements if "memory_vectors" in s]
        by_id = {m.id: m for m in memories}
        q = query / np.linalg.norm(query)
        assert set(cosines) == set(ids)
        for memory_id, cosine in cosines.items():
            v = _vector(by_id[memory_id])
            exact = float(v @ q / np.linalg.norm(v))
            assert cosine == pytest.approx(exact, abs=ann.FLOAT16_ERROR)

        gone = ids[0]
        await store.delete_many(NS, [gone])
        with traced(store) as statements:
            again = await store.cosines(NS, query, ids)
        assert [s for s in statements if "memory_vectors" in s]
        assert set(again) == set(ids) - {gone}
        for memory_id, cosine in again.items():
            v = _vector(by_id[memory_id])
            assert cosine == pytest.approx(float(v @ q / np.linalg.norm(v)), abs=1e-5)
    finally:
        await store.close()


async def test_the_cosines_of_the_last_lexical_hits_survive_a_full_locator(
    tmp_path: Path,
) -> None:
    """The locator is bounded; a lexical search whose notes filled it must still find
    its own hits' rows there. It was cleared mid-note, which sent one recall in ~30
    at 1M memories to read its lexical hits' vectors from the file (20-80 ms)."""
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))
        query = _queries()[0]
        await _search(store, query, k=5)
        store._vectors.locator._capacity = 50  # a few searches fill it
        for start in range(4):  # the fourth note crosses 50 after 30 of its 40 rows
            words = " ".join(str(i) for i in range(start, 200, 5))
            hits = await store.lexical_search(NS, words, tiers=LIVE_TIERS, k=40)
        ids = [h.memory.id for h in hits]
        assert len(ids) == 40
        other = _queries()[1]  # not the searched one: no graph candidates to take from
        with traced(store) as statements:
            cosines = await store.cosines(NS, other, ids)
        assert set(cosines) == set(ids)
        assert not [s for s in statements if "memory_vectors" in s]
    finally:
        await store.close()


async def test_a_vector_search_reads_its_hits_once_and_never_a_stale_row(
    tmp_path: Path,
) -> None:
    """The hits come from the rows the graph search's candidates were read with: one
    read of `memories`, not a second one by id. Rows read before a write are never
    handed out after it (a scan of the same query after a patch sees the patch)."""
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))
        query = _queries()[0]
        await _search(store, _queries()[1])  # the index is loaded and caught up
        with traced(store) as statements:
            found = await store.vector_search(NS, query, tiers=LIVE_TIERS, k=5)
        assert len(found) == 5
        reads = [s for s in statements if "FROM memories AS m" in s]
        assert len(reads) == 1
        assert all(s.memory.embedding is None for s in found)
        assert [s.memory.id for s in found] == [
            i for i, _ in await _search(store, query, filters=EXACT)
        ]

        hit = found[0].memory.id
        await store.patch_many(NS, [hit], MemoryPatch(importance=0.123))
        again = await store.vector_search(NS, query, tiers=LIVE_TIERS, k=5, filters=EXACT)
        assert {s.memory.id: s.memory.importance for s in again}[hit] == pytest.approx(0.123)
    finally:
        await store.close()


_SMALL_READS = ("key = 'dimension'", "FROM tier_rows", "FROM vector_deletes")


async def test_a_search_for_ranking_reads_no_vector_and_an_exact_one_never_reuses_it(
    tmp_path: Path,
) -> None:
    """`exact_scores=False` (a recall's phases): the candidates' rows are read without
    their float32 vectors, and the scores are the graph's, within its float16 error of
    the exact ones. A later exact search of the same query in the same file reads and
    scores them exactly (the kept set does not answer it); an exact set answers a
    search for ranking without reading anything."""
    store = await _open(tmp_path / "a.db")
    try:
        memories = _memories(300)
        await store.put_many(NS, memories)
        by_id = {m.id: m for m in memories}
        query = _queries()[0]
        q = query / np.linalg.norm(query)
        await _search(store, _queries()[1])  # the index is loaded and caught up
        exact = await _search(store, query, k=10, filters=EXACT)

        with traced(store) as statements:
            ranked = await store.vector_search(
                NS, query, tiers=LIVE_TIERS, k=10, exact_scores=False
            )
        assert [s for s in statements if "FROM memories AS m" in s]
        assert not [s for s in statements if "memory_vectors" in s]
        assert {s.memory.id for s in ranked} == {i for i, _ in exact}
        for hit in ranked:
            v = _vector(by_id[hit.memory.id])
            true = float(v @ q / np.linalg.norm(v))
            assert hit.score == pytest.approx(true, abs=ann.FLOAT16_ERROR)
            assert hit.memory == by_id[hit.memory.id].model_copy(update={"embedding": None})

        with traced(store) as statements:
            again = await _search(store, query, k=10)
        assert [s for s in statements if "memory_vectors" in s]
        assert [i for i, _ in again] == [i for i, _ in exact]
        assert np.allclose([s for _, s in again], [s for _, s in exact], atol=1e-6)

        with traced(store) as statements:
            reused = await store.vector_search(
                NS, query, tiers=LIVE_TIERS, k=10, exact_scores=False
            )
        assert not [s for s in statements if "FROM memories" in s]
        assert [(s.memory.id, s.score) for s in reused] == again
    finally:
        await store.close()


async def _statements_of_search(
    store: SQLiteMemoryStore, query: np.ndarray, tiers: frozenset[Tier]
) -> tuple[list[str], list[tuple[str, float]]]:
    with traced(store) as statements:
        found = await _search(store, query, tiers=tiers)
    return statements, found


async def test_an_unchanged_file_s_small_reads_are_not_repeated_and_a_write_renews_them(
    tmp_path: Path,
) -> None:
    """The dimension, the tier counts and the delete log's position are read once while
    the file is unchanged (`FileMemo`); another connection's write makes the next
    search read them again, and its answer shows the write."""
    path = tmp_path / "a.db"
    store = await _open(path)
    other = await _open(path, min_rows=None)
    try:
        await store.put_many(NS, _memories(300))
        query = _queries()[0]
        await _search(store, query)  # the index is loaded and caught up
        statements, _ = await _statements_of_search(store, _queries()[1], LIVE_TIERS)
        assert not [s for s in statements if any(r in s for r in _SMALL_READS)]
        # the state is asked once: the hits are the rows of the state they ranked in
        assert len([s for s in statements if "data_version" in s]) == 1

        hot = frozenset({Tier.HOT})
        before = await _search(store, query, tiers=hot)
        moved = [i for i, _ in before[:2]]
        await other.set_tier(NS, moved, Tier.WARM, T0)
        statements, after = await _statements_of_search(store, query, hot)
        assert all(any(r in s for s in statements) for r in _SMALL_READS)
        assert not set(moved) & {i for i, _ in after}
        exact = await _search(store, query, tiers=hot, filters=EXACT)
        assert [i for i, _ in after] == [i for i, _ in exact]
        assert np.allclose([s for _, s in after], [s for _, s in exact], atol=1e-5)
    finally:
        await other.close()
        await store.close()


async def _graph_counting_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> tuple[SQLiteMemoryStore, list[Memory], list[int]]:
    """A store of `_with_copies(300)` answered by its graph (folded), and the number of
    candidates each call of `graph_candidates.<reader>` reads from the file."""
    store = await _open(tmp_path / "a.db")
    batch = _with_copies(300)
    await store.put_many(NS, batch)
    await _search(store, _queries(seed=5)[0])
    _index(store).fold()  # the graph answers (the buffer is scanned exactly)
    read: list[int] = []
    real = getattr(graph_candidates, reader)

    def counted(conn: sqlite3.Connection, ns: str, keys: np.ndarray, *rest: object) -> object:
        read.append(int(keys.size))
        return real(conn, ns, keys, *rest)

    monkeypatch.setattr(graph_candidates, reader, counted)
    return store, batch, read


async def test_a_search_reads_the_candidates_that_may_rank_and_the_rest_when_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One search reads from the file only the graph's candidates whose float16 cosine
    could place them among its k best; when the filters or the tiers leave too few of
    those (or a later phase asks for other tiers), it reads the rest. Answers stay a
    scan's, ties at every rank included."""
    store, batch, read = await _graph_counting_reads(tmp_path, monkeypatch, "_read")
    try:
        k = 3
        queries = np.concatenate([_queries(5), _vector(batch[50])[None, :]])
        for n, q in enumerate(queries):
            read.clear()
            got = await _search(store, q, k=k)
            assert len(read) == 1
            assert read[0] < k + vector_table._ANN_EXTRA
            want = await _search(store, q, k=k, filters=EXACT)
            # a scan breaks ties its own way: the same cosines
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
            if n < len(queries) - 1:  # the last one's rows are copies: ties
                assert [i for i, _ in got] == [i for i, _ in want]

        # the best rows hidden: the first read cannot answer, the rest is read
        q = _queries()[0]
        best = [i for i, _ in await _search(store, q, k=k)]
        await store.patch_many(NS, best, MemoryPatch(do_not_inject=True))
        read.clear()
        got = await _search(store, q, k=k)
        assert len(read) == 2
        want = await _search(store, q, k=k, filters=EXACT)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert not set(best) & {i for i, _ in got}
    finally:
        await store.close()


async def test_a_search_for_ranking_reads_the_graph_s_k_best_and_the_rest_when_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`exact_scores=False` ranks on the graph's cosines themselves, so no candidate
    below the k-th of them can rank: one search reads the rows of the graph's k best
    (and of any candidate tied with the k-th), not the float16 error's margin an exact
    search re-scores. When the filters hide some of them it reads the rest. Answers are
    the graph's k best by its own cosines among the rows that pass, ties by id."""
    store, batch, read = await _graph_counting_reads(tmp_path, monkeypatch, "_read_light")
    try:

        async def ranked(q: np.ndarray, k: int) -> list[tuple[str, float]]:
            found = await store.vector_search(NS, q, tiers=LIVE_TIERS, k=k, exact_scores=False)
            return [(s.memory.id, s.score) for s in found]

        with sqlite3.connect(tmp_path / "a.db") as conn:
            id_of = dict(conn.execute("SELECT pk, id FROM memories").fetchall())

        def graph_best(q: np.ndarray, k: int, hidden: frozenset[str]) -> list[tuple[str, float]]:
            unit = (q / np.linalg.norm(q))[None, :]
            (keys,), (scores,) = _index(store).search_scored(unit, 300)
            pairs = [(id_of[int(p)], float(s)) for p, s in zip(keys, scores, strict=True)]
            pairs = [p for p in pairs if p[0] not in hidden]
            return sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]

        k = 3
        queries = np.concatenate([_queries(5), _vector(batch[50])[None, :]])
        for n, q in enumerate(queries):
            read.clear()
            got = await ranked(q, k)
            assert len(read) == 1
            if n < len(queries) - 1:
                assert read == [k]
            else:  # the rows are copies: the candidates tied with the k-th are read too
                assert read[0] >= 6
            assert got == graph_best(q, k, frozenset())

        # the best rows hidden: the first read cannot answer, the rest is read
        q = _queries()[0]
        best = [i for i, _ in await ranked(q, k)]
        await store.patch_many(NS, best, MemoryPatch(do_not_inject=True))
        read.clear()
        got = await ranked(q, k)
        assert len(read) == 2
        assert got == graph_best(q, k, frozenset(best))
    finally:
        await store.close()


DEDUP = SearchFilter(include_forgotten=True, include_superseded=True)  # what add_many asks


async def test_the_dedup_batch_search_re_reads_only_candidates_that_may_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_many's batch search (every row passes) reads from the file only the
    candidates whose float16 cosine could place them among a query's k best; its
    answers stay those of one search per query (ties at every rank included) and of
    a scan."""
    store = await _open(tmp_path / "a.db")
    try:
        batch = _with_copies(300)
        await store.put_many(NS, batch)
        queries = np.concatenate([_queries(5), _vector(batch[50])[None, :]])
        await store.vector_search_many(NS, queries[:1], tiers=LIVE_TIERS, k=1, filters=DEDUP)
        _index(store).fold()  # the graph answers (the buffer is scanned exactly)
        read: list[int] = []
        table = store._vectors
        candidates = table._candidates

        def counted(*args: object, **kwargs: object) -> object:
            read.append(len(args[2]))  # type: ignore[arg-type]
            return candidates(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(table, "_candidates", counted)
        k = 3
        many = await store.vector_search_many(NS, queries, tiers=LIVE_TIERS, k=k, filters=DEDUP)
        fetch = k + 8  # `_ann_fetch` when every row passes
        assert 0 < sum(read) < len(queries) * fetch / 2
        exact = await store.vector_search_many(
            NS, queries, tiers=LIVE_TIERS, k=k, filters=dataclasses.replace(DEDUP, exact=True)
        )
        for q, got, want in zip(queries, many, exact, strict=True):
            one = await store.vector_search(NS, q, tiers=LIVE_TIERS, k=k, filters=DEDUP)
            assert [i for i, _ in got] == [s.memory.id for s in one]
            assert np.allclose([s for _, s in got], [s.score for s in one], atol=1e-6)
            # a scan breaks ties beyond its k best its own way: the same cosines
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
    finally:
        await store.close()


async def test_a_batch_search_for_ranking_reads_ids_only_and_gives_the_graph_s_cosines(
    tmp_path: Path,
) -> None:
    """`exact_scores=False` (add_many's links): each query's k best by the graph's
    cosines, within its float16 error of the exact ones, with only their ids read from
    the file (no `memory_vectors` row); the same memories as an exact search."""
    store = await _open(tmp_path / "a.db")
    try:
        await _folded(store, _memories(300))
        queries = _queries(20)
        with traced(store) as statements:
            many = await store.vector_search_many(
                NS, queries, tiers=LIVE_TIERS, k=3, filters=DEDUP, exact_scores=False
            )
        assert [s for s in statements if "FROM memories" in s]
        assert not [s for s in statements if "memory_vectors" in s]
        exact = await store.vector_search_many(NS, queries, tiers=LIVE_TIERS, k=3, filters=DEDUP)
        for got, want in zip(many, exact, strict=True):
            assert {i for i, _ in got} == {i for i, _ in want}
            by_id = dict(want)
            for memory_id, score in got:
                assert score == pytest.approx(by_id[memory_id], abs=ann.FLOAT16_ERROR)
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    finally:
        await store.close()


async def test_a_batch_search_for_ranking_scores_exactly_a_query_that_may_be_a_duplicate(
    tmp_path: Path,
) -> None:
    """With `exact_from` (the duplicate threshold), a query whose graph cosine may
    reach it is answered exactly, as an exact search answers it: the decision hinges
    on that cosine. The others keep the graph's."""
    store = await _open(tmp_path / "a.db")
    try:
        batch = _memories(300)
        await _folded(store, batch)
        queries = np.concatenate([_queries(5), _vector(batch[7])[None, :]])
        with traced(store) as statements:
            many = await store.vector_search_many(
                NS,
                queries,
                tiers=LIVE_TIERS,
                k=3,
                filters=DEDUP,
                exact_scores=False,
                exact_from=0.95,
            )
        assert [s for s in statements if "memory_vectors" in s]  # the duplicate's
        exact = await store.vector_search_many(NS, queries, tiers=LIVE_TIERS, k=3, filters=DEDUP)
        assert many[-1][0][0] == batch[7].id
        assert many[-1] == exact[-1]
        for got, want in zip(many[:-1], exact[:-1], strict=True):
            assert {i for i, _ in got} == {i for i, _ in want}
    finally:
        await store.close()


async def test_the_batch_search_scores_the_buffer_on_one_blas_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_many's batch search scores its queries against the buffer's exact rows in
    one product on one BLAS thread (a second one spun on the cores usearch's search
    and SQLite wanted), with the answers of a scan."""
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)
    store = await _open(tmp_path / "a.db")
    try:
        await _folded(store, _memories(300))
        fresh = _memories(40, start=900, seed=13)
        await store.put_many(NS, fresh)
        threads = blas_threads_of(monkeypatch)
        queries = np.stack([_vector(m) for m in fresh])
        many = await store.vector_search_many(NS, queries, tiers=LIVE_TIERS, k=3, filters=DEDUP)
        assert threads
        assert set(threads) == {1}
        assert [r[0][0] for r in many] == [m.id for m in fresh]
        exact = await store.vector_search_many(
            NS, queries, tiers=LIVE_TIERS, k=3, filters=dataclasses.replace(DEDUP, exact=True)
        )
        assert [[i for i, _ in r] for r in many] == [[i for i, _ in r] for r in exact]
    finally:
        await store.close()


def test_a_batch_s_shortlists_are_those_of_one_query_at_a_time() -> None:
    """`_shortlists` (a batch's candidates that may rank, in a few array operations)
    keeps what `shortlist` keeps query by query: equal cosines at the k-th place,
    fewer candidates than k, and queries with fewer candidates than the others."""
    rng = np.random.default_rng(1)
    grid = np.linspace(0.0, 1.0, 40).astype(np.float32)  # ties at every rank
    for trial in range(300):
        n, size, k = int(rng.integers(0, 6)), int(rng.integers(0, 14)), int(rng.integers(1, 5))
        scores = [np.sort(rng.choice(grid, size))[::-1].copy() for _ in range(n)]
        if trial % 3 == 0 and n:
            scores[0] = scores[0][: max(0, size - 2)]
        found = [np.arange(s.size, dtype=np.uint64) + 100 for s in scores]
        got = vector_table._shortlists(found, scores, k)
        want = [f[graph_candidates.shortlist(s, k)] for f, s in zip(found, scores, strict=True)]
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)


def test_a_batch_search_searches_its_far_queries_again_at_a_wider_beam(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """add_many's batch search (`search_rechecked`) asks the graph at `BATCH_BEAM`,
    then at each wider beam of `RECHECK_BEAMS` for the queries alone whose best
    candidate is still below the floor (a search caught in another cluster finds only
    far rows), and answers those with the last search; a query whose best reaches the
    floor is not searched again."""
    n = hnsw.EXHAUSTIVE_ROWS + 400  # a graph searched approximately, not scanned
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(n, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    index = ann.AnnIndex.empty(DIM)
    index._keys, index._rows, index.high = np.arange(1, n + 1, dtype=np.uint64), rows, n
    index.fold()
    fresh = rng.normal(size=(2, DIM)).astype(np.float32)
    queries = np.concatenate([rows[:3], fresh / np.linalg.norm(fresh, axis=1, keepdims=True)])
    searches: list[tuple[int, int]] = []
    search_scored = index.search_scored

    def spied(
        q: np.ndarray, count: int, *, beam: int = 0
    ) -> tuple[list[ann.Keys], list[np.ndarray]]:
        searches.append((q.shape[0], beam))
        return search_scored(q, count, beam=beam)

    monkeypatch.setattr(index, "search_scored", spied)
    found, _ = index.search_rechecked(queries, 5, 0.99)  # rows[:3] find themselves
    widest = ann.RECHECK_BEAMS[-1]
    assert searches == [(5, ann.BATCH_BEAM)] + [(2, beam) for beam in ann.RECHECK_BEAMS]
    assert index.rechecks == 2 * len(ann.RECHECK_BEAMS)
    assert [int(f[0]) for f in found[:3]] == [1, 2, 3]
    again = search_scored(queries[3:], 5, beam=widest)
    for got, want in zip(found[3:], again[0], strict=True):
        assert got.tolist() == want.tolist()
    searches.clear()
    index.search_rechecked(queries[:3], 5, 0.99)
    assert searches == [(3, ann.BATCH_BEAM)]  # none far: one search

    # a query whose neighbourhood the first wider beam finds is not searched again
    searches.clear()

    def near_from_128(
        q: np.ndarray, count: int, *, beam: int = 0
    ) -> tuple[list[ann.Keys], list[np.ndarray]]:
        searches.append((q.shape[0], beam))
        best = 0.995 if beam >= ann.RECHECK_BEAMS[0] else 0.5
        return (
            [np.array([7], dtype=np.uint64)] * q.shape[0],
            [np.array([best], dtype=np.float32)] * q.shape[0],
        )

    monkeypatch.setattr(index, "search_scored", near_from_128)
    index.search_rechecked(queries[3:], 5, 0.99)
    assert searches == [(2, ann.BATCH_BEAM), (2, ann.RECHECK_BEAMS[0])]


async def test_add_many_checks_again_the_items_that_found_no_neighbour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_many's dedup and links ask the batch search to recheck the items whose best
    stored neighbour is below the link floor (`autolink_min_similarity`)."""
    from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
    from tiered_memory.policy import Policy

    mem = await AsyncTieredMemory.embedded(
        tmp_path / "a.db", embedder=HashingEmbedder(DIM), clock=ManualClock(T0)
    )
    try:
        store = mem.store
        asked: list[float | None] = []
        many = store.vector_search_many  # type: ignore[attr-defined]

        async def spied(*args: object, **kwargs: object) -> object:
            asked.append(kwargs.get("recheck_below"))  # type: ignore[arg-type]
            return await many(*args, **kwargs)

        monkeypatch.setattr(store, "vector_search_many", spied)
        items = [
            {"content": f"item {i}", "embedding": _vector(m)} for i, m in enumerate(_memories(3))
        ]
        await mem.add_many(items, namespace=NS, dedup=True, link=True)
        assert asked == [Policy().associations.autolink_min_similarity]
    finally:
        await mem.close()


@pytest.mark.parametrize("dedup", [True, False])
async def test_add_many_asks_for_exact_cosines_only_where_a_duplicate_is_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dedup: bool
) -> None:
    """add_many's batch search may give the index's cosines (links need no more),
    with exact ones from the duplicate threshold up when it deduplicates."""
    from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
    from tiered_memory.policy import Policy

    mem = await AsyncTieredMemory.embedded(
        tmp_path / "a.db", embedder=HashingEmbedder(DIM), clock=ManualClock(T0)
    )
    try:
        store = mem.store
        asked: list[tuple[object, object]] = []
        many = store.vector_search_many  # type: ignore[attr-defined]

        async def spied(*args: object, **kwargs: object) -> object:
            asked.append((kwargs.get("exact_scores"), kwargs.get("exact_from")))
            return await many(*args, **kwargs)

        monkeypatch.setattr(store, "vector_search_many", spied)
        items = [
            {"content": f"item {i}", "embedding": _vector(m)} for i, m in enumerate(_memories(3))
        ]
        await mem.add_many(items, namespace=NS, dedup=dedup, link=True)
        threshold = Policy().limits.dedup_similarity if dedup else None
        assert asked == [(False, threshold)]
    finally:
        await mem.close()


async def test_a_build_folds_in_larger_steps_than_the_steady_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """faiss inserts a batch on several threads only above 100 rows: while the buffer
    is a build's (`FOLD_BUILD_ROWS` or more), a step folds `FOLD_BUILD_CHUNK` rows;
    below it, `FOLD_CHUNK`, so a search waits for a short step at most."""
    monkeypatch.setattr(ann, "FOLD_ROWS", 10**9)  # no background fold: steps by hand
    monkeypatch.setattr(ann, "FOLD_BUILD_ROWS", 200)
    monkeypatch.setattr(ann, "FOLD_BUILD_CHUNK", 64)
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(300))
        await _search(store, _queries()[0])
        index = _index(store)
        assert index.buffered == 300
        assert [index.fold_step() for _ in range(4)] == [64, 64, ann.FOLD_CHUNK, ann.FOLD_CHUNK]
        assert index.graph_rows == 128 + 2 * ann.FOLD_CHUNK
        await _same_as_scan(store)
    finally:
        await store.close()


@pytest.mark.parametrize("exact_scores", [True, False])
async def test_a_wider_search_reads_only_the_candidates_not_read_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact_scores: bool
) -> None:
    """When the graph's first candidates hold too few rows of the wanted tiers (the
    rows nearest the query are all WARM), the search asks the graph again for more;
    the rows the narrower search read are kept, never read twice, and the answer is a
    scan's."""
    store = await _open(tmp_path / "a.db")
    try:
        await store.put_many(NS, _memories(600))
        q = _queries()[0]
        nearest = [i for i, _ in await _search(store, q, k=200, filters=EXACT)]
        await store.set_tier(NS, nearest, Tier.WARM, T0)
        await _search(store, _queries()[1])  # caught up with the move
        _index(store).fold()
        read: list[list[int]] = []
        searched: list[int] = []
        for name in ("_read", "_read_light"):
            real = getattr(graph_candidates, name)

            def counted(
                conn: sqlite3.Connection, ns: str, keys: np.ndarray, *rest: object, _real=real
            ) -> object:
                read.append(keys.tolist())
                return _real(conn, ns, keys, *rest)

            monkeypatch.setattr(graph_candidates, name, counted)
        real_search = ann.AnnIndex.search_scored

        def counted_search(
            self: ann.AnnIndex, queries: np.ndarray, count: int, **kw: int
        ) -> object:
            searched.append(count)
            return real_search(self, queries, count, **kw)

        monkeypatch.setattr(ann.AnnIndex, "search_scored", counted_search)
        hot = frozenset({Tier.HOT})
        found = await store.vector_search(NS, q, tiers=hot, k=20, exact_scores=exact_scores)
        assert len(searched) >= 2  # the first candidates were not enough: wider
        assert searched == sorted(searched)
        pks = [pk for keys in read for pk in keys]
        assert len(pks) == len(set(pks))  # no row read twice
        want = await _search(store, q, tiers=hot, k=20, filters=EXACT)
        assert np.allclose([s.score for s in found], [s for _, s in want], atol=1e-3)
        if exact_scores:
            assert [s.memory.id for s in found] == [i for i, _ in want]
        else:  # the graph's cosines: near ties may swap, nothing worse than a tie joins
            exact_of = dict(await _search(store, q, tiers=hot, k=600, filters=EXACT))
            kth = want[-1][1] - 2 * ann.FLOAT16_ERROR
            assert all(exact_of[s.memory.id] >= kth for s in found)
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("fetch", "held", "k", "wider"),
    [
        (261, 70, 84, 392),  # the yield says ~392 with a quarter more
        (100, 10, 50, 400),  # at most four times
        (100, 95, 96, 150),  # at least half as many again
        (100, 0, 10, 400),  # nothing held: four times
    ],
)
def test_a_wider_search_asks_for_what_the_last_one_s_yield_needs(
    fetch: int, held: int, k: int, wider: int
) -> None:
    assert vector_table.wider_fetch(fetch, held, k) == wider
