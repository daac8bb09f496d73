"""`add(tier=)`: a new memory starts where the caller says (seed 002's store tool), a
near-duplicate stays where it is, and a bad start tier is refused before any write."""

from __future__ import annotations

import pytest

from tiered_memory import AsyncTieredMemory, Tier, ValidationError

pytestmark = pytest.mark.matrix


async def test_a_new_memory_starts_in_the_tier_asked_for(amem: AsyncTieredMemory) -> None:
    hot = await amem.add("The user's daughter is called Ava")
    warm = await amem.add("The user's car is a blue Volvo estate", tier="warm")
    cold = await amem.add("Watched a documentary about octopuses", tier=Tier.COLD)
    pinned = await amem.add("Always answer in Spanish", tier="warm", pinned=True)
    stored = {m.id: m.tier for m in await amem.list()}
    assert stored == {
        hot.id: Tier.HOT,
        warm.id: Tier.WARM,
        cold.id: Tier.COLD,
        pinned.id: Tier.WARM,
    }


async def test_a_near_duplicate_is_never_moved_to_the_tier_asked_for(
    amem: AsyncTieredMemory,
) -> None:
    first = await amem.add("The user's car is a blue Volvo estate")
    again = await amem.add("The user's car is a blue Volvo estate", tier="cold")
    assert again.id == first.id
    assert again.tier is Tier.HOT
    assert [m.tier for m in await amem.list()] == [Tier.HOT]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"tier": "archived"}, "hot, warm or cold"),
        ({"tier": "lukewarm"}, "tier"),
        ({"tier": "cold", "pinned": True}, "hot or warm"),
    ],
)
async def test_a_bad_start_tier_is_refused_before_anything_is_written(
    amem: AsyncTieredMemory, fields: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        await amem.add("Never forget this", **fields)  # type: ignore[arg-type]
    assert await amem.list() == []
