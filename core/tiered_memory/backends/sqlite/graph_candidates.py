"""The last HNSW search's candidates of a namespace, re-scored, kept for the next phase
of the same search.

Why: the graph holds every live tier of a namespace (`ann`), so the candidates of one
graph search are candidates for any tier. A recall searches the active tiers, then
COLD with the same query: once the sweep has spread a store over the tiers, the second
phase asked the graph again (a beam of a few hundred: about 3 ms at 100k) and read its
candidates from the file again, for rows the first search had already passed over.
Keeping the first search's candidates of every tier, with their exact cosines, answers
the second phase from memory whenever the first asked the graph for at least as many
candidates as the second would: the k best of the second phase's tiers among a larger
candidate set are as good or better.

What a kept set is valid for: the same namespace, query, filters and state of the file
(`conn.total_changes` and `PRAGMA data_version`, as the lexical scores' reuse), so a
write by anyone in between, or a rolled-back one, forgets it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tiered_memory.ports import SearchFilter, Vector

from .file_memo import FileState
from .memory_columns import EMBEDDING, ID, TIER, columns
from .sql import search_filter_sql
from .vectors import unit_rows

# Each memory joined to its vector: memories without one are left out.
_FROM = "memories AS m JOIN memory_vectors AS v ON v.pk = m.pk"
# Whole rows (`memories.memory_of` reads them), the embedding at its place: the
# search's hits are among these rows, so the hits need no second read by id (at 100k,
# 0.13 of a k=10 vector search's 0.68 ms went to that second read).
_COLUMNS = columns("m", True)


@dataclass(frozen=True)
class GraphCandidates:
    """The live rows among one graph search's `fetch` candidates that pass `filters`,
    with their tiers and exact cosines to `query`."""

    namespace: str
    query: bytes
    filters: SearchFilter
    state: FileState
    fetch: int
    complete: bool  # the graph gave fewer than `fetch`: these are all its rows
    ids: tuple[str, ...]
    tiers: tuple[str, ...]
    scores: tuple[float, ...]
    rows: Mapping[str, Any]  # id -> the memory row (`memory_of(row, True)` reads it)

    @classmethod
    def read(
        cls,
        conn: sqlite3.Connection,
        ns: str,
        keys: np.ndarray,
        query: Vector,
        filters: SearchFilter,
        fetch: int,
        state: FileState,
    ) -> GraphCandidates:
        """Read the candidates `keys` (pks) that are still live in `ns` and pass
        `filters`, whatever their tier, and score them exactly (unit rows). `state`:
        the file's, taken before the graph search (`FileMemo`)."""
        clauses, params = search_filter_sql(filters)
        where = "".join(f" AND {c}" for c in clauses)
        # `+`: look the candidates up by pk, not through an index of the namespace
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM {_FROM} "
            f"WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ?{where}",
            ("[" + ",".join(map(str, keys.tolist())) + "]", ns, *params),
        ).fetchall()
        scores: tuple[float, ...] = ()
        if rows:
            matrix = np.frombuffer(b"".join(r[EMBEDDING] for r in rows), dtype="<f4")
            scores = tuple((unit_rows(matrix.reshape(len(rows), -1)) @ query).tolist())
        return cls(
            namespace=ns,
            query=np.asarray(query, dtype=np.float32).tobytes(),
            filters=filters,
            state=state,
            fetch=fetch,
            complete=keys.size < fetch,
            ids=tuple(r[ID] for r in rows),
            tiers=tuple(r[TIER] for r in rows),
            scores=scores,
            rows={r[ID]: r for r in rows},
        )

    def answers(
        self,
        state: FileState,
        ns: str,
        query: Vector,
        filters: SearchFilter,
        fetch: int,
    ) -> bool:
        """Whether this set stands for a graph search of `fetch` candidates for this
        namespace, query and filters in the file as it is now."""
        return (
            self.namespace == ns
            and (self.complete or self.fetch >= fetch)
            and self.filters == filters
            and self.query == np.asarray(query, dtype=np.float32).tobytes()
            and self.state == state
        )

    def cosines(self, state: FileState, ns: str, query: Vector) -> dict[str, float]:
        """The exact cosines this set holds, when it was read for this namespace and
        query in the file as it is now (any filters: a cosine does not depend on
        them); else none. A recall asks for the cosines of its lexical hits, which are
        mostly among the graph's candidates for the same query."""
        if (
            self.namespace != ns
            or self.query != np.asarray(query, dtype=np.float32).tobytes()
            or self.state != state
        ):
            return {}
        return dict(zip(self.ids, self.scores, strict=True))

    def rows_of(self, state: FileState, ns: str, ids: Sequence[str]) -> dict[str, Any]:
        """The rows this set read for those of `ids` it holds, when it was read in
        this namespace from the file as it is now (any query or filters: a row is the
        row); else none."""
        if self.namespace != ns or self.state != state:
            return {}
        rows = self.rows
        return {i: row for i in ids if (row := rows.get(i)) is not None}

    def best(self, parts: Sequence[str], k: int) -> list[tuple[str, float]] | None:
        """The k best (id, cosine) in the tiers `parts`, best first, ties by id; None
        when fewer than k are among these candidates and the graph holds more."""
        wanted = set(parts)
        pairs = [
            (i, s) for i, t, s in zip(self.ids, self.tiers, self.scores, strict=True) if t in wanted
        ]
        if len(pairs) < k and not self.complete:
            return None
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        return pairs[:k]
