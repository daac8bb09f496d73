"""One embedding dimension per store, decided before its first write.

The dimension is the embedder's: given (`dimension=`), declared by the embedder (its
`dimension` attribute, as our embedders have), or measured with one embedding the first
time it is needed. It is recorded in the store (`MemoryStore.ensure_dimension`) when the
memory is opened if it is known by then, else before the first write. A store holding
vectors of another size is a ConfigurationError; a vector of another size, given by a
caller, is a DimensionMismatchError before anything is written. Before, the first
vector written decided, so one wrong vector (an 8-d framework embedding into a 384-d
memory) made every later add, search and recall of every namespace fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import validation
from .errors import ConfigurationError
from .ports import Embedder, MemoryStore, Vector


def positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{what} must be a positive integer, got {value!r}")
    return value


def declared_dimension(embedder: Any) -> int | None:
    """The size an embedder says its vectors have (our embedders' `dimension`)."""
    value = getattr(embedder, "dimension", None)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


class EmbeddingDimension:
    """The dimension rule of one memory: what its store holds and its embedder makes."""

    def __init__(self, store: MemoryStore, embedder: Embedder, given: int | None) -> None:
        declared = declared_dimension(embedder)
        if given is not None:
            positive(given, "dimension")
            if declared is not None and given != declared:
                raise ConfigurationError(
                    f"dimension={given} was given, but the embedder makes {declared}-d "
                    "vectors; leave dimension out or make them agree"
                )
        self.store = store
        self.own: int | None = given if given is not None else declared

    async def record(self) -> None:
        """At open: record the embedder's dimension when known without embedding
        anything, so a store of another size is refused now, not on every call."""
        if self.own is not None:
            await self.store.ensure_dimension(self.own)

    def _learn(self, measured: int) -> int:
        """The width of vectors the embedder just made: its dimension from now on."""
        if self.own is not None and measured != self.own:
            raise ConfigurationError(
                f"the embedder made {measured}-d vectors but was set up for "
                f"{self.own}-d ones; pass the dimension it really makes"
            )
        self.own = measured
        return measured

    async def embedder_makes(self, embedder: Embedder, measured: int | None = None) -> int:
        """The embedder's vector size; `measured` is the width of vectors it just made.
        Measured with one embedding when nothing else tells."""
        if measured is not None:
            return self._learn(measured)
        if self.own is None:
            matrix = await embedder.aembed_documents(["dimension"])
            self.own = positive(int(np.shape(matrix)[-1]), "embedding dimension")
        return self.own

    async def for_write(self, embedder: Embedder, measured: int | None = None) -> int:
        """The size every vector of a write must have, recorded in the store first.
        `measured`: the width of the vectors the embedder made for this write, if any."""
        stored = await self.store.dimension()
        if measured is None and stored is not None and self.own is None:
            return stored  # only the caller's vectors: the store's size decides
        own = await self.embedder_makes(embedder, measured)
        if stored != own:
            await self.store.ensure_dimension(own)  # an empty store takes it; else refused
        return own

    async def check_query_vector(self, vector: Sequence[float] | Vector) -> Vector:
        """A caller's query vector, checked once (finite, flat, the stored vectors' size;
        nothing is recorded): the retriever and the store take it as valid."""
        stored = await self.store.dimension()
        expected = stored if stored is not None else self.own
        return validation.check_vector(vector, expected, what="query_embedding")

    async def check_embedded_query(self, vector: Vector) -> Vector:
        """A query vector the embedder made (its guard checked it is finite and flat):
        the embedder must make vectors of the stored size."""
        stored = await self.store.dimension()
        own = self._learn(int(vector.size))
        if stored is not None and stored != own:
            raise ConfigurationError(
                f"this store holds {stored}-d embeddings but the embedder makes {own}-d "
                "ones; open it with the embedding model that wrote it"
            )
        return vector
