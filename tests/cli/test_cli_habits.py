"""What people expect of a command line (issue 20, item 5): `--version`, `-h`,
`--verbose`/`--quiet`, a `namespaces` command, and `stats` drawing the tier split as a
bar chart that a terminal without UTF-8 can print."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tiered_memory import HashingEmbedder, MemoryType, PathNamespace, Stats, TieredMemory
from tiered_memory.cli import app
from tiered_memory.cli.rendering import bar, print_stats
from tiered_memory.models import TierStats

from .conftest import Cli, Seeded


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# -- --version and -h -----------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    code, stdout, _ = _invoke(flag)
    assert code == 0
    assert stdout.strip() == f"tiered-memory {version('tiered-memory')}"


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["add", "-h"], ["stats", "-h"]])
def test_h_is_help_everywhere(args: list[str]) -> None:
    code, stdout, _ = _invoke(*args)
    assert code == 0
    assert "Usage:" in stdout
    assert "-h, --help" in stdout


# -- --verbose and --quiet -------------------------------------------------------------


def test_verbose_logs_which_store_a_command_opens(cli: Cli) -> None:
    quiet_by_default = cli.runner.invoke(app, ["stats", "--db", str(cli.db)])
    assert "info:" not in quiet_by_default.stderr
    told = cli.runner.invoke(app, ["-v", "stats", "--db", str(cli.db), "-n", "u1"])
    assert told.exit_code == 0, told.stderr
    assert f"info: store: embedded SQLite {cli.db}; namespace 'u1'" in told.stderr
    assert "info:" not in told.stdout  # stdout stays the command's output


def test_log_levels() -> None:
    from tiered_memory.cli.commands import log_level

    assert log_level(0, False) == logging.WARNING
    assert log_level(1, False) == logging.INFO
    assert log_level(2, False) == logging.DEBUG
    assert log_level(0, True) == logging.ERROR


def test_quiet_hides_warnings_and_verbose_shows_them(
    cli: Cli, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph

    async def unreachable(self: object, namespace: str) -> int:
        raise RuntimeError("graph down")

    # stats still answers without the link count, and warns that it is missing
    monkeypatch.setattr(SQLiteAssociationGraph, "count_links", unreachable)
    warned = cli.runner.invoke(app, ["stats", "--db", str(cli.db)])
    assert warned.exit_code == 0
    assert "warning: link count unavailable" in warned.stderr
    quiet = cli.runner.invoke(app, ["--quiet", "stats", "--db", str(cli.db)])
    assert quiet.exit_code == 0
    assert "link count" not in quiet.stderr
    assert "hot" in quiet.stdout


def test_verbose_and_quiet_together_is_a_usage_error() -> None:
    code, stdout, stderr = _invoke("--verbose", "--quiet", "stats")
    assert code == 2
    assert stdout == ""
    assert stderr.strip() == "error: give --verbose or --quiet, not both"


# -- namespaces --------------------------------------------------------------------------


def test_namespaces_lists_each_with_its_counts(cli: Cli) -> None:
    with TieredMemory.embedded(cli.db, embedder=HashingEmbedder()) as mem:
        mem.add("one", namespace="user-1")
        mem.add("two", namespace="user-1", memory_type=MemoryType.FACTUAL)
        gone = mem.add("three", namespace="user-2", importance=0.1)
        mem.archive([gone.id], namespace="user-2")
        mem.add("a store item", namespace=PathNamespace(["memories", "u9"]))
    found = cli.json("namespaces")
    by_name = {n["namespace"]: n for n in found}
    assert by_name["user-1"]["tiers"] == {"hot": 2, "warm": 0, "cold": 0, "archived": 0}
    assert by_name["user-1"]["total"] == 2
    assert by_name["user-2"]["tiers"]["archived"] == 1
    assert by_name["user-2"]["labels"] is None
    path = PathNamespace(["memories", "u9"])
    assert by_name[path]["labels"] == ["memories", "u9"]
    assert [n["namespace"] for n in cli.json("namespaces", "--prefix", "user-")] == [
        "user-1",
        "user-2",
    ]
    shown = cli("namespaces").stdout
    assert "user-1" in shown
    assert '["memories", "u9"]' in shown  # the path's labels, not its hidden mark
    assert "\ufdd0" not in shown
    assert "no namespaces starting with 'x'" in cli("namespaces", "--prefix", "x").stdout


def test_namespaces_of_an_empty_store(cli: Cli) -> None:
    assert cli.json("namespaces") == []
    assert cli("namespaces").stdout.strip() == "no namespaces"


# -- stats as a bar chart ------------------------------------------------------------------


def test_bar_draws_eighths_or_hashes() -> None:
    assert bar(0.5, 10) == "█████     "
    assert bar(1.0, 4) == "████"
    assert bar(0.0, 4) == "    "
    assert bar(1 / 16, 4) == "▎   "  # a quarter of one cell: two eighths
    assert bar(0.5, 10, unicode=False) == "#####     "
    assert bar(2.0, 3) == "███"  # clamped


def _stats() -> Stats:
    from tiered_memory import Tier

    counts = {Tier.HOT: 6, Tier.WARM: 3, Tier.COLD: 1, Tier.ARCHIVED: 0}
    tiers = {t: TierStats(count=n, bytes=100 * n) for t, n in counts.items()}
    return Stats(namespace="user-42", tiers=tiers)


def test_stats_shows_the_tier_split_as_bars() -> None:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    print_stats(_stats(), [], console)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    rows = {line.split()[1]: line for line in shown.splitlines() if "%" in line}
    assert "█" * 12 in rows["hot"]
    assert "60%" in rows["hot"]
    assert "█" * 6 in rows["warm"]
    assert "30%" in rows["warm"]
    assert "█" * 2 in rows["cold"]
    assert "█" not in rows["archived"]
    assert "0%" in rows["archived"]


def test_stats_bars_on_a_terminal_without_utf8() -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    console = Console(file=stream, width=100, color_system=None)
    print_stats(_stats(), [], console)  # raised UnicodeEncodeError on block elements
    stream.flush()
    shown = stream.buffer.getvalue().decode("ascii")  # type: ignore[attr-defined]
    assert "#" * 12 in shown
    assert "60%" in shown


def test_the_command_prints_on_a_terminal_without_utf8(cli: Cli, tmp_path: Path) -> None:
    """The console script on an ASCII terminal: block elements become #, and stored
    text it cannot encode is escaped instead of ending the command with a traceback."""
    with TieredMemory.embedded(cli.db, embedder=HashingEmbedder()) as mem:
        mem.add("café crème brûlée " * 20)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TIERED_MEMORY_")}
    env.update(PYTHONIOENCODING="ascii", LC_ALL="C", LANG="C", COLUMNS="80")
    for command in ("stats", "list", "search"):
        args = [command] + (["crème"] if command == "search" else [])
        proc = subprocess.run(
            [sys.executable, "-m", "tiered_memory.cli", *args, "--db", str(cli.db)],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
        shown = proc.stdout.decode("ascii")  # nothing but ASCII reached the terminal
        if command == "stats":
            assert "#" * 20 in shown
        else:
            assert "caf\\xe9" in shown
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "tiered_memory.cli", "list", "--json", "--db", str(cli.db)],
            capture_output=True,
            env=env,
            timeout=120,
            check=True,
        ).stdout
    )
    assert listed[0]["content"].startswith("café crème")
