"""Plays `script.json`: what a user said and asked over seven months, on a fresh
embedded store whose clock only moves when the script says so.

The sweep runs every 6 simulated hours, as the background runner would, so the tiers
move exactly as they would in production, only faster. Everything is offline: the
embedder is a local sentence-transformers model only when one is installed and already
on disk, otherwise the hashing embedder; the demo says which.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import shlex
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tiered_memory.budget import share_caps
from tiered_memory.cli.rendering import budget_split, hits_table, print_injection, print_original
from tiered_memory.clock import ManualClock
from tiered_memory.embeddings import (
    HashingEmbedder,
    SentenceTransformerEmbedder,
    resolve_local_model,
)
from tiered_memory.engine import AsyncTieredMemory
from tiered_memory.errors import ConfigurationError, ValidationError
from tiered_memory.models import Hit, Memory, MemoryType, Tier
from tiered_memory.ports import Embedder

_LETTER = {
    Tier.HOT: "[bold red]HOT[/]",
    Tier.WARM: "[yellow]WARM[/]",
    Tier.COLD: "[cyan]COLD[/]",
    Tier.ARCHIVED: "[dim]ARCH[/]",
}


def load_script() -> dict[str, Any]:
    """The conversation shipped with the package (package data, read when played)."""
    text = resources.files(__package__).joinpath("script.json").read_text(encoding="utf-8")
    script: dict[str, Any] = json.loads(text)
    return script


def local_model_on_disk() -> str | None:
    """A sentence-transformers model folder that loads without the network, or None.

    A name that is not a folder counts only if the Hugging Face cache already holds it;
    the demo never downloads.
    """
    if importlib.util.find_spec("sentence_transformers") is None:
        return None
    try:
        ref = resolve_local_model()
    except ConfigurationError:
        return None
    if Path(ref).is_dir():
        return ref
    try:  # installed with sentence-transformers; looked up, never downloaded from
        hub = importlib.import_module("huggingface_hub")
    except ImportError:
        return None
    repo = ref if "/" in ref else f"sentence-transformers/{ref}"
    cached = hub.try_to_load_from_cache(repo, "config.json")
    return str(Path(cached).parent) if isinstance(cached, str) else None


def choose_embedder(mode: str) -> tuple[Embedder, str]:
    if mode in ("auto", "local"):
        folder = local_model_on_disk()
        if folder is not None:
            return SentenceTransformerEmbedder(
                folder
            ), f"local sentence-transformers model ({folder})"
        if mode == "local":
            raise ConfigurationError(
                "no local sentence-transformers model on disk: pip install "
                "'tiered-memory[local]' and set TIERED_MEMORY_MODEL_PATH to a model folder"
            )
    return (
        HashingEmbedder(),
        "hashing embedder (offline and deterministic; it matches words, not meaning; "
        "install the [local] extra and a model for semantic recall)",
    )


class _Player:
    def __init__(
        self,
        memory: AsyncTieredMemory,
        clock: ManualClock,
        script: dict[str, Any],
        namespace: str,
        console: Console,
    ) -> None:
        self.memory, self.clock, self.script = memory, clock, script
        self.ns, self.console = namespace, console
        self.keys: dict[str, str] = {}  # memory id -> script key
        self.journey: dict[str, list[Tier | None]] = {}
        self.months: list[dict[str, Any]] = []
        self.moves: Counter[str] = Counter()
        self.said = 0
        self.recalled = 0
        self.sweeps = 0

    async def play(self) -> None:
        start = datetime.fromisoformat(self.script["start"])
        every = int(self.script.get("sweep_every_hours", 6))
        by_day: dict[int, list[dict[str, Any]]] = {}
        for event in self.script["events"]:
            by_day.setdefault(int(event["day"]), []).append(event)
        month = start.month
        for day in range(int(self.script["days"])):
            day_start = start + timedelta(days=day)
            if day_start.month != month:
                await self.month_table(day_start - timedelta(days=1))
                month = day_start.month
            for hour in range(0, 24, every):
                self.clock.set(day_start + timedelta(hours=hour))
                report = await self.memory.maintain(namespace=self.ns)
                self.moves.update(report.moved)
                self.sweeps += 1
                if hour <= 10 < hour + every:  # the day's conversation happens at 10:00
                    self.clock.set(day_start + timedelta(hours=10))
                    for event in by_day.get(day, []):
                        await self.event(event)
        await self.month_table(self.clock.now(), final=True)

    async def event(self, event: dict[str, Any]) -> None:
        if "say" in event:
            m = await self.memory.add(
                event["say"],
                namespace=self.ns,
                memory_type=MemoryType.parse(event.get("type", "episodic")),
                importance=float(event.get("importance", 0.5)),
                pinned=bool(event.get("pin", False)),
                source="conversation",
            )
            self.keys[m.id] = event["key"]
            self.said += 1
        if "recall" in event:
            # A focused agent: a few memories per turn, so only what is relevant is used.
            await self.memory.recall(
                event["recall"],
                namespace=self.ns,
                budget_tokens=int(
                    event.get("budget_tokens", self.script.get("recall_budget_tokens", 120))
                ),
                max_items=int(event.get("max_items", self.script.get("recall_max_items", 3))),
            )
            self.recalled += 1

    async def tiers_now(self) -> dict[str, Tier]:
        where: dict[str, Tier] = {}
        for tier in Tier:
            after: str | None = None
            while True:
                page = await self.memory.list(namespace=self.ns, tier=tier, after_id=after)
                for m in page:
                    where[self.label(m)] = tier
                if len(page) < 100:
                    break
                after = page[-1].id
        return where

    def label(self, m: Memory) -> str:
        if m.id in self.keys:
            return self.keys[m.id]
        if m.consolidated_from:  # made by the sweep from fading look-alikes
            parts = [self.keys.get(i, "?") for i in m.consolidated_from]
            key = "merged(" + "+".join(parts) + ")"
            self.keys[m.id] = key
            return key
        return m.id[:8]

    async def month_table(self, when: datetime, *, final: bool = False) -> None:
        where = await self.tiers_now()
        index = len(self.months)
        for key, tier in where.items():
            self.journey.setdefault(key, [None] * index).append(tier)
        for row in self.journey.values():
            while len(row) <= index:
                row.append(None)
        name = when.strftime("%B %Y")
        table = Table(title=f"{name}: end of month", title_justify="left", min_width=70)
        table.add_column("tier")
        table.add_column("n", justify="right")
        table.add_column("memories")
        for tier in Tier:
            keys = sorted(k for k, t in where.items() if t is tier)
            table.add_row(_LETTER[tier], str(len(keys)), escape(", ".join(keys)))
        moved = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in sorted(self.moves.items()))
        table.caption = (
            f"{self.said} said, {self.recalled} recalled; the sweep moved: {moved or 'nothing'}"
        )
        table.caption_justify = "left"
        self.console.print(table)
        self.months.append(
            {
                "month": name,
                "tiers": {t.value: sorted(k for k, v in where.items() if v is t) for t in Tier},
                "moved": dict(self.moves),
            }
        )
        self.moves.clear()
        self.said = self.recalled = 0

    def journey_table(self) -> Table:
        table = Table(title="Each memory's tier at the end of each month", title_justify="left")
        table.add_column("memory")
        for month in self.months:
            table.add_column(month["month"][:3], justify="center")
        for key, row in sorted(self.journey.items()):
            table.add_row(escape(key), *(_LETTER[t] if t else "" for t in row))
        return table


def run_demo(
    *,
    console: Console | None = None,
    embedder: str = "auto",
    keep: Path | None = None,
    namespace: str = "demo-user",
) -> dict[str, Any]:
    """Play the script and show the finale; returns a summary (the --json output)."""
    out = console or Console()
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise ValidationError(f"{str(keep)!r} is not empty; --keep needs a new folder")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return asyncio.run(_run(out, embedder, keep, namespace, kept=True))
    with tempfile.TemporaryDirectory(prefix="tiered-memory-demo-") as folder:
        return asyncio.run(_run(out, embedder, Path(folder), namespace, kept=False))


def kept_store_hint(db: Path, namespace: str) -> str:
    """How to open the kept store: its memories live in `namespace`, not the default
    one, so a bare `tiered-memory list --db ...` would show nothing."""
    return (
        f"kept the demo store at {escape(str(db))}, namespace {escape(repr(namespace))}; "
        f"look at it with: tiered-memory list --db {escape(shlex.quote(str(db)))} "
        f"-n {escape(shlex.quote(namespace))}"
    )


async def _run(
    out: Console, mode: str, folder: Path, namespace: str, *, kept: bool
) -> dict[str, Any]:
    started = time.perf_counter()
    script = load_script()
    emb, described = choose_embedder(mode)
    clock = ManualClock(datetime.fromisoformat(script["start"]))
    db = folder / "demo.db"
    out.print(f"[bold]{escape(script['title'])}[/]: a fresh store at {db}")
    out.print(f"embedder: {escape(described)}")
    out.print(
        f"the clock is simulated: {script['days']} days, a sweep every "
        f"{script.get('sweep_every_hours', 6)} h\n"
    )
    memory = await AsyncTieredMemory.embedded(db, embedder=emb, clock=clock)
    try:
        player = _Player(memory, clock, script, namespace, out)
        await player.play()
        out.print(player.journey_table())

        finale = script["finale"]
        out.print(
            f"\n[bold]recall[/] {finale['recall']!r}, budget {finale['budget_tokens']} tokens:"
        )
        inj = await memory.recall(
            finale["recall"], namespace=namespace, budget_tokens=int(finale["budget_tokens"])
        )
        print_injection(inj, share_caps(inj.budget_tokens, memory.policy.budget), out)

        archived: Hit | None = None
        hits: list[Hit] = []
        for query in (finale["deep_search"], finale["fallback_deep_search"]):
            hits = list(await memory.search(query, namespace=namespace, k=10, deep=True))
            archived = next((h for h in hits if h.archived), None)
            if archived is not None:
                break
        out.print(f"\n[bold]search --deep[/] {query!r}:")
        out.print(hits_table(hits, f"{len(hits)} hit(s)"))
        document: dict[str, Any] | None = None
        if archived is not None:
            out.print(f"\n[bold]expand[/] {archived.memory.id} (the original, from the archive):")
            document = await memory.expand(archived.memory.id, namespace=namespace)
            print_original(document, out)
        else:
            out.print("no archived memory matched")
        seconds = time.perf_counter() - started
        out.print(
            f"\nplayed {script['days']} days and {player.sweeps} sweeps in {seconds:.1f} s. "
            f"Try it on your own store: tiered-memory add 'I prefer tea' --type procedural"
        )
        if kept:
            out.print(kept_store_hint(db, namespace), soft_wrap=True)  # one line, to copy
        return {
            "namespace": namespace,
            "db": str(db) if kept else None,
            "embedder": described,
            "seconds": round(seconds, 2),
            "sweeps": player.sweeps,
            "months": player.months,
            "recall": {
                "query": finale["recall"],
                "tokens": inj.tokens,
                "budget_tokens": inj.budget_tokens,
                "by_tier": {t.value: n for t, n in inj.by_tier.items()},
                "by_share": budget_split(inj),
                "items": [player.keys.get(h.memory.id, h.memory.id) for h in inj.items],
            },
            "deep_search": {
                "query": query,
                "hits": [
                    {"key": player.keys.get(h.memory.id, h.memory.id), "tier": h.tier.value}
                    for h in hits
                ],
                "archived_id": archived.memory.id if archived else None,
                "archived_key": player.keys.get(archived.memory.id) if archived else None,
            },
            "expanded": document.get("content") if document else None,
        }
    finally:
        await memory.close()
