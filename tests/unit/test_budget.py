"""Packing: best score first, reservations for the pinned share (and tier shares when
set), monotone in the budget; the finished injection never over the budget, with the
tokens of each tier; what a recall searches for to fill it."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory.budget import (
    candidates_wanted,
    choose,
    pack,
    pinned_scan,
    render_line,
    share_caps,
    share_of,
    with_pinned,
)
from tiered_memory.models import Hit, Memory, MemoryType, ScoreTerms, Tier
from tiered_memory.policy import BudgetShares, RetrievalPolicy
from tiered_memory.ports import MetadataFilter, SearchFilter
from tiered_memory.retrieval import ACTIVE, SearchPlan

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def words(text: str) -> int:
    """A transparent counter for exact arithmetic: one token per word."""
    return len(text.split())


def hit(i: int, tier: Tier, score: float, n_words: int = 9, pinned: bool = False) -> Hit:
    # render_line adds "- ", so a memory of 9 words costs 10 tokens
    content = " ".join(f"w{i}x{j}" for j in range(n_words))
    m = Memory(id=f"m{i}", content=content, tier=tier, pinned=pinned, created_at=T0, updated_at=T0)
    return Hit(memory=m, tier=tier, score=score, terms=ScoreTerms(score=score, relevance=score))


def many(tier: Tier, n: int, start: int, pinned: bool = False) -> list[Hit]:
    return [hit(start + i, tier, 1.0 - i * 0.001, pinned=pinned) for i in range(n)]


def sorted_hits(*groups: list[Hit]) -> list[Hit]:
    return sorted([h for g in groups for h in g], key=lambda h: h.score, reverse=True)


DESIGN_FIRST_SHARES = BudgetShares(pinned=0.25, hot=0.45, warm=0.25, cold=0.05)


def test_share_caps_follow_the_defaults() -> None:
    # only pinned memories reserve room by default; tiers act through the score
    assert share_caps(1000, BudgetShares()) == {"pinned": 250, "hot": 0, "warm": 0, "cold": 0}
    assert share_caps(1000, DESIGN_FIRST_SHARES) == {
        "pinned": 250,
        "hot": 450,
        "warm": 250,
        "cold": 50,
    }


def test_set_tier_shares_are_honoured_when_every_tier_has_enough() -> None:
    shares = DESIGN_FIRST_SHARES
    hits = sorted_hits(
        many(Tier.HOT, 60, 0, pinned=True),
        many(Tier.HOT, 60, 100),
        many(Tier.WARM, 60, 200),
        many(Tier.COLD, 60, 300),
    )
    p = choose(hits, budget=1000, max_items=1000, shares=shares, count_tokens=words)
    assert p.tokens_by_share == share_caps(1000, shares)
    assert p.used == 1000


def test_by_default_the_best_lines_win_whatever_their_tier() -> None:
    hits = sorted_hits(
        [hit(i, Tier.COLD, 0.9 - i * 0.001) for i in range(30)],
        [hit(100 + i, Tier.HOT, 0.5 - i * 0.001) for i in range(30)],
        [hit(200 + i, Tier.WARM, 0.7 - i * 0.001) for i in range(30)],
    )
    p = choose(hits, budget=400, shares=BudgetShares(), count_tokens=words)
    assert {h.tier for h in p.chosen} == {Tier.COLD, Tier.WARM}
    assert p.tokens_by_share == {"pinned": 0, "hot": 0, "warm": 100, "cold": 300}


def test_a_short_tier_leaves_its_share_to_the_best_others() -> None:
    hits = sorted_hits(many(Tier.HOT, 100, 0), many(Tier.WARM, 2, 200))
    p = choose(hits, budget=1000, max_items=1000, shares=BudgetShares(), count_tokens=words)
    assert p.tokens_by_share["warm"] == 20
    assert p.tokens_by_share["hot"] == 980
    assert p.used == 1000


def test_budget_is_never_exceeded_and_max_items_holds() -> None:
    hits = sorted_hits(many(Tier.HOT, 50, 0), many(Tier.WARM, 50, 100))
    p = choose(hits, budget=95, max_items=1000, shares=BudgetShares(), count_tokens=words)
    assert p.used <= 95
    assert p.used == 90
    q = choose(hits, budget=10_000, max_items=20, shares=BudgetShares(), count_tokens=words)
    assert len(q.chosen) == 20
    uncapped = choose(hits, budget=10_000, shares=BudgetShares(), count_tokens=words)
    assert len(uncapped.chosen) == 100


def test_an_oversized_item_is_skipped_for_smaller_ones() -> None:
    big = hit(1, Tier.HOT, 0.99, n_words=500)
    small = hit(2, Tier.HOT, 0.5)
    p = choose([big, small], budget=100, max_items=20, shares=BudgetShares(), count_tokens=words)
    assert [h.memory.id for h in p.chosen] == ["m2"]


def test_zero_budget_injects_nothing() -> None:
    p = choose(
        many(Tier.HOT, 3, 0), budget=0, max_items=20, shares=BudgetShares(), count_tokens=words
    )
    assert p.chosen == []


def test_pinned_first_then_by_score_and_tokens_recorded() -> None:
    hits = sorted_hits([hit(1, Tier.HOT, 0.9)], [hit(2, Tier.WARM, 0.1, pinned=True)])
    p = choose(hits, budget=1000, max_items=20, shares=BudgetShares(), count_tokens=words)
    assert [h.memory.id for h in p.chosen] == ["m2", "m1"]
    assert all(h.tokens == 10 for h in p.chosen)


def test_archived_hits_use_the_cold_share_and_are_marked() -> None:
    a = hit(7, Tier.ARCHIVED, 0.5)
    assert share_of(a) == "cold"
    assert render_line(a).startswith("- [archived id=m7] ")


@pytest.mark.parametrize("shares", [dict(pinned=0.5, hot=0.5, warm=0.5, cold=0.0)])
def test_shares_may_not_exceed_the_budget(shares: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="at most 1"):
        BudgetShares(**shares)


def test_a_weak_hit_does_not_claim_a_reservation() -> None:
    # a relevant WARM memory and a weak HOT one; the HOT share may not push it out
    strong = hit(1, Tier.WARM, 0.9, n_words=49)  # 50 tokens
    weak = hit(2, Tier.HOT, 0.3, n_words=49)
    weak.terms = ScoreTerms(score=0.3, relevance=0.2)
    shares = BudgetShares(pinned=0.0, hot=0.5, warm=0.5, cold=0.0)
    p = choose([strong, weak], budget=60, max_items=5, shares=shares, count_tokens=words)
    assert [h.memory.id for h in p.chosen] == ["m1"]  # leftovers go best-first
    ungated = shares.model_copy(update={"reserve_min_relevance": 0.0})
    q = choose([strong, weak], budget=100, max_items=5, shares=ungated, count_tokens=words)
    assert {h.memory.id for h in q.chosen} == {"m1", "m2"}


def test_pinned_memories_claim_their_share_whatever_their_relevance() -> None:
    pinned = hit(1, Tier.HOT, 0.1, pinned=True)
    pinned.terms = ScoreTerms(score=0.1, relevance=0.0)
    better = [hit(10 + i, Tier.WARM, 0.9) for i in range(10)]
    shares = BudgetShares(pinned=0.1, hot=0.3, warm=0.3, cold=0.3)
    p = choose([*better, pinned], budget=100, max_items=20, shares=shares, count_tokens=words)
    assert "m1" in {h.memory.id for h in p.chosen}


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=40),
    budget=st.integers(min_value=0, max_value=600),
    max_items=st.integers(min_value=1, max_value=30),
)
def test_a_lower_bound_on_tokens_never_changes_the_choice(
    sizes: list[int], budget: int, max_items: int
) -> None:
    tiers = [Tier.HOT, Tier.WARM, Tier.COLD]
    hits = sorted_hits(
        [hit(i, tiers[i % 3], 1.0 - i * 0.01, n_words=n) for i, n in enumerate(sizes)]
    )
    exact = choose(
        hits, budget=budget, max_items=max_items, shares=BudgetShares(), count_tokens=words
    )
    bounded = choose(
        hits,
        budget=budget,
        max_items=max_items,
        shares=BudgetShares(),
        count_tokens=words,
        min_tokens=lambda line: len(line.split()) - 1,  # a valid bound, one short
    )
    assert [h.memory.id for h in bounded.chosen] == [h.memory.id for h in exact.chosen]
    assert bounded.used == exact.used


def _ranked_pool(data: list[tuple[int, int, bool, float]]) -> list[Hit]:
    tiers = [Tier.HOT, Tier.WARM, Tier.COLD, Tier.ARCHIVED]
    hits = []
    for i, (n_words, tier, pinned, score) in enumerate(data):
        h = hit(i, tiers[tier], score, n_words=n_words, pinned=pinned and tier != 3)
        h.terms = ScoreTerms(score=score, relevance=score)
        hits.append(h)
    return sorted(hits, key=lambda h: (-h.score, h.memory.id))


POOLS = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=80),  # words
        st.integers(min_value=0, max_value=3),  # tier
        st.booleans(),  # pinned
        st.floats(min_value=0.0, max_value=1.0, allow_nan=False),  # score
    ),
    min_size=0,
    max_size=60,
)


def _outranks(a: Hit, b: Hit) -> bool:
    """a may take b's place: it scores at least as well, or it is pinned (the pinned
    reservation grows with the budget)."""
    return share_of(a) == "pinned" or a.score >= b.score


@settings(max_examples=400, deadline=None)
@given(pool=POOLS, budget=st.integers(min_value=0, max_value=1500), more=st.integers(1, 1500))
def test_a_larger_budget_never_drops_a_line_for_a_weaker_one(
    pool: list[tuple[int, int, bool, float]], budget: int, more: int
) -> None:
    """Monotone in the budget: whatever budget b injects and b' > b does not, b' dropped
    only for a line that outranks it (with no item cap and the default shares)."""
    hits = _ranked_pool(pool)
    small = choose(hits, budget=budget, shares=BudgetShares(), count_tokens=words)
    large = choose(hits, budget=budget + more, shares=BudgetShares(), count_tokens=words)
    small_ids = {h.memory.id for h in small.chosen}
    large_ids = {h.memory.id for h in large.chosen}
    gained = [h for h in large.chosen if h.memory.id not in small_ids]
    for lost in (h for h in small.chosen if h.memory.id not in large_ids):
        assert any(_outranks(g, lost) for g in gained), (lost.memory.id, budget, more)
    assert large.used <= budget + more


@settings(max_examples=400, deadline=None)
@given(pool=POOLS, budget=st.integers(min_value=0, max_value=1500))
def test_a_skipped_line_never_outranks_a_chosen_one_it_would_replace(
    pool: list[tuple[int, int, bool, float]], budget: int
) -> None:
    """Faithful to the score: an unchosen non-pinned line either does not fit in the room
    left, or every line chosen after it in the order outranks it."""
    hits = _ranked_pool(pool)
    p = choose(hits, budget=budget, shares=BudgetShares(), count_tokens=words)
    chosen = {h.memory.id for h in p.chosen}
    room = budget - p.used
    for h in hits:
        if h.memory.id in chosen or share_of(h) == "pinned":
            continue
        weaker = [c for c in p.chosen if share_of(c) != "pinned" and c.score < h.score]
        tokens = words(render_line(h))
        # swapping it in for every weaker chosen line would still not make it fit
        assert tokens > room + sum(c.tokens for c in weaker), h.memory.id


def test_pack_returns_the_injection_with_the_tokens_of_each_tier() -> None:
    hits = sorted_hits(
        many(Tier.HOT, 2, 0),
        many(Tier.WARM, 3, 100),
        many(Tier.COLD, 1, 200),
        [hit(300, Tier.ARCHIVED, 0.5)],
    )
    injection = pack(hits, budget=1000, shares=BudgetShares(), count_tokens=words, degraded=True)
    chosen = choose(hits, budget=1000, shares=BudgetShares(), count_tokens=words).chosen
    assert [h.memory.id for h in injection.items] == [h.memory.id for h in chosen]
    assert injection.text == "\n".join(render_line(h) for h in chosen)
    # an archived line says so: "[archived id=m300]" is two more words
    assert injection.tokens == 72
    assert injection.budget_tokens == 1000
    assert injection.by_tier == {Tier.HOT: 20, Tier.WARM: 30, Tier.COLD: 10, Tier.ARCHIVED: 12}
    assert (injection.degraded, injection.considered) == (True, 7)


def test_pack_trims_the_weakest_lines_until_the_joined_text_fits() -> None:
    """Lines counted one by one can fit while their joined text does not (here every
    newline costs a token): the weakest lines go until the text fits, and the tally
    counts only the lines kept."""
    hits = sorted_hits([hit(0, Tier.HOT, 0.9)], [hit(1, Tier.WARM, 0.8)], [hit(2, Tier.COLD, 0.1)])

    def words_and_newlines(text: str) -> int:
        return words(text) + text.count("\n")

    injection = pack(hits, budget=30, shares=BudgetShares(), count_tokens=words_and_newlines)
    assert [h.memory.id for h in injection.items] == ["m0", "m1"]  # m2 (the weakest) went
    assert injection.tokens == 21 <= 30
    assert injection.by_tier == {Tier.HOT: 10, Tier.WARM: 10, Tier.COLD: 0, Tier.ARCHIVED: 0}
    assert injection.considered == 3


def test_pack_of_nothing_or_a_zero_budget_is_an_empty_injection() -> None:
    empty = pack([], budget=100, shares=BudgetShares(), count_tokens=words)
    assert (empty.items, empty.text, empty.tokens, empty.considered) == ([], "", 0, 0)
    zero = pack(many(Tier.HOT, 3, 0), budget=0, shares=BudgetShares(), count_tokens=words)
    assert (zero.items, zero.tokens, zero.considered) == ([], 0, 3)
    assert set(zero.by_tier.values()) == {0}


def test_candidates_wanted_fill_the_budget_unless_items_are_capped() -> None:
    rp = RetrievalPolicy()
    assert candidates_wanted(1000, 7, rp) == 7
    assert candidates_wanted(1000, None, rp) == -(-1000 // rp.tokens_per_candidate)
    assert candidates_wanted(10**9, None, rp) == rp.max_candidates
    assert candidates_wanted(0, None, rp) == 0


def _plan(tiers: frozenset[Tier] | None = None, **filters: Any) -> SearchPlan:
    return SearchPlan(k=10, tiers=tiers, filters=SearchFilter(**filters))


def test_pinned_memories_are_candidates_unless_the_search_is_narrowed() -> None:
    scan = pinned_scan(_plan(), 4)
    assert scan is not None
    assert (scan.tiers, scan.pinned, scan.limit) == (ACTIVE, True, 20)
    at_least_one = pinned_scan(_plan(), 0)
    assert at_least_one is not None
    assert at_least_one.limit == 5
    for narrowed in (
        _plan(tiers=frozenset({Tier.WARM})),
        _plan(ids=frozenset({"a"})),
        _plan(ids=frozenset()),
        _plan(memory_types=frozenset({MemoryType.FACTUAL})),
        _plan(metadata=(MetadataFilter("project", "eq", "x"),)),
    ):
        assert pinned_scan(narrowed, 4) is None


def test_with_pinned_forces_the_pinned_memories_but_not_forgotten_ones() -> None:
    kept = Memory(id="p1", content="a", pinned=True, created_at=T0, updated_at=T0)
    forgotten = Memory(
        id="p2", content="b", pinned=True, do_not_inject=True, created_at=T0, updated_at=T0
    )
    plan = with_pinned(_plan(), [kept, forgotten])
    assert plan.force_ids == frozenset({"p1"})
    assert plan.k == 10  # the rest of the plan as it was
