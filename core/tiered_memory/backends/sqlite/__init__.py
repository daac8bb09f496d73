"""The embedded default: a memory store and an association graph in one SQLite file."""

from .database import SQLiteDatabase
from .graph import SQLiteAssociationGraph
from .store import SQLiteMemoryStore

__all__ = ["SQLiteAssociationGraph", "SQLiteDatabase", "SQLiteMemoryStore"]
