"""Both LlamaIndex examples run to the end offline, as a user would run them.

Each runs in a child process with no ANTHROPIC_API_KEY, an empty tiktoken cache and
every non-Unix socket connection refused (a bootstrap patches `socket` before the
example starts), so a hidden download or API call fails the test instead of passing
on a networked CI box.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BOOTSTRAP = """
import runpy, socket, sys
_connect = socket.socket.connect
def _refuse(self, address):
    if self.family != socket.AF_UNIX:
        raise OSError(f"network access attempted by an offline example: {address!r}")
    return _connect(self, address)
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_example(name: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["TMPDIR"] = str(tmp_path)
    # an empty tiktoken cache: any encoding not bundled offline would be downloaded
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "empty-tiktoken-cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, str(ROOT / "examples" / name)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_query_engine_example_runs_offline(tmp_path: Path) -> None:
    out = run_example("llamaindex_query_engine.py", tmp_path)
    assert "source [hot]" in out
    assert "Project Falcon ships on March 3; the release manager is Priya." in out
    # what each part claims is what it shows
    benefits = _listed(out, "filtered on section=benefits:")
    assert sorted(benefits) == [
        "Everyone gets 28 days of paid holiday, plus public holidays.",
        "The learning budget is 1,500 euros per person per year.",
    ]
    budgeted = _listed(out, "within a 40-token budget (recall: tier shares, use recorded):")
    assert budgeted
    assert "chunks no budgeted retrieval used are now cold: 3" in out
    cold = _listed(out, "chunks no budgeted retrieval used are now cold: 3")
    assert len(cold) == 3
    assert not set(cold) & set(budgeted)  # used (recorded) chunks stayed active
    found = out.split("a cold chunk is still found", 1)[1].splitlines()
    assert found[1].startswith("  [cold] ")
    assert found[1].endswith("Releases are frozen during the last week of December.")
    # it used to say "its score halved" beside a score no tier factor had halved
    assert "halved" not in out
    assert found[2] == "  its tier factor is 1 (policy.scoring.tier_factor)"
    assert "after deleting one document: 5" in out


def _listed(out: str, heading: str) -> list[str]:
    """The chunk texts listed under `heading` ("  [tier] text" lines)."""
    lines = out.split(heading, 1)[1].splitlines()[1:]
    listed: list[str] = []
    for line in lines:
        if not line.startswith("  ["):
            break
        listed.append(line.split("] ", 1)[1])
    return listed


@pytest.mark.slow
def test_chat_engine_example_runs_offline(tmp_path: Path) -> None:
    out = run_example("llamaindex_chat_engine.py", tmp_path)
    session_two = out.split("session 2", 1)[1]
    injected = session_two.split("injected into the system message:", 1)[1]
    assert injected.strip().splitlines()[0] == (
        "- user: My daughter is called Ava and she has violin lessons on Tuesdays."
    )
    assert "another user asking the same: (nothing)" in out
