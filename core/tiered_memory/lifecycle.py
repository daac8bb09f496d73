"""The maintenance sweep: every tier transition of DESIGN.md section 2, in order.

Candidates come from store-side filters (tier + timestamps), page by page, never from
loading every memory. Each transition is a pure function of stored state and `now`,
so running the sweep twice at the same time changes nothing the second time, and a
sweep that stopped half-way is simply run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np

from . import decay
from .archive import Archiver
from .models import Link, LinkKind, MaintenanceReport, Memory, MemoryType, Tier
from .policy import Policy
from .ports import (
    AssociationGraph,
    Embedder,
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


class Sweep:
    """One pass of maintenance over every namespace of a store."""

    def __init__(
        self,
        store: MemoryStore,
        graph: AssociationGraph,
        archiver: Archiver,
        summarizer: Summarizer,
        embedder: Embedder,
        policy: Policy,
    ) -> None:
        self.store, self.graph, self.archiver = store, graph, archiver
        self.summarizer, self.embedder = summarizer, embedder
        self.policy = policy

    async def run(
        self, now: datetime, *, dry_run: bool = False, namespace: str | None = None
    ) -> MaintenanceReport:
        started = time.perf_counter()
        report = MaintenanceReport(now=now, dry_run=dry_run)
        namespaces = [namespace] if namespace is not None else await self.store.namespaces()
        report.namespaces = len(namespaces)
        for ns in namespaces:
            for step in (
                self._hot_expiry,
                self._warm_to_cold,
                self._superseded_to_cold,
                self._cold_to_warm,
                self._core_promotion,
                self._consolidate,
                self._archive,
            ):
                try:
                    await step(ns, now, report)
                except Exception as e:  # one failing step must not stop the others
                    log.exception("maintenance step %s failed in %r", step.__name__, ns)
                    report.errors.append(f"{ns}: {step.__name__}: {type(e).__name__}: {e}")
        report.duration_seconds = time.perf_counter() - started
        return report

    # -- helpers -------------------------------------------------------------------------

    async def _pages(self, ns: str, query: ScanQuery) -> AsyncIterator[list[Memory]]:
        """Pages of a scan. Each page is read before anything in it moves, and the
        cursor is the id, so moving a memory out of the scanned tier does not skip others."""
        after: str | None = None
        while True:
            page = await self.store.scan(ns, replace(query, after_id=after))
            if not page:
                return
            yield page
            if len(page) < query.limit:
                return
            after = page[-1].id

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
        memories settle in WARM (they are never sent COLD)."""
        tp = self.policy.tiers
        cutoff = now - tp.hot_ttl
        base = ScanQuery(tiers=HOT, tier_changed_before=cutoff, limit=self._batch())
        to_warm: dict[str, None] = {}
        for keep in (
            replace(base, used=True),
            replace(base, importance_at_least=tp.hot_to_warm_min_importance),
            replace(base, pinned=True),
            replace(base, core=True),
        ):
            async for page in self._pages(ns, keep):
                to_warm.update(dict.fromkeys(m.id for m in page))
        to_cold: list[str] = []
        async for page in self._pages(ns, base):
            to_cold.extend(m.id for m in page if m.id not in to_warm)
        await self._move(ns, list(to_warm), Tier.WARM, now, "hot_to_warm", report)
        await self._move(ns, to_cold, Tier.COLD, now, "hot_to_cold", report)

    async def _warm_to_cold(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Unused for 60 days, or at its retention floor for 7 days (a timestamp computed
        from the last use, not a counter kept by the sweep)."""
        tp, dp = self.policy.tiers, self.policy.decay
        idle = ScanQuery(
            tiers=WARM,
            last_used_before=now - tp.warm_idle,
            pinned=False,
            core=False,
            limit=self._batch(),
        )
        ids: dict[str, None] = {}
        async for page in self._pages(ns, idle):
            ids.update(dict.fromkeys(m.id for m in page))
        shortest = min(dp.half_life_days.values())
        earliest = decay.time_to_floor(shortest, tp.floor_epsilon, dp.floor) + tp.floor_dwell
        floor_q = replace(idle, last_used_before=now - earliest)
        async for page in self._pages(ns, floor_q):
            for m in page:
                h = decay.half_life_for(m.memory_type, m.use_count, dp)
                at_floor = m.last_used_at + decay.time_to_floor(
                    h, tp.floor_epsilon, decay.floor_for(m, dp)
                )
                if now - at_floor >= tp.floor_dwell:
                    ids[m.id] = None
        await self._move(ns, list(ids), Tier.COLD, now, "warm_to_cold", report)

    async def _superseded_to_cold(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        q = ScanQuery(tiers=ACTIVE, superseded=True, pinned=False, limit=self._batch())
        ids: list[str] = []
        async for page in self._pages(ns, q):
            ids.extend(m.id for m in page)
        await self._move(ns, ids, Tier.COLD, now, "superseded_to_cold", report)

    async def _cold_to_warm(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Used 3 times on 2 distinct days since it went cold: it is wanted again."""
        tp = self.policy.tiers
        q = ScanQuery(
            tiers=COLD,
            min_uses_since_cold=tp.reactivate_uses,
            superseded=False,
            limit=self._batch(),
        )
        ids: list[str] = []
        async for page in self._pages(ns, q):
            for m in page:
                since = (m.cold_since or m.created_at).date()
                days = {d for d in m.use_days if d >= since}
                if len(days) >= tp.reactivate_distinct_days:
                    ids.append(m.id)
        await self._move(ns, ids, Tier.WARM, now, "cold_to_warm", report)

    async def _core_promotion(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Stable and used memories earn `core`: a 0.60 retention floor, no demotion."""
        tp, dp = self.policy.tiers, self.policy.decay
        q = ScanQuery(
            tiers=ACTIVE,
            core=False,
            superseded=False,
            min_use_count=tp.core_min_uses,
            limit=self._batch(),
        )
        ids: list[str] = []
        async for page in self._pages(ns, q):
            for m in page:
                if (
                    len(set(m.use_days)) >= tp.core_min_distinct_days
                    and decay.retention(m, now, dp) >= tp.core_min_retention
                ):
                    ids.append(m.id)
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
        # Page by page, so memory stays bounded (a namespace-wide similarity matrix
        # would need hundreds of GB at a million memories). Fading memories left
        # ungrouped are carried into the next page's window, up to half a page.
        carry: list[Memory] = []
        async for page in self._pages(ns, q):
            fading = [
                m
                for m in page
                if m.do_not_inject is False and decay.retention(m, now, dp) < cp.retention_below
            ]
            carry = await self._consolidate_window(ns, carry + fading, now, report)
            carry = carry[-(self._batch() // 2) :]

    async def _consolidate_window(
        self, ns: str, fading: list[Memory], now: datetime, report: MaintenanceReport
    ) -> list[Memory]:
        """Merge near-duplicates among `fading`; returns the ones left ungrouped."""
        cp = self.policy.consolidation
        if len(fading) < 2:
            return fading
        full = await self.store.get_many(ns, [m.id for m in fading], with_embeddings=True)
        items = [full[m.id] for m in fading if m.id in full and full[m.id].embedding]
        if len(items) < 2:
            return fading
        matrix = np.asarray([m.embedding for m in items], dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        sims = matrix @ matrix.T
        np.fill_diagonal(sims, -1.0)
        close = sims >= cp.min_similarity  # sort only what is near, never whole rows
        used: set[int] = set()
        groups: list[list[Memory]] = []
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
                await self._merge(ns, group, now)
            report.add("consolidated", len(group))
        left = [items[i] for i in range(len(items)) if i not in used]
        for m in left:
            m.embedding = None  # carried memories are re-read with vectors next time
        return left

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

    async def archive_candidates(self, ns: str, now: datetime) -> list[Memory]:
        """COLD for 180 days; or 90 days old, unimportant and barely used lately."""
        tp = self.policy.tiers
        base = ScanQuery(tiers=COLD, pinned=False, core=False, limit=self._batch())
        found: dict[str, Memory] = {}
        async for page in self._pages(
            ns, replace(base, cold_since_before=now - tp.cold_to_archive)
        ):
            found.update((m.id, m) for m in page)
        low = replace(
            base,
            created_before=now - tp.archive_min_age,
            importance_at_most=tp.archive_max_importance,
        )
        window_start = (now - tp.archive_recent_window).date()
        async for page in self._pages(ns, low):
            for m in page:
                recent_days = [d for d in m.use_days if d >= window_start]
                # use_days holds distinct days: with more than 2 uses in all, a recent
                # day may hide several uses, so only no recent use is certainly <= 2.
                if m.use_count <= tp.archive_max_recent_uses or not recent_days:
                    found.setdefault(m.id, m)
        return sorted(found.values(), key=lambda m: (m.importance, m.created_at))

    async def _archive(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        candidates = await self.archive_candidates(ns, now)
        if report.dry_run:
            est = await self.archiver.estimate(ns, candidates, now)
            if report.archive_estimate is None:
                report.archive_estimate = est
            else:
                for field in (
                    "candidates",
                    "summarizer_calls",
                    "input_tokens",
                    "output_tokens",
                    "bytes",
                ):
                    setattr(
                        report.archive_estimate,
                        field,
                        getattr(report.archive_estimate, field) + getattr(est, field),
                    )
            report.add("cold_to_archived", len(candidates))
            return
        ap = self.policy.archival
        for start in range(0, len(candidates), ap.batch_size):
            batch = candidates[start : start + ap.batch_size]
            failed = 0
            for attempted, memory in enumerate(batch, start=1):
                reason = (
                    "cold_ttl_expired"
                    if memory.cold_since
                    and now - memory.cold_since >= self.policy.tiers.cold_to_archive
                    else "low_salience_aged_out"
                )
                try:
                    if await self.archiver.archive_one(ns, memory.id, now=now, reason=reason):
                        report.add("cold_to_archived", 1)
                except Exception as e:  # this memory stays COLD, untouched
                    failed += 1
                    report.errors.append(f"{ns}: archive {memory.id}: {type(e).__name__}: {e}")
                if failed and failed / max(attempted, 20) > ap.pause_failure_ratio:
                    report.archive_paused = True
                    report.errors.append(
                        f"{ns}: archival paused: {failed} of {attempted} failed "
                        f"(> {ap.pause_failure_ratio:.0%}); the rest stay COLD until next run"
                    )
                    return
