"""The archival pipeline (DESIGN.md section 6, seed 001), expansion and restore.

Per memory: summarise -> embed the summary -> write the original as JSON -> verify it
(HEAD: size and sha256) -> drop its graph links -> write the archive record, which
replaces the live record in one store operation. A crash at any step leaves the
memory COLD with its content (and its original, if written, reusable on the rerun) or
fully ARCHIVED with a verified original; never lost, never both.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from . import validation
from .archives.local import LocalFolderObjectStore
from .errors import (
    ArchiveIntegrityError,
    BackendUnavailableError,
    NotFoundError,
    TieredMemoryError,
)
from .models import ArchiveEstimate, ArchiveRecord, Link, Memory, Tier
from .policy import Policy
from .ports import (
    AssociationGraph,
    Embedder,
    MemoryStore,
    ObjectStore,
    Summarizer,
    SummaryRequest,
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
T = TypeVar("T")

# The seed-001 prompt, used for cost estimates here and by the Claude summariser.
SUMMARY_PROMPT_TOKENS = 80
SUMMARY_CONTEXT_TOKENS = 50
SUMMARY_OUTPUT_TOKENS = 80


def original_document(
    memory: Memory, links: Sequence[Link], *, archived_at: datetime, reason: str
) -> dict[str, Any]:
    """The seed-001 object format, plus the full memory so a restore loses nothing.

    The embedding is stored once, exactly, as base64 (`encode_embedding`); the memory's
    content sits at the top level only."""
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


async def with_retries(
    call: Callable[[], Awaitable[T]], *, retries: int, base_delay: float, what: str
) -> T:
    """Exponential backoff with jitter for transient failures of remote services.

    Only outages are retried; a configuration or input error fails at once, because
    retrying a bad API key five times only delays the message that says so.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except (BackendUnavailableError, OSError, asyncio.TimeoutError) as e:
            if attempt >= retries:
                raise
            delay = base_delay * (2**attempt) * (0.5 + random.random() / 2)
            log.info("%s failed (%s); retry %d in %.2fs", what, e, attempt + 1, delay)
            attempt += 1
            await asyncio.sleep(delay)


class Archiver:
    """Moves COLD memories to the archive and back; one memory at a time, each atomic."""

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

    async def archive_one(self, ns: str, memory_id: str, *, now: datetime, reason: str) -> bool:
        """Archive one live memory; False when it is no longer there (already done)."""
        record = await self.prepare(ns, memory_id, now=now, reason=reason)
        if record is None:
            return False
        await self.commit(ns, [record])
        return True

    async def prepare(
        self, ns: str, memory_id: str, *, now: datetime, reason: str, defer_sync: bool = False
    ) -> ArchiveRecord | None:
        """Steps 1-3 for one live memory: summarise, write the original, verify it; the
        record to commit (`commit`), or None when the memory is no longer there.

        `defer_sync`: on the local folder store, leave the folder fsync that makes the
        original's rename durable to `commit`, which syncs the folder once for all the
        originals written since, before any record that points to one is committed."""
        ap = self.policy.archival
        found = await self.store.get_many(ns, [memory_id], with_embeddings=True)
        memory = found.get(memory_id)
        if memory is None:
            return None
        links = await self.graph.links_of(ns, [memory_id])
        links = await self._links_from_previous_attempt(ns, memory_id, links)
        request = SummaryRequest(
            content=memory.content,
            memory_type=memory.memory_type,
            domain=_domain(memory),
            entities=tuple(link.target for link in links[:10]),
        )
        summary = await with_retries(
            lambda: self.summarizer.summarize(request),
            retries=ap.max_retries,
            base_delay=ap.backoff_base_seconds,
            what="summarise",
        )
        text = summary.text.strip() or memory.content[:200]
        matrix = await self.embedder.embed_documents([text])
        summary_vector = validation.check_vector(matrix[0], None, what="summary embedding")

        document = original_document(memory, links, archived_at=now, reason=reason)
        data = encode_document(document)
        checksum = sha256_hex(data)
        objects = self.objects
        deferred = defer_sync and isinstance(objects, LocalFolderObjectStore)

        async def put() -> object:
            if deferred and isinstance(objects, LocalFolderObjectStore):
                # marked once renamed: a `commit` syncing the folder meanwhile (it
                # unmarks first) either covers this rename or leaves the mark
                info = await objects.put(ns, memory_id, data, sync_folder=False)
                self._unsynced.add(ns)
                return info
            return await objects.put(ns, memory_id, data)

        await with_retries(
            put,
            retries=ap.max_retries,
            base_delay=ap.backoff_base_seconds,
            what="store original",
        )
        head = await self.objects.head(ns, memory_id)
        if head is None or head.size != len(data) or head.checksum != checksum:
            raise ArchiveIntegrityError(
                f"stored original of {memory_id!r} did not verify (size or checksum differ)"
            )
        return ArchiveRecord(
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
            storage_ref=self.objects.ref(ns, memory_id),
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

    async def commit(self, ns: str, records: Sequence[ArchiveRecord]) -> None:
        """Steps 4-6 for prepared memories: drop their links and write their records
        (each replaces its live memory), all in one transaction, or none on an error.

        Originals whose folder fsync `prepare` deferred are made durable first: a record
        is never committed before the original it points to."""
        if not records:
            return
        if ns in self._unsynced and isinstance(self.objects, LocalFolderObjectStore):
            self._unsynced.discard(ns)
            try:
                await self.objects.sync_folder(ns)
            except BaseException:
                self._unsynced.add(ns)
                raise
        ids = [r.id for r in records]
        # Links go before the records: a crash between leaves a COLD memory whose links
        # are kept in its verified original (reused by `prepare`), never a dangling link.
        # Where the graph shares the store's transaction (the embedded SQLite file), all
        # commit together: one synced commit per batch instead of one per memory, and a
        # crash keeps the links and the memories as they were.
        async with self.store.transaction():
            await self.graph.drop_nodes(ns, ids)
            await self.store.archive_many(ns, records)
        # And once more after it: a link another writer made meanwhile (it saw the
        # memory still live) would otherwise point at an archived memory. The memories
        # are archived by now, so a failure here is logged, not reported as one.
        try:
            await self.graph.drop_nodes(ns, ids)
        except Exception as e:
            log.warning("links made to %d memories while archived not dropped: %s", len(ids), e)

    async def _links_from_previous_attempt(
        self, ns: str, memory_id: str, links: list[Link]
    ) -> list[Link]:
        """If an earlier run wrote the original and then stopped, its links live there."""
        if links:
            return links
        try:
            if await self.objects.head(ns, memory_id) is None:
                return links
            document = decode_document(await self.objects.get(ns, memory_id), expected_id=memory_id)
            previous = document_links(document)
        except (TieredMemoryError, OSError, TypeError, ValueError):
            return links  # unreadable: the put below replaces it with a good original
        return previous

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
                encode_document(original_document(memory, [], archived_at=now, reason="estimate"))
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
        data = await self._original(ns, memory_id)
        if sha256_hex(data) != record.checksum or len(data) != record.size_bytes:
            raise ArchiveIntegrityError(
                f"the stored original of {memory_id!r} does not match its archive record"
            )
        document = decode_document(data, expected_id=memory_id)
        tp = self.policy.tiers
        recent = [t for t in record.expansions if now - t < tp.restore_window] + [now]
        record.expansions = recent
        record.use_count += 1
        await self.store.update_archive(ns, record)
        restored = False
        if len(recent) >= tp.restore_expansions:
            restored = await self.restore(ns, [memory_id], now=now) == 1
        return document, restored

    async def backfill_flags(self, ns: str, *, limit: int) -> tuple[int, list[str]]:
        """Give up to `limit` records archived before records kept their memory's flags
        (forgotten, superseded) the flags of their verified originals, so searches can
        filter them. Returns how many were filled and an error per record that could
        not be (it stays unknown and is tried again next time)."""
        filled, errors = 0, list[str]()
        for record in await self.store.scan_archives(ns, limit=limit, flags_unknown=True):
            try:
                data = await self._original(ns, record.id)
                if sha256_hex(data) != record.checksum:
                    raise ArchiveIntegrityError(
                        f"the stored original of {record.id!r} does not match its archive record"
                    )
                memory = memory_from_document(decode_document(data, expected_id=record.id))
                record.do_not_inject = memory.do_not_inject
                record.superseded = memory.superseded
                await self.store.update_archive(ns, record)
                filled += 1
            except Exception as e:  # one unreadable original must not stop the others
                errors.append(f"{ns}: archive flags {record.id}: {type(e).__name__}: {e}")
        return filled, errors

    async def _original(self, ns: str, memory_id: str) -> bytes:
        """The stored original of an archive record; its absence is an integrity error
        (the record exists, so "not found" would send the caller looking elsewhere)."""
        try:
            return await self.objects.get(ns, memory_id)
        except NotFoundError as e:
            raise ArchiveIntegrityError(
                f"the original of archived memory {memory_id!r} is missing from object "
                f"storage; restore it from a backup of the object store ({e})"
            ) from e

    async def restore(self, ns: str, ids: Sequence[str], *, now: datetime) -> int:
        """Bring archived memories back to WARM from their originals (seed-001 rollback).

        Links are re-created once all of `ids` are back, so a link between two memories
        restored together survives whichever of them comes first."""
        records = await self.store.get_archives(ns, list(ids))
        restored = 0
        pending: list[Link] = []
        try:
            for memory_id, record in records.items():
                data = await self._original(ns, memory_id)
                if sha256_hex(data) != record.checksum:
                    raise ArchiveIntegrityError(
                        f"the stored original of {memory_id!r} does not match its archive record"
                    )
                document = decode_document(data, expected_id=memory_id)
                memory = memory_from_document(document)
                memory.namespace = ns
                memory.tier = Tier.WARM
                memory.cold_since = None
                memory.uses_since_cold = 0
                memory.tier_changed_at = now
                memory.last_accessed_at = now  # a restore is a use: it starts decaying afresh
                memory.updated_at = now
                await self.store.unarchive_many(ns, [memory])
                # Records archived before the links moved to the original carry them.
                pending.extend(document_links(document) or record.links)
                try:
                    await self.objects.delete(ns, memory_id)
                except Exception as e:  # an orphan original is harmless; a lost memory is not
                    log.warning("original of restored %r left in object storage: %s", memory_id, e)
                restored += 1
        finally:
            await self._relink(ns, pending)
        return restored

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
