"""One of two processes racing to archive the same due memories of one SQLite file:
an explicit `archive()` of each, one at a time, in an order shared with the other
process (so both ask for the same memory at about the same moment), alongside sweeps
that archive the same memories.

    python -m tests.reliability.archival_child shared.db p1

Prints one JSON line: the archivals `archive()` and the sweeps reported, and errors.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, NotFoundError

from .workload import SWEEP_NOW

NAMESPACE = "race"


async def main(db: str, name: str) -> int:
    amem = await AsyncTieredMemory.embedded(
        db, embedder=HashingEmbedder(), clock=ManualClock(SWEEP_NOW)
    )
    by_archive: list[str] = []
    by_sweeps = 0
    errors: list[str] = []
    done = asyncio.Event()
    try:
        ids = await amem.store.list_ids(NAMESPACE, limit=100_000)
        random.Random(db).shuffle(ids)  # the same order in both processes

        async def archiver() -> None:
            try:
                for memory_id in ids:
                    try:
                        if await amem.archive([memory_id], namespace=NAMESPACE):
                            by_archive.append(memory_id)
                    except NotFoundError as e:  # archived by the other side already
                        if "archived" not in str(e):
                            raise
                    await asyncio.sleep(0)
            except Exception as e:
                errors.append(f"{name} archive: {type(e).__name__}: {e}")
            finally:
                done.set()

        async def sweeper() -> None:
            nonlocal by_sweeps
            while not done.is_set():
                report = await amem.maintain(now=SWEEP_NOW)
                errors.extend(f"{name} sweep: {e}" for e in report.errors)
                by_sweeps += report.count("cold_to_archived")
                await asyncio.sleep(0.005)

        await asyncio.gather(archiver(), sweeper())
    finally:
        await amem.close()
    result = {"by_archive": by_archive, "by_sweeps": by_sweeps, "errors": errors}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
