"""What a use and a tier move change on a stored memory: the rules of the port's
`record_access` and `set_tier`, kept once for every backend.

Each backend applies them where its data lives (the embedded store inside one SQL
UPDATE over the rows' columns, Weaviate on the objects it reads and writes back), but
computes them here, so a use counted or a memory gone COLD reads the same on every
backend:

- a use adds 1 to `use_count`; `last_accessed_at` is the latest use and never moves
  back, whatever order uses arrive in; `use_days` are the distinct UTC days of use,
  oldest first, only the most recent `TierPolicy.use_days_kept` of them; a use while
  COLD also counts toward revival (`uses_since_cold`).
- a move to another tier stamps `tier_changed_at`; entering COLD sets `cold_since` and
  resets `uses_since_cold`, leaving COLD clears `cold_since`; a memory already in the
  tier is left as it is (reruns are no-ops).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from .errors import ValidationError
from .models import LIVE_TIERS, Memory, Tier, utc
from .ports import AccessRecord


def uses_by_id(accesses: Sequence[AccessRecord]) -> dict[str, list[datetime]]:
    """A batch of uses grouped by memory, in the order given (times in UTC)."""
    out: dict[str, list[datetime]] = {}
    for access in accesses:
        out.setdefault(access.id, []).append(utc(access.when))
    return out


def kept_days(days: Iterable[date], keep: int) -> list[date]:
    """Distinct days, oldest first, only the most recent `keep` of them."""
    return sorted(set(days))[-keep:]


@dataclass(frozen=True)
class Uses:
    """The fields a batch of uses leaves on one memory."""

    use_count: int
    last_accessed_at: datetime
    use_days: list[date]
    uses_since_cold: int


def after_uses(
    *,
    tier: Tier,
    use_count: int,
    last_accessed_at: datetime | None,
    use_days: Iterable[date],
    uses_since_cold: int,
    whens: Sequence[datetime],
    keep_days: int,
) -> Uses:
    """The counts of a memory (in `tier`, with these counts) after uses at `whens`."""
    if not whens:
        raise ValueError("after_uses needs at least one use")
    latest = max(utc(w) for w in whens)
    if last_accessed_at is not None and utc(last_accessed_at) > latest:
        latest = utc(last_accessed_at)
    return Uses(
        use_count=use_count + len(whens),
        last_accessed_at=latest,
        use_days=kept_days([*use_days, *(utc(w).date() for w in whens)], keep_days),
        uses_since_cold=uses_since_cold + (len(whens) if tier is Tier.COLD else 0),
    )


def used(memory: Memory, whens: Sequence[datetime], *, keep_days: int) -> Memory:
    """A copy of `memory` after uses at `whens` (`after_uses`)."""
    counts = after_uses(
        tier=memory.tier,
        use_count=memory.use_count,
        last_accessed_at=memory.last_accessed_at,
        use_days=memory.use_days,
        uses_since_cold=memory.uses_since_cold,
        whens=whens,
        keep_days=keep_days,
    )
    return memory.model_copy(
        update={
            "use_count": counts.use_count,
            "last_accessed_at": counts.last_accessed_at,
            "use_days": counts.use_days,
            "uses_since_cold": counts.uses_since_cold,
        },
        deep=True,
    )


@dataclass(frozen=True)
class TierMove:
    """The fields a move into `tier` at `when` sets on each memory it moves."""

    tier: Tier
    tier_changed_at: datetime
    cold_since: datetime | None  # set entering COLD, cleared anywhere else
    resets_cold_uses: bool  # uses_since_cold back to 0 (entering COLD)


def tier_move(tier: Tier | str, when: datetime) -> TierMove:
    """The move into a live tier; ARCHIVED is refused (archival replaces the memory by
    its archive record instead: `archive_many`)."""
    target = Tier.parse(tier)
    if target not in LIVE_TIERS:
        raise ValidationError(
            f"set_tier moves live memories to HOT, WARM or COLD, not {target.value} "
            "(use archive_many)"
        )
    at = utc(when)
    cold = target is Tier.COLD
    return TierMove(
        tier=target, tier_changed_at=at, cold_since=at if cold else None, resets_cold_uses=cold
    )


def moved(memory: Memory, move: TierMove) -> Memory:
    """A copy of `memory` after `move`; unchanged (timestamps too) if already there."""
    if memory.tier is move.tier:
        return memory.model_copy(deep=True)
    changes: dict[str, object] = {
        "tier": move.tier,
        "tier_changed_at": move.tier_changed_at,
        "cold_since": move.cold_since,
    }
    if move.resets_cold_uses:
        changes["uses_since_cold"] = 0
    return memory.model_copy(update=changes, deep=True)
