"""Telemetry is optional (issue 21, item 1): with `opentelemetry` not installed, a
memory adds, recalls, sweeps with archival and expands as always, and nothing of
opentelemetry is imported. Run in a subprocess where the package is hidden (a
`sys.modules` entry of None makes every import of it fail, as if not installed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    sys.modules["opentelemetry"] = None  # not installed, as far as imports can tell

    from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, telemetry

    async def main(path):
        clock = ManualClock()
        amem = await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(), clock=clock)
        memory = await amem.add("Ava's locker is 17", importance=0.1)
        await amem.recall("locker")
        clock.advance(days=4)
        await amem.maintain()
        clock.advance(days=200)
        report = await amem.maintain()
        assert report.count("cold_to_archived") == 1, report
        await amem.expand(memory.id)
        stats = await amem.stats()
        assert stats.expansions_30d == 1 and stats.last_sweep is not None
        await amem.close()

    asyncio.run(main(sys.argv[1]))
    assert not telemetry.available() and not telemetry.tracing()
    loaded = sorted(m for m, mod in sys.modules.items()
                    if m.startswith("opentelemetry") and mod is not None)
    assert not loaded, loaded
    print("ok")
    """
)


def test_without_opentelemetry_nothing_of_it_is_imported(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
