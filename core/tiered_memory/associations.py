"""Associations (DESIGN.md section 6): how links between memories are made, made
stronger and undone.

- **Auto-linking on add**: a new memory links to its `autolink_top_k` nearest memories
  at cosine `autolink_min_similarity` or above, weighted by the similarity (the
  neighbours are the ones deduplication found: `dedup.screen`).
- **Explicit links**: `link()`, between two memories of one namespace.
- **Co-recall strengthening**: memories injected together strengthen their link by
  `co_recall_boost` (off by default: with no item cap an injection holds dozens of
  lines, and strengthening every pair turned the graph into a clique).
- **Unlinking**: a replaced memory loses the links derived from its old content or use
  (explicit ones stay); a link written while one of its ends was archived or deleted
  (by a sweep in another process, say) is undone.

The graph writes of adding and recalling never fail the caller: the memories are
stored either way, and links are an optimisation. They are skipped at once while the
graph is known to be down (the retriever's circuit breaker).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Coroutine, Sequence
from datetime import datetime
from typing import Any

from . import validation
from .breaker import CircuitBreaker
from .errors import ValidationError
from .models import Link, LinkKind, filled
from .policy import AssociationPolicy
from .ports import AssociationGraph, MemoryStore, SupportsLiveIds

log = logging.getLogger(__name__)

Pair = tuple[str, str]


def similarity_links(
    source: str, near: Sequence[tuple[str, float]], ap: AssociationPolicy, now: datetime
) -> list[Link]:
    """The auto-links of a new memory to its nearest memories (`near`, best first).
    Built without validation (a batch of 500 makes 1,500): ids the store returned, a
    weight in [0, 1] and the timestamps of the call."""
    return [
        _similar(source, other, min(1.0, similarity), now)
        for other, similarity in near[: ap.autolink_top_k]
        if similarity >= ap.autolink_min_similarity and other != source
    ]


def _similar(source: str, target: str, weight: float, now: datetime) -> Link:
    """An auto-link, filled the way `Link.model_construct` fills one (every field set)
    for a fifth of its cost: it walked every field, about 10 us a link, 30 us of each
    added memory's."""
    values: dict[str, Any] = {
        "source": source,
        "target": target,
        "weight": weight,
        "kind": LinkKind.SIMILAR,
        "created_at": now,
        "updated_at": now,
    }
    return filled(Link, values)


def explicit_link(source: str, target: str, weight: float, now: datetime) -> Link:
    """A link the caller asked for, of a weight in [0, 1]; a memory is never linked to
    itself."""
    if source == target:
        raise ValidationError("a memory cannot be linked to itself")
    return Link(
        source=source,
        target=target,
        weight=validation.check_importance(weight),
        kind=LinkKind.EXPLICIT,
        created_at=now,
        updated_at=now,
    )


def co_recall_pairs(ids: Sequence[str]) -> list[Pair]:
    """Every pair of memories injected together, each once."""
    return list(itertools.combinations(sorted(ids), 2))


def derived(links: Sequence[Link]) -> list[Pair]:
    """The links made from a memory's content or use (similarity, co-recall,
    consolidation), not asked for: the ones a replaced memory loses."""
    return [(link.source, link.target) for link in links if link.kind is not LinkKind.EXPLICIT]


class Associations:
    """The graph writes that come with adding, replacing and recalling memories."""

    def __init__(
        self,
        store: MemoryStore,
        graph: AssociationGraph,
        policy: AssociationPolicy,
        breaker: CircuitBreaker,
    ) -> None:
        self.store, self.graph, self.policy, self.breaker = store, graph, policy, breaker

    async def link_new(self, ns: str, links: Sequence[Link], *, live: Collection[str] = ()) -> None:
        """Write the auto-links of new memories. `live`: ends that cannot have gone
        meanwhile (the memories written in the transaction the links join), which the
        check for gone ends (`_unlink_gone`) need not look up."""
        if links:
            await self._optional("auto-linking", ns, lambda: self._link_live(ns, links, live))

    async def unlink_replaced(self, ns: str, ids: Sequence[str]) -> None:
        """Drop the derived links of replaced memories; auto-linking then links their
        new content."""
        if ids:
            await self._optional(
                "relinking replaced memories", ns, lambda: self._unlink_derived(ns, ids)
            )

    async def co_recalled(self, ns: str, ids: Sequence[str], now: datetime) -> None:
        """Strengthen the links between memories injected together."""
        boost = self.policy.co_recall_boost
        pairs = co_recall_pairs(ids)
        if pairs and boost > 0:  # at 0, writing zero-weight links would only cost time
            await self._optional(
                "co-recall strengthening", ns, lambda: self._strengthen_live(ns, pairs, boost, now)
            )

    async def _link_live(self, ns: str, links: Sequence[Link], live: Collection[str]) -> None:
        await self.graph.upsert_links(ns, links)
        await self._unlink_gone(ns, [(link.source, link.target) for link in links], live)

    async def _strengthen_live(
        self, ns: str, pairs: Sequence[Pair], boost: float, now: datetime
    ) -> None:
        await self.graph.strengthen(ns, pairs, boost, now)
        await self._unlink_gone(ns, pairs)

    async def _unlink_derived(self, ns: str, ids: Sequence[str]) -> None:
        stale = derived(await self.graph.links_of(ns, ids))
        if stale:
            await self.graph.unlink(ns, stale)

    async def _unlink_gone(
        self, ns: str, pairs: Sequence[Pair], known: Collection[str] = ()
    ) -> None:
        """Undo links whose end was archived (or deleted) while they were written, e.g.
        by a sweep in another process. The archiver drops a memory's links before and
        after its record replaces it; this check covers a link written after that.
        `known`: ends known to be live (not looked up)."""
        ends = list({end for pair in pairs for end in pair}.difference(known))
        found: Collection[str]
        if not ends:
            found = ()
        elif isinstance(self.store, SupportsLiveIds):
            found = await self.store.live_ids(ns, ends)
        else:
            found = (await self.store.get_many(ns, ends)).keys()
        live = set(found).union(known)
        gone = [(a, b) for a, b in pairs if a not in live or b not in live]
        if gone:
            await self.graph.unlink(ns, gone)

    async def _optional(
        self, what: str, ns: str, call: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        """Run a graph write that must never fail the caller; skipped at once while the
        graph is known to be down."""
        if not self.breaker.allow():
            log.info("%s skipped in %r: %s", what, ns, self.breaker.skipped_reason())
            return
        try:
            await call()
            self.breaker.succeeded()
        except Exception as e:
            self.breaker.failed(e)
            log.warning("%s skipped in %r: %s", what, ns, e)
