"""Issue 2's acceptance: recall over 1,000 memories spread over HOT, WARM, COLD and
pinned keeps to its budget, honours tier shares when a Policy sets them, and refills
from other tiers; with the default shares only pinned memories reserve room."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.matrix import MemoryFactory
from tiered_memory import (
    BudgetShares,
    HashingEmbedder,
    ManualClock,
    MemoryInput,
    Policy,
    Tier,
    TieredMemory,
)
from tiered_memory.budget import share_caps, share_of

COLOURS = ["red", "blue", "green", "amber", "violet", "teal", "ochre", "silver"]
THINGS = ["billing", "search", "storage", "login", "export", "mobile", "report", "audit"]
QUERY = "project migration plan status for the weekly planning meeting"


def note(i: int) -> str:
    return (
        f"Status note {i}: the {COLOURS[i % 8]} team reviewed the {THINGS[(i // 8) % 8]} "
        f"migration plan, agreed on {i % 13 + 2} follow-up tasks, and will report progress "
        f"on the project dashboard before the weekly planning meeting number {i}."
    )


# Budget packing over 1,000 memories, without links: the other backend combinations
# run with --matrix (tests/matrix.py).
pytestmark = pytest.mark.matrix

TIER_SHARES = BudgetShares(pinned=0.25, hot=0.15, warm=0.35, cold=0.25)


@pytest.fixture
def shared(tmp_path: Path, clock: ManualClock, memories: MemoryFactory) -> Iterator[TieredMemory]:
    """A memory whose Policy reserves a share of the budget for each tier."""
    engine = memories.open_sync(
        tmp_path / "shares.db",
        embedder=HashingEmbedder(),
        clock=clock,
        policy=Policy(budget=TIER_SHARES),
    )
    try:
        yield engine
    finally:
        engine.close()


def populate(mem: TieredMemory, counts: dict[str, int]) -> None:
    start = 0
    for group, n in counts.items():
        items = [MemoryInput(content=note(start + j), pinned=group == "pinned") for j in range(n)]
        added = mem.add_many(items, namespace="ns", dedup=False, link=False)
        start += n
        target = {"warm": Tier.WARM, "cold": Tier.COLD}.get(group)
        for m in added if target else []:
            mem.demote(m.id, target, namespace="ns")


def used_by_share(mem: TieredMemory, budget: int) -> tuple[dict[str, int], int, int]:
    # deep: COLD is otherwise searched only when the active tiers find too little
    inj = mem.recall(QUERY, namespace="ns", budget_tokens=budget, deep=True, record_use=False)
    used = dict.fromkeys(("pinned", "hot", "warm", "cold"), 0)
    for hit in inj.items:
        used[share_of(hit)] += hit.tokens
    assert inj.tokens <= budget
    assert sum(inj.by_tier.values()) == sum(used.values())
    biggest = max(h.tokens for h in inj.items)
    return used, inj.tokens, biggest


@pytest.mark.slow
def test_shares_are_honoured_when_every_tier_has_enough(shared: TieredMemory) -> None:
    populate(shared, {"pinned": 100, "hot": 300, "warm": 300, "cold": 300})
    assert shared.stats(namespace="ns").total == 1000
    used, total, biggest = used_by_share(shared, 1000)
    caps = share_caps(1000, TIER_SHARES)
    for share, cap in caps.items():
        # items are all-or-nothing: each share is full to within one item
        assert used[share] > cap - biggest, (share, used)
    # what one share could not use goes to the best remaining hits, of any tier
    over = sum(max(0, used[s] - cap) for s, cap in caps.items())
    under = sum(max(0, cap - used[s]) for s, cap in caps.items())
    assert over <= under
    assert total > 1000 - 2 * biggest


@pytest.mark.slow
def test_a_short_tier_leaves_its_share_to_the_others(shared: TieredMemory) -> None:
    populate(shared, {"pinned": 100, "hot": 450, "warm": 1, "cold": 449})
    used, total, biggest = used_by_share(shared, 1000)
    caps = share_caps(1000, TIER_SHARES)
    assert used["warm"] <= biggest  # the one WARM memory at most
    assert total > 1000 - 2 * biggest  # the budget is still filled
    assert used["hot"] + used["pinned"] + used["cold"] > caps["hot"] + caps["pinned"]


@pytest.mark.slow
def test_tiny_and_huge_budgets(mem: TieredMemory) -> None:
    populate(mem, {"pinned": 10, "hot": 30, "warm": 30, "cold": 30})
    inj = mem.recall(QUERY, namespace="ns", budget_tokens=10, record_use=False)
    assert inj.tokens <= 10
    # no item cap by default: a budget that holds everything injects every memory
    big = mem.recall(QUERY, namespace="ns", budget_tokens=10**9, record_use=False)
    assert len(big.items) == 100
    capped = mem.recall(QUERY, namespace="ns", budget_tokens=10**9, max_items=7)
    assert len(capped.items) == 7


@pytest.mark.slow
def test_default_shares_reserve_room_for_pinned_memories_only(mem: TieredMemory) -> None:
    populate(mem, {"pinned": 100, "hot": 300, "warm": 300, "cold": 300})
    used, total, biggest = used_by_share(mem, 1000)
    assert used["pinned"] > 250 - biggest  # pinned memories fill their reservation
    assert total > 1000 - 2 * biggest  # and the best of the rest fill the budget
