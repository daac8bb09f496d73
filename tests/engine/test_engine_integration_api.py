"""Engine calls added for the framework faces: vectors in, bulk ops, explicit use."""

from __future__ import annotations

import numpy as np
import pytest

from tiered_memory import AsyncTieredMemory, HashingEmbedder, Tier, TieredMemory, ValidationError


def test_search_and_recall_by_a_precomputed_query_vector(mem: TieredMemory) -> None:
    target = mem.add("The boat is moored at pier nine", namespace="ns")
    mem.add("The invoice was paid late", namespace="ns")
    vector = HashingEmbedder().embed_sync(["boat moored pier"])[0]
    hits = mem.search("", namespace="ns", query_embedding=vector, k=1)
    assert [h.memory.id for h in hits] == [target.id]
    inj = mem.recall("", namespace="ns", query_embedding=vector, budget_tokens=20)
    assert inj.items[0].memory.id == target.id
    # anything else rode along as the target's neighbour in time, not on its own merit
    assert all(h.phase == 5 for h in inj.items[1:])
    with pytest.raises(ValidationError):
        mem.search("x", namespace="ns", query_embedding=np.ones(5))


def test_ids_and_tiers_narrow_search_and_recall(mem: TieredMemory) -> None:
    a = mem.add("apples are red", namespace="ns")
    b = mem.add("apples are green too", namespace="ns")
    mem.demote(b.id, Tier.COLD, namespace="ns")
    assert [h.memory.id for h in mem.search("apples", namespace="ns", ids=[a.id])] == [a.id]
    inj = mem.recall("apples", namespace="ns", tiers=[Tier.COLD], budget_tokens=100)
    assert [h.memory.id for h in inj.items] == [b.id]


def test_record_use_forget_many_clear_and_namespaces(mem: TieredMemory) -> None:
    ids = [
        mem.add(f"note {i} about {w}", namespace="ns").id
        for i, w in enumerate(["cats", "ships", "tax"])
    ]
    other = mem.add("note about cats", namespace="other")
    assert mem.record_use([ids[0], "unknown", other.id], namespace="ns") == 1
    assert mem.get(ids[0], namespace="ns").use_count == 1  # type: ignore[union-attr]
    assert mem.get(other.id, namespace="other").use_count == 0  # type: ignore[union-attr]
    assert mem.forget_many(ids[:2], namespace="ns") == 2
    assert mem.search("note", namespace="ns", k=5)[0].memory.id == ids[2]
    mem.archive([ids[2]], namespace="ns")
    assert mem.forget_many(ids, namespace="ns", hard=True) == 3
    assert mem.stats(namespace="ns").total == 0
    assert mem.namespaces() == ["other"]
    mem.clear(namespace="other")
    assert mem.namespaces() == []


def test_run_executes_engine_coroutines_on_the_facades_loop(mem: TieredMemory) -> None:
    async def compose(engine: AsyncTieredMemory) -> int:
        await engine.add("first", namespace="ns")
        await engine.add("second thing", namespace="ns")
        return (await engine.stats(namespace="ns")).total

    assert mem.run(compose(mem.aio)) == 2


def test_a_bare_string_is_not_a_list_of_ids(mem: TieredMemory) -> None:
    m = mem.add("abc is a memory", namespace="ns")
    for call in (
        lambda: mem.record_use(m.id, namespace="ns"),  # type: ignore[arg-type]
        lambda: mem.forget_many(m.id, namespace="ns"),  # type: ignore[arg-type]
        lambda: mem.archive(m.id, namespace="ns"),  # type: ignore[arg-type]
        lambda: mem.restore_archive(m.id, namespace="ns"),  # type: ignore[arg-type]
        lambda: mem.search("abc", namespace="ns", ids=m.id),  # type: ignore[arg-type]
        lambda: mem.namespaces(prefix=None),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValidationError):
            call()
    assert mem.get(m.id, namespace="ns").use_count == 0  # type: ignore[union-attr]


def test_in_batch_dedup_uses_cosine_for_vectors_that_are_not_unit(mem: TieredMemory) -> None:
    a = np.zeros(384, dtype=np.float32)
    a[0], a[1] = 10.0, 1.0  # same direction, norm ~10
    b = np.zeros(384, dtype=np.float32)
    b[0], b[1] = 10.0, 6.0  # cosine with a ~0.89: a different memory
    out = mem.add_many(
        [
            {"content": "first", "embedding": a},
            {"content": "second", "embedding": b},
            {"content": "first again", "embedding": a * 3},
        ],
        namespace="ns",
    )
    assert out[0].id != out[1].id  # 10x norm must not turn 0.89 into a "duplicate"
    assert out[2].id == out[0].id  # same direction, any norm: a duplicate
    assert mem.stats(namespace="ns").total == 2
