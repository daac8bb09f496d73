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

Only the candidates that may rank are read at first: those whose approximate cosine
(the graph's float16 rows) is within twice the float16 error of the k-th best. The rest
are read when the k-th best exact cosine among the rows read does not beat every unread
candidate's bound (too many of the first failed the filters or the tiers, or a later
phase asks for other tiers). At 100k memories a k = 10 search asked the graph for 20
candidates and read all 20 rows and embeddings (a quarter of its time); about 11 can
rank.

What a kept set is valid for: the same namespace, query, filters and state of the file
(`conn.total_changes` and `PRAGMA data_version`, as the lexical scores' reuse), so a
write by anyone in between, or a rolled-back one, forgets it.

Scores for ranking (`exact=False`): a recall ranks its candidates by a fused score of
which the cosine is one term, so the graph's cosine (float16 rows, within
`FLOAT16_ERROR` of the exact one; measured at most 4e-5) serves as well as the exact
one, as it already did for the lexical hits (`VectorTable.cosines`). Such a set reads
its rows without their float32 vectors: at 1M memories reading the ~90 candidates of a
recall took 1.9 ms with the vectors and 1.0 ms without (p50, first touches of a warm
3 GB file), recall p50 -0.7 to -1.4 ms (interleaved). A set read that way answers only
searches that did not ask for exact scores; `vector_search`'s default stays exact.
Since its scores are the graph's own, no candidate below the k-th of them can rank:
it reads the graph's k best (and any candidate tied with the k-th) at first, not the
error's margin an exact search re-scores (at 100k a k = 10 search read 13.3 rows on
average, a recall's first phase 94 for its 84).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tiered_memory.ports import SearchFilter, Vector

from .ann import FLOAT16_ERROR
from .file_memo import FileState
from .memory_columns import EMBEDDING, ID, NAMES, TEXT_JOIN, TIER, columns
from .sql import json_ints, search_filter_sql
from .vectors import unit_rows

_PK = len(NAMES)  # the pk's place in a row read here
# Each memory joined to its vector (memories without one are left out) and its text.
_FROM = f"memories AS m JOIN memory_vectors AS v ON v.pk = m.pk{TEXT_JOIN}"
# Whole rows (`memories.memory_of` reads them), the embedding at its place: the
# search's hits are among these rows, so the hits need no second read by id (at 100k,
# 0.13 of a k=10 vector search's 0.68 ms went to that second read).
_COLUMNS = columns("m", True) + ", m.pk"
# The same rows without the vector (NULL at its place, which `memory_of` leaves
# undecoded). Both end with the pk (`memory_of` ignores extra columns): the scores of a
# set for ranking are the graph's, looked up by pk, and a wider search of the same
# query keeps the rows read already (`GraphCandidates.read`, `reuse`).
_LIGHT_COLUMNS = columns("m", True).replace("v.embedding", "NULL") + ", m.pk"


@dataclass(frozen=True)
class GraphCandidates:
    """The live rows among one graph search's `fetch` candidates that pass `filters`,
    with their tiers and exact cosines to `query`; the candidates not read yet
    (`unread`) have no exact cosine above `bound`."""

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
    unread: np.ndarray  # pks of candidates not read yet, best approximate cosine first
    unread_scores: np.ndarray  # their graph cosines
    # at or above any unread candidate's score, exact or the graph's as `exact` says
    # (-inf: all were read)
    bound: float
    exact: bool = True  # the scores are exact; else the graph's (the module docstring)
    # pks looked up in the file (found or not: gone, in another namespace, filtered out)
    looked_up: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint64))

    @classmethod
    def read(
        cls,
        conn: sqlite3.Connection,
        ns: str,
        keys: np.ndarray,
        approximate: np.ndarray,
        query: Vector,
        filters: SearchFilter,
        fetch: int,
        state: FileState,
        k: int,
        *,
        exact: bool = True,
        reuse: GraphCandidates | None = None,
    ) -> GraphCandidates:
        """Read those of the candidates `keys` (pks, with the graph's `approximate`
        cosines) that may be among the k best and are still live in `ns` and pass
        `filters`, whatever their tier, and score them exactly (unit rows), or with
        their graph cosines if not `exact`. `state`: the file's, taken before the graph
        search (`FileMemo`). `reuse`: a set of a narrower search of the same query,
        whose rows (and pks found missing) are taken instead of read again, when it
        was read under the same state with the same filters and scores."""
        order = np.argsort(-approximate, kind="stable")
        keys, approximate = keys[order], approximate[order]
        # a prefix (sorted best first); scores for ranking are the graph's: no margin
        first = int(shortlist(approximate, k, exact=exact).size)
        read = np.zeros(keys.size, dtype=np.bool_)
        read[:first] = True
        if reuse is not None and reuse.same_search(state, ns, query, filters, exact):
            # every candidate the narrower set looked up counts as read, in the
            # prefix or past it: taken from there
            seen = np.isin(keys, reuse.looked_up)
            rows, scores = reuse._taken(keys[seen])
            fresh = read & ~seen
            read |= seen
        else:
            rows, scores, fresh = [], (), read
        more, more_scores = _read_either(
            conn, ns, keys[fresh], approximate[fresh], query, filters, exact
        )
        rows, scores = rows + more, scores + more_scores
        unread = ~read
        rest, rest_scores = keys[unread], approximate[unread]
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
            unread=rest,
            # sorted best first: the first unread candidate's is the highest
            unread_scores=rest_scores,
            bound=_bound(rest_scores, exact),
            exact=exact,
            looked_up=keys[read],
        )

    def same_search(
        self, state: FileState, ns: str, query: Vector, filters: SearchFilter, exact: bool
    ) -> bool:
        """Whether this set was read for this namespace, query and filters in the file
        as it is now, with scores of the same kind (its rows and scores stand)."""
        return self.exact == exact and self.filters == filters and self._of(state, ns, query)

    def _of(self, state: FileState, ns: str, query: Vector) -> bool:
        """Whether this set was read for this namespace and query in the file as it is
        now (what every reuse of it needs; filters and scores are each use's own)."""
        return (
            self.namespace == ns
            and self.state == state
            and self.query == np.asarray(query, dtype=np.float32).tobytes()
        )

    def _taken(self, keys: np.ndarray) -> tuple[list[Any], tuple[float, ...]]:
        """The rows this set read of the pks `keys` (those found), with their scores."""
        score_of = dict(zip(self.ids, self.scores, strict=True))
        held = {row[_PK]: row for row in self.rows.values()}
        rows = [held[pk] for pk in keys.tolist() if pk in held]
        return rows, tuple(score_of[row[ID]] for row in rows)

    def read_rest(self, conn: sqlite3.Connection) -> GraphCandidates:
        """This set with its unread candidates read too (kept under the same state: a
        write since then makes the next search read everything again)."""
        query = np.frombuffer(self.query, dtype=np.float32)
        rows, scores = _read_either(
            conn, self.namespace, self.unread, self.unread_scores, query, self.filters, self.exact
        )
        merged = dict(self.rows)
        merged.update((r[ID], r) for r in rows)
        return dataclasses.replace(
            self,
            ids=self.ids + tuple(r[ID] for r in rows),
            tiers=self.tiers + tuple(r[TIER] for r in rows),
            scores=self.scores + scores,
            rows=merged,
            unread=self.unread[:0],
            unread_scores=self.unread_scores[:0],
            bound=-np.inf,
            looked_up=np.concatenate([self.looked_up, self.unread]),
        )

    def answers(
        self,
        state: FileState,
        ns: str,
        query: Vector,
        filters: SearchFilter,
        fetch: int,
        *,
        exact: bool = True,
    ) -> bool:
        """Whether this set stands for a graph search of `fetch` candidates for this
        namespace, query and filters in the file as it is now, with exact scores if
        `exact` is asked."""
        return (
            (self.exact or not exact)
            and (self.complete or self.fetch >= fetch)
            and self.filters == filters
            and self._of(state, ns, query)
        )

    def cosines(self, state: FileState, ns: str, query: Vector) -> dict[str, float]:
        """The exact cosines this set holds, when it was read for this namespace and
        query in the file as it is now (any filters: a cosine does not depend on
        them); else none. A recall asks for the cosines of its lexical hits, which are
        mostly among the graph's candidates for the same query."""
        if not self._of(state, ns, query):
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

    def held(self, parts: Sequence[str]) -> int:
        """How many of the rows read are in the tiers `parts`."""
        wanted = set(parts)
        return sum(1 for tier in self.tiers if tier in wanted)

    def best(self, parts: Sequence[str], k: int) -> list[tuple[str, float]] | None:
        """The k best (id, cosine) in the tiers `parts`, best first, ties by id; None
        when the rows read cannot tell them: an unread candidate may beat the k-th
        (`read_rest`), or fewer than k are among these candidates and the graph holds
        more."""
        wanted = set(parts)
        pairs = [
            (i, s) for i, t, s in zip(self.ids, self.tiers, self.scores, strict=True) if t in wanted
        ]
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        if self.unread.size and (len(pairs) < k or pairs[k - 1][1] <= self.bound):
            return None
        if len(pairs) < k and not self.complete:
            return None
        return pairs[:k]


def shortlist(scores: np.ndarray, k: int, *, exact: bool = True) -> npt.NDArray[np.intp]:
    """The candidates (positions in `scores`, approximate cosines) that may be among the
    k best when all of them pass. Re-scored exactly (`exact`): those within twice the
    float16 error of the k-th best approximate cosine (a candidate of the exact k best
    is at most that far below it). Ranked on these cosines: the k best, and those tied
    with the k-th. Of candidates sorted best first, a prefix."""
    if scores.size <= k:
        return np.arange(scores.size)
    kth = np.partition(scores, scores.size - k)[scores.size - k]
    return np.flatnonzero(scores >= (kth - 2 * FLOAT16_ERROR if exact else kth))


def _bound(unread_scores: np.ndarray, exact: bool) -> float:
    """At or above the score of every unread candidate (sorted best first): its exact
    cosine is within the float16 error of the graph's; a set ranked on the graph's
    cosines has the graph's as scores."""
    if not unread_scores.size:
        return -np.inf
    return float(unread_scores[0]) + (FLOAT16_ERROR if exact else 0.0)


def _read_either(
    conn: sqlite3.Connection,
    ns: str,
    keys: np.ndarray,
    approximate: np.ndarray,
    query: Vector,
    filters: SearchFilter,
    exact: bool,
) -> tuple[list[Any], tuple[float, ...]]:
    """`_read` (exact scores) or `_read_light` (the graph's `approximate` ones)."""
    if exact:
        return _read(conn, ns, keys, query, filters)
    return _read_light(conn, ns, keys, approximate, filters)


def _read(
    conn: sqlite3.Connection, ns: str, keys: np.ndarray, query: Vector, filters: SearchFilter
) -> tuple[list[Any], tuple[float, ...]]:
    """The rows of the candidates `keys` still live in `ns` that pass `filters`, and
    their exact cosines to `query`."""
    rows = _rows(conn, ns, keys, filters, f"SELECT {_COLUMNS} FROM {_FROM}")
    if not rows:
        return [], ()
    matrix = np.frombuffer(b"".join(r[EMBEDDING] for r in rows), dtype="<f4")
    return rows, tuple((unit_rows(matrix.reshape(len(rows), -1)) @ query).tolist())


def _read_light(
    conn: sqlite3.Connection,
    ns: str,
    keys: np.ndarray,
    approximate: np.ndarray,
    filters: SearchFilter,
) -> tuple[list[Any], tuple[float, ...]]:
    """`_read` without the vectors: the rows, and the graph's cosines `approximate`
    (one per key) as their scores."""
    rows = _rows(conn, ns, keys, filters, f"SELECT {_LIGHT_COLUMNS} FROM memories AS m{TEXT_JOIN}")
    if not rows:
        return [], ()
    score_of = dict(zip(keys.tolist(), approximate.tolist(), strict=True))
    return rows, tuple(score_of[r[_PK]] for r in rows)


def _rows(
    conn: sqlite3.Connection, ns: str, keys: np.ndarray, filters: SearchFilter, select: str
) -> list[Any]:
    """`select` (from `memories AS m`) of the candidates `keys` still live in `ns` that
    pass `filters`."""
    if not keys.size:
        return []
    clauses, params = search_filter_sql(filters)
    where = "".join(f" AND {c}" for c in clauses)
    # `+`: look the candidates up by pk, not through an index of the namespace. Plain
    # tuples, not `sqlite3.Row`s: the rows stay alive for the search's later phases,
    # and an object less for each lets fewer of the garbage collector's passes run.
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute(
        f"{select} WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ?{where}",
        (json_ints(keys.tolist()), ns, *params),
    ).fetchall()
