"""The scale benchmark's corpus costs the garbage collector nothing: its texts are a
tuple of strings, which the collector stops tracking at its first pass. A list of a
million texts made every full pass walk a million pointers (~30 ms), which landed on
whatever was being timed: our recalls and adds make garbage, the peers' searches none."""

from __future__ import annotations

import gc

import numpy as np

from benchmarks.synthetic import make_corpus, more_memories


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
