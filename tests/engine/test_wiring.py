"""One way to wire a memory (issue 18.4): `embedded()` is a configuration like any other,
opened by `tiered_memory.wiring`, and `from_config` needs none of the optional extras."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tiered_memory import (
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    Policy,
    TierPolicy,
)
from tiered_memory.config import load_settings
from tiered_memory.wiring import archive_folder, sweep_lock_file

from .conftest import START

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: tomli is a core dependency there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("TIERED_MEMORY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))


async def _laid_out(memory: AsyncTieredMemory) -> None:
    """Write, archive and sweep once, so every file of the layout exists."""
    m = await memory.add("the spare key is under the blue pot", namespace="n")
    assert await memory.archive([m.id], namespace="n") == 1
    await memory.maintain()


async def test_embedded_and_a_configured_store_are_laid_out_alike(tmp_path: Path) -> None:
    embedded = await AsyncTieredMemory.embedded(tmp_path / "a.db", embedder=HashingEmbedder(64))
    try:
        await _laid_out(embedded)
    finally:
        await embedded.close()
    settings = load_settings(store={"path": str(tmp_path / "b.db")}, embedder={"dimension": 64})
    configured = await AsyncTieredMemory.from_settings(settings)
    try:
        await _laid_out(configured)
    finally:
        await configured.close()
    for name in ("a.db", "b.db"):
        db = tmp_path / name
        assert archive_folder(db) == tmp_path / f"{name}.archive"
        assert sweep_lock_file(db) == tmp_path / f"{name}.sweep.lock"
        assert any(archive_folder(db).rglob("*.json")), name  # the original is there
        assert sweep_lock_file(db).exists(), name


async def test_embedded_keeps_the_use_days_its_policy_asks_for(tmp_path: Path) -> None:
    """The embedded store is opened like a configured one: with the policy's
    `tiers.use_days_kept` (it used to keep the default 64 whatever the policy said)."""
    clock = ManualClock(START)
    policy = Policy(tiers=TierPolicy(use_days_kept=2))
    memory = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(64), policy=policy, clock=clock
    )
    try:
        m = await memory.add("Ava plays the violin", namespace="n")
        for _ in range(4):
            clock.advance(timedelta(days=1))
            await memory.record_use([m.id], namespace="n")
        used = await memory.get(m.id, namespace="n")
        assert used is not None
        assert used.use_count == 4
        assert len(used.use_days) == 2
    finally:
        await memory.close()


async def test_embedded_reads_no_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its arguments are the whole configuration: TIERED_MEMORY_* variables are for
    `from_config`/`from_env` only."""
    monkeypatch.setenv("TIERED_MEMORY_POLICY__RETRIEVAL__MAX_ITEMS", "7")
    monkeypatch.setenv("TIERED_MEMORY_OBJECTS__PATH", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("TIERED_MEMORY_STORE__BACKEND", "weaviate")
    memory = await AsyncTieredMemory.embedded(tmp_path / "m.db", embedder=HashingEmbedder(64))
    try:
        assert memory.policy == Policy()
        await _laid_out(memory)
    finally:
        await memory.close()
    assert archive_folder(tmp_path / "m.db").is_dir()
    assert not (tmp_path / "elsewhere").exists()


def _requirement_names(requirements: list[str]) -> set[str]:
    names = set()
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match is not None, requirement
        names.add(re.sub(r"[-_.]+", "-", match.group()).lower())
    return names - {"tiered-memory"}


def _import_names_of_the_extras() -> list[str]:
    """The top-level modules only the optional extras install (typer, rich, weaviate,
    boto3, ...): what a plain `pip install tiered-memory` does not have."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _requirement_names(project["dependencies"])
    extras = set().union(
        *(_requirement_names(reqs) for reqs in project["optional-dependencies"].values())
    )
    only_extras = extras - core
    hidden = []
    for module, dists in importlib.metadata.packages_distributions().items():
        names = {re.sub(r"[-_.]+", "-", d).lower() for d in dists}
        if names & only_extras and not names & core:
            hidden.append(module)
    return sorted(hidden)


def test_from_config_needs_no_extra(tmp_path: Path) -> None:
    """`from_config` (TOML and the environment) runs on the core's own dependencies:
    with every module only an extra installs hidden, including the [cli] extra's."""
    hidden = _import_names_of_the_extras()
    assert {"typer", "rich", "boto3"} <= set(hidden)  # the check hides what it should
    config = tmp_path / "tm.toml"
    config.write_text(
        f'data_dir = "{tmp_path.as_posix()}"\n[policy.tiers]\nhot_ttl = "48h"\n',
        encoding="utf-8",
    )
    code = f"""
import importlib.abc, sys
HIDDEN = {hidden!r}
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hide())
from datetime import timedelta
from tiered_memory import TieredMemory
with TieredMemory.from_config({str(config)!r}) as memory:
    assert memory.policy.tiers.hot_ttl == timedelta(hours=48)
    m = memory.add("configured without any extra", namespace="n")
    assert memory.get(m.id, namespace="n") is not None
loaded = sorted(set(HIDDEN) & {{name.split(".")[0] for name in sys.modules}})
print("loaded:", loaded)
"""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TIERED_MEMORY_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "core"), str(ROOT)])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "loaded: []"
