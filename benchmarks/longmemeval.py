"""Retrieval quality on LongMemEval_S: answer sessions and evidence turns inside budgets.

The protocol of the data folder's README: one store and namespace per question; the
haystack's sessions replayed in date order (some haystacks are not sorted), the clock
at each session's date; every **user** turn one memory (metadata: session id, turn
index; explicit id `q<question>-s<session>-t<turn>`, the session numbered in haystack
order); the sweep whenever the date changes, then the clock at the question's date and
one more sweep; `recall(question, budget_tokens=B, record_use=False)` with the shipped
item cap for B = 250/500/1000/2000 cl100k tokens.

Metrics, over all questions (the dev subset has no abstention questions):
- session recall_all: 1 when every answer session has at least one of its user turns
  in the context; recall_any: when at least one has;
- turn-level evidence recall: the share of the `has_answer` user turns in the
  context. Questions whose evidence is only in assistant turns (which are not
  memories) are left out of it, and counted.

The flat baselines (`flat.py`) rank the same user turns with the same vectors and pack
them into the same budget with no item cap. The variants of ours are those of the
LoCoMo replay that apply here (`quality.VARIANTS`; no agent recalls between turns, so
nothing records use before the questions).

    python -m benchmarks quality --datasets longmemeval --longmemeval longmemeval_s_dev.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from tiered_memory import AsyncTieredMemory, ManualClock
from tiered_memory.engine import MemoryInput
from tiered_memory.policy import Policy
from tiered_memory.tokens import TiktokenCounter

from .common import RESULTS, markdown_table, status, write_json
from .flat import FLAT_SYSTEMS, pack_ranked, rank_flat
from .quality import (
    FLAT_POOL,
    SCRATCH,
    VARIANTS,
    CachedEmbedder,
    Variant,
    build_policy,
    injected_ids,
    open_embedder,
    plot,
    run_jobs,
    select_variants,
    worker_embedder,
)

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "bench-data"
    / "longmemeval-dev"
    / "longmemeval_s_dev.json"
)
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
METRICS = {
    "recall_all": "session recall_all",
    "recall_any": "session recall_any",
    "turn_recall": "turn-level evidence recall",
}
# the LoCoMo replay's ablations that mean something without agent recalls in between
DEFAULT_VARIANTS = (
    "ours (replay)",
    "replay: no decay",
    "replay: no tiers",
    "replay: no graph",
    "replay: no dedup",
    "replay: no context phase",
    "replay: no query cues",
    "replay: no update rule",
)


# -- the data --------------------------------------------------------------------------


def parse_date(text: str) -> datetime:
    """'2023/05/30 (Tue) 22:10' -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M").replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class UserTurn:
    id: str  # the memory's explicit id
    session_id: str
    turn: int  # index in the session, assistant turns counted
    content: str
    has_answer: bool


@dataclass
class Session:
    index: int  # in haystack order
    id: str
    when: datetime
    turns: list[UserTurn]


@dataclass
class Item:
    id: str
    type: str
    question: str
    date: datetime
    answer_sessions: frozenset[str]
    sessions: list[Session]  # in date order
    turns: list[UserTurn] = field(default_factory=list)
    truncated: int = 0  # user turns cut to the store's content limit

    @property
    def evidence(self) -> set[str]:
        return {t.id for t in self.turns if t.has_answer}

    @property
    def last_session(self) -> datetime:
        return self.sessions[-1].when


def load_item(raw: dict[str, Any]) -> Item:
    """One question. A user turn longer than the store accepts (one of 14,798 in the dev
    subset, 41,855 characters) is cut to `limits.max_content_chars` for every system:
    thousands of tokens either way, it never fits a budget."""
    qid = str(raw["question_id"])
    limit = Policy().limits.max_content_chars
    sessions = []
    truncated = 0
    for index, (sid, date, turns) in enumerate(
        zip(
            raw["haystack_session_ids"],
            raw["haystack_dates"],
            raw["haystack_sessions"],
            strict=True,
        )
    ):
        users = [
            UserTurn(
                f"q{qid}-s{index:03d}-t{n:03d}",
                str(sid),
                n,
                str(t["content"])[:limit],
                bool(t.get("has_answer", False)),
            )
            for n, t in enumerate(turns)
            if t["role"] == "user" and str(t["content"]).strip()
        ]
        truncated += sum(1 for t in turns if t["role"] == "user" and len(t["content"]) > limit)
        sessions.append(Session(index, str(sid), parse_date(date), users))
    sessions.sort(key=lambda s: (s.when, s.index))
    return Item(
        qid,
        str(raw["question_type"]),
        str(raw["question"]),
        parse_date(raw["question_date"]),
        frozenset(str(s) for s in raw["answer_session_ids"]),
        sessions,
        [t for s in sessions for t in s.turns],
        truncated,
    )


def load(path: Path, limit: int = 0, ids: Sequence[str] | None = None) -> list[Item]:
    """The questions of a LongMemEval JSON file; `limit` takes the first N with the
    question types interleaved (the file is grouped by type), `ids` those questions."""
    if not path.is_file():
        raise SystemExit(f"no LongMemEval file at {path} (pass --longmemeval PATH)")
    raw = json.loads(path.read_text(encoding="utf-8"))
    items = [load_item(r) for r in raw if not str(r["question_id"]).endswith("_abs")]
    if ids is not None:
        by_id = {i.id: i for i in items}
        return [by_id[i] for i in ids]
    if limit:
        by_type: dict[str, list[Item]] = {}
        for item in items:
            by_type.setdefault(item.type, []).append(item)
        order = [t for t in TYPES if t in by_type] + sorted(set(by_type) - set(TYPES))
        rounds = max(len(v) for v in by_type.values())
        items = [by_type[t][r] for r in range(rounds) for t in order if r < len(by_type[t])]
        items = items[:limit]
    return items


# -- scoring ---------------------------------------------------------------------------


Score = dict[str, float | None]  # metric -> value; turn_recall None without evidence turns


def score(item: Item, injected: set[str]) -> Score:
    """The three metrics of one question, given the ids of the user turns injected."""
    sessions = {t.session_id for t in item.turns if t.id in injected}
    evidence = item.evidence
    return {
        "recall_all": float(item.answer_sessions <= sessions),
        "recall_any": float(bool(item.answer_sessions & sessions)),
        "turn_recall": len(evidence & injected) / len(evidence) if evidence else None,
    }


@dataclass
class Result:
    scores: dict[int, list[Score]]  # budget -> per question, in item order
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)


def flat_results(
    items: Sequence[Item], emb: CachedEmbedder, budgets: Sequence[int]
) -> dict[str, Result]:
    count = TiktokenCounter().count
    out = {name: Result({b: [] for b in budgets}, 0.0) for name in FLAT_SYSTEMS}
    start = time.perf_counter()
    for item in items:
        texts = [t.content for t in item.turns]
        ranks = rank_flat(
            texts,
            [emb.get(t) for t in texts],
            [(item.question, emb.get(item.question))],
            FLAT_POOL,
        )
        for name, (ranked,) in ranks.items():
            for b in budgets:
                chosen = pack_ranked(texts, ranked, b, count)
                out[name].scores[b].append(score(item, {item.turns[i].id for i in chosen}))
    for result in out.values():
        result.seconds = (time.perf_counter() - start) / len(out)
    return out


# -- ours ------------------------------------------------------------------------------


async def replay(
    item: Item, emb: CachedEmbedder, variant: Variant, budgets: Sequence[int], folder: Path
) -> tuple[dict[int, Score], Counter[str]]:
    """One question in its own store: the haystack replayed, then the question asked."""
    stats: Counter[str] = Counter()
    clock = ManualClock(item.sessions[0].when)
    mem = await AsyncTieredMemory.embedded(
        folder / f"{item.id}.db", embedder=emb, clock=clock, policy=build_policy(variant.policy)
    )
    ns = f"longmemeval-{item.id}"
    memory_of: dict[str, str] = {}
    try:
        last: datetime | None = None
        for session in item.sessions:
            if session.when != last:
                clock.set(session.when)
                last = session.when
                if variant.sweep:
                    stats.update((await mem.maintain(now=session.when, namespace=ns)).moved)
            if not session.turns:
                continue
            added = await mem.add_many(
                [
                    MemoryInput(
                        id=t.id,
                        content=t.content,
                        embedding=emb.get(t.content),
                        metadata={"session_id": session.id, "turn": t.turn},
                    )
                    for t in session.turns
                ],
                namespace=ns,
                dedup=variant.dedup,
                link=variant.link,
            )
            for t, m in zip(session.turns, added, strict=True):
                memory_of[t.id] = m.id
                stats["deduplicated"] += int(m.id != t.id)
        clock.set(item.date)
        stats["asked_before_last_session"] += int(item.date < item.last_session)
        if variant.sweep:
            stats.update((await mem.maintain(now=item.date, namespace=ns)).moved)
        for tier, ts in (await mem.stats(namespace=ns)).tiers.items():
            stats[f"final_{tier.value}"] += ts.count
        qv = emb.get(item.question)
        scores: dict[int, Score] = {}
        for b in budgets:
            inj = await mem.recall(
                item.question,
                namespace=ns,
                budget_tokens=b,
                max_items=variant.max_items,  # None: the shipped cap
                record_use=False,
                query_embedding=qv,
            )
            found = injected_ids(inj)
            stats[f"injected_{b}"] += len(inj.items)
            scores[b] = score(item, {t for t, m in memory_of.items() if m in found})
    finally:
        await mem.close()
    return scores, stats


async def run_ours(
    items: Sequence[Item], emb: CachedEmbedder, variant: Variant, budgets: Sequence[int]
) -> Result:
    result = Result({b: [] for b in budgets}, 0.0)
    stats: Counter[str] = Counter()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tm-longmemeval-", dir=SCRATCH) as tmp:
        for item in items:
            scores, per = await replay(item, emb, variant, budgets, Path(tmp))
            for b in budgets:
                result.scores[b].append(scores[b])
            stats.update(per)
            (Path(tmp) / f"{item.id}.db").unlink(missing_ok=True)
    result.seconds = time.perf_counter() - start
    result.stats = dict(stats)
    return result


def _variant_job(
    path: str,
    ids: list[str],
    model: str | None,
    cache: dict[str, Any],
    variant: Variant,
    budgets: Sequence[int],
    embedder: CachedEmbedder | None = None,
) -> Result:
    """One variant over the questions (in a worker process, or inline)."""
    items = load(Path(path), ids=ids)
    emb = embedder or worker_embedder(model, cache)
    return asyncio.run(run_ours(items, emb, variant, budgets))


# -- the run ---------------------------------------------------------------------------


def _mean(values: Sequence[float | None]) -> float:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else float("nan")


def summarise(
    results: dict[str, Result], items: Sequence[Item], budgets: Sequence[int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Means per metric, system and budget; and the same per question type."""
    types = [t for t in TYPES if any(i.type == t for i in items)]
    types += sorted({i.type for i in items} - set(types))
    summary: dict[str, Any] = {m: {} for m in METRICS}
    by_type: dict[str, Any] = {m: {} for m in METRICS}
    for metric in METRICS:
        for name, r in results.items():
            summary[metric][name] = {
                str(b): _mean([s[metric] for s in r.scores[b]]) for b in budgets
            }
            by_type[metric][name] = {
                t: {
                    str(b): _mean(
                        [s[metric] for s, i in zip(r.scores[b], items, strict=True) if i.type == t]
                    )
                    for b in budgets
                }
                for t in types
            }
    return summary, by_type


def _cell(value: float) -> str:
    return "–" if value != value else f"{value:.2f}"  # NaN: no question of that type counts


def render(
    summary: dict[str, Any],
    by_type: dict[str, Any],
    results: dict[str, Result],
    budgets: Sequence[int],
    left_out: int,
) -> str:
    parts = []
    for metric, title in METRICS.items():
        note = (
            f" ({left_out} questions without evidence user turns left out)"
            if metric == "turn_recall" and left_out
            else ""
        )
        rows = [
            [name, *(f"{per[str(b)]:.3f}" for b in budgets), f"{results[name].seconds:.0f}"]
            for name, per in summary[metric].items()
        ]
        parts.append(f"#### LongMemEval_S: {title}{note}\n")
        parts.append(
            markdown_table(["system", *[f"{b} tokens" for b in budgets], "seconds"], rows) + "\n"
        )
    budget_label = " / ".join(str(b) for b in budgets)
    for metric, title in METRICS.items():
        types = list(next(iter(by_type[metric].values())))
        rows = [
            [name, *(" / ".join(_cell(per[t][str(b)]) for b in budgets) for t in types)]
            for name, per in by_type[metric].items()
        ]
        parts.append(f"#### LongMemEval_S: {title} per question type ({budget_label} tokens)\n")
        parts.append(markdown_table(["system", *types], rows) + "\n")
    return "\n".join(parts)


def run(args: argparse.Namespace, emb: CachedEmbedder | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    path = Path(args.longmemeval)
    items = load(path, limit=args.questions)
    budgets = [int(b) for b in args.budgets.split(",")]
    left_out = sum(1 for i in items if not i.evidence)
    status(
        f"longmemeval: {len(items)} questions, {sum(len(i.turns) for i in items):,} user turns "
        f"in {sum(len(i.sessions) for i in items):,} sessions; {left_out} questions without "
        "evidence user turns"
    )
    emb = emb or open_embedder(args)
    texts = [t.content for i in items for t in i.turns] + [i.question for i in items]
    before = emb.encoded
    seconds = emb.seconds
    emb.warm(texts)
    emb.save()
    status(
        f"longmemeval: embedded {emb.encoded - before:,} new texts in {emb.seconds - seconds:.0f} s"
    )

    results: dict[str, Result] = flat_results(items, emb, budgets)
    available = [v for v in VARIANTS if v.protocol == "replay"]
    requested = [n for n in args.variants.split(";") if n] or list(DEFAULT_VARIANTS)
    known = {v.name for v in available}
    if set(requested) - known:
        status(f"longmemeval: not a variant here, skipped: {sorted(set(requested) - known)}")
    names = ";".join(n for n in requested if n in known)
    selected = select_variants(available, names, args.set or [], args.max_items) if names else []
    cache = {t: emb.get(t) for t in texts}
    ids = [i.id for i in items]
    jobs = [(v.name, (str(path), ids, args.model, cache, v, budgets)) for v in selected]

    def done(name: str, r: Result) -> None:
        status(
            f"  {name}: turn recall "
            + ", ".join(
                f"{b}: {_mean([s['turn_recall'] for s in r.scores[b]]):.3f}" for b in budgets
            )
            + f" ({r.seconds:.0f} s)"
        )

    ours = run_jobs(_variant_job, jobs, args.workers, emb, done)
    results.update({v.name: ours[v.name] for v in selected})  # in table order
    emb.save()

    summary, by_type = summarise(results, items, budgets)
    table = render(summary, by_type, results, budgets, left_out)
    print(table)
    payload = {
        "data": str(path),
        "questions": len(items),
        "question_ids": [i.id for i in items],
        "user_turns": sum(len(i.turns) for i in items),
        "questions_without_evidence_turns": left_out,
        "truncated_turns": sum(i.truncated for i in items),
        "budgets": budgets,
        "variants": {v.name: v.policy for v in selected},
        "embedding_seconds": emb.seconds - seconds,
        "total_seconds": time.perf_counter() - started,
        "summary": summary,
        "by_type": by_type,
        "stats": {name: r.stats for name, r in results.items()},
        "seconds": {name: r.seconds for name, r in results.items()},
        "per_question": {
            name: [
                {"id": i.id, "type": i.type, **{str(b): r.scores[b][n] for b in budgets}}
                for n, i in enumerate(items)
            ]
            for name, r in results.items()
        },
        "table": table,
    }
    out = Path(args.out) if getattr(args, "out", None) else RESULTS
    name = f"{args.name}-longmemeval"
    write_json(name, payload, out)
    plot(
        summary["turn_recall"],
        budgets,
        out / f"{name}.png",
        "LongMemEval_S",
        "turn-level evidence recall",
    )
    status(f"longmemeval: done in {payload['total_seconds']:.0f} s")
    return payload
