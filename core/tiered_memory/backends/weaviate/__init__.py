"""The memory store on Weaviate (extra `[weaviate]`)."""

from .store import WeaviateMemoryStore, WeaviateRequestError, WeaviateWriteError

__all__ = ["WeaviateMemoryStore", "WeaviateRequestError", "WeaviateWriteError"]
