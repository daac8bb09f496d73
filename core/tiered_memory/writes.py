"""Writing and deleting memories across the ports: what else each write touches in the
store, the graph and object storage, and in which order (the read path is
`tiered_memory.retrieval`).

- **Adding** a checked batch (`intake.prepare`): near-duplicates strengthen the memory
  they repeat (`dedup`), the rest are stored in one write and auto-linked
  (`associations`), all in one store transaction where the graph shares it (the
  embedded store: one fsync per batch). An id that exists is refused unless the caller
  replaces.
- **Replacing** (`upsert`, `replace=True`): the new memories swap in in one store
  transaction, which ends any archival of the old values (its claim goes with them).
  The originals the old values leave, those of replaced archive records and those
  unfinished archivals noted, are queued for deletion in that transaction and deleted
  after the commit: before it, an archival could still commit a record pointing at
  one, and a crash or a failed swap would leave a record without its original.
  Derived links go; explicit ones stay.
- **Deleting** (`forget(hard=True)`, `forget_many`): a memory goes with its links and
  every original it has, an archived one's or the leftovers of unfinished archivals of a
  live one (the journal names them; they go after the live row, which ends those
  archivals). The record before its original, which is queued in the record's
  transaction (`PendingOriginal`): an unreachable object store never blocks a delete,
  and the sweep deletes what stayed queued once it answers.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from . import provenance
from .archive import Archiver
from .associations import Associations, similarity_links
from .dedup import Screened, nearest_stored, screen, threshold
from .errors import ValidationError
from .intake import Prepared
from .models import ArchiveRecord, Memory
from .policy import Policy
from .ports import (
    AccessRecord,
    AssociationGraph,
    MemoryPatch,
    MemoryStore,
    PendingOriginal,
    SupportsPutVectors,
)

log = logging.getLogger(__name__)


def _results(
    prepared: Sequence[Prepared], screened: Sequence[Screened], existing: Mapping[str, Memory]
) -> list[Memory]:
    """One memory per item, in order: the new one, or the one its duplicate strengthened."""
    return [
        existing[s.duplicate_of] if s.duplicate_of is not None else p.memory
        for p, s in zip(prepared, screened, strict=True)
    ]


def shares_transactions(store: MemoryStore, graph: AssociationGraph) -> bool:
    """Whether the graph's writes belong to `store.transaction()`: the embedded graph in
    the store's own SQLite file (one connection, one transaction)."""
    database = getattr(store, "database", None)
    return database is not None and getattr(graph, "database", None) is database


class Writer:
    """The write path of one memory (`AsyncTieredMemory` checks the input first)."""

    def __init__(
        self,
        store: MemoryStore,
        graph: AssociationGraph,
        archiver: Archiver,
        associations: Associations,
        policy: Policy,
    ) -> None:
        self.store, self.graph, self.archiver = store, graph, archiver
        self.associations, self.policy = associations, policy
        self._graph_joins_store = shares_transactions(store, graph)

    async def add(
        self,
        ns: str,
        prepared: Sequence[Prepared],
        *,
        now: datetime,
        dedup: bool | None,
        link: bool,
        replace: bool,
    ) -> list[Memory]:
        """Store a checked batch; one memory per item, in order: the new memory, or the
        existing one a near-duplicate strengthened (its use is counted)."""
        named = {p.memory.id for p in prepared if p.named}
        if named and not replace:
            await self._refuse_taken(ns, named)
        replacing = named if replace else set()

        ap = self.policy.associations
        duplicate_at = threshold(self.policy.limits.dedup_similarity, dedup)
        k = max(ap.autolink_top_k if link else 0, 1 if duplicate_at is not None else 0)
        vectors = [p.vector for p in prepared]
        far = ap.autolink_min_similarity  # a search finding nothing nearer is checked
        stored = (
            await nearest_stored(self.store, ns, vectors, k, far=far, duplicate_at=duplicate_at)
            if k
            else []
        )
        screened = screen(
            [p.memory.id for p in prepared],
            vectors,
            stored,
            k=k,
            threshold=duplicate_at,
            replacing=replacing,
        )
        accepted = [p for p, s in zip(prepared, screened, strict=True) if s.duplicate_of is None]
        duplicates = [s.duplicate_of for s in screened if s.duplicate_of is not None]
        links = [
            new_link
            for p, s in zip(prepared, screened, strict=True)
            if link and s.duplicate_of is None
            for new_link in similarity_links(p.memory.id, s.near, ap, now)
        ]

        if replacing:  # originals of replaced records go after their commit (_replace)
            if accepted:
                await self._write(ns, accepted, replacing)
            await self.associations.unlink_replaced(
                ns, [p.memory.id for p in accepted if p.memory.id in replacing]
            )
            existing = await self._strengthen(ns, prepared, screened, duplicates, now)
            await self.associations.link_new(ns, links)
            return _results(prepared, screened, existing)
        # One transaction (one fsync in the embedded store, not one per step). The
        # graph's writes join it only where the graph shares the store's transactions
        # (the embedded graph): a graph elsewhere gets no link before the memories
        # commit. They stay optional inside: a failing one rolls back to its own
        # savepoint, and the memories still commit.
        joined = self._graph_joins_store
        async with self.store.transaction():
            if accepted:
                await self._write(ns, accepted, replacing)
            existing = await self._strengthen(ns, prepared, screened, duplicates, now)
            if joined:  # the new memories are live in this transaction: not looked up
                await self.associations.link_new(ns, links, live=[p.memory.id for p in accepted])
        if not joined:
            await self.associations.link_new(ns, links)
        return _results(prepared, screened, existing)

    async def _strengthen(
        self,
        ns: str,
        prepared: Sequence[Prepared],
        screened: Sequence[Screened],
        duplicates: Sequence[str],
        now: datetime,
    ) -> dict[str, Memory]:
        """Count a use of each memory a near-duplicate strengthened and keep the
        duplicate's metadata (`_keep_provenance`); returns those memories."""
        if not duplicates:
            return {}
        await self.store.record_access(ns, [AccessRecord(i, now) for i in duplicates])
        existing = await self.store.get_many(ns, duplicates)
        await self._keep_provenance(ns, prepared, screened, existing, now)
        return existing

    async def _keep_provenance(
        self,
        ns: str,
        prepared: Sequence[Prepared],
        screened: Sequence[Screened],
        existing: dict[str, Memory],
        now: datetime,
    ) -> None:
        """A near-duplicate's metadata joins the memory it strengthened, under
        `merged_from` (`provenance.merged`); `existing` is updated to match."""
        changed: set[str] = set()
        for p, s in zip(prepared, screened, strict=True):
            target = existing.get(s.duplicate_of) if s.duplicate_of is not None else None
            if target is None:
                continue
            metadata = provenance.merged(
                target.metadata,
                p.memory.metadata,
                source=p.memory.source,
                at=now,
                max_bytes=self.policy.limits.max_metadata_bytes,
            )
            if metadata is not None:
                existing[target.id] = target.model_copy(update={"metadata": metadata})
                changed.add(target.id)
        for memory_id in sorted(changed):
            patch = MemoryPatch(metadata=existing[memory_id].metadata, updated_at=now)
            await self.store.patch_many(ns, [memory_id], patch)

    async def delete(
        self, ns: str, live: Collection[str], archived: Mapping[str, ArchiveRecord]
    ) -> int:
        """Delete live memories and archive records for good, with their links and
        originals; returns how many were deleted.

        The originals go through the store's queue (`PendingOriginal`): queued in the
        transaction that deletes what named them, deleted right after it commits
        (`_delete_originals`), and by the sweep when the object store was unreachable.
        So an outage of object storage never blocks a delete, and no original is left
        that nothing names. The originals unfinished archivals of the live ones noted
        go the same way, after the live rows (which end those archivals: the journal
        rows go with them), never before: until then an archival may commit a record
        pointing at one. A live memory archived meanwhile (its archival committed
        first) is deleted as an archived one."""
        gone = [*live, *archived]
        if gone:
            await self.graph.drop_nodes(ns, gone)
        deleted = 0
        records = dict(archived)
        queued: list[PendingOriginal] = []
        if live:
            async with self.store.transaction():
                attempts = await self.store.archival_states(ns, list(live))
                noted = [PendingOriginal(i, c) for i, s in attempts.items() for c in s.written]
                await self.store.queue_originals(ns, noted)
                deleted = await self.store.delete_many(ns, list(live))
            queued += noted
            if deleted < len(live):
                late = [i for i in live if i not in records]
                records.update(await self.store.get_archives(ns, late))
        if records:
            deferred = await self.archiver.hand_on_summaries(ns, records)  # stays found
            leaving = Archiver.pending(records.values(), deferred)
            async with self.store.transaction():
                await self.store.queue_originals(ns, leaving)
                deleted += await self.store.delete_archives(ns, list(records))
            queued += leaving
        await self._delete_originals(ns, queued)
        return deleted

    async def _delete_originals(self, ns: str, queued: Sequence[PendingOriginal]) -> None:
        """Delete the originals a committed write queued; what fails stays queued for
        the sweep (`Archiver.delete_pending`), and the write has succeeded."""
        try:
            await self.archiver.delete_pending(ns, queued)
        except Exception as e:
            log.warning("%d originals stay queued for deletion in %r: %s", len(queued), ns, e)

    async def _refuse_taken(self, ns: str, ids: set[str]) -> None:
        """An id named by a new memory must be free, live or archived."""
        live = await self.store.get_many(ns, sorted(ids))
        archived = await self.store.get_archives(ns, sorted(ids))
        taken = sorted(set(live) | set(archived))
        if taken:
            raise ValidationError(
                f"ids already exist in {ns!r}: {taken[:5]}; pass replace=True (or use "
                "upsert) to replace them"
            )

    async def _write(self, ns: str, accepted: Sequence[Prepared], replacing: set[str]) -> None:
        """Store new memories with their embeddings, in one write (one transaction with
        the replaced ones when some replace). A store that takes the vectors as arrays
        (`SupportsPutVectors`) gets them so; others get them as each memory's list."""
        if not replacing and isinstance(self.store, SupportsPutVectors):
            await self.store.put_vectors_many(
                ns, [p.memory for p in accepted], [p.vector for p in accepted]
            )
            return
        for p in accepted:
            p.memory.embedding = p.vector.tolist()
        try:
            if replacing:
                await self._replace(ns, [p.memory for p in accepted])
            else:
                await self.store.put_many(ns, [p.memory for p in accepted])
        finally:
            for p in accepted:
                p.memory.embedding = None

    async def _replace(self, ns: str, memories: Sequence[Memory]) -> None:
        """Swap the memories in (one store transaction) with the originals the old
        values leave behind queued for deletion (`PendingOriginal`): those of the
        archive records they replace, and those unfinished archivals of them noted in
        the journal; then delete them (`_delete_originals`; the sweep, if the object
        store is unreachable).

        Deleted after the swap, never before: until it commits, an archival of the old
        value still holds its claim and may commit a record pointing at the original it
        wrote (deleting that first lost the memory when the replace then failed). The
        swap ends those claims (`replace_many` drops the journal rows with the old
        values), so nothing can commit a record pointing at them afterwards; an
        archival that noted one after the journal was read here deletes its own when
        its commit is refused. Originals are content-addressed (`<id>@<sha256>`), and
        one a record or the journal names again is kept (`Archiver.delete_pending`).
        A record archived between the hand-on and the swap hands its cluster's summary
        on from the queue."""
        ids = [m.id for m in memories]
        leaving = await self.store.get_archives(ns, ids)
        deferred = await self.archiver.hand_on_summaries(ns, leaving)  # a cluster stays found
        async with self.store.transaction():
            attempts = await self.store.archival_states(ns, ids)
            records = await self.store.get_archives(ns, ids)
            deferred |= {
                i
                for i, r in records.items()
                if r.summary_embedding is not None
                and (i not in leaving or leaving[i].checksum != r.checksum)
            }
            queued = Archiver.pending(records.values(), deferred)
            queued += [PendingOriginal(i, c) for i, s in attempts.items() for c in s.written]
            await self.store.queue_originals(ns, queued)
            replaced = await self.store.replace_many(ns, memories)
        # Archived meanwhile where the swap is no transaction (it read records first):
        # queued now, or again with the hand-on of a summary it carried (queued
        # without one from the journal, which named its original before its record).
        seen = {(o.id, o.checksum): o.hand_on for o in queued}
        handed = {(i, r.checksum) for i, r in leaving.items()}  # or deferred, above
        due = [
            r.id
            for r in replaced
            if r.summary_embedding is not None and (r.id, r.checksum) not in handed
        ]
        missed = [
            o
            for o in Archiver.pending(replaced, due)
            if (o.id, o.checksum) not in seen or (o.hand_on and not seen[(o.id, o.checksum)])
        ]
        if missed:
            await self.store.queue_originals(ns, missed)
        await self._delete_originals(ns, [*queued, *missed])
