"""The rules of the archival journal, pure: who may claim a memory, what noting an
original and ending a claim write. Every store keeps the rows its own way (a SQLite
table inside one transaction, a Weaviate collection without one) and applies these
same functions to them, so the rules live here once.

A row (`ports.ArchivalState`) exists only while a memory is claimed, has originals an
unfinished attempt wrote, or has failed; a row left with nothing to remember is
deleted (`forgotten`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from .ports import ArchivalFailure, ArchivalState

MAX_ERROR_CHARS = 2_000  # a failure's message, kept for the report; tracebacks are logged


@dataclass
class Changes:
    """What one journal operation writes: rows to store, rows to delete, and (for a
    release) the ids it set aside."""

    write: list[ArchivalState] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


def forgotten(state: ArchivalState) -> bool:
    """Nothing left to remember: no claim, no failure, no original to clean up."""
    return not (state.claimant or state.written or state.failures or state.error)


def held_by_another(state: ArchivalState, who: str, now: datetime, stale: str | None) -> bool:
    """Whether another archival holds the memory: its claim is unexpired and is not the
    one the caller found stale (`stale`: the claimant of a process that has exited)."""
    return (
        state.claimant is not None
        and state.claimant != who
        and (state.claimed_until is None or state.claimed_until > now)
        and state.claimant != stale
    )


def claim(
    rows: Mapping[str, ArchivalState],
    live: Sequence[str],
    *,
    who: str,
    until: datetime,
    now: datetime,
    replacing: Mapping[str, str] | None = None,
    release_quarantine: bool = False,
) -> tuple[dict[str, ArchivalState], Changes]:
    """Claim the `live` memories for `who` until `until`: those with no claim, an
    expired one, or the stale one `replacing` names. Quarantined ones only with
    `release_quarantine`, which lifts it (their failure count stays). Returns the rows
    claimed as they were before, and the rows to write."""
    stale = replacing or {}
    before: dict[str, ArchivalState] = {}
    changes = Changes()
    for memory_id in dict.fromkeys(live):
        state = rows.get(memory_id, ArchivalState(id=memory_id))
        if held_by_another(state, who, now, stale.get(memory_id)):
            continue
        if state.quarantined and not release_quarantine:
            continue
        before[memory_id] = state
        changes.write.append(replace(state, claimant=who, claimed_until=until, quarantined=False))
    return before, changes


def note(rows: Mapping[str, ArchivalState], who: str, written: Mapping[str, str]) -> Changes:
    """Add the checksum of an original about to be written to each row `who` holds;
    rows another claimant holds now are left alone (the caller must not write)."""
    changes = Changes()
    for memory_id, checksum in written.items():
        state = rows.get(memory_id)
        if state is None or state.claimant != who:
            continue
        if checksum not in state.written:
            state = replace(state, written=(*state.written, checksum))
        changes.write.append(state)
    return changes


def release(
    rows: Mapping[str, ArchivalState],
    who: str,
    ids: Sequence[str],
    *,
    failures: Mapping[str, ArchivalFailure] | None = None,
    now: datetime,
    quarantine_after: int,
) -> Changes:
    """End `who`'s claims on `ids`, recording `failures`: a counted failure adds to the
    memory's count, and the `quarantine_after`-th sets it aside. Rows taken over by
    another claimant meanwhile are theirs and left alone."""
    failed = failures or {}
    changes = Changes()
    for memory_id in dict.fromkeys([*ids, *failed]):
        state = rows.get(memory_id)
        if state is None or state.claimant != who:
            continue
        after = replace(state, claimant=None, claimed_until=None)
        failure = failed.get(memory_id)
        if failure is not None:
            after = replace(
                after,
                failures=after.failures + int(failure.counts),
                error=failure.error[:MAX_ERROR_CHARS],
                failed_at=now,
            )
            if failure.counts and after.failures >= quarantine_after:
                after = replace(after, quarantined=True)
                changes.quarantined.append(memory_id)
        if forgotten(after):
            changes.delete.append(memory_id)
        else:
            changes.write.append(after)
    return changes


__all__ = ["MAX_ERROR_CHARS", "Changes", "claim", "forgotten", "held_by_another", "note", "release"]
