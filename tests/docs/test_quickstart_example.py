"""`python examples/quickstart.py` runs offline and shows what it says it shows: the
daughter's name ranked first, the sweep moving the tiers after four days, a recall
inside its 60-token budget split by tier, and stats that agree with the sweep."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs_and_its_output_is_true(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TIERED_MEMORY_")}
    env["TMPDIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    hits = [line.split() for line in lines if line.startswith("  ") and "[" in line]
    assert " ".join(hits[0][2:]) == "User's daughter is called Ava"
    assert hits[0][1] == "[hot]"

    moved = ast.literal_eval(next(ln for ln in lines if "the sweep moved:" in ln).split(": ", 1)[1])
    assert sum(moved.values()) == 5  # every memory left HOT after 72 h

    header = next(ln for ln in lines if ln.startswith("recall within 60 tokens"))
    used = int(header.split("(", 1)[1].split(" ", 1)[0])
    assert 0 < used <= 60
    recalled = lines[lines.index(header) + 1 : lines.index(header) + 4]
    assert "- User's daughter is called Ava" in recalled
    by_tier = ast.literal_eval(next(ln for ln in lines if ln.startswith("tokens by tier:"))[16:])
    assert 0 < sum(by_tier.values()) <= used
    assert "hot" not in by_tier  # nothing is HOT any more

    stats = next(ln for ln in lines if ln.startswith("stats:"))
    tiers = ast.literal_eval(stats[len("stats: ") : stats.index(" links=")])
    assert tiers["hot"] == 0
    assert tiers["warm"] == moved.get("hot_to_warm", 0)
    assert tiers["cold"] == moved.get("hot_to_cold", 0)
