"""Lexical search of the embedded store: BM25 over the per-namespace index (`lexicon`).

Words follow FTS5's unicode61 rules with Snowball English stems
(`tiered_memory.lexicon`). Every statistic BM25 uses (documents, lengths, document
frequencies) is the namespace's own, so its results and scores are the same whatever
other namespaces hold, and reveal nothing of them. Terms found in half the namespace's
texts or more are left out of the query (their idf is 1e-6), and above `rows` texts
only the rarest terms are scored, so one search scores at most that many texts
(`LexicalSearch.terms`). Scoring reads postings alone; the tier and filters are checked
on the best rows afterwards.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tiered_memory.lexicon import LexicalStatistics, query_terms
from tiered_memory.models import LIVE_TIERS, Tier
from tiered_memory.ports import ScoredMemory, SearchFilter
from tiered_memory.validation import check_k, check_namespace

from . import lexicon
from .database import SQLiteDatabase, file_state
from .locator import RowLocator
from .memories import memory_of
from .memory_columns import ID, TEXT_JOIN, TIER, columns
from .sql import IN_JSON, json_list, search_filter_sql, tier_values

# Texts one lexical search may score with BM25 (~1.5 us each): in a bigger store only
# the rarest query words are used, as many as fit under this many matches. On LoCoMo
# (1,200 turns) a cap of 1,000 ranks exactly as no cap; 300 and 100 rank slightly better.
DEFAULT_LEXICAL_ROWS = 1_000

ScoreKey = tuple[int, tuple[str, ...], tuple[int, int, int]]

_NO_FILTER = SearchFilter()  # frozen, so one shared default is safe
_ROW = columns("m", False)  # a hit's columns (`memory_of`), without its embedding


class LexicalSearch:
    """BM25 search over the lexicon of one open file; `rows` bounds a search's work."""

    def __init__(
        self,
        database: SQLiteDatabase,
        *,
        rows: int = DEFAULT_LEXICAL_ROWS,
        locator: RowLocator | None = None,
    ) -> None:
        self._db = database
        self.rows = rows
        self._locator = locator  # told where the hits' rows are (for their cosines)
        self._last_scores: tuple[ScoreKey, lexicon.Ranked] | None = None
        self._passing: _Passing | None = None  # the last search's rows, for its next phase

    async def search(
        self,
        namespace: str,
        text: str,
        *,
        tiers: frozenset[Tier],
        k: int,
        filters: SearchFilter = _NO_FILTER,
    ) -> list[ScoredMemory]:
        ns = check_namespace(namespace)
        check_k(k)
        parts = tier_values(frozenset(tiers) & LIVE_TIERS)
        terms = query_terms(text) if isinstance(text, str) else []
        if not terms or not parts:
            return []
        clauses, params = search_filter_sql(filters, "m")
        where = "".join(f" AND {c}" for c in clauses)
        await self._db.gate()
        with self._db.read() as conn:
            if not _any_in(conn, ns, parts):
                return []  # e.g. the COLD phase of a store without COLD memories
            state = file_state(conn)  # before the reads: what they saw is kept under it
            lexicon_id, stats = lexicon.statistics(conn, ns, terms, cap=self.rows)
            kept = self.terms(stats, terms)
            if lexicon_id is None or not kept:
                return []
            if filters.ids is not None:
                scored = _among_ids(conn, ns, lexicon_id, stats, kept, filters.ids)
            else:
                scored = self._scores(conn, lexicon_id, stats, kept, state)
            key = (ns, lexicon_id, tuple(kept), filters, state)
            if self._passing is None or self._passing.key != key:
                self._passing = _Passing(key)
            passing = self._passing
            wanted = set(parts)
            count = passing.count(scored.pks, wanted)
            batch = k
            scores = scored.scores
            while count < k and passing.upto < len(scores):
                end = min(len(scores), passing.upto + batch)
                while end < len(scores) and scores[end] == scores[end - 1]:
                    end += 1  # a batch ends between two scores, never inside a tie
                added = passing.read(conn, ns, scored.pks, end, where, params)
                count += sum(1 for tier, _ in added if tier in wanted)
                batch *= 4
            # Once k rows of a best-first prefix pass, no later (lower-scored) row can
            # beat them; a longer prefix read by an earlier phase ends between two
            # scores too, so its extra rows rank below all of these.
            found = [
                (scores[j], pk, row[1])
                for j, pk in enumerate(scored.pks[: passing.upto])
                if (row := passing.rows.get(pk)) is not None and row[0] in wanted
            ]
            found.sort(key=lambda hit: (-hit[0], -hit[1]))
            best = found[:k]
            whole = passing.whole
            rows = {pk: whole[pk] for _, pk, _ in best if pk in whole}
            unread = [pk for _, pk, _ in best if pk not in rows]
            if unread:
                rows.update(
                    (row[-1], row)
                    for row in conn.execute(
                        f"SELECT {_ROW}, m.pk FROM memories AS m{TEXT_JOIN} "
                        "WHERE m.pk IN (SELECT value FROM json_each(?)) AND +m.namespace = ?",
                        (json.dumps(unread), ns),
                    )
                )
        if self._locator is not None:
            self._locator.note(ns, ((row[1], pk) for pk, row in rows.items()), state)
        return [
            ScoredMemory(memory_of(rows[pk], False), max(0.0, score))
            for score, pk, _ in best
            if pk in rows
        ]

    async def statistics(self, namespace: str, text: str) -> LexicalStatistics:
        """The namespace's BM25 statistics for the terms of `text`: its documents and
        tokens, and each term's document frequency (keyed by `lexicon.query_terms`).
        Counted over this namespace only, like the scores of `search`."""
        ns = check_namespace(namespace)
        terms = query_terms(text) if isinstance(text, str) else []
        await self._db.gate()
        with self._db.read() as conn:
            return lexicon.statistics(conn, ns, terms)[1]

    def terms(self, stats: LexicalStatistics, terms: list[str]) -> list[str]:
        """The query terms worth scoring, with the work bounded; from the namespace's
        own statistics only, so which terms count never depends on other namespaces.

        Terms found in half of the namespace's texts or more are left out, unless all
        are (their idf is 1e-6: they add nothing to any score). In a namespace of more
        than `rows` texts, only the rarest terms are kept, as many as fit with their
        summed document frequencies under `rows`: the rare terms are the ones whose
        BM25 weight decides the ranking. When no term is that rare, there is no lexical
        signal worth its cost, and no lexical hit (the vector half still ranks
        everything).
        """
        cap = self.rows
        frequency = stats.frequencies
        matching = [t for t in terms if frequency.get(t, 0) > 0]
        if stats.documents <= cap:  # a small namespace bounds the work by itself
            informative = [t for t in matching if 2 * frequency[t] < stats.documents]
            return informative or matching
        kept: list[str] = []
        budget = cap
        for term in sorted(matching, key=lambda t: frequency[t]):
            if frequency[term] > budget:
                break
            kept.append(term)
            budget -= frequency[term]
        return [t for t in terms if t in kept]  # in query order, which fixes the sums

    def _scores(
        self,
        conn: sqlite3.Connection,
        ns: int,
        stats: LexicalStatistics,
        terms: list[str],
        state: tuple[int, int, int],
    ) -> lexicon.Ranked:
        """The BM25 of every text of the namespace holding one of `terms`, best first,
        before any filter. The last result is reused while nothing was written (this
        connection's change count and `PRAGMA data_version` for other connections
        unchanged): a search that reaches the COLD phase asks for the same terms again.
        `state`: the file's, taken before this search read anything.
        """
        key = (ns, tuple(terms), state)
        if self._last_scores is not None and self._last_scores[0] == key:
            return self._last_scores[1]
        scored = lexicon.ranked(conn, ns, stats, terms)
        self._last_scores = (key, scored)
        return scored


@dataclass
class _Passing:
    """How far down one scoring's best-first list the rows were read (`upto`), with
    the tier and id of each row that passed the filters (any tier).

    A recall's COLD phase scores the same words as its active phase (`_scores`); it
    read the same rows again, in batches, for the other tiers. Reading the tier of
    each row once, for every tier, lets the next phase start from what is known and
    read on only when it needs more; full rows are read for the k kept alone (a
    batch returned every passing row in full: about 190 rows a phase at 100k for 84
    kept). Valid for one namespace, terms, filters and state of the file (`key`).
    """

    key: tuple[Any, ...]
    upto: int = 0
    rows: dict[int, tuple[str, str]] = field(default_factory=dict)  # pk -> (tier, id)
    # The first batch's rows in full (`_ROW`, then the pk): when k of them pass, as in
    # a store whose matches are all in the searched tiers, they are the answer, and
    # reading them again by pk cost a second statement and k more seeks.
    whole: dict[int, Any] = field(default_factory=dict)

    def count(self, pks: Sequence[int], tiers: set[str]) -> int:
        """Rows of the tiers `tiers` among those read (`pks`: the scoring's, best first)."""
        rows = self.rows
        return sum(1 for pk in pks[: self.upto] if (row := rows.get(pk)) and row[0] in tiers)

    def read(
        self,
        conn: sqlite3.Connection,
        ns: str,
        pks: Sequence[int],
        end: int,
        where: str,
        params: Sequence[Any],
    ) -> list[tuple[str, str]]:
        """Read the rows of `pks[upto:end]` (the scoring's, best first) that pass the
        filters; returns their (tier, id)."""
        wanted = json.dumps(pks[self.upto : end])
        join = "FROM json_each(?) AS j CROSS JOIN memories AS m ON m.pk = j.value "
        cursor = conn.cursor()
        cursor.row_factory = None  # plain tuples: kept for the next phase (graph_candidates)
        if self.upto == 0:  # the first batch, whole (`whole`)
            rows = cursor.execute(
                f"SELECT {_ROW}, m.pk {join}{TEXT_JOIN} WHERE m.namespace = ?{where}",
                (wanted, ns, *params),
            ).fetchall()
            self.whole.update((row[-1], row) for row in rows)
            found = [(row[-1], row[TIER], row[ID]) for row in rows]
        else:
            found = cursor.execute(
                f"SELECT m.pk, m.tier, m.id {join}WHERE m.namespace = ?{where}",
                (wanted, ns, *params),
            ).fetchall()
        self.upto = end
        added = [(tier, id_) for _, tier, id_ in found]
        self.rows.update((pk, (tier, id_)) for pk, tier, id_ in found)
        return added


def _any_in(conn: sqlite3.Connection, ns: str, parts: Sequence[str]) -> bool:
    """Whether the namespace has a memory in these tiers (one index probe)."""
    return any(
        conn.execute(
            "SELECT 1 FROM memories WHERE namespace = ? AND tier = ? LIMIT 1", (ns, part)
        ).fetchone()
        for part in parts
    )


def _among_ids(
    conn: sqlite3.Connection,
    ns: str,
    lexicon_id: int,
    stats: LexicalStatistics,
    terms: list[str],
    ids: frozenset[str],
) -> lexicon.Ranked:
    """BM25 of the given memories only (explain, pinned memories). The terms are those
    a search without `ids` scores, so a memory gets the same lexical score either way."""
    pks = [
        int(row[0])
        for row in conn.execute(
            f"SELECT pk FROM memories WHERE namespace = ? AND id {IN_JSON}",
            (ns, json_list(sorted(ids))),
        )
    ]
    if not pks:
        return lexicon.Ranked([], [])
    return lexicon.ranked(conn, lexicon_id, stats, terms, pks)
