"""Whether an HNSW index of the embedded store mirrors its file: each live row of the
namespace once, with the file's vector, and no other row. Shared by the contract tests
of `backends.sqlite.ann` and the killed and concurrent writers of tests/reliability."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from tiered_memory.backends.sqlite.ann import AnnIndex


def live_vectors(path: Path, namespace: str) -> dict[int, np.ndarray]:
    """The namespace's unit vectors by pk, read from the file (archived rows keep none)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT m.pk, v.embedding FROM memories AS m JOIN memory_vectors AS v "
            "ON v.pk = m.pk WHERE m.namespace = ?",
            (namespace,),
        ).fetchall()
    finally:
        conn.close()
    out = {}
    for pk, blob in rows:
        vector = np.frombuffer(blob, dtype="<f4")
        out[int(pk)] = vector / np.linalg.norm(vector)
    return out


def assert_mirrors(index: AnnIndex, path: Path, namespace: str) -> None:
    keys, rows = index.contents()
    live = live_vectors(path, namespace)
    assert sorted(keys.tolist()) == sorted(live)  # each live row once, no other
    # float16 graph rows; a pk the file reused must not keep its old vector
    assert np.abs(rows - np.stack([live[int(key)] for key in keys])).max() < 2e-3
