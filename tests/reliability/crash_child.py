"""The child process of the crash harness: one maintenance sweep (with archival) and,
with `--race`, an explicit `archive()` of every memory the sweep will archive, one at
a time in a random order, racing the sweep for them (issue 16).

Run as a script by `harness.py`, which SIGKILLs it at random moments. Every call the
archival pipeline makes to a port is written to a progress log before it starts
("put>") and after it returns ("put<"), with `os.write` on an O_APPEND descriptor:
unbuffered, so the last line tells the parent where the kill landed.

    python crash_child.py --db memory.db --now 2027-02-05T00:00:00+00:00 \
        --progress progress.log --objects local:/path/to/folder
    python crash_child.py ... --objects s3:http://127.0.0.1:5000:bucket-name
    python crash_child.py ... --race archivable.json   # [[namespace, id], ...]

On success it prints the MaintenanceReport as JSON on stdout and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from tiered_memory import AsyncTieredMemory, HashingEmbedder, NotFoundError, Policy
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.locks import FileLock
from tiered_memory.ports import ObjectStore
from tiered_memory.summarizers.extractive import ExtractiveSummarizer

# The calls traced, per port: every step of the pipeline and the sweep's tier moves.
TRACED = {
    "store": (
        "set_tier",
        "patch_many",
        "put_many",
        "archive_many",
        "claim_archival",
        "note_archival",
        "release_archival",
    ),
    "graph": ("drop_nodes", "upsert_links"),
    "objects": ("put", "head"),
    "summarizer": ("summarize",),
}


class Progress:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def mark(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())


class Traced:
    """Forwards everything to `inner`; the traced coroutine methods log around the call."""

    def __init__(self, inner: Any, names: tuple[str, ...], progress: Progress) -> None:
        self._inner = inner
        self._names = frozenset(names)
        self._progress = progress

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._names:
            return attr
        return self._wrap(name, attr)

    def _wrap(
        self, name: str, method: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            self._progress.mark(f"{name}>")
            result = await method(*args, **kwargs)
            self._progress.mark(f"{name}<")
            return result

        return call


def object_store(spec: str) -> ObjectStore:
    kind, _, rest = spec.partition(":")
    if kind == "local":
        return LocalFolderObjectStore(rest)
    if kind == "s3":
        from tiered_memory.backends.s3.objects import S3ObjectStore

        endpoint, _, bucket = rest.rpartition(":")
        return S3ObjectStore(
            bucket,
            endpoint_url=endpoint,
            region_name="us-east-1",
            path_style=True,
            max_attempts=3,
            connect_timeout=2.0,
            read_timeout=10.0,
        )
    raise SystemExit(f"unknown object store {spec!r}")


async def main(args: argparse.Namespace, targets: list[tuple[str, str]]) -> int:
    progress = Progress(args.progress)
    store = await SQLiteMemoryStore.open(args.db)
    graph = SQLiteAssociationGraph(store.database)
    engine = AsyncTieredMemory(
        store=Traced(store, TRACED["store"], progress),
        graph=Traced(graph, TRACED["graph"], progress),
        objects=Traced(object_store(args.objects), TRACED["objects"], progress),
        summarizer=Traced(ExtractiveSummarizer(), TRACED["summarizer"], progress),
        embedder=HashingEmbedder(),
        policy=Policy(),
        sweep_lock=FileLock(args.db + ".sweep.lock"),
    )
    try:
        progress.mark("ready")
        sweep = engine.maintain(now=datetime.fromisoformat(args.now))
        if targets:
            report, raced = await asyncio.gather(sweep, race(engine, targets))
            report.errors.extend(raced)
        else:
            report = await sweep
        progress.mark("done")
    finally:
        await engine.close()
    sys.stdout.write(report.model_dump_json() + "\n")
    return 0


def read_targets(manifest: str | None) -> list[tuple[str, str]]:
    if manifest is None:
        return []
    listed = json.loads(Path(manifest).read_text(encoding="utf-8"))
    return [(str(ns), str(memory_id)) for ns, memory_id in listed]


async def race(engine: AsyncTieredMemory, targets: list[tuple[str, str]]) -> list[str]:
    """Archive each of `targets` explicitly, in a random order, while the sweep runs;
    the errors met (one archived already, or being archived by the sweep, is none)."""
    targets = random.sample(targets, len(targets))
    errors: list[str] = []
    for ns, memory_id in targets:
        try:
            await engine.archive([memory_id], namespace=ns, reason="race")
        except NotFoundError as e:
            if "archived" not in str(e):  # archived already: by the sweep, or a run before
                errors.append(f"archive {ns}/{memory_id}: {e}")
        except Exception as e:
            errors.append(f"archive {ns}/{memory_id}: {type(e).__name__}: {e}")
    return errors


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--now", required=True)
    parser.add_argument("--progress", required=True)
    parser.add_argument("--objects", required=True)
    parser.add_argument("--race", help="a JSON list of [namespace, id] to archive() meanwhile")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments, read_targets(arguments.race))))
