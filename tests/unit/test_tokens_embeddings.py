"""Offline token counting and the deterministic embedder."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory import ConfigurationError, HashingEmbedder, TieredMemory, as_embedder
from tiered_memory.embeddings import checked_embedder
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
    m = asyncio.run(e.aembed_documents(["the daughter is called Ava", "daughter Ava", "rust"]))
    assert m.shape == (3, 256)
    assert m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert float(m[0] @ m[1]) > float(m[0] @ m[2])
    again = asyncio.run(e.aembed_query("the daughter is called Ava"))
    assert np.array_equal(again, m[0])


def test_framework_embeddings_are_adapted_by_their_methods() -> None:
    class FakeLangChain:  # sync methods, plus async twins under LangChain's names
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

    lc = FakeLangChain()
    assert as_embedder(lc) is lc  # the core's async names are LangChain's: used as it is
    guarded = checked_embedder(lc, 5.0)
    assert asyncio.run(guarded.aembed_documents(["a", "b"])).shape == (2, 2)
    assert list(asyncio.run(guarded.aembed_query("q"))) == [0.0, 1.0]
    li = as_embedder(FakeLlama())
    assert asyncio.run(li.aembed_documents(["a"])).shape == (1, 3)
    assert list(asyncio.run(li.aembed_query("q"))) == [0.0, 0.0, 1.0]
    with pytest.raises(ConfigurationError, match="not an embedder"):
        as_embedder(object())


class SyncOnly:
    """A plain synchronous embedder, as many hand-written or LangChain-style ones are."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.threads.add(threading.get_ident())
        return [float(len(text)), 1.0]


def test_a_synchronous_embedder_is_accepted_and_runs_off_the_loop() -> None:
    sync = SyncOnly()
    embedder = checked_embedder(sync, 5.0)
    assert embedder.name == "SyncOnly"

    async def both() -> tuple[Any, Any, int]:
        loop_thread = threading.get_ident()
        return (
            await embedder.aembed_documents(["ab", "abc"]),
            await embedder.aembed_query("abcd"),
            loop_thread,
        )

    matrix, vector, loop_thread = asyncio.run(both())
    assert matrix.tolist() == [[2.0, 1.0], [3.0, 1.0]]
    assert vector.tolist() == [4.0, 1.0]
    assert loop_thread not in sync.threads  # run in a worker thread, never on the loop


def test_a_synchronous_embedder_serves_a_memory(tmp_path: Path) -> None:
    with TieredMemory.embedded(tmp_path / "m.db", embedder=SyncOnly()) as mem:
        mem.add("the boiler was serviced in May")
        assert [h.memory.content for h in mem.search("boiler")] == [
            "the boiler was serviced in May"
        ]


def test_async_methods_under_langchains_sync_names_are_refused_with_the_new_names() -> None:
    class OldProtocol:
        async def embed_documents(self, texts: list[str]) -> Any:
            return np.ones((len(texts), 4), dtype=np.float32)

        async def embed_query(self, text: str) -> Any:
            return np.ones(4, dtype=np.float32)

    with pytest.raises(ConfigurationError, match="aembed_documents/aembed_query"):
        as_embedder(OldProtocol())


def test_the_packages_embedders_speak_langchains_embeddings_interface() -> None:
    e = HashingEmbedder(dimension=64)
    docs = e.embed_documents(["green tea", "black coffee"])
    query = e.embed_query("green tea")
    assert isinstance(docs, list)
    assert all(isinstance(row, list) for row in docs)
    assert isinstance(query, list)
    assert all(isinstance(x, float) for x in query)
    assert query == docs[0]
    assert np.allclose(asyncio.run(e.aembed_query("green tea")), query)
    assert np.allclose(asyncio.run(e.aembed_documents(["green tea", "black coffee"])), docs)


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
