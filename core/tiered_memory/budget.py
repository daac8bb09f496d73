"""Tier-aware token budgets (DESIGN.md section 4), as a pure packing function.

Each share (pinned, HOT, WARM, COLD; archived hits use COLD's) is filled best-score
first with the hits relevant enough to claim it (pinned memories always are);
whatever a share leaves unused then goes to the best remaining hits of any tier, so a
short tier never wastes the budget and a weak hit never crowds out a better one.
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
    return {
        "pinned": int(budget * shares.pinned),
        "hot": int(budget * shares.hot),
        "warm": int(budget * shares.warm),
        "cold": int(budget * shares.cold),
    }


def pack(
    hits: Sequence[Hit],
    *,
    budget: int,
    max_items: int,
    shares: BudgetShares,
    count_tokens: Callable[[str], int],
    min_tokens: Callable[[str], int] | None = None,
) -> Packing:
    """Choose hits for the prompt. `hits` must be sorted best first.

    Items are all-or-nothing (a memory is never cut mid-sentence); an item too large
    for what is left is skipped and smaller ones after it may still fit.
    `min_tokens`, when the counter can give one, is a cheap lower bound on a line's
    tokens: once the budget is nearly full, lines that cannot fit are skipped without
    being tokenised (otherwise the last few tokens cost a count of every candidate).
    """
    caps = share_caps(budget, shares)
    counted: dict[int, int] = {}
    floors: dict[int, int] = {}

    def cost_of(hit: Hit, room: int) -> int | None:
        """The hit's tokens, or None when it certainly does not fit in `room`."""
        key = id(hit)
        if key in counted:
            return counted[key]
        if key in floors and floors[key] > room:
            return None
        line = render_line(hit)
        if min_tokens is not None:
            floors[key] = min_tokens(line)
            if floors[key] > room:
                return None
        counted[key] = count_tokens(line)  # counted on first look, never up front
        return counted[key]

    used_by_share = dict.fromkeys(SHARE_ORDER, 0)
    chosen: list[Hit] = []
    chosen_ids: set[int] = set()

    for share in SHARE_ORDER:
        for hit in hits:
            if len(chosen) >= max_items:
                break
            if share_of(hit) != share:
                continue
            if share != "pinned" and hit.terms.relevance < shares.reserve_min_relevance:
                continue  # too weak to claim a reservation; it may still get leftovers
            tokens = cost_of(hit, caps[share] - used_by_share[share])
            if not tokens or used_by_share[share] + tokens > caps[share]:
                continue
            used_by_share[share] += tokens
            chosen.append(hit)
            chosen_ids.add(id(hit))

    used = sum(used_by_share.values())
    for hit in hits:  # leftovers, best first, any tier
        if len(chosen) >= max_items:
            break
        if id(hit) in chosen_ids:
            continue
        tokens = cost_of(hit, budget - used)
        if not tokens or used + tokens > budget:
            continue
        used += tokens
        used_by_share[share_of(hit)] += tokens
        chosen.append(hit)
        chosen_ids.add(id(hit))

    for hit in chosen:
        hit.tokens = counted[id(hit)]
    chosen.sort(key=lambda h: (SHARE_ORDER.index(share_of(h)) != 0, -h.score))
    return Packing(chosen=chosen, tokens_by_share=used_by_share, used=used)
