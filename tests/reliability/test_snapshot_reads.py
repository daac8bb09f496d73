"""Reads are snapshots (issue 16, item 8).

One process sweeps a store of 1,500 unimportant memories (HOT -> COLD, then archived
in batches) while this one counts and exports the namespace over and over. Before,
`stats()` read the live counts and the archive count in two statements, and an export
read page after page: a reader saw 3,064 memories of 3,000, and exports repeated ids
(live in one page, archived in a later one), so they could not be imported back. Now
each count and each export reads one snapshot of the file.

One backend (not on tests/matrix.py): the snapshot is a SQLite read transaction, and
the sweeping process opens the same file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiered_memory import HashingEmbedder, ManualClock, MemoryInput, Tier, TieredMemory
from tiered_memory.transfer import export_namespace

from .harness import T0
from .sweep_child import POLICY

N = 1_500
NS = "reader"
ROOT = Path(__file__).resolve().parents[2]


def _seed(db: Path) -> None:
    mem = TieredMemory.embedded(
        db, embedder=HashingEmbedder(), clock=ManualClock(T0), policy=POLICY
    )
    try:
        items = [MemoryInput(content=f"note {i}: nothing much", importance=0.1) for i in range(N)]
        for start in range(0, N, 500):
            mem.add_many(items[start : start + 500], namespace=NS, dedup=False)
    finally:
        mem.close()


@pytest.mark.slow
def test_counts_and_exports_read_one_snapshot_while_another_process_sweeps(
    tmp_path: Path,
) -> None:
    db = tmp_path / "shared.db"
    _seed(db)
    reader = TieredMemory.embedded(
        db, embedder=HashingEmbedder(), clock=ManualClock(T0), policy=POLICY
    )
    totals: list[int] = []
    archived_seen: set[int] = set()
    exports: list[tuple[int, int]] = []  # (ids in the document, distinct ids)
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.sweep_child", str(db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while child.poll() is None and time.monotonic() < deadline:
            for _ in range(5):
                stats = reader.stats(namespace=NS)
                totals.append(stats.total)
                archived_seen.add(stats.tiers[Tier.ARCHIVED].count)
            document = reader.run(export_namespace(reader.aio, NS))
            ids = [m["id"] for m in document["memories"]]
            ids += [a["record"]["id"] for a in document["archives"]]
            exports.append((len(ids), len(set(ids))))
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        reader.close()
    assert child.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["moved"].get("cold_to_archived") == N
    mid_sweep = sorted(n for n in archived_seen if 0 < n < N)
    print(
        f"\n[snapshot reads] {len(totals)} counts, {len(exports)} exports during the sweep, "
        f"{len(mid_sweep)} distinct mid-archival states seen; totals {min(totals)}.."
        f"{max(totals)}, largest export {max(n for n, _ in exports)} ids"
    )
    assert mid_sweep, "no read landed while the sweep was archiving; the test proved nothing"
    wrong_counts = sorted(set(totals) - {N})
    wrong_exports = [e for e in exports if e != (N, N)]  # (ids, distinct ids)
    assert (wrong_counts, wrong_exports) == ([], [])
