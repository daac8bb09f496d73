"""No input makes the CLI print a traceback (issue 17): a bad value is one `error:`
line on stderr and a non-zero exit; a read-only store still answers the reading
commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tiered_memory import HashingEmbedder, TieredMemory
from tiered_memory.cli import app

from .conftest import Cli, Seeded
from .test_errors import _one_line_error

HUGE = "99999999999999999999"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("list", "--limit", HUGE), "limit"),
        (("list", "--limit", str(2**63)), "limit"),
        (("search", "x", "-k", HUGE), "k"),
        (("recall", "x", "--max-items", HUGE), "max_items"),
        (("archive", "--older-than", "99999999999d"), "duration"),
        (("archive", "--older-than", "9" * 400 + "d"), "duration"),
        (("maintain", "--every", "99999999999w"), "duration"),
        (("maintain", "--every", "1e400d"), "duration"),
        (("list", "--after", ""), "after"),
    ],
)
def test_huge_numbers_and_durations(
    cli: Cli, seeded: Seeded, args: tuple[str, ...], needle: str
) -> None:
    _one_line_error(cli(*args, ok=False), needle)


@pytest.mark.parametrize("top", ["[]", '"a string"', "null", "42", '[{"memories": []}]'])
def test_import_of_a_json_file_that_is_not_an_object(cli: Cli, tmp_path: Path, top: str) -> None:
    path = tmp_path / "weird.json"
    path.write_text(top, encoding="utf-8")
    _one_line_error(cli("import", str(path), ok=False), "export")
    assert not cli.db.exists() or cli.json("stats")["total"] == 0


@pytest.mark.parametrize(
    "memories", ['"nope"', "null", "5", '[1, "two"]'], ids=["string", "null", "int", "list"]
)
def test_import_of_a_malformed_export_has_no_traceback(
    cli: Cli, tmp_path: Path, memories: str
) -> None:
    path = tmp_path / "malformed.json"
    path.write_text(
        f'{{"format": "tiered-memory-export", "version": 1, "memories": {memories}}}',
        encoding="utf-8",
    )
    result = cli("import", str(path), ok=False)
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: ")


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_namespace_is_refused_not_the_default(cli: Cli, seeded: Seeded, blank: str) -> None:
    """`-n ""` used to mean the default namespace: a script with an unset variable
    (`-n "$USER_ID"`) would read and write someone else's memories."""
    for args in (("stats",), ("list",), ("add", "x"), ("search", "x")):
        _one_line_error(cli(*args, "-n", blank, ok=False), "namespace")
    assert cli.json("stats")["total"] == len(seeded.ids)


# -- a read-only store -------------------------------------------------------------------


def _lock(paths: list[Path]) -> bool:
    """Make files and folders read-only, even for root (who ignores permissions):
    `chattr +i` where it works, else the permission bits. False if neither holds."""
    if os.geteuid() != 0:
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return True
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    done = subprocess.run([chattr, "+i", *map(str, paths)], capture_output=True)
    return done.returncode == 0


def _unlock(paths: list[Path]) -> None:
    if os.geteuid() != 0:
        for p in paths:
            p.chmod(0o755 if p.is_dir() else 0o644)
        return
    chattr = shutil.which("chattr")
    if chattr is not None:
        subprocess.run([chattr, "-i", *map(str, paths)], capture_output=True)


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "memory.db"
    with TieredMemory.embedded(db, embedder=HashingEmbedder()) as mem:
        mem.add("the boiler was serviced in May")
    locked = [db, folder]
    if not _lock(locked):
        _unlock(locked)
        pytest.skip("cannot make a file read-only here (root without chattr +i)")
    try:
        yield db
    finally:
        _unlock(locked)


def test_reading_commands_work_on_a_read_only_store(
    cli: Cli, read_only_store: Path, tmp_path: Path
) -> None:
    db = read_only_store
    assert cli.json("stats", db=db)["total"] == 1
    assert len(cli.json("list", db=db)) == 1
    assert cli.json("search", "boiler", db=db)[0]["memory"]["content"].startswith("the boiler")
    out = tmp_path / "export.json"
    cli("export", "--output", str(out), db=db)
    assert len(json.loads(out.read_text(encoding="utf-8"))["memories"]) == 1
    line = _one_line_error(cli("add", "a new memory", db=db, ok=False), "read-only")
    assert "corrupt" not in line


# -- any argument --------------------------------------------------------------------------

COMMANDS = {
    "add": ["TEXT", "--type", "--importance", "--source", "--pin"],
    "search": ["TEXT", "--tier", "-k", "--deep"],
    "recall": ["TEXT", "--budget", "--max-items", "--deep"],
    "list": ["--tier", "--limit", "--after"],
    "stats": [],
    "explain": ["TEXT", "--query"],
    "forget": ["TEXT", "--hard"],
    "restore": ["TEXT"],
    "pin": ["TEXT"],
    "unpin": ["TEXT"],
    "promote": ["TEXT", "TEXT"],
    "demote": ["TEXT", "TEXT"],
    "archive": ["TEXT", "--older-than", "--preview"],
    "expand": ["TEXT"],
    "maintain": ["--dry-run", "--runs"],
}
FLAGS = {"--pin", "--deep", "--hard", "--preview", "--dry-run"}

values = st.one_of(
    st.sampled_from(["", " ", "-1", "0", HUGE, "1e400", "nan", "inf", "-inf", "9" * 50 + "d"]),
    st.sampled_from(["hot", "archived", "90d", "0d", "1", "0.5", "-", "--", "\x7f", "é"]),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=0, max_size=12
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_argument_makes_a_traceback(cli: Cli, seeded: Seeded, data: st.DataObject) -> None:
    command = data.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    argv = [command]
    for option in COMMANDS[command]:
        if not data.draw(st.booleans(), label=f"use {option}"):
            continue
        if option in FLAGS:
            argv.append(option)
            continue
        value = data.draw(values, label=option)
        argv.extend([value] if option == "TEXT" else [option, value])
    if data.draw(st.booleans(), label="namespace"):
        argv.extend(["-n", data.draw(values, label="namespace value")])
    result = CliRunner().invoke(app, [*argv, "--db", str(cli.db)], catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        argv,
        repr(result.exception),
    )
    assert "Traceback" not in result.stderr, argv
    if result.exit_code != 0:
        assert result.stderr.startswith(("error: ", "Usage: ")), (argv, result.stderr)
