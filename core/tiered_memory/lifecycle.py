"""The maintenance sweep: every tier transition of DESIGN.md section 2, in order.

Candidates come from store-side filters (tier + timestamps), page by page, never from
loading every memory. Each transition is a pure function of stored state and `now`,
so running the sweep twice at the same time changes nothing the second time, and a
sweep that stopped half-way is simply run again. The last steps, archival and the
flags of records archived before records kept them, are the pipeline of
`tiered_memory.archival` (claims, per-run caps, quarantine).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

import numpy as np
import numpy.typing as npt

from . import decay
from .archival import ArchivalPipeline
from .epoch import day_of, to_micros
from .models import Link, LinkKind, MaintenanceReport, Memory, MemoryType, Tier
from .namespaces import stored_namespace
from .policy import DecayPolicy, Policy
from .ports import (
    NO_TIME,
    AssociationGraph,
    Embedder,
    MemoryFacts,
    MemoryPatch,
    MemoryStore,
    ScanQuery,
    Summarizer,
    SummaryRequest,
)

log = logging.getLogger(__name__)

HOT = frozenset({Tier.HOT})
WARM = frozenset({Tier.WARM})
COLD = frozenset({Tier.COLD})
ACTIVE = frozenset({Tier.HOT, Tier.WARM})

# Page size of the id and column scans: their rows are a few dozen bytes, so large pages
# keep the number of queries down (consolidation windows keep the archival batch size).
SCAN_PAGE = 10_000
# Pages of the HOT-expiry and WARM -> COLD scans, which keep every due id anyway. A
# page of a scan bounded by a timestamp reads every row inside the bound from the
# tier's timestamp index and sorts them by id: 98k expired rows in pages of 10k read
# ~10 x 98k rows (0.65 s); in pages of 50k, 2 x 98k (a page's facts: a few MB).
EXPIRY_PAGE = 50_000
_US_PER_DAY = 86_400e6

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


def _half_lives(facts: MemoryFacts, dp: DecayPolicy) -> Floats:
    """Effective half-lives in days, `decay.half_life_for` over a column of memories."""
    base = np.array([dp.half_life_days[t] for t in facts.memory_types], dtype=np.float64)
    out: Floats = base * np.log2(np.maximum(facts.use_count, 0) + 2.0)
    return out


def _floors(facts: MemoryFacts, dp: DecayPolicy) -> Floats:
    """`decay.floor_for` over a column: pinned 1.0, core the core floor, else the floor."""
    core = max(dp.core_floor, dp.floor)
    out: Floats = np.where(facts.pinned, 1.0, np.where(facts.core, core, dp.floor))
    return out


def _retention(facts: MemoryFacts, now: datetime, dp: DecayPolicy) -> Floats:
    """`decay.retention` of every memory in `facts` at `now`."""
    elapsed = (to_micros(now) - facts.last_used_at) / _US_PER_DAY
    return decay.retention_vector(elapsed, _half_lives(facts, dp), _floors(facts, dp))


class Sweep:
    """One pass of maintenance over every namespace of a store."""

    def __init__(
        self,
        store: MemoryStore,
        graph: AssociationGraph,
        archival: ArchivalPipeline,
        summarizer: Summarizer,
        embedder: Embedder,
        policy: Policy,
    ) -> None:
        self.store, self.graph, self.archival = store, graph, archival
        self.summarizer, self.embedder = summarizer, embedder
        self.policy = policy

    async def run(
        self, now: datetime, *, dry_run: bool = False, namespace: str | None = None
    ) -> MaintenanceReport:
        started = time.perf_counter()
        report = MaintenanceReport(now=now, dry_run=dry_run)
        namespaces = (
            [namespace]
            if namespace is not None
            else [stored_namespace(name) for name in await self.store.namespaces()]
        )
        report.namespaces = len(namespaces)
        budget = self.archival.budget()  # the archival cap is per run, not per namespace
        flags = self.archival.budget()  # and the flags backfill's, on its own
        for ns in namespaces:
            steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                (step.__name__, partial(step, ns, now, report))
                for step in (
                    self._hot_expiry,
                    self._warm_to_cold,
                    self._superseded_to_cold,
                    self._cold_to_warm,
                    self._core_promotion,
                    self._consolidate,
                )
            ]
            steps.append(("_archive", partial(self.archival.sweep, ns, now, report, budget)))
            steps.append(
                ("_archive_flags", partial(self.archival.backfill_flags, ns, report, flags))
            )
            for name, step in steps:
                try:
                    await step()
                except Exception as e:  # one failing step must not stop the others
                    log.exception("maintenance step %s failed in %r", name, ns)
                    report.errors.append(f"{ns}: {name}: {type(e).__name__}: {e}")
        report.duration_seconds = time.perf_counter() - started
        return report

    # -- helpers -------------------------------------------------------------------------

    async def _ids(self, ns: str, query: ScanQuery) -> list[str]:
        """Every id matching `query`: for the rules that are pure store-side filters."""
        out: list[str] = []
        page_query = replace(query, limit=SCAN_PAGE)
        while True:
            page = await self.store.scan_ids(ns, page_query)
            out.extend(page)
            if len(page) < SCAN_PAGE:
                return out
            page_query = replace(page_query, after_id=page[-1])

    async def _facts(
        self, ns: str, query: ScanQuery, *, use_days: bool = False
    ) -> AsyncIterator[MemoryFacts]:
        """Pages of columns (`query.limit` rows each), paged by id: each page is read
        before anything in it moves, so moving a memory out of the scanned tier does not
        skip others."""
        page_query = query
        while True:
            page = await self.store.scan_facts(ns, page_query, use_days=use_days)
            if len(page):
                yield page
            if len(page) < query.limit:
                return
            page_query = replace(page_query, after_id=page.ids[-1])

    async def _move(
        self,
        ns: str,
        ids: list[str],
        tier: Tier,
        now: datetime,
        name: str,
        report: MaintenanceReport,
    ) -> None:
        if ids and not report.dry_run:
            await self.store.set_tier(ns, ids, tier, now)
        report.add(name, len(ids))

    def _batch(self) -> int:
        return self.policy.archival.batch_size

    # -- transitions ---------------------------------------------------------------------

    async def _hot_expiry(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """HOT lasts 72 h: then WARM if it was used or matters, else COLD. Pinned and core
        memories settle in WARM (they are never sent COLD).

        A memory bound for WARM that the next rule (WARM -> COLD) would send on at once
        goes straight to COLD: the state is the one the two moves leave (tier COLD,
        cold_since and tier_changed_at `now`), and each row is rewritten once, not
        twice. The report counts it in both transitions, as the two moves would.
        """
        tp = self.policy.tiers
        expired = ScanQuery(tiers=HOT, tier_changed_before=now - tp.hot_ttl, limit=EXPIRY_PAGE)
        to_warm: list[str] = []
        to_cold: list[str] = []
        through_warm: list[str] = []
        async for page in self._facts(ns, expired):
            keep = (
                (page.use_count > 0)
                | (page.importance >= tp.hot_to_warm_min_importance)
                | page.pinned
                | page.core
            )
            onward = keep & self._warm_due(page, now)
            for i, memory_id in enumerate(page.ids):
                if onward[i]:
                    through_warm.append(memory_id)
                else:
                    (to_warm if keep[i] else to_cold).append(memory_id)
        await self._move(ns, to_warm, Tier.WARM, now, "hot_to_warm", report)
        if (to_cold or through_warm) and not report.dry_run:
            await self.store.set_tier(ns, to_cold + through_warm, Tier.COLD, now)
        report.add("hot_to_warm", len(through_warm))
        report.add("hot_to_cold", len(to_cold))
        report.add("warm_to_cold", len(through_warm))

    async def _warm_to_cold(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Unused for 60 days, or at its retention floor for 7 days (a timestamp computed
        from the last use, not a counter kept by the sweep)."""
        q = ScanQuery(
            tiers=WARM,
            last_used_before=now - self._warm_idle_at_least(),
            pinned=False,
            core=False,
            limit=EXPIRY_PAGE,
        )
        ids: list[str] = []
        async for page in self._facts(ns, q):
            ids.extend(page.ids[i] for i in np.flatnonzero(self._warm_due(page, now)))
        await self._move(ns, ids, Tier.COLD, now, "warm_to_cold", report)

    def _warm_idle_at_least(self) -> timedelta:
        """How long any memory the WARM -> COLD rule sends on has gone unused: the store-
        side bound of its scan (the floor rule needs the shortest half-life's time to
        the floor plus the dwell)."""
        tp, dp = self.policy.tiers, self.policy.decay
        shortest = min(dp.half_life_days.values())
        earliest = decay.time_to_floor(shortest, tp.floor_epsilon, dp.floor) + tp.floor_dwell
        return min(tp.warm_idle, earliest)

    def _warm_due(self, facts: MemoryFacts, now: datetime) -> Bools:
        """Which of `facts` the WARM -> COLD rule moves at `now` (their tier aside):
        neither pinned nor core, and unused for `warm_idle`, or at the retention floor
        (within `floor_epsilon`) for `floor_dwell`: last use + `decay.time_to_floor` +
        dwell <= now."""
        tp, dp = self.policy.tiers, self.policy.decay
        now_us = to_micros(now)
        idle = facts.last_used_at < to_micros(now - tp.warm_idle)
        span = 1.0 - _floors(facts, dp)
        with np.errstate(divide="ignore", invalid="ignore"):
            days = _half_lives(facts, dp) * np.log2(span / tp.floor_epsilon)
        days = np.where(span <= tp.floor_epsilon, 0.0, days)
        # timedelta(days=x) rounds to the microsecond; so does this
        to_floor = np.rint(days * _US_PER_DAY).astype(np.int64)
        dwell = tp.floor_dwell // timedelta(microseconds=1)
        dwelt = now_us - (facts.last_used_at + to_floor) >= dwell
        due: Bools = ~facts.pinned & ~facts.core & (idle | dwelt)
        return due

    async def _superseded_to_cold(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        q = ScanQuery(tiers=ACTIVE, superseded=True, pinned=False)
        ids = await self._ids(ns, q)
        await self._move(ns, ids, Tier.COLD, now, "superseded_to_cold", report)

    async def _cold_to_warm(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Used 3 times on 2 distinct days since it went cold: it is wanted again."""
        tp = self.policy.tiers
        q = ScanQuery(
            tiers=COLD,
            min_uses_since_cold=tp.reactivate_uses,
            superseded=False,
            limit=SCAN_PAGE,
        )
        ids: list[str] = []
        async for page in self._facts(ns, q, use_days=True):
            assert page.use_days is not None
            for i, memory_id in enumerate(page.ids):
                went_cold = page.cold_since[i]
                since = day_of(page.created_at[i] if went_cold == NO_TIME else went_cold)
                days = {d for d in page.use_days[i] if d >= since}
                if len(days) >= tp.reactivate_distinct_days:
                    ids.append(memory_id)
        await self._move(ns, ids, Tier.WARM, now, "cold_to_warm", report)

    async def _core_promotion(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Stable and used memories earn `core`: a 0.60 retention floor, no demotion."""
        tp, dp = self.policy.tiers, self.policy.decay
        q = ScanQuery(
            tiers=ACTIVE,
            core=False,
            superseded=False,
            min_use_count=tp.core_min_uses,
            limit=SCAN_PAGE,
        )
        ids: list[str] = []
        async for page in self._facts(ns, q, use_days=True):
            assert page.use_days is not None
            retained = _retention(page, now, dp) >= tp.core_min_retention
            for i in np.flatnonzero(retained):
                if len(set(page.use_days[i])) >= tp.core_min_distinct_days:
                    ids.append(page.ids[i])
        if ids and not report.dry_run:
            await self.store.patch_many(ns, ids, MemoryPatch(core=True, updated_at=now))
        report.add("core_promoted", len(ids))

    async def _consolidate(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Fading memories that say nearly the same thing become one summary memory;
        the originals are superseded (and go COLD at once)."""
        cp, dp = self.policy.consolidation, self.policy.decay
        if not cp.enabled:
            return
        # retention < t  <=>  elapsed > h_eff * log2(1/t); h_eff >= the shortest half-life
        shortest = min(dp.half_life_days.values())
        min_elapsed = timedelta(days=shortest * np.log2(1.0 / max(cp.retention_below, 1e-9)))
        q = ScanQuery(
            tiers=ACTIVE,
            last_used_before=now - min_elapsed,
            pinned=False,
            core=False,
            superseded=False,
            limit=self._batch(),
        )
        # Window by window, so memory stays bounded (a namespace-wide similarity matrix
        # would need hundreds of GB at a million memories): each page of candidates (in
        # id order) is one window. Fading memories left ungrouped are carried into the
        # next window, up to half a page.
        # The candidates are read SCAN_PAGE at a time and cut into windows here: paging
        # the store by window would make it walk the whole bounded range once per window.
        carry: list[str] = []
        batch = self._batch()
        async for page in self._facts(ns, replace(q, limit=SCAN_PAGE)):
            fading = (~page.do_not_inject) & (_retention(page, now, dp) < cp.retention_below)
            for start in range(0, len(page), batch):
                rows = np.flatnonzero(fading[start : start + batch]) + start
                window = carry + [page.ids[i] for i in rows]
                carry = await self._consolidate_window(ns, window, now, report)
                carry = carry[-(batch // 2) :]

    async def _consolidate_window(
        self, ns: str, fading: list[str], now: datetime, report: MaintenanceReport
    ) -> list[str]:
        """Merge near-duplicates among `fading`; returns the ones left ungrouped."""
        cp = self.policy.consolidation
        if len(fading) < 2:
            return fading
        items, vectors = await self.store.embeddings(ns, fading)
        if len(items) < 2:
            return fading
        matrix = np.array(vectors, dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        sims = matrix @ matrix.T
        np.fill_diagonal(sims, -1.0)
        close = sims >= cp.min_similarity  # sort only what is near, never whole rows
        used: set[int] = set()
        groups: list[list[str]] = []
        rows: list[int] = [int(x) for x in np.flatnonzero(close.any(axis=1))]
        for i in rows:
            if i in used:
                continue
            candidates = [int(j) for j in np.flatnonzero(close[i]) if int(j) not in used]
            near: list[int] = sorted(candidates, key=lambda j: -float(sims[i, j]))
            near = near[: cp.max_group - 1]
            if near:
                members: list[int] = [i, *near]
                used.update(members)
                groups.append([items[j] for j in members])
        for group in groups:
            if not report.dry_run:
                loaded = await self._members(ns, group)
                if len(loaded) < 2:  # changed under us since the scan: nothing to merge
                    continue
                await self._merge(ns, loaded, now)
            report.add("consolidated", len(group))
        return [items[i] for i in range(len(items)) if i not in used]

    async def _members(self, ns: str, ids: Sequence[str]) -> list[Memory]:
        """The memories of one consolidation group, in group order."""
        found = await self.store.get_many(ns, ids)
        return [found[i] for i in ids if i in found]

    async def _merge(self, ns: str, group: list[Memory], now: datetime) -> None:
        joined = "\n".join(m.content for m in group)
        summary = await self.summarizer.summarize(
            SummaryRequest(content=joined, memory_type=group[0].memory_type)
        )
        text = summary.text.strip() or joined[: self.policy.limits.max_content_chars]
        vector = (await self.embedder.embed_documents([text]))[0]
        types = [m.memory_type for m in group]
        merged = Memory(
            namespace=ns,
            content=text[: self.policy.limits.max_content_chars],
            memory_type=max(set(types), key=types.count) if types else MemoryType.EPISODIC,
            tier=Tier.WARM,
            importance=max(m.importance for m in group),
            consolidated_from=[m.id for m in group],
            source="consolidation",
            embedding=[float(x) for x in vector],
            created_at=now,
            updated_at=now,
            tier_changed_at=now,
            use_count=max(m.use_count for m in group),
        )
        async with self.store.transaction():
            await self.store.put_many(ns, [merged])
            ids = [m.id for m in group]
            await self.store.patch_many(
                ns, ids, MemoryPatch(superseded_by=merged.id, updated_at=now)
            )
            await self.store.set_tier(ns, ids, Tier.COLD, now)
        try:
            await self.graph.upsert_links(
                ns,
                [
                    Link(
                        source=merged.id,
                        target=m.id,
                        weight=1.0,
                        kind=LinkKind.CONSOLIDATED,
                        created_at=now,
                        updated_at=now,
                    )
                    for m in group
                ],
            )
        except Exception as e:
            log.warning("consolidation links skipped in %r: %s", ns, e)
