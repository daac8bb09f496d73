"""Retrieval quality on LoCoMo: evidence recall inside token budgets.

For every question (category 5 excluded), the share of its evidence turns found in
the context injected under a budget of 250/500/1000/2000 cl100k tokens, counted by
the core's TiktokenCounter on the rendered lines ("- text"). Every system is fed the
same all-MiniLM-L6-v2 vectors (each turn and question embedded once per run).

Systems:
- flat vector: all turns ranked by cosine; flat BM25: Okapi BM25 (k1 1.2, b 0.75);
  flat hybrid: the union of the vector and BM25 top-N, min-max normalised and fused
  with ours' default weights (0.6 : 0.3), i.e. our relevance without the memory
  machinery (no decay, use, tiers, graph or deduplication).
- ours, static: every session added at its time (dedup and auto-linking on), the
  questions asked after the last session.
- ours, replay: turns added in order with the clock at their session's time; before
  each turn the agent recalls for it (default budget and items, uses recorded, as
  auto-injection would); the sweep runs between sessions; questions at the end.
- ablations of the replay: no decay (no retention term in the score), no tiers (no
  sweep: everything stays HOT), no graph (no links, no expansion), no dedup.

Every system packs whole lines best-first into the budget, at most `--max-items`.

    python -m benchmarks quality --data ../shared/bench-data/locomo-dev
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory import AsyncTieredMemory, ManualClock
from tiered_memory.engine import MemoryInput
from tiered_memory.policy import Policy
from tiered_memory.tokens import TiktokenCounter

from .common import RESULTS, markdown_table, status, write_json
from .locomo import Conversation, Turn, load

BUDGETS = (250, 500, 1000, 2000)
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "bench-data" / "locomo-dev"
_WORD = re.compile(r"\w+")
TURN_GAP = timedelta(seconds=30)  # turns of one session, in order
Vec = npt.NDArray[np.float32]


# -- embeddings, once per run ---------------------------------------------------------------


class CachedEmbedder:
    """all-MiniLM-L6-v2 through the core's SentenceTransformerEmbedder (offline), with
    every text embedded once per run; the engines get it for what they embed themselves
    (consolidation summaries, archive summaries)."""

    def __init__(self, model: str | None = None) -> None:
        from tiered_memory.embeddings import SentenceTransformerEmbedder

        self.inner = SentenceTransformerEmbedder(model)
        self.cache: dict[str, Vec] = {}
        self.seconds = 0.0

    def warm(self, texts: Sequence[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            start = time.perf_counter()
            matrix = self.inner._encode(missing)
            self.seconds += time.perf_counter() - start
            for text, row in zip(missing, matrix, strict=True):
                self.cache[text] = np.asarray(row, dtype=np.float32)

    def get(self, text: str) -> Vec:
        if text not in self.cache:
            self.warm([text])
        return self.cache[text]

    async def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.warm(texts)
        return np.stack([self.cache[t] for t in texts])

    async def embed_query(self, text: str) -> Vec:
        return self.get(text)


# -- packing, the same for every system --------------------------------------------------


def line(text: str) -> str:
    return "- " + " ".join(text.split())


def pack_ranked(
    texts: Sequence[str],
    ranked: Sequence[int],
    budget: int,
    max_items: int,
    count: Callable[[str], int],
) -> list[int]:
    """Whole lines best-first while they fit (a line too long is skipped), like the
    core's packer with a single share; then never over budget once joined."""
    chosen: list[int] = []
    used = 0
    for i in ranked:
        if len(chosen) >= max_items:
            break
        cost = count(line(texts[i]))
        if cost == 0 or used + cost > budget:
            continue
        chosen.append(i)
        used += cost
    while chosen and count("\n".join(line(texts[i]) for i in chosen)) > budget:
        chosen.pop()
    return chosen


# -- flat baselines ----------------------------------------------------------------------


class BM25:
    """Okapi BM25 over lower-cased word tokens."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(_WORD.findall(t.lower())) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(self.docs):
            for t, c in d.items():
                self.postings.setdefault(t, []).append((i, c))

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        out = np.zeros(len(self.docs))
        for term in set(_WORD.findall(query.lower())):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i, c in self.postings[term]:
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                out[i] += idf * c * (self.k1 + 1) / (c + norm)
        return out


def _min_max(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-12:
        return np.where(values > 0, 1.0, 0.0)
    return (values - lo) / (hi - lo)


def flat_rankings(
    conv: Conversation, emb: CachedEmbedder, candidates: int
) -> dict[str, list[list[int]]]:
    """For each flat system, each question's ranking of the conversation's turns."""
    texts = [t.content for t in conv.turns]
    matrix = np.stack([emb.get(t) for t in texts])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    bm25 = BM25(texts)
    p = Policy().fusion
    out: dict[str, list[list[int]]] = {"flat vector": [], "flat BM25": [], "flat hybrid": []}
    for q in conv.questions:
        qv = emb.get(q.text)
        cos = matrix @ (qv / np.linalg.norm(qv))
        lex = bm25.scores(q.text)
        by_cos = np.argsort(-cos, kind="stable")
        by_lex = [int(i) for i in np.argsort(-lex, kind="stable") if lex[i] > 0]
        out["flat vector"].append([int(i) for i in by_cos])
        out["flat BM25"].append(by_lex)
        pool = sorted(set(by_cos[:candidates].tolist()) | set(by_lex[:candidates]))
        idx = np.array(pool)
        lex_pool = lex[idx]
        nv = _min_max(cos[idx].astype(np.float64))
        nl = np.where(lex_pool > 0, _min_max(np.where(lex_pool > 0, lex_pool, np.nan)), 0.0)
        nl = np.nan_to_num(nl)
        rel = (p.vector * nv + p.keyword * nl) / (p.vector + p.keyword)
        out["flat hybrid"].append([pool[i] for i in np.argsort(-rel, kind="stable")])
    return out


# -- ours ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    protocol: str  # "static" or "replay"
    policy: dict[str, Any] = field(default_factory=dict)  # section -> overrides
    dedup: bool = True
    link: bool = True
    sweep: bool = True


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
        "replay: any hit claims its share", "replay", {"budget": {"reserve_min_relevance": 0.0}}
    ),
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
    max_items: int,
    extra: dict[str, Any],
) -> OursResult:
    policy = build_policy(_merge_overrides(variant.policy, extra))
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
                            max_items=max_items,
                            record_use=False,
                            query_embedding=qv,
                        )
                        found: set[str] = set()
                        for h in inj.items:
                            found.add(h.memory.id)
                            found.update(h.memory.consolidated_from)
                        hit = len(wanted & found) / len(wanted)
                        scores[b].append(hit)
        finally:
            await mem.close()
    return OursResult(scores, categories, time.perf_counter() - start, dict(stats))


# -- the run ----------------------------------------------------------------------------


def _variant_job(
    folder: str,
    ids: list[str],
    cache: dict[str, Vec],
    variant: Variant,
    budgets: Sequence[int],
    max_items: int,
    extra: dict[str, Any],
    embedder: CachedEmbedder | None = None,
) -> OursResult:
    """One variant over the conversations (in a worker process, or inline)."""
    wanted = set(ids)
    convs = [c for c in load(Path(folder)) if c.id in wanted]
    emb = embedder
    if emb is None:
        emb = CachedEmbedder()
        emb.cache.update(cache)
    return asyncio.run(run_ours(convs, emb, variant, budgets, max_items, extra))


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
    max_items: int,
    count: Callable[[str], int],
) -> dict[int, list[float]]:
    texts = [t.content for t in conv.turns]
    index_of = {t.dia_id: i for i, t in enumerate(conv.turns)}
    out: dict[int, list[float]] = {b: [] for b in budgets}
    for q, ranked in zip(conv.questions, rankings, strict=True):
        wanted = {index_of[d] for d in q.evidence}
        for b in budgets:
            chosen = set(pack_ranked(texts, ranked, b, max_items, count))
            out[b].append(len(wanted & chosen) / len(wanted))
    return out


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
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

    emb = CachedEmbedder(args.model)
    emb.warm(
        [t.content for c in convs for t in c.turns] + [q.text for c in convs for q in c.questions]
    )
    status(f"quality: embedded {len(emb.cache):,} texts in {emb.seconds:.0f} s")

    systems: dict[str, dict[str, Any]] = {}
    candidates = max(Policy().retrieval.candidates, args.max_items)
    flat_scores: dict[str, dict[int, list[float]]] = {}
    categories: list[int] = []
    flat_start = time.perf_counter()
    for conv in convs:
        ranks = flat_rankings(conv, emb, candidates)
        for name, rankings in ranks.items():
            per = _evidence_scores(conv, rankings, budgets, args.max_items, counter.count)
            bucket = flat_scores.setdefault(name, {b: [] for b in budgets})
            for b in budgets:
                bucket[b].extend(per[b])
        categories.extend(q.category for q in conv.questions)
    flat_seconds = time.perf_counter() - flat_start
    for name, per in flat_scores.items():
        systems[name] = {"scores": per, "categories": categories, "seconds": flat_seconds / 3}

    selected = [v for v in VARIANTS if not args.variants or v.name in args.variants.split(";")]
    extra = _parse_overrides(args.set or [])
    ids = [c.id for c in convs]
    # the long replays first, so two workers finish together
    order = sorted(selected, key=lambda v: v.protocol != "replay")
    jobs = [(str(folder), ids, emb.cache, v, budgets, args.max_items, extra) for v in order]
    results: dict[str, OursResult] = {}
    if args.workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn: a forked copy of a process that has run torch can deadlock
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
            futures = {pool.submit(_variant_job, *job): job[3].name for job in jobs}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                _report(futures[future], results[futures[future]], budgets)
    else:
        for job in jobs:
            results[job[3].name] = _variant_job(*job, embedder=emb)
            _report(job[3].name, results[job[3].name], budgets)
    for variant in selected:  # in table order
        result = results[variant.name]
        systems[variant.name] = {
            "scores": result.scores,
            "categories": result.categories,
            "seconds": result.seconds,
            "stats": result.stats,
        }

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
        "max_items": args.max_items,
        "overrides": extra,
        "embedding_seconds": emb.seconds,
        "total_seconds": time.perf_counter() - started,
        "summary": summary,
        "by_category": by_category,
        "stats": {name: s.get("stats", {}) for name, s in systems.items()},
        "seconds": {name: s["seconds"] for name, s in systems.items()},
        "table": table,
    }
    out = Path(args.out)
    write_json(args.name, payload, out)
    plot(summary, budgets, out / f"{args.name}.png")
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


def plot(summary: dict[str, dict[str, float]], budgets: Sequence[int], path: Path) -> None:
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
    ax.set_ylabel("evidence recall")
    ax.set_title("LoCoMo dev: evidence found inside the injected context")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser, *, with_out: bool = True) -> None:
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="folder of LoCoMo *.json")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--max-items", type=int, default=100, help="items per context, all systems")
    parser.add_argument("--conversations", default="", help="comma-separated ids (file stems)")
    parser.add_argument(
        "--variants", default="", help="';'-separated names of our variants to run (default all)"
    )
    parser.add_argument(
        "--set",
        action="append",
        help="policy override for every variant of ours, e.g. fusion.vector=0.7 (repeatable)",
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
