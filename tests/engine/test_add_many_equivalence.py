"""`add_many` is a faster `add`, never a different one: a batch screened and written at
once leaves the store as adding its items one by one would (ids aside): the same
memories, the same near-duplicates merged into the same memories with the same use
counts, and the same auto-links with the same weights."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock

DIM = 16
NS = "eq"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)

# What each item of the batch is: a new direction, a near copy of a stored memory or
# of an earlier item (a duplicate), an exact copy, or a relative (a link, not a merge).
KINDS = ("fresh", "dup_stored", "dup_batch", "copy_batch", "near_stored", "near_batch")


def _batch(
    seed: int, stored: int, kinds: list[str], copy_noise: float
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(max(stored, 1), DIM)).astype(np.float32)[:stored]
    out: list[np.ndarray] = []
    for kind in kinds:
        if kind.endswith("stored") and stored:
            origin = base[int(rng.integers(stored))]
        elif kind.endswith("batch") and out:
            origin = out[int(rng.integers(len(out)))]
        else:
            out.append(rng.normal(size=DIM).astype(np.float32))
            continue
        noise = {"dup": 0.01, "copy": copy_noise, "near": 0.6}[kind.split("_")[0]]
        scale = float(rng.uniform(0.5, 3.0))  # norms differ: cosine, not dot product
        out.append((origin + noise * rng.normal(size=DIM).astype(np.float32)) * scale)
    return base, np.array(out, dtype=np.float32).reshape(len(kinds), DIM)


async def _state(mem: AsyncTieredMemory, results: list[Any]) -> dict[str, Any]:
    """The store by content (ids differ between the two runs)."""
    memories = await mem.list(namespace=NS, limit=1000)
    content = {m.id: m.content for m in memories}
    links = {}
    for m in memories:
        for link in await mem.links(m.id, namespace=NS):
            pair = tuple(sorted((content[link.source], content[link.target])))
            links[pair] = (link.kind.value, link.weight)
    return {
        "returned": [m.content for m in results],
        "memories": sorted((m.content, m.use_count, m.last_accessed_at) for m in memories),
        "links": links,
    }


async def _run(
    folder: Path, base: np.ndarray, batch: np.ndarray, one_by_one: bool, flags: dict[str, Any]
) -> dict[str, Any]:
    mem = await AsyncTieredMemory.embedded(
        folder / ("single.db" if one_by_one else "batch.db"),
        embedder=HashingEmbedder(DIM),
        clock=ManualClock(NOW),
    )
    try:
        if len(base):
            await mem.add_many(
                [{"content": f"stored {i}", "embedding": v} for i, v in enumerate(base)],
                namespace=NS,
                dedup=False,
                link=False,
            )
        items = [{"content": f"item {i}", "embedding": v} for i, v in enumerate(batch)]
        if one_by_one:
            results = [(await mem.add_many([item], namespace=NS, **flags))[0] for item in items]
        else:
            results = await mem.add_many(items, namespace=NS, **flags)
        return await _state(mem, results)
    finally:
        await mem.close()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    stored=st.integers(0, 8),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=14),
    dedup=st.sampled_from([None, True, False]),
    link=st.booleans(),
)
def test_add_many_stores_what_adding_one_by_one_stores(
    seed: int, stored: int, kinds: list[str], dedup: bool | None, link: bool
) -> None:
    # Stored side by side (no dedup), two exact copies tie as anyone's neighbour, and
    # which one a link picks is arbitrary either way (the store breaks ties by id).
    base, batch = _batch(seed, stored, kinds, 0.0 if dedup is not False else 1e-3)
    flags = {"dedup": dedup, "link": link}
    with tempfile.TemporaryDirectory() as tmp:
        batched = asyncio.run(_run(Path(tmp), base, batch, False, flags))
        single = asyncio.run(_run(Path(tmp), base, batch, True, flags))
    _same_links(batched.pop("links"), single.pop("links"))
    assert batched == single


Links = dict[tuple[str, ...], tuple[str, float]]


def _same_links(batched: Links, single: Links) -> None:
    """The same links with the same weights, up to ties: a cosine's last bits depend on
    the shape of the product that computed it, so two neighbours within 1e-5 of each
    other (near copies of one origin) may swap places at the top-k's edge. A link only
    one side has must then be matched by one the other side has instead, sharing an
    endpoint, of the same kind and weight."""
    for pair in batched.keys() & single.keys():
        assert batched[pair][0] == single[pair][0]
        assert batched[pair][1] == pytest.approx(single[pair][1], abs=1e-5)
    only_batched = {p: batched[p] for p in batched.keys() - single.keys()}
    only_single = {p: single[p] for p in single.keys() - batched.keys()}
    assert len(only_batched) == len(only_single)
    for pair, (kind, weight) in only_batched.items():
        assert any(
            set(pair) & set(other)
            and kind == other_kind
            and weight == pytest.approx(other_weight, abs=1e-5)
            for other, (other_kind, other_weight) in only_single.items()
        ), f"link {pair} ({weight}) has no tied counterpart in {only_single}"
