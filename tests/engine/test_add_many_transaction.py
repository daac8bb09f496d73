"""`add_many` writes a batch in one transaction where the graph shares the store's file
(one fsync per batch, not one for the memories and another for their links), keeps the
graph's writes optional inside it, and gives a graph kept elsewhere no link before the
memories commit."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.config import GraphSettings
from tiered_memory.wiring import embedded_settings

DIM = 16
NS = "tx"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _items() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stored memories, and a batch holding a near-duplicate of one of them and close
    relatives of others (links)."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(6, DIM)).astype(np.float32)
    stored = [{"content": f"stored {i}", "embedding": v} for i, v in enumerate(base)]
    batch = [{"content": "copy of 0", "embedding": base[0] * 2.0}]
    batch += [
        {"content": f"near {i}", "embedding": base[i] + 0.3 * rng.normal(size=DIM)}
        for i in range(1, 6)
    ]
    return stored, batch


async def _embedded(path: Path) -> AsyncTieredMemory:
    return await AsyncTieredMemory.embedded(
        path, embedder=HashingEmbedder(DIM), clock=ManualClock(NOW)
    )


async def test_a_batch_with_duplicates_and_links_commits_once(tmp_path: Path) -> None:
    mem = await _embedded(tmp_path / "a.db")
    try:
        stored, batch = _items()
        await mem.add_many(stored, namespace=NS, dedup=False, link=False)
        commits: list[int] = []
        mem.store.database.on_commit(lambda: commits.append(1))  # type: ignore[attr-defined]
        added = await mem.add_many(batch, namespace=NS, dedup=True, link=True)
        assert len(commits) == 1  # memories, use count, provenance and links: one commit
        assert added[0].content == "stored 0"
        assert added[0].use_count == 1
        assert await mem.links(added[1].id, namespace=NS)
    finally:
        await mem.close()


async def test_a_failing_link_write_rolls_back_alone_and_the_batch_is_stored(
    tmp_path: Path,
) -> None:
    mem = await _embedded(tmp_path / "a.db")
    try:
        stored, batch = _items()
        await mem.add_many(stored, namespace=NS, dedup=False, link=False)
        database = mem.store.database  # type: ignore[attr-defined]

        async def half_written(namespace: str, links: Any) -> None:
            with database.write() as conn:  # a savepoint inside the batch's transaction
                conn.execute(
                    "INSERT INTO links (namespace, source, target, weight, kind, created_at, "
                    "updated_at) VALUES (?, ?, ?, 1.0, 'similar', 0, 0)",
                    (namespace, links[0].source, links[0].target),
                )
                raise sqlite3.OperationalError("disk I/O error")

        mem.graph.upsert_links = half_written  # type: ignore[method-assign]
        added = await mem.add_many(batch, namespace=NS, dedup=True, link=True)
        for memory in added[1:]:
            assert await mem.get(memory.id, namespace=NS) is not None
            assert await mem.links(memory.id, namespace=NS) == []  # the half write is gone
        assert (await mem.get(added[0].id, namespace=NS)).use_count == 1  # type: ignore[union-attr]
    finally:
        await mem.close()


async def test_a_graph_in_another_file_links_only_committed_memories(tmp_path: Path) -> None:
    from tiered_memory.writes import shares_transactions

    settings = embedded_settings(tmp_path / "a.db").model_copy(
        update={"graph": GraphSettings(backend="sqlite", path=tmp_path / "graph.db")}
    )
    mem = await AsyncTieredMemory.from_settings(
        settings, embedder=HashingEmbedder(DIM), clock=ManualClock(NOW)
    )
    try:
        assert not shares_transactions(mem.store, mem.graph)
        stored, batch = _items()
        await mem.add_many(stored, namespace=NS, dedup=False, link=False)
        upsert, seen = mem.graph.upsert_links, []

        async def check_committed(namespace: str, links: Any) -> None:
            other = sqlite3.connect(tmp_path / "a.db")  # sees committed rows only
            try:
                for link in links:
                    (count,) = other.execute(
                        "SELECT count(*) FROM memories WHERE namespace = ? AND id = ?",
                        (namespace, link.source),
                    ).fetchone()
                    seen.append(count)
            finally:
                other.close()
            await upsert(namespace, links)

        mem.graph.upsert_links = check_committed  # type: ignore[method-assign]
        added = await mem.add_many(batch, namespace=NS, dedup=True, link=True)
        assert seen
        assert all(seen)
        assert await mem.links(added[1].id, namespace=NS)
    finally:
        await mem.close()


async def _linked(mem: AsyncTieredMemory, memory_id: str) -> set[str]:
    """The memories linked to `memory_id`."""
    links = await mem.links(memory_id, namespace=NS)
    return {link.target if link.source == memory_id else link.source for link in links}


async def test_the_check_for_gone_ends_looks_up_only_the_stored_ones(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """After writing auto-links, add_many undoes those to a memory that went meanwhile
    (archived by another process between the search and the write). The batch's own
    memories are written in the same transaction, so only the stored ends are looked
    up; a stored end reported gone loses its link."""
    mem = await _embedded(tmp_path / "a.db")
    try:
        stored, batch = _items()
        kept = await mem.add_many(stored, namespace=NS, dedup=False, link=False)
        gone_id = kept[1].id
        asked: list[set[str]] = []
        live_ids = mem.store.live_ids  # type: ignore[attr-defined]

        async def spied(ns: str, ids: list[str]) -> set[str]:
            asked.append(set(ids))
            return set(await live_ids(ns, ids)) - {gone_id}  # as if archived meanwhile

        monkeypatch.setattr(mem.store, "live_ids", spied)
        added = await mem.add_many(batch[1:], namespace=NS, dedup=False, link=True)
        new_ids = {m.id for m in added}
        looked_up = set().union(*asked)
        assert gone_id in looked_up
        assert not looked_up & new_ids
        assert gone_id not in await _linked(mem, added[0].id)
        assert kept[2].id in await _linked(mem, added[1].id)
    finally:
        await mem.close()
