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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tiered_memory.ports import SearchFilter, Vector

from .database import file_state
from .sql import search_filter_sql
from .vectors import unit_rows

# Each memory joined to its vector: memories without one are left out.
_FROM = "memories AS m JOIN memory_vectors AS v ON v.pk = m.pk"


@dataclass(frozen=True)
class GraphCandidates:
    """The live rows among one graph search's `fetch` candidates that pass `filters`,
    with their tiers and exact cosines to `query`."""

    namespace: str
    query: bytes
    filters: SearchFilter
    state: tuple[int, int, int]
    fetch: int
    complete: bool  # the graph gave fewer than `fetch`: these are all its rows
    ids: tuple[str, ...]
    tiers: tuple[str, ...]
    scores: tuple[float, ...]

    @classmethod
    def read(
        cls,
        conn: sqlite3.Connection,
        ns: str,
        keys: np.ndarray,
        query: Vector,
        filters: SearchFilter,
        fetch: int,
    ) -> GraphCandidates:
        """Read the candidates `keys` (pks) that are still live in `ns` and pass
        `filters`, whatever their tier, and score them exactly (unit rows)."""
        clauses, params = search_filter_sql(filters)
        where = "".join(f" AND {c}" for c in clauses)
        # `+`: look the candidates up by pk, not through an index of the namespace
        rows = conn.execute(
            f"SELECT m.id, m.tier, v.embedding FROM {_FROM} "
            f"WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ?{where}",
            ("[" + ",".join(map(str, keys.tolist())) + "]", ns, *params),
        ).fetchall()
        scores: tuple[float, ...] = ()
        if rows:
            matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4")
            scores = tuple((unit_rows(matrix.reshape(len(rows), -1)) @ query).tolist())
        return cls(
            namespace=ns,
            query=np.asarray(query, dtype=np.float32).tobytes(),
            filters=filters,
            state=file_state(conn),
            fetch=fetch,
            complete=keys.size < fetch,
            ids=tuple(r[0] for r in rows),
            tiers=tuple(r[1] for r in rows),
            scores=scores,
        )

    def answers(
        self,
        conn: sqlite3.Connection,
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
            and self.state == file_state(conn)
        )

    def cosines(self, conn: sqlite3.Connection, ns: str, query: Vector) -> dict[str, float]:
        """The exact cosines this set holds, when it was read for this namespace and
        query in the file as it is now (any filters: a cosine does not depend on
        them); else none. A recall asks for the cosines of its lexical hits, which are
        mostly among the graph's candidates for the same query."""
        if (
            self.namespace != ns
            or self.query != np.asarray(query, dtype=np.float32).tobytes()
            or self.state != file_state(conn)
        ):
            return {}
        return dict(zip(self.ids, self.scores, strict=True))

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
