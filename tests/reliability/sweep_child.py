"""A process that runs one sweep on the SQLite file given, for the snapshot tests.

    python -m tests.reliability.sweep_child shared.db

Its policy has no consolidation, so the sweep only moves and archives: the number of
memories (live plus archived) stays what it was; and no per-run cap on archival, so one
sweep archives everything due. Prints the sweep's transitions as one JSON line.
"""

from __future__ import annotations

import json
import sys

from tiered_memory import HashingEmbedder, ManualClock, TieredMemory
from tiered_memory.policy import ArchivalPolicy, ConsolidationPolicy, Policy

from .harness import NOW, T0

POLICY = Policy(
    consolidation=ConsolidationPolicy(enabled=False),
    archival=ArchivalPolicy(batch_size=100_000),
)


def main(db: str) -> int:
    mem = TieredMemory.embedded(
        db, embedder=HashingEmbedder(), clock=ManualClock(T0), policy=POLICY
    )
    try:
        report = mem.maintain(now=NOW)
    finally:
        mem.close()
    json.dump({"moved": report.moved, "errors": report.errors}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
