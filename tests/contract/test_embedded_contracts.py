"""The contract suites against the embedded default: SQLite file and local folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tiered_memory.archives.local import LocalFolderObjectStore
from tiered_memory.graphs.sqlite import SQLiteAssociationGraph
from tiered_memory.stores.sqlite import SQLiteMemoryStore

from .graph_contract import AssociationGraphContract
from .object_store_contract import ObjectStoreContract
from .store_contract import MemoryStoreContract


class TestSQLiteMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SQLiteMemoryStore]:
        store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
        try:
            yield store
        finally:
            await store.close()


class TestSQLiteAssociationGraph(AssociationGraphContract):
    @pytest.fixture
    async def graph(self, tmp_path: Path) -> AsyncIterator[SQLiteAssociationGraph]:
        # the documented wiring: the graph lives in the store's file
        store = await SQLiteMemoryStore.open(tmp_path / "memory.db")
        graph = SQLiteAssociationGraph(store.database)
        try:
            yield graph
        finally:
            await graph.close()
            await store.close()


class TestLocalFolderObjectStore(ObjectStoreContract):
    @pytest.fixture
    async def objects(self, tmp_path: Path) -> AsyncIterator[LocalFolderObjectStore]:
        objects = LocalFolderObjectStore(tmp_path / "archive")
        try:
            yield objects
        finally:
            await objects.close()
