"""LangChain and LangGraph face of tiered-memory: `pip install 'tiered-memory[langchain]'`."""

from langchain_tiered_memory import _extra  # noqa: F401  (names the extra when LangChain is missing)
from langchain_tiered_memory.embeddings import TieredMemoryEmbeddings
from langchain_tiered_memory.middleware import CaptureRules, TieredMemoryMiddleware
from langchain_tiered_memory.retrievers import TieredMemoryRetriever
from langchain_tiered_memory.stores import TieredMemoryStore
from langchain_tiered_memory.tools import create_memory_tools
from langchain_tiered_memory.vectorstores import TieredMemoryVectorStore

__all__ = [
    "CaptureRules",
    "TieredMemoryEmbeddings",
    "TieredMemoryMiddleware",
    "TieredMemoryRetriever",
    "TieredMemoryStore",
    "TieredMemoryVectorStore",
    "create_memory_tools",
]
