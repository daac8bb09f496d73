"""`tiered-memory demo` as a user runs it: a subprocess, offline, well under a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiered_memory.cli.demo import player
from tiered_memory.cli.demo.player import choose_embedder, load_script
from tiered_memory.errors import ConfigurationError


def test_script_ships_as_package_data() -> None:
    script = load_script()
    kinds = {e.get("type") for e in script["events"] if "say" in e}
    assert kinds == {"factual", "procedural", "episodic", "project"}
    assert sum("recall" in e for e in script["events"]) >= 10
    assert script["days"] >= 150  # a few months, so memories reach the archive


def test_demo_plays_the_script_offline(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TIERED_MEMORY_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", XDG_DATA_HOME=str(tmp_path))
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tiered_memory.cli", "demo", "--json", "--embedder", "hashing"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 60
    summary = json.loads(proc.stdout)
    assert summary["embedder"].startswith("hashing embedder")
    assert len(summary["months"]) >= 6
    moved: dict[str, int] = {}
    for month in summary["months"]:
        for name, n in month["moved"].items():
            moved[name] = moved.get(name, 0) + n
    for transition in ("hot_to_warm", "hot_to_cold", "warm_to_cold", "cold_to_warm"):
        assert moved.get(transition, 0) > 0, (transition, moved)
    assert moved["cold_to_archived"] > 0
    first, last = summary["months"][0]["tiers"], summary["months"][-1]["tiers"]
    assert first["archived"] == []
    assert last["archived"]
    recall = summary["recall"]
    assert 0 < recall["tokens"] <= recall["budget_tokens"]
    assert recall["by_share"]["pinned"] > 0
    assert "peanuts" in recall["items"]
    assert summary["deep_search"]["archived_key"] == "airport"
    assert "soggy sandwich" in summary["expanded"]
    assert "end of month" not in proc.stdout  # the tables went to stderr with --json
    assert "end of month" in proc.stderr


def test_demo_keeps_its_store_when_asked(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tiered_memory.cli import app

    keep = tmp_path / "kept"
    result = CliRunner().invoke(
        app, ["demo", "--embedder", "hashing", "--keep", str(keep), "-n", "sam"]
    )
    assert result.exit_code == 0, result.stderr
    assert "Each memory's tier at the end of each month" in result.stdout
    assert "expand" in result.stdout
    assert (keep / "demo.db").exists()
    # it says which namespace the memories are in, and the command that shows them
    said = " ".join(result.stdout.split())
    assert "namespace 'sam'" in said
    shown = said[said.index("look at it with: ") + len("look at it with: ") :].split()
    assert shown[:2] == ["tiered-memory", "list"]
    listed = CliRunner().invoke(app, [*shown[1:], "--json"])
    assert listed.exit_code == 0, listed.stderr
    assert len(json.loads(listed.stdout)) > 0
    again = CliRunner().invoke(app, ["demo", "--keep", str(keep)])
    assert again.exit_code == 1
    assert "not empty" in again.stderr


def test_embedder_choice_never_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder, described = choose_embedder("hashing")
    assert type(embedder).__name__ == "HashingEmbedder"
    assert "hashing" in described
    monkeypatch.setattr(player, "local_model_on_disk", lambda: None)
    embedder, described = choose_embedder("auto")
    assert type(embedder).__name__ == "HashingEmbedder"
    with pytest.raises(ConfigurationError, match=r"tiered-memory\[local\]"):
        choose_embedder("local")
    monkeypatch.setattr(player, "local_model_on_disk", lambda: "/models/minilm")
    embedder, described = choose_embedder("auto")
    assert type(embedder).__name__ == "SentenceTransformerEmbedder"
    assert "/models/minilm" in described
