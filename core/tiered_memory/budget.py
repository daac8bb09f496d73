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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .models import Hit, Tier
from .policy import BudgetShares

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


def pack(
    hits: Sequence[Hit],
    *,
    budget: int,
    shares: BudgetShares,
    count_tokens: Callable[[str], int],
    max_items: int | None = None,
    min_tokens: Callable[[str], int] | None = None,
) -> Packing:
    """Choose hits for the prompt. `hits` must be sorted best first.

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
