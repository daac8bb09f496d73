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

from tiered_memory.lexicon import LexicalStatistics, bm25, query_terms
from tiered_memory.models import LIVE_TIERS, Tier
from tiered_memory.ports import ScoredMemory, SearchFilter
from tiered_memory.validation import check_k, check_namespace

from . import lexicon
from .database import SQLiteDatabase
from .memories import columns, memory_of
from .sql import IN_JSON, json_list, placeholders, search_filter_sql, tier_values

# Texts one lexical search may score with BM25 (~1.5 us each): in a bigger store only
# the rarest query words are used, as many as fit under this many matches. On LoCoMo
# (1,200 turns) a cap of 1,000 ranks exactly as no cap; 300 and 100 rank slightly better.
DEFAULT_LEXICAL_ROWS = 1_000

ScoreKey = tuple[int, tuple[str, ...], int, int]

_NO_FILTER = SearchFilter()  # frozen, so one shared default is safe


def _best_first(scores: dict[int, float]) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


class LexicalSearch:
    """BM25 search over the lexicon of one open file; `rows` bounds a search's work."""

    def __init__(self, database: SQLiteDatabase, *, rows: int = DEFAULT_LEXICAL_ROWS) -> None:
        self._db = database
        self.rows = rows
        self._last_scores: tuple[ScoreKey, list[tuple[int, float]]] | None = None

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
        rows_sql = (
            f"SELECT m.pk, {columns('m', False)} FROM json_each(?) AS j "
            "CROSS JOIN memories AS m ON m.pk = j.value "
            f"WHERE m.namespace = ? AND m.tier IN ({placeholders(len(parts))}){where}"
        )
        await self._db.gate()
        with self._db.read() as conn:
            if not _any_in(conn, ns, parts):
                return []  # e.g. the COLD phase of a store without COLD memories
            lexicon_id, stats = lexicon.statistics(conn, ns, terms, cap=self.rows)
            kept = self.terms(stats, terms)
            if lexicon_id is None or not kept:
                scored = []
            elif filters.ids is not None:
                scored = _among_ids(conn, ns, lexicon_id, stats, kept, filters.ids)
            else:
                scored = self._scores(conn, lexicon_id, stats, kept)
            found: list[tuple[float, sqlite3.Row]] = []
            start, batch = 0, k
            while start < len(scored) and len(found) < k:
                end = min(len(scored), start + batch)
                while end < len(scored) and scored[end][1] == scored[end - 1][1]:
                    end += 1  # a batch ends between two scores, never inside a tie
                score_of = dict(scored[start:end])
                wanted = json.dumps(list(score_of))
                for row in conn.execute(rows_sql, (wanted, ns, *parts, *params)):
                    found.append((score_of[row["pk"]], row))
                start, batch = end, batch * 4
        # Once k rows of a best-first prefix pass, no later (lower-scored) row can beat them.
        found.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
        return [ScoredMemory(memory_of(row, False), max(0.0, score)) for score, row in found[:k]]

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
        self, conn: sqlite3.Connection, ns: int, stats: LexicalStatistics, terms: list[str]
    ) -> list[tuple[int, float]]:
        """(pk, BM25) of every text of the namespace holding one of `terms`, best first,
        before any filter. The last result is reused while nothing was written (this
        connection's change count and `PRAGMA data_version` for other connections
        unchanged): a search that reaches the COLD phase asks for the same terms again.
        """
        key = (
            ns,
            tuple(terms),
            conn.total_changes,
            int(conn.execute("PRAGMA data_version").fetchone()[0]),
        )
        if self._last_scores is not None and self._last_scores[0] == key:
            return self._last_scores[1]
        scored = _best_first(bm25(stats, terms, lexicon.postings(conn, ns, terms)))
        self._last_scores = (key, scored)
        return scored


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
) -> list[tuple[int, float]]:
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
        return []
    return _best_first(bm25(stats, terms, lexicon.postings(conn, lexicon_id, terms, pks)))
