"""Every error a user can cause is one line on stderr and a non-zero exit, never a
traceback, and nothing on stdout (so scripts reading --json never parse an error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiered_memory import cli as cli_module

from .conftest import Cli, Seeded

UNKNOWN = "0123456789abcdef0123456789abcdef"


def _one_line_error(result: object, *needles: str) -> str:
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == 1, stderr  # type: ignore[attr-defined]
    assert result.stdout == ""  # type: ignore[attr-defined]
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ("forget", UNKNOWN),
        ("forget", UNKNOWN, "--hard"),
        ("restore", UNKNOWN),
        ("pin", UNKNOWN),
        ("unpin", UNKNOWN),
        ("promote", UNKNOWN),
        ("demote", UNKNOWN, "cold"),
        ("explain", UNKNOWN),
        ("expand", UNKNOWN),
        ("archive", UNKNOWN),
    ],
)
def test_unknown_id(cli: Cli, seeded: Seeded, args: tuple[str, ...]) -> None:
    _one_line_error(cli(*args, ok=False), UNKNOWN)
    _one_line_error(cli(*args, "--json", ok=False), UNKNOWN)


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--tier", "lukewarm"),
        ("search", "x", "--tier", "lukewarm"),
        ("promote", UNKNOWN, "lukewarm"),
        ("demote", UNKNOWN, "lukewarm"),
    ],
)
def test_bad_tier(cli: Cli, args: tuple[str, ...]) -> None:
    _one_line_error(cli(*args, ok=False), "unknown tier 'lukewarm'", "hot, warm, cold")


def test_wrong_direction_and_pinned_demotion(cli: Cli, seeded: Seeded) -> None:
    _one_line_error(cli("demote", seeded.ids["metric"], "hot", ok=False), "cannot demote")
    _one_line_error(cli("demote", seeded.ids["peanuts"], "cold", ok=False), "pinned")
    _one_line_error(cli("archive", seeded.ids["peanuts"], ok=False), "pinned")
    _one_line_error(cli("expand", seeded.ids["metric"], ok=False), "archived")


@pytest.mark.parametrize(
    "args",
    [
        ("maintain", "--every", "5x"),
        ("maintain", "--every", "0d"),
        ("archive", "--older-than", "ninety days"),
    ],
)
def test_bad_duration(cli: Cli, args: tuple[str, ...]) -> None:
    _one_line_error(cli(*args, ok=False), "bad duration")


def test_bad_input_values(cli: Cli, seeded: Seeded) -> None:
    _one_line_error(cli("add", "   ", ok=False), "empty")
    _one_line_error(cli("add", "x", "--type", "gossip", ok=False), "unknown memory type")
    _one_line_error(cli("add", "x", "--importance", "3", ok=False), "importance")
    _one_line_error(cli("search", "x", "-k", "0", ok=False), "k")
    _one_line_error(cli("maintain", "--runs", "0", ok=False), "--runs")
    _one_line_error(cli("archive", seeded.ids["ava"], "--older-than", "1d", ok=False), "not both")


def test_import_errors(cli: Cli, tmp_path: Path) -> None:
    _one_line_error(cli("import", str(tmp_path / "missing.md"), ok=False), "does not exist")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    _one_line_error(cli("import", str(bad), ok=False), "not a JSON export")
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}', encoding="utf-8")
    _one_line_error(cli("import", str(other), ok=False), "tiered-memory-export")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(cli("import", str(empty), ok=False), "no .md files")


def test_bad_configuration(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "tm.toml"
    config.write_text('[store]\nbackend = "sqlite"\npaht = "x.db"\n', encoding="utf-8")
    _one_line_error(cli("stats", "--config", str(config), ok=False), "store.paht", "unknown key")
    _one_line_error(cli("stats", "--config", str(tmp_path / "nope.toml"), ok=False), "nope.toml")
    monkeypatch.setenv("TIERED_MEMORY_POLICY__BUDGET__HOT", "0.9")
    _one_line_error(cli("stats", ok=False), "policy.budget", "sum to at most 1.0")
    monkeypatch.delenv("TIERED_MEMORY_POLICY__BUDGET__HOT")
    monkeypatch.setenv("TIERED_MEMORY_STOR__BACKEND", "weaviate")
    _one_line_error(cli("stats", ok=False), "TIERED_MEMORY_STOR__BACKEND")


def test_missing_backend_extra_names_it(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERED_MEMORY_OBJECTS__BACKEND", "s3")
    _one_line_error(cli("stats", ok=False), "objects.s3.bucket")


def test_demo_refuses_a_store(cli: Cli) -> None:
    _one_line_error(cli("demo", ok=False), "fresh embedded store")


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stop:
        cli_module.main(argv)
    captured = capsys.readouterr()
    code = stop.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def test_usage_errors_are_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in (
        (["search"], "Missing argument"),
        (["list", "--bogus"], "No such option"),
        (["frobnicate"], "No such command"),
        (["search", "x", "-k", "many"], "--k"),
    ):
        code, out, err = _main(argv, capsys)
        assert code == 2, (argv, err)
        assert out == ""
        assert len(err.splitlines()) == 1, err
        assert err.startswith("error: ")
        assert needle in err


def test_main_runs_a_command_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _main(["stats", "--json", "--db", str(tmp_path / "m.db")], capsys)
    assert code == 0
    assert '"total": 0' in out
    code, _, err = _main(["pin", UNKNOWN, "--db", str(tmp_path / "m.db")], capsys)
    assert code == 1
    assert err.count("\n") == 1
    assert UNKNOWN in err
