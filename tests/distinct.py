"""Texts that are genuinely distinct: no two near-duplicates under `HashingEmbedder`.

Archival summarises near-duplicate COLD memories together (seed 002's old COLD
clusters), so a templated batch ("Build 001 of the nightly pipeline", "Build 002 ...")
is archived a cluster at a time. Tests of per-memory mechanics (failure counts, the
pause rule, quarantine, per-memory estimates) use these instead: each memory is then
archived, and fails, on its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from tiered_memory import ConsolidationPolicy, HashingEmbedder

_VOCABULARY = """
anchor apple archive badge bakery balcony bamboo banner barrel basket beacon bicycle blanket
bottle bracelet bridge bucket cabinet camera candle canyon carpet castle cellar chimney
cinema circus closet compass cottage crayon crystal curtain cushion dentist desert diamond
diary dolphin drawer eagle engine envelope falcon feather fence ferry fountain furnace gallery
garage glacier guitar hammer harbor helmet hockey island jacket jungle kettle kitchen ladder
lantern lemon library lighthouse magnet mailbox marble meadow mirror monastery mountain museum
napkin necklace notebook orchard oven paddle palace parrot pebble pencil pepper piano pillow
planet pocket pottery puzzle quarry quilt rabbit radio railway ribbon river rocket saddle
sailboat satchel scarf scissors shovel silver skate sledge spinach stadium stapler statue
suitcase sunflower surfboard tablet teapot telescope tennis tent theatre thimble tiger tomato
tractor trumpet tulip tunnel turbine umbrella valley velvet violin volcano wagon walnut
wardrobe whistle window windmill wizard yacht zebra
"""
WORDS = tuple(_VOCABULARY.split())
# Well below the cluster threshold (0.70), so no test depends on where it sits.
MAX_COSINE = ConsolidationPolicy().min_similarity - 0.15


def distinct_texts(n: int, prefix: Callable[[int], str], *, seed: int = 7) -> list[str]:
    """`n` texts, `prefix(i)` followed by five words, no two at cosine `MAX_COSINE` or
    more (drawn with a fixed seed; a draw too close to one kept is drawn again)."""
    rng = random.Random(seed)
    embedder = HashingEmbedder()
    kept: list[str] = []
    vectors = np.zeros((n, embedder.dimension), dtype=np.float32)
    while len(kept) < n:
        text = f"{prefix(len(kept))} {' '.join(rng.sample(WORDS, 5))}"
        vector = embedder.embed_sync([text])[0]
        if kept and float(np.max(vectors[: len(kept)] @ vector)) >= MAX_COSINE:
            continue
        vectors[len(kept)] = vector
        kept.append(text)
    return kept
