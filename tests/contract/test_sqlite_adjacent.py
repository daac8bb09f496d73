"""A hit's neighbours in time (`SQLiteMemoryStore.adjacent`, recall's context phase):
per side nearest first, insertion order between equal timestamps, within the window,
live memories of the namespace only, for many hits in one call."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.sql_trace import traced
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import Memory
from tiered_memory.ports import MemoryPatch

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _memory(memory_id: str, minute: int, ns: str = "a") -> Memory:
    return Memory(
        id=memory_id,
        namespace=ns,
        content=f"turn {memory_id}",
        embedding=[1.0, float(minute), 0.5],
        created_at=T0 + timedelta(minutes=minute),
        updated_at=T0,
        tier_changed_at=T0,
    )


async def test_neighbours_per_side_nearest_first_for_every_hit(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        # t0 and t1 share a timestamp: insertion order decides which is nearer
        minutes = {"t0": 0, "t1": 0, "t2": 1, "t3": 2, "t4": 3, "t5": 4, "t6": 30}
        await store.put_many("a", [_memory(i, m) for i, m in minutes.items()])
        await store.put_many("b", [_memory("t9", 2, ns="b")])  # another namespace
        await store.patch_many("a", ["t4"], MemoryPatch(do_not_inject=True))  # forgotten
        found = await store.adjacent(
            "a", ["t3", "t1", "t6", "missing"], within=timedelta(minutes=10), per_side=2
        )
        ids = {hit: [m.id for m in ms] for hit, ms in found.items()}
        assert ids == {
            "t3": ["t2", "t1", "t5"],  # before: nearest first; after: t4 is forgotten
            "t1": ["t0", "t2", "t3"],
            "t6": [],  # the nearest is 26 minutes away
        }
        one = await store.adjacent("a", ["t2"], within=timedelta(minutes=10), per_side=1)
        assert [m.id for m in one["t2"]] == ["t1", "t3"]
    finally:
        await store.close()


async def test_a_hit_in_a_large_batch_of_one_timestamp_is_found_by_a_seek(
    tmp_path: Path,
) -> None:
    """A bulk import gives thousands of memories one timestamp. The neighbours of a hit
    among them are found by seeking the index at the hit, not by reading the rows of
    the batch up to it (with a table lookup each): the work does not grow with the
    batch (counted in SQLite's virtual machine steps, which do not depend on timing)."""
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        batch = [_memory(f"m{i:04d}", 0) for i in range(3000)]
        await store.put_many("a", batch)
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0

        with store.database.read() as conn:
            conn.set_progress_handler(count, 1)
        try:
            found = await store.adjacent("a", ["m1500"], within=timedelta(minutes=10), per_side=2)
        finally:
            with store.database.read() as conn:
                conn.set_progress_handler(None, 1)
        assert [m.id for m in found["m1500"]] == ["m1499", "m1498", "m1501", "m1502"]
        assert steps < 3000  # about 2 steps a row of the batch before the fix: 12,000+
    finally:
        await store.close()


async def test_the_neighbours_of_many_hits_take_two_statements(tmp_path: Path) -> None:
    """A recall asks for the context of 10 hits: one statement seeks them all, and one
    reads their rows (a statement per hit and side cost ~1 ms at 1M memories)."""
    store = await SQLiteMemoryStore.open(tmp_path / "a.db")
    try:
        await store.put_many("a", [_memory(f"t{i}", i) for i in range(30)])
        with traced(store) as statements:
            hits = [f"t{i}" for i in range(0, 30, 3)]
            found = await store.adjacent("a", hits, within=timedelta(minutes=10), per_side=1)
        assert [m.id for m in found["t3"]] == ["t2", "t4"]
        assert [m.id for m in found["t0"]] == ["t1"]
        assert len(found) == 10
        assert len(statements) == 2
    finally:
        await store.close()
