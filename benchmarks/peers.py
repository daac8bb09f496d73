"""Peers: the stores users would pick instead of ours, measured beside it in one run.

Each peer runs in its own subprocess (`python -m benchmarks.peers --peer NAME ...`),
so its resident memory is its own and one peer's caches never warm another's. Every
peer reads the same vectors, texts and queries from one folder (`write_data`): the
vectors memory-mapped from a `.npy`, so a child does not start with a copy. A peer
whose library is missing gets a "not installed" row instead of failing the run.

Beside them, the physical limit: an exact scan must read every vector once, so
`vector bytes / memory bandwidth` (measured here, `scan_bandwidth`) bounds its latency
from below.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .common import Stopwatch, rss_mb, status

Matrix = npt.NDArray[np.float32]
K = 10
WARMUP = 5  # the first queries of the shared set are warm-up, as for our store
BATCH = 5000  # rows per insert call: under Chroma's maximum (5,461), large for the rest


# -- exact answers and recall -----------------------------------------------------------


def exact_top_k(vectors: Matrix, queries: Matrix, k: int = K, chunk: int = 100_000) -> Any:
    """Row indexes of the k highest cosines per query, best first (unit rows assumed
    for `vectors`; queries are normalised here). Chunked, so 1M rows need no 1M x q
    score matrix."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), 0), dtype=np.int64)
    for start in range(0, len(vectors), chunk):
        block = np.asarray(vectors[start : start + chunk], dtype=np.float32)
        scores = q @ block.T
        take = min(k, scores.shape[1])
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        best_s = np.concatenate([best_s, np.take_along_axis(scores, top, axis=1)], axis=1)
        best_i = np.concatenate([best_i, top + start], axis=1)
        keep = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
        best_s = np.take_along_axis(best_s, keep, axis=1)
        best_i = np.take_along_axis(best_i, keep, axis=1)
    return best_i


def recall_at_k(found: Sequence[Sequence[int]], truth: Any, k: int = K) -> float:
    """Mean share of each query's exact top-k that the system returned in its top k."""
    if len(found) == 0:
        return float("nan")
    hits = [
        len(set(list(f)[:k]) & set(np.asarray(t)[:k].tolist())) / k
        for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits))


# -- the physical limit -------------------------------------------------------------------


def scan_bandwidth(mb: int = 512, repeats: int = 5, dim: int = 384) -> dict[str, float]:
    """Read bandwidth of this machine in GB/s: the best of three numpy kernels over
    an array larger than any cache, each the best of `repeats`. A sum and a
    matrix-vector product read each byte once; a copy reads and writes each (counted
    twice). The fastest is the rate an exact scan can at best read vectors at."""
    rows = max(1, mb * 2**20 // (4 * dim))
    a = np.random.default_rng(0).random((rows, dim), dtype=np.float32)
    b = np.empty_like(a)
    q = np.ones(dim, dtype=np.float32)
    kernels: list[tuple[str, Callable[[], object], int]] = [
        ("sum", lambda: a.sum(), a.nbytes),
        ("matvec", lambda: a @ q, a.nbytes),
        ("copy", lambda: np.copyto(b, a), 2 * a.nbytes),
    ]
    best: dict[str, float] = {}
    for name, kernel, nbytes in kernels:
        kernel()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            kernel()
            times.append(time.perf_counter() - start)
        best[name] = nbytes / min(times) / 1e9
    return {"gb_per_s": max(best.values()), **{f"{k}_gb_per_s": v for k, v in best.items()}}


def scan_lower_bound_ms(n: int, dim: int, gb_per_s: float) -> float:
    """Milliseconds to read n float32 vectors once at `gb_per_s`."""
    return n * dim * 4 / (gb_per_s * 1e9) * 1000.0


# -- the peers ------------------------------------------------------------------------------


class Adapter(Protocol):
    """One store, used the way its documentation shows: batch inserts, then queries."""

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None: ...

    def finish(self) -> None:
        """Build what the docs build after loading (an index); part of the insert time."""

    def save(self) -> None:
        """Persist what is not persisted yet (timed apart; counted in disk bytes)."""

    def search(self, query: Matrix, k: int) -> list[int]: ...


class NumpyPeer:
    """Exact: a preallocated float32 matrix, one product and an argpartition."""

    def __init__(self, folder: Path, n: int, dim: int) -> None:
        self.matrix = np.empty((n, dim), dtype=np.float32)
        self.folder = folder

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        self.matrix[start : start + len(vectors)] = vectors

    def finish(self) -> None:
        pass

    def save(self) -> None:
        np.save(self.folder / "vectors.npy", self.matrix)

    def search(self, query: Matrix, k: int) -> list[int]:
        scores = self.matrix @ query
        top = np.argpartition(-scores, k - 1)[:k]
        return [int(i) for i in top[np.argsort(-scores[top])]]


class ChromaPeer:
    """Chroma embedded (PersistentClient, HNSW, cosine), documents stored with vectors."""

    def __init__(self, folder: Path, n: int, dim: int) -> None:
        import chromadb

        self.client = chromadb.PersistentClient(path=str(folder))
        self.collection = self.client.create_collection(
            "memories", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        ids = [str(i) for i in range(start, start + len(vectors))]
        self.collection.add(ids=ids, embeddings=vectors, documents=texts)

    def finish(self) -> None:
        pass  # Chroma indexes and persists as it adds

    def save(self) -> None:
        pass

    def search(self, query: Matrix, k: int) -> list[int]:
        found = self.collection.query(query_embeddings=query[None, :], n_results=k, include=[])
        return [int(i) for i in found["ids"][0]]


class LancePeer:
    """LanceDB: one table written from a stream of record batches (its bulk path);
    with `index`, the default IVF_PQ index and a refine step (as its docs advise)."""

    def __init__(self, folder: Path, n: int, dim: int, *, index: bool) -> None:
        import lancedb
        import pyarrow as pa

        self.pa = pa
        self.db = lancedb.connect(str(folder))
        self.dim = dim
        self.index = index
        self.pending: list[Any] = []
        self.table: Any = None

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        # batches are collected and written by one create_table call in finish():
        # many small appends would leave one fragment each, which LanceDB advises against
        pa = self.pa
        flat = pa.array(np.ascontiguousarray(vectors).reshape(-1), type=pa.float32())
        self.pending.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(np.arange(start, start + len(vectors), dtype=np.int64)),
                    pa.array(texts, type=pa.string()),
                    pa.FixedSizeListArray.from_arrays(flat, self.dim),
                ],
                names=["id", "text", "vector"],
            )
        )

    def finish(self) -> None:
        pa = self.pa
        schema = pa.schema(
            [
                ("id", pa.int64()),
                ("text", pa.string()),
                ("vector", pa.list_(pa.float32(), self.dim)),
            ]
        )
        batches, self.pending = self.pending, []
        self.table = self.db.create_table(
            "memories", data=pa.RecordBatchReader.from_batches(schema, iter(batches)), schema=schema
        )
        del batches
        if self.index:
            self.table.create_index(metric="cosine", vector_column_name="vector")

    def save(self) -> None:
        pass  # written by create_table

    def search(self, query: Matrix, k: int) -> list[int]:
        q = self.table.search(query).distance_type("cosine").limit(k).select(["id"])
        if self.index:
            q = q.nprobes(20).refine_factor(10)
        return [int(i) for i in q.to_arrow()["id"].to_pylist()]


def _sqlite_with_extensions() -> tuple[str, Any] | None:
    """A SQLite binding that can load sqlite-vec: the stdlib's if it was built with
    extension loading, else apsw; None if neither."""
    import sqlite3

    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        return "sqlite3", sqlite3
    try:
        import apsw
    except ImportError:
        return None
    return "apsw", apsw


class SqliteVecPeer:
    """sqlite-vec: a vec0 table (exact scan, cosine) with the text as an auxiliary
    column, filled by executemany inside one transaction per batch."""

    def __init__(self, folder: Path, n: int, dim: int) -> None:
        import sqlite_vec

        found = _sqlite_with_extensions()
        assert found is not None  # checked by the peer's availability
        kind, module = found
        path = str(folder / "vec.db")
        self.conn = module.connect(path) if kind == "sqlite3" else module.Connection(path)
        self.conn.enable_load_extension(True)
        self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.enable_load_extension(False)
        self.conn.execute(
            f"CREATE VIRTUAL TABLE memories USING vec0("
            f"embedding float[{dim}] distance_metric=cosine, +content text)"
        )
        self.kind = kind

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        rows = [
            (start + i, np.ascontiguousarray(v).tobytes(), t)
            for i, (v, t) in enumerate(zip(vectors, texts, strict=True))
        ]
        self.conn.execute("BEGIN")
        self.conn.executemany(
            "INSERT INTO memories(rowid, embedding, content) VALUES (?, ?, ?)", rows
        )
        self.conn.execute("COMMIT")

    def finish(self) -> None:
        pass

    def save(self) -> None:
        pass  # committed per batch

    def search(self, query: Matrix, k: int) -> list[int]:
        rows = self.conn.execute(
            "SELECT rowid FROM memories WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (np.ascontiguousarray(query).tobytes(), k),
        ).fetchall()
        return [int(r[0]) for r in rows]


class HnswlibPeer:
    """hnswlib as in its README: cosine, M=16, ef_construction=200, ef=50."""

    def __init__(self, folder: Path, n: int, dim: int) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="cosine", dim=dim)
        self.index.init_index(max_elements=n, ef_construction=200, M=16)
        self.folder = folder

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        self.index.add_items(vectors, np.arange(start, start + len(vectors)))

    def finish(self) -> None:
        self.index.set_ef(50)

    def save(self) -> None:
        self.index.save_index(str(self.folder / "hnsw.bin"))

    def search(self, query: Matrix, k: int) -> list[int]:
        labels, _ = self.index.knn_query(query, k=k)
        return [int(i) for i in labels[0]]


class UsearchPeer:
    """usearch with its defaults (connectivity 16, expansion 128 add / 64 search)."""

    def __init__(self, folder: Path, n: int, dim: int, *, dtype: str) -> None:
        from usearch.index import Index

        self.index = Index(ndim=dim, metric="cos", dtype=dtype)
        self.folder = folder

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        self.index.add(np.arange(start, start + len(vectors), dtype=np.uint64), vectors)

    def finish(self) -> None:
        pass

    def save(self) -> None:
        self.index.save(str(self.folder / "index.usearch"))

    def search(self, query: Matrix, k: int) -> list[int]:
        return [int(i) for i in self.index.search(query, k).keys]


class FaissHnswPeer:
    """faiss IndexHNSWFlat, inner product on unit vectors, M=32, efSearch=64."""

    def __init__(self, folder: Path, n: int, dim: int) -> None:
        import faiss

        self.faiss = faiss
        self.index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        self.folder = folder

    def add(self, start: int, vectors: Matrix, texts: list[str]) -> None:
        self.index.add(np.ascontiguousarray(vectors))

    def finish(self) -> None:
        self.index.hnsw.efSearch = 64

    def save(self) -> None:
        self.faiss.write_index(self.index, str(self.folder / "index.faiss"))

    def search(self, query: Matrix, k: int) -> list[int]:
        _, labels = self.index.search(query[None, :], k)
        return [int(i) for i in labels[0]]


@dataclass(frozen=True)
class Peer:
    name: str  # as given to --peers
    label: str  # the table row
    modules: tuple[str, ...]  # what must be importable
    make: Callable[[Path, int, int], Adapter]
    exact: bool = False
    min_n: int = 0  # below this the peer cannot build (an IVF index needs data to train)
    needs: Callable[[], str | None] = lambda: None  # a reason it cannot run, or None

    def unavailable(self) -> str | None:
        for module in self.modules:
            if importlib.util.find_spec(module) is None:
                return "not installed"
        return self.needs()


def _sqlite_vec_needs() -> str | None:
    if _sqlite_with_extensions() is None:
        return "not installed (needs apsw, or a Python sqlite3 that loads extensions)"
    return None


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("numpy", "numpy brute force (exact)", (), NumpyPeer, exact=True),
        Peer("chroma", "Chroma embedded (HNSW)", ("chromadb",), ChromaPeer),
        Peer(
            "lancedb-flat",
            "LanceDB, no index (exact)",
            ("lancedb", "pyarrow"),
            lambda f, n, d: LancePeer(f, n, d, index=False),
            exact=True,
        ),
        Peer(
            "lancedb",
            "LanceDB IVF_PQ (nprobes 20, refine 10)",
            ("lancedb", "pyarrow"),
            lambda f, n, d: LancePeer(f, n, d, index=True),
            min_n=10_000,
        ),
        Peer(
            "sqlite-vec",
            "sqlite-vec vec0 (exact)",
            ("sqlite_vec",),
            SqliteVecPeer,
            exact=True,
            needs=_sqlite_vec_needs,
        ),
        Peer("hnswlib", "hnswlib HNSW (M 16, ef 50)", ("hnswlib",), HnswlibPeer),
        Peer(
            "usearch",
            "usearch HNSW f32",
            ("usearch",),
            lambda f, n, d: UsearchPeer(f, n, d, dtype="f32"),
        ),
        Peer(
            "usearch-i8",
            "usearch HNSW i8",
            ("usearch",),
            lambda f, n, d: UsearchPeer(f, n, d, dtype="i8"),
        ),
        Peer("faiss-hnsw", "faiss IndexHNSWFlat (M 32, ef 64)", ("faiss",), FaissHnswPeer),
    )
}
DEFAULT_PEERS = ",".join(PEERS)


def parse_peers(text: str) -> list[Peer]:
    """`all`, `none`, or comma-separated names from PEERS."""
    text = text.strip()
    if text in ("", "none"):
        return []
    if text == "all":
        return list(PEERS.values())
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peers {unknown}; choose from {', '.join(PEERS)}, all or none")
    return [PEERS[n] for n in names]


# -- the shared data ------------------------------------------------------------------------


def write_data(folder: Path, vectors: Matrix, texts: Sequence[str], queries: Matrix) -> Path:
    """The inputs every peer reads: vectors and queries as .npy, texts one per line."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "vectors.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    np.save(folder / "queries.npy", np.ascontiguousarray(queries, dtype=np.float32))
    with open(folder / "texts.txt", "w", encoding="utf-8") as f:
        for text in texts:
            f.write(text.replace("\n", " ") + "\n")
    return folder


def _text_batches(path: Path, size: int) -> Iterator[list[str]]:
    with open(path, encoding="utf-8") as f:
        batch: list[str] = []
        for line in f:
            batch.append(line.rstrip("\n"))
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- one peer, in its own process -------------------------------------------------------------


def measure(
    peer: Peer, data: Path, work: Path, *, batch: int = BATCH, k: int = K
) -> dict[str, Any]:
    """Build `peer` from `data` in `work` and time its queries; runs in the child."""
    vectors = np.load(data / "vectors.npy", mmap_mode="r")
    n, dim = vectors.shape
    queries = np.load(data / "queries.npy")
    for module in peer.modules:  # the library's own code is not the data's memory
        importlib.import_module(module)
    rss0 = rss_mb()
    adapter = peer.make(work, n, dim)
    add = Stopwatch()
    texts = _text_batches(data / "texts.txt", batch)
    for start in range(0, n, batch):
        rows = np.array(vectors[start : start + batch])  # read from the map, outside the timer
        chunk = next(texts)
        with add.time():
            adapter.add(start, rows, chunk)
    start_finish = time.perf_counter()
    adapter.finish()
    finish_s = time.perf_counter() - start_finish
    start_save = time.perf_counter()
    adapter.save()
    save_s = time.perf_counter() - start_save
    del vectors, rows  # unmap the input: its pages must not count as the peer's memory
    gc.collect()

    found: list[list[int]] = []
    watch = Stopwatch()
    for i, q in enumerate(queries):
        if i < WARMUP:
            adapter.search(q, k)
            continue
        with watch.time():
            ids = adapter.search(q, k)
        found.append(ids)
    rss = rss_mb() - rss0
    build_s = add.total + finish_s
    return {
        "name": peer.name,
        "label": peer.label,
        "status": "ok",
        "exact": peer.exact,
        "n": n,
        "add_s": add.total,
        "finish_s": finish_s,
        "build_s": build_s,
        "save_s": save_s,
        "add_per_s": n / build_s if build_s > 0 else float("nan"),
        "search_p50_ms": watch.p(50),
        "search_p95_ms": watch.p(95),
        "queries": len(found),
        "rss_mb": rss,
        "disk_bytes": folder_bytes(work),
        "disk_bytes_per_memory": folder_bytes(work) / n,
        "found": found,
    }


def run_peer(peer: Peer, data: Path, *, n: int, timeout: float) -> dict[str, Any]:
    """Measure one peer in a fresh interpreter; a row saying why if it cannot run."""
    row: dict[str, Any] = {"name": peer.name, "label": peer.label, "exact": peer.exact, "n": n}
    reason = peer.unavailable()
    if reason is None and n < peer.min_n:
        reason = f"skipped below {peer.min_n:,} memories"
    if reason is not None:
        return {**row, "status": reason}
    result = data / f"{peer.name}.json"
    work = Path(tempfile.mkdtemp(prefix=f"peer-{peer.name}-", dir=data))
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "benchmarks.peers", peer.name, str(data), str(work), str(result)]
    try:
        proc = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return {**row, "status": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0 or not result.exists():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {**row, "status": f"failed: {last[:200]}"}
    out: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    return out


def run_peers(
    peers: Sequence[Peer],
    vectors: Matrix,
    texts: Sequence[str],
    queries: Matrix,
    *,
    truth: Any = None,
    timeout: float = 3600.0,
    folder: Path | None = None,
    bandwidth_mb: int = 512,
) -> dict[str, Any]:
    """Every peer on the same data, one at a time, plus the bandwidth bound. `queries`
    includes WARMUP first; recall is scored against `truth` (`exact_top_k` of the
    timed queries, computed here if not given)."""
    n, dim = vectors.shape
    if truth is None:
        truth = exact_top_k(vectors, queries[WARMUP:])
    with tempfile.TemporaryDirectory(prefix="tm-peers-", dir=folder) as tmp:
        data = write_data(Path(tmp), vectors, texts, queries)
        rows = []
        for peer in peers:
            status(f"  peer {peer.name} ...")
            row = run_peer(peer, data, n=n, timeout=timeout)
            if row["status"] == "ok":
                row["recall_at_10"] = recall_at_k(row.pop("found"), truth)
                status(
                    f"  peer {peer.name}: p50 {row['search_p50_ms']:.2f} ms, "
                    f"p95 {row['search_p95_ms']:.2f} ms, recall@10 {row['recall_at_10']:.3f}, "
                    f"{row['add_per_s']:,.0f}/s, RSS {row['rss_mb']:,.0f} MB"
                )
            else:
                status(f"  peer {peer.name}: {row['status']}")
            rows.append(row)
    bandwidth = scan_bandwidth(mb=bandwidth_mb)
    bound = scan_lower_bound_ms(n, dim, bandwidth["gb_per_s"])
    return {"rows": rows, "bandwidth": bandwidth, "scan_bound_ms": bound}


def fixed_cost_ms(ours: dict[str, Any]) -> float:
    """What a recall adds to finding the vectors (lexical search, ranking, packing,
    bookkeeping): our recall p95 minus our vector search p95, from the same run."""
    return float(ours["recall_p95_ms"]) - float(ours["vector_search_p95_ms"])


def _nan() -> float:
    return float("nan")


def _latency(row: dict[str, Any], key: str) -> tuple[float, float]:
    return row[f"{key}_p50_ms"], row[f"{key}_p95_ms"]


def table(results: Sequence[dict[str, Any]]) -> str:
    """The side-by-side table: our store's rows, every peer's, and the scan bound;
    then our fixed cost per N. `results` are scale's entries (n, ours, peers, ...)."""
    from .common import markdown_table

    rows: list[list[Any]] = []
    notes = []
    for r in results:
        if "peers" not in r:
            continue
        n, o = f"{r['n']:,}", r["ours"]
        common = (o["add_off_per_s"], o["rss_mb"], o["disk_bytes_per_memory"])
        vector = (*_latency(o, "vector_search"), o["vector_search_recall_at_10"])
        rows += [[n, "tiered-memory vector search (k=10), as recall ranks", *vector, *common]]
        if "vector_search_exact_p50_ms" in o:  # runs before it timed only this one
            exact = (*_latency(o, "vector_search_exact"), o["vector_search_exact_recall_at_10"])
            rows += [[n, "tiered-memory vector search (k=10), exact scores", *exact, *common]]
        rows += [
            [n, "tiered-memory search(k=10), hybrid", *_latency(o, "search"), _nan(), *common],
            [n, "tiered-memory recall(1000 tokens)", *_latency(o, "recall"), _nan(), *common],
        ]
        for p in r["peers"]:
            if p["status"] != "ok":
                rows.append([n, p["label"], p["status"], "", "", "", "", ""])
                continue
            measured = (p["recall_at_10"], p["add_per_s"], p["rss_mb"], p["disk_bytes_per_memory"])
            rows.append([n, p["label"], *_latency(p, "search"), *measured])
        bw, bound, dim = r["bandwidth"]["gb_per_s"], r["scan_bound_ms"], r["dim"]
        limit = (bound, bound, 1.0, _nan(), r["n"] * dim * 4 / 2**20, dim * 4.0)
        rows.append([n, f"exact-scan bound: float32 vectors / {bw:.1f} GB/s", *limit])
        notes.append(
            f"- {n}: fixed cost of lexical search and packing (recall p95 − vector search "
            f"p95) = {o['fixed_cost_ms']:.1f} ms"
        )
    if not rows:
        return ""
    head = [
        "N",
        "system",
        "p50 ms",
        "p95 ms",
        "recall@10",
        "inserts/s",
        "RSS MB",
        "disk B/memory",
    ]
    return markdown_table(head, rows) + "\n\n" + "\n".join(notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__)
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("data", type=Path, help="folder written by write_data")
    parser.add_argument("work", type=Path, help="empty folder the peer stores into")
    parser.add_argument("result", type=Path, help="JSON file to write")
    args = parser.parse_args(argv)
    peer = PEERS[args.peer]
    reason = peer.unavailable()
    out = (
        {"name": peer.name, "label": peer.label, "status": reason}
        if reason is not None
        else measure(peer, args.data, args.work)
    )
    args.result.write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
