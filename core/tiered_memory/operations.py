"""The operations side of a memory: what the summariser spent, what sweeps, expansions
and restores did, and the dashboard numbers of seed 001 computed from them.

The engine tells `Operations` what happened (`swept`, `expanded`, `restored`, and the
summariser's spending around each archival); it writes one `OperationEvent` per
happening to the store's operations log where the store keeps one
(`SupportsOperationsLog`: the embedded store, in its file), else to this process's
memory, and passes the same numbers to `telemetry`. `complete` adds the dashboard
numbers to a namespace's `Stats`. Money is priced by `tiered_memory.pricing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from . import telemetry
from .models import ArchiveEstimate, MaintenanceReport, Stats, SummarizerTotals, Tier
from .policy import Policy
from .ports import (
    EventTotals,
    MemoryStore,
    OperationEvent,
    Summarizer,
    Summary,
    SummaryRequest,
    SupportsOperationsLog,
)
from .pricing import ModelPricing, pricing_for, summarizer_model, summarizer_pricing

WINDOW = timedelta(days=30)  # the dashboard's expansion window (seed 001)
SWEEP, EXPAND, RESTORE, SUMMARIZER = "sweep", "expand", "restore", "summarizer"
STORE_WIDE = ""  # the namespace of events of the whole store


@dataclass(frozen=True)
class Spending:
    """A snapshot of what a summariser has spent (`MeteredSummarizer.spent`)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def since(self, before: Spending) -> Spending:
        return Spending(
            self.calls - before.calls,
            self.input_tokens - before.input_tokens,
            self.output_tokens - before.output_tokens,
            self.cost_usd - before.cost_usd,
        )


class MeteredSummarizer:
    """A summariser that counts its calls, and the tokens and cost of each summary it
    returns (priced by the model the summary names), whichever summariser it wraps.
    Everything else (`usage`, `model`, ...) is the wrapped summariser's."""

    def __init__(self, inner: Summarizer, prices: Mapping[str, ModelPricing]) -> None:
        self.inner = inner
        self.prices = prices
        self.spent = Spending()

    async def summarize(self, request: SummaryRequest) -> Summary:
        summary = await self.inner.summarize(request)
        if summary.model == summarizer_model(self.inner):
            price = summarizer_pricing(self.inner, self.prices)
        else:  # a fallback's summary, or a dated model id: its own price
            price = pricing_for(summary.model, self.prices)
        self.spent = Spending(
            self.spent.calls + 1,
            self.spent.input_tokens + summary.input_tokens,
            self.spent.output_tokens + summary.output_tokens,
            self.spent.cost_usd + price.cost(summary.input_tokens, summary.output_tokens),
        )
        return summary

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ProcessLog:
    """The operations log of a store that keeps none: this process's events only."""

    def __init__(self) -> None:
        self.events: list[OperationEvent] = []

    async def record_events(self, events: Sequence[OperationEvent]) -> None:
        self.events.extend(events)

    async def event_totals(
        self, kind: str, *, namespace: str | None = None, since: datetime | None = None
    ) -> EventTotals:
        chosen = [
            e
            for e in self.events
            if e.kind == kind
            and (namespace is None or e.namespace == namespace)
            and (since is None or e.at >= since)
        ]
        return EventTotals(
            events=len(chosen),
            count=sum(e.count for e in chosen),
            input_tokens=sum(e.input_tokens for e in chosen),
            output_tokens=sum(e.output_tokens for e in chosen),
            cost_usd=sum(e.cost_usd for e in chosen),
        )

    async def last_event(self, kind: str, *, namespaces: Sequence[str]) -> OperationEvent | None:
        chosen = [e for e in self.events if e.kind == kind and e.namespace in namespaces]
        return max(chosen, key=lambda e: e.at) if chosen else None

    def clear(self, namespace: str | None) -> None:
        self.events = [e for e in self.events if namespace is not None and e.namespace != namespace]


class Operations:
    """One memory's operations log, summariser meter and prices."""

    def __init__(self, store: MemoryStore, summarizer: Summarizer, policy: Policy) -> None:
        self.store = store
        self.prices = policy.archival.prices or {}
        self.metered = MeteredSummarizer(summarizer, self.prices)
        self.persisted = isinstance(store, SupportsOperationsLog)
        self.log: SupportsOperationsLog = store if self.persisted else ProcessLog()  # type: ignore[assignment]

    # -- money ---------------------------------------------------------------------------

    def priced(self, estimate: ArchiveEstimate) -> ArchiveEstimate:
        """`estimate` with its tokens priced at the summariser's rates."""
        price = summarizer_pricing(self.metered.inner, self.prices)
        estimate.cost_usd = price.cost(estimate.input_tokens, estimate.output_tokens)
        return estimate

    # -- what happened -------------------------------------------------------------------

    async def summarized(self, before: Spending, now: datetime) -> Spending:
        """Record what the summariser spent since `before`; returns it."""
        spent = self.metered.spent.since(before)
        if spent.calls:
            await self.log.record_events(
                [
                    OperationEvent(
                        SUMMARIZER,
                        STORE_WIDE,
                        now,
                        count=spent.calls,
                        input_tokens=spent.input_tokens,
                        output_tokens=spent.output_tokens,
                        cost_usd=spent.cost_usd,
                    )
                ]
            )
            telemetry.summarizer_spent(
                spent.calls, spent.input_tokens, spent.output_tokens, spent.cost_usd
            )
        return spent

    async def swept(
        self, report: MaintenanceReport, before: Spending, namespace: str | None
    ) -> MaintenanceReport:
        """After `maintain`: the run's cost on its report (a dry run: its estimate's),
        the report kept as the last sweep, the metrics updated."""
        if report.archive_estimate is not None:
            self.priced(report.archive_estimate)
        if report.skipped or report.dry_run:
            return report
        spent = await self.summarized(before, report.now)
        report.summarizer_cost_usd = spent.cost_usd
        report.summarizer_input_tokens = max(report.summarizer_input_tokens, spent.input_tokens)
        report.summarizer_output_tokens = max(report.summarizer_output_tokens, spent.output_tokens)
        scope = STORE_WIDE if namespace is None else namespace
        await self.log.record_events(
            [OperationEvent(SWEEP, scope, report.now, detail=report.model_dump_json())]
        )
        telemetry.swept(report)
        if telemetry.metering():
            await self._refresh_sizes(namespace)
        return report

    async def expanded(self, ns: str, restored: bool, now: datetime) -> None:
        events = [OperationEvent(EXPAND, ns, now)]
        if restored:
            events.append(OperationEvent(RESTORE, ns, now, detail="expansion"))
        await self.log.record_events(events)
        telemetry.expanded(restored)

    async def restored(self, ns: str, n: int, now: datetime) -> None:
        if n:
            await self.log.record_events([OperationEvent(RESTORE, ns, now, count=n)])
            telemetry.restored(n)

    def cleared(self, ns: str) -> None:
        """`clear(namespace)`: a store's log is cleared with its data; this process's too."""
        if isinstance(self.log, ProcessLog):
            self.log.clear(ns)

    # -- the dashboard numbers -------------------------------------------------------------

    async def complete(self, stats: Stats, now: datetime) -> Stats:
        """Add the dashboard numbers of seed 001 to a namespace's counts."""
        ns = stats.namespace
        if stats.object_store_bytes is None:
            stats.object_store_bytes = await self._archived_bytes(ns)
        expansions = await self.log.event_totals(EXPAND, namespace=ns, since=now - WINDOW)
        archived = stats.tiers.get(Tier.ARCHIVED)
        stats.expansions_30d = expansions.count
        stats.expansion_rate_30d = expansions.count / max(archived.count if archived else 0, 1)
        stats.last_sweep = await self._last_sweep(ns)
        spent = await self.log.event_totals(SUMMARIZER)
        stats.summarizer = SummarizerTotals(
            calls=spent.count,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost_usd=spent.cost_usd,
        )
        stats.history_persisted = self.persisted
        telemetry.sizes(
            ns, {t.value: s.count for t, s in stats.tiers.items()}, stats.object_store_bytes
        )
        return stats

    async def _last_sweep(self, ns: str) -> MaintenanceReport | None:
        """The latest sweep covering `ns`, as `ns` may see it: the memories (quarantined,
        force-archived) and errors of other namespaces are left out (the counts are the
        whole run's)."""
        event = await self.log.last_event(SWEEP, namespaces=[STORE_WIDE, ns])
        if event is None or event.detail is None:
            return None
        report = MaintenanceReport.model_validate_json(event.detail)
        report.quarantined = [q for q in report.quarantined if q.namespace == ns]
        report.forced_archival = [d for d in report.forced_archival if d.namespace == ns]
        report.errors = [e for e in report.errors if e.startswith(f"{ns}: ")]
        return report

    async def _archived_bytes(self, ns: str) -> int:
        """The bytes of `ns`'s originals from its archive records (for a store whose
        counts do not sum them)."""
        total = 0
        after: str | None = None
        while True:
            page = await self.store.scan_archives(ns, after_id=after, limit=500)
            total += sum(r.size_bytes for r in page)
            if len(page) < 500:
                return total
            after = page[-1].id

    async def _refresh_sizes(self, namespace: str | None) -> None:
        """The gauges' counts after a sweep, for the namespaces it covered."""
        from .namespaces import stored_namespace

        names = (
            [namespace]
            if namespace is not None
            else [stored_namespace(n) for n in await self.store.namespaces()]
        )
        for ns in names:
            stats = await self.store.stats(ns)
            if stats.object_store_bytes is None:
                stats.object_store_bytes = await self._archived_bytes(ns)
            telemetry.sizes(
                ns, {t.value: s.count for t, s in stats.tiers.items()}, stats.object_store_bytes
            )
            await asyncio.sleep(0)


__all__ = [
    "EXPAND",
    "RESTORE",
    "STORE_WIDE",
    "SUMMARIZER",
    "SWEEP",
    "WINDOW",
    "MeteredSummarizer",
    "Operations",
    "ProcessLog",
    "Spending",
]
