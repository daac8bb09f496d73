"""The steps of one memory's archival (DESIGN.md section 6, seed 001), the original's
format, expansion and restore. `tiered_memory.archival` runs the steps, claims first.

Per memory: summarise -> embed the summary -> write the original as JSON under a key of
its own (`original_key`: the id and the sha256 of the bytes) -> verify it (HEAD: size
and sha256) -> drop its graph links -> write the archive record, which replaces the live
record in one store operation, for the claimant only and only while the memory is as it
was drafted (`changed_since`: a forget or a replace meanwhile stops it). A crash at any
step leaves the memory COLD with its content (the journal names any original written,
for the rerun to take its links from and delete) or fully ARCHIVED with a verified
original; never lost, never both, and a record always points at the bytes its checksum
verifies.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from . import lifecycle, validation
from .errors import ArchiveIntegrityError, NotFoundError, TieredMemoryError
from .models import ArchiveEstimate, ArchiveRecord, Link, Memory
from .policy import Policy
from .ports import (
    AssociationGraph,
    Embedder,
    MemoryStore,
    ObjectStore,
    PendingOriginal,
    Summarizer,
    SummaryRequest,
    SupportsDeferredSync,
    TokenCounter,
)
from .summarizers.entities import entity_names

log = logging.getLogger(__name__)

# 1: the seed-001 format, the embedding as JSON numbers (twice: top level and memory).
# 2: the embedding once, as base64 of little-endian float32 (float64 when a value is not
#    a float32), and `memory` without the fields kept at the top level: 3 KB instead of
#    18 KB for a 384-d memory. Both are read; `decode_document` returns the same shape.
SCHEMA_VERSION = 2
READABLE_VERSIONS = frozenset({1, 2})
_DTYPES = {"float32-le": "<f4", "float64-le": "<f8"}
KEY_SEPARATOR = "@"  # in an object key, between the memory id and the original's sha256
_HEX64 = re.compile(r"[0-9a-f]{64}")

# The seed-001 prompt, used for cost estimates here and by the Claude summariser.
SUMMARY_PROMPT_TOKENS = 80
SUMMARY_CONTEXT_TOKENS = 50
SUMMARY_OUTPUT_TOKENS = 80
MAX_LINKED = 10  # linked memories whose entities join a summary's prompt


def original_document(
    memory: Memory,
    links: Sequence[Link],
    *,
    archived_at: datetime,
    reason: str,
    attempt: str | None = None,
    cluster: Sequence[str] = (),
) -> dict[str, Any]:
    """The seed-001 object format, plus the full memory so a restore loses nothing.

    The embedding is stored once, exactly, as base64 (`encode_embedding`); the memory's
    content sits at the top level only. `attempt` (a random nonce) makes the bytes, and
    so the content-addressed key, of every archival attempt its own. `cluster`: the ids
    of the memories archived under one summary with this one (itself included, the
    summary's record first), kept as `cluster` (`cluster_of` reads it)."""
    full = memory.model_dump(mode="json", exclude={"embedding", "content"})
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "original_id": memory.id,
        "namespace": memory.namespace,
        "content": memory.content,
        "entity_links": [link.target for link in links],
        "links": [link.model_dump(mode="json") for link in links],
        "metadata": {
            **memory.metadata,
            "source": memory.source,
            "memory_type": memory.memory_type.value,
        },
        "importance_score": memory.importance,
        "created_at": memory.created_at.isoformat(),
        "archived_at": archived_at.isoformat(),
        "archive_reason": reason,
        "memory": full,
    }
    if attempt is not None:
        document["archive_attempt"] = attempt
    if cluster:
        document["cluster"] = list(cluster)
    if memory.embedding is not None:
        document["embedding_encoding"], document["embedding_base64"] = encode_embedding(
            memory.embedding
        )
    return document


def encode_embedding(values: Sequence[float]) -> tuple[str, str]:
    """(encoding, base64 text) of a vector, bit-exact: float32 when every value is one
    (what the stores hold), float64 otherwise."""
    wide = np.asarray(values, dtype="<f8")
    narrow = wide.astype("<f4")
    if np.array_equal(narrow.astype("<f8"), wide):  # (-0.0 keeps its sign either way)
        return "float32-le", base64.b64encode(narrow.tobytes()).decode("ascii")
    return "float64-le", base64.b64encode(wide.tobytes()).decode("ascii")


def decode_embedding(encoding: Any, text: Any) -> list[float]:
    dtype = _DTYPES.get(encoding) if isinstance(encoding, str) else None
    if dtype is None or not isinstance(text, str):
        raise ArchiveIntegrityError(f"archived original has an unknown embedding {encoding!r}")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        vector = np.frombuffer(raw, dtype=dtype)
    except ValueError as e:
        raise ArchiveIntegrityError(f"archived original has a corrupt embedding: {e}") from e
    out: list[float] = vector.astype(np.float64).tolist()
    return out


def encode_document(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, sort_keys=True, allow_nan=False).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode_document(data: bytes, *, expected_id: str | None = None) -> dict[str, Any]:
    """Parse and sanity-check an archived original; corrupt data is a typed error.

    Either version comes back in one shape: `embedding` a list of floats (or None) and
    `memory` the whole memory, embedding and content included."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArchiveIntegrityError(f"archived original is not valid JSON: {e}") from e
    except RecursionError as e:  # e.g. "[[[[...": no original of ours nests that deep
        raise ArchiveIntegrityError("archived original is nested too deeply") from e
    if not isinstance(document, dict) or document.get("schema_version") not in READABLE_VERSIONS:
        raise ArchiveIntegrityError("archived original has an unknown schema_version")
    if expected_id is not None and document.get("original_id") != expected_id:
        raise ArchiveIntegrityError(
            f"archived original holds {document.get('original_id')!r}, not {expected_id!r}"
        )
    if not isinstance(document.get("content"), str) or not isinstance(document.get("memory"), dict):
        raise ArchiveIntegrityError("archived original lacks its content")
    if document["schema_version"] >= 2:
        embedding = None
        if "embedding_base64" in document:
            embedding = decode_embedding(
                document.pop("embedding_encoding", None), document.pop("embedding_base64")
            )
        document["embedding"] = embedding
        document["memory"] = {
            **document["memory"],
            "content": document["content"],
            "embedding": embedding,
        }
    return document


def document_links(document: dict[str, Any]) -> list[Link]:
    """The links an original was archived with (its graph links at the time)."""
    try:
        return [Link.model_validate(x) for x in document.get("links") or []]
    except (TypeError, ValueError) as e:
        raise ArchiveIntegrityError(f"archived original has malformed links: {e}") from e


def memory_from_document(document: dict[str, Any]) -> Memory:
    try:
        return Memory.model_validate(document["memory"])
    except Exception as e:
        raise ArchiveIntegrityError(f"archived original has a malformed memory: {e}") from e


def cluster_of(document: dict[str, Any]) -> list[str]:
    """The ids archived under one summary with a document's memory (its own included),
    or [] for a memory archived on its own."""
    members = document.get("cluster")
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        return []
    return members


def original_key(memory_id: str, checksum: str) -> str:
    """The object key of an original: content-addressed, so two archivals of one memory
    never write the same key (each original carries its attempt's nonce, so no two
    attempts' bytes are equal) and a record names the exact bytes it verifies."""
    return f"{memory_id}{KEY_SEPARATOR}{checksum}"


def key_owner(key: str) -> str:
    """The memory id an object key belongs to: `original_key`'s, or a key of format 1
    (before content addressing), which is the id itself."""
    owner, found, digest = key.rpartition(KEY_SEPARATOR)
    return owner if found and _HEX64.fullmatch(digest) else key


# What a write can change on a live memory that its record or original keeps (the
# fields of `MemoryPatch`: forget, pin, core, importance, supersession, metadata; and a
# replace's content): a draft made before such a change is stale, and is not committed.
DRAFTED_FIELDS = (
    "content",
    "memory_type",
    "source",
    "importance",
    "pinned",
    "core",
    "do_not_inject",
    "superseded_by",
    "metadata",
)


def changed_since(drafted: Memory, current: Memory) -> bool:
    """Whether `current` differs from the memory as it was drafted in what the draft's
    record and original keep (`DRAFTED_FIELDS`); uses and tier moves do not count."""
    return any(getattr(drafted, f) != getattr(current, f) for f in DRAFTED_FIELDS)


@dataclass(frozen=True)
class Draft:
    """One memory's archival up to its commit: the record to write and the original's
    exact bytes, under `original_key(record.id, record.checksum)`; `memory`, the memory
    as drafted (`changed_since`), and `cluster`, the ids archived under one summary
    with it (itself included; empty for a memory archived on its own)."""

    record: ArchiveRecord
    data: bytes
    memory: Memory
    cluster: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def key(self) -> str:
        return original_key(self.record.id, self.record.checksum)


class Archiver:
    """The steps of one memory's archival (`tiered_memory.archival` runs them, claims
    first), expansion and restore. Each step makes one call per port: the adapters
    retry what is worth retrying (one retry layer)."""

    def __init__(
        self,
        store: MemoryStore,
        graph: AssociationGraph,
        objects: ObjectStore,
        summarizer: Summarizer,
        embedder: Embedder,
        tokens: TokenCounter,
        policy: Policy,
    ) -> None:
        self.store, self.graph, self.objects = store, graph, objects
        self.summarizer, self.embedder, self.tokens = summarizer, embedder, tokens
        self.policy = policy
        self._unsynced: set[str] = set()  # namespaces with originals not yet folder-synced

    async def draft(
        self,
        ns: str,
        memory_id: str,
        *,
        now: datetime,
        reason: str,
        previous: Sequence[str] = (),
    ) -> Draft | None:
        """Steps 1-2 for one live memory the caller has claimed: summarise, embed the
        summary, serialise the original. None when the memory is no longer live.

        `previous`: checksums of originals earlier attempts wrote (the journal). If the
        memory has no links in the graph, an earlier attempt may have dropped them before
        stopping; they are read back from its original."""
        drafts = await self.draft_cluster(
            ns, [(memory_id, reason)], now=now, previous={memory_id: previous}
        )
        return drafts[0] if drafts else None

    async def draft_cluster(
        self,
        ns: str,
        members: Sequence[tuple[str, str]],
        *,
        now: datetime,
        previous: Mapping[str, Sequence[str]],
    ) -> list[Draft] | None:
        """Steps 1-2 for memories archived under one summary (seed 002's old COLD
        clusters; one memory is a cluster of one): one summary of their joined contents,
        embedded once, and an original each that names every member (`cluster`).

        `members`: (id, reason) pairs, the first the summary's record: only its record
        carries the summary embedding, so a search finds the cluster once, and `expand`
        or `restore` of any member reaches all. None when one is no longer live."""
        ids = [memory_id for memory_id, _ in members]
        found = await self.store.get_many(ns, ids, with_embeddings=True)
        if any(memory_id not in found for memory_id in ids):
            return None
        memories = [found[memory_id] for memory_id in ids]
        links: dict[str, list[Link]] = {}
        for memory_id in ids:
            links[memory_id] = await self.graph.links_of(ns, [memory_id])
            if not links[memory_id]:
                links[memory_id] = await self._links_from_previous_attempt(
                    ns, memory_id, previous.get(memory_id, ())
                )
        joined = "\n".join(m.content for m in memories)
        request = SummaryRequest(
            content=joined,
            memory_type=memories[0].memory_type,
            domain=_domain(memories[0]),
            entities=await self._entities(ns, memories, links),
        )
        summary = await self.summarizer.summarize(request)
        text = summary.text.strip() or joined[:200]
        matrix = await self.embedder.aembed_documents([text])
        summary_vector = validation.check_vector(matrix[0], None, what="summary embedding")
        vector = [float(x) for x in summary_vector]
        cluster = ids if len(ids) > 1 else []
        return [
            self._draft(
                ns,
                memory,
                links[memory.id],
                summary=text,
                vector=vector if i == 0 else None,
                now=now,
                reason=reason,
                cluster=cluster,
            )
            for i, (memory, (_, reason)) in enumerate(zip(memories, members, strict=True))
        ]

    def _draft(
        self,
        ns: str,
        memory: Memory,
        links: Sequence[Link],
        *,
        summary: str,
        vector: list[float] | None,
        now: datetime,
        reason: str,
        cluster: Sequence[str],
    ) -> Draft:
        document = original_document(
            memory,
            links,
            archived_at=now,
            reason=reason,
            attempt=uuid.uuid4().hex,
            cluster=cluster,
        )
        data = encode_document(document)
        checksum = sha256_hex(data)
        record = ArchiveRecord(
            id=memory.id,
            namespace=ns,
            summary=summary,
            summary_embedding=vector,
            memory_type=memory.memory_type,
            importance=memory.importance,
            source=memory.source,
            metadata=memory.metadata,
            # The links live in the verified original (restore re-creates them from
            # there), not in the record: a record stays a few hundred bytes however
            # linked its memory was.
            storage_ref=self.objects.ref(ns, original_key(memory.id, checksum)),
            size_bytes=len(data),
            checksum=checksum,
            storage_verified=True,
            created_at=memory.created_at,
            archived_at=now,
            archive_reason=reason,
            use_count=memory.use_count,
            do_not_inject=memory.do_not_inject,
            superseded=memory.superseded,
        )
        return Draft(record, data, memory.model_copy(update={"embedding": None}), tuple(cluster))

    async def _entities(
        self, ns: str, memories: Sequence[Memory], links: Mapping[str, Sequence[Link]]
    ) -> tuple[str, ...]:
        """Seed 001's "linked entities as context": the names, places, dates and numbers
        of the memories and of the live memories they link to (strongest links first),
        bounded (`entity_names`). Ids are never entities."""
        own = {m.id for m in memories}
        ranked = sorted(
            (link for memory_links in links.values() for link in memory_links),
            key=lambda link: -link.weight,
        )
        targets = list(dict.fromkeys(t for link in ranked if (t := link.target) not in own))
        linked = await self.store.get_many(ns, targets[:MAX_LINKED]) if targets else {}
        texts = [m.content for m in memories] + [
            linked[t].content for t in targets[:MAX_LINKED] if t in linked
        ]
        return entity_names(texts)

    async def store_original(self, ns: str, draft: Draft, *, defer_sync: bool = False) -> None:
        """Step 3: write the original under its own key and verify it (HEAD: size and
        sha256). The caller has noted the checksum in the journal first.

        `defer_sync`: on an object store that can defer it (`SupportsDeferredSync`: the
        local folder), leave the folder fsync that makes the original's rename durable
        to `commit`, which syncs the folder once for all the originals written since,
        before any record that points to one is committed."""
        objects = self.objects
        if defer_sync and isinstance(objects, SupportsDeferredSync):
            # marked once renamed: a `commit` syncing the folder meanwhile (it unmarks
            # first) either covers this rename or leaves the mark
            await objects.put(ns, draft.key, draft.data, sync_folder=False)
            self._unsynced.add(ns)
        else:
            await objects.put(ns, draft.key, draft.data)
        head = await objects.head(ns, draft.key)
        if head is None or head.size != len(draft.data) or head.checksum != draft.record.checksum:
            raise ArchiveIntegrityError(
                f"stored original of {draft.id!r} did not verify (size or checksum differ)"
            )

    async def commit(self, ns: str, drafts: Sequence[Draft], *, claimant: str) -> set[str]:
        """Steps 4-6 for stored originals: drop the links of the memories `claimant`
        still holds and write their records (each replaces its live memory), all in one
        transaction where the store allows, or none on an error. Returns the ids whose
        record is this call's.

        A memory changed since its draft (`changed_since`: a forget, a pin, a
        supersession or a replace that landed while it was drafted and stored) is not
        committed: its record and original hold the memory as it was, and committing
        them would undo the change. It stays live as changed, and a later archival
        drafts it again. A cluster commits whole or not at all (its summary is on one
        member's record). The caller deletes the originals of what did not commit.

        Originals whose folder fsync `store_original` deferred are made durable first:
        a record is never committed before the original it points to."""
        if not drafts:
            return set()
        if ns in self._unsynced and isinstance(self.objects, SupportsDeferredSync):
            self._unsynced.discard(ns)
            try:
                await self.objects.sync_folder(ns)
            except BaseException:
                self._unsynced.add(ns)
                raise
        # Links go before the records: a crash between leaves a COLD memory whose links
        # are kept in its verified original (the journal names it for the rerun), never
        # a dangling link. Where the graph shares the store's transaction (the embedded
        # SQLite file), all commit together, claims and changes checked inside: one
        # synced commit per group, and a crash keeps the links and the memories as they
        # were. Elsewhere the checks narrow the window, as the claims do.
        async with self.store.transaction():
            ids = [d.id for d in drafts]
            states = await self.store.archival_states(ns, ids)
            current = await self.store.get_many(ns, ids)
            refused = {
                d.id
                for d in drafts
                if d.id not in states
                or states[d.id].claimant != claimant
                or d.id not in current
                or changed_since(d.memory, current[d.id])
            }
            refused |= {m for d in drafts if d.id in refused for m in d.cluster}
            held = [d.record for d in drafts if d.id not in refused]
            if not held:
                return set()
            await self.graph.drop_nodes(ns, [r.id for r in held])
            written = await self.store.archive_many(ns, held, claimant=claimant)
        ids = [r.id for r in held]
        if written == len(held):
            committed = set(ids)
        else:  # another claimant took some over meanwhile (a lease ran out)
            found = await self.store.get_archives(ns, ids)
            committed = {r.id for r in held if r.id in found and found[r.id].checksum == r.checksum}
        # And once more after it: a link another writer made meanwhile (it saw the
        # memory still live) would otherwise point at an archived memory. The memories
        # are archived by now, so a failure here is logged, not reported as one.
        try:
            await self.graph.drop_nodes(ns, sorted(committed))
        except Exception as e:
            log.warning("links made to %d memories while archived not dropped: %s", len(ids), e)
        return committed

    async def discard(self, ns: str, memory_id: str, checksums: Sequence[str]) -> None:
        """Delete originals no record points at (an attempt's that did not commit), best
        effort: an original left behind is harmless, and the journal still names it."""
        for checksum in checksums:
            try:
                await self.objects.delete(ns, original_key(memory_id, checksum))
            except Exception as e:
                log.warning("unused original of %r left in object storage: %s", memory_id, e)

    async def _links_from_previous_attempt(
        self, ns: str, memory_id: str, previous: Sequence[str]
    ) -> list[Link]:
        """The links an earlier attempt saved in its original, newest attempt first; with
        none in the journal, an original a version before content addressing left under
        the memory's id."""
        attempts: list[tuple[str, str | None]] = [
            (original_key(memory_id, c), c) for c in reversed(previous)
        ] or [(memory_id, None)]
        for key, checksum in attempts:
            try:
                data = await self.objects.get(ns, key)
                if checksum is not None and sha256_hex(data) != checksum:
                    continue
                return document_links(decode_document(data, expected_id=memory_id))
            except (TieredMemoryError, OSError, TypeError, ValueError):
                continue  # never written, or unreadable: an older one may hold them
        return []

    async def estimate(
        self, ns: str, memories: Sequence[Memory], now: datetime, *, shared: int = 0
    ) -> ArchiveEstimate:
        """Cost of archiving `memories`: summariser calls and tokens, bytes to store
        (the originals are serialised for real, embeddings included). `shared`: how many
        of them are summarised along with another (clusters): no call, prompt or output
        of their own."""
        calls = len(memories) - shared
        est = ArchiveEstimate(candidates=len(memories), summarizer_calls=calls)
        full = await self.store.get_many(ns, [m.id for m in memories], with_embeddings=True)
        for memory in (full.get(m.id, m) for m in memories):
            est.input_tokens += self.tokens.count(memory.content)
            est.bytes += len(
                encode_document(
                    original_document(
                        memory, [], archived_at=now, reason="estimate", attempt=uuid.uuid4().hex
                    )
                )
            )
        est.input_tokens += calls * (SUMMARY_PROMPT_TOKENS + SUMMARY_CONTEXT_TOKENS)
        est.output_tokens += calls * SUMMARY_OUTPUT_TOKENS
        return est

    async def expand(
        self, ns: str, memory_id: str, *, now: datetime
    ) -> tuple[dict[str, Any], bool]:
        """The original of an archived memory, verified; counts the expansion.

        Returns (document, restored): 3 expansions within 30 days restore it to WARM.
        A memory archived in a cluster (`cluster_of`) comes with the verified originals
        of every member still archived, under `originals` (its own included), and a
        restore brings them all back.
        """
        records = await self.store.get_archives(ns, [memory_id])
        record = records.get(memory_id)
        if record is None:
            raise NotFoundError(f"no archived memory {memory_id!r} in namespace {ns!r}")
        document = decode_document(await self.verified_original(ns, record), expected_id=memory_id)
        members = cluster_of(document)
        if members:
            document["originals"] = await self._cluster_documents(ns, memory_id, document, members)
        record.expansions, due = lifecycle.expansions_to_keep(
            record.expansions, now, self.policy.tiers
        )
        record.use_count += 1
        await self.store.update_archive(ns, record)
        restored = False
        if due:
            restored = await self.restore(ns, [memory_id], now=now) == 1
        return document, restored

    async def _cluster_documents(
        self, ns: str, memory_id: str, document: dict[str, Any], members: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The originals of a cluster's members still archived, in cluster order."""
        others = await self.store.get_archives(ns, [m for m in members if m != memory_id])
        out: list[dict[str, Any]] = []
        for member in members:
            if member == memory_id:
                out.append(dict(document))
            elif member in others:
                data = await self.verified_original(ns, others[member])
                out.append(decode_document(data, expected_id=member))
        return out

    async def fill_flags(self, ns: str, record: ArchiveRecord) -> bool:
        """Give a record archived before records kept their memory's flags (forgotten,
        superseded) those of its verified original, wherever its time's key scheme put
        it (`original_keys`), so searches can filter it. False when the record left the
        archive meanwhile (restored or deleted): nothing to fill."""
        data = await self.verified_original(ns, record)
        memory = memory_from_document(decode_document(data, expected_id=record.id))
        filled = record.model_copy(
            update={"do_not_inject": memory.do_not_inject, "superseded": memory.superseded}
        )
        try:
            await self.store.update_archive(ns, filled)
        except NotFoundError:
            return False
        return True

    def original_keys(self, ns: str, record: ArchiveRecord) -> list[str]:
        """Where a record's original may be, most likely first: its content-addressed
        key, or the memory id for records archived before content addressing."""
        content = original_key(record.id, record.checksum)
        keys = [content, record.id]
        return keys if record.storage_ref != self.objects.ref(ns, record.id) else keys[::-1]

    async def original(self, ns: str, record: ArchiveRecord) -> tuple[str, bytes]:
        """The key and bytes of an archive record's original, unverified; its absence is
        an integrity error (the record exists, so "not found" would send the caller
        looking elsewhere)."""
        for key in self.original_keys(ns, record):
            try:
                return key, await self.objects.get(ns, key)
            except NotFoundError as e:
                missing = e
        raise ArchiveIntegrityError(
            f"the original of archived memory {record.id!r} is missing from object "
            f"storage; restore it from a backup of the object store ({missing})"
        ) from missing

    async def verified_original(self, ns: str, record: ArchiveRecord) -> bytes:
        """The original's bytes, checked against the record (size and sha256)."""
        _, data = await self.original(ns, record)
        if sha256_hex(data) != record.checksum or len(data) != record.size_bytes:
            raise ArchiveIntegrityError(
                f"the stored original of {record.id!r} does not match its archive record"
            )
        return data

    async def delete_original(self, ns: str, record: ArchiveRecord) -> None:
        """Delete a record's original wherever it is (deleting a missing key is no error)."""
        for key in self.original_keys(ns, record):
            await self.objects.delete(ns, key)

    async def hand_on_summaries(self, ns: str, leaving: Mapping[str, ArchiveRecord]) -> set[str]:
        """Before archive records leave for good (a hard delete, a replace): a record
        that carries its cluster's summary embedding (`draft_cluster`) hands it to the
        first member that stays archived, or the others would stay archived but never
        be found.

        The heir's embedding is its summary embedded again, as archival made it (a
        store's read-back vector may be an approximation, `ArchiveRecord`). It is
        written before the record leaves: a crash between the two finds the cluster
        twice until the delete is rerun, never not at all. A record whose original is
        missing or corrupt hands nothing on (its cluster is unknown) and still leaves.
        Returns the ids of the records whose hand-on failed otherwise (the object store
        or the embedder unreachable): the caller queues their originals with `hand_on`
        (`PendingOriginal`), so the hand-on happens when the queue is worked through,
        and an outage never blocks the write."""
        deferred: set[str] = set()
        for record in leaving.values():
            if record.summary_embedding is None:
                continue
            try:
                data = await self.verified_original(ns, record)
                await self._hand_on(ns, record.id, data, leaving)
            except ArchiveIntegrityError as e:
                log.warning("archived %r: cluster unknown, summary not handed on: %s", record.id, e)
            except Exception as e:
                log.warning("archived %r: summary to hand on when it is deleted: %s", record.id, e)
                deferred.add(record.id)
        return deferred

    async def _hand_on(
        self, ns: str, memory_id: str, data: bytes, leaving: Collection[str]
    ) -> bool:
        """Give the summary embedding of `memory_id`'s cluster (its original: `data`)
        to the first member still archived outside `leaving`, unless one has it;
        returns whether one took it on."""
        members = cluster_of(decode_document(data, expected_id=memory_id))
        staying = [m for m in members if m not in leaving and m != memory_id]
        found = await self.store.get_archives(ns, staying) if staying else {}
        heir = next((found[m] for m in staying if m in found), None)
        if heir is None or heir.summary_embedding is not None:
            return False
        matrix = await self.embedder.aembed_documents([heir.summary])
        vector = validation.check_vector(matrix[0], None, what="summary embedding")
        heir.summary_embedding = [float(x) for x in vector]
        await self.store.update_archive(ns, heir)
        return True

    @staticmethod
    def pending(
        records: Iterable[ArchiveRecord], deferred: Collection[str] = ()
    ) -> list[PendingOriginal]:
        """The queue entries of records leaving for good (`PendingOriginal`); those in
        `deferred` still have their cluster's summary to hand on."""
        return [PendingOriginal(r.id, r.checksum, hand_on=r.id in deferred) for r in records]

    async def delete_pending(self, ns: str, originals: Sequence[PendingOriginal]) -> int:
        """Work through queued originals (`MemoryStore.queue_originals`): hand on a
        cluster's summary where one is due, delete the original, and drop the entry;
        returns how many entries were done. Idempotent: a missing original counts as
        deleted, so a rerun, or two processes at once, converge.

        An original a record or a journal row names again is kept, its entry left
        queued (a store without transactions queues before the write that lets go of
        it). The key of an original archived before content addressing (the memory's
        id) is deleted only while no record of that id exists. What fails (the object
        store or the embedder unreachable) stays queued for the next sweep. An original
        listed twice is worked once, with the hand-on if either asks (as the queue
        keeps one)."""
        if not originals:
            return 0
        merged: dict[tuple[str, str], PendingOriginal] = {}
        for o in originals:
            had = merged.get((o.id, o.checksum))
            merged[(o.id, o.checksum)] = had if had is not None and had.hand_on else o
        originals = list(merged.values())
        ids = sorted({o.id for o in originals})
        records = await self.store.get_archives(ns, ids)
        states = await self.store.archival_states(ns, ids)
        done: list[PendingOriginal] = []
        for o in originals:
            record, state = records.get(o.id), states.get(o.id)
            if (record is not None and record.checksum == o.checksum) or (
                state is not None and o.checksum in state.written
            ):
                continue  # named again: not an orphan (yet)
            keys = [original_key(o.id, o.checksum)] + ([o.id] if record is None else [])
            try:
                if o.hand_on:
                    await self._hand_on_queued(ns, o, keys)
                for key in keys:
                    await self.objects.delete(ns, key)
            except Exception as e:
                log.warning("original of %r in %r stays queued for deletion: %s", o.id, ns, e)
                continue
            done.append(o)
        if done:
            await self.store.drop_pending_originals(ns, done)
        return len(done)

    async def _hand_on_queued(self, ns: str, o: PendingOriginal, keys: Sequence[str]) -> None:
        """A queued original's deferred hand-on (`hand_on_summaries`): its record is
        gone, so every member still archived is a candidate heir. A missing or corrupt
        original hands nothing on, as there."""
        for key in keys:
            try:
                data = await self.objects.get(ns, key)
            except NotFoundError:
                continue
            if sha256_hex(data) != o.checksum:
                continue
            try:
                await self._hand_on(ns, o.id, data, ())
            except ArchiveIntegrityError as e:
                log.warning("archived %r: cluster unknown, summary not handed on: %s", o.id, e)
            return
        log.warning("archived %r: original missing, summary not handed on", o.id)

    async def restore(self, ns: str, ids: Sequence[str], *, now: datetime) -> int:
        """Bring archived memories back to WARM from their originals (seed-001 rollback).

        Links are re-created once all of `ids` are back, so a link between two memories
        restored together survives whichever of them comes first. A member of a cluster
        (`cluster_of`) brings the other members still archived back with it: they were
        archived under one summary, and it would leave with the first."""
        records = await self.store.get_archives(ns, list(ids))
        queue = list(records.items())
        seen = set(records)
        restored = 0
        pending: list[Link] = []
        try:
            while queue:
                memory_id, record = queue.pop(0)
                data = await self.verified_original(ns, record)
                document = decode_document(data, expected_id=memory_id)
                mates = [m for m in cluster_of(document) if m not in seen]
                if mates:
                    seen.update(mates)
                    queue.extend((await self.store.get_archives(ns, mates)).items())
                memory = lifecycle.restored(memory_from_document(document), ns, now)
                queued = self.pending([record])
                async with self.store.transaction():  # the original is queued with it
                    await self.store.queue_originals(ns, queued)
                    await self.store.unarchive_many(ns, [memory])
                # Records archived before the links moved to the original carry them.
                pending.extend(document_links(document) or record.links)
                try:  # what fails stays queued for the sweep
                    await self.delete_pending(ns, queued)
                except Exception as e:
                    log.warning("original of restored %r stays queued: %s", memory_id, e)
                restored += 1
        finally:
            await self._relink(ns, pending)
        return restored

    async def restore_all(self, ns: str, *, now: datetime) -> int:
        """`restore` every archived memory of `ns`, a page (`batch_size`) at a time."""
        restored = 0
        while True:  # restored records leave the archive, so always read the first page
            page = await self.store.scan_archives(ns, limit=self.policy.archival.batch_size)
            if not page:
                return restored
            count = await self.restore(ns, [r.id for r in page], now=now)
            if count == 0:
                return restored
            restored += count

    async def _relink(self, ns: str, links: list[Link]) -> None:
        """Re-create the links of restored memories whose both ends are live."""
        if not links:
            return
        try:
            ends = sorted({link.target for link in links} | {link.source for link in links})
            live = await self.store.get_many(ns, ends)
            keep = [link for link in links if link.target in live and link.source in live]
            if keep:
                await self.graph.upsert_links(ns, keep)
        except Exception as e:  # the memories are back; only their associations are not
            log.warning("links of %d restored memories not re-created: %s", len(links), e)


def _domain(memory: Memory) -> str | None:
    value = memory.metadata.get("domain")
    return str(value) if value is not None else None
