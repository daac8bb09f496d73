"""Tier-aware token budgets (DESIGN.md section 4), as a pure packing function.

The budget is filled best score first: the score already weighs a memory's tier,
freshness and use, so the packer only has to be faithful to it. A reservation (the
pinned share by default; tier shares when a Policy sets them) lets a share's best lines
in before the rest, as long as they are relevant enough to claim it; everything else
competes for the remaining room in score order.

Why best-first and not "fill each tier's share in turn": when shares filled in tier
order, a weak HOT line took room that a stronger COLD line needed, and a larger budget
could inject a worse context. Best-first packing is monotone in the budget: raising
the budget never drops a line except for a better-ranked one (property-tested).

`pack` returns the finished `Injection`: the lines `choose` picked, trimmed until the
joined text fits (lines can tokenise differently once joined), with the tokens of each
tier. What to search for it is a budget rule too: enough candidates to fill the budget
(`candidates_wanted`), and pinned memories always among them (`pinned_scan`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .models import Hit, Injection, Memory, Tier
from .policy import BudgetShares, RetrievalPolicy
from .ports import ScanQuery
from .retrieval import ACTIVE, SearchPlan

SHARE_ORDER = ("pinned", "hot", "warm", "cold")


def share_of(hit: Hit) -> str:
    if hit.memory.pinned and not hit.archived:
        return "pinned"
    if hit.tier is Tier.HOT:
        return "hot"
    if hit.tier is Tier.WARM:
        return "warm"
    return "cold"  # COLD and ARCHIVED


def render_line(hit: Hit) -> str:
    """One memory as a prompt line; archived summaries say so and give the id to expand."""
    text = " ".join(hit.memory.content.split())
    if hit.archived:
        return f"- [archived id={hit.memory.id}] {text}"
    return f"- {text}"


@dataclass
class Packing:
    chosen: list[Hit]
    tokens_by_share: dict[str, int] = field(default_factory=dict)
    used: int = 0


def share_caps(budget: int, shares: BudgetShares) -> dict[str, int]:
    """Tokens each share reserves out of `budget`."""
    return {
        "pinned": int(budget * shares.pinned),
        "hot": int(budget * shares.hot),
        "warm": int(budget * shares.warm),
        "cold": int(budget * shares.cold),
    }


class _Costs:
    """Token counts, taken on first look and never up front.

    `min_tokens`, when the counter can give one, is a cheap lower bound on a line's
    tokens: once the budget is nearly full, lines that cannot fit are skipped without
    being tokenised (otherwise the last few tokens cost a count of every candidate).
    """

    def __init__(
        self, count_tokens: Callable[[str], int], min_tokens: Callable[[str], int] | None
    ) -> None:
        self.count_tokens = count_tokens
        self.min_tokens = min_tokens
        self.counted: dict[int, int] = {}
        self.floors: dict[int, int] = {}

    def fitting(self, hit: Hit, room: int) -> int | None:
        """The hit's tokens when it fits in `room`, else None."""
        key = id(hit)
        tokens = self.counted.get(key)
        if tokens is None:
            floor = self.floors.get(key)
            if floor is None and self.min_tokens is not None:
                floor = self.floors[key] = self.min_tokens(render_line(hit))
            if floor is not None and floor > room:
                return None
            tokens = self.counted[key] = self.count_tokens(render_line(hit))
        return tokens if 0 < tokens <= room else None


def candidates_wanted(budget: int, max_items: int | None, rp: RetrievalPolicy) -> int:
    """How many hits to ask the search for: `max_items`, or with no item cap enough to
    fill the budget (`tokens_per_candidate` each, at most `max_candidates`)."""
    if max_items is not None:
        return max_items
    return min(rp.max_candidates, -(-budget // rp.tokens_per_candidate))


def pinned_scan(plan: SearchPlan, wanted: int) -> ScanQuery | None:
    """The scan for the pinned memories a recall always considers (pinning says "always
    consider this"), or None when the caller narrowed the search (tiers, ids, types or
    metadata): then only what matches is a candidate."""
    filters = plan.filters
    if plan.tiers is not None or filters.ids is not None:
        return None
    if filters.metadata or filters.memory_types:
        return None
    return ScanQuery(tiers=ACTIVE, pinned=True, limit=max(wanted, 1) * 5)


def with_pinned(plan: SearchPlan, pinned: Sequence[Memory]) -> SearchPlan:
    """`plan` with the pinned memories `pinned_scan` found as forced candidates (the
    forgotten ones aside)."""
    ids = frozenset(m.id for m in pinned if not m.do_not_inject)
    return dataclasses.replace(plan, force_ids=ids)


def pack(
    hits: Sequence[Hit],
    *,
    budget: int,
    shares: BudgetShares,
    count_tokens: Callable[[str], int],
    max_items: int | None = None,
    min_tokens: Callable[[str], int] | None = None,
    degraded: bool = False,
) -> Injection:
    """The injection for `budget`: the lines `choose` picks from `hits` (sorted best
    first), as prompt text that never exceeds the budget, and the tokens of each tier.

    The text is counted as joined: if it comes out over the budget, the weakest lines
    go until it fits. `degraded` is the search's (a backend was skipped)."""
    chosen = choose(
        hits,
        budget=budget,
        shares=shares,
        count_tokens=count_tokens,
        max_items=max_items,
        min_tokens=min_tokens,
    ).chosen
    text = "\n".join(render_line(h) for h in chosen)
    total = count_tokens(text)
    while total > budget and chosen:  # joins can tokenise differently; never overshoot
        worst = min(chosen, key=lambda h: h.score)
        chosen.remove(worst)
        text = "\n".join(render_line(h) for h in chosen)
        total = count_tokens(text)
    by_tier = dict.fromkeys(Tier, 0)
    for h in chosen:
        by_tier[h.tier] += h.tokens
    return Injection(
        items=chosen,
        text=text,
        tokens=total,
        by_tier=by_tier,
        budget_tokens=budget,
        degraded=degraded,
        considered=len(hits),
    )


def choose(
    hits: Sequence[Hit],
    *,
    budget: int,
    shares: BudgetShares,
    count_tokens: Callable[[str], int],
    max_items: int | None = None,
    min_tokens: Callable[[str], int] | None = None,
) -> Packing:
    """Choose hits for the prompt, each line counted alone. `hits` must be sorted best
    first.

    Items are all-or-nothing (a memory is never cut mid-sentence); an item too large
    for what is left is skipped and smaller ones after it may still fit. `max_items`,
    when given, stops the packing after that many lines (the budget is what binds by
    default).
    """
    caps = share_caps(budget, shares)
    costs = _Costs(count_tokens, min_tokens)
    used_by_share = dict.fromkeys(SHARE_ORDER, 0)
    chosen: list[Hit] = []
    taken: set[int] = set()
    used = 0

    def full() -> bool:
        return max_items is not None and len(chosen) >= max_items

    def take(hit: Hit, tokens: int) -> None:
        nonlocal used
        used += tokens
        used_by_share[share_of(hit)] += tokens
        chosen.append(hit)
        taken.add(id(hit))

    # Reservations: a share's best lines first, within the share. A line must be
    # relevant enough to claim room ahead of better-scored lines of other shares
    # (pinned memories always are: pinning says "always consider this").
    for share in SHARE_ORDER:
        if caps[share] <= 0:
            continue
        reserved = 0
        for hit in hits:
            if full():
                break
            if share_of(hit) != share:
                continue
            if share != "pinned" and hit.terms.relevance < shares.reserve_min_relevance:
                continue
            tokens = costs.fitting(hit, min(caps[share] - reserved, budget - used))
            if tokens is None:
                continue
            reserved += tokens
            take(hit, tokens)

    for hit in hits:  # everything else, best score first
        if full():
            break
        if id(hit) in taken:
            continue
        tokens = costs.fitting(hit, budget - used)
        if tokens is not None:
            take(hit, tokens)

    for hit in chosen:
        hit.tokens = costs.counted[id(hit)]
    chosen.sort(key=lambda h: (SHARE_ORDER.index(share_of(h)) != 0, -h.score))
    return Packing(chosen=chosen, tokens_by_share=used_by_share, used=used)
