"""The search phases of DESIGN.md section 4, over the ports.

1. HOT + WARM: vector top-N and lexical top-N.
2. Graph: neighbours of the best phase-1 hits (a COLD neighbour can come back).
3. COLD: when phase 1 found fewer than k hits above the relevance threshold, or deep.
4. ARCHIVED summaries, under the query's filters: when deep/include_archived, or when
   fewer than k strong hits were found and a summary reaches `archive_min_cosine`.
5. Context: the memories written just before and after the best hits, scored at least a
   share of their hit's score (the turn after a question often holds the answer).

Everything here is per namespace; the ports enforce it in their own queries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from .breaker import CircuitBreaker
from .cues import QueryCues, cue_bonus, is_reply, read_query, speaker_of
from .models import ArchiveRecord, Hit, Memory, ScoreTerms, SearchResults, Tier, filled
from .policy import FusionWeights, Policy
from .ports import (
    AssociationGraph,
    MemoryStore,
    ScoredMemory,
    SearchFilter,
    SupportsAdjacent,
    SupportsCosines,
    Vector,
)
from .scoring import Bounds, bounds, fuse, passes_noise_floor, rescored, score_terms
from .updates import lift_updates

log = logging.getLogger(__name__)

ACTIVE = frozenset({Tier.HOT, Tier.WARM})
COLD_ONLY = frozenset({Tier.COLD})


@dataclass(slots=True)  # ~150 a recall, alive to its end: no __dict__ each (gc passes)
class Candidate:
    memory: Memory
    phase: int
    cosine: float | None = None
    lexical: float | None = None
    graph: float | None = None
    via: str | None = None
    context: bool = False  # a neighbour in time of a strong hit


@dataclass
class CandidatePool:
    """Candidates by id; a memory found by several phases keeps every signal."""

    by_id: dict[str, Candidate] = field(default_factory=dict)

    def add(self, memory: Memory, phase: int, **signals: float | None) -> Candidate:
        cand = self.by_id.get(memory.id)
        if cand is None:
            cand = Candidate(memory=memory, phase=phase)
            self.by_id[memory.id] = cand
        elif cand.phase in (2, 5) and phase in (1, 3):
            # found directly too: it is not "reached through an association"
            cand.phase = phase
        for name, value in signals.items():
            if value is None:
                continue
            current = getattr(cand, name)
            if current is None or value > current:
                setattr(cand, name, value)
        return cand

    def __len__(self) -> int:
        return len(self.by_id)


@dataclass
class Ranking:
    """A ranking's hits, with the bounds each signal was normalised over (`scale`:
    vector, lexical, graph; `scoring.bounds`). A later ranking of the same pool, grown,
    takes from these hits what does not depend on the other candidates (decay terms,
    cue bonus), and the hits themselves while the scale stands: the same signals over
    the same bounds give the same terms (`Retriever.rank`, `earlier`)."""

    hits: list[Hit]
    scale: tuple[Bounds, Bounds, Bounds]
    archived: list[tuple[ArchiveRecord, float]]  # the summaries ranked, in their order
    archived_hits: list[Hit]  # theirs, in that order

    def known(self) -> dict[str, Hit]:
        """The live hits by id."""
        return {h.memory.id: h for h in self.hits if not h.archived}

    def archived_for(self, archived: list[tuple[ArchiveRecord, float]]) -> list[Hit] | None:
        """The hits of these summaries, when this ranking scored the same ones (the
        same list); else None."""
        return self.archived_hits if archived is self.archived else None


@dataclass(frozen=True)
class SearchPlan:
    """What one search call asked for, after validation."""

    k: int
    deep: bool = False
    include_archived: bool = False
    tiers: frozenset[Tier] | None = None  # explicit tiers replace the phase rules
    weights: FusionWeights = field(default_factory=FusionWeights)
    filters: SearchFilter = field(default_factory=SearchFilter)
    graph: bool = True
    force_ids: frozenset[str] = frozenset()  # explain(): always score these
    # explain(): the cosines exact, not an index's (`MemoryStore.vector_search`)
    exact_scores: bool = False
    fill: int | None = None  # items the caller will use (recall's max_items); default k


def archived_view(record: ArchiveRecord) -> Memory:
    """An archive record presented as a Memory so hits have one shape everywhere."""
    return Memory(
        id=record.id,
        namespace=record.namespace,
        content=record.summary,
        memory_type=record.memory_type,
        tier=Tier.ARCHIVED,
        importance=record.importance,
        source=record.source,
        metadata=record.metadata,
        created_at=record.created_at,
        updated_at=record.archived_at,
        use_count=record.use_count,
    )


class Retriever:
    """Runs the phases and ranks the candidates; knows nothing about budgets."""

    def __init__(
        self,
        store: MemoryStore,
        graph: AssociationGraph,
        policy: Policy,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.store = store
        self.graph = graph
        self.policy = policy
        self.breaker = breaker or CircuitBreaker(policy.retrieval.graph_cooldown_seconds)

    async def search(
        self, namespace: str, text: str, query: Vector, plan: SearchPlan, now: datetime
    ) -> SearchResults:
        rp = self.policy.retrieval
        pool = CandidatePool()
        degraded: list[str] = []
        filters = plan.filters
        if plan.deep and not filters.include_superseded:
            filters = SearchFilter(
                include_forgotten=filters.include_forgotten,
                include_superseded=True,
                pinned=filters.pinned,
                memory_types=filters.memory_types,
                metadata=filters.metadata,
                ids=filters.ids,
            )
        n = max(rp.candidates, plan.k)

        explicit = plan.tiers
        live_explicit = (explicit or frozenset()) - {Tier.ARCHIVED}
        first = live_explicit if explicit is not None else ACTIVE
        if first:
            await self._search_tiers(
                namespace, text, query, first, n, filters, pool, phase=1, exact=plan.exact_scores
            )

        if plan.graph and explicit is None and rp.graph_seeds > 0 and len(pool):
            if not self.breaker.allow():
                degraded.append(self.breaker.skipped_reason())
            else:
                try:
                    await self._expand_graph(namespace, query, plan, filters, pool)
                    self.breaker.succeeded()
                except Exception as e:  # the graph is optional: degrade, never fail a search
                    log.warning("graph expansion skipped in %r: %s", namespace, e)
                    self.breaker.failed(e)
                    degraded.append(f"graph: {type(e).__name__}: {e}")

        found = self._found(pool, plan.weights)
        if explicit is None and (plan.deep or found < plan.k):
            # COLD fills what the active tiers lacked: enough for the items still
            # missing, not a second full candidate set
            wanted = plan.k if plan.fill is None else plan.fill
            cold_n = min(n, max(rp.cold_candidates, wanted - found))
            await self._search_tiers(
                namespace,
                text,
                query,
                COLD_ONLY,
                cold_n,
                filters,
                pool,
                phase=3,
                exact=plan.exact_scores,
            )
            found = self._found(pool, plan.weights)

        archived = await self._search_archives(namespace, query, plan, filters, found)

        if plan.force_ids:
            await self._force(namespace, text, query, plan, pool, archived)

        cues = read_query(text)
        initial = self.rank(pool, archived, plan, now, cues)
        hits: list[Hit] = initial.hits
        ranking: Ranking | None = initial
        if rp.update_similarity is not None and rp.update_candidates > 1:
            hits = await self._with_updates(namespace, hits)
            ranking = None  # scores lifted: a later ranking does not take these hits
        if explicit is None and rp.context_seeds > 0 and isinstance(self.store, SupportsAdjacent):
            hits = await self._with_context(
                namespace, query, plan, filters, pool, archived, hits, ranking, now, cues
            )
        return SearchResults(hits, degraded=bool(degraded), reasons=degraded)

    async def _search_archives(
        self,
        namespace: str,
        query: Vector,
        plan: SearchPlan,
        filters: SearchFilter,
        found: int,
    ) -> list[tuple[ArchiveRecord, float]]:
        """Phase 4: archived summaries, under the query's own filters (the store applies
        them before k, as for live memories).

        Asked for (deep, include_archived, or ARCHIVED among explicit tiers), a summary
        joins above the noise floor. Unasked, it joins when the live tiers found fewer
        than `k` strong hits (seed 001's cold path) and only when it is close to the
        query (`archive_min_cosine`): never on a weak match (seed 002). Searching it only
        when nothing at all was found kept the archived half of a knowledge update ("I
        just reached Silver" before "... Gold") out of every recall that asked for it.
        """
        rp = self.policy.retrieval
        explicit = plan.tiers
        asked = (
            Tier.ARCHIVED in explicit
            if explicit is not None
            else plan.deep or plan.include_archived
        )
        if not (asked or (explicit is None and found < plan.k)) or rp.archived_limit <= 0:
            return []
        limit = max(rp.archived_limit, plan.k) if explicit is not None else rp.archived_limit
        floor = rp.noise_floor if asked else max(rp.noise_floor, rp.archive_min_cosine)
        return [
            (scored.record, scored.score)
            for scored in await self.store.search_archives(
                namespace, query, k=limit, filters=filters
            )
            if scored.score >= floor
        ]

    async def _with_updates(self, namespace: str, hits: list[Hit]) -> list[Hit]:
        """A later memory on the same subject as a better hit ranks just above it."""
        rp = self.policy.retrieval
        assert rp.update_similarity is not None
        top = [h.memory.id for h in hits if not h.archived][: rp.update_candidates]
        ids, vectors = await self.store.embeddings(namespace, top)
        if lift_updates(
            hits, ids, vectors, similarity=rp.update_similarity, min_gap=rp.update_min_gap
        ):
            hits.sort(key=lambda h: h.score, reverse=True)
        return hits

    async def _with_context(
        self,
        namespace: str,
        query: Vector,
        plan: SearchPlan,
        filters: SearchFilter,
        pool: CandidatePool,
        archived: list[tuple[ArchiveRecord, float]],
        hits: list[Hit],
        ranking: Ranking | None,
        now: datetime,
        cues: QueryCues,
    ) -> list[Hit]:
        """Phase 5: the replies around a strong hit follow it into the ranking.

        A neighbour in time joins only when it is another speaker's turn (see
        `cues.is_reply`): the answer to a question is the other party's next line,
        while one user's consecutive statements are independent memories (on
        LongMemEval, where only the user's turns are stored, pulling those in cost
        0.02-0.05 evidence recall at 250-500 tokens).

        A neighbour scores at least `context_decay` of its hit's score, so it comes
        right after the hit when the budget has room, never before it. Only memories
        the query's filters allow join; a filter the store applies (metadata) keeps
        the phase off, since neighbours are not fetched through it.
        """
        rp = self.policy.retrieval
        assert isinstance(self.store, SupportsAdjacent)
        if filters.metadata or filters.ids is not None:
            return hits
        seeds = [h for h in hits if not h.archived][: rp.context_seeds]
        # Only a turn with a known speaker has replies (`is_reply`): memories without
        # speakers (notes, facts, an agent's own records) need no neighbours read, which
        # cost a statement and ~20 rows (~1 ms of a 1M recall) to find none.
        speaking = [h.memory.id for h in seeds if speaker_of(h.memory.content, h.memory.metadata)]
        if not speaking:
            return hits
        around = await self.store.adjacent(
            namespace, speaking, within=rp.context_window, per_side=1
        )
        seed_by_id = {h.memory.id: h.memory for h in seeds}
        around = {
            seed_id: [m for m in ms if is_reply(seed_by_id[seed_id], m)]
            for seed_id, ms in around.items()
            if seed_id in seed_by_id
        }
        neighbours = {m.id: m for ms in around.values() for m in ms if self._allowed(m, filters)}
        fresh = [i for i in neighbours if i not in pool.by_id]
        cosines = await self._cosines(namespace, query, fresh)
        ranked_ids = {h.memory.id for h in hits}
        changed = False
        for memory in neighbours.values():
            cand = pool.by_id.get(memory.id) or pool.add(memory, 5, cosine=cosines.get(memory.id))
            cand.context = True  # passes the noise floor: its hit vouches for it
            changed = changed or memory.id not in ranked_ids
        ranked = (
            self.rank(pool, archived, plan, now, cues, earlier=ranking).hits if changed else hits
        )
        by_id = {h.memory.id: h for h in ranked if not h.archived}
        # floors from the scores before any was raised: context is one step, no chains
        floors = {
            h.memory.id: rp.context_decay * by_id[h.memory.id].score
            for h in seeds
            if h.memory.id in by_id
        }
        for seed in seeds:
            hit = by_id.get(seed.memory.id)
            if hit is None:
                continue
            floor = floors[seed.memory.id]
            for neighbour in around.get(seed.memory.id, []):
                near = by_id.get(neighbour.id)
                if near is not None and near.score < floor:
                    near.score = floor
                    near.terms.score = floor
                    if near.phase == 2:
                        continue  # reached through an association: that path explains it
                    if near.phase == 5 or not self._is_related(
                        pool.by_id[near.memory.id], plan.weights
                    ):
                        near.phase, near.via = 5, seed.memory.id
        ranked.sort(key=lambda h: h.score, reverse=True)
        return ranked

    async def _search_tiers(
        self,
        namespace: str,
        text: str,
        query: Vector,
        tiers: frozenset[Tier],
        n: int,
        filters: SearchFilter,
        pool: CandidatePool,
        *,
        phase: int,
        exact: bool,
    ) -> None:
        """Phases 1 and 3: the vector and lexical candidates of `tiers`. The cosines may
        be the store's index's (`exact_scores=False`, within ~1e-3): one term of a
        fused score, which ranks the same on them (issue 19: a recall at 1M memories
        read 90 float32 vectors for them, ~1 ms).

        The two searches run concurrently: a remote store answers both at once, and
        the embedded one walks a big HNSW graph on another thread while the lexical
        search runs (`VectorTable.walk_for`). The vector hits join the pool first, as
        when the searches ran one after the other."""
        vector_search = self.store.vector_search(
            namespace, query, tiers=tiers, k=n, filters=filters, exact_scores=exact
        )
        if not text.strip():
            for scored in await vector_search:
                pool.add(scored.memory, phase, cosine=scored.score)
            return
        vector, lexical = await _both(
            vector_search,
            self.store.lexical_search(namespace, text, tiers=tiers, k=n, filters=filters),
        )
        for scored in vector:
            pool.add(scored.memory, phase, cosine=scored.score)
        if lexical:
            missing = [s.memory for s in lexical if s.memory.id not in pool.by_id]
            cosines = await self._cosines(namespace, query, [m.id for m in missing])
            for scored in lexical:
                cand = pool.add(scored.memory, phase, lexical=scored.score)
                if cand.cosine is None:
                    cand.cosine = cosines.get(scored.memory.id)

    async def _cosines(self, namespace: str, query: Vector, ids: list[str]) -> dict[str, float]:
        """Raw cosines for memories found another way, so every candidate has all terms.

        A store that keeps its vectors at hand answers this itself (`SupportsCosines`);
        otherwise the embeddings are fetched and compared here.
        """
        if not ids:
            return {}
        if isinstance(self.store, SupportsCosines):
            return await self.store.cosines(namespace, query, ids)
        found = await self.store.get_many(namespace, ids, with_embeddings=True)
        return _cosines_of(query, found.values())

    async def _fetch_scored(
        self, namespace: str, query: Vector, ids: list[str]
    ) -> tuple[dict[str, Memory], dict[str, float]]:
        """Memories (without vectors) and their raw cosines to `query`."""
        if not ids:
            return {}, {}
        if isinstance(self.store, SupportsCosines):
            found = await self.store.get_many(namespace, ids)
            return found, await self.store.cosines(namespace, query, list(found))
        found = await self.store.get_many(namespace, ids, with_embeddings=True)
        return found, _cosines_of(query, found.values())

    async def _expand_graph(
        self,
        namespace: str,
        query: Vector,
        plan: SearchPlan,
        filters: SearchFilter,
        pool: CandidatePool,
    ) -> None:
        rp = self.policy.retrieval
        # Only real hits seed the walk: neighbours of noise are noise.
        bar, weights = rp.seed_threshold, plan.weights  # once, not per candidate
        found = [c for c in pool.by_id.values() if self._is_found(c, weights, bar)]
        ranked = sorted(
            found,
            key=lambda c: (c.cosine or 0.0) + (c.lexical or 0.0) * 1e-3,
            reverse=True,
        )
        seeds = [c.memory.id for c in ranked[: rp.graph_seeds]]
        if not seeds:
            return
        neighbours = await self.graph.neighbors(
            namespace,
            seeds,
            depth=rp.graph_depth,
            min_weight=rp.graph_min_weight,
            limit=rp.candidates,
        )
        if not neighbours:
            return
        new_ids = [n.id for n in neighbours if n.id not in pool.by_id]
        fetched, cosines = await self._fetch_scored(namespace, query, new_ids)
        for nb in neighbours:
            cand = pool.by_id.get(nb.id)
            if cand is not None:
                if cand.graph is None or nb.strength > cand.graph:
                    cand.graph, cand.via = nb.strength, nb.seed
                continue
            memory = fetched.get(nb.id)
            if memory is None or not self._allowed(memory, filters):
                continue
            cand = pool.add(memory, 2, cosine=cosines.get(nb.id), graph=nb.strength)
            cand.via = nb.seed

    @staticmethod
    def _allowed(memory: Memory, filters: SearchFilter) -> bool:
        """Graph neighbours bypass the store's search filters, so check the cheap ones here."""
        if memory.do_not_inject and not filters.include_forgotten:
            return False
        if memory.superseded and not filters.include_superseded:
            return False
        if filters.pinned is not None and memory.pinned != filters.pinned:
            return False
        if filters.memory_types is not None and memory.memory_type not in filters.memory_types:
            return False
        if filters.ids is not None and memory.id not in filters.ids:
            return False
        return not filters.metadata  # metadata filters are store-side only

    def _found(self, pool: CandidatePool, weights: FusionWeights) -> int:
        """Hits that count as 'found' for the phase rules: close enough in meaning, or
        (when the caller turned vectors off) matched lexically."""
        threshold = self.policy.retrieval.relevance_threshold
        return sum(1 for c in pool.by_id.values() if self._is_found(c, weights, threshold))

    def _is_related(self, c: Candidate, weights: FusionWeights) -> bool:
        """Related enough to seed the graph walk, or to count as found on its own merits
        rather than through an association; a lower bar than 'found'."""
        return self._is_found(c, weights, self.policy.retrieval.seed_threshold)

    @staticmethod
    def _is_found(c: Candidate, weights: FusionWeights, threshold: float) -> bool:
        return (c.cosine is not None and c.cosine >= threshold) or bool(
            weights.vector == 0 and c.lexical
        )

    async def _force(
        self,
        namespace: str,
        text: str,
        query: Vector,
        plan: SearchPlan,
        pool: CandidatePool,
        archived: list[tuple[ArchiveRecord, float]],
    ) -> None:
        missing = [i for i in plan.force_ids if i not in pool.by_id]
        if not missing:
            return
        found, cosines = await self._fetch_scored(namespace, query, missing)
        lexical: dict[str, float] = {}
        if text.strip() and found:
            # one lookup for all of them: BM25 of these ids only, whatever their tier
            for scored in await self.store.lexical_search(
                namespace,
                text,
                tiers=frozenset(m.tier for m in found.values()),
                k=len(found),
                filters=SearchFilter(
                    include_forgotten=True,
                    include_superseded=True,
                    ids=frozenset(found),
                ),
            ):
                lexical[scored.memory.id] = scored.score
        for memory in found.values():
            pool.add(memory, 0, cosine=cosines.get(memory.id), lexical=lexical.get(memory.id))
        qn = float(np.linalg.norm(query)) or 1.0
        have = {r.id for r, _ in archived}
        records = await self.store.get_archives(
            namespace, [i for i in missing if i not in found and i not in have]
        )
        for record in records.values():
            cosine = 0.0
            if record.summary_embedding is not None:
                vec = np.asarray(record.summary_embedding, dtype=np.float32)
                cosine = float(np.dot(query, vec) / (qn * (float(np.linalg.norm(vec)) or 1.0)))
            archived.append((record, cosine))

    def rank(
        self,
        pool: CandidatePool,
        archived: list[tuple[ArchiveRecord, float]],
        plan: SearchPlan,
        now: datetime,
        cues: QueryCues | None = None,
        *,
        earlier: Ranking | None = None,
    ) -> Ranking:
        """Score every candidate (relevance normalised over this candidate set) and sort.

        `earlier`: a ranking of this pool, at the same `now`, before more candidates
        joined it (the context phase). A candidate it scored keeps its decay terms and
        cue bonus, which depend on the memory and the query alone, and only its
        relevance is normalised again (`scoring.rescored`); when every signal's bounds
        are still the earlier ones, it keeps its hit as it is. The context phase ranked
        the whole pool again for the few replies it adds: on LoCoMo dev every recall
        did, and the two rankings took about a third of its time."""
        rp = self.policy.retrieval
        best_lexical = max((c.lexical or 0.0 for c in pool.by_id.values()), default=0.0)
        lexical_only = plan.weights.vector == 0  # exact-id lookups: cosine is not asked for
        cands = [
            c
            for c in pool.by_id.values()
            if c.memory.id in plan.force_ids
            or c.context
            or (lexical_only and c.lexical)
            or passes_noise_floor(
                c.cosine,
                (c.lexical or 0.0) / best_lexical if best_lexical > 0 else None,
                c.graph,
                rp.noise_floor,
                rp.lexical_floor,
            )
        ]
        live_n = len(cands)
        cosines = [c.cosine for c in cands] + [score for _, score in archived]
        lexical = [c.lexical for c in cands] + [None] * len(archived)
        graph = [c.graph for c in cands] + [None] * len(archived)
        scale = (bounds(cosines), bounds(lexical), bounds(graph))
        relevance, nv, nl, ng = fuse(cosines, lexical, graph, plan.weights)
        known = earlier.known() if earlier is not None else {}
        same_scale = earlier is not None and earlier.scale == scale

        hits: list[Hit] = []
        for i, cand in enumerate(cands):
            m = cand.memory
            prior = known.get(m.id)
            if prior is not None and same_scale:
                hits.append(prior)  # the same signals over the same bounds
                continue
            signals = {
                "cosine": cand.cosine or 0.0,
                "vector": nv[i],
                "lexical": nl[i],
                "graph": ng[i],
            }
            if prior is not None:
                relevance[i] += prior.terms.cues
                terms = rescored(
                    prior.terms, m.tier, self.policy, relevance=relevance[i], **signals
                )
            else:
                bonus = (
                    cue_bonus(
                        cues,
                        m.content,
                        m.metadata,
                        speaker_weight=plan.weights.speaker,
                        time_weight=plan.weights.time,
                    )
                    if cues is not None
                    else 0.0
                )
                relevance[i] += bonus
                terms = score_terms(
                    m, now, self.policy, relevance=relevance[i], cues=bonus, **signals
                )
            score = terms.score
            # Reached through an association: linked, and not found on its own merits.
            # (Direct searches of small tiers return every row, related or not.)
            via_graph = bool(cand.graph) and not self._is_related(cand, plan.weights)
            phase = 2 if via_graph else cand.phase
            hits.append(_hit(m, m.tier, score, terms, phase, cand.via))
        priors = earlier.archived_for(archived) if earlier is not None else None
        if priors is not None and same_scale:
            archived_hits = priors
        else:
            archived_hits = []
            for j, (record, cosine) in enumerate(archived):
                i = live_n + j
                if priors is not None:
                    view = priors[j].memory
                    terms = rescored(
                        priors[j].terms,
                        Tier.ARCHIVED,
                        self.policy,
                        relevance=relevance[i],
                        cosine=cosine,
                        vector=nv[i],
                    )
                else:
                    view = archived_view(record)
                    terms = score_terms(
                        view, now, self.policy, relevance=relevance[i], cosine=cosine, vector=nv[i]
                    )
                archived_hits.append(_hit(view, Tier.ARCHIVED, terms.score, terms, 4, None))
        hits.extend(archived_hits)
        hits.sort(key=lambda h: h.score, reverse=True)
        return Ranking(hits, scale, archived, archived_hits)


async def _both(
    first: Awaitable[list[ScoredMemory]], second: Awaitable[list[ScoredMemory]]
) -> tuple[list[ScoredMemory], list[ScoredMemory]]:
    """Both results, the two awaited concurrently (`first` starts first). A failure of
    either is raised once both have ended, the first's before the second's: neither
    is left running unobserved behind the caller."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    if isinstance(a, BaseException):
        raise a
    if isinstance(b, BaseException):
        raise b
    return a, b


def _hit(
    memory: Memory, tier: Tier, score: float, terms: ScoreTerms, phase: int, via: str | None
) -> Hit:
    """A ranked hit, built without a second validation (`models.filled`): every part
    comes from this module's own scoring."""
    return filled(
        Hit,
        {
            "memory": memory,
            "tier": tier,
            "score": float(score),
            "terms": terms,
            "phase": phase,
            "via": via,
            "tokens": 0,
        },
    )


def _cosines_of(query: Vector, memories: Iterable[Memory]) -> dict[str, float]:
    """Raw cosines of memories fetched with their embeddings (which hits never carry,
    so they are dropped here)."""
    out: dict[str, float] = {}
    qn = float(np.linalg.norm(query)) or 1.0
    for memory in memories:
        if memory.embedding is None:
            continue
        vec = np.asarray(memory.embedding, dtype=np.float32)
        out[memory.id] = float(np.dot(query, vec) / (qn * (float(np.linalg.norm(vec)) or 1.0)))
        memory.embedding = None
    return out


def filter_hits(hits: list[Hit], ids: Collection[str]) -> list[Hit]:
    wanted = set(ids)
    return [h for h in hits if h.memory.id in wanted]
