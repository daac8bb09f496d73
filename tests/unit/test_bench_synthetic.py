"""The scale benchmark's corpus costs the garbage collector nothing: its texts are a
tuple of strings, which the collector stops tracking at its first pass. A list of a
million texts made every full pass walk a million pointers (~30 ms), which landed on
whatever was being timed: our recalls and adds make garbage, the peers' searches none.
The sustained stream's memories come from the same clusters, and the stream reports the
CPU a memory cost it, with the rate that CPU caps it at on the machine's cores."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks import scale, synthetic
from benchmarks.synthetic import make_corpus, more_memories
from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock


def test_the_corpus_texts_are_not_walked_by_the_collector() -> None:
    corpus = make_corpus(500)
    assert len(corpus.texts) == 500
    gc.collect()
    assert not gc.is_tracked(corpus.texts)
    assert all(isinstance(t, str) for t in corpus.texts)


def test_more_memories_come_from_the_corpus_clusters_and_leave_it_as_it_was() -> None:
    """The sustained adds' memories (`more_memories`) are drawn as the corpus's were,
    near its own clusters' centers with their topic words, and making them changes
    nothing of the corpus: a corpus made for more rows would be other data."""
    corpus = make_corpus(2_000)
    before = (corpus.vectors.copy(), corpus.texts)
    more = more_memories(corpus, 300)
    assert more.vectors.shape == (300, corpus.vectors.shape[1])
    assert len(more.texts) == 300
    assert np.array_equal(corpus.vectors, before[0])
    assert corpus.texts == before[1]
    assert np.array_equal(make_corpus(2_000).vectors, corpus.vectors)
    # each is nearest its own cluster's center, about as near as the corpus's members
    nearest = np.argmax(more.vectors @ corpus.centers.T, axis=1)
    assert np.array_equal(nearest, more.clusters)
    own = np.sum(more.vectors * corpus.centers[more.clusters], axis=1)
    members = np.sum(corpus.vectors * corpus.centers[corpus.clusters], axis=1)
    assert abs(float(own.mean()) - float(members.mean())) < 0.02
    topical = {w for words in corpus.topic_words for w in words}
    assert all(any(w.strip(".").lower() in topical for w in t.split()) for t in more.texts[:50])
    # new memories, not copies of stored ones: dedup has its usual, rare work
    assert float(np.max(more.vectors @ corpus.vectors.T)) < 0.95
    assert not set(more.texts) & set(corpus.texts)


def test_the_cpu_ceiling_is_the_cores_over_the_cpu_a_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sustained stream's bound: with 2 cores, 1 ms of CPU a memory (every thread
    of the process) caps it at 2,000/s, whatever the wall time said."""
    monkeypatch.setattr(scale, "usable_cores", lambda: 2)
    assert scale.cpu_ceiling(0.001) == pytest.approx(2_000)
    assert scale.cpu_ceiling(0.0005) == pytest.approx(4_000)
    assert np.isnan(scale.cpu_ceiling(0.0))
    monkeypatch.undo()
    assert 1 <= scale.usable_cores() <= (os.cpu_count() or 1)


async def test_the_sustained_stream_reports_its_cpu_with_the_backlog_folded(
    tmp_path: Path,
) -> None:
    """`_sustained_adds` counts the CPU of every thread, including the fold of the rows
    the stream left buffered, and says what ceiling that puts on this machine."""
    corpus = make_corpus(600)
    mem = await AsyncTieredMemory.embedded(
        tmp_path / "s.db", embedder=HashingEmbedder(synthetic.DIM), clock=ManualClock(scale.T0)
    )
    try:
        out = await scale._sustained_adds(mem, corpus, 300, 100)
        assert out["sustained_adds"] == 300
        assert out["add_sustained_per_s"] > 0
        cpu = out["add_sustained_cpu_ms_per_memory"]
        assert 0 < cpu < 1_000
        assert out["add_sustained_cpu_ceiling_per_s"] == pytest.approx(out["cores"] / (cpu / 1e3))
        assert (await mem.stats(namespace=scale.NS)).total >= 250  # the memories landed
    finally:
        await mem.close()
