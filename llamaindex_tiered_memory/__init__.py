"""LlamaIndex face of tiered-memory: a vector store, a memory block and a retriever."""

from ._errors import UnsupportedFilterError, UnsupportedQueryError
from .embeddings import TieredMemoryEmbedding
from .memory_blocks import TieredMemoryBlock
from .retrievers import TieredMemoryRetriever
from .vector_stores import TieredMemoryVectorStore

__all__ = [
    "TieredMemoryBlock",
    "TieredMemoryEmbedding",
    "TieredMemoryRetriever",
    "TieredMemoryVectorStore",
    "UnsupportedFilterError",
    "UnsupportedQueryError",
]
