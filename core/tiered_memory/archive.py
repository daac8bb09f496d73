"""The steps of one memory's archival (DESIGN.md section 6, seed 001), the original's
format, expansion and restore. `tiered_memory.archival` runs the steps, claims first.

Per memory: summarise -> embed the summary -> write the original as JSON under a key of
its own (`original_key`: the id and the sha256 of the bytes) -> verify it (HEAD: size
and sha256) -> drop its graph links -> write the archive record, which replaces the live
record in one store operation, for the claimant only. A crash at any step leaves the
memory COLD with its content (the journal names any original written, for the rerun to
take its links from and delete) or fully ARCHIVED with a verified original; never lost,
never both, and a record always points at the bytes its checksum verifies.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import uuid
from collections.abc import Sequence
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
    Summarizer,
    SummaryRequest,
    SupportsDeferredSync,
    TokenCounter,
)

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


def original_document(
    memory: Memory,
    links: Sequence[Link],
    *,
    archived_at: datetime,
    reason: str,
    attempt: str | None = None,
) -> dict[str, Any]:
    """The seed-001 object format, plus the full memory so a restore loses nothing.

    The embedding is stored once, exactly, as base64 (`encode_embedding`); the memory's
    content sits at the top level only. `attempt` (a random nonce) makes the bytes, and
    so the content-addressed key, of every archival attempt its own."""
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


@dataclass(frozen=True)
class Draft:
    """One memory's archival up to its commit: the record to write and the original's
    exact bytes, under `original_key(record.id, record.checksum)`."""

    record: ArchiveRecord
    data: bytes

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
        found = await self.store.get_many(ns, [memory_id], with_embeddings=True)
        memory = found.get(memory_id)
        if memory is None:
            return None
        links = await self.graph.links_of(ns, [memory_id])
        if not links:
            links = await self._links_from_previous_attempt(ns, memory_id, previous)
        request = SummaryRequest(
            content=memory.content,
            memory_type=memory.memory_type,
            domain=_domain(memory),
            entities=tuple(link.target for link in links[:10]),
        )
        summary = await self.summarizer.summarize(request)
        text = summary.text.strip() or memory.content[:200]
        matrix = await self.embedder.embed_documents([text])
        summary_vector = validation.check_vector(matrix[0], None, what="summary embedding")

        document = original_document(
            memory, links, archived_at=now, reason=reason, attempt=uuid.uuid4().hex
        )
        data = encode_document(document)
        checksum = sha256_hex(data)
        record = ArchiveRecord(
            id=memory.id,
            namespace=ns,
            summary=text,
            summary_embedding=[float(x) for x in summary_vector],
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
        return Draft(record, data)

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

    async def commit(self, ns: str, records: Sequence[ArchiveRecord], *, claimant: str) -> set[str]:
        """Steps 4-6 for stored originals: drop the links of the memories `claimant`
        still holds and write their records (each replaces its live memory), all in one
        transaction where the store allows, or none on an error. Returns the ids whose
        record is this call's.

        Originals whose folder fsync `store_original` deferred are made durable first:
        a record is never committed before the original it points to."""
        if not records:
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
        # SQLite file), all commit together, claims checked inside: one synced commit
        # per group, and a crash keeps the links and the memories as they were.
        async with self.store.transaction():
            states = await self.store.archival_states(ns, [r.id for r in records])
            held = [r for r in records if r.id in states and states[r.id].claimant == claimant]
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

    async def estimate(self, ns: str, memories: Sequence[Memory], now: datetime) -> ArchiveEstimate:
        """Cost of archiving `memories`: summariser calls and tokens, bytes to store
        (the originals are serialised for real, embeddings included)."""
        est = ArchiveEstimate(candidates=len(memories), summarizer_calls=len(memories))
        full = await self.store.get_many(ns, [m.id for m in memories], with_embeddings=True)
        for memory in (full.get(m.id, m) for m in memories):
            est.input_tokens += (
                SUMMARY_PROMPT_TOKENS + SUMMARY_CONTEXT_TOKENS + self.tokens.count(memory.content)
            )
            est.output_tokens += SUMMARY_OUTPUT_TOKENS
            est.bytes += len(
                encode_document(
                    original_document(
                        memory, [], archived_at=now, reason="estimate", attempt=uuid.uuid4().hex
                    )
                )
            )
        return est

    async def expand(
        self, ns: str, memory_id: str, *, now: datetime
    ) -> tuple[dict[str, Any], bool]:
        """The original of an archived memory, verified; counts the expansion.

        Returns (document, restored): 3 expansions within 30 days restore it to WARM.
        """
        records = await self.store.get_archives(ns, [memory_id])
        record = records.get(memory_id)
        if record is None:
            raise NotFoundError(f"no archived memory {memory_id!r} in namespace {ns!r}")
        document = decode_document(await self.verified_original(ns, record), expected_id=memory_id)
        record.expansions, due = lifecycle.expansions_to_keep(
            record.expansions, now, self.policy.tiers
        )
        record.use_count += 1
        await self.store.update_archive(ns, record)
        restored = False
        if due:
            restored = await self.restore(ns, [memory_id], now=now) == 1
        return document, restored

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

    async def restore(self, ns: str, ids: Sequence[str], *, now: datetime) -> int:
        """Bring archived memories back to WARM from their originals (seed-001 rollback).

        Links are re-created once all of `ids` are back, so a link between two memories
        restored together survives whichever of them comes first."""
        records = await self.store.get_archives(ns, list(ids))
        restored = 0
        pending: list[Link] = []
        try:
            for memory_id, record in records.items():
                data = await self.verified_original(ns, record)
                document = decode_document(data, expected_id=memory_id)
                memory = lifecycle.restored(memory_from_document(document), ns, now)
                await self.store.unarchive_many(ns, [memory])
                # Records archived before the links moved to the original carry them.
                pending.extend(document_links(document) or record.links)
                try:
                    await self.delete_original(ns, record)
                except Exception as e:  # an orphan original is harmless; a lost memory is not
                    log.warning("original of restored %r left in object storage: %s", memory_id, e)
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
