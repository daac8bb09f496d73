"""A tour of tiered-memory on the embedded default: no server, no network, no API key.

    python examples/quickstart.py

It writes a SQLite file and an archive folder in a temporary directory, moves a
simulated clock forward and shows what the memory recalls, with the token budget
split by tier.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tiered_memory import HashingEmbedder, ManualClock, MemoryType, TieredMemory


def main() -> None:
    clock = ManualClock(datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc))
    folder = Path(tempfile.mkdtemp(prefix="tiered-memory-"))
    ns = "user-42"
    with TieredMemory.embedded(
        folder / "memory.db", embedder=HashingEmbedder(), clock=clock
    ) as mem:
        print(f"embedded store: {folder / 'memory.db'}\n")
        mem.add(
            "Always answer in British English",
            namespace=ns,
            pinned=True,
            memory_type=MemoryType.PROCEDURAL,
        )
        ava = mem.add(
            "User's daughter is called Ava",
            namespace=ns,
            memory_type=MemoryType.FACTUAL,
            importance=0.8,
        )
        mem.add(
            "Ava plays the violin and has lessons on Tuesdays",
            namespace=ns,
            memory_type=MemoryType.FACTUAL,
        )
        mem.add("Project Falcon ships on March 3", namespace=ns, memory_type=MemoryType.PROJECT)
        mem.add("Had pizza for lunch with the team", namespace=ns)

        for hit in mem.search("daughter name", namespace=ns, k=3):
            print(f"  {hit.score:.3f}  [{hit.tier.value}]  {hit.memory.content}")

        clock.advance(days=4)  # past HOT's 72 h: the sweep moves what was not used
        report = mem.maintain()
        print(f"\nfour days later the sweep moved: {report.moved}")
        inj = mem.recall(
            "what is my kid called and what does she play?", namespace=ns, budget_tokens=60
        )
        print(f"\nrecall within 60 tokens ({inj.tokens} used):")
        print(inj.text)
        print("tokens by tier:", {t.value: n for t, n in inj.by_tier.items() if n})

        e = mem.explain(ava.id, query="daughter", namespace=ns)
        print("\nexplain:", e.formula)
        stats = mem.stats(namespace=ns)
        print("stats:", {t.value: s.count for t, s in stats.tiers.items()}, f"links={stats.links}")


if __name__ == "__main__":
    main()
