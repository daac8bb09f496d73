"""The approximate (HNSW) index of one large namespace's live vectors, kept beside the
SQLite file and caught up with it before each search.

Why one index per namespace, not per tier: the sweep moves hundreds of thousands of
rows between tiers, and moving a row between two HNSW graphs is a removal and an
insertion (about 0.3 ms each at 384-d), while a tier is a column the candidates are
checked against anyway. So the graph holds every live vector of the namespace, keyed by
`memories.pk`, and knows nothing of tiers or flags: a search asks it for more
candidates than it needs, and one SQL query over those candidates applies the tiers and
filters and reads their float32 embeddings for an exact re-score (`VectorTable`). A tier
move, a pin or a forget then costs the index nothing.

Staying consistent with the file, whoever wrote it (this connection, another process, a
transaction rolled back, a crash between a commit and a save), without trusting any
in-memory event: every deletion of a vector is logged by a trigger (`SCHEMA`,
`vector_deletes`), and an index remembers the last log entry it applied (`seq`) and its
largest key (`top`). The catch-up removes the pks logged since `seq`; the largest key
left then still exists in the file (it was not deleted since), and SQLite gives a new
row max(pk)+1, so every row inserted since, including one that took a deleted pk again,
has a pk above it: the catch-up adds the namespace's rows above it. Nothing changes for
a pk except by deleting it, which the log records. Checking whether there is anything
to catch up is two O(1) reads per search.

Persistence: the index is saved as `<digest>.<seq>.<top>.usearch` in the folder
`<database>.ann`; the state it holds is in its name, so a file is never paired with the
wrong state, a save is atomic (a temporary file renamed) and a crash leaves the previous
file, which the catch-up brings forward. Opening a namespace loads the newest file
(about 1 s for a million vectors) instead of reading every vector from SQLite.

Storage is float16 (half the bytes of float32; recall@10 is unchanged because every
candidate is re-scored from the file's float32 embedding).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory.ports import Vector

log = logging.getLogger(__name__)

# A namespace with at least this many live vectors is searched through the HNSW index;
# smaller ones stay exact (a scan of 20k rows takes about 2 ms, an exact answer).
ANN_MIN_ROWS = 20_000
# HNSW parameters, tuned on the scale benchmark's clustered 384-d vectors: recall@10
# against exact cosine >= 0.98 (`benchmarks/scale.py` measures it).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128
EXHAUSTIVE_ROWS = 4096  # at most this many rows: an exact scan of the graph's rows
# Saved again once this share of its rows was added since the last save (and on close):
# the writes of saves stay a small multiple of the final size.
_SAVE_GROWTH = 0.25
_SAVE_MIN_ROWS = 10_000
_ADD_BATCH = 20_000  # rows read from SQLite and inserted per step of a build

SCHEMA = [
    # One row per deleted vector, in deletion order (`seq`); read by the catch-up.
    """CREATE TABLE IF NOT EXISTS vector_deletes (
        seq INTEGER PRIMARY KEY,
        pk INTEGER NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS memory_vectors_log_delete
        AFTER DELETE ON memory_vectors BEGIN
        INSERT INTO vector_deletes (pk) VALUES (old.pk);
    END""",
]

Keys = npt.NDArray[np.uint64]


def available() -> bool:
    """Whether the HNSW library (usearch, the `ann` extra) is importable."""
    try:
        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


def log_state(conn: sqlite3.Connection) -> tuple[int, int]:
    """(last delete-log seq, largest pk of `memories`): what changed shows in one of them."""
    row = conn.execute(
        "SELECT (SELECT coalesce(max(seq), 0) FROM vector_deletes), "
        "(SELECT coalesce(max(pk), 0) FROM memories)"
    ).fetchone()
    return int(row[0]), int(row[1])


@dataclass
class _Saved:
    seq: int
    top: int
    path: Path


class AnnIndex:
    """The HNSW graph of one namespace's live vectors and the file state it mirrors."""

    def __init__(self, index: Any, seq: int, top: int, *, saved_size: int = 0) -> None:
        self._index = index
        self.seq = seq  # the last delete-log entry applied
        self.top = top  # the largest key (pk); 0 when empty
        self.seen: tuple[int, int] = (-1, -1)  # `log_state` at the last catch-up
        self.saved_size = saved_size  # rows when last saved (growth triggers a save)
        self.changed = False  # differs from the newest file

    @classmethod
    def empty(cls, dimension: int) -> AnnIndex:
        from usearch.index import Index

        index = Index(
            ndim=dimension,
            metric="cos",
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        return cls(index, 0, 0)

    @property
    def size(self) -> int:
        return len(self._index)

    @property
    def dimension(self) -> int:
        return int(self._index.ndim)

    def _exhaustive(self) -> bool:
        """A graph of a few thousand rows is scanned instead (usearch's exact search over
        the same float16 rows): as fast at that size, and never misses a row. A
        namespace shrunk below `ANN_MIN_ROWS` keeps its graph, and with a tiny threshold
        (the consistency tests) a multithreaded build of a few hundred rows missed a
        top-5 row in about one search of 100."""
        return len(self._index) <= EXHAUSTIVE_ROWS

    def search(self, query: Vector, count: int) -> Keys:
        """The pks of about `count` nearest rows, nearest first."""
        self._index.expansion_search = max(EXPANSION_SEARCH, count)
        found = self._index.search(query, count, exact=self._exhaustive())
        keys: Keys = np.asarray(found.keys, dtype=np.uint64)
        return keys

    def search_many(self, queries: npt.NDArray[np.float32], count: int) -> list[Keys]:
        self._index.expansion_search = max(EXPANSION_SEARCH, count)
        matches = self._index.search(queries, count, exact=self._exhaustive())
        keys = np.asarray(matches.keys, dtype=np.uint64)
        counts = np.asarray(matches.counts)
        return [keys[i, : int(counts[i])] for i in range(keys.shape[0])]

    def remove(self, pks: Keys) -> None:
        if pks.size:
            self._index.remove(pks)

    # -- catching up with the file ----------------------------------------------------

    def catch_up(self, conn: sqlite3.Connection, ns: str, state: tuple[int, int]) -> int:
        """Apply the file's changes since `seq` (module docstring); returns rows added."""
        if state == self.seen:
            return 0
        if self.size == 0 and self.top == 0:  # a build: every row, no log to replay
            added = self._add_rows(conn, "m.pk > 0", (ns,))
            self.seq, self.seen = state[0], state
            self.changed = self.changed or added > 0
            return added
        deleted = np.fromiter(
            (
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT pk FROM vector_deletes WHERE seq > ? AND seq <= ?",
                    (self.seq, state[0]),
                )
            ),
            dtype=np.uint64,
        )
        if deleted.size:
            self.remove(deleted[np.asarray(self._index.contains(deleted), dtype=np.bool_)])
            if np.any(deleted == np.uint64(self.top)):
                # `top` must be a key that still exists (module docstring): the largest left
                keys = np.asarray(self._index.keys, dtype=np.uint64)
                self.top = int(keys.max()) if keys.size else 0
        # `+m.namespace`: a range scan of the rowids above `top`, not of the namespace.
        added = self._add_rows(conn, "m.pk > ?", (ns, self.top))
        self.seq, self.seen = state[0], state
        self.changed = self.changed or added > 0 or deleted.size > 0
        return added

    def _add_rows(self, conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
        cursor = conn.execute(
            "SELECT m.pk, v.embedding FROM memories AS m "
            "JOIN memory_vectors AS v ON v.pk = m.pk "
            f"WHERE +m.namespace = ? AND {where} ORDER BY m.pk",
            params,
        )
        added = 0
        while rows := cursor.fetchmany(_ADD_BATCH):
            keys = np.fromiter((r[0] for r in rows), dtype=np.uint64, count=len(rows))
            blob = b"".join(r[1] for r in rows)
            matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), -1)
            if matrix.shape[1] != self.dimension:
                raise ValueError("vector of another dimension")  # never: the file checks
            again = keys[np.asarray(self._index.contains(keys), dtype=np.bool_)]
            self.remove(again)  # a reused pk (logged) replaces its old vector
            self._index.add(keys, matrix.astype(np.float32), threads=0)
            self.top = max(self.top, int(keys.max()))
            added += len(rows)
        return added

    # -- persistence ------------------------------------------------------------------

    def save(self, folder: Path, digest: str) -> None:
        """Write the index atomically under a name holding its state; drop older files."""
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{digest}.{self.seq}.{self.top}.usearch"
        fd, tmp = tempfile.mkstemp(prefix=f".{digest}.", suffix=".tmp", dir=folder)
        os.close(fd)
        try:
            self._index.save(tmp)
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        for old in _saved(folder, digest):
            if old.path != final:
                with contextlib.suppress(OSError):  # another process may hold it (Windows)
                    old.path.unlink()
        self.saved_size = self.size
        self.changed = False

    def wants_save(self) -> bool:
        grown = self.size - self.saved_size
        return self.changed and grown >= max(_SAVE_MIN_ROWS, int(self.saved_size * _SAVE_GROWTH))

    @classmethod
    def load(cls, folder: Path, digest: str, dimension: int, last_seq: int) -> AnnIndex | None:
        """The newest saved index of a namespace, or None (none, unreadable, another
        dimension, or a state this file never reached: a copy of another history)."""
        from usearch.index import Index

        for saved in sorted(_saved(folder, digest), key=lambda s: (s.seq, s.top), reverse=True):
            if saved.seq > last_seq:
                continue
            try:
                index = Index.restore(str(saved.path), view=False)
            except (RuntimeError, ValueError, OSError) as e:
                log.warning("tiered-memory: ignoring unreadable vector index %s: %s", saved.path, e)
                continue
            if index is None or int(index.ndim) != dimension:
                continue
            return cls(index, saved.seq, saved.top, saved_size=len(index))
        return None


def digest_of(namespace: str) -> str:
    """A file-name-safe name for a namespace's index (namespaces may hold any text)."""
    return hashlib.sha256(namespace.encode()).hexdigest()[:24]


def _saved(folder: Path, digest: str) -> list[_Saved]:
    out: list[_Saved] = []
    if not folder.is_dir():
        return out
    for path in folder.glob(f"{digest}.*.*.usearch"):
        parts = path.name.split(".")
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            out.append(_Saved(int(parts[1]), int(parts[2]), path))
    return out


def remove_files(folder: Path, digest: str | None = None) -> None:
    """Delete the saved indexes of one namespace (of all with None)."""
    if not folder.is_dir():
        return
    for path in folder.glob(f"{digest or '*'}.*.usearch"):
        with contextlib.suppress(OSError):
            path.unlink()
