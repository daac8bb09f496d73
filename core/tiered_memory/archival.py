"""The archival pipeline (DESIGN.md section 6): what goes, in what order, how many per
run, who may write it, and what happens when some fail. The steps of one memory live in
`tiered_memory.archive`; this module is the policy around them, in one place.

- **Candidates**, each with its reason (the rule is `lifecycle.archive_queries` and
  `lifecycle.low_salience`): COLD for `cold_to_archive` (`cold_ttl_expired`), or old,
  unimportant and barely used lately (`low_salience_aged_out`); least important
  and oldest first. Quarantined memories are left out; memories that failed before go
  after the others, so one that always fails never stands in front of the rest.
- **Old COLD clusters** (seed 002, `consolidation.archive_clusters`, on): near-duplicate
  COLD candidates among those a run takes are archived together under one summary, all
  or none (`clusters`). A memory that failed before goes on its own, so one that always
  fails is quarantined alone, never with its mates.
- **The per-run cap**: a sweep attempts at most `ArchivalPolicy.batch_size` memories,
  all namespaces together (the dry run estimates the same ones).
- **Claims**: each group of up to COMMIT_GROUP memories is claimed in the store's
  journal before any original is written, and only the claimant can commit a record.
  An explicit `archive()` and a sweep (in one process or two) never archive one memory
  twice: the second finds it claimed and leaves it. A replace or a hard delete of a
  memory ends its claim, and a memory changed since its draft (a forget, a pin) is not
  committed (`Archiver.commit`): it stays live, uncounted. A claim lasts `claim_lease`
  (wall-clock); a claim of a process of this host that has exited is taken over at
  once, so a killed sweep never blocks the next.
- **Originals** go under a content-addressed key (`archive.original_key`), noted in the
  journal before they are written: two attempts never write the same key, a record
  always names the bytes it verifies, and the next attempt deletes what a failed or
  killed one left behind.
- **Commit groups**: the records of a group commit in one transaction (one folder fsync
  and one synced commit for the group); a failed group is retried one memory at a time.
- **One retry layer**: each step calls its port once. The summariser and the object
  store retry transient errors themselves (AnthropicSummarizer: `max_retries` with
  backoff and Retry-After; S3: botocore's retry modes); retrying again here multiplied
  the requests (5 x 5 = 25 for one memory). A failure is the memory's for this run.
- **The pause rule**: a run stops archiving a namespace once more than
  `pause_failure_ratio` of the memories it tried failed (at least 20 counted); the
  rest stay COLD until the next run.
- **Quarantine**: a memory whose archival failed `quarantine_after` times is set aside
  with its last error: no sweep tries it again, `stats()`, `maintain()`'s report and the
  CLI show it, and an explicit `archive()` of it releases it. Outages (the backend's
  fault, not the memory's) never count toward it.
- **Flags of older records**: a record archived before records kept their memory's
  flags (forgotten, superseded) gets them from its verified original, after archival in
  each sweep (`backfill_flags`), at most `batch_size` filled per run, all namespaces
  together. An unreadable original is reported and retried next run, and never stands
  in front of the rest: a namespace's step also stops after `batch_size` failures, or at
  its first outage.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from . import clusters, lifecycle
from .archive import Archiver, Draft
from .errors import BackendUnavailableError
from .models import (
    LIVE_TIERS,
    ArchiveDue,
    ArchiveEstimate,
    MaintenanceReport,
    Memory,
    QuarantinedMemory,
    Tier,
)
from .policy import Policy
from .ports import ArchivalFailure, ArchivalState, MemoryStore, ScanQuery

log = logging.getLogger(__name__)

# Memories claimed, and records committed, per group (one journal write and one synced
# commit each, instead of one per memory).
COMMIT_GROUP = 64
CLUSTER_WINDOW = 1_000  # candidates compared at once for clusters (a quadratic matrix)
MIN_COUNTED = 20  # the pause rule's floor: 2 failures among the first 20 pause a run
# Failures that are the backend's, not the memory's: they never count toward quarantine.
OUTAGES: tuple[type[BaseException], ...] = (BackendUnavailableError, OSError, TimeoutError)


@dataclass(frozen=True)
class Candidate:
    """A memory due for archival, and why (the reason goes into its original);
    `failed_before`: an earlier run's archival of it failed."""

    memory: Memory
    reason: str
    failed_before: bool = False


@dataclass
class Budget:
    """What is left of one run's cap (`ArchivalPolicy.batch_size`), across namespaces."""

    remaining: int


def new_claimant() -> str:
    """A claimant token: `host/pid/nonce`, so a claim of an exited process of this host
    can be told from one of a live process (`exited`)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"


def exited(claimant: str) -> bool:
    """True when `claimant` names a process of this host that no longer exists. Claims of
    other hosts, and anything unsure, are left to their lease."""
    host, _, rest = claimant.partition("/")
    pid_text, _, _ = rest.partition("/")
    if host != socket.gethostname() or not pid_text.isdigit() or sys.platform == "win32":
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by another user
        return False
    return False


def _wall() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class _Run:
    """One pass over one namespace's candidates: the counts the pause rule reads."""

    ns: str
    explicit: bool
    report: MaintenanceReport | None
    ratio: float
    failed: int = 0
    paused: bool = False
    tried: int = 0  # memories tried so far (the pause rule's denominator)
    clusters: int = 0  # clusters archived
    archived: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)

    def fail(self, position: int, memory_id: str, error: BaseException) -> bool:
        """Count a failure of the memory tried `position`-th; True when the run pauses."""
        self.failed += 1
        if self.report is None:
            return False
        self.report.errors.append(
            f"{self.ns}: archive {memory_id}: {type(error).__name__}: {error}"
        )
        if not self.paused and self.failed / max(position, MIN_COUNTED) > self.ratio:
            self.paused = True
            self.report.archive_paused = True
            self.report.errors.append(
                f"{self.ns}: archival paused: {self.failed} of {position} failed "
                f"(> {self.ratio:.0%}); the rest stay COLD until next run"
            )
        return self.paused


class ArchivalPipeline:
    """Runs `Archiver`'s steps over candidates, under claims, caps and the pause rule."""

    def __init__(self, store: MemoryStore, archiver: Archiver, policy: Policy) -> None:
        self.store, self.archiver, self.policy = store, archiver, policy

    def budget(self) -> Budget:
        return Budget(self.policy.archival.batch_size)

    # -- candidates ----------------------------------------------------------------------

    async def candidates(self, ns: str, now: datetime) -> list[Candidate]:
        """Every memory due at `now`, in the order a run tries them: never failed
        before, then least important, then oldest. Quarantined ones are left out."""
        tp = self.policy.tiers
        queries = lifecycle.archive_queries(now, tp)
        found: dict[str, Candidate] = {}
        async for page in self._pages(ns, queries[lifecycle.COLD_TTL_EXPIRED]):
            found.update((m.id, Candidate(m, lifecycle.COLD_TTL_EXPIRED)) for m in page)
        async for page in self._pages(ns, queries[lifecycle.LOW_SALIENCE]):
            for m in page:
                if lifecycle.low_salience(m, now, tp):
                    found.setdefault(m.id, Candidate(m, lifecycle.LOW_SALIENCE))
        if lifecycle.FORCED_AGE in queries:
            async for page in self._pages(ns, queries[lifecycle.FORCED_AGE]):
                for m in page:
                    if m.id not in found and lifecycle.forced(m, now, tp):
                        found[m.id] = Candidate(m, lifecycle.FORCED_AGE)
        states = await self.store.archival_states(ns) if found else {}
        due = [
            replace(c, failed_before=state is not None and state.error is not None)
            for c in found.values()
            if not _quarantined(state := states.get(c.memory.id))
        ]
        return sorted(
            due, key=lambda c: (c.failed_before, c.memory.importance, c.memory.created_at)
        )

    async def unused_since(self, ns: str, before: datetime) -> list[Memory]:
        """The live memories of `ns` last used (or, never used, made) before `before`,
        pinned and core ones excepted: what an explicit archive "older than" takes,
        whatever their tier."""
        query = ScanQuery(
            tiers=LIVE_TIERS,
            last_used_before=before,
            pinned=False,
            core=False,
            limit=lifecycle.SCAN_PAGE,
        )
        return [m async for page in self._pages(ns, query) for m in page]

    async def _pages(self, ns: str, query: ScanQuery) -> AsyncIterator[list[Memory]]:
        after: str | None = None
        while True:
            page = await self.store.scan(ns, replace(query, after_id=after))
            if not page:
                return
            yield page
            if len(page) < query.limit:
                return
            after = page[-1].id

    async def quarantined(self, ns: str) -> list[QuarantinedMemory]:
        """The memories of `ns` archival has set aside, by id."""
        states = await self.store.archival_states(ns)
        return [
            QuarantinedMemory(
                namespace=ns,
                id=s.id,
                failures=s.failures,
                error=s.error or "",
                failed_at=s.failed_at,
            )
            for s in sorted(states.values(), key=lambda s: s.id)
            if s.quarantined
        ]

    # -- runs ----------------------------------------------------------------------------

    async def sweep(
        self, ns: str, now: datetime, report: MaintenanceReport, budget: Budget
    ) -> None:
        """The sweep's archival step for one namespace, within the run's `budget`:
        clusters of near-duplicates among the first candidates first, each under one
        summary (`clusters`), then the others one by one."""
        candidates = await self.candidates(ns, now)
        chosen = candidates[: budget.remaining]
        groups = await self.clusters(ns, chosen)
        grouped = {c.memory.id for group in groups for c in group}
        if report.dry_run:
            budget.remaining -= len(chosen)
            estimate = await self.archiver.estimate(
                ns, [c.memory for c in chosen], now, shared=_shared(groups)
            )
            if report.archive_estimate is None:
                report.archive_estimate = estimate
            else:
                total = report.archive_estimate
                for name in ArchiveEstimate.model_fields:
                    setattr(total, name, getattr(total, name) + getattr(estimate, name))
            self._count(report, ns, chosen, {c.memory.id for c in chosen}, len(groups), now)
        else:
            run = _Run(ns, False, report, self.policy.archival.pause_failure_ratio)
            try:
                for group in groups:
                    if run.paused or budget.remaining < len(group):
                        break
                    await self._cluster(run, group, now, budget)
                singles = [c for c in candidates if c.memory.id not in grouped]
                await self._run(run, singles, now, budget)
            finally:
                self._count(report, ns, candidates, set(run.archived), run.clusters, now)
                report.add("archive_failed", run.failed)
                report.add("archive_quarantined", len(run.quarantined))
        report.quarantined.extend(await self.quarantined(ns))

    async def estimate(
        self, ns: str, chosen: Sequence[Candidate], now: datetime
    ) -> ArchiveEstimate:
        """What archiving `chosen` as the sweep does would cost: one summary per cluster,
        as the dry run counts it (`archive_preview` of the due memories says the same)."""
        groups = await self.clusters(ns, chosen)
        return await self.archiver.estimate(
            ns, [c.memory for c in chosen], now, shared=_shared(groups)
        )

    async def clusters(self, ns: str, chosen: Sequence[Candidate]) -> list[list[Candidate]]:
        """Seed 002's "summarise old COLD clusters": near-duplicates (cosine at least
        `consolidation.min_similarity`, at most `max_group` together) among the COLD
        candidates, found window by window in candidate order. Each group's first member
        is its most important: its record carries the group's summary.

        A memory that failed before is archived on its own: a cluster fails as one, so
        one the summariser always rejects would otherwise take its mates to quarantine."""
        cp = self.policy.consolidation
        cold = [c for c in chosen if c.memory.tier is Tier.COLD and not c.failed_before]
        if not cp.archive_clusters or len(cold) < 2:
            return []
        out: list[list[Candidate]] = []
        for start in range(0, len(cold), CLUSTER_WINDOW):
            window = {c.memory.id: c for c in cold[start : start + CLUSTER_WINDOW]}
            items, vectors = await self.store.embeddings(ns, list(window))
            for ids in clusters.near_duplicate_groups(
                items, vectors, min_similarity=cp.min_similarity, max_group=cp.max_group
            ):
                group = sorted((window[i] for i in ids), key=lambda c: -c.memory.importance)
                out.append(group)
        return out

    def _count(
        self,
        report: MaintenanceReport,
        ns: str,
        candidates: Sequence[Candidate],
        archived: set[str],
        groups: int,
        now: datetime,
    ) -> None:
        """Count what a run archived (a dry run: would): the forced ones apart, listed."""
        window = self.policy.tiers.archive_recent_window
        forced = [
            c for c in candidates if c.memory.id in archived and c.reason == lifecycle.FORCED_AGE
        ]
        report.add("cold_to_archived", len(archived) - len(forced))
        report.add("forced_archived", len(forced))
        report.add("archive_clusters", groups)
        report.forced_archival.extend(
            ArchiveDue(
                namespace=ns,
                id=c.memory.id,
                tier=c.memory.tier,
                reason=c.reason,
                importance=c.memory.importance,
                created_at=c.memory.created_at,
                recent_uses=lifecycle.recent_uses_at_most(c.memory, now, window),
            )
            for c in forced
        )

    async def _cluster(
        self, run: _Run, group: Sequence[Candidate], now: datetime, budget: Budget
    ) -> None:
        """Archive one cluster under one summary, all or none: claimed together (a member
        another archival holds leaves the group to a later run), drafted together, and
        committed in one transaction. A failure counts for every member, as it would
        have had each been archived on its own."""
        ns, claimant = run.ns, new_claimant()
        claimed = await self._claim(ns, group, claimant, release=False)
        budget.remaining -= len(claimed)
        failures: dict[str, ArchivalFailure] = {}
        drafts: list[Draft] = []
        try:
            if len(claimed) < len(group):
                return
            try:
                found = await self.archiver.draft_cluster(
                    ns,
                    [(c.memory.id, c.reason) for c in group],
                    now=now,
                    previous={i: s.written for i, s in claimed.items()},
                )
                if found is None:
                    return
                drafts = found
                checksums = {d.id: d.record.checksum for d in drafts}
                if len(await self.store.note_archival(ns, claimant, checksums)) < len(drafts):
                    drafts = []  # a claim was taken over: nothing of ours was written
                    return
                for draft in drafts:
                    await self.archiver.store_original(ns, draft, defer_sync=True)
                for draft in drafts:
                    leftovers = [c for c in claimed[draft.id].written if c != draft.record.checksum]
                    if leftovers:
                        await self.archiver.discard(ns, draft.id, leftovers)
                committed = await self._commit(ns, drafts, claimant)
            except Exception as e:  # the whole cluster stays COLD, untouched
                for draft in drafts:
                    await self.archiver.discard(ns, draft.id, [draft.record.checksum])
                counts = not isinstance(e, OUTAGES)
                for c in group:
                    failures[c.memory.id] = ArchivalFailure(f"{type(e).__name__}: {e}", counts)
                    run.tried += 1
                    run.fail(run.tried, c.memory.id, e)
                return
            run.tried += len(group)
            run.clusters += 1
            for draft in drafts:
                if draft.id in committed:
                    run.archived.append(draft.id)
                else:  # lost its claim: the original is nobody's
                    await self.archiver.discard(ns, draft.id, [draft.record.checksum])
        finally:
            await self._release(run, claimant, claimed, failures)

    async def _release(
        self,
        run: _Run,
        claimant: str,
        claimed: Iterable[str],
        failures: dict[str, ArchivalFailure],
    ) -> None:
        """Give back a group's claims, recording its failures; memories that failed too
        often are quarantined and reported."""
        quarantined = await self.store.release_archival(
            run.ns,
            claimant,
            list(claimed),
            failures=failures,
            now=_wall(),
            quarantine_after=self.policy.archival.quarantine_after,
        )
        run.quarantined.extend(quarantined)

    async def backfill_flags(self, ns: str, report: MaintenanceReport, budget: Budget) -> None:
        """The sweep's step after archival: records of `ns` archived before records kept
        their memory's flags get them from their originals (`Archiver.fill_flags`),
        within what `budget` (its own, not archival's) has left. Records whose original
        cannot be read stay unknown (searched as neither forgotten nor superseded);
        each is reported and tried again next run, so the rest are paged past them."""
        if report.dry_run or budget.remaining <= 0:
            return
        cap = self.policy.archival.batch_size
        filled = failed = 0
        after: str | None = None
        try:
            while budget.remaining > 0 and failed < cap:
                limit = budget.remaining
                page = await self.store.scan_archives(
                    ns, after_id=after, limit=limit, flags_unknown=True
                )
                for record in page:
                    try:
                        done = await self.archiver.fill_flags(ns, record)
                    except OUTAGES as e:  # the backend's fault: no use trying the rest now
                        report.errors.append(_flags_error(ns, record.id, e))
                        return
                    except Exception as e:  # this record's original: the others go on
                        report.errors.append(_flags_error(ns, record.id, e))
                        failed += 1
                    else:
                        if done:  # (False: restored or deleted meanwhile)
                            filled += 1
                            budget.remaining -= 1
                    if budget.remaining <= 0 or failed >= cap:
                        return
                if len(page) < limit:
                    return
                after = page[-1].id
        finally:
            report.add("archive_flags_filled", filled)

    async def archive(
        self, ns: str, memories: Sequence[Memory], *, now: datetime, reason: str
    ) -> int:
        """Archive `memories` now, in order (an explicit `archive()`): quarantined ones
        are released and tried; one another archival holds is left to it, uncounted.
        The first failure is recorded and raised. Returns how many this call archived."""
        run = _Run(ns, True, None, self.policy.archival.pause_failure_ratio)
        await self._run(run, [Candidate(m, reason) for m in memories], now, None)
        return len(run.archived)

    async def _run(
        self, run: _Run, candidates: Sequence[Candidate], now: datetime, budget: Budget | None
    ) -> None:
        claimant = new_claimant()
        position = run.tried
        start = 0
        while start < len(candidates) and not run.paused:
            room = COMMIT_GROUP if budget is None else min(COMMIT_GROUP, budget.remaining)
            if room <= 0:
                return
            chunk = candidates[start : start + room]
            start += len(chunk)
            claimed = await self._claim(run.ns, chunk, claimant, release=run.explicit)
            if budget is not None:
                budget.remaining -= len(claimed)
            group = [c for c in chunk if c.memory.id in claimed]
            position = await self._group(run, group, claimed, claimant, now, position)
            run.tried = position

    async def _claim(
        self, ns: str, chunk: Sequence[Candidate], claimant: str, *, release: bool
    ) -> dict[str, ArchivalState]:
        """Claim what no live archival holds: free, expired, or of an exited process."""
        ids = [c.memory.id for c in chunk]
        states = await self.store.archival_states(ns, ids)
        stale = {
            i: s.claimant
            for i, s in states.items()
            if s.claimant is not None and exited(s.claimant)
        }
        wall = _wall()
        return await self.store.claim_archival(
            ns,
            ids,
            claimant=claimant,
            until=wall + self.policy.archival.claim_lease,
            now=wall,
            replacing=stale,
            release_quarantine=release,
        )

    async def _group(
        self,
        run: _Run,
        group: Sequence[Candidate],
        claimed: dict[str, ArchivalState],
        claimant: str,
        now: datetime,
        position: int,
    ) -> int:
        """Archive one claimed group: each memory's original written and verified on its
        own, the records committed together. Failures are counted per memory in order,
        as if each committed on its own: a failing memory first commits the ones ahead
        of it. Every claim of the group is released at the end; returns the position of
        the last memory tried."""
        failures: dict[str, ArchivalFailure] = {}
        pending: list[tuple[int, Draft]] = []
        error: BaseException | None = None

        def failed(at: int, memory_id: str, e: BaseException) -> bool:
            """Record a failure; True when the group must stop."""
            nonlocal error
            counts = not isinstance(e, OUTAGES)
            failures[memory_id] = ArchivalFailure(f"{type(e).__name__}: {e}", counts=counts)
            if error is None:
                error = e
            return run.fail(at, memory_id, e) or run.explicit

        async def flush() -> bool:
            """Commit what is pending; False when a failure among it stopped the group."""
            drafts = list(pending)
            pending.clear()
            try:
                committed = await self._commit(run.ns, [d for _, d in drafts], claimant)
            except Exception:  # retried one by one, for each memory's own outcome
                committed = set()
                for at, draft in drafts:
                    try:
                        committed |= await self._commit(run.ns, [draft], claimant)
                    except Exception as e:  # this memory stays COLD, untouched
                        if failed(at, draft.id, e):
                            return False
            for _, draft in drafts:
                if draft.id in committed:
                    run.archived.append(draft.id)
                elif draft.id not in failures:  # lost its claim: the original is nobody's
                    await self.archiver.discard(run.ns, draft.id, [draft.record.checksum])
            return True

        try:
            for candidate in group:
                position += 1
                memory_id = candidate.memory.id
                try:
                    draft = await self._prepare(
                        run.ns, candidate, claimed[memory_id], claimant, now
                    )
                except Exception as e:  # this memory stays COLD, untouched
                    flushed = await flush()  # the memories ahead of it count first
                    if failed(position, memory_id, e) or not flushed:
                        break
                    continue
                if draft is not None:
                    pending.append((position, draft))
            else:
                await flush()
        finally:
            await self._release(run, claimant, claimed, failures)
        if run.explicit and error is not None:
            raise error
        return position

    async def _prepare(
        self, ns: str, candidate: Candidate, state: ArchivalState, claimant: str, now: datetime
    ) -> Draft | None:
        """Draft, note, write and verify one memory's original; then delete what earlier
        attempts left (the new original holds the links they may have saved)."""
        memory_id = candidate.memory.id
        draft = await self.archiver.draft(
            ns, memory_id, now=now, reason=candidate.reason, previous=state.written
        )
        if draft is None:
            return None
        noted = await self.store.note_archival(ns, claimant, {memory_id: draft.record.checksum})
        if memory_id not in noted:  # the claim was taken over (its lease ran out)
            return None
        try:
            await self.archiver.store_original(ns, draft, defer_sync=True)
        except BaseException:
            await self.archiver.discard(ns, memory_id, [draft.record.checksum])
            raise
        leftovers = [c for c in state.written if c != draft.record.checksum]
        if leftovers:
            await self.archiver.discard(ns, memory_id, leftovers)
        return draft

    async def _commit(self, ns: str, drafts: Sequence[Draft], claimant: str) -> set[str]:
        if not drafts:
            return set()
        return await self.archiver.commit(ns, drafts, claimant=claimant)


def _shared(groups: Sequence[Sequence[Candidate]]) -> int:
    """How many memories are summarised along with another: no call of their own."""
    return sum(len(group) - 1 for group in groups)


def _flags_error(ns: str, memory_id: str, error: BaseException) -> str:
    return f"{ns}: archive flags {memory_id}: {type(error).__name__}: {error}"


def _quarantined(state: ArchivalState | None) -> bool:
    return state is not None and state.quarantined


__all__ = [
    "COMMIT_GROUP",
    "ArchivalPipeline",
    "Budget",
    "Candidate",
    "exited",
    "new_claimant",
]
