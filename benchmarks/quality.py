"""Retrieval quality on LoCoMo: evidence recall inside token budgets.

For every question (category 5 excluded), the share of its evidence turns found in
the context injected under a budget of 250/500/1000/2000 cl100k tokens, counted by
the core's TiktokenCounter on the rendered lines ("- text"). Every system is fed the
same all-MiniLM-L6-v2 vectors (each turn and question embedded once, then kept in
the disk cache of the output folder).

Systems:
- flat vector, flat BM25, flat hybrid (`flat.py`): our relevance without the memory
  machinery (no decay, use, tiers, graph or deduplication).
- ours, static: every session added at its time (dedup and auto-linking on), the
  questions asked after the last session.
- ours, replay: turns added in order with the clock at their session's time; before
  each turn the agent recalls for it (default budget and items, uses recorded, as
  auto-injection would); the sweep runs between sessions; questions at the end.
- ablations of the replay: no decay (no retention term in the score), no tiers (no
  sweep: everything stays HOT), no graph (no links, no expansion), no dedup.

Ours runs `Policy()` as shipped, its item cap included; any other setting is a
variant with its own name. The flat baselines pack whole lines best-first into the
budget with no item cap.

    python -m benchmarks quality --data ../shared/bench-data/locomo-dev

LongMemEval_S (`longmemeval.py`) runs after LoCoMo in the same command.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from tiered_memory import AsyncTieredMemory, ManualClock
from tiered_memory.engine import MemoryInput
from tiered_memory.models import Injection
from tiered_memory.policy import Policy
from tiered_memory.tokens import TiktokenCounter

from .common import RESULTS, markdown_table, status, write_json
from .flat import pack_ranked, rank_flat
from .locomo import Conversation, Turn, load

BUDGETS = (250, 500, 1000, 2000)
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "bench-data" / "locomo-dev"
TURN_GAP = timedelta(seconds=30)  # turns of one session, in order
FLAT_POOL = 100  # the flat hybrid fuses the vector and BM25 top-100
Vec = npt.NDArray[np.float32]


# -- embeddings, once per run ---------------------------------------------------------------


class CachedEmbedder:
    """all-MiniLM-L6-v2 through the core's SentenceTransformerEmbedder (offline), with
    every text embedded once per run; the engines get it for what they embed themselves
    (consolidation summaries, archive summaries).

    `load(folder)` also keeps the vectors on disk between runs
    (`embeddings-<model fingerprint>.npz`, keyed by the sha1 of the text), because
    embedding the ~30k texts of both benchmarks takes minutes on a busy CPU.
    """

    def __init__(self, model: str | None = None) -> None:
        from tiered_memory.embeddings import SentenceTransformerEmbedder

        self.inner = SentenceTransformerEmbedder(model)
        self.cache: dict[str, Vec] = {}
        self.seconds = 0.0
        self.encoded = 0
        self.path: Path | None = None
        self._stored: dict[str, Vec] = {}  # sha1 of text -> vector, the disk cache
        self._unsaved = 0

    def load(self, folder: Path) -> int:
        """Use (and later `save()` to) the disk cache in `folder`; returns its size."""
        self.path = folder / f"embeddings-{_model_fingerprint(self.inner.model_ref)}.npz"
        if self.path.exists():
            with np.load(self.path) as data:
                keys = [k.decode("ascii") for k in data["keys"]]
                self._stored = dict(zip(keys, data["vectors"].astype(np.float32), strict=True))
        return len(self._stored)

    def save(self) -> None:
        """Write the disk cache if this run embedded anything new (atomic replace)."""
        if self.path is None or not self._unsaved:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._stored), dtype="S40")
        vectors = np.stack(list(self._stored.values()))
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vectors)
        tmp.replace(self.path)
        self._unsaved = 0

    def warm(self, texts: Sequence[str]) -> None:
        missing = []
        for text in dict.fromkeys(t for t in texts if t not in self.cache):
            stored = self._stored.get(_text_key(text))
            if stored is None:
                missing.append(text)
            else:
                self.cache[text] = stored
        if missing:
            start = time.perf_counter()
            matrix = self.inner._encode(missing)
            self.seconds += time.perf_counter() - start
            self.encoded += len(missing)
            for text, row in zip(missing, matrix, strict=True):
                self.cache[text] = self._stored[_text_key(text)] = np.asarray(row, dtype=np.float32)
            self._unsaved += len(missing)

    def get(self, text: str) -> Vec:
        if text not in self.cache:
            self.warm([text])
        return self.cache[text]

    async def aembed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.warm(texts)
        return np.stack([self.cache[t] for t in texts])

    async def aembed_query(self, text: str) -> Vec:
        return self.get(text)


def _text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _model_fingerprint(model_ref: str) -> str:
    """Which model made the vectors: a model folder by its file names, sizes and config,
    a hub name by itself; so another model never reads this one's cache."""
    digest = hashlib.sha1(model_ref.encode() if not Path(model_ref).is_dir() else b"")
    folder = Path(model_ref)
    if folder.is_dir():
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                digest.update(f"{f.relative_to(folder)}:{f.stat().st_size};".encode())
                if f.name == "config.json":
                    digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


# -- flat baselines ----------------------------------------------------------------------


def flat_rankings(
    conv: Conversation, emb: CachedEmbedder, candidates: int
) -> dict[str, list[list[int]]]:
    """For each flat system, each question's ranking of the conversation's turns."""
    texts = [t.content for t in conv.turns]
    queries = [(q.text, emb.get(q.text)) for q in conv.questions]
    return rank_flat(texts, [emb.get(t) for t in texts], queries, candidates)


# -- ours ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    protocol: str  # "static" or "replay"
    policy: dict[str, Any] = field(default_factory=dict)  # section -> overrides
    dedup: bool = True
    link: bool = True
    sweep: bool = True
    max_items: int | None = None  # recall's cap at question time; None: the Policy's


def build_policy(overrides: dict[str, Any]) -> Policy:
    """Policy() with per-section overrides, e.g. {"fusion": {"graph": 0.0}}."""
    base = Policy()
    sections = {}
    for section, values in overrides.items():
        current = getattr(base, section)
        sections[section] = type(current).model_validate({**current.model_dump(), **values})
    return base.model_copy(update=sections) if sections else base


# DESIGN.md's first defaults, before tuning on the dev split. The Policy defaults are
# now the tuned values (see README): relevance decides, a smaller HOT share that only
# relevant hits may claim, COLD searched unless the active tiers hold k strong matches
# and not halved on top, no links from co-injection.
DESIGN_FIRST: dict[str, Any] = {
    "scoring": {
        "relevance": 0.5,
        "retention": 0.3,
        "frequency": 0.2,
        "tier_factor": {"hot": 1.0, "warm": 1.0, "cold": 0.5, "archived": 1 / 1.2},
    },
    "budget": {
        "pinned": 0.25,
        "hot": 0.45,
        "warm": 0.25,
        "cold": 0.05,
        "reserve_min_relevance": 0.0,
    },
    "retrieval": {"relevance_threshold": 0.25},
    "associations": {"co_recall_boost": 0.1},
}

VARIANTS = [
    Variant("ours (static)", "static", sweep=False),
    Variant("ours (replay)", "replay"),
    Variant("replay: DESIGN.md's first defaults", "replay", DESIGN_FIRST),
    Variant(
        "replay: COLD only as a fallback", "replay", {"retrieval": {"relevance_threshold": 0.25}}
    ),
    Variant(
        "replay: tier reservations 10/30/10 (hot/warm/cold)",
        "replay",
        {"budget": {"hot": 0.1, "warm": 0.3, "cold": 0.1}},
    ),
    Variant("replay: no context phase", "replay", {"retrieval": {"context_seeds": 0}}),
    Variant("replay: no query cues", "replay", {"fusion": {"speaker": 0.0, "time": 0.0}}),
    Variant("replay: update rule at 0.8", "replay", {"retrieval": {"update_similarity": 0.8}}),
    Variant("replay: co-injection links", "replay", {"associations": {"co_recall_boost": 0.1}}),
    Variant("replay: no decay", "replay", {"scoring": {"retention": 0.0}}),
    Variant("replay: no tiers", "replay", sweep=False),
    Variant(
        "replay: no graph",
        "replay",
        {"fusion": {"graph": 0.0}, "retrieval": {"graph_seeds": 0}},
        link=False,
    ),
    Variant("replay: no dedup", "replay", dedup=False),
]


@dataclass
class OursResult:
    scores: dict[int, list[float]]  # budget -> per-question evidence recall
    categories: list[int]
    seconds: float
    stats: dict[str, Any]


def _merge_overrides(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {k: dict(v) for k, v in a.items()}
    for section, values in b.items():
        out.setdefault(section, {}).update(values)
    return out


def select_variants(
    available: Sequence[Variant],
    names: str,
    overrides: Sequence[str],
    max_items: int | None,
    default: str = "ours (replay)",
) -> list[Variant]:
    """The variants of ours to run, each labelled with what it changes.

    `names` (';'-separated) picks from `available` (all when empty). `--max-items N`
    adds a copy of `default` whose questions are asked with max_items=N (the agent's
    own recalls keep the shipped cap); `--set` overrides apply to every
    variant and are written into its name, so no table row claims the defaults
    without running them.
    """
    wanted = [n for n in names.split(";") if n]
    unknown = set(wanted) - {v.name for v in available}
    if unknown:
        raise SystemExit(
            f"unknown variants {sorted(unknown)}; known: {[v.name for v in available]}"
        )
    chosen = [v for v in available if not wanted or v.name in wanted]
    if max_items is not None:
        base = next(v for v in available if v.name == default)
        chosen.append(
            replace(
                base,
                name=f"{base.name.removeprefix('ours (').removesuffix(')')}: max_items={max_items}",
                max_items=max_items,
            )
        )
    extra = _parse_overrides(overrides)
    if not extra:
        return chosen
    label = " [" + ", ".join(overrides) + "]"
    return [
        replace(v, name=v.name + label, policy=_merge_overrides(v.policy, extra)) for v in chosen
    ]


def _item(conv: Conversation, turn: Turn, emb: CachedEmbedder) -> MemoryInput:
    # explicit ids keep runs deterministic (ties break by id)
    memory_id = f"c{conv.id}-{turn.dia_id.replace(':', '-')}"
    return MemoryInput(id=memory_id, content=turn.content, embedding=emb.get(turn.content))


# tmpfs when there is one: this measures retrieval, not fsync
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


async def run_ours(
    convs: Sequence[Conversation],
    emb: CachedEmbedder,
    variant: Variant,
    budgets: Sequence[int],
) -> OursResult:
    policy = build_policy(variant.policy)
    scores: dict[int, list[float]] = {b: [] for b in budgets}
    categories: list[int] = []
    stats: Counter[str] = Counter()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tm-locomo-", dir=SCRATCH) as tmp:
        clock = ManualClock(convs[0].sessions[0][1])
        mem = await AsyncTieredMemory.embedded(
            Path(tmp) / "locomo.db", embedder=emb, clock=clock, policy=policy
        )
        try:
            for conv in convs:
                ns = f"locomo-{conv.id}"
                memory_of: dict[str, str] = {}
                clock.set(conv.sessions[0][1])
                for _, when, turns in conv.sessions:
                    clock.set(max(when, clock.now()))
                    if variant.protocol == "static":
                        added = await mem.add_many(
                            [_item(conv, t, emb) for t in turns],
                            namespace=ns,
                            dedup=variant.dedup,
                            link=variant.link,
                        )
                        for t, m in zip(turns, added, strict=True):
                            memory_of[t.dia_id] = m.id
                        continue
                    if variant.sweep:
                        report = await mem.maintain(now=clock.now(), namespace=ns)
                        stats.update(report.moved)
                    for i, t in enumerate(turns):
                        clock.set(max(when + TURN_GAP * i, clock.now()))
                        vector = emb.get(t.content)
                        if memory_of:  # an agent recalls for each message it receives
                            inj = await mem.recall(t.content, namespace=ns, query_embedding=vector)
                            stats["replay_injected"] += len(inj.items)
                        (m,) = await mem.add_many(
                            [_item(conv, t, emb)],
                            namespace=ns,
                            dedup=variant.dedup,
                            link=variant.link,
                        )
                        memory_of[t.dia_id] = m.id
                        if m.content != t.content:
                            stats["deduplicated"] += 1
                clock.set(conv.last_time + timedelta(days=1))
                tiers = (await mem.stats(namespace=ns)).tiers
                for tier, ts in tiers.items():
                    stats[f"final_{tier.value}"] += ts.count
                for q in conv.questions:
                    wanted = {memory_of[d] for d in q.evidence}
                    qv = emb.get(q.text)
                    categories.append(q.category)
                    for b in budgets:
                        inj = await mem.recall(
                            q.text,
                            namespace=ns,
                            budget_tokens=b,
                            max_items=variant.max_items,  # None: the shipped cap
                            record_use=False,
                            query_embedding=qv,
                        )
                        hit = len(wanted & injected_ids(inj)) / len(wanted)
                        scores[b].append(hit)
        finally:
            await mem.close()
    return OursResult(scores, categories, time.perf_counter() - start, dict(stats))


def injected_ids(injection: Injection) -> set[str]:
    """The memories a context holds, with those a consolidated memory stands for."""
    found: set[str] = set()
    for h in injection.items:
        found.add(h.memory.id)
        found.update(h.memory.consolidated_from)
    return found


# -- the run ----------------------------------------------------------------------------


def worker_embedder(model: str | None, cache: dict[str, Vec]) -> CachedEmbedder:
    """A worker's embedder, seeded with the parent's vectors (no disk cache: the parent
    alone writes it)."""
    emb = CachedEmbedder(model)
    emb.cache.update(cache)
    return emb


def _variant_job(
    folder: str,
    ids: list[str],
    model: str | None,
    cache: dict[str, Vec],
    variant: Variant,
    budgets: Sequence[int],
    embedder: CachedEmbedder | None = None,
) -> OursResult:
    """One variant over the conversations (in a worker process, or inline)."""
    wanted = set(ids)
    convs = [c for c in load(Path(folder)) if c.id in wanted]
    emb = embedder or worker_embedder(model, cache)
    return asyncio.run(run_ours(convs, emb, variant, budgets))


R = TypeVar("R")


def run_jobs(
    job: Callable[..., R],
    jobs: Sequence[tuple[str, tuple[Any, ...]]],
    workers: int,
    embedder: CachedEmbedder,
    done: Callable[[str, R], None],
) -> dict[str, R]:
    """Run named jobs in `workers` spawned processes, or inline with the parent's
    embedder; `done` sees each result as it arrives."""
    results: dict[str, R] = {}
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn: a forked copy of a process that has run torch can deadlock
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(job, *args): name for name, args in jobs}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                done(futures[future], results[futures[future]])
    else:
        for name, args in jobs:
            results[name] = job(*args, embedder=embedder)
            done(name, results[name])
    return results


def _report(name: str, result: OursResult, budgets: Sequence[int]) -> None:
    status(
        f"  {name}: "
        + ", ".join(f"{b}: {_mean(result.scores[b]):.3f}" for b in budgets)
        + f" ({result.seconds:.0f} s)"
    )


def _evidence_scores(
    conv: Conversation,
    rankings: list[list[int]],
    budgets: Sequence[int],
    count: Callable[[str], int],
) -> dict[int, list[float]]:
    texts = [t.content for t in conv.turns]
    index_of = {t.dia_id: i for i, t in enumerate(conv.turns)}
    out: dict[int, list[float]] = {b: [] for b in budgets}
    for q, ranked in zip(conv.questions, rankings, strict=True):
        wanted = {index_of[d] for d in q.evidence}
        for b in budgets:
            chosen = set(pack_ranked(texts, ranked, b, count))
            out[b].append(len(wanted & chosen) / len(wanted))
    return out


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def open_embedder(args: argparse.Namespace) -> CachedEmbedder:
    """The run's embedder with the disk cache of the output folder."""
    emb = CachedEmbedder(args.model)
    stored = emb.load(Path(args.out) if getattr(args, "out", None) else RESULTS)
    status(f"embedding cache: {stored:,} vectors in {emb.path}")
    return emb


def run(args: argparse.Namespace, emb: CachedEmbedder | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    folder = Path(args.data)
    convs = load(folder)
    if args.conversations:
        wanted = set(args.conversations.split(","))
        convs = [c for c in convs if c.id in wanted]
    budgets = [int(b) for b in args.budgets.split(",")]
    counter = TiktokenCounter()
    n_q = sum(len(c.questions) for c in convs)
    status(
        f"quality: {len(convs)} conversations, {sum(len(c.turns) for c in convs):,} turns, "
        f"{n_q} questions (category 5 excluded)"
    )

    emb = emb or open_embedder(args)
    emb.warm(
        [t.content for c in convs for t in c.turns] + [q.text for c in convs for q in c.questions]
    )
    emb.save()
    status(f"quality: embedded {emb.encoded:,} new texts in {emb.seconds:.0f} s")

    systems: dict[str, dict[str, Any]] = {}
    # the hybrid's pool: the vector and BM25 top-100 (the tail follows in cosine order)
    candidates = max(Policy().retrieval.candidates, FLAT_POOL)
    flat_scores: dict[str, dict[int, list[float]]] = {}
    categories: list[int] = []
    flat_start = time.perf_counter()
    for conv in convs:
        ranks = flat_rankings(conv, emb, candidates)
        for name, rankings in ranks.items():
            per = _evidence_scores(conv, rankings, budgets, counter.count)
            bucket = flat_scores.setdefault(name, {b: [] for b in budgets})
            for b in budgets:
                bucket[b].extend(per[b])
        categories.extend(q.category for q in conv.questions)
    flat_seconds = time.perf_counter() - flat_start
    for name, per in flat_scores.items():
        systems[name] = {"scores": per, "categories": categories, "seconds": flat_seconds / 3}

    selected = select_variants(VARIANTS, args.variants, args.set or [], args.max_items)
    ids = [c.id for c in convs]
    # the long replays first, so two workers finish together
    order = sorted(selected, key=lambda v: v.protocol != "replay")
    cache = {
        t: emb.get(t)
        for c in convs
        for t in [*(u.content for u in c.turns), *(q.text for q in c.questions)]
    }
    jobs = [(v.name, (str(folder), ids, args.model, cache, v, budgets)) for v in order]
    results = run_jobs(
        _variant_job, jobs, args.workers, emb, lambda name, r: _report(name, r, budgets)
    )
    for variant in selected:  # in table order
        result = results[variant.name]
        systems[variant.name] = {
            "scores": result.scores,
            "categories": result.categories,
            "seconds": result.seconds,
            "stats": result.stats,
        }
    emb.save()  # what the engines embedded themselves (summaries), when inline

    table = render(systems, budgets)
    print(table)
    summary = {
        name: {str(b): _mean(s["scores"][b]) for b in budgets} for name, s in systems.items()
    }
    by_category = {
        name: {
            str(cat): {
                str(b): _mean(
                    [v for v, c in zip(s["scores"][b], s["categories"], strict=True) if c == cat]
                )
                for b in budgets
            }
            for cat in sorted(set(s["categories"]))
        }
        for name, s in systems.items()
    }
    payload = {
        "data": str(folder),
        "conversations": [c.id for c in convs],
        "questions": n_q,
        "dropped_evidence_ids": sum(c.dropped_evidence for c in convs),
        "budgets": budgets,
        "max_items": {"ours": Policy().retrieval.max_items, "flat": None},
        "variants": {v.name: v.policy for v in selected},
        "overrides": _parse_overrides(args.set or []),
        "embedding_seconds": emb.seconds,
        "total_seconds": time.perf_counter() - started,
        "summary": summary,
        "by_category": by_category,
        "stats": {name: s.get("stats", {}) for name, s in systems.items()},
        "seconds": {name: s["seconds"] for name, s in systems.items()},
        "table": table,
    }
    out = Path(args.out) if getattr(args, "out", None) else RESULTS
    write_json(args.name, payload, out)
    plot(summary, budgets, out / f"{args.name}.png", "LoCoMo dev", "evidence recall")
    status(f"quality: done in {payload['total_seconds']:.0f} s")
    return payload


def _parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """--set fusion.vector=0.7 --set retrieval.noise_floor=0.1 -> {"fusion": {...}}."""
    import json

    out: dict[str, Any] = {}
    for item in items:
        key, _, raw = item.partition("=")
        section, _, name = key.partition(".")
        if not name or not raw:
            raise SystemExit(f"--set wants section.field=value, got {item!r}")
        out.setdefault(section, {})[name] = json.loads(raw)
    return out


def render(systems: dict[str, dict[str, Any]], budgets: Sequence[int]) -> str:
    rows = []
    for name, s in systems.items():
        rows.append(
            [name] + [f"{_mean(s['scores'][b]):.3f}" for b in budgets] + [f"{s['seconds']:.0f}"]
        )
    return markdown_table(["system", *[f"{b} tokens" for b in budgets], "seconds"], rows)


def plot(
    summary: dict[str, dict[str, float]],
    budgets: Sequence[int],
    path: Path,
    title: str,
    ylabel: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    for name, per in summary.items():
        style = "o-" if name.startswith("ours") else ("s--" if name.startswith("flat") else ".:")
        ax.plot(budgets, [per[str(b)] for b in budgets], style, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(budgets), [str(b) for b in budgets])
    ax.set_xlabel("budget (cl100k tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}: {ylabel} inside the injected context")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


DATASETS = ("locomo", "longmemeval")


def add_arguments(parser: argparse.ArgumentParser, *, with_out: bool = True) -> None:
    from .longmemeval import DEFAULT_DATA as LONGMEMEVAL_DATA

    parser.add_argument(
        "--datasets", default=",".join(DATASETS), help="comma-separated: locomo,longmemeval"
    )
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="folder of LoCoMo *.json")
    parser.add_argument(
        "--longmemeval", default=str(LONGMEMEVAL_DATA), help="LongMemEval_S JSON file"
    )
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument(
        "--max-items",
        type=int,
        default=None,
        help="also run a labelled variant of ours capped at N items (ours runs the "
        "Policy default; flat baselines have no cap)",
    )
    parser.add_argument("--conversations", default="", help="comma-separated ids (file stems)")
    parser.add_argument(
        "--questions", type=int, default=0, help="LongMemEval: first N questions, types interleaved"
    )
    parser.add_argument(
        "--variants", default="", help="';'-separated names of our variants to run (default all)"
    )
    parser.add_argument(
        "--set",
        action="append",
        help="policy override for every variant of ours, e.g. fusion.vector=0.7 (repeatable; "
        "written into the variants' names)",
    )
    parser.add_argument(
        "--model", default=None, help="sentence-transformers folder (default: the shipped MiniLM)"
    )
    parser.add_argument("--workers", type=int, default=2, help="processes for our variants")
    parser.add_argument(
        "--name", default="quality", help="stem of the JSON/PNG in the output folder"
    )
    if with_out:
        parser.add_argument("--out", default=str(RESULTS), help="folder for JSON and PNG")


def run_datasets(args: argparse.Namespace) -> None:
    """`python -m benchmarks quality`: LoCoMo, then LongMemEval_S, sharing one embedder
    (and its disk cache)."""
    from . import longmemeval

    chosen = [d for d in args.datasets.split(",") if d]
    unknown = set(chosen) - set(DATASETS)
    if unknown:
        raise SystemExit(f"unknown datasets {sorted(unknown)}; known: {list(DATASETS)}")
    emb = open_embedder(args)
    if "locomo" in chosen:
        run(args, emb)
    if "longmemeval" in chosen:
        longmemeval.run(args, emb)
