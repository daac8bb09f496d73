"""How the command line shows results: tables and lines for people, JSON for scripts.

Stored text is anyone's text, so everything printed here goes through `safe`: control
characters escaped (`tiered_memory.terminal`) and rich markup shown as text. Tables and
lines go to stdout; progress bars go to stderr, so `--json` output stays parseable. The
demo prints with these too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from tiered_memory import PathNamespace
from tiered_memory.budget import SHARE_ORDER, share_of
from tiered_memory.models import (
    Explanation,
    Hit,
    Injection,
    MaintenanceReport,
    Memory,
    QuarantinedMemory,
    Stats,
    Tier,
)
from tiered_memory.terminal import printable

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)


# -- text ---------------------------------------------------------------------------------


def line(message: object) -> str:
    """One line, with no control character a terminal would act on (`terminal`)."""
    return printable(" ".join(str(message).split()), newlines=False)


def safe(text: object, *, newlines: bool = False) -> str:
    """Stored or typed text for rich output: control characters escaped (`terminal`)
    and markup shown as text, so a memory can neither drive the terminal nor style
    or link itself (rich markup makes OSC 8 links)."""
    return escape(printable(str(text), newlines=newlines))


def short(text: str, width: int = 72) -> str:
    """One line of at most `width` characters, control characters escaped."""
    flat = printable(" ".join(text.split()), newlines=False)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_TIER_STYLE = {
    Tier.HOT: "bold red",
    Tier.WARM: "yellow",
    Tier.COLD: "cyan",
    Tier.ARCHIVED: "dim",
}


def tier_label(tier: Tier) -> str:
    return f"[{_TIER_STYLE[tier]}]{tier.value}[/]"


def flags(memory: Memory) -> str:
    shown = [
        name
        for name, on in (
            ("pinned", memory.pinned),
            ("core", memory.core),
            ("forgotten", memory.do_not_inject),
            ("superseded", memory.superseded_by is not None),
        )
        if on
    ]
    return ",".join(shown)


# -- JSON -----------------------------------------------------------------------------------


def memory_json(memory: Memory) -> dict[str, Any]:
    return memory.model_dump(mode="json", exclude={"embedding"})


def hit_json(hit: Hit) -> dict[str, Any]:
    return {
        "id": hit.memory.id,
        "tier": hit.tier.value,
        "score": hit.score,
        "phase": hit.phase,
        "via": hit.via,
        "tokens": hit.tokens,
        "terms": hit.terms.model_dump(mode="json"),
        "memory": memory_json(hit.memory),
    }


def report_json(report: MaintenanceReport) -> dict[str, Any]:
    return report.model_dump(mode="json")


# -- tables ---------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


CONTENT_MIN = 16  # below this, optional columns give way to the content


class FittedTable:
    """A compact table sized when it is printed: every column but `content` keeps its
    full width (ids stay whole, to be copied; tier, score and type stay readable), and
    `content` takes exactly what is left, cut with an ellipsis. On a narrow terminal the
    `optional` columns go first (the last named first), before the content would
    shrink below `CONTENT_MIN`; an optional column that is empty in every row is never
    shown. (A rich table left to itself drops the middle columns at 80 columns.)"""

    def __init__(
        self,
        title: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[str]],
        optional: Sequence[str] = (),
    ) -> None:
        self.title, self.columns, self.rows = title, tuple(columns), rows
        self.optional = tuple(c for c in optional if c in self.columns)
        self.widths = {
            col: max([len(col), *(Text.from_markup(row[i]).cell_len for row in rows)])
            for i, col in enumerate(self.columns)
        }

    def _build(self, shown: Sequence[str], content_width: int | None) -> Table:
        built = Table(
            title=self.title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        for col in shown:
            if col == "content":
                built.add_column(col, width=content_width, overflow="ellipsis", no_wrap=True)
                continue
            i = self.columns.index(col)
            numeric = bool(self.rows) and all(_NUMBER.fullmatch(row[i]) for row in self.rows)
            built.add_column(
                col,
                no_wrap=True,
                min_width=self.widths[col],
                justify="right" if numeric else "left",
            )
        for row in self.rows:
            built.add_row(*(row[self.columns.index(col)] for col in shown))
        return built

    def _fixed_width(self, console: Console, options: ConsoleOptions, shown: Sequence[str]) -> int:
        """The width of the columns but `content`, separators included."""
        header = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        for col in shown:
            header.add_column(col, width=0 if col == "content" else self.widths[col])
        return Measurement.get(console, options, header).maximum

    def fitted(self, console: Console, options: ConsoleOptions) -> Table:
        empty = {
            c for c in self.optional if not any(row[self.columns.index(c)] for row in self.rows)
        }
        shown = [c for c in self.columns if c not in empty]
        droppable = [c for c in self.optional if c in shown]
        if "content" not in shown:
            return self._build(shown, None)
        while True:
            left = options.max_width - self._fixed_width(console, options, shown)
            if left >= CONTENT_MIN or not droppable:
                return self._build(shown, max(min(left, self.widths["content"]), CONTENT_MIN))
            shown.remove(droppable.pop())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.fitted(console, options)


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    optional: Sequence[str] = (),
) -> FittedTable:
    """A table of results (`FittedTable`); `optional` columns give way on narrow screens."""
    return FittedTable(title, columns, rows, optional)


def _type(memory: Memory) -> str:
    return memory.memory_type.value[:4]


def memory_line(m: Memory) -> str:
    """One memory on one line: id, tier, type and the start of its content."""
    return f"{safe(m.id)}  {tier_label(m.tier)}  {m.memory_type.value}  {escape(short(m.content))}"


def hits_table(hits: Sequence[Hit], title: str) -> FittedTable:
    rows = [
        [
            safe(h.memory.id),
            tier_label(h.tier),
            f"{h.score:.3f}",
            _type(h.memory),
            escape(short(h.memory.content, 200)),
        ]
        for h in hits
    ]
    return table(title, ("id", "tier", "score", "type", "content"), rows)


def memories_table(memories: Sequence[Memory]) -> FittedTable:
    rows = [
        [
            safe(m.id),
            tier_label(m.tier),
            _type(m),
            f"{m.importance:.1f}",
            str(m.use_count),
            flags(m),
            escape(short(m.content, 200)),
        ]
        for m in memories
    ]
    columns = ("id", "tier", "type", "imp", "uses", "flags", "content")
    return table(f"{len(memories)} memories", columns, rows, optional=("imp", "uses", "flags"))


def archive_table(candidates: Sequence[dict[str, Any]], verb: str) -> FittedTable:
    """Memories an archive took or would take (as `memory_json` dicts)."""
    rows = [
        [
            safe(m["id"]),
            tier_label(Tier(m["tier"])),
            str(m["last_accessed_at"] or m["created_at"])[:10],
            escape(short(m["content"], 200)),
        ]
        for m in candidates
    ]
    return table(
        f"{verb} {len(candidates)} memory(ies)", ("id", "tier", "last used", "content"), rows
    )


def _namespace_label(name: str) -> str:
    """A namespace as a person reads it: a path namespace (LangGraph's tuples) as its
    labels, since its stored name starts with an invisible mark."""
    path = PathNamespace.parse(name)
    return json.dumps(list(path.labels), ensure_ascii=False) if path is not None else name


def namespace_json(s: Stats) -> dict[str, Any]:
    path = PathNamespace.parse(s.namespace)
    return {
        "namespace": s.namespace,
        "labels": list(path.labels) if path is not None else None,
        "tiers": {t.value: (s.tiers[t].count if t in s.tiers else 0) for t in Tier},
        "total": s.total,
    }


def namespaces_table(found: Sequence[Stats]) -> FittedTable:
    rows = [
        [
            safe(_namespace_label(s.namespace)),
            *(str(s.tiers[t].count if t in s.tiers else 0) for t in Tier),
            str(s.total),
        ]
        for s in found
    ]
    columns = ("namespace", *(t.value for t in Tier), "total")
    return table(f"{len(found)} namespace(s)", columns, rows)


BAR_WIDTH = 20
_EIGHTHS = " ▏▎▍▌▋▊▉"  # a bar's last cell, in eighths of a block


def bar(fraction: float, width: int = BAR_WIDTH, *, unicode: bool = True) -> str:
    """`fraction` (0..1) of `width` cells as a bar, padded to `width`: block elements
    to the eighth of a cell, or `#` per whole cell where the terminal's encoding has
    no block elements (a legacy code page would raise on them, or show garbage)."""
    share = min(max(fraction, 0.0), 1.0)
    if not unicode:
        return ("#" * round(share * width)).ljust(width)
    full, eighths = divmod(round(share * width * 8), 8)
    drawn = "█" * full + (_EIGHTHS[eighths] if eighths else "")
    return drawn.ljust(width)


def print_stats(s: Stats, quarantined: Sequence[QuarantinedMemory], console: Console = out) -> None:
    """Counts and bytes per tier, with the tier split as a bar chart."""
    unicode = console.encoding.lower().startswith("utf")
    shown = Table(title=f"namespace {safe(repr(s.namespace))}", title_justify="left")
    shown.add_column("tier")
    shown.add_column("memories", justify="right")
    shown.add_column("bytes", justify="right")
    shown.add_column("share of memories", no_wrap=True)
    for tier in Tier:
        ts = s.tiers.get(tier)
        count = ts.count if ts else 0
        fraction = count / s.total if s.total else 0.0
        split = f"{bar(fraction, unicode=unicode)} {fraction:>4.0%}"
        shown.add_row(tier_label(tier), str(count), str(ts.bytes if ts else 0), split)
    shown.add_section()
    shown.add_row("total", str(s.total), "", "")
    console.print(shown)
    console.print(
        f"pinned {s.pinned}  core {s.core}  forgotten {s.forgotten}  links {s.links}  "
        f"quarantined {s.quarantined}"
    )
    spent = s.summarizer
    console.print(
        f"object store {s.object_store_bytes or 0} bytes  expansions (30 d) {s.expansions_30d} "
        f"({s.expansion_rate_30d:.1%} of archived)  summariser {spent.calls} call(s), "
        f"{spent.input_tokens} + {spent.output_tokens} tokens, {usd(spent.cost_usd)}"
    )
    last = s.last_sweep
    if last is None:
        console.print("last sweep: none recorded")
    else:
        moved = ", ".join(f"{name} {n}" for name, n in sorted(last.moved.items())) or "nothing due"
        console.print(
            f"last sweep {last.now.isoformat(timespec='seconds')}: {moved}; "
            f"{len(last.errors)} error(s), {last.duration_seconds:.2f} s, "
            f"cost {usd(last.summarizer_cost_usd)}"
        )
    if not s.history_persisted:
        console.print("[dim](expansions, last sweep and spending: this process's only)[/]")
    print_quarantined(quarantined, console)


def usd(amount: float) -> str:
    """Money as people read it: cents for what costs cents, more digits for less."""
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.6f}"


def print_quarantined(quarantined: Sequence[QuarantinedMemory], console: Console = out) -> None:
    """The memories archival set aside, with the error that did it and how to retry."""
    if not quarantined:
        return
    console.print(
        f"[yellow]archival set aside {len(quarantined)} memory(ies) after repeated "
        "failures; fix the cause, then `tiered-memory archive ID` retries one[/]"
    )
    for q in quarantined:
        console.print(f"  {safe(q.id)}  {q.failures} failures: {safe(q.error)}")


def print_explanation(e: Explanation, console: Console = out) -> None:
    shown = Table(
        title=f"{safe(e.id)} ({e.tier.value}, {e.memory_type.value})", title_justify="left"
    )
    shown.add_column("term")
    shown.add_column("value", justify="right")
    for name, value in e.terms.model_dump().items():
        shown.add_row(name, f"{value:.4f}")
    shown.add_section()
    shown.add_row("uses", str(e.use_count))
    shown.add_row("last used", e.last_used_at.isoformat(timespec="seconds"))
    shown.add_row("pinned / core", f"{e.pinned} / {e.core}")
    console.print(shown)
    console.print(safe(e.formula, newlines=True))


def budget_split(inj: Injection) -> dict[str, int]:
    """Tokens used per budget share (pinned, hot, warm, cold incl. archived)."""
    used = dict.fromkeys(SHARE_ORDER, 0)
    for h in inj.items:
        used[share_of(h)] += h.tokens
    return used


def injection_json(inj: Injection) -> dict[str, Any]:
    return {
        "text": inj.text,
        "tokens": inj.tokens,
        "budget_tokens": inj.budget_tokens,
        "by_tier": {t.value: n for t, n in inj.by_tier.items()},
        "by_share": budget_split(inj),
        "degraded": inj.degraded,
        "items": [hit_json(h) for h in inj.items],
    }


def print_injection(inj: Injection, caps: dict[str, int], console: Console = out) -> None:
    if inj.items:
        console.print(safe(inj.text, newlines=True))
    else:
        console.print("nothing to inject")
    shown = Table(
        title=f"{inj.tokens} of {inj.budget_tokens} tokens, {len(inj.items)} item(s)",
        title_justify="left",
    )
    shown.add_column("share")
    shown.add_column("share of budget", justify="right")
    shown.add_column("used", justify="right")
    shown.add_column("items", justify="right")
    used = budget_split(inj)
    for share in SHARE_ORDER:
        n = sum(1 for h in inj.items if share_of(h) == share)
        shown.add_row(share, str(caps.get(share, 0)), str(used[share]), str(n))
    console.print(shown)


def print_report(report: MaintenanceReport, console: Console = out) -> None:
    when = report.now.isoformat(timespec="seconds")
    if report.skipped:
        console.print(f"{when}: another sweep of this store is running; skipped")
        return
    title = f"sweep at {when}{' (dry run)' if report.dry_run else ''}"
    shown = Table(title=title, title_justify="left")
    shown.add_column("transition")
    shown.add_column("memories", justify="right")
    for name, n in sorted(report.moved.items()):
        shown.add_row(name, str(n))
    if not report.moved:
        shown.add_row("nothing due", "0")
    console.print(shown)
    est = report.archive_estimate
    if est is not None and est.candidates:
        console.print(
            f"archiving would cost {est.summarizer_calls} summariser call(s), "
            f"~{est.input_tokens} input + ~{est.output_tokens} output tokens, "
            f"{est.bytes} bytes of originals, ~{usd(est.cost_usd)}"
        )
    if not report.dry_run and report.summarizer_cost_usd:
        console.print(f"summaries cost {usd(report.summarizer_cost_usd)}")
    for e in report.errors:
        console.print(f"[red]{safe(e)}[/]")
    print_quarantined(report.quarantined, console)


def print_original(document: dict[str, Any], console: Console = out) -> None:
    console.print(f"[bold]{safe(document.get('original_id'))}[/] (archived original)")
    console.print(safe(document.get("content", ""), newlines=True))
    console.print(
        safe(
            f"created {document.get('created_at')}, archived {document.get('archived_at')} "
            f"({document.get('archive_reason')}), importance {document.get('importance_score')}"
        )
    )


@contextmanager
def progress(total: int, label: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (never on stdout, which --json keeps for data)."""
    if not enabled or total <= 0:
        yield lambda _n: None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)
