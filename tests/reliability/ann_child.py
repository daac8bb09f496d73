"""A writer of one shared SQLite file whose namespace is searched through the HNSW
index (`ann_min_rows` and the buffer's fold threshold tiny): adds, deletes, tier moves,
flags and searches in a loop, closing and reopening now and then (each close saves the
index; a checkpoint prunes the delete log), until killed or for the given seconds.

    python -m tests.reliability.ann_child shared.db seed seconds
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from datetime import datetime, timezone

import numpy as np

from tiered_memory.backends.sqlite import ann
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import LIVE_TIERS, Memory, Tier
from tiered_memory.ports import MemoryPatch

NS = "ann"
DIM = 16
MIN_ROWS = 20
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def memory(memory_id: str, rng: np.random.Generator) -> Memory:
    return Memory(
        id=memory_id,
        namespace=NS,
        content=f"memory {memory_id}",
        embedding=[float(x) for x in rng.normal(size=DIM)],
        created_at=T0,
        updated_at=T0,
        tier_changed_at=T0,
    )


async def main(db: str, seed: int, seconds: float) -> None:
    # a buffer of a few rows, folded into the graph in the background in steps of 2:
    # kills and the other writers land mid-fold too
    ann.FOLD_ROWS, ann.FOLD_CHUNK = 8, 2
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    deadline = time.monotonic() + seconds
    serial = 0
    while time.monotonic() < deadline:
        store = await SQLiteMemoryStore.open(db, verify=False, ann_min_rows=MIN_ROWS)
        try:
            for _ in range(rnd.randint(5, 30)):
                ids = await store.list_ids(NS, limit=100_000)
                op = rnd.random()
                if op < 0.4 or len(ids) < 60:
                    count = rnd.randint(1, 20)
                    batch = [memory(f"s{seed}-{serial + i}", rng) for i in range(count)]
                    serial += count
                    await store.put_many(NS, batch)
                elif op < 0.55:
                    await store.delete_many(NS, rnd.sample(ids, rnd.randint(1, 10)))
                elif op < 0.7:
                    tier = rnd.choice([Tier.HOT, Tier.WARM, Tier.COLD])
                    await store.set_tier(NS, rnd.sample(ids, rnd.randint(1, 30)), tier, T0)
                elif op < 0.8:
                    patch = MemoryPatch(do_not_inject=rnd.random() < 0.5)
                    await store.patch_many(NS, rnd.sample(ids, rnd.randint(1, 5)), patch)
                elif op < 0.84:
                    await store.checkpoint()  # prunes the delete log under the others
                else:
                    query = rng.normal(size=DIM).astype(np.float32)
                    await store.vector_search(NS, query, tiers=LIVE_TIERS, k=5)
        finally:
            await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
