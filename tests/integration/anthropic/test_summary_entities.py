"""Seed 001's "Entities:" line, as the archiver fills it and the Messages API receives
it (issue 22, item 3): the names, places, dates and numbers of the memory and of the
memories linked to it, never memory ids, and bounded however linked a memory is."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.summarizers.anthropic import AnthropicSummarizer
from tiered_memory.summarizers.entities import MAX_CHARS, entity_names

from .conftest import MessagesStub

NS = "entities"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
_HEX_ID = re.compile(r"[0-9a-f]{8}")


def _entities_line(stub: MessagesStub) -> str:
    content = stub.received[-1].body["messages"][0]["content"]
    head, found, entities = content.rpartition(", Entities: ")
    assert found, content
    assert head.endswith("Additional context - Domain: " + head.rsplit("Domain: ", 1)[-1])
    return str(entities)


async def _engine(tmp_path: Path, stub: MessagesStub) -> AsyncTieredMemory:
    claude = AnthropicSummarizer(
        api_key="test-key", base_url=stub.url, rate_per_second=1000, max_retries=0
    )
    return await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(), summarizer=claude, clock=ManualClock(START)
    )


async def test_the_prompt_names_the_entities_of_the_memory_and_its_links(
    tmp_path: Path, stub: MessagesStub
) -> None:
    mem = await _engine(tmp_path, stub)
    try:
        memory = await mem.add(
            "Ava Chen moved the Lisbon launch to March 14th; the budget is $4,200.",
            namespace=NS,
        )
        linked = await mem.add(
            "Marco Rossi signed the Porto office lease on 2026-02-01 for 15% off.",
            namespace=NS,
        )
        await mem.link(memory.id, linked.id, namespace=NS, weight=0.9)
        assert await mem.archive([memory.id], namespace=NS) == 1
    finally:
        await mem.close()
    entities = _entities_line(stub)
    for name in ("Ava Chen", "Lisbon", "March 14th", "$4,200", "Marco Rossi", "Porto"):
        assert name in entities
    assert "2026-02-01" in entities
    assert linked.id not in entities
    assert memory.id not in entities
    assert not _HEX_ID.search(entities)  # no id, not even a prefix of one


async def test_the_entities_stay_bounded_however_linked_a_memory_is(
    tmp_path: Path, stub: MessagesStub
) -> None:
    mem = await _engine(tmp_path, stub)
    try:
        memory = await mem.add("Ava Chen chairs the Lisbon board", namespace=NS)
        others = await mem.add_many(
            [
                f"Board member number {i} is Person{i} Surname{i} of City{i} since {1990 + i}"
                for i in range(30)
            ],
            namespace=NS,
            dedup=False,
        )
        for other in others:
            await mem.link(memory.id, other.id, namespace=NS, weight=0.5)
        assert await mem.archive([memory.id], namespace=NS) == 1
    finally:
        await mem.close()
    entities = _entities_line(stub)
    assert entities.startswith("Ava Chen, Lisbon")
    assert len(entities) <= MAX_CHARS
    assert not _HEX_ID.search(entities)


def test_entities_are_read_off_the_text_without_a_model() -> None:
    found = entity_names(
        [
            "The Lisbon office moved on March 14th. Ava Chen signed a $4,200 lease.",
            "Then Marco met Ava Chen at 3pm; ticket 81592b8b-77aa and 15% off.",
        ]
    )
    assert found == (
        "Lisbon",
        "March 14th",
        "Ava Chen",
        "$4,200",
        "Marco",
        "3pm",
        "15%",
    )
    assert entity_names(["no names here at all"]) == ()
    many = entity_names([" ".join(f"Name{i} Surname{i}." for i in range(100))])
    assert len(many) == 12
    assert len(", ".join(many)) <= MAX_CHARS
