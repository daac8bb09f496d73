"""SIGKILL during replaces (issue 16, item 2): a killed replace keeps the old value.

A child process (`replace_child.py`) keeps replacing 12 keys, archiving some first, and
is killed at a random moment, many times over one file. After each kill every key
holds exactly one value, live or archived (an archive record always with its
verified original), and that value is the last one acknowledged or the one being
written when the kill landed: never nothing, never an older one.

One backend (not on tests/matrix.py): the SIGKILLed child and the atomic replace are
the SQLite file's.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiered_memory import AsyncTieredMemory, HashingEmbedder
from tiered_memory.archive import decode_document, original_key, sha256_hex

from .replace_child import KEYS, NS, value

TRIALS = 8
CHILD = "tests.reliability.replace_child"
ROOT = Path(__file__).resolve().parents[2]


def _allowed(log: str, start: dict[str, int]) -> dict[str, set[int]]:
    """Per key: the versions it may hold now (last acknowledged, and one in flight)."""
    acked = dict(start)
    pending: dict[str, int] = {}
    for line in log.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        step, key, version = parts[0], parts[1], int(parts[2])
        if step == "try":
            pending[key] = version
        elif step == "done":
            acked[key] = version
            pending.pop(key, None)
    return {k: {acked[k], *([pending[k]] if k in pending else [])} for k in acked}


async def _check(db: Path, allowed: dict[str, set[int]]) -> dict[str, int]:
    """Assert the invariants of the module docstring; returns each key's version."""
    held: dict[str, int] = {}
    async with await AsyncTieredMemory.embedded(db, embedder=HashingEmbedder()) as memory:
        live = await memory.store.get_many(NS, KEYS)
        archived = await memory.store.get_archives(NS, KEYS)
        originals = set(await memory.objects.list(NS))
        for key in KEYS:
            assert (key in live) + (key in archived) == 1, f"{key} is lost or doubled"
            if key in live:
                content = live[key].content
            else:
                record = archived[key]
                stored = original_key(key, record.checksum)  # content-addressed
                assert stored in originals, f"{key}: archive record without its original"
                data = await memory.objects.get(NS, stored)
                assert sha256_hex(data) == record.checksum, f"{key}: original does not verify"
                content = decode_document(data, expected_id=key)["content"]
            versions = {v for v in allowed[key] if value(key, v) == content}
            assert versions, f"{key} holds {content!r}, expected one of {sorted(allowed[key])}"
            held[key] = versions.pop()
        # an original without a record is one a killed replace had not deleted yet
        referenced = {original_key(k, r.checksum) for k, r in archived.items()}
        for stored in originals - referenced:
            owner = stored.split("@", 1)[0]
            # a killed replace or archival attempt left it; its memory is still there
            assert owner in live or owner in archived, f"an original of {owner}, nowhere else"
        assert (await memory.stats(namespace=NS)).total == len(KEYS)
    return held


@pytest.mark.slow
def test_sigkill_during_replaces_keeps_every_value(tmp_path: Path, rng: random.Random) -> None:
    db = tmp_path / "replace.db"
    progress = tmp_path / "progress.log"
    held = {key: 0 for key in KEYS}
    seed = asyncio.run(AsyncTieredMemory.embedded(db, embedder=HashingEmbedder()))

    async def fill() -> None:
        try:
            for key in KEYS:
                await seed.upsert(value(key, 0), id=key, namespace=NS)
        finally:
            await seed.close()

    asyncio.run(fill())
    replaced = inside = 0
    for trial in range(TRIALS):
        progress.write_text("")
        first_version = str((trial + 1) * 1_000_000)
        child = subprocess.Popen(
            [sys.executable, "-m", CHILD, str(db), str(progress), first_version],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while "ready" not in progress.read_text() and time.monotonic() < deadline:
                assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
                time.sleep(0.02)
            time.sleep(rng.uniform(0.05, 0.6))
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
        log = progress.read_text()
        replaced += log.count("done ")
        inside += log.rstrip().rsplit("\n", 1)[-1].startswith("try ")
        held = asyncio.run(_check(db, _allowed(log, held)))
    print(
        f"\n[crash/replace] {TRIALS} kills ({inside} inside a replace), "
        f"{replaced} replaces acknowledged, lost=0"
    )
    assert replaced > TRIALS
    assert inside > 0, "no kill landed inside a replace"
