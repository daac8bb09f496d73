"""Offline token counting and the deterministic embedder."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory import ConfigurationError, HashingEmbedder, as_embedder
from tiered_memory.tokens import TiktokenCounter


def test_cl100k_counts_offline() -> None:
    counter = TiktokenCounter()
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("<|endoftext|>") > 1  # special tokens are counted as text


def test_counting_needs_no_network_in_a_fresh_process() -> None:
    # A child with the network stubbed out: loading must come from the bundled file.
    code = (
        "import socket\n"
        "def no(*a, **k): raise OSError('network disabled')\n"
        "socket.socket.connect = no\n"
        "socket.create_connection = no\n"
        "from tiered_memory.tokens import TiktokenCounter\n"
        "print(TiktokenCounter().count('tiered memory for agents'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"TIKTOKEN_CACHE_DIR": "/nonexistent", "PATH": ""},
    )
    assert int(out.stdout.strip()) > 0


def test_unknown_encoding_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="tiktoken"):
        TiktokenCounter("no-such-encoding").count("x")


def test_hashing_embedder_is_deterministic_normalised_and_similarity_aware() -> None:
    e = HashingEmbedder(dimension=256)
    m = asyncio.run(e.embed_documents(["the daughter is called Ava", "daughter Ava", "rust"]))
    assert m.shape == (3, 256)
    assert m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert float(m[0] @ m[1]) > float(m[0] @ m[2])
    again = asyncio.run(e.embed_query("the daughter is called Ava"))
    assert np.array_equal(again, m[0])


def test_framework_embeddings_are_adapted_by_their_methods() -> None:
    class FakeLangChain:  # sync methods named like ours, plus async twins
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [0.0, 1.0]

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

        async def aembed_query(self, text: str) -> list[float]:
            return [0.0, 1.0]

    class FakeLlama:
        async def aget_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0, 0.0] for _ in texts]

        async def aget_query_embedding(self, text: str) -> list[float]:
            return [0.0, 0.0, 1.0]

    lc = as_embedder(FakeLangChain())
    assert asyncio.run(lc.embed_documents(["a", "b"])).shape == (2, 2)
    assert list(asyncio.run(lc.embed_query("q"))) == [0.0, 1.0]
    li = as_embedder(FakeLlama())
    assert asyncio.run(li.embed_documents(["a"])).shape == (1, 3)
    assert list(asyncio.run(li.embed_query("q"))) == [0.0, 0.0, 1.0]
    with pytest.raises(ConfigurationError, match="not an embedder"):
        as_embedder(object())

    class SyncOnly:  # names match the Protocol, but nothing can be awaited
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return []

        def embed_query(self, text: str) -> list[float]:
            return []

    with pytest.raises(ConfigurationError, match="not an embedder"):
        as_embedder(SyncOnly())


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=200))
def test_word_count_is_a_lower_bound_on_tokens(text: str) -> None:
    # budget.pack skips lines by this bound without tokenising them: it must never
    # exceed the real count, whatever the text (punctuation, digits, CJK, whitespace)
    counter = TiktokenCounter()
    assert TiktokenCounter.min_count(text) <= counter.count(text)


@pytest.mark.parametrize(
    "text",
    ["- a b c", "- don't stop", "- 1234567 89", "- 東京 タワー", "- ...!!! ???", "-  \t  x"],
)
def test_word_count_bound_on_awkward_lines(text: str) -> None:
    assert TiktokenCounter.min_count(text) <= TiktokenCounter().count(text)
