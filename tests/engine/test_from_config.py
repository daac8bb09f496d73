"""TieredMemory.from_config / from_env wire the backends the configuration names."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiered_memory import ConfigurationError, Tier, TieredMemory
from tiered_memory.backends.local.objects import LocalFolderObjectStore
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore


def test_from_config_reads_a_toml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("TIERED_MEMORY_"):
            monkeypatch.delenv(name)
    config = tmp_path / "tm.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n'
        "[policy.budget]\npinned = 0.1\nhot = 0.6\nwarm = 0.25\ncold = 0.05\n"
    )
    mem = TieredMemory.from_config(config)
    try:
        assert isinstance(mem.aio.store, SQLiteMemoryStore)
        assert isinstance(mem.aio.objects, LocalFolderObjectStore)
        assert mem.policy.budget.hot == 0.6
        m = mem.add("configured from a file", namespace="ns")
        assert mem.get(m.id, namespace="ns").tier is Tier.HOT  # type: ignore[union-attr]
    finally:
        mem.close()


def test_from_env_and_unknown_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERED_MEMORY_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TIERED_MEMORY_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("TIERED_MEMORY_NO_SUCH_THING", "1")
    with pytest.raises(ConfigurationError, match="NO_SUCH_THING"):
        TieredMemory.from_env()
