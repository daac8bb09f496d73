"""Scale: add_many throughput, search/recall latency, sweep time, memory and disk.

Synthetic memories (see `synthetic`) go into the embedded store with precomputed
vectors (`embedding=`), so embedding time is excluded. The flat baselines run in the
same process on the same vectors and the same queries.

    python -m benchmarks scale --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory import AsyncTieredMemory, HashingEmbedder, ManualClock, Tier
from tiered_memory.associations import similarity_links
from tiered_memory.dedup import nearest_stored, screen
from tiered_memory.engine import MemoryInput
from tiered_memory.models import LIVE_TIERS, MemoryType
from tiered_memory.ports import SearchFilter

from . import peers
from .baselines import BruteForce, FlatIndex, LangChainFlat, LlamaIndexFlat
from .common import (
    RESULTS,
    Stopwatch,
    markdown_table,
    private_mb,
    rss_mb,
    settle_writes,
    status,
    warm_file,
    write_json,
    written_bytes,
)
from .synthetic import DIM, Corpus, make_corpus, more_memories

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SPAN = timedelta(days=120)  # creation times spread over four months
NS = "bench"
BATCH = 1000
EXTRA = 2000  # items added with dedup and linking on, into the full store
EXACT = SearchFilter(exact=True)
TYPES = [MemoryType.EPISODIC, MemoryType.FACTUAL, MemoryType.PROJECT, MemoryType.PROCEDURAL]
TYPE_P = [0.4, 0.35, 0.15, 0.1]
TARGETS = {
    "recall_p95_ms_100k": 15.0,
    "recall_vs_brute_p95": 3.0,
    "add_many_per_s": 5000.0,
    "sweep_100k_s": 2.0,
    "archived_vs_active": 0.15,
}


def _inputs(
    corpus: Corpus, rows: range, types: np.ndarray, importance: np.ndarray
) -> list[MemoryInput]:
    return [
        MemoryInput(
            content=corpus.texts[i],
            memory_type=TYPES[int(types[i])],
            importance=float(importance[i]),
            embedding=corpus.vectors[i],
        )
        for i in rows
    ]


def _disk(path: Path) -> dict[str, Any]:
    """Bytes per table (with its indexes) from SQLite's dbstat, after a checkpoint."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # payload: the bytes of the records themselves, without the free space of
        # partly filled pages (which dominates for a few hundred archive records)
        rows = conn.execute(
            "SELECT name, sum(payload) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()

        # an active record: its row, its vector (own table since schema 3), its text
        # (since schema 8) and every index over them, whatever the indexes are called
        def is_memory_object(name: str) -> bool:
            return name.startswith(
                ("memories", "memory_vectors", "memory_texts", "sqlite_autoindex_memories")
            ) and not name.startswith("memories_fts")

        # the lexical index: FTS5 before schema 4, the per-namespace lexicon since
        lexical = ("memories_fts", "lexicon_", "sqlite_autoindex_lexicon_")
        fts = sum(int(b) for name, b in rows if str(name).startswith(lexical))
        return {
            "file_bytes": path.stat().st_size,
            "by_object": {str(name): int(b) for name, b in rows},
            "memories_bytes": sum(int(b) for name, b in rows if is_memory_object(str(name))),
            "fts_bytes": fts,
            "archives_bytes": sum(
                int(b)
                for name, b in rows
                if str(name).startswith(("archives", "sqlite_autoindex_archives"))
            ),
            "links_bytes": sum(int(b) for name, b in rows if str(name).startswith("links")),
        }
    finally:
        conn.close()


def _types_and_importance(
    rng: np.random.Generator, size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Each memory's type (by `TYPE_P`) and importance, drawn in that order from `rng`:
    the bulk load's and the sustained stream's memories are made alike."""
    types = rng.choice(len(TYPES), size=size, p=TYPE_P)
    return types, rng.uniform(0.31, 1.0, size=size)


async def _ours(n: int, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    types, importance = _types_and_importance(rng, n + EXTRA)
    # A few old, unimportant memories: the sweep archives these (low salience, aged out).
    old = np.arange(0, max(1, n // 4))
    archivable = rng.choice(old, size=min(args.archive, len(old)), replace=False)
    importance[archivable] = 0.1

    out: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(prefix="tm-bench-") as tmp:
        path = Path(tmp) / "scale.db"
        clock = ManualClock(T0)
        rss0, private0 = rss_mb(), private_mb()
        mem = await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(DIM), clock=clock)
        try:
            # -- bulk load: dedup and linking off ------------------------------------------
            load = Stopwatch()
            row_of: dict[str, int] = {}  # memory id -> corpus row, to score recall@10
            batches = range(0, n, BATCH)
            for b, start in enumerate(batches):
                clock.set(T0 + SPAN * (b / max(1, len(batches))))
                items = _inputs(corpus, range(start, min(n, start + BATCH)), types, importance)
                with load.time():
                    added = await mem.add_many(items, namespace=NS, dedup=False, link=False)
                row_of.update((m.id, start + j) for j, m in enumerate(added))
                if b % 100 == 99:
                    status(f"  loaded {start + BATCH:,} ({(start + BATCH) / load.total:,.0f}/s)")
            end = T0 + SPAN
            clock.set(end)
            out["add_off_per_s"] = n / load.total

            # The first search after opening loads the vector cache from SQLite (once per
            # process and store); timed on its own, so it is not charged to the adds.
            q_vectors, q_texts = corpus.queries(np.random.default_rng(5), _queries(args) + 5)
            start = time.perf_counter()
            await mem.search(q_texts[0], namespace=NS, k=10, query_embedding=q_vectors[0])
            out["first_search_s"] = time.perf_counter() - start
            # The HNSW graph is built in the background after that first answer (the
            # searches meanwhile scan what is not in it yet); timed apart, and waited
            # for, so the latencies below are the steady state's.
            settle = getattr(mem.store, "settle_vector_index", None)
            if settle is not None:
                await settle(NS)
                out["index_build_s"] = time.perf_counter() - start
            # Timings from here on are of a cached file (`common.warm_file`: this VM pages
            # out file pages idle for a minute, and the build left them idle for minutes)
            out["warm_file_s"] = warm_file(path)
            # the vector search alone, on exactly the n vectors the peers hold
            out.update(await _vector_search(mem, q_vectors, row_of))

            # how often the adds' approximate dedup and link decisions are the exact ones
            out.update(await _dedup_link_agreement(mem, corpus, n, row_of, args.on_batch))
            status(
                f"  ours: dedup / link decisions equal to exact: {out['dedup_agreement']:.4f}"
                f" / {out['link_agreement']:.4f} (of {out['agreement_sample']})"
            )

            # -- dedup + autolink on, into the full store -----------------------------------
            on, kib = await _timed_adds(
                mem, corpus, range(n, n + EXTRA), types, importance, args.on_batch
            )
            out["add_on_per_s"] = EXTRA / on.total
            # includes what the checkpoints copy back, and any index save meanwhile
            out["add_on_written_kb_per_memory"] = kib
            out["add_on_batch"] = args.on_batch
            total = n + EXTRA

            # -- latency ---------------------------------------------------------------------
            warm_file(path)
            search, recall = Stopwatch(), Stopwatch()
            for i in range(len(q_texts)):
                watch = search if i >= 5 else Stopwatch()  # 5 warm-up calls
                with watch.time():
                    await mem.search(q_texts[i], namespace=NS, k=10, query_embedding=q_vectors[i])
            for i in range(len(q_texts)):
                watch = recall if i >= 5 else Stopwatch()
                with watch.time():
                    await mem.recall(
                        q_texts[i], namespace=NS, budget_tokens=1000, query_embedding=q_vectors[i]
                    )
            out["rss_mb"] = rss_mb() - rss0  # the vector cache is loaded by now
            out["private_mb"] = private_mb() - private0  # without the file's mapped pages
            out["search_p50_ms"], out["search_p95_ms"] = search.p(50), search.p(95)
            out["recall_p50_ms"], out["recall_p95_ms"] = recall.p(50), recall.p(95)
            status(
                f"  ours: search p50 {search.p(50):.1f} ms, recall p50 {recall.p(50):.1f} / "
                f"p95 {recall.p(95):.1f} ms"
            )
            out["vector_recall_at_10"] = await _recall_at_10(mem, q_vectors)
            # Open-to-first-answer: close (which saves the HNSW index) and open again.
            await mem.close()
            start = time.perf_counter()
            mem = await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(DIM), clock=clock)
            out["open_s"] = time.perf_counter() - start
            await mem.search(q_texts[1], namespace=NS, k=10, query_embedding=q_vectors[1])
            out["open_first_answer_s"] = time.perf_counter() - start
            status(
                f"  ours: vector recall@10 {out['vector_recall_at_10']:.3f}, open to first "
                f"answer {out['open_first_answer_s']:.2f} s"
            )

            active = await mem.stats(namespace=NS)
            disk_active = _disk(path)
            out["disk_bytes_per_memory"] = disk_active["file_bytes"] / total
            if args.sweep_max is not None and n > args.sweep_max:
                # to save the time of a run; the sweep itself is linear in the store
                # (consolidation compares each fading memory with a bounded neighbourhood)
                status(f"  sweep skipped above --sweep-max {args.sweep_max:,}")
                return out

            # -- sweeps ----------------------------------------------------------------------
            clock.set(end + timedelta(hours=1))
            warm_file(path)  # a sweep of a cached file, as the latencies
            out["settle_writes_s"] = settle_writes()  # the index saved on close, written out
            report = await mem.maintain()
            out["sweep_due_s"] = report.duration_seconds
            out["sweep_due_moves"] = dict(report.moved)
            out["sweep_due_report"] = report.model_dump(mode="json")
            report2 = await mem.maintain()
            out["sweep_idle_s"] = report2.duration_seconds
            out["sweep_idle_report"] = report2.model_dump(mode="json")
            status(
                f"  sweep with transitions {report.duration_seconds:.2f} s, "
                f"idle {report2.duration_seconds:.2f} s"
            )

            # -- latency once the sweep has spread the memories over the tiers ---------------
            warm_file(path)
            steady = Stopwatch()
            for i in range(len(q_texts)):
                watch = steady if i >= 5 else Stopwatch()
                with watch.time():
                    await mem.recall(
                        q_texts[i], namespace=NS, budget_tokens=1000, query_embedding=q_vectors[i]
                    )
            out["recall_tiered_p50_ms"], out["recall_tiered_p95_ms"] = steady.p(50), steady.p(95)

            # -- bytes per tier ---------------------------------------------------------------
            stats = await mem.stats(namespace=NS)
            disk = _disk(path)
            per_tier = {}
            for tier in Tier:
                ts = stats.tiers[tier]
                per_tier[tier.value] = {
                    "count": ts.count,
                    "bytes_per_record": ts.bytes / ts.count if ts.count else None,
                }
            out["tiers"] = per_tier
            live = sum(stats.tiers[t].count for t in (Tier.HOT, Tier.WARM, Tier.COLD))
            archived = stats.tiers[Tier.ARCHIVED].count
            out["disk"] = disk
            out["disk_active"] = disk_active
            # On-disk bytes of a record: its table rows plus its indexes (FTS included
            # for live memories, which are word-indexed; archive summaries are not).
            out["active_record_disk_bytes"] = (
                (disk["memories_bytes"] + disk["fts_bytes"]) / live if live else None
            )
            out["archived_record_disk_bytes"] = (
                disk["archives_bytes"] / archived if archived else None
            )
            live_logical = sum(stats.tiers[t].bytes for t in (Tier.HOT, Tier.WARM, Tier.COLD))
            out["active_record_logical_bytes"] = live_logical / live if live else None
            out["archived_record_logical_bytes"] = (
                stats.tiers[Tier.ARCHIVED].bytes / archived if archived else None
            )
            originals = list((Path(tmp) / "scale.db.archive").rglob("*.json"))
            out["archived_original_bytes"] = (
                sum(p.stat().st_size for p in originals) / len(originals) if originals else None
            )
            out["active_stats_before_sweep"] = {t.value: active.tiers[t].count for t in Tier}

            # -- add_many over a stream long enough for a write stream's periodic work ------
            if args.sustained > 0:
                out.update(await _sustained_adds(mem, corpus, args.sustained, args.on_batch))
                status(
                    f"  ours: add_many sustained over {args.sustained:,}: "
                    f"{out['add_sustained_per_s']:,.0f}/s, slowest batch "
                    f"{out['add_sustained_slowest_batch_s']:.2f} s, "
                    f"{out['add_sustained_cpu_ms_per_memory']:.2f} ms of CPU a memory "
                    f"(ceiling {out['add_sustained_cpu_ceiling_per_s']:,.0f}/s "
                    f"on {out['cores']} cores)"
                )
        finally:
            await mem.close()
    return out


async def _sustained_adds(
    mem: AsyncTieredMemory, corpus: Corpus, count: int, batch: int
) -> dict[str, Any]:
    """`add_many` with dedup and links over `count` new memories (`more_memories`), in
    batches of `batch`, into the store as the run left it (swept).

    Why: the 2,000 adds timed after the bulk load are four batches, too few to hold the
    periodic work of a stream of writes: a drain of the lexicon's middle tree (every
    ~47k memories), a fold of new rows into the HNSW graph (every 10k), checkpoints.
    Whether one fell in that window decided the rate (2,935/s at 100k with none, 1,095/s
    with a drain), while an import pays all of them. Last in the run, so the store every
    other number was measured on is the same."""
    more = more_memories(corpus, count)
    types, importance = _types_and_importance(np.random.default_rng(12), count)
    cpu = time.process_time()
    watch, kib = await _timed_adds(mem, more, range(count), types, importance, batch)
    # The CPU the stream cost, every thread of the process: the rows it left in the
    # HNSW buffer are folded (in the background, as always) before the clock stops,
    # since an import pays for their inserts too. Outside the wall time above.
    settle = getattr(mem.store, "settle_vector_index", None)
    if settle is not None:
        await settle(NS)
    cpu_per_memory = (time.process_time() - cpu) / count
    return {
        "sustained_adds": count,
        "add_sustained_per_s": count / watch.total,
        "add_sustained_written_kb_per_memory": kib,
        "add_sustained_slowest_batch_s": max(watch.samples),
        "add_sustained_cpu_ms_per_memory": cpu_per_memory * 1e3,
        "add_sustained_cpu_ceiling_per_s": cpu_ceiling(cpu_per_memory),
        "cores": usable_cores(),
    }


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system says it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def cpu_ceiling(cpu_seconds_per_memory: float) -> float:
    """The adds a second this machine could reach if every core did nothing but this
    work: the bound a rate is read against. On 2 cores, 1 ms of CPU a memory caps a
    stream at 2,000/s however the work is spread over threads."""
    if cpu_seconds_per_memory <= 0:
        return float("nan")
    return usable_cores() / cpu_seconds_per_memory


async def _timed_adds(
    mem: AsyncTieredMemory,
    corpus: Corpus,
    rows: range,
    types: np.ndarray,
    importance: np.ndarray,
    batch: int,
) -> tuple[Stopwatch, float]:
    """`add_many` with dedup and links over the corpus rows `rows`, in batches of
    `batch`, each call timed; with the KiB the process wrote a memory meanwhile."""
    watch = Stopwatch()
    written = written_bytes()
    for start in range(rows.start, rows.stop, batch):
        items = _inputs(corpus, range(start, min(rows.stop, start + batch)), types, importance)
        with watch.time():
            await mem.add_many(items, namespace=NS, dedup=True, link=True)
    return watch, (written_bytes() - written) / len(rows) / 1024


async def _dedup_link_agreement(
    mem: AsyncTieredMemory, corpus: Corpus, n: int, row_of: dict[str, int], batch: int
) -> dict[str, Any]:
    """The share of the first batch of the adds below whose dedup decision, and whose
    set of auto-links, equal those from the exact neighbours (a scan of the n stored
    vectors): the batch search is approximate through the HNSW index, and this says how
    often its decisions are the exact ones (a duplicate's always is; a link set differs
    where the graph's float16 rounding chose between two memories about as near:
    `VectorTable._graph_ranked`). Read-only (nothing is added)."""
    ap, limits = mem.policy.associations, mem.policy.limits
    k = ap.autolink_top_k
    rows = range(n, min(n + EXTRA, n + batch))
    vectors = [corpus.vectors[i] for i in rows]
    approx = await nearest_stored(
        mem.store,
        NS,
        vectors,
        k,
        far=ap.autolink_min_similarity,
        duplicate_at=limits.dedup_similarity,
    )
    id_of = [""] * n
    for memory_id, row in row_of.items():
        id_of[row] = memory_id
    queries = np.stack(vectors).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    best_rows = np.zeros((len(rows), 0), dtype=np.int64)
    best_scores = np.zeros((len(rows), 0), dtype=np.float32)
    for start in range(0, n, 100_000):  # blocks: no normalised copy of a 1M matrix
        block = corpus.vectors[start : min(n, start + 100_000)].astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        sims = queries @ block.T
        top = np.argpartition(-sims, k, axis=1)[:, : k + 1]
        best_rows = np.concatenate([best_rows, top + start], axis=1)
        best_scores = np.concatenate([best_scores, np.take_along_axis(sims, top, 1)], axis=1)
    exact = [
        sorted(
            ((id_of[j], float(v)) for j, v in zip(r, sc, strict=True)), key=lambda t: (-t[1], t[0])
        )[:k]
        for r, sc in zip(best_rows.tolist(), best_scores.tolist(), strict=True)
    ]
    ids = [f"sample-{i}" for i in rows]
    decided = []
    for stored in (approx, exact):
        screened = screen(ids, vectors, stored, k=k, threshold=limits.dedup_similarity)
        decided.append(
            [
                (
                    s.duplicate_of,
                    {link.target for link in similarity_links(i, s.near, ap, T0)}
                    if s.duplicate_of is None
                    else None,
                )
                for i, s in zip(ids, screened, strict=True)
            ]
        )
    pairs = list(zip(*decided, strict=True))
    return {
        "dedup_agreement": sum(a[0] == b[0] for a, b in pairs) / len(pairs),
        "link_agreement": sum(a[1] == b[1] for a, b in pairs) / len(pairs),
        "agreement_sample": len(pairs),
    }


async def _recall_at_10(mem: AsyncTieredMemory, queries: npt.NDArray[np.float32]) -> float:
    """Share of the exact top 10 (a scan: `SearchFilter(exact=True)`) that our vector
    search returns, over the live tiers; 1.0 below the HNSW threshold."""
    hits = total = 0
    for q in queries[:50]:
        got = await mem.store.vector_search(NS, q, tiers=LIVE_TIERS, k=10)
        want = await mem.store.vector_search(NS, q, tiers=LIVE_TIERS, k=10, filters=EXACT)
        hits += len({s.memory.id for s in got} & {s.memory.id for s in want})
        total += len(want)
    return hits / total if total else 1.0


async def _vector_search(
    mem: AsyncTieredMemory, q_vectors: np.ndarray, row_of: dict[str, int]
) -> dict[str, Any]:
    """Our store's vector search on its own (no lexical search, ranking or packing):
    the peers' operation, and what `peers.fixed_cost_ms` subtracts from a recall.

    Timed as a recall asks for it (`exact_scores=False`: the index's cosines, within
    1.5e-3 of the exact ones, and no float32 vector read), since it is the recall's
    vector search that the fixed cost is the rest of; then, as a labelled variant, with
    exact scores (`vector_search`'s default: the candidates' float32 vectors read and
    re-scored). The exact loop runs second, on pages the first one warmed."""
    out: dict[str, Any] = {}
    for key, exact in (("vector_search", False), ("vector_search_exact", True)):
        watch, found = Stopwatch(), []
        for i, q in enumerate(q_vectors):
            timed = watch if i >= peers.WARMUP else Stopwatch()
            with timed.time():
                hits = await mem.store.vector_search(
                    NS, q, tiers=LIVE_TIERS, k=10, exact_scores=exact
                )
            if i >= peers.WARMUP:
                found.append([row_of[h.memory.id] for h in hits])
        out[f"{key}_p50_ms"], out[f"{key}_p95_ms"] = watch.p(50), watch.p(95)
        out[f"{key}_found"] = found
    return out


def _queries(args: argparse.Namespace) -> int:
    """Timed queries of ours, numpy and the peers: all of `--queries` at every size.
    (Above `--framework-max` they were capped at 40, a cap meant for systems taking a
    second a query: the framework stores, which take `slow_queries` and stop at that
    size. Over 40 queries a p95 is about the second-worst, and the 1M recall p95 moved
    by several ms between runs of the same code.)"""
    return int(args.queries)


def _baseline(
    make: type[FlatIndex] | Any, n: int, corpus: Corpus, queries: int, k: int = 10
) -> dict[str, Any]:
    rss0 = rss_mb()
    index = make(DIM, n) if make is BruteForce else make()
    ids = [f"m{i}" for i in range(n)]
    start = time.perf_counter()
    for s in range(0, n, BATCH):
        e = min(n, s + BATCH)
        index.add(ids[s:e], list(corpus.texts[s:e]), corpus.vectors[s:e])
    add_s = time.perf_counter() - start
    rss = rss_mb() - rss0
    q_vectors, _ = corpus.queries(np.random.default_rng(5), queries + 2)
    watch = Stopwatch()
    for i, q in enumerate(q_vectors):
        if i < 2:
            index.search(q, k)
            continue
        with watch.time():
            index.search(q, k)
    result = {
        "name": index.name,
        "add_per_s": n / add_s,
        "search_p50_ms": watch.p(50),
        "search_p95_ms": watch.p(95),
        "rss_mb": rss,
        "queries": queries,
    }
    del index
    gc.collect()
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    peers.parse_peers(args.peers)  # a misspelt peer fails now, not after the first N
    results: list[dict[str, Any]] = []
    for n in sizes:
        status(f"scale: N = {n:,}: building the corpus")
        corpus = make_corpus(n + EXTRA)
        status(f"scale: N = {n:,}: ours")
        ours = asyncio.run(_ours(n, corpus, args))
        baselines = []
        status(f"scale: N = {n:,}: baselines")
        baselines.append(_baseline(BruteForce, n, corpus, _queries(args)))
        # The framework stores rebuild a dense array from Python lists on every query:
        # seconds per query at 100k and tens of GB at 1M, so they stop at 100k.
        if n <= args.framework_max:
            slow_queries = max(10, min(args.queries, 2_000_000 // n))
            for cls in (LangChainFlat, LlamaIndexFlat):
                baselines.append(_baseline(cls, n, corpus, slow_queries))
        for b in baselines:
            status(f"  {b['name']}: p50 {b['search_p50_ms']:.1f} ms")
        entry = {"n": n, "ours": ours, "baselines": baselines}
        entry.update(_peers(n, corpus, ours, args))
        results.append(entry)
        del corpus
        gc.collect()

    tables = render(results)
    print(tables)
    payload = {"sizes": sizes, "targets": TARGETS, "results": results, "tables": tables}
    write_json("scale", payload, Path(args.out))
    plot(results, Path(args.out))
    return payload


def _peers(
    n: int, corpus: Corpus, ours: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """The other stores, each in its own process, on ours' first n vectors and its
    queries; our vector search is scored against the same exact answers."""
    q_vectors, _ = corpus.queries(np.random.default_rng(5), _queries(args) + peers.WARMUP)
    vectors = corpus.vectors[:n]
    status(f"scale: N = {n:,}: exact answers for recall@10")
    truth = peers.exact_top_k(vectors, q_vectors[peers.WARMUP :])
    for key in ("vector_search", "vector_search_exact"):
        ours[f"{key}_recall_at_10"] = peers.recall_at_k(ours.pop(f"{key}_found"), truth)
    ours["fixed_cost_ms"] = peers.fixed_cost_ms(ours)
    chosen = peers.parse_peers(args.peers)
    status(f"scale: N = {n:,}: peers {', '.join(p.name for p in chosen) or '(none)'}")
    found = peers.run_peers(
        chosen,
        vectors,
        list(corpus.texts[:n]),
        q_vectors,
        truth=truth,
        timeout=args.peer_timeout,
        folder=Path(args.peer_dir) if args.peer_dir else None,
    )
    return {
        "dim": DIM,
        "peers": found["rows"],
        "bandwidth": found["bandwidth"],
        "scan_bound_ms": found["scan_bound_ms"],
    }


def _brute(entry: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in entry["baselines"] if b["name"] == BruteForce.name)


def render(results: list[dict[str, Any]]) -> str:
    lat_rows = []
    for r in results:
        o, brute = r["ours"], _brute(r)
        lat_rows.append(
            [
                f"{r['n']:,}",
                "tiered-memory search(k=10)",
                o["search_p50_ms"],
                o["search_p95_ms"],
                "–",
            ]
        )
        lat_rows.append(
            [
                f"{r['n']:,}",
                "tiered-memory recall(1000 tokens)",
                o["recall_p50_ms"],
                o["recall_p95_ms"],
                f"{o['recall_p95_ms'] / brute['search_p95_ms']:.1f}×",
            ]
        )
        if "recall_tiered_p95_ms" in o:
            lat_rows.append(
                [
                    f"{r['n']:,}",
                    "tiered-memory recall, after the sweep (tiers spread)",
                    o["recall_tiered_p50_ms"],
                    o["recall_tiered_p95_ms"],
                    f"{o['recall_tiered_p95_ms'] / brute['search_p95_ms']:.1f}×",
                ]
            )
        for b in r["baselines"]:
            lat_rows.append(
                [f"{r['n']:,}", b["name"] + " (k=10)", b["search_p50_ms"], b["search_p95_ms"], "–"]
            )
    latency = markdown_table(
        ["N", "system", "p50 ms", "p95 ms", "recall p95 / brute p95"], lat_rows
    )

    add_rows = []
    for r in results:
        o = r["ours"]
        row: list[Any] = [
            f"{r['n']:,}",
            o["add_off_per_s"],
            o["add_on_per_s"],
            o.get("add_on_written_kb_per_memory", float("nan")),
            o.get("add_sustained_per_s", float("nan")),
            o.get("add_sustained_slowest_batch_s", float("nan")),
            o.get("add_sustained_cpu_ms_per_memory", float("nan")),
            o.get("add_sustained_cpu_ceiling_per_s", float("nan")),
            f"{o['dedup_agreement']:.4f} / {o['link_agreement']:.4f}"
            if "link_agreement" in o
            else "–",
        ]
        names = {b["name"]: b for b in r["baselines"]}
        for cls in (BruteForce, LangChainFlat, LlamaIndexFlat):
            row.append(names[cls.name]["add_per_s"] if cls.name in names else float("nan"))
        add_rows.append(row)
    sustained = results[0]["ours"].get("sustained_adds", 0)
    adds = markdown_table(
        [
            "N",
            "add_many/s (dedup, link off)",
            f"add_many/s (dedup, link on; batch {results[0]['ours']['add_on_batch']})",
            "KiB written per memory (dedup, link on)",
            f"add_many/s sustained (dedup, link on; {sustained:,} more)",
            "slowest batch s (sustained)",
            "CPU ms per memory (sustained, every thread)",
            f"CPU ceiling/s ({results[0]['ours'].get('cores', '?')} cores)",
            "dedup / link decisions = exact (first batch)",
            "numpy add/s",
            "LangChain add/s",
            "LlamaIndex add/s",
        ],
        add_rows,
    )

    sweep_rows = []
    for r in results:
        o = r["ours"]
        if "sweep_due_s" not in o:
            continue
        counts = o["sweep_due_moves"]
        archived = o["tiers"]["archived"]["count"]
        sweep_rows.append(
            [
                f"{r['n'] + EXTRA:,}",
                o["sweep_idle_s"],
                o["sweep_due_s"],
                ", ".join(f"{k} {v:,}" for k, v in counts.items() if v) or "–",
                archived,
            ]
        )
    sweeps = markdown_table(
        ["memories", "idle sweep s", "sweep with transitions s", "moved", "archived"],
        sweep_rows,
    )

    mem_rows = []
    for r in results:
        o = r["ours"]
        names = {b["name"]: b for b in r["baselines"]}
        active = o.get("active_record_disk_bytes")
        arch = o.get("archived_record_disk_bytes")
        mem_rows.append(
            [
                f"{r['n']:,}",
                o.get("first_search_s", float("nan")),
                o["rss_mb"],
                o.get("private_mb", float("nan")),
                names[BruteForce.name]["rss_mb"],
                names[LangChainFlat.name]["rss_mb"]
                if LangChainFlat.name in names
                else float("nan"),
                names[LlamaIndexFlat.name]["rss_mb"]
                if LlamaIndexFlat.name in names
                else float("nan"),
                o["disk_bytes_per_memory"],
                active if active is not None else float("nan"),
                arch if arch is not None else float("nan"),
                f"{arch / active:.0%}" if active and arch else "–",
                o.get("archived_original_bytes") or float("nan"),
            ]
        )
    memory = markdown_table(
        [
            "N",
            "first search s (loads the vector cache)",
            "ours RSS MB",
            "ours private MB (RSS without the file's mapped pages)",
            "numpy RSS MB",
            "LangChain RSS MB",
            "LlamaIndex RSS MB",
            "file bytes/memory",
            "active record B",
            "archived record B",
            "archived/active",
            "original in object store B",
        ],
        mem_rows,
    )
    side_by_side = peers.table(results)
    return (
        (
            "### Beside the stores users would pick instead\n\n" + side_by_side + "\n\n"
            if side_by_side
            else ""
        )
        + "### Latency\n\n"
        + latency
        + "\n\n### add_many throughput (embedding excluded)\n\n"
        + adds
        + "\n\n### Maintenance sweep\n\n"
        + sweeps
        + "\n\n### Memory and disk\n\n"
        + memory
        + "\n"
    )


def plot(results: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ns = [r["n"] for r in results]
    ax1.plot(ns, [r["ours"]["recall_p95_ms"] for r in results], "o-", label="recall p95 (ours)")
    ax1.plot(ns, [r["ours"]["search_p95_ms"] for r in results], "o--", label="search p95 (ours)")
    for name in (BruteForce.name, LangChainFlat.name, LlamaIndexFlat.name):
        pts = [
            (r["n"], b["search_p95_ms"])
            for r in results
            for b in r["baselines"]
            if b["name"] == name
        ]
        if pts:
            ax1.plot(*zip(*pts, strict=True), "s:", label=f"{name} p95")
    ax1.axhline(15, color="grey", lw=0.8, ls="--")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("memories")
    ax1.set_ylabel("ms")
    ax1.set_title("query latency (p95)")
    ax1.legend(fontsize=7)

    width = 0.35
    x = np.arange(len(ns))
    ax2.bar(
        x - width / 2, [r["ours"]["add_off_per_s"] for r in results], width, label="dedup/link off"
    )
    ax2.bar(
        x + width / 2, [r["ours"]["add_on_per_s"] for r in results], width, label="dedup/link on"
    )
    ax2.axhline(5000, color="grey", lw=0.8, ls="--")
    ax2.set_xticks(x, [f"{n:,}" for n in ns])
    ax2.set_ylabel("memories / s")
    ax2.set_title("add_many throughput")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "scale.png", dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated N")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per system")
    parser.add_argument("--archive", type=int, default=200, help="memories made archivable")
    parser.add_argument("--on-batch", type=int, default=500, help="batch of the dedup/link-on adds")
    parser.add_argument(
        "--sustained",
        type=int,
        default=50_000,
        help="adds with dedup and links timed as one stream at the end of a run (0: none)",
    )
    parser.add_argument(
        "--framework-max", type=int, default=100_000, help="largest N for the framework stores"
    )
    parser.add_argument(
        "--sweep-max",
        type=int,
        default=None,
        help="largest N whose sweep is measured (default: every N)",
    )
    parser.add_argument(
        "--peers",
        default="all",
        help=f"other stores to measure, each in its own process: all, none, or of "
        f"{peers.DEFAULT_PEERS}",
    )
    parser.add_argument(
        "--peer-timeout", type=float, default=3600.0, help="seconds before a peer is stopped"
    )
    parser.add_argument(
        "--peer-dir", default=None, help="folder for the peers' data and stores (default: tmp)"
    )
    parser.add_argument("--out", default=str(RESULTS), help="folder for JSON and PNG")
