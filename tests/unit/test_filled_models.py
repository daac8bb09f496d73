"""`models.filled`: the library's own rows become models without a second validation,
and a mapping that lacks a field the model has is validated instead (never a model
with a field missing)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError as PydanticValidationError

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock
from tiered_memory.models import Link, LinkKind, Memory, MemoryType, Tier, filled

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _values() -> dict[str, object]:
    return {
        "source": "a",
        "target": "b",
        "weight": 0.5,
        "kind": LinkKind.SIMILAR,
        "created_at": NOW,
        "updated_at": NOW,
    }


def test_every_field_given_equals_a_validated_model() -> None:
    made = filled(Link, _values())
    assert made == Link.model_validate(_values())
    assert made.model_fields_set == set(Link.model_fields)
    assert made.model_dump() == Link.model_validate(_values()).model_dump()


def test_a_missing_field_is_validated_not_left_out() -> None:
    values = _values()
    del values["weight"]  # required: validation refuses it
    with pytest.raises(PydanticValidationError):
        filled(Link, values)
    values = _values()
    del values["updated_at"]  # has a default: validation fills it
    made = filled(Link, values)
    assert "updated_at" in made.__dict__


def test_instances_sharing_their_field_names_stay_independent() -> None:
    """Filled instances share one set of field names (`filled`): changing, copying or
    dumping one never shows in another."""
    first, second = filled(Link, _values()), filled(Link, _values())
    first.weight = 0.9
    copied = second.model_copy(update={"weight": 0.1})
    assert (first.weight, second.weight, copied.weight) == (0.9, 0.5, 0.1)
    for made in (first, second, copied):
        assert made.model_fields_set == set(Link.model_fields)
        assert made.model_dump(exclude_unset=True) == made.model_dump()
    with pytest.raises(ValueError, match="no field"):
        first.colour = "red"  # type: ignore[attr-defined]  # no extra field joins the names
    assert second.model_fields_set == set(Link.model_fields)


async def test_a_new_memory_equals_the_validated_one(tmp_path: Path) -> None:
    """`add_many` builds its new memories without a second validation (`intake`): each
    equals the model pydantic validates from the same fields, UTC timestamps included."""
    mem = await AsyncTieredMemory.embedded(
        tmp_path / "m.db", embedder=HashingEmbedder(32), clock=ManualClock(NOW)
    )
    try:
        added = await mem.add_many(
            [
                "plain",
                {
                    "content": "all fields",
                    "memory_type": "factual",
                    "importance": 1,
                    "metadata": {"k": [1, {"x": None}]},
                    "source": "s",
                    "pinned": True,
                    "id": "given-id",
                    "tier": "warm",
                },
            ],
            dedup=False,
            link=False,
        )
    finally:
        await mem.close()
    for memory in added:
        fields = {name: getattr(memory, name) for name in Memory.model_fields}
        assert memory == Memory.model_validate(fields)
        assert memory.model_fields_set == set(Memory.model_fields)
        assert memory.created_at.tzinfo is timezone.utc
        assert type(memory.importance) is float
    assert added[1].id == "given-id"
    assert added[1].tier is Tier.WARM
    assert added[1].memory_type is MemoryType.FACTUAL
