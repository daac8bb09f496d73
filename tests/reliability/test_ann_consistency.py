"""The HNSW index of the embedded store stays consistent with its file when the
processes writing it are killed (SIGKILL, at random moments: mid-write, mid-save) and
when several write it at once: after each, the index a store opened on the file
holds is the file's live vectors, each once and no other, and it answers every vector
search as an exact scan does. `ann_child.py` runs with a tiny `ann_min_rows`, so every
search and every save goes through the index.

The searches here read the graph exhaustively (`hnsw.EXHAUSTIVE_ROWS`): the children write
thousands of rows, past which the graph is searched approximately and may miss a
top-5 row now and then (CI once did, at about 5k rows); a consistency test must tell a
row the index lost from one the HNSW search skipped. The benchmark measures recall."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.ann_mirror import assert_mirrors
from tiered_memory.backends.sqlite import ann, hnsw
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import LIVE_TIERS, Tier
from tiered_memory.ports import SearchFilter

from .ann_child import DIM, MIN_ROWS, NS

pytestmark = pytest.mark.skipif(
    not ann.available(), reason="faiss (the ann extra) is not installed"
)
ROOT = Path(__file__).resolve().parents[2]


def _child(db: Path, seed: int, seconds: float) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "core"), str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.ann_child", str(db), str(seed), str(seconds)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _log_pruned(db: Path) -> bool:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT min(seq) FROM vector_deletes").fetchone()[0]) > 1
    finally:
        conn.close()


async def _answers_as_a_scan(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hnsw, "EXHAUSTIVE_ROWS", 1 << 30)
    store = await SQLiteMemoryStore.open(db, ann_min_rows=MIN_ROWS)
    try:
        queries = np.random.default_rng(3).normal(size=(25, DIM)).astype(np.float32)
        for tiers in (LIVE_TIERS, frozenset({Tier.HOT, Tier.WARM})):
            for q in queries:
                got = await store.vector_search(NS, q, tiers=tiers, k=5)
                want = await store.vector_search(
                    NS, q, tiers=tiers, k=5, filters=SearchFilter(exact=True)
                )
                assert [s.memory.id for s in got] == [s.memory.id for s in want]
        assert NS in store._vectors._anns  # the index answered, not a scan
        assert_mirrors(store._vectors._anns[NS], db, NS)
    finally:
        await store.close()


async def test_killed_writers_leave_an_index_the_next_open_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "crash.db"
    rnd = random.Random(5)
    seeding = _child(db, 99, 3.0)  # enough rows for the index, before the first kill
    assert seeding.wait(timeout=120) == 0
    for trial in range(6):
        child = _child(db, trial, 60.0)
        await asyncio.sleep(rnd.uniform(1.0, 3.0))
        child.send_signal(signal.SIGKILL)
        child.wait()
        await _answers_as_a_scan(db, monkeypatch)
    assert list((tmp_path / "crash.db.ann").glob("*.hnsw"))  # saves happened
    assert _log_pruned(db)  # and checkpoints pruned the delete log under the others


async def test_concurrent_writers_each_keep_their_index_in_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "shared.db"
    children = [_child(db, seed, 6.0) for seed in (101, 102, 103)]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
    await _answers_as_a_scan(db, monkeypatch)
    assert _log_pruned(db)
