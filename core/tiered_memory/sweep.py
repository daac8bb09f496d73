"""The maintenance sweep: every tier transition of DESIGN.md section 2, in order.

The rules are `tiered_memory.lifecycle`'s (each a store-side filter and a pure test over
columns); the sweep pages through the candidates, never loading every memory, and
moves what the rules select. Each step is a function of stored state and `now`, so
running the sweep twice at the same time changes nothing the second time, and a sweep
that stopped half-way is simply run again. The last steps, archival and the flags of
records archived before records kept them, are the pipeline of
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

from . import clusters, lifecycle, provenance
from .archival import ArchivalPipeline
from .lifecycle import ACTIVE, SCAN_PAGE
from .models import Link, LinkKind, MaintenanceReport, Memory, MemoryType, Tier
from .namespaces import stored_namespace
from .policy import Policy
from .ports import (
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

CONSOLIDATION_REACH = 256
"""How many fading memories written just before and just after a fading memory it is
compared with (creation order): the cost of consolidation is linear in the fading
memories, 512 cosines each (about as many as the random id windows of 500 that came
before met; 88k fading memories of a million took 8.6 s of float32 products at a reach
of 512 on a loaded 2-core machine)."""

PENDING_PAGE = 500
"""Queued originals (`PendingOriginal`) worked through at a time by the sweep."""

CONSOLIDATION_READ = 2048
"""Fading memories whose vectors are read at a time (a few MB at 384 dimensions)."""


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
        """Every step for every namespace (or one), then a checkpoint of what moved; the
        report counts the moves, the errors of steps that failed (the others still ran)
        and the summariser tokens the run cost."""
        started = time.perf_counter()
        before = _usage(self.summarizer)
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
        if not dry_run:
            try:
                await self._originals(namespaces if namespace is not None else None, report)
            except Exception as e:
                log.exception("maintenance step _originals failed")
                report.errors.append(f"_originals: {type(e).__name__}: {e}")
        report.duration_seconds = time.perf_counter() - started
        if not dry_run:
            await self._checkpoint()
        after = _usage(self.summarizer)
        report.summarizer_input_tokens = after[0] - before[0]
        report.summarizer_output_tokens = after[1] - before[1]
        return report

    async def _checkpoint(self) -> None:
        """After a sweep, its moves and archivals go from the write-ahead log into the
        store's main file (`MemoryStore.checkpoint`). Best effort: the sweep has
        committed, and a failed checkpoint only leaves them in the log a while longer."""
        try:
            await self.store.checkpoint()
        except Exception as e:
            log.warning("checkpoint after the sweep failed (retried by the next): %s", e)

    async def _originals(self, namespaces: Sequence[str] | None, report: MaintenanceReport) -> None:
        """Delete the originals still queued for deletion (`PendingOriginal`: a delete,
        replace or restore met an unreachable object store, or crashed before deleting
        them), in every namespace that has some (None) or in `namespaces`; a namespace
        whose last memory went meanwhile holds nothing else. What still fails stays
        queued for the next sweep."""
        if namespaces is None:
            namespaces = [stored_namespace(n) for n in await self.store.pending_namespaces()]
        for ns in namespaces:
            while True:
                page = await self.store.pending_originals(ns, limit=PENDING_PAGE)
                done = await self.archival.archiver.delete_pending(ns, page)
                report.add("originals_deleted", done)
                if len(page) < PENDING_PAGE or done < len(page):
                    break  # the rest failed, or are named again: the next sweep

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

    # -- transitions ---------------------------------------------------------------------

    async def _hot_expiry(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """HOT -> WARM or COLD (`lifecycle.hot_expiry`). A memory that goes through WARM
        straight to COLD is rewritten once and counted in both transitions, as the two
        moves would be."""
        if isinstance(self.store, lifecycle.SupportsBulkExpiry):
            moves = await self.store.expire_hot(
                ns,
                lifecycle.hot_expiry_bounds(now, self.policy),
                partial(lifecycle.unpinned_time_to_floor_us, policy=self.policy),
                now,
                dry_run=report.dry_run,
            )
            report.add("hot_to_warm", moves.to_warm + moves.through_warm)
            report.add("hot_to_cold", moves.to_cold)
            report.add("warm_to_cold", moves.through_warm)
            return
        to_warm: list[str] = []
        to_cold: list[str] = []
        through_warm: list[str] = []
        async for page in self._facts(ns, lifecycle.hot_expiry_query(now, self.policy.tiers)):
            expiry = lifecycle.hot_expiry(page, now, self.policy)
            to_warm += expiry.to_warm
            to_cold += expiry.to_cold
            through_warm += expiry.through_warm
        await self._move(ns, to_warm, Tier.WARM, now, "hot_to_warm", report)
        if (to_cold or through_warm) and not report.dry_run:
            await self.store.set_tier(ns, to_cold + through_warm, Tier.COLD, now)
        report.add("hot_to_warm", len(through_warm))
        report.add("hot_to_cold", len(to_cold))
        report.add("warm_to_cold", len(through_warm))

    async def _warm_to_cold(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """WARM -> COLD (`lifecycle.warm_due`)."""
        ids: list[str] = []
        async for page in self._facts(ns, lifecycle.warm_to_cold_query(now, self.policy)):
            ids.extend(
                page.ids[i] for i in np.flatnonzero(lifecycle.warm_due(page, now, self.policy))
            )
        await self._move(ns, ids, Tier.COLD, now, "warm_to_cold", report)

    async def _superseded_to_cold(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        ids = await self._ids(ns, lifecycle.SUPERSEDED_QUERY)
        await self._move(ns, ids, Tier.COLD, now, "superseded_to_cold", report)

    async def _cold_to_warm(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """COLD -> WARM (`lifecycle.reactivated`)."""
        tp = self.policy.tiers
        ids: list[str] = []
        async for page in self._facts(ns, lifecycle.cold_to_warm_query(tp), use_days=True):
            ids.extend(lifecycle.reactivated(page, tp))
        await self._move(ns, ids, Tier.WARM, now, "cold_to_warm", report)

    async def _core_promotion(self, ns: str, now: datetime, report: MaintenanceReport) -> None:
        """Earning `core` (`lifecycle.earn_core`)."""
        ids: list[str] = []
        query = lifecycle.core_query(self.policy.tiers)
        async for page in self._facts(ns, query, use_days=True):
            ids.extend(lifecycle.earn_core(page, now, self.policy))
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
            limit=SCAN_PAGE,
        )
        # Every fading memory meets the `CONSOLIDATION_REACH` fading ones written just
        # before and just after it (creation order, then id): near-duplicates are found
        # wherever their ids fall, at a cost linear in the fading memories, and memory
        # stays bounded (`clusters.Grouper` holds a reach of vectors and one tile).
        fading: list[tuple[int, str]] = []
        pages = (
            self.store.scan_facts_by_bound(
                ns, q, type_bounds=lifecycle.fading_bounds(now, dp, cp.retention_below)
            )
            if isinstance(self.store, lifecycle.SupportsBoundOrderScan)
            else self._facts(ns, q)
        )
        async for page in pages:
            due = (~page.do_not_inject) & (lifecycle.retention(page, now, dp) < cp.retention_below)
            rows = np.flatnonzero(due)
            fading.extend(
                zip(page.created_at[rows].tolist(), [page.ids[i] for i in rows], strict=True)
            )
        if len(fading) < 2:
            return
        fading.sort()
        grouper = clusters.Grouper(
            min_similarity=cp.min_similarity, max_group=cp.max_group, reach=CONSOLIDATION_REACH
        )
        for start in range(0, len(fading), CONSOLIDATION_READ):
            chunk = [memory_id for _, memory_id in fading[start : start + CONSOLIDATION_READ]]
            items, vectors = await self.store.embeddings(ns, chunk)
            await self._consolidate_groups(ns, grouper.feed(items, vectors), now, report)
        await self._consolidate_groups(ns, grouper.close(), now, report)

    async def _consolidate_groups(
        self, ns: str, groups: list[list[str]], now: datetime, report: MaintenanceReport
    ) -> None:
        """Merge each group of near-duplicates into one summary memory."""
        for group in groups:
            if not report.dry_run:
                loaded = await self._members(ns, group)
                if len(loaded) < 2:  # changed under us since the scan: nothing to merge
                    continue
                await self._merge(ns, loaded, now)
            report.add("consolidated", len(group))

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
        vector = (await self.embedder.aembed_documents([text]))[0]
        types = [m.memory_type for m in group]
        merged = Memory(
            namespace=ns,
            content=text[: self.policy.limits.max_content_chars],
            memory_type=max(set(types), key=types.count) if types else MemoryType.EPISODIC,
            tier=Tier.WARM,
            importance=max(m.importance for m in group),
            consolidated_from=[m.id for m in group],
            metadata=provenance.consolidated(group, self.policy.limits.max_metadata_bytes),
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


def _usage(summarizer: Summarizer) -> tuple[int, int]:
    """Token usage a summariser reports, if it keeps any (the Claude one does)."""
    usage = getattr(summarizer, "usage", None)
    return (
        int(getattr(usage, "input_tokens", 0) or 0),
        int(getattr(usage, "output_tokens", 0) or 0),
    )
