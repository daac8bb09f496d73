"""OpenTelemetry spans and metrics, when the application asks for them.

Optional twice over: without `opentelemetry-api` (the `[otel]` extra) nothing of it is
ever imported, and with it nothing is recorded until a tracer or meter provider is
set, globally (`trace.set_tracer_provider`) or for this library alone (`configure`).
Until then every hook here returns at its first line.

What is recorded says how the memory behaves, never what it holds: counts, tiers,
tokens, bytes, durations, degraded flags and backend names. No content, query,
summary or metadata value is ever an attribute (a test reads every attribute of every
span for the strings it stored). Namespaces name spans, never metric series (one per
user would explode a metrics store).

Spans: `tiered_memory.<operation>` around the engine's calls (`traced`), and
`tiered_memory.<port>.<method>` around every backend call (`traced_port`, applied by
`wiring` when tracing is on as a memory opens). Metrics: see `Instruments`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from .models import Injection, MaintenanceReport, Memory, SearchResults

P = ParamSpec("P")
R = TypeVar("R")

PREFIX = "tiered_memory"
Attributes = dict[str, "str | int | float | bool"]

_UNSET: Any = object()
_available: bool | None = None  # opentelemetry importable; learnt on first use, not at import
_tracer_provider: Any = None  # configure()'s, else the global one
_meter_provider: Any = None
_instruments: tuple[Any, Instruments] | None = None  # (meter provider, its instruments)

# What the observable gauges report: the latest counts seen (stats(), a sweep), summed
# over namespaces (so a series is per tier, never per namespace).
_tier_counts: dict[tuple[str, str], int] = {}
_object_bytes: dict[str, int] = {}


def available() -> bool:
    """Whether `opentelemetry-api` is installed (imported here the first time only)."""
    global _available
    if _available is None:
        try:
            import opentelemetry.metrics
            import opentelemetry.trace  # noqa: F401
        except ImportError:
            _available = False
        else:
            _available = True
    return _available


def configure(*, tracer_provider: Any = _UNSET, meter_provider: Any = _UNSET) -> None:
    """Record this library's spans and metrics with these providers instead of the
    global ones (None: back to the global ones). Set them before opening a memory for
    its backend calls to be traced too."""
    global _tracer_provider, _meter_provider, _instruments
    if tracer_provider is not _UNSET:
        _tracer_provider = tracer_provider
    if meter_provider is not _UNSET:
        _meter_provider = meter_provider
        _instruments = None


def _tracer_provider_in_use() -> Any:
    """The tracer provider spans go to, or None while there is none (no-op)."""
    if _tracer_provider is not None:
        return _tracer_provider
    if not available():
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _meter_provider_in_use() -> Any:
    if _meter_provider is not None:
        return _meter_provider
    if not available():
        return None
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return None
    return provider


def tracing() -> bool:
    """Whether spans are recorded now."""
    return _tracer_provider_in_use() is not None


def _tracer() -> Any:
    provider = _tracer_provider_in_use()
    return None if provider is None else provider.get_tracer(PREFIX)


# -- spans -----------------------------------------------------------------------------------


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span `tiered_memory.<name>` (None when tracing is off). An exception marks it
    failed with the exception's type only: messages may quote what was stored."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span(
        f"{PREFIX}.{name}",
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as e:
            current.set_attribute("error.type", type(e).__name__)
            current.set_status(Status(StatusCode.ERROR, type(e).__name__))
            raise


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add attributes to the span of the engine call running now (if traced)."""
    if _tracer() is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(dict(attributes))


def traced(
    name: str, result: Callable[[Any], Attributes] | None = None
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Decorate an engine coroutine with a span; `result` turns what it returned into
    attributes (counts and tiers, never content)."""

    def decorate(
        method: Callable[P, Coroutine[Any, Any, R]],
    ) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(method)
        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if _tracer() is None:
                return await method(*args, **kwargs)
            namespace = kwargs.get("namespace")
            start: Attributes = {}
            if isinstance(namespace, str):
                start[f"{PREFIX}.namespace"] = namespace
            with span(name, start) as current:
                value = await method(*args, **kwargs)
                if result is not None and current is not None:
                    current.set_attributes(result(value))
                return value

        return call

    return decorate


# -- what results say, as attributes ---------------------------------------------------------


def _tier_split(prefix: str, tiers: Mapping[Any, int]) -> Attributes:
    return {f"{PREFIX}.{prefix}.{getattr(t, 'value', t)}": int(n) for t, n in tiers.items()}


def memory_attributes(value: Memory | list[Memory]) -> Attributes:
    memories = value if isinstance(value, list) else [value]
    counts: dict[str, int] = {}
    for m in memories:
        counts[m.tier.value] = counts.get(m.tier.value, 0) + 1
    return {f"{PREFIX}.memories": len(memories), **_tier_split("tier", counts)}


def search_attributes(hits: SearchResults) -> Attributes:
    counts: dict[str, int] = {}
    for h in hits:
        counts[h.tier.value] = counts.get(h.tier.value, 0) + 1
    return {
        f"{PREFIX}.hits": len(hits),
        f"{PREFIX}.degraded": bool(hits.degraded),
        f"{PREFIX}.degraded_reasons": len(hits.reasons),
        **_tier_split("hits", counts),
    }


def injection_attributes(injection: Injection) -> Attributes:
    counts: dict[str, int] = {}
    for h in injection.items:
        counts[h.tier.value] = counts.get(h.tier.value, 0) + 1
    return {
        f"{PREFIX}.tokens": injection.tokens,
        f"{PREFIX}.budget_tokens": injection.budget_tokens,
        f"{PREFIX}.items": len(injection.items),
        f"{PREFIX}.considered": injection.considered,
        f"{PREFIX}.degraded": bool(injection.degraded),
        **_tier_split("tokens", injection.by_tier),
        **_tier_split("items", counts),
    }


def report_attributes(report: MaintenanceReport) -> Attributes:
    out: Attributes = {
        f"{PREFIX}.dry_run": report.dry_run,
        f"{PREFIX}.skipped": report.skipped,
        f"{PREFIX}.namespaces": report.namespaces,
        f"{PREFIX}.errors": len(report.errors),
        f"{PREFIX}.archive_paused": report.archive_paused,
        f"{PREFIX}.quarantined": len(report.quarantined),
        f"{PREFIX}.duration_seconds": report.duration_seconds,
        f"{PREFIX}.summarizer.input_tokens": report.summarizer_input_tokens,
        f"{PREFIX}.summarizer.output_tokens": report.summarizer_output_tokens,
        f"{PREFIX}.summarizer.cost_usd": report.summarizer_cost_usd,
    }
    out.update({f"{PREFIX}.moved.{name}": n for name, n in report.moved.items()})
    if report.archive_estimate is not None:
        out[f"{PREFIX}.estimate.candidates"] = report.archive_estimate.candidates
        out[f"{PREFIX}.estimate.cost_usd"] = report.archive_estimate.cost_usd
    return out


def count_attribute(name: str) -> Callable[[int], Attributes]:
    def attributes(n: int) -> Attributes:
        return {f"{PREFIX}.{name}": int(n)}

    return attributes


# -- backend calls ---------------------------------------------------------------------------


class TracedPort:
    """A port whose coroutine methods each run in a span `tiered_memory.<kind>.<method>`
    (the backend's class, the namespace, and sizes as attributes; never arguments).
    Everything else passes through, `isinstance` included, so capability checks and
    code that asks for the backend's class see the backend."""

    __slots__ = ("_kind", "_port")

    def __init__(self, port: Any, kind: str) -> None:
        object.__setattr__(self, "_port", port)
        object.__setattr__(self, "_kind", kind)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(proxy, SQLiteMemoryStore) holds
        return type(self._port)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._port, name)
        if not inspect.iscoroutinefunction(value):
            return value
        kind, backend = self._kind, type(self._port).__name__

        @functools.wraps(value)
        async def call(*args: Any, **kwargs: Any) -> Any:
            attributes: Attributes = {f"{PREFIX}.backend": backend}
            if args and isinstance(args[0], str):
                attributes[f"{PREFIX}.namespace"] = args[0]
            if len(args) > 1 and isinstance(args[1], list | tuple):
                attributes[f"{PREFIX}.batch"] = len(args[1])
            with span(f"{kind}.{name}", attributes) as current:
                result = await value(*args, **kwargs)
                if current is not None:
                    current.set_attributes(_result_sizes(result))
                return result

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._port, name, value)

    def __repr__(self) -> str:
        return f"TracedPort({self._port!r})"


def _result_sizes(result: Any) -> Attributes:
    """Sizes of a backend's answer: counts, tokens and bytes only."""
    out: Attributes = {}
    if isinstance(result, int) and not isinstance(result, bool):
        out[f"{PREFIX}.count"] = result
    elif isinstance(result, list | dict | set):
        out[f"{PREFIX}.results"] = len(result)
    for name in ("input_tokens", "output_tokens", "size"):
        value = getattr(result, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            out[f"{PREFIX}.{name}"] = value
    return out


def traced_port(port: R, kind: str) -> R:
    """`port`, traced when tracing is on now (else `port` itself)."""
    if not tracing() or isinstance(port, TracedPort):
        return port
    traced: Any = TracedPort(port, kind)
    return traced  # type: ignore[no-any-return]


# -- metrics ---------------------------------------------------------------------------------


@dataclass
class Instruments:
    """The metrics, made once per meter provider (names as Prometheus sees them after
    export: dots become underscores, counters get `_total`)."""

    recall_tokens: Any  # tokens injected by recall, per tier
    archived: Any
    archive_failed: Any
    quarantined: Any  # memories set aside by a run
    expansions: Any
    restores: Any  # attribute `reason`: expansion or explicit
    summarizer_calls: Any
    summarizer_tokens: Any  # attribute `direction`: input or output
    summarizer_cost: Any  # USD
    sweep_duration: Any  # seconds
    gauges: tuple[Any, ...]


def _observe_tiers(options: Any) -> Iterator[Any]:
    from opentelemetry.metrics import Observation

    totals: dict[str, int] = {}
    for (_, tier), n in list(_tier_counts.items()):
        totals[tier] = totals.get(tier, 0) + n
    for tier, n in sorted(totals.items()):
        yield Observation(n, {"tier": tier})


def _observe_bytes(options: Any) -> Iterator[Any]:
    from opentelemetry.metrics import Observation

    if _object_bytes:
        yield Observation(sum(_object_bytes.values()))


def _instruments_in_use() -> Instruments | None:
    global _instruments
    provider = _meter_provider_in_use()
    if provider is None:
        return None
    if _instruments is not None and _instruments[0] is provider:
        return _instruments[1]
    meter = provider.get_meter(PREFIX)
    made = Instruments(
        recall_tokens=meter.create_counter(
            f"{PREFIX}.recall.tokens", unit="{token}", description="tokens injected by recall"
        ),
        archived=meter.create_counter(f"{PREFIX}.archival.archived", unit="{memory}"),
        archive_failed=meter.create_counter(f"{PREFIX}.archival.failed", unit="{memory}"),
        quarantined=meter.create_counter(f"{PREFIX}.archival.quarantined", unit="{memory}"),
        expansions=meter.create_counter(f"{PREFIX}.expansions", unit="{expansion}"),
        restores=meter.create_counter(f"{PREFIX}.restores", unit="{memory}"),
        summarizer_calls=meter.create_counter(f"{PREFIX}.summarizer.calls", unit="{call}"),
        summarizer_tokens=meter.create_counter(f"{PREFIX}.summarizer.tokens", unit="{token}"),
        summarizer_cost=meter.create_counter(f"{PREFIX}.summarizer.cost_usd", unit="{USD}"),
        sweep_duration=meter.create_histogram(f"{PREFIX}.sweep.duration", unit="s"),
        gauges=(
            meter.create_observable_gauge(
                f"{PREFIX}.memories",
                callbacks=[_observe_tiers],
                unit="{memory}",
                description="memories per tier (as of the last stats() or sweep)",
            ),
            meter.create_observable_gauge(
                f"{PREFIX}.object_store.bytes",
                callbacks=[_observe_bytes],
                unit="By",
                description="bytes of archived originals (as of the last stats() or sweep)",
            ),
        ),
    )
    _instruments = (provider, made)
    return made


def metering() -> bool:
    """Whether metrics are recorded now."""
    return _meter_provider_in_use() is not None


def recalled(injection: Injection) -> None:
    m = _instruments_in_use()
    if m is None:
        return
    for tier, tokens in injection.by_tier.items():
        if tokens:
            m.recall_tokens.add(tokens, {"tier": tier.value})


def swept(report: MaintenanceReport) -> None:
    m = _instruments_in_use()
    if m is None or report.skipped or report.dry_run:
        return
    m.archived.add(report.count("cold_to_archived") + report.count("forced_archived"))
    m.archive_failed.add(report.count("archive_failed"))
    m.quarantined.add(report.count("archive_quarantined"))
    m.sweep_duration.record(report.duration_seconds)


def archived(succeeded: int, failed: int = 0) -> None:
    m = _instruments_in_use()
    if m is None:
        return
    m.archived.add(succeeded)
    m.archive_failed.add(failed)


def expanded(restored: bool) -> None:
    m = _instruments_in_use()
    if m is None:
        return
    m.expansions.add(1)
    if restored:
        m.restores.add(1, {"reason": "expansion"})


def restored(n: int) -> None:
    m = _instruments_in_use()
    if m is not None and n:
        m.restores.add(n, {"reason": "explicit"})


def summarizer_spent(calls: int, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
    m = _instruments_in_use()
    if m is None or not calls:
        return
    m.summarizer_calls.add(calls)
    m.summarizer_tokens.add(input_tokens, {"direction": "input"})
    m.summarizer_tokens.add(output_tokens, {"direction": "output"})
    m.summarizer_cost.add(cost_usd)


def sizes(namespace: str, tiers: Mapping[str, int], object_bytes: int | None) -> None:
    """The counts the gauges report for `namespace` (kept only while metrics are on)."""
    if not metering():
        return
    for tier, n in tiers.items():
        _tier_counts[(namespace, tier)] = n
    if object_bytes is not None:
        _object_bytes[namespace] = object_bytes


__all__ = [
    "Instruments",
    "TracedPort",
    "annotate",
    "archived",
    "available",
    "configure",
    "expanded",
    "injection_attributes",
    "memory_attributes",
    "metering",
    "recalled",
    "report_attributes",
    "restored",
    "search_attributes",
    "sizes",
    "span",
    "summarizer_spent",
    "swept",
    "traced",
    "traced_port",
    "tracing",
]
