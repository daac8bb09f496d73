"""The scale benchmark's corpus costs the garbage collector nothing: its texts are a
tuple of strings, which the collector stops tracking at its first pass. A list of a
million texts made every full pass walk a million pointers (~30 ms), which landed on
whatever was being timed: our recalls and adds make garbage, the peers' searches none."""

from __future__ import annotations

import gc

from benchmarks.synthetic import make_corpus


def test_the_corpus_texts_are_not_walked_by_the_collector() -> None:
    corpus = make_corpus(500)
    assert len(corpus.texts) == 500
    gc.collect()
    assert not gc.is_tracked(corpus.texts)
    assert all(isinstance(t, str) for t in corpus.texts)
