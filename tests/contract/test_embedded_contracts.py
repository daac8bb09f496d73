"""The contract suites against the embedded default: SQLite file and local folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tiered_memory.stores.sqlite import SQLiteMemoryStore

from .store_contract import MemoryStoreContract


class TestSQLiteMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SQLiteMemoryStore]:
        store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
        try:
            yield store
        finally:
            await store.close()
