"""`AsyncTieredMemory` (the engine) and `TieredMemory` (its sync facade).

The engine checks a call's input and runs it: it holds no backend details and no rule
of its own. Tier transitions live in `lifecycle` (run by `sweep`), scores in
`scoring`/`decay`, the search in `plans` and `retrieval`, budgets in `budget`,
associations in `associations`, duplicates in `dedup`, the write path in `intake` and
`writes`, archival in `archival`/`archive`.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from datetime import datetime, timedelta
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from . import lifecycle, telemetry, validation
from .archival import ArchivalPipeline
from .archive import Archiver
from .associations import Associations, explicit_link
from .budget import SHARE_ORDER, candidates_wanted, pack, pinned_scan, share_of, with_pinned
from .clock import CheckedClock, SystemClock
from .dimensions import EmbeddingDimension
from .embeddings import checked_embedder
from .errors import ConfigurationError, NotFoundError, ValidationError
from .filters import Condition, FilterSpec
from .intake import MemoryInput, as_input, prepare
from .locks import ProcessLock, SweepLock
from .models import (
    LIVE_TIERS,
    ArchivePreview,
    Explanation,
    Hit,
    Injection,
    Link,
    MaintenanceReport,
    Memory,
    MemoryType,
    QuarantinedMemory,
    ScoreTerms,
    SearchResults,
    Stats,
    Tier,
)
from .namespaces import stored_namespace
from .operations import Operations
from .plans import search_plan
from .policy import Policy
from .ports import (
    AccessRecord,
    AssociationGraph,
    Clock,
    Embedder,
    MemoryPatch,
    MemoryStore,
    ObjectStore,
    ScanQuery,
    Summarizer,
    TokenCounter,
    Vector,
)
from .retrieval import Retriever, SearchPlan, archived_view
from .runner import LoopThread
from .scheduler import MaintenanceRunner
from .scoring import formula, score_terms
from .sweep import Sweep
from .tokens import TiktokenCounter
from .writes import Writer

if TYPE_CHECKING:
    from .config import TieredMemorySettings

log = logging.getLogger(__name__)
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_NAMESPACE = "default"


class AsyncTieredMemory:
    """Long-term memory with tiers, decay and archival; every method is a coroutine.

    Build it with `await AsyncTieredMemory.embedded(path)` for the no-server default,
    or pass the ports yourself. Nothing is opened in `__init__`.
    """

    def __init__(
        self,
        *,
        store: MemoryStore,
        graph: AssociationGraph,
        objects: ObjectStore,
        summarizer: Summarizer,
        embedder: Embedder | Any,
        policy: Policy | None = None,
        clock: Clock | None = None,
        tokens: TokenCounter | None = None,
        sweep_lock: SweepLock | None = None,
        dimension: int | None = None,
    ) -> None:
        self.store = store
        self.graph = graph
        self.objects = objects
        self.summarizer = summarizer
        self.policy = policy or Policy()
        # guarded: a failing, hanging or broken embedder or clock is a typed error
        self.embedder: Embedder = checked_embedder(
            embedder, self.policy.limits.embed_timeout_seconds
        )
        self.clock: Clock = CheckedClock(clock or SystemClock())
        self.tokens: TokenCounter = tokens or TiktokenCounter()
        self.retriever = Retriever(store, graph, self.policy)
        # what the summariser spends, sweeps, expansions: the dashboard numbers
        self.operations = Operations(store, summarizer, self.policy)
        metered = self.operations.metered
        self.archiver = Archiver(
            store, graph, objects, metered, self.embedder, self.tokens, self.policy
        )
        self.archival = ArchivalPipeline(store, self.archiver, self.policy)
        self.sweep = Sweep(store, graph, self.archival, metered, self.embedder, self.policy)
        self.associations = Associations(
            store, graph, self.policy.associations, self.retriever.breaker
        )
        self.writer = Writer(store, graph, self.archiver, self.associations, self.policy)
        self._sweep_lock: SweepLock = sweep_lock or ProcessLock()
        self._closed = False
        self.dimensions = EmbeddingDimension(store, self.embedder, dimension)

    # -- construction ---------------------------------------------------------------

    @classmethod
    async def embedded(
        cls,
        path: str | PathLike[str] = "tiered-memory.db",
        *,
        embedder: Embedder | Any | None = None,
        archive_dir: str | PathLike[str] | None = None,
        summarizer: Summarizer | None = None,
        policy: Policy | None = None,
        clock: Clock | None = None,
        dimension: int | None = None,
    ) -> AsyncTieredMemory:
        """The no-server default: one SQLite file, and a folder for archived originals
        (default: `<path>.archive/` beside the file).

        The file keeps one embedding dimension: the embedder's (its `dimension`, or
        `dimension=` for one that does not declare it, else measured before the first
        write). A file holding vectors of another size is a ConfigurationError here.
        """
        from .wiring import embedded_settings

        return await cls.from_settings(
            embedded_settings(path, archive_dir=archive_dir, policy=policy),
            embedder=embedder,
            summarizer=summarizer,
            clock=clock,
            dimension=dimension,
        )

    async def _opened(self) -> AsyncTieredMemory:
        """Finish opening (the factories' last step): record the embedder's dimension in
        the store, so a store of another size is refused now (`dimensions`). Closes
        everything on failure."""
        try:
            await self.dimensions.record()
        except BaseException:
            await self.close()
            raise
        return self

    @classmethod
    async def from_config(
        cls,
        config: str | PathLike[str] | None = None,
        *,
        clock: Clock | None = None,
        embedder: Embedder | Any | None = None,
        summarizer: Summarizer | None = None,
        **overrides: Any,
    ) -> AsyncTieredMemory:
        """Wire the backends named by a TOML file and the TIERED_MEMORY_* environment
        (e.g. Weaviate + Neo4j + S3 + Claude); see `tiered_memory.config`."""
        from .config import load_settings

        settings = load_settings(config, **overrides)
        return await cls.from_settings(
            settings, clock=clock, embedder=embedder, summarizer=summarizer
        )

    @classmethod
    async def from_env(
        cls, *, clock: Clock | None = None, embedder: Embedder | Any | None = None
    ) -> AsyncTieredMemory:
        """`from_config()` with no file: the environment (and the user's config.toml)."""
        return await cls.from_config(None, clock=clock, embedder=embedder)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for closer in (self.graph.close, self.objects.close, self.store.close):
            try:
                await closer()
            except Exception as e:  # close everything even if one backend fails
                log.warning("error while closing %s: %s", closer, e)

    async def __aenter__(self) -> AsyncTieredMemory:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- validation helpers -----------------------------------------------------------

    def _ns(self, namespace: str) -> str:
        return validation.check_namespace(namespace, self.policy.limits)

    async def dimension(self) -> int:
        """The size of every embedding this memory stores: the store's, or for an empty
        store the embedder's (declared, given, or measured once), recorded in the store
        before its first write. Vectors of another size are refused before writing."""
        return await self.dimensions.for_write(self.embedder)

    # -- writing ----------------------------------------------------------------------

    @telemetry.traced("add", telemetry.memory_attributes)
    async def add(
        self,
        content: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        memory_type: MemoryType | str = MemoryType.EPISODIC,
        importance: float = 0.4,
        metadata: Mapping[str, Any] | None = None,
        source: str = "api",
        pinned: bool = False,
        embedding: Sequence[float] | Vector | None = None,
        id: str | None = None,
        replace: bool = False,
        tier: Tier | str = Tier.HOT,
    ) -> Memory:
        """Remember `content` in HOT (or `tier`: warm or cold, when an agent or app
        knows better, as seed 002's store tool does). A near-duplicate strengthens the
        existing memory instead (its use is counted), and that memory is returned
        where it is: it is never moved.

        An `id` that already exists is refused, unless `replace=True` (see `upsert`).
        """
        item = MemoryInput.parse(
            {
                "content": content,
                "memory_type": memory_type,
                "importance": importance,
                "metadata": metadata,
                "source": source,
                "pinned": pinned,
                "embedding": embedding,
                "id": id,
                "tier": tier,
            }
        )
        return (await self.add_many([item], namespace=namespace, replace=replace))[0]

    async def upsert(
        self,
        content: str,
        *,
        id: str,
        namespace: str = DEFAULT_NAMESPACE,
        memory_type: MemoryType | str = MemoryType.EPISODIC,
        importance: float = 0.4,
        metadata: Mapping[str, Any] | None = None,
        source: str = "api",
        pinned: bool = False,
        embedding: Sequence[float] | Vector | None = None,
    ) -> Memory:
        """Store `content` under `id`, replacing the memory of that id if there is one
        (live or archived): LangGraph's `put`, mem0's `update`.

        The new value is validated and embedded before anything is touched, and swapped
        in one store transaction, so a failure leaves the old memory as it was. The
        replacement is a new memory under the same id (HOT, its own use history);
        explicit links are kept, the others are rebuilt by auto-linking for the new
        content. It is never merged into a near-duplicate.
        """
        if id is None:  # add would make up an id: that is not a replace
            raise ValidationError("upsert needs the id to store under, e.g. id='doc-1'")
        return await self.add(
            content,
            namespace=namespace,
            memory_type=memory_type,
            importance=importance,
            metadata=metadata,
            source=source,
            pinned=pinned,
            embedding=embedding,
            id=id,
            replace=True,
        )

    @telemetry.traced("add_many", telemetry.memory_attributes)
    async def add_many(
        self,
        items: Sequence[MemoryInput | str | Mapping[str, Any]],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        dedup: bool | None = None,
        link: bool = True,
        replace: bool = False,
    ) -> builtins.list[Memory]:
        """Add many memories with one embedding call and one write.

        Returns one memory per item, in order: the new memory, or the existing one a
        near-duplicate strengthened. Deduplication and auto-linking cost one vector
        search per item; pass dedup=False, link=False for bulk imports.

        An item naming an id that exists is refused, unless `replace=True`: then it
        replaces that memory as `upsert` does (items naming an id are never merged into
        a near-duplicate), and the whole batch is written in one transaction.
        """
        ns = self._ns(namespace)
        inputs = [as_input(x) for x in validation.check_items(items)]
        if dedup is not None:
            validation.check_flag(dedup, "dedup")
        validation.check_flag(link, "link")
        validation.check_flag(replace, "replace")  # "no" is truthy: it would replace
        if not inputs:
            return []
        now = self.clock.now()
        prepared = await prepare(
            ns,
            inputs,
            limits=self.policy.limits,
            now=now,
            embedder=self.embedder,
            dimensions=self.dimensions,
            objects=self.objects,
        )
        return await self.writer.add(ns, prepared, now=now, dedup=dedup, link=link, replace=replace)

    # -- reading ----------------------------------------------------------------------

    async def get(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory | None:
        """The memory (an archived one as its summary, tier ARCHIVED), or None."""
        ns = self._ns(namespace)
        validation.check_id(id)
        found = await self.store.get_many(ns, [id])
        if id in found:
            return found[id]
        records = await self.store.get_archives(ns, [id])
        return archived_view(records[id]) if id in records else None

    async def _require(self, ns: str, id: str) -> Memory:
        validation.check_id(id)
        found = await self.store.get_many(ns, [id])
        if id not in found:
            where = "archived" if await self.store.get_archives(ns, [id]) else "not found"
            raise NotFoundError(f"memory {id!r} is {where} in namespace {ns!r}")
        return found[id]

    async def list(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        tier: Tier | str | None = None,
        after_id: str | None = None,
        limit: int = 100,
        metadata: FilterSpec | None = None,
    ) -> builtins.list[Memory]:
        """A page of memories ordered by id; pass the last id as `after_id` for the next.
        `metadata` filters as in `search`, in the store's own query."""
        ns = self._ns(namespace)
        validation.check_count(limit, "limit", self.policy.limits)
        if after_id is not None:
            after_id = validation.check_id(after_id, what="after_id")
        meta = validation.check_filters(metadata)
        t = Tier.parse(tier) if tier is not None else None
        if t is Tier.ARCHIVED:
            records = await self.store.scan_archives(
                ns, after_id=after_id, limit=limit, metadata=meta
            )
            return [archived_view(r) for r in records]
        tiers = frozenset({t}) if t is not None else LIVE_TIERS
        query = ScanQuery(tiers=tiers, metadata=meta, after_id=after_id, limit=limit)
        return await self.store.scan(ns, query)

    async def namespaces(self, *, prefix: str = "") -> builtins.list[str]:
        """Namespaces holding memories or archive records (an operator's view: the
        only call that spans namespaces, and it returns names, never contents)."""
        if not isinstance(prefix, str):
            raise ValidationError("prefix must be a string")
        return sorted(
            stored_namespace(name)  # a path's name as a PathNamespace: it can be passed back
            for name in await self.store.namespaces()
            if name.startswith(prefix)
        )

    async def stats(self, *, namespace: str = DEFAULT_NAMESPACE) -> Stats:
        """Counts per tier, flags and links, and the seed-001 dashboard numbers: the
        object store's size, expansions over 30 days, quarantined memories, the last
        sweep's report, and what the summariser has cost (`Stats`)."""
        ns = self._ns(namespace)
        async with self.store.snapshot():  # the counts of one moment, even mid-sweep
            stats = await self.store.stats(ns)
            states = await self.store.archival_states(ns)
            stats.quarantined = sum(1 for s in states.values() if s.quarantined)
            try:
                stats.links = await self.graph.count_links(ns)
            except Exception as e:
                log.warning("link count unavailable for %r: %s", ns, e)
        return await self.operations.complete(stats, self.clock.now())

    @telemetry.traced("search", telemetry.search_attributes)
    async def search(
        self,
        query: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        k: int = 10,
        deep: bool = False,
        include_archived: bool = False,
        tiers: Sequence[Tier | str] | None = None,
        weights: Mapping[str, float] | None = None,
        memory_types: Sequence[MemoryType | str] | None = None,
        metadata: FilterSpec | None = None,
        include_forgotten: bool = False,
        ids: Sequence[str] | None = None,
        query_embedding: Sequence[float] | Vector | None = None,
    ) -> SearchResults:
        """Ranked hits, best first; nothing is recorded as used (see `recall`).

        `query_embedding` skips embedding the query (frameworks that embed it already);
        `query` still drives the lexical signal. `ids` restricts the candidates.
        """
        ns = self._ns(namespace)
        validation.check_count(k, "k", self.policy.limits)
        validation.check_query(query, self.policy.limits)
        plan = search_plan(
            self.policy.fusion,
            k=k,
            deep=deep,
            include_archived=include_archived,
            tiers=tiers,
            weights=weights,
            memory_types=memory_types,
            metadata=metadata,
            include_forgotten=include_forgotten,
            ids=ids,
        )
        hits = await self._search(ns, query, plan, query_embedding)
        out = SearchResults(hits[:k], degraded=hits.degraded, reasons=hits.reasons)
        return out

    async def _search(
        self,
        ns: str,
        query: str,
        plan: SearchPlan,
        query_embedding: Sequence[float] | Vector | None = None,
    ) -> SearchResults:
        # Checked once, here: the retriever and the store take the vector as valid.
        if query_embedding is not None:
            vector = await self.dimensions.check_query_vector(query_embedding)
        else:
            # finite and flat: the embedder's guard checked it; only its size is compared
            vector = await self.dimensions.check_embedded_query(
                await self.embedder.aembed_query(query)
            )
        return await self.retriever.search(ns, query, vector, plan, self.clock.now())

    @telemetry.traced("recall", telemetry.injection_attributes)
    async def recall(
        self,
        query: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        budget_tokens: int | None = None,
        max_items: int | None = None,
        deep: bool = False,
        include_archived: bool = False,
        weights: Mapping[str, float] | None = None,
        memory_types: Sequence[MemoryType | str] | None = None,
        metadata: FilterSpec | None = None,
        record_use: bool = True,
        tiers: Sequence[Tier | str] | None = None,
        ids: Sequence[str] | None = None,
        query_embedding: Sequence[float] | Vector | None = None,
    ) -> Injection:
        """What to put into a prompt for `query`, packed into a token budget by tier
        shares. Memories injected on their own merit count as used; neighbours in time
        that rode along with a hit (phase 5) do not, or every memory near a popular one
        would stay warm and the use signal that drives the tiers would drown."""
        ns = self._ns(namespace)
        rp = self.policy.retrieval
        budget = validation.check_budget(
            rp.default_budget_tokens if budget_tokens is None else budget_tokens
        )
        limit = (
            validation.check_count(max_items, "max_items", self.policy.limits)
            if max_items is not None
            else rp.max_items
        )
        validation.check_flag(record_use, "record_use")
        validation.check_query(query, self.policy.limits)
        wanted = candidates_wanted(budget, limit, rp)
        plan = search_plan(
            self.policy.fusion,
            k=max(rp.candidates, wanted),
            deep=deep,
            include_archived=include_archived,
            tiers=tiers,
            weights=weights,
            memory_types=memory_types,
            metadata=metadata,
            ids=ids,
            fill=wanted,
        )
        pinned = pinned_scan(plan, wanted)
        if pinned is not None:
            plan = with_pinned(plan, await self.store.scan(ns, pinned))
        hits = (
            await self._search(ns, query, plan, query_embedding)
            if budget > 0
            else SearchResults([])
        )
        injection = pack(
            hits,
            budget=budget,
            max_items=limit,
            shares=self.policy.budget,
            count_tokens=self.tokens.count,
            # a counter that knows a cheap lower bound (TiktokenCounter) says so
            min_tokens=getattr(self.tokens, "min_count", None),
            degraded=hits.degraded,
        )
        if record_use and injection.items:
            await self._record_use(ns, injection.items)
        telemetry.recalled(injection)
        return injection

    async def record_use(self, ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE) -> int:
        """Count a use of these memories now (for callers that inject memories they got
        from `search`, or that trimmed a recall). Unknown ids are ignored; returns how
        many live memories were counted."""
        ns = self._ns(namespace)
        found = await self.store.get_many(ns, validation.check_ids(ids))
        now = self.clock.now()
        if found:
            await self.store.record_access(ns, [AccessRecord(i, now) for i in found])
        return len(found)

    async def _record_use(self, ns: str, chosen: Sequence[Hit]) -> None:
        """Count the use of injected memories (`lifecycle.counted_uses`); bring back
        COLD ones reached through an association (`lifecycle.revived`); strengthen the
        links between memories injected together (when `co_recall_boost` is above 0:
        off by default, see policy.py)."""
        now = self.clock.now()
        live = lifecycle.counted_uses(chosen)
        if not live:
            return
        await self.store.record_access(ns, [AccessRecord(h.memory.id, now) for h in live])
        revived = lifecycle.revived(live)
        if revived:
            await self.store.set_tier(ns, revived, Tier.WARM, now)
            for h in live:
                if h.memory.id in revived:
                    h.memory.tier = h.tier = Tier.WARM
        await self.associations.co_recalled(ns, [h.memory.id for h in live], now)

    # -- explain ----------------------------------------------------------------------

    async def explain(
        self, id: str, *, query: str | None = None, namespace: str = DEFAULT_NAMESPACE
    ) -> Explanation:
        """Every term of one memory's score for `query` (or its decay terms alone)."""
        ns = self._ns(namespace)
        validation.check_id(id)
        if query is not None:
            validation.check_query(query, self.policy.limits)
        memory = await self.get(id, namespace=ns)
        if memory is None:
            raise NotFoundError(f"memory {id!r} not found in namespace {ns!r}")
        now = self.clock.now()
        if query:
            plan = search_plan(
                self.policy.fusion,
                k=self.policy.retrieval.candidates,
                deep=True,
                include_archived=True,
                include_forgotten=True,
                force_ids=frozenset({id}),
                exact_scores=True,
            )
            hits = await self._search(ns, query, plan)
            hit = next((h for h in hits if h.memory.id == id), None)
            terms = hit.terms if hit else ScoreTerms()
        else:
            terms = score_terms(memory, now, self.policy)
        return Explanation(
            id=id,
            namespace=ns,
            tier=memory.tier,
            memory_type=memory.memory_type,
            query=query,
            terms=terms,
            use_count=memory.use_count,
            last_used_at=memory.last_used_at,
            pinned=memory.pinned,
            core=memory.core,
            formula=formula(terms, self.policy.scoring),
        )

    # -- flags and tiers ----------------------------------------------------------------

    async def _patch(self, ns: str, id: str, patch: MemoryPatch) -> Memory:
        await self._require(ns, id)
        await self.store.patch_many(ns, [id], patch)
        return await self._require(ns, id)

    async def forget(
        self, id: str, *, namespace: str = DEFAULT_NAMESPACE, hard: bool = False
    ) -> None:
        """Soft delete: never injected again until `restore`. `hard=True` deletes the
        memory, its links and (for an archived one) its stored original."""
        ns = self._ns(namespace)
        validation.check_id(id)
        if not validation.check_flag(hard, "hard"):
            await self._patch(ns, id, MemoryPatch(do_not_inject=True, updated_at=self.clock.now()))
            return
        live = await self.store.get_many(ns, [id])
        archived = await self.store.get_archives(ns, [id]) if id not in live else {}
        if not live and not archived:
            raise NotFoundError(f"memory {id!r} not found in namespace {ns!r}")
        await self.writer.delete(ns, list(live), archived)

    async def forget_many(
        self, ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, hard: bool = False
    ) -> int:
        """`forget` for many ids in one batch; unknown ids are ignored. Returns how many
        memories were forgotten (hard: deleted, with links and archived originals)."""
        ns = self._ns(namespace)
        wanted = validation.check_ids(ids)
        validation.check_flag(hard, "hard")
        live = await self.store.get_many(ns, wanted)
        if not hard:
            return await self.store.patch_many(
                ns, list(live), MemoryPatch(do_not_inject=True, updated_at=self.clock.now())
            )
        archived = await self.store.get_archives(ns, [i for i in wanted if i not in live])
        return await self.writer.delete(ns, list(live), archived)

    async def clear(self, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        """Delete everything of one namespace: memories, links, archive records and
        archived originals. There is no undo."""
        ns = self._ns(namespace)
        for key in await self.objects.list(ns):
            await self.objects.delete(ns, key)
        await self.graph.clear(ns)
        await self.store.clear(ns)
        self.operations.cleared(ns)

    async def restore(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        """Undo a soft delete; for an archived memory, bring it back to WARM from its
        original in object storage."""
        ns = self._ns(namespace)
        validation.check_id(id)
        if await self.store.get_archives(ns, [id]):
            restored = await self.archiver.restore(ns, [id], now=self.clock.now())
            await self.operations.restored(ns, restored, self.clock.now())
        return await self._patch(
            ns, id, MemoryPatch(do_not_inject=False, updated_at=self.clock.now())
        )

    async def pin(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        """Never decays, never demoted, always a candidate for its budget share."""
        ns = self._ns(namespace)
        tier = lifecycle.tier_when_pinned(await self._require(ns, id))
        if tier is not None:
            await self.store.set_tier(ns, [id], tier, self.clock.now())
        return await self._patch(ns, id, MemoryPatch(pinned=True, updated_at=self.clock.now()))

    async def unpin(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        ns = self._ns(namespace)
        return await self._patch(ns, id, MemoryPatch(pinned=False, updated_at=self.clock.now()))

    async def promote(
        self, id: str, tier: Tier | str = Tier.WARM, *, namespace: str = DEFAULT_NAMESPACE
    ) -> Memory:
        """Move a memory to a more active tier (HOT only ever by this explicit call)."""
        ns = self._ns(namespace)
        target = Tier.parse(tier)
        lifecycle.check_promotion(await self._require(ns, id), target)
        await self.store.set_tier(ns, [id], target, self.clock.now())
        return await self._require(ns, id)

    async def demote(
        self, id: str, tier: Tier | str, *, namespace: str = DEFAULT_NAMESPACE
    ) -> Memory:
        """Move a memory to a less active tier. Pinned and core memories are exempt."""
        ns = self._ns(namespace)
        target = Tier.parse(tier)
        lifecycle.check_demotion(await self._require(ns, id), target)
        await self.store.set_tier(ns, [id], target, self.clock.now())
        return await self._require(ns, id)

    # -- associations -------------------------------------------------------------------

    async def link(
        self,
        source: str,
        target: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        weight: float = 0.5,
    ) -> Link:
        """Associate two memories of one namespace explicitly (both directions)."""
        ns = self._ns(namespace)
        source = validation.check_id(source, what="source")
        target = validation.check_id(target, what="target")
        new_link = explicit_link(source, target, weight, self.clock.now())
        await self._require(ns, source)
        await self._require(ns, target)
        await self.graph.upsert_links(ns, [new_link])
        return new_link

    async def links(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> builtins.list[Link]:
        ns = self._ns(namespace)
        validation.check_id(id)
        return await self.graph.links_of(ns, [id])

    # -- life cycle and archive ---------------------------------------------------------

    @telemetry.traced("maintain", telemetry.report_attributes)
    async def maintain(
        self,
        *,
        now: datetime | None = None,
        dry_run: bool = False,
        namespace: str | None = None,
    ) -> MaintenanceReport:
        """Apply every tier transition that is due, in DESIGN.md order, and archive.

        Idempotent; `dry_run=True` reports what would move and what archiving would
        cost, changing nothing. Returns a report with `skipped=True` when another sweep
        of this store is running (in this process or, for SQLite, any other). One run
        archives at most `policy.archival.batch_size` memories; the report lists the
        memories archival has set aside (`quarantined`) with their last error.
        """
        when = validation.check_when(now) if now is not None else self.clock.now()
        validation.check_flag(dry_run, "dry_run")
        ns = self._ns(namespace) if namespace is not None else None
        if not self._sweep_lock.try_acquire():
            return MaintenanceReport(now=when, dry_run=dry_run, skipped=True)
        try:
            spent = self.operations.metered.spent
            report = await self.sweep.run(when, dry_run=dry_run, namespace=ns)
            return await self.operations.swept(report, spent, ns)  # its cost; the log
        finally:
            self._sweep_lock.release()

    @telemetry.traced("archive", telemetry.count_attribute("archived"))
    async def archive(
        self, ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, reason: str = "manual"
    ) -> int:
        """Archive these memories now, whatever their tier (pinned and core excepted),
        in order; returns how many this call archived.

        A quarantined memory is released and tried again. A memory another archival
        (a sweep, another call or process) is archiving right now is left to it and not
        counted here, as is one changed meanwhile (forgotten, pinned, replaced or
        deleted while it was summarised): it stays live as changed. The first failure
        is recorded (toward quarantine) and raised."""
        ns = self._ns(namespace)
        limits = self.policy.limits
        validation.check_label(reason, "reason", limits.max_source_chars, "max_source_chars")
        memories = await self._archivable(ns, ids)
        spent = self.operations.metered.spent
        try:
            archived = await self.archival.archive(
                ns, memories, now=self.clock.now(), reason=reason
            )
        except Exception:
            telemetry.archived(0, failed=1)
            raise
        finally:
            await self.operations.summarized(spent, self.clock.now())
        telemetry.archived(archived)
        return archived

    async def quarantined(
        self, *, namespace: str = DEFAULT_NAMESPACE
    ) -> builtins.list[QuarantinedMemory]:
        """The memories archival has set aside after repeated failures, with the last
        error of each; `archive([id])` releases one and tries it again."""
        return await self.archival.quarantined(self._ns(namespace))

    @telemetry.traced("expand")
    async def expand(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        """The full original of an archived memory, read back from object storage and
        verified. Three expansions within 30 days restore the memory to WARM."""
        ns = self._ns(namespace)
        validation.check_id(id)
        document, restored = await self.archiver.expand(ns, id, now=self.clock.now())
        await self.operations.expanded(ns, restored, self.clock.now())
        telemetry.annotate({"tiered_memory.restored": restored})
        return document

    async def restore_archive(
        self, ids: Sequence[str] | None = None, *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        """Bring archived memories back to WARM (all of them when `ids` is None): the
        rollback of seed 001. Returns how many were restored."""
        ns = self._ns(namespace)
        now = self.clock.now()
        if ids is not None:
            restored = await self.archiver.restore(ns, validation.check_ids(ids), now=now)
        else:
            restored = await self.archiver.restore_all(ns, now=now)
        await self.operations.restored(ns, restored, now)
        return restored

    def runner(
        self,
        interval: timedelta | None = None,
        on_report: Callable[[MaintenanceReport], None] | None = None,
    ) -> MaintenanceRunner:
        """A background runner repeating `maintain()` (default every 6 h)."""
        if interval is not None and not isinstance(interval, timedelta):
            raise ValidationError("interval must be a timedelta, e.g. timedelta(hours=6)")
        if on_report is not None and not callable(on_report):
            raise ValidationError("on_report must be a function taking a MaintenanceReport")
        return MaintenanceRunner(self, interval=interval, on_report=on_report)

    # -- for integrations: listing, deleting and replacing by what the caller knows -----

    def iterate(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        tiers: Sequence[Tier | str] | None = None,
        metadata: FilterSpec | None = None,
        page: int = 500,
    ) -> AsyncIterator[Memory]:
        """Every memory of `namespace` in `tiers` (default: all four) whose metadata
        matches `metadata` (as in `search`): the live ones by id, then the archived ones
        (as their summaries) by id, read `page` at a time from the store's own filtered
        query. The arguments are checked here, before the first page is read."""
        ns = self._ns(namespace)
        meta = validation.check_filters(metadata)
        validation.check_count(page, "page", self.policy.limits)
        named = validation.check_list(tiers, "tiers") if tiers is not None else list(Tier)
        return self._iterate(ns, frozenset(Tier.parse(t) for t in named), meta, page)

    async def _iterate(
        self, ns: str, tiers: frozenset[Tier], meta: tuple[Condition, ...], page: int
    ) -> AsyncIterator[Memory]:
        after: str | None = None
        while tiers & LIVE_TIERS:
            query = ScanQuery(tiers=tiers & LIVE_TIERS, metadata=meta, after_id=after, limit=page)
            memories = await self.store.scan(ns, query)
            for memory in memories:
                yield memory
            if len(memories) < page:
                break
            after = memories[-1].id
        after = None
        while Tier.ARCHIVED in tiers:
            records = await self.store.scan_archives(ns, after_id=after, limit=page, metadata=meta)
            for record in records:
                yield archived_view(record)
            if len(records) < page:
                break
            after = records[-1].id

    async def forget_where(
        self,
        metadata: FilterSpec,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        hard: bool = False,
    ) -> int:
        """`forget_many` for every live memory whose metadata matches `metadata` (hard:
        archived ones too, with their originals); returns how many. A filter is needed:
        deleting a whole namespace is `clear()`, never an empty filter."""
        meta = validation.check_filters(metadata)
        if not meta:
            raise ValidationError(
                "forget_where needs a metadata filter, e.g. {'doc_id': 'd-1'}; "
                "clear(namespace=...) deletes a whole namespace"
            )
        tiers = list(Tier) if validation.check_flag(hard, "hard") else sorted(LIVE_TIERS)
        matches = self.iterate(namespace=namespace, tiers=tiers, metadata=meta)
        ids = [memory.id async for memory in matches]
        return await self.forget_many(ids, namespace=namespace, hard=hard) if ids else 0

    async def upsert_many(
        self,
        items: Sequence[MemoryInput | Mapping[str, Any]],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        link: bool = True,
    ) -> builtins.list[Memory]:
        """`upsert` for a batch, in one transaction: every item names its `id` and
        replaces the memory stored under it (live or archived), or is added. A batch
        that fails validation or embedding changes nothing; nothing is merged into a
        near-duplicate. `link=False` skips auto-linking (bulk loads)."""
        inputs = [as_input(x) for x in validation.check_items(items)]
        unnamed = [i for i, item in enumerate(inputs) if item.id is None]
        if unnamed:
            raise ValidationError(
                f"upsert_many needs an id on every item; items {unnamed[:5]} have none "
                "(add_many makes ids up)"
            )
        return await self.add_many(inputs, namespace=namespace, link=link, replace=True)

    @property
    def embedding_model(self) -> Any:
        """The embedding model as it was given (a LangChain `Embeddings`, a LlamaIndex
        `BaseEmbedding` or an `Embedder`), for integrations that report it."""
        return getattr(self.embedder, "model", self.embedder)

    # -- for integrations: one way to reach the memory's loop, whichever memory it is ---

    @property
    def aio(self) -> AsyncTieredMemory:
        """This engine, as `TieredMemory.aio` is: code taking either kind of memory
        reaches the async engine the same way."""
        return self

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Refused: this engine's connections live on the caller's event loop, which a
        blocking call could only stall. `TieredMemory.run` is the blocking form."""
        coro.close()
        raise ConfigurationError(
            "an AsyncTieredMemory cannot block: its connections live on your event loop. "
            "Use the async methods (e.g. ainvoke, aquery, async_add, adelete, aretrieve), "
            "or pass a TieredMemory, whose sync methods run on its own loop"
        )

    async def arun(self, coro: Coroutine[Any, Any, R]) -> R:
        """Await `coro` on the caller's loop, the one this engine was opened on (as
        `TieredMemory.arun` awaits on the facade's own loop)."""
        return await coro

    @classmethod
    async def from_settings(
        cls,
        settings: TieredMemorySettings,
        *,
        clock: Clock | None = None,
        embedder: Embedder | Any | None = None,
        summarizer: Summarizer | None = None,
        dimension: int | None = None,
    ) -> AsyncTieredMemory:
        """A memory over the backends `settings` name (`tiered_memory.config`), opened by
        `tiered_memory.wiring`: the one path `embedded` and `from_config` take too.
        `embedder=`/`summarizer=` replace the configured ones."""
        from .wiring import open_stack

        stack = await open_stack(settings, embedder=embedder, summarizer=summarizer)
        try:
            memory = cls(
                store=stack.store,
                graph=stack.graph,
                objects=stack.objects,
                summarizer=stack.summarizer,
                embedder=stack.embedder,
                policy=settings.policy,
                clock=clock,
                sweep_lock=stack.sweep_lock,
                dimension=dimension,
            )
        except BaseException:
            await stack.close()
            raise
        return await memory._opened()  # a store of another embedding size is refused here

    async def archive_preview(
        self,
        ids: Sequence[str] | None = None,
        *,
        older_than: timedelta | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> ArchivePreview:
        """What archiving would take now, and what it would cost, changing nothing: the
        given `ids` (checked as `archive` checks them), else the memories unused for
        `older_than`, else the memories the sweep would archive. Archive them with
        `archive([m.id for m in preview.candidates])`."""
        ns = self._ns(namespace)
        now = self.clock.now()
        if ids is not None and older_than is not None:
            raise ValidationError("give ids or older_than, not both")
        if ids is not None:
            candidates = list({m.id: m for m in await self._archivable(ns, ids)}.values())
        elif older_than is not None:
            before = validation.check_age(older_than, now, "older_than")
            candidates = await self.archival.unused_since(ns, before)
        else:  # the sweep's candidates, estimated as the sweep archives them (clusters)
            due = await self.archival.candidates(ns, now)
            estimate = self.operations.priced(await self.archival.estimate(ns, due, now))
            return ArchivePreview(candidates=[c.memory for c in due], estimate=estimate)
        estimate = self.operations.priced(await self.archiver.estimate(ns, candidates, now))
        return ArchivePreview(candidates=candidates, estimate=estimate)

    async def _archivable(self, ns: str, ids: Sequence[str]) -> builtins.list[Memory]:
        """The memories `ids` name, each live in `ns` and neither pinned nor core."""
        memories = [await self._require(ns, i) for i in validation.check_ids(ids)]
        for m in memories:
            if m.pinned or m.core:
                raise ValidationError(f"memory {m.id!r} is pinned or core; unpin it first")
        return memories


# -- the sync facade -------------------------------------------------------------------


def _shares_doc(twin: Callable[..., Any]) -> Callable[[F], F]:
    """Give a blocking method its async twin's docstring: one text for both forms.

    The signatures are written out (not generated), so help(), IDEs and type checkers
    see the real parameters; tests/unit/test_facade_signatures.py keeps them equal."""

    def shared(method: F) -> F:
        method.__doc__ = twin.__doc__
        return method

    return shared


class TieredMemory:
    """The blocking face of `AsyncTieredMemory`; safe inside Jupyter's running loop.

    `mem.aio` is the async engine underneath, for code that can await.
    """

    def __init__(self, engine: AsyncTieredMemory, *, _loop: LoopThread | None = None) -> None:
        self.aio = engine
        self._loop = _loop or LoopThread()
        self._runner: MaintenanceRunner | None = None

    @classmethod
    def embedded(
        cls,
        path: str | PathLike[str] = "tiered-memory.db",
        *,
        embedder: Embedder | Any | None = None,
        archive_dir: str | PathLike[str] | None = None,
        summarizer: Summarizer | None = None,
        policy: Policy | None = None,
        clock: Clock | None = None,
        dimension: int | None = None,
    ) -> TieredMemory:
        """The no-server default: one SQLite file and a folder for archived originals
        (see `AsyncTieredMemory.embedded`)."""
        return cls.from_async(
            AsyncTieredMemory.embedded(
                path,
                embedder=embedder,
                archive_dir=archive_dir,
                summarizer=summarizer,
                policy=policy,
                clock=clock,
                dimension=dimension,
            )
        )

    @classmethod
    def from_async(cls, opening: Coroutine[Any, Any, AsyncTieredMemory]) -> TieredMemory:
        """Wrap the engine that `opening` builds. It runs on the facade's own loop, so
        the engine's connections live where its methods will run; if building fails,
        that loop is stopped again (no thread is leaked)."""
        loop = LoopThread()
        try:
            engine = loop.run(opening)
        except BaseException:
            loop.stop()
            raise
        return cls(engine, _loop=loop)

    @classmethod
    def from_config(
        cls,
        config: str | PathLike[str] | None = None,
        *,
        clock: Clock | None = None,
        embedder: Embedder | Any | None = None,
        summarizer: Summarizer | None = None,
        **overrides: Any,
    ) -> TieredMemory:
        """The blocking face of `AsyncTieredMemory.from_config`."""
        return cls.from_async(
            AsyncTieredMemory.from_config(
                config, clock=clock, embedder=embedder, summarizer=summarizer, **overrides
            )
        )

    @classmethod
    def from_env(
        cls, *, clock: Clock | None = None, embedder: Embedder | Any | None = None
    ) -> TieredMemory:
        """`from_config()` with no file: the environment (and the user's config.toml)."""
        return cls.from_config(None, clock=clock, embedder=embedder)

    @property
    def policy(self) -> Policy:
        """Every number the memory runs by (`tiered_memory.Policy`)."""
        return self.aio.policy

    @property
    def clock(self) -> Clock:
        """The memory's clock (a `ManualClock` in tests and demos)."""
        return self.aio.clock

    def close(self) -> None:
        """Stop background maintenance, close the backends, then the memory's loop
        thread; `with TieredMemory.embedded(...) as mem:` calls it for you."""
        try:
            self.stop_maintenance()
            self._loop.run(self.aio.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> TieredMemory:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @_shares_doc(AsyncTieredMemory.dimension)
    def dimension(self) -> int:
        return self._loop.run(self.aio.dimension())

    @_shares_doc(AsyncTieredMemory.add)
    def add(
        self,
        content: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        memory_type: MemoryType | str = MemoryType.EPISODIC,
        importance: float = 0.4,
        metadata: Mapping[str, Any] | None = None,
        source: str = "api",
        pinned: bool = False,
        embedding: Sequence[float] | Vector | None = None,
        id: str | None = None,
        replace: bool = False,
        tier: Tier | str = Tier.HOT,
    ) -> Memory:
        return self._loop.run(
            self.aio.add(
                content,
                namespace=namespace,
                memory_type=memory_type,
                importance=importance,
                metadata=metadata,
                source=source,
                pinned=pinned,
                embedding=embedding,
                id=id,
                replace=replace,
                tier=tier,
            )
        )

    @_shares_doc(AsyncTieredMemory.upsert)
    def upsert(
        self,
        content: str,
        *,
        id: str,
        namespace: str = DEFAULT_NAMESPACE,
        memory_type: MemoryType | str = MemoryType.EPISODIC,
        importance: float = 0.4,
        metadata: Mapping[str, Any] | None = None,
        source: str = "api",
        pinned: bool = False,
        embedding: Sequence[float] | Vector | None = None,
    ) -> Memory:
        return self._loop.run(
            self.aio.upsert(
                content,
                id=id,
                namespace=namespace,
                memory_type=memory_type,
                importance=importance,
                metadata=metadata,
                source=source,
                pinned=pinned,
                embedding=embedding,
            )
        )

    @_shares_doc(AsyncTieredMemory.add_many)
    def add_many(
        self,
        items: Sequence[MemoryInput | str | Mapping[str, Any]],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        dedup: bool | None = None,
        link: bool = True,
        replace: bool = False,
    ) -> builtins.list[Memory]:
        return self._loop.run(
            self.aio.add_many(items, namespace=namespace, dedup=dedup, link=link, replace=replace)
        )

    @_shares_doc(AsyncTieredMemory.get)
    def get(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory | None:
        return self._loop.run(self.aio.get(id, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.list)
    def list(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        tier: Tier | str | None = None,
        after_id: str | None = None,
        limit: int = 100,
        metadata: FilterSpec | None = None,
    ) -> builtins.list[Memory]:
        return self._loop.run(
            self.aio.list(
                namespace=namespace, tier=tier, after_id=after_id, limit=limit, metadata=metadata
            )
        )

    @_shares_doc(AsyncTieredMemory.namespaces)
    def namespaces(self, *, prefix: str = "") -> builtins.list[str]:
        return self._loop.run(self.aio.namespaces(prefix=prefix))

    def stats(self, *, namespace: str = DEFAULT_NAMESPACE) -> Stats:
        """Counts and bytes per tier, flags and links of one namespace, read in one
        snapshot (consistent even while a sweep runs)."""
        return self._loop.run(self.aio.stats(namespace=namespace))

    @_shares_doc(AsyncTieredMemory.search)
    def search(
        self,
        query: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        k: int = 10,
        deep: bool = False,
        include_archived: bool = False,
        tiers: Sequence[Tier | str] | None = None,
        weights: Mapping[str, float] | None = None,
        memory_types: Sequence[MemoryType | str] | None = None,
        metadata: FilterSpec | None = None,
        include_forgotten: bool = False,
        ids: Sequence[str] | None = None,
        query_embedding: Sequence[float] | Vector | None = None,
    ) -> SearchResults:
        return self._loop.run(
            self.aio.search(
                query,
                namespace=namespace,
                k=k,
                deep=deep,
                include_archived=include_archived,
                tiers=tiers,
                weights=weights,
                memory_types=memory_types,
                metadata=metadata,
                include_forgotten=include_forgotten,
                ids=ids,
                query_embedding=query_embedding,
            )
        )

    @_shares_doc(AsyncTieredMemory.recall)
    def recall(
        self,
        query: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        budget_tokens: int | None = None,
        max_items: int | None = None,
        deep: bool = False,
        include_archived: bool = False,
        weights: Mapping[str, float] | None = None,
        memory_types: Sequence[MemoryType | str] | None = None,
        metadata: FilterSpec | None = None,
        record_use: bool = True,
        tiers: Sequence[Tier | str] | None = None,
        ids: Sequence[str] | None = None,
        query_embedding: Sequence[float] | Vector | None = None,
    ) -> Injection:
        return self._loop.run(
            self.aio.recall(
                query,
                namespace=namespace,
                budget_tokens=budget_tokens,
                max_items=max_items,
                deep=deep,
                include_archived=include_archived,
                weights=weights,
                memory_types=memory_types,
                metadata=metadata,
                record_use=record_use,
                tiers=tiers,
                ids=ids,
                query_embedding=query_embedding,
            )
        )

    @_shares_doc(AsyncTieredMemory.record_use)
    def record_use(self, ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE) -> int:
        return self._loop.run(self.aio.record_use(ids, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.explain)
    def explain(
        self, id: str, *, query: str | None = None, namespace: str = DEFAULT_NAMESPACE
    ) -> Explanation:
        return self._loop.run(self.aio.explain(id, query=query, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.forget)
    def forget(self, id: str, *, namespace: str = DEFAULT_NAMESPACE, hard: bool = False) -> None:
        return self._loop.run(self.aio.forget(id, namespace=namespace, hard=hard))

    @_shares_doc(AsyncTieredMemory.forget_many)
    def forget_many(
        self, ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, hard: bool = False
    ) -> int:
        return self._loop.run(self.aio.forget_many(ids, namespace=namespace, hard=hard))

    @_shares_doc(AsyncTieredMemory.clear)
    def clear(self, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        return self._loop.run(self.aio.clear(namespace=namespace))

    @_shares_doc(AsyncTieredMemory.restore)
    def restore(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        return self._loop.run(self.aio.restore(id, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.pin)
    def pin(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        return self._loop.run(self.aio.pin(id, namespace=namespace))

    def unpin(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        """Let a pinned memory decay and move between tiers again."""
        return self._loop.run(self.aio.unpin(id, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.promote)
    def promote(
        self, id: str, tier: Tier | str = Tier.WARM, *, namespace: str = DEFAULT_NAMESPACE
    ) -> Memory:
        return self._loop.run(self.aio.promote(id, tier, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.demote)
    def demote(self, id: str, tier: Tier | str, *, namespace: str = DEFAULT_NAMESPACE) -> Memory:
        return self._loop.run(self.aio.demote(id, tier, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.link)
    def link(
        self,
        source: str,
        target: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        weight: float = 0.5,
    ) -> Link:
        return self._loop.run(self.aio.link(source, target, namespace=namespace, weight=weight))

    def links(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> builtins.list[Link]:
        """The associations of memory `id` (explicit, auto-linked and co-recalled)."""
        return self._loop.run(self.aio.links(id, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.maintain)
    def maintain(
        self,
        *,
        now: datetime | None = None,
        dry_run: bool = False,
        namespace: str | None = None,
    ) -> MaintenanceReport:
        return self._loop.run(self.aio.maintain(now=now, dry_run=dry_run, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.archive)
    def archive(
        self, ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, reason: str = "manual"
    ) -> int:
        return self._loop.run(self.aio.archive(ids, namespace=namespace, reason=reason))

    @_shares_doc(AsyncTieredMemory.quarantined)
    def quarantined(
        self, *, namespace: str = DEFAULT_NAMESPACE
    ) -> builtins.list[QuarantinedMemory]:
        return self._loop.run(self.aio.quarantined(namespace=namespace))

    @_shares_doc(AsyncTieredMemory.expand)
    def expand(self, id: str, *, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        return self._loop.run(self.aio.expand(id, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.restore_archive)
    def restore_archive(
        self, ids: Sequence[str] | None = None, *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        return self._loop.run(self.aio.restore_archive(ids, namespace=namespace))

    @_shares_doc(AsyncTieredMemory.forget_where)
    def forget_where(
        self,
        metadata: FilterSpec,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        hard: bool = False,
    ) -> int:
        return self._loop.run(self.aio.forget_where(metadata, namespace=namespace, hard=hard))

    @_shares_doc(AsyncTieredMemory.upsert_many)
    def upsert_many(
        self,
        items: Sequence[MemoryInput | Mapping[str, Any]],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        link: bool = True,
    ) -> builtins.list[Memory]:
        return self._loop.run(self.aio.upsert_many(items, namespace=namespace, link=link))

    @_shares_doc(AsyncTieredMemory.archive_preview)
    def archive_preview(
        self,
        ids: Sequence[str] | None = None,
        *,
        older_than: timedelta | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> ArchivePreview:
        return self._loop.run(
            self.aio.archive_preview(ids, older_than=older_than, namespace=namespace)
        )

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Block on a coroutine of `self.aio` on this memory's own loop, where its
        connections live (for integrations composing several engine calls)."""
        return self._loop.run(coro)

    async def arun(self, coro: Coroutine[Any, Any, R]) -> R:
        """Await a coroutine of `self.aio` from any event loop: it runs on this memory's
        own loop, where its connections live (a Neo4j or Weaviate client is bound to the
        loop that opened it), and the caller's loop is never blocked. Cancelling the
        await cancels the coroutine."""
        return await asyncio.wrap_future(self._loop.submit(coro))

    def start_maintenance(
        self,
        interval: timedelta | None = None,
        on_report: Callable[[MaintenanceReport], None] | None = None,
    ) -> MaintenanceRunner:
        """Start the background sweep on this memory's loop; stop it with
        `stop_maintenance()` (close() stops it too)."""
        runner = self.aio.runner(interval, on_report)
        self._loop.run(runner.start())
        self._runner = runner
        return runner

    def stop_maintenance(self) -> None:
        """Stop the background sweep `start_maintenance()` started, if any."""
        runner = self._runner
        if runner is not None:
            self._loop.run(runner.stop())
            self._runner = None

    @classmethod
    def from_settings(
        cls,
        settings: TieredMemorySettings,
        *,
        clock: Clock | None = None,
        embedder: Embedder | Any | None = None,
        summarizer: Summarizer | None = None,
        dimension: int | None = None,
    ) -> TieredMemory:
        """The blocking face of `AsyncTieredMemory.from_settings`."""
        return cls.from_async(
            AsyncTieredMemory.from_settings(
                settings, clock=clock, embedder=embedder, summarizer=summarizer, dimension=dimension
            )
        )


__all__ = ["SHARE_ORDER", "AsyncTieredMemory", "MemoryInput", "TieredMemory", "share_of"]
