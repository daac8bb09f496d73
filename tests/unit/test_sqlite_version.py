"""An SQLite too old for the embedded store's SQL is refused at open, with a typed
error and before any file exists, not by a syntax error in the first sweep."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tiered_memory.backends.sqlite import SQLiteMemoryStore
from tiered_memory.errors import ConfigurationError


async def test_an_sqlite_without_returning_is_refused_before_a_file_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))  # Ubuntu 20.04's
    path = tmp_path / "memory.db"
    with pytest.raises(ConfigurationError, match=r"SQLite 3\.35\.0 or newer.*3\.31\.1"):
        await SQLiteMemoryStore.open(path)
    assert not path.exists()


async def test_the_sqlite_this_python_links_is_new_enough(tmp_path: Path) -> None:
    store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
    await store.close()
    assert sqlite3.sqlite_version_info >= (3, 35, 0)
