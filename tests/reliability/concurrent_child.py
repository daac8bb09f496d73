"""One of the two processes of the shared-file test: writers, readers, a sweeper and an
archiver (4 + 4 + 1 + 1 threads) on the SQLite file given, for the given number of
seconds.

    python -m tests.reliability.concurrent_child shared.db p1 2.0

Prints one JSON line: the memories it added, its operation counts and its errors.
"""

from __future__ import annotations

import json
import sys

from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

from .harness import T0
from .workload import Ledger, run_threads


def main(db: str, name: str, duration: float) -> int:
    ledger = Ledger()
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0))
    try:
        run_threads(mem, ledger, name, 4, 4, duration)
    finally:
        mem.close()
    result = {
        "added": ledger.added,
        "ops": ledger.ops,
        "errors": ledger.errors,
        "archived_while_writing": ledger.archived_while_writing,
        "archived_explicitly": ledger.archived_explicitly,
    }
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
