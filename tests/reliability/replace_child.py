"""The child process of the replace crash test: replaces keys until it is killed.

    python -m tests.reliability.replace_child memory.db progress.log 1000

Each step picks a key, and sometimes archives it first (so replaces of archived
memories are killed too), then replaces its value with a new version. Before each
replace it appends "try <key> <version>" to the progress log, after it "done <key>
<version>" (unbuffered `os.write` on an O_APPEND descriptor, so the log is exact up
to the kill). Versions start at the number given, so every trial writes new values.
"""

from __future__ import annotations

import os
import random
import sys

from tiered_memory import HashingEmbedder, TieredMemory

KEYS = [f"key-{i:02d}" for i in range(12)]
NS = "crash"


def value(key: str, version: int) -> str:
    return f"{key} holds version {version} of the shopping list"


def main(db: str, progress: str, first: int) -> int:
    fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    rng = random.Random(first)
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder())
    os.write(fd, b"ready\n")
    version = first
    while True:
        key = rng.choice(KEYS)
        if rng.random() < 0.3:
            live = mem.get(key, namespace=NS)
            if live is not None and live.tier.value != "archived":
                mem.archive([key], namespace=NS)
        version += 1
        os.write(fd, f"try {key} {version}\n".encode())
        mem.upsert(value(key, version), id=key, namespace=NS)
        os.write(fd, f"done {key} {version}\n".encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
