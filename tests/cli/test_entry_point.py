"""The console script named in pyproject.toml resolves to the CLI package's `main`, and
`python -m tiered_memory.cli` runs it too."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: tomli is a core dependency there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_script_resolves(capsys: pytest.CaptureFixture[str]) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    module, _, attr = scripts["tiered-memory"].partition(":")
    main = getattr(importlib.import_module(module), attr)
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "archive" in capsys.readouterr().out


def test_python_dash_m() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tiered_memory.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout
