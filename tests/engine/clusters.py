"""A store that archives clusters of near-duplicates, and one such cluster due for
archival: the setup of the engine tests about cluster summaries."""

from __future__ import annotations

from pathlib import Path

from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    ConsolidationPolicy,
    HashingEmbedder,
    ManualClock,
    Memory,
    Policy,
)

CLUSTERING = Policy(consolidation=ConsolidationPolicy(archive_clusters=True))
RUNS = (
    "Went for a run in the park on Monday morning",
    "Went for a run in the park on Tuesday morning",
)


async def open_clustering(
    memories: MemoryFactory, path: Path, clock: ManualClock
) -> AsyncTieredMemory:
    return await memories.open(path, embedder=HashingEmbedder(), clock=clock, policy=CLUSTERING)


async def due_cluster(amem: AsyncTieredMemory, clock: ManualClock, namespace: str) -> list[Memory]:
    """Two unimportant near-duplicates in `namespace`, swept COLD, then left until the
    next sweep archives them as one cluster."""
    added = await amem.add_many(
        [{"content": t, "importance": 0.1} for t in RUNS], namespace=namespace, dedup=False
    )
    clock.advance(days=4)
    await amem.maintain()
    clock.advance(days=200)
    return added
