"""The CLI against embedded stores in a temporary folder, never the user's data folder.

Memories are seeded through the Python API with a clock in the past, so the CLI (which
runs on the wall clock) sees them as old: that is how the sweep and archival commands
get something to move without a simulated clock on the command line.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, MemoryType, TieredMemory
from tiered_memory.cli import app
from tiered_memory.cli import commands as cli_commands
from tiered_memory.cli.demo import player as demo_player

# Old enough for every tier rule, younger than a year so that the forced archival of
# memories over `TierPolicy.force_archive_age` (365 days) does not take them all; relative
# to the wall clock, which the CLI runs on, so the fixture does not age.
PAST = datetime.now(timezone.utc) - timedelta(days=300)

# The engine's parts: what the command line must not reach into (it calls methods).
ENGINE_PARTS = frozenset(
    {
        *("store", "graph", "objects", "summarizer", "embedder", "tokens"),
        *("retriever", "archiver", "archival", "sweep", "dimensions"),
    }
)


class SeenByTheCli:
    """A memory as the command line may use it: its public methods and settings. Code
    of the command line reaching for a part of the engine or a private name fails the
    test; the core modules it hands the memory to (export, backup) may."""

    def __init__(self, memory: AsyncTieredMemory) -> None:
        self._memory = memory

    def __getattr__(self, name: str) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("tiered_memory.cli") and (
            name.startswith("_") or name in ENGINE_PARTS
        ):
            raise AssertionError(f"{caller} reached into the engine: memory.{name}")
        return getattr(self._memory, name)


class CliOpens:
    """Stands in for `AsyncTieredMemory` where the command line and the demo open one."""

    @staticmethod
    async def from_settings(*args: Any, **kwargs: Any) -> SeenByTheCli:
        return SeenByTheCli(await AsyncTieredMemory.from_settings(*args, **kwargs))

    @staticmethod
    async def embedded(*args: Any, **kwargs: Any) -> SeenByTheCli:
        return SeenByTheCli(await AsyncTieredMemory.embedded(*args, **kwargs))


@pytest.fixture(autouse=True)
def public_api_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command in these tests runs over the public API only (issue 18.4)."""
    monkeypatch.setattr(cli_commands, "AsyncTieredMemory", CliOpens)
    monkeypatch.setattr(demo_player, "AsyncTieredMemory", CliOpens)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No stray TIERED_MEMORY_* variable, config file or data folder of the machine."""
    import os

    for key in list(os.environ):
        if key.upper().startswith("TIERED_MEMORY_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("COLUMNS", "200")


@dataclass
class Cli:
    db: Path
    runner: CliRunner

    def __call__(self, *args: str, db: Path | None = None, ok: bool = True) -> Result:
        argv = [*args, "--db", str(db or self.db)]
        result = self.runner.invoke(app, argv, catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, (argv, result.stdout, result.stderr)
        return result

    def json(self, *args: str, db: Path | None = None) -> Any:
        result = self(*args, "--json", db=db)
        return json.loads(result.stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(db=tmp_path / "memory.db", runner=CliRunner())


@dataclass
class Seeded:
    """Ids of the seeded memories, by name."""

    ids: dict[str, str]


@pytest.fixture
def seeded(cli: Cli) -> Seeded:
    """Memories made long ago: some used, one pinned, one never used and unimportant."""
    clock = ManualClock(PAST)
    mem = TieredMemory.embedded(cli.db, embedder=HashingEmbedder(), clock=clock)
    try:
        ids = {
            "metric": mem.add(
                "Always give measurements in metric units",
                memory_type=MemoryType.PROCEDURAL,
                importance=0.7,
            ).id,
            "ava": mem.add(
                "Sam's daughter Ava is seven and loves dinosaurs",
                memory_type=MemoryType.FACTUAL,
                importance=0.8,
            ).id,
            "parking": mem.add(
                "Parked on level 3, bay C12, at the Trinity centre",
                memory_type=MemoryType.EPISODIC,
                importance=0.1,
            ).id,
            "peanuts": mem.add(
                "Sam is allergic to peanuts",
                memory_type=MemoryType.FACTUAL,
                importance=1.0,
                pinned=True,
            ).id,
        }
        mem.link(ids["metric"], ids["ava"], weight=0.6)
    finally:
        mem.close()
    return Seeded(ids)
