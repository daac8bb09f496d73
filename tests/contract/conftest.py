"""Fixtures shared by the SQLite-specific contract modules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tiered_memory.backends.sqlite.store import SQLiteMemoryStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteMemoryStore]:
    """A fresh embedded store; the contract classes override it with their own."""
    s = await SQLiteMemoryStore.open(tmp_path / "memory.db")
    try:
        yield s
    finally:
        await s.close()
