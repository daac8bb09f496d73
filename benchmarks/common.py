"""Shared helpers: timing, percentiles, the machine, markdown tables, result files."""

from __future__ import annotations

import gc
import json
import os
import platform
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def percentile_ms(samples: Sequence[float], q: float) -> float:
    """The q-th percentile of durations given in seconds, in milliseconds."""
    if not samples:
        return float("nan")
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q) * 1000.0)


class Stopwatch:
    """Collects the wall time of repeated calls."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    @contextmanager
    def time(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.samples.append(time.perf_counter() - start)

    @property
    def total(self) -> float:
        return float(sum(self.samples))

    def p(self, q: float) -> float:
        return percentile_ms(self.samples, q)


def rss_mb() -> float:
    """Resident memory of this process, in MiB (psutil)."""
    import psutil

    gc.collect()
    return float(psutil.Process().memory_info().rss) / 2**20


def private_mb() -> float:
    """Resident memory of this process that is its own, in MiB: RSS minus the pages it
    shares with the OS page cache (on Linux, the pages of memory-mapped files: an
    SQLite file read through its map counts in RSS, though the kernel may reclaim
    those pages at any time and would cache them anyway). RSS where psutil cannot tell."""
    import psutil

    gc.collect()
    info = psutil.Process().memory_info()
    return float(info.rss - getattr(info, "shared", 0)) / 2**20


def written_bytes() -> float:
    """Bytes this process has had written to storage so far: the WAL and the
    checkpoints' copies back into the file included; NaN where the platform does not
    count them. Unlike a time, the same on a busy machine as on a quiet one.

    On Linux, `/proc/self/io`'s `write_bytes` less its `cancelled_write_bytes`: the
    kernel counts a page when it is dirtied, not when it reaches the disk, and counts it
    back as cancelled when its file is deleted or truncated first. SQLite spills a
    statement's or a savepoint's journal past 64 KiB to a temporary file that it deletes
    at the commit: at 1M memories, 2,000 adds with dedup and links dirtied 38 MB of them,
    none of it ever written, which psutil's `write_bytes` alone counted (21.9 KiB a
    memory against 11.3 that reached the file and its WAL). Elsewhere psutil's count."""
    try:
        with open("/proc/self/io") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        return float(int(fields["write_bytes"]) - int(fields["cancelled_write_bytes"]))
    except (OSError, KeyError, ValueError):
        pass
    import psutil

    counters = getattr(psutil.Process(), "io_counters", None)
    if counters is None:
        return float("nan")
    try:
        return float(counters().write_bytes)
    except (psutil.Error, OSError):
        return float("nan")


def warm_file(path: Path) -> float:
    """Read `path` (and its `-wal`) once so the OS page cache holds it, as on a server
    that uses its store; returns the seconds it took.

    Why: this benchmark's VM pages out file pages left untouched for about a minute
    (DAMON `pageout`, with no free-memory watermark), so after the minutes of a 1M
    index build every row a search re-scored was a disk read: vector search p50 went
    from ~2 ms to 6-40 ms from one run to the next, and the timings measured the
    virtual disk. The latencies below are taken with the file cached; how long the
    read took says what a cold start pays instead (and `open_first_answer_s` times an
    open and first search without it).
    """
    start = time.perf_counter()
    for file in (path, path.with_name(path.name + "-wal")):
        if not file.exists():
            continue
        with open(file, "rb", buffering=0) as handle:
            while handle.read(8 << 20):
                pass
    return time.perf_counter() - start


def settle_writes() -> float:
    """Write out every dirty page the machine holds (`os.sync`, where there is one);
    returns the seconds it took.

    Why: the sweep's commit syncs the file, and a sync waits behind the writeback of
    whatever was written just before: on a 1M copy, the same sweep took 8.5-11.8 s
    right after a 3 GB copy and 7.2-8.2 s once it was synced. The scale benchmark
    closes its store (saving the HNSW index, ~900 MB at 1M) shortly before it times
    the sweep. The sweep's own writes and syncs stay in its time; an earlier phase's
    do not.
    """
    start = time.perf_counter()
    sync = getattr(os, "sync", None)
    if sync is not None:
        sync()
    return time.perf_counter() - start


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
    }
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import sqlite3

    info["sqlite"] = sqlite3.sqlite_version
    return info


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            if value != value:  # NaN
                return "–"
            if abs(value) >= 100:
                return f"{value:,.0f}"
            if abs(value) >= 10:
                return f"{value:.1f}"
            return f"{value:.2f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(name: str, payload: dict[str, Any], out: Path = RESULTS) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "machine": machine(),
        **payload,
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    return path


def status(message: str) -> None:
    """Progress on stderr, so stdout keeps only the tables."""
    import sys

    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
