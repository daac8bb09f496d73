"""The SQLite store's sweep reads and bulk moves: index choice and vector-cache upkeep."""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from tests.sql_trace import traced
from tiered_memory import budget, lifecycle
from tiered_memory.backends.sqlite import sweep as sqlite_sweep
from tiered_memory.backends.sqlite import tier_rows, vector_table, vectors
from tiered_memory.backends.sqlite.database import READ_CACHE_KIB
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.backends.sqlite.sweep import scan_index, tier_literal
from tiered_memory.models import LIVE_TIERS, ArchiveRecord, Memory, MemoryType, Tier
from tiered_memory.plans import search_plan
from tiered_memory.policy import FusionWeights, Policy
from tiered_memory.ports import ScanQuery

from .tier_counts import kept_tier_counts

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NS = "bulk"
DIM = 8
HOT_INDEX = "memories_hot_changed"  # the HOT tier's timestamp index (`schema`)


def memories(n: int, seed: int = 0) -> list[Memory]:
    rng = np.random.default_rng(seed)
    return [
        Memory(
            id=f"m{i:03d}",
            namespace=NS,
            content=f"memory {i}",
            embedding=[float(x) for x in rng.normal(size=DIM)],
            created_at=T0 + timedelta(minutes=i),
            updated_at=T0,
            tier_changed_at=T0,
        )
        for i in range(n)
    ]


async def brute_force(store: SQLiteMemoryStore, query: np.ndarray, tier: Tier, k: int) -> list[str]:
    ids = await store.scan_ids(NS, ScanQuery(tiers=frozenset({tier}), limit=10_000))
    found, matrix = await store.embeddings(NS, ids)
    scores = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)) @ query
    return [found[i] for i in np.argsort(-scores, kind="stable")[:k]]


@pytest.mark.parametrize("bulk_rows", [1000, 5])  # patched row by row; dropped and reloaded
async def test_vector_search_follows_a_bulk_move(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, bulk_rows: int
) -> None:
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", bulk_rows)
    batch = memories(60)
    await store.put_many(NS, batch)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):  # load every partition into the cache
        await store.vector_search(NS, query, tiers=frozenset({tier}), k=5)
    moved = [m.id for m in batch[::2]]
    assert await store.set_tier(NS, moved, Tier.WARM, T0 + timedelta(days=4)) == 30
    assert await store.set_tier(NS, moved[:10], Tier.COLD, T0 + timedelta(days=5)) == 10
    for tier in (Tier.HOT, Tier.WARM, Tier.COLD):
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=8)
        assert [h.memory.id for h in hits] == await brute_force(store, query, tier, 8)
        assert {h.memory.tier for h in hits} == {tier}


async def test_a_bulk_move_to_an_uncached_tier_copies_none_of_the_moved_rows(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only the source tier cached, the moved rows are dropped from it in place
    (`VectorIndex.discard`): no index of them is built to be thrown away (at 1M, 1.5 GB
    copied); the target tier is loaded from the file by its next search."""
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", 5)
    await store.put_many(NS, memories(40))
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=5)
    taken: list[int] = []
    take = vectors.VectorIndex.take

    def counted(index: vectors.VectorIndex, ids: Iterable[str]) -> vectors.VectorIndex:
        out = take(index, ids)
        taken.append(out.size)
        return out

    monkeypatch.setattr(vectors.VectorIndex, "take", counted)
    moved = [f"m{i:03d}" for i in range(0, 40, 2)]
    assert await store.set_tier(NS, moved, Tier.WARM, T0 + timedelta(days=4)) == 20
    assert taken == []
    hot = store._vectors.cache.get((NS, Tier.HOT.value))
    assert hot is not None
    assert hot.size == 20
    assert not set(moved) & set(hot.ids)
    assert (NS, Tier.WARM.value) not in set(store._vectors.cache)
    for tier in (Tier.HOT, Tier.WARM):
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=8)
        assert [h.memory.id for h in hits] == await brute_force(store, query, tier, 8)


async def test_a_rolled_back_bulk_move_leaves_search_as_it_was(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_table, "BULK_MOVE_ROWS", 5)
    await store.put_many(NS, memories(40))
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    before = await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=10)

    async def move_then_fail() -> None:
        async with store.transaction():
            await store.set_tier(NS, [f"m{i:03d}" for i in range(30)], Tier.COLD, T0)
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        await move_then_fail()
    after = await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=10)
    assert [h.memory.id for h in after] == [h.memory.id for h in before]
    assert await store.vector_search(NS, query, tiers=frozenset({Tier.COLD}), k=10) == []


@pytest.mark.parametrize(
    ("bound", "tier", "index"),
    [
        ("tier_changed_before", "hot", "memories_hot_changed"),
        ("cold_since_before", "cold", "memories_cold_since"),
        ("last_used_before", "warm", "memories_warm_used"),
        ("created_before", "cold", "memories_cold_created"),
        ("created_before", "warm", "memories_created"),
        ("created_before", "hot", "memories_created"),
    ],
)
async def test_bounded_scans_walk_the_timestamp_index(
    store: SQLiteMemoryStore, bound: str, tier: str, index: str
) -> None:
    """Without statistics SQLite would walk (namespace, tier, id) and read every row of
    the tier to test the bound; the sweep's scans must read only the rows inside it,
    from the partial index of the tier their rule reads."""
    query = ScanQuery(tiers=LIVE_TIERS, **{bound: T0})
    assert scan_index(query, tier) == f" INDEXED BY {index}"
    if bound != "created_before":  # the one bound every live tier has an index for
        others = {t.value for t in LIVE_TIERS} - {tier}
        assert all(scan_index(query, other) == "" for other in others)
    await store.put_many(NS, memories(3))
    with store.database.read() as conn:
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM memories{scan_index(query, tier)} "
            f"WHERE namespace = ? AND tier = {tier_literal(tier)} ORDER BY id",
            (NS,),
        ).fetchall()
    assert any(index in str(tuple(row)) for row in plan), plan
    assert await store.scan_ids(NS, query) == []
    later = ScanQuery(tiers=LIVE_TIERS, created_before=T0 + timedelta(days=1))
    assert await store.scan_ids(NS, later) == ["m000", "m001", "m002"]
    await store.set_tier(NS, ["m001"], Tier.COLD, T0)
    cold = ScanQuery(tiers=LIVE_TIERS, created_before=T0 + timedelta(days=1))
    assert await store.scan_ids(NS, cold) == ["m000", "m001", "m002"]  # COLD by its index
    assert scan_index(ScanQuery(tiers=LIVE_TIERS), tier) == ""


async def test_pages_after_the_first_walk_the_id_index(store: SQLiteMemoryStore) -> None:
    """The timestamp index yields rows in timestamp order, so each page of it re-reads
    and re-sorts every row inside the bound: paging through a million due memories
    50k at a time read them twenty times. A next page walks (namespace, tier, id) from
    `after_id` instead, and the pages still hold every due memory once, in id order."""
    due = ScanQuery(tiers=frozenset({Tier.HOT}), tier_changed_before=T0 + timedelta(days=1))
    later = dataclasses.replace(due, after_id="m010")
    assert scan_index(due, "hot") == " INDEXED BY memories_hot_changed"
    assert scan_index(later, "hot") == " INDEXED BY memories_tier_id"
    batch = memories(25)
    for m in batch[::3]:  # some not due yet
        m.tier_changed_at = T0 + timedelta(days=2)
    await store.put_many(NS, batch)
    pages: list[list[str]] = []
    query = dataclasses.replace(due, limit=4)
    while True:
        page = await store.scan_ids(NS, query)
        pages.append(page)
        if len(page) < query.limit:
            break
        query = dataclasses.replace(query, after_id=page[-1])
    expected = sorted(m.id for m in batch if m.tier_changed_at == T0)
    assert [i for page in pages for i in page] == expected
    assert all(len(page) == 4 for page in pages[:-1])


def _expiry_bounds(
    now: datetime,
) -> tuple[lifecycle.HotExpiryBounds, Callable[[MemoryType, int], int]]:
    policy = Policy()
    return lifecycle.hot_expiry_bounds(now, policy), functools.partial(
        lifecycle.unpinned_time_to_floor_us, policy=policy
    )


@pytest.mark.parametrize("share", [0.25, 2.0])  # the tier index rebuilt, or kept
async def test_a_bulk_expiry_moves_what_the_rule_moves_and_keeps_the_tier_index(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    """The UPDATEs of `expire_hot` move the memories `lifecycle.hot_expiry` sends each
    way (importance and use decide; the vector search follows), and the (namespace,
    tier, id) index dropped for a big move is back, whole, after it."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", share)
    batch = [
        m.model_copy(update={"importance": 0.9 if i % 3 else 0.1, "use_count": i % 2})
        for i, m in enumerate(memories(60))
    ]
    await store.put_many(NS, batch)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    await store.vector_search(NS, query, tiers=frozenset({Tier.HOT}), k=5)  # cached
    now = T0 + timedelta(days=4)
    facts = await store.scan_facts(NS, ScanQuery(tiers=frozenset({Tier.HOT}), limit=100))
    want = lifecycle.hot_expiry(facts, now, Policy())
    bounds, to_floor = _expiry_bounds(now)
    dry = await store.expire_hot(NS, bounds, to_floor, now, dry_run=True)
    assert await store.scan_ids(NS, ScanQuery(tiers=frozenset({Tier.WARM}))) == []
    moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)
    assert dry == moves
    assert (moves.to_warm, moves.to_cold, moves.through_warm) == (
        len(want.to_warm),
        len(want.to_cold),
        len(want.through_warm),
    )
    assert moves.to_warm
    assert moves.to_cold
    warm = await store.scan_ids(NS, ScanQuery(tiers=frozenset({Tier.WARM}), limit=100))
    assert warm == sorted(want.to_warm)
    cold = await store.scan_ids(NS, ScanQuery(tiers=frozenset({Tier.COLD}), limit=100))
    assert cold == sorted(want.to_cold + want.through_warm)
    with store._db.read() as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert sqlite_sweep.TIER_INDEX in names
    for tier in (Tier.WARM, Tier.COLD):
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=8)
        assert [h.memory.id for h in hits] == await brute_force(store, query, tier, 8)
    assert (await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)) == (
        lifecycle.HotExpiryMoves(0, 0, 0)
    )


async def _kept_and_used_lately(
    store: SQLiteMemoryStore,
) -> tuple[
    lifecycle.HotExpiry,
    lifecycle.HotExpiryBounds,
    Callable[[MemoryType, int], int],
    datetime,
]:
    """30 HOT memories kept (important or used) and used lately, so only the floor rule
    decides them; what the rule decides four days on, with the expiry's arguments."""
    batch = [
        m.model_copy(update={"importance": 0.9, "use_count": i % 2})
        for i, m in enumerate(memories(30))
    ]
    await store.put_many(NS, batch)
    now = T0 + timedelta(days=4)
    facts = await store.scan_facts(NS, ScanQuery(tiers=frozenset({Tier.HOT}), limit=100))
    bounds, to_floor = _expiry_bounds(now)
    return lifecycle.hot_expiry(facts, now, Policy()), bounds, to_floor, now


def _counts(want: lifecycle.HotExpiry) -> lifecycle.HotExpiryMoves:
    return lifecycle.HotExpiryMoves(len(want.to_warm), len(want.to_cold), len(want.through_warm))


def _count_floor_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every call the bulk expiry makes of its Python time-to-the-floor function."""
    calls: list[tuple[str, int]] = []
    floor_function = sqlite_sweep._floor_function

    def counting(time_to_floor: Callable[[MemoryType, int], int]) -> Callable[[str, int], int]:
        floor = floor_function(time_to_floor)

        def call(memory_type: str, use_count: int) -> int:
            calls.append((memory_type, use_count))
            return floor(memory_type, use_count)

        return call

    monkeypatch.setattr(sqlite_sweep, "_floor_function", counting)
    return calls


@pytest.mark.parametrize("share", [0.25, 2.0])  # the tier index rebuilt, or kept
async def test_a_bulk_expiry_decides_each_row_once(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    """The bulk expiry tests each due row against its time to the floor once. Flattened
    into the UPDATE, the subquery deciding a row's tier was computed again for each of
    the three columns that read it: three calls of the Python function a row (1.03M
    calls for 976k rows moved at 1M memories)."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", share)
    monkeypatch.setattr(tier_rows, "BULK_MOVE_ROWS", 0)
    calls = _count_floor_calls(monkeypatch)
    want, bounds, to_floor, now = await _kept_and_used_lately(store)
    moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)
    assert moves == _counts(want)
    assert 0 < len(calls) <= 30


@pytest.mark.parametrize("dry_run", [False, True])
async def test_a_bulk_expiry_asks_python_for_no_unused_rows_time_to_the_floor(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    """The time to the floor of a row never used is a literal per type in the SQL:
    the Python function is called once per type, not once per kept row SQLite tests
    (340k calls at 1M memories, a bulk import, for four distinct values); the rows
    still go where the rule sends them."""
    monkeypatch.setattr(tier_rows, "BULK_MOVE_ROWS", 0)
    calls = _count_floor_calls(monkeypatch)
    types = list(MemoryType)
    batch = [
        m.model_copy(update={"importance": 0.9, "memory_type": types[i % len(types)]})
        for i, m in enumerate(memories(30))
    ]
    await store.put_many(NS, batch)
    now = T0 + timedelta(days=4)
    facts = await store.scan_facts(NS, ScanQuery(tiers=frozenset({Tier.HOT}), limit=100))
    want = lifecycle.hot_expiry(facts, now, Policy())
    bounds, to_floor = _expiry_bounds(now)
    moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=dry_run)
    assert moves == _counts(want)
    assert len(calls) <= len(MemoryType)


@pytest.mark.parametrize("share", [0.25, 2.0])  # the tier index rebuilt, or kept
async def test_a_bulk_expiry_rewrites_the_rows_without_calling_a_python_function(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    """The time to the floor is asked for by a statement of its own, never by the
    UPDATE that rewrites the rows: SQLite keeps a statement journal (the original of
    every page the statement changes, in a temporary file) for a statement that calls
    an application function, since it may fail half-way; 40 MB per 100k rows moved."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", share)
    monkeypatch.setattr(tier_rows, "BULK_MOVE_ROWS", 0)
    during: list[str] = []

    def recording(time_to_floor: Callable[[MemoryType, int], int]) -> Callable[[str, int], int]:
        def call(memory_type: str, use_count: int) -> int:
            during.append(statements[-1])
            return time_to_floor(MemoryType(memory_type), use_count)

        return call

    monkeypatch.setattr(sqlite_sweep, "_floor_function", recording)
    want, bounds, to_floor, now = await _kept_and_used_lately(store)
    with traced(store) as statements:
        moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)
    assert moves == _counts(want)
    assert during
    assert not [s for s in during if "UPDATE" in s.upper()]
    assert [s for s in statements if "UPDATE" in s.upper() and " memories " in s]


@pytest.mark.parametrize("fails", [False, True])
async def test_a_big_bulk_expiry_holds_its_pages_in_a_grown_cache_and_gives_it_back(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    """A move whose dirty pages would not fit the usual page cache gets a cache sized to
    them for its transaction (at 1M memories the 64 MB one spilled 343 MB to the WAL
    mid-statement and sorted the tier index through temporary files), and the usual
    one back after it, committed or rolled back; a small move leaves the cache alone."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", 0.25)
    monkeypatch.setattr(sqlite_sweep, "MOVE_CACHE_KIB_PER_ROW", 10_000.0)  # 40 rows: ~400 MB
    await store.put_many(NS, [m.model_copy(update={"importance": 0.9}) for m in memories(40)])
    with store.database.read() as conn:
        before = [conn.execute(f"PRAGMA {s}.cache_size").fetchone()[0] for s in ("main", "temp")]
    now = T0 + timedelta(days=4)
    bounds, to_floor = _expiry_bounds(now)
    sizes: list[tuple[int, int]] = []

    def floor(memory_type: MemoryType, use_count: int) -> int:
        with store.database.read() as conn:
            sizes.append(
                tuple(
                    conn.execute(f"PRAGMA {s}.cache_size").fetchone()[0] for s in ("main", "temp")
                )
            )
        if fails:
            raise RuntimeError("boom")
        return to_floor(memory_type, use_count)

    if fails:
        with pytest.raises(Exception):  # noqa: B017, PT011 - sqlite reports the callback's error
            await store.expire_hot(NS, bounds, floor, now, dry_run=False)
    else:
        moves = await store.expire_hot(NS, bounds, floor, now, dry_run=False)
        assert moves.to_warm + moves.to_cold + moves.through_warm == 40
    assert sizes
    assert sizes[0] == (-(READ_CACHE_KIB + 400_000),) * 2
    with store.database.read() as conn:
        after = [conn.execute(f"PRAGMA {s}.cache_size").fetchone()[0] for s in ("main", "temp")]
    assert after == before
    monkeypatch.setattr(sqlite_sweep, "MOVE_CACHE_KIB_PER_ROW", 0.5)
    sizes.clear()
    await store.put_many(
        NS, [m.model_copy(update={"id": f"n{m.id}", "importance": 0.9}) for m in memories(40)]
    )
    await store.expire_hot(NS, bounds, floor if not fails else to_floor, now, dry_run=False)
    assert all(list(s) == before for s in sizes)


async def test_a_failed_bulk_expiry_leaves_the_file_as_it_was(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tier and HOT indexes rebuilt and the counts kept in bulk (both thresholds
    at 0): a failure half-way leaves the rows, the indexes, the counts and the trigger."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", 0.0)
    monkeypatch.setattr(tier_rows, "BULK_MOVE_ROWS", 0)
    await store.put_many(NS, [m.model_copy(update={"importance": 0.9}) for m in memories(20)])
    now = T0 + timedelta(days=4)
    bounds, _ = _expiry_bounds(now)

    def broken(memory_type: MemoryType, use_count: int) -> int:
        raise RuntimeError("boom")

    with pytest.raises(Exception):  # noqa: B017, PT011 - sqlite reports the callback's error
        await store.expire_hot(NS, bounds, broken, now, dry_run=False)
    assert len(await store.scan_ids(NS, ScanQuery(tiers=frozenset({Tier.HOT})))) == 20
    with store._db.read() as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {sqlite_sweep.TIER_INDEX, HOT_INDEX} <= names
    assert _tier_counts(store) == {(NS, "hot"): 20}


async def _traced_expiry(
    store: SQLiteMemoryStore, now: datetime
) -> tuple[lifecycle.HotExpiryMoves, list[str]]:
    """The bulk HOT expiry at `now` under the default policy, and the statements it ran."""
    bounds, to_floor = _expiry_bounds(now)
    with traced(store) as statements:
        moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)
    return moves, statements


@pytest.mark.parametrize("cached", [Tier.HOT, Tier.ARCHIVED, None])
async def test_a_bulk_expiry_reads_the_moved_ids_back_only_for_a_cached_partition(
    store: SQLiteMemoryStore, cached: Tier | None
) -> None:
    """The ids of the moved rows are only needed to keep a cached partition of a live
    tier of the namespace in step; with none cached (a namespace searched through its
    HNSW index), or only its archive records' (which every search of the scale
    benchmark loads), the UPDATE returns nothing, and the counts are the rule's all
    the same."""
    batch = [
        m.model_copy(update={"importance": 0.9 if i % 3 else 0.1, "use_count": i % 2})
        for i, m in enumerate(memories(60))
    ]
    await store.put_many(NS, batch)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    if cached is Tier.ARCHIVED:  # an engine search asks the archive records too
        await store.search_archives(NS, query, k=5)
    elif cached is not None:
        await store.vector_search(NS, query, tiers=frozenset({cached}), k=5)
    if cached is not None:
        assert (NS, cached.value) in set(store._vectors.cache)
    now = T0 + timedelta(days=4)
    facts = await store.scan_facts(NS, ScanQuery(tiers=frozenset({Tier.HOT}), limit=100))
    want = lifecycle.hot_expiry(facts, now, Policy())
    moves, statements = await _traced_expiry(store, now)
    assert (moves.to_warm, moves.to_cold, moves.through_warm) == (
        len(want.to_warm),
        len(want.to_cold),
        len(want.through_warm),
    )
    updates = {s for s in statements if s.startswith("UPDATE OR FAIL memories SET (tier,")}
    (update,) = updates
    assert "RETURNING" not in update  # SQLite holds every returned row until the end
    reads = [s for s in statements if s.startswith("SELECT m.id FROM temp.tm_hot_expiry")]
    assert len(reads) == (2 if cached is Tier.HOT else 0)  # the COLD ids, the WARM ids
    for tier in (Tier.WARM, Tier.COLD):
        hits = await store.vector_search(NS, query, tiers=frozenset({tier}), k=8)
        assert [h.memory.id for h in hits] == await brute_force(store, query, tier, 8)


async def test_a_big_bulk_expiry_builds_the_hot_index_again(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving most of the file out of HOT drops the HOT tier's timestamp index and
    builds it again (deleting its entries one by one cost more), inside the move's
    transaction: after it, the index is the schema's and holds the rows still HOT."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", 0.25)
    batch = memories(40)
    for i, m in enumerate(batch):
        if i % 10 == 0:  # changed tier lately: not due
            m.tier_changed_at = T0 + timedelta(days=3, hours=23)
    await store.put_many(NS, batch)
    now = T0 + timedelta(days=4)
    with store.database.read() as conn:
        schema_sql = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (HOT_INDEX,)
        ).fetchone()[0]
    moves, statements = await _traced_expiry(store, now)
    assert moves.to_warm + moves.to_cold + moves.through_warm == 36
    assert f"DROP INDEX {HOT_INDEX}" in statements
    with store.database.read() as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (HOT_INDEX,))
        entries = conn.execute(
            f"SELECT count(*) FROM memories INDEXED BY {HOT_INDEX} "
            "WHERE namespace = ? AND tier = 'hot' AND tier_changed_at > 0",
            (NS,),
        ).fetchone()[0]
    assert sql[0] == schema_sql
    assert entries == 4
    query = ScanQuery(tiers=frozenset({Tier.HOT}), tier_changed_before=now, limit=100)
    assert await store.scan_ids(NS, query) == [f"m{i:03d}" for i in range(0, 40, 10)]


@pytest.mark.parametrize("mode", [0, 1])  # SQLite built with secure_delete OFF, or ON
async def test_a_big_bulk_expiry_frees_the_dropped_index_pages_without_zeroing_them(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    """Where SQLite overwrites deleted content with zeros (Debian's build), the indexes a
    bulk expiry drops and builds again are dropped with `secure_delete = FAST`: their
    freed pages (80 MB at 1M memories) are not zeroed and logged only to be taken by the
    new index. The setting is back after the move; a build with it OFF is left OFF."""
    monkeypatch.setattr(sqlite_sweep, "REBUILD_SHARE", 0.25)
    await store.put_many(NS, memories(40))
    with store.database.read() as conn:
        conn.execute(f"PRAGMA secure_delete = {mode}")
    now = T0 + timedelta(days=4)
    moves, statements = await _traced_expiry(store, now)
    assert moves.to_warm + moves.to_cold + moves.through_warm == 40
    drop = statements.index(f"DROP INDEX {sqlite_sweep.TIER_INDEX}")
    fast = [i for i, s in enumerate(statements) if s == "PRAGMA secure_delete = FAST"]
    assert fast == ([] if mode == 0 else [fast[0]])
    assert mode == 0 or fast[0] < drop
    with store.database.read() as conn:
        assert conn.execute("PRAGMA secure_delete").fetchone()[0] == mode
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _tier_counts(store: SQLiteMemoryStore) -> dict[tuple[str, str], int]:
    """The kept counts of `tier_rows`, checked against a count of `memories`, with
    the per-row trigger in place."""
    with store._db.read() as conn:
        triggers = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
        kept = kept_tier_counts(conn)
    assert tier_rows.UPDATE_TRIGGER in triggers
    return kept


@pytest.mark.parametrize("bulk_rows", [0, 10_000])  # counted once, or by the trigger
async def test_a_bulk_expiry_keeps_the_tier_counts(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, bulk_rows: int
) -> None:
    """A bulk expiry counts its moves once, without the update trigger, when it moves
    more than `tier_rows.BULK_MOVE_ROWS`: the counts of the namespace it moved and of
    another are right, and the trigger is back for the next move."""
    monkeypatch.setattr(tier_rows, "BULK_MOVE_ROWS", bulk_rows)
    batch = [
        m.model_copy(update={"importance": 0.9 if i % 3 else 0.1, "use_count": i % 2})
        for i, m in enumerate(memories(60))
    ]
    await store.put_many(NS, batch)
    await store.put_many("other", [m.model_copy(update={"namespace": "other"}) for m in batch])
    now = T0 + timedelta(days=4)
    bounds, to_floor = _expiry_bounds(now)
    moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)
    counts = _tier_counts(store)
    assert counts[(NS, "warm")] == moves.to_warm
    assert counts[(NS, "cold")] == moves.to_cold + moves.through_warm
    assert (NS, "hot") not in counts
    assert counts[("other", "hot")] == 60
    warm = await store.scan_ids(NS, ScanQuery(tiers=frozenset({Tier.WARM})))
    await store.set_tier(NS, warm[:3], Tier.HOT, now)  # the trigger counts this one
    assert _tier_counts(store)[(NS, "hot")] == 3


async def test_forced_archival_reads_only_the_old_rows_of_every_tier(
    store: SQLiteMemoryStore,
) -> None:
    """The forced archival query (any live tier, created before a bound) walks the
    creation-time index in HOT and WARM, not the id index of the whole tier (an idle
    sweep read every WARM row for it), and pages the same old rows in id order."""
    query = lifecycle.archive_queries(T0, Policy().tiers)[lifecycle.FORCED_AGE]
    assert query.created_before is not None
    for tier in ("hot", "warm"):
        assert scan_index(query, tier) == " INDEXED BY memories_created"
    old = query.created_before - timedelta(days=1)
    batch = [
        m.model_copy(update={"created_at": old - timedelta(minutes=i) if i % 2 else m.created_at})
        for i, m in enumerate(memories(30))
    ]
    await store.put_many(NS, batch)
    await store.set_tier(NS, [m.id for m in batch[:10]], Tier.WARM, T0)
    await store.set_tier(NS, [m.id for m in batch[10:20]], Tier.COLD, T0)
    pages: list[list[str]] = []
    page_query = dataclasses.replace(query, limit=4)
    while True:
        page = await store.scan_ids(NS, page_query)
        pages.append(page)
        if len(page) < page_query.limit:
            break
        page_query = dataclasses.replace(page_query, after_id=page[-1])
    assert [i for page in pages for i in page] == sorted(m.id for m in batch[1::2])


@pytest.mark.parametrize("limit", [1, 3, 100])
async def test_a_scan_by_bound_pages_every_row_once(store: SQLiteMemoryStore, limit: int) -> None:
    """`scan_facts_by_bound` (consolidation's scan) yields the rows the id-paged scan
    yields, each once, WARM ones walked along the last-use index (ties of last use
    broken by pk), HOT ones by id; each page ordered by id."""
    assert isinstance(store, lifecycle.SupportsBoundOrderScan)
    batch = [
        m.model_copy(
            update={
                "last_accessed_at": T0 + timedelta(hours=i % 4),  # ties across pages
                "pinned": i % 7 == 0,
            }
        )
        for i, m in enumerate(memories(40))
    ]
    await store.put_many(NS, batch)
    await store.set_tier(NS, [m.id for m in batch[:30]], Tier.WARM, T0)
    await store.set_tier(NS, [m.id for m in batch[30:35]], Tier.COLD, T0)
    query = ScanQuery(
        tiers=lifecycle.ACTIVE,
        last_used_before=T0 + timedelta(hours=3),
        pinned=False,
        limit=limit,
    )
    pages = [page async for page in store.scan_facts_by_bound(NS, query)]
    got = [i for page in pages for i in page.ids]
    expected = await store.scan_ids(NS, dataclasses.replace(query, limit=1000))
    assert len(expected) > 3
    assert sorted(got) == expected
    assert len(got) == len(set(got))
    assert all(page.ids == sorted(page.ids) and len(page) <= limit for page in pages)
    facts = await store.scan_facts(NS, dataclasses.replace(query, limit=1000))
    by_id = {i: k for k, i in enumerate(facts.ids)}
    for page in pages:  # the same columns as the id-paged scan
        rows = [by_id[i] for i in page.ids]
        assert (page.last_used_at == facts.last_used_at[rows]).all()
        assert (page.created_at == facts.created_at[rows]).all()
        assert page.memory_types == [facts.memory_types[k] for k in rows]


@pytest.mark.parametrize("limit", [2, 100])
async def test_a_scan_by_bound_leaves_out_rows_past_their_types_bound(
    store: SQLiteMemoryStore, limit: int
) -> None:
    """`type_bounds` (consolidation's per-type fading bounds) leaves WARM rows of a type
    last used at or after that type's bound out of the scan, in the SQL; types without
    a bound keep the query's. Before, consolidation read every WARM row inside the
    shortest-lived type's bound (216k rows at 1M for 90k that could fade)."""
    types = [MemoryType.EPISODIC, MemoryType.FACTUAL, MemoryType.PROJECT]
    batch = [
        m.model_copy(
            update={"memory_type": types[i % 3], "last_accessed_at": T0 + timedelta(hours=i % 4)}
        )
        for i, m in enumerate(memories(36))
    ]
    await store.put_many(NS, batch)
    await store.set_tier(NS, [m.id for m in batch[:30]], Tier.WARM, T0)
    query = ScanQuery(
        tiers=frozenset({Tier.WARM}), last_used_before=T0 + timedelta(hours=3), limit=limit
    )
    bounds = {
        MemoryType.EPISODIC: T0 + timedelta(hours=5),  # later than the query's: no change
        MemoryType.FACTUAL: T0 + timedelta(hours=1),
    }
    pages = [page async for page in store.scan_facts_by_bound(NS, query, type_bounds=bounds)]
    got = sorted(i for page in pages for i in page.ids)
    hours = {MemoryType.EPISODIC: 3, MemoryType.FACTUAL: 1, MemoryType.PROJECT: 3}
    expected = sorted(
        m.id
        for m in batch[:30]
        if m.last_accessed_at is not None
        and m.last_accessed_at < T0 + timedelta(hours=hours[m.memory_type])
    )
    assert 0 < len(got) == len(expected)
    assert got == expected
    everything = [page async for page in store.scan_facts_by_bound(NS, query)]
    assert len(got) < sum(len(page) for page in everything)


@pytest.mark.parametrize(
    ("query", "tier", "index"),
    [
        (lifecycle.SUPERSEDED_QUERY, "warm", "memories_superseded"),
        (lifecycle.cold_to_warm_query(Policy().tiers), "cold", "memories_cold_used"),
        (lifecycle.core_query(Policy().tiers), "hot", "memories_used"),
    ],
)
async def test_rules_without_a_timestamp_read_only_the_rows_that_can_qualify(
    store: SQLiteMemoryStore, query: ScanQuery, tier: str, index: str
) -> None:
    """Superseded memories, COLD ones used since, used ones: each walks a partial index
    of the rows that can qualify (every page, in id order); through the tier index an
    idle sweep read every row of a tier for each of these rules."""
    assert scan_index(query, tier) == f" INDEXED BY {index}"
    assert scan_index(dataclasses.replace(query, after_id="m001"), tier) == f" INDEXED BY {index}"
    batch = memories(12)
    for i, m in enumerate(batch):
        m.tier = Tier.COLD if tier == "cold" else Tier(tier)
        m.use_count = m.uses_since_cold = 9 if i % 3 == 0 else 0
        m.use_days = [T0.date()] if m.use_count else []
        m.superseded_by = "m000" if i % 3 == 0 and i else None
    await store.put_many(NS, batch)
    want = [
        m.id
        for m in batch
        if m.use_count and query.superseded in (None, m.superseded_by is not None)
    ]
    got: list[str] = []
    page_query = dataclasses.replace(query, limit=2)
    while True:
        page = await store.scan_ids(NS, page_query)
        got += page
        if len(page) < 2:
            break
        page_query = dataclasses.replace(page_query, after_id=page[-1])
    assert got == want
    with store.database.read() as conn:
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM memories{scan_index(query, tier)} "
            f"WHERE namespace = ? AND tier = {tier_literal(tier)} "
            f"AND superseded_by IS NOT NULL AND uses_since_cold > 0 AND use_count > 0 "
            "ORDER BY id",
            (NS,),
        ).fetchall()
    assert any(index in str(tuple(row)) for row in plan), plan


async def test_the_pinned_scan_of_every_recall_walks_the_pinned_index(tmp_path: Path) -> None:
    """Every recall looks up the pinned memories of the active tiers. After a sweep
    rebuilt the tier index, the statistics `ANALYZE` left knew neither it nor the
    (empty) pinned index, and SQLite walked the whole WARM tier in id order through
    the tier index to find no pinned row: 21 of a recall's 60 ms at 100k memories."""
    path = tmp_path / "memory.db"
    store = await SQLiteMemoryStore.open(path)
    try:
        batch = memories(600)
        for i, m in enumerate(batch):
            m.tier = Tier.WARM if i % 4 else Tier.HOT
            m.pinned = i in (7, 400)
        await store.put_many(NS, batch)
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    with conn:  # the statistics as the sweep of the 100k benchmark left them
        conn.execute("ANALYZE")
        conn.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'memories'")
        conn.executemany(
            "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('memories', ?, ?)",
            [
                ("memories_created", "102000 102000 1010 1"),
                ("memories_used", "195 195 195 1"),
                ("memories_hot_changed", "102000 102000 1010"),
                ("sqlite_autoindex_memories_1", "102000 102000 1"),
            ],
        )
    conn.close()
    store = await SQLiteMemoryStore.open(path)
    try:
        with store.database.read() as conn, conn:  # the sweep's rebuild of the tier index
            conn.execute(f"DROP INDEX {sqlite_sweep.TIER_INDEX}")
            conn.execute(sqlite_sweep.TIER_INDEX_SQL)
        pinned = budget.pinned_scan(search_plan(FusionWeights(), k=20), 20)
        assert pinned is not None
        with traced(store) as statements:
            found = await store.scan(NS, pinned)
        assert sorted(m.id for m in found) == ["m007", "m400"]
        scans = [s for s in statements if "pinned = 1" in s]
        assert len(scans) == 2  # one per active tier
        with store.database.read() as conn:
            for sql in scans:
                plan = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
                assert any("memories_pinned" in str(tuple(row)) for row in plan), plan
    finally:
        await store.close()


async def test_the_namespaces_a_sweep_visits_are_found_by_seeks(store: SQLiteMemoryStore) -> None:
    """Every namespace with memories or only archive records, found with a few index
    seeks each (SQLite instructions counted), not by reading every memory's key."""
    for ns in ("a", "c"):
        await store.put_many(ns, [m.model_copy(update={"namespace": ns}) for m in memories(300)])
    await store.put_many("b", [m.model_copy(update={"namespace": "b"}) for m in memories(1)])
    record = ArchiveRecord(
        id="m000",
        namespace="b",
        summary="archived",
        memory_type=MemoryType.FACTUAL,
        importance=0.2,
        source="test",
        storage_ref="file:///archive/m000.json",
        size_bytes=1,
        checksum="0" * 64,
        storage_verified=True,
        created_at=T0,
        archived_at=T0,
        archive_reason="test",
    )
    assert await store.archive_many("b", [record]) == 1
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with store.database.read() as conn:
        conn.set_progress_handler(count, 1)
    try:
        assert await store.namespaces() == ["a", "b", "c"]
    finally:
        with store.database.read() as conn:
            conn.set_progress_handler(None, 1)
    assert steps[0] < 600  # reading the 600 keys of "a" and "c" takes several per key


async def _pages_a_bulk_expiry_writes(path: Path, content: str) -> int:
    """The WAL frames (pages) the bulk HOT expiry of 300 memories, each holding
    `content`, writes in a store at `path`; the log is emptied before the move."""
    store = await SQLiteMemoryStore.open(path)
    try:
        batch = [
            m.model_copy(update={"importance": 0.9, "content": f"{content} {i}"})
            for i, m in enumerate(memories(300))
        ]
        await store.put_many(NS, batch)
        with store.database.read() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        now = T0 + timedelta(days=4)
        bounds, to_floor = _expiry_bounds(now)
        moves = await store.expire_hot(NS, bounds, to_floor, now, dry_run=False)
        assert moves.to_warm == 300
        with store.database.read() as conn:
            _busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(frames)
    finally:
        await store.close()


async def test_a_tier_move_rewrites_no_page_of_the_memories_texts(tmp_path: Path) -> None:
    """Moving memories between tiers writes the same pages whatever their texts hold:
    the text is not in the rows a move rewrites. At 1M memories (181 characters of
    text on average) a sweep moving 976k rows rewrote 311 MB of rows, most of it text
    that did not change."""
    short = await _pages_a_bulk_expiry_writes(tmp_path / "short.db", "a note")
    long = await _pages_a_bulk_expiry_writes(
        tmp_path / "long.db", " ".join(f"word{i}" for i in range(300))
    )
    assert short > 0
    assert long <= short + 2, (short, long)
