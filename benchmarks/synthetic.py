"""Synthetic memories for the scale benchmark: clustered 384-d vectors, topical texts.

Vectors are `center + noise`, normalised: two members of one cluster have a cosine of
about 0.6, members of different clusters about 0, and near-duplicates (cosine >= 0.95)
are rare, so deduplication has real work to do but seldom fires. Texts mix a cluster's
topic words with Zipf-distributed common words, with lengths drawn from a log-normal
(median about 24 words, roughly 150 characters), like notes an agent keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DIM = 384
_SYLLABLES = [
    c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ee")
]


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 4))
        words.add("".join(rng.choice(_SYLLABLES, size=n)))
    return sorted(words)


@dataclass
class Corpus:
    vectors: npt.NDArray[np.float32]  # (n, DIM), unit rows
    # A tuple, not a list: the garbage collector stops tracking a tuple of strings at
    # its first pass, while each full pass walked a list's million pointers (~30 ms a
    # pass at 1M, charged to whatever the benchmark was timing then: our recalls and
    # adds, which make garbage, never the peers' searches, which make none).
    texts: tuple[str, ...]
    clusters: npt.NDArray[np.int64]
    centers: npt.NDArray[np.float32]
    topic_words: list[list[str]]
    common: list[str]
    zipf: npt.NDArray[np.float64]

    def queries(
        self, rng: np.random.Generator, count: int
    ) -> tuple[npt.NDArray[np.float32], list[str]]:
        """Query vectors near a cluster's center, with a few of its topic words."""
        picks = rng.choice(self.clusters, size=count)
        vectors = self.centers[picks] + rng.normal(0, 0.03, size=(count, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        texts = []
        for c in picks:
            words = list(rng.choice(self.topic_words[int(c)], size=3))
            words += list(rng.choice(self.common, size=3, p=self.zipf))
            texts.append(" ".join(words))
        return vectors.astype(np.float32), texts


def make_corpus(n: int, *, seed: int = 7, noise: float = 0.042) -> Corpus:
    rng = np.random.default_rng(seed)
    n_clusters = max(20, n // 200)
    centers = rng.normal(size=(n_clusters, DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    clusters = rng.integers(0, n_clusters, size=n)
    vectors = _members(rng, centers, clusters, noise)

    vocab = _vocabulary(rng, 12_000)
    common, topical = vocab[:4_000], vocab[4_000:]
    ranks = np.arange(1, len(common) + 1, dtype=np.float64)
    zipf = 1.0 / ranks**1.07
    zipf /= zipf.sum()
    topic_words = [list(rng.choice(topical, size=25, replace=False)) for _ in range(n_clusters)]
    texts = _texts(rng, clusters, topic_words, common, zipf)
    return Corpus(vectors, texts, clusters, centers, topic_words, common, zipf)


def more_memories(corpus: Corpus, count: int, *, seed: int = 13, noise: float = 0.042) -> Corpus:
    """`count` more memories drawn as `corpus`'s were, from its clusters and words, by
    a generator of their own: a corpus made for more rows would be other data (its
    cluster count and every draw depend on its size), and runs could not be compared."""
    rng = np.random.default_rng(seed)
    clusters = rng.integers(0, len(corpus.centers), size=count)
    vectors = _members(rng, corpus.centers, clusters, noise)
    texts = _texts(rng, clusters, corpus.topic_words, corpus.common, corpus.zipf)
    return Corpus(
        vectors, texts, clusters, corpus.centers, corpus.topic_words, corpus.common, corpus.zipf
    )


def _members(
    rng: np.random.Generator,
    centers: npt.NDArray[np.float32],
    clusters: npt.NDArray[np.int64],
    noise: float,
) -> npt.NDArray[np.float32]:
    """A unit vector near its cluster's center for each entry of `clusters`."""
    n = len(clusters)
    vectors = np.empty((n, DIM), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):  # in chunks: 1M x 384 float64 noise would be 3 GB
        stop = min(n, start + step)
        block = centers[clusters[start:stop]] + rng.normal(
            0, noise, size=(stop - start, DIM)
        ).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        vectors[start:stop] = block
    return vectors


def _texts(
    rng: np.random.Generator,
    clusters: npt.NDArray[np.int64],
    topic_words: list[list[str]],
    common: list[str],
    zipf: npt.NDArray[np.float64],
) -> tuple[str, ...]:
    """A text for each entry of `clusters`: its topic words and common ones."""
    n = len(clusters)
    lengths = np.clip(rng.lognormal(np.log(24), 0.55, size=n), 4, 220).astype(np.int64)
    total = int(lengths.sum())
    common_draw = rng.choice(len(common), size=total, p=zipf)
    topic_draw = rng.integers(0, 25, size=total)
    is_topic = rng.random(total) < 0.3
    texts: list[str] = []
    pos = 0
    for i in range(n):
        length = int(lengths[i])
        topics = topic_words[int(clusters[i])]
        words = [
            topics[topic_draw[j]] if is_topic[j] else common[common_draw[j]]
            for j in range(pos, pos + length)
        ]
        pos += length
        texts.append(" ".join(words).capitalize() + ".")
    return tuple(texts)
