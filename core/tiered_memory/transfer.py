"""Moving memories in and out: a JSON export that round-trips every field, a copy into a
fresh SQLite file, and an import of the markdown notes agents keep (MEMORY.md,
memory/*.md).

Everything goes through the engine's public API and its ports (`memory.store`,
`memory.graph`, `memory.objects`), so the same code exports from Weaviate + Neo4j + S3
as from the embedded file, and imports into either.

The JSON document (`FORMAT`, version 1) holds, for one namespace:
- `memories`: every live memory, every field, embedding included;
- `links`: every association between them, once per pair;
- `archives`: every archive record (summary, summary embedding, the links it had) with
  its original as the exact bytes kept in object storage (text), so the checksum still
  holds after import. `storage_ref` is rewritten to where the target keeps the
  original; every other field is imported as exported.

Imports are all or nothing: every record is checked first (as `add` checks its input,
plus the store's embedding dimension and references between records), then written
in one store transaction. A document goes into the namespace the caller names; the
one it names itself only with `keep_namespace=True`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .archive import original_key, sha256_hex
from .capture import EPISODIC, detect_type
from .errors import ArchiveIntegrityError, DimensionMismatchError, NotFoundError, ValidationError
from .models import LIVE_TIERS, ArchiveRecord, Link, Memory, MemoryType, Tier
from .namespaces import PathNamespace
from .policy import Limits
from .ports import ScanQuery
from .validation import (
    check_content,
    check_flag,
    check_id,
    check_int64,
    check_label,
    check_metadata,
    check_namespace,
    check_vector,
)

if TYPE_CHECKING:
    from .engine import AsyncTieredMemory

FORMAT = "tiered-memory-export"
VERSION = 1
PAGE = 500

Progress = Callable[[int], None]  # called with how many items were just handled


def _noop(_: int) -> None:
    return None


# -- JSON export -----------------------------------------------------------------------------


async def count_namespace(memory: AsyncTieredMemory, namespace: str) -> int:
    """Live memories plus archive records: the total a progress bar counts to."""
    return (await memory.stats(namespace=namespace)).total


async def export_namespace(
    memory: AsyncTieredMemory, namespace: str, *, progress: Progress = _noop
) -> dict[str, Any]:
    """The whole namespace as one JSON-able document (see the module docstring).

    Read in one snapshot of the store (`MemoryStore.snapshot`): a sweep archiving
    meanwhile, in this process or another, cannot make a memory appear twice (live
    in one page, archived in a later one), so the document can always be imported.
    """
    ns = check_namespace(namespace, memory.policy.limits)
    unread: list[str] = []
    async with memory.store.snapshot():
        document = await _export(memory, ns, progress, unread)
    if unread:
        await _read_again(memory, ns, document, unread)
    return document


async def _read_again(
    memory: AsyncTieredMemory, ns: str, document: dict[str, Any], ids: list[str]
) -> None:
    """The archived memories whose original was missing when the export read it, read
    again now that its snapshot has ended.

    A restore in another process commits the memory live and then deletes its
    original, so an export whose snapshot still saw the record archived finds no
    original: written without it, the memory's text was lost on import. Live now, it
    is exported as the live memory (with its links), in place of the record; still
    archived, with the record and original it has now (or none, when the original is
    really missing: `expand` will say so); gone, it was deleted meanwhile and is left
    out. It was not live in the snapshot, so it appears once either way."""
    store, graph = memory.store, memory.graph
    live = await store.get_many(ns, ids, with_embeddings=True)
    records = await store.get_archives(ns, [i for i in ids if i not in live])
    archives: list[dict[str, Any]] = []
    for entry in document["archives"]:
        memory_id = entry["record"]["id"]
        if memory_id not in ids:
            archives.append(entry)
        elif memory_id in records:
            archives.append(await _archive_entry(memory, ns, records[memory_id]))
    document["archives"] = archives
    document["memories"].extend(live[i].model_dump(mode="json") for i in ids if i in live)
    links = {(link["source"], link["target"]) for link in document["links"]}
    known = {m["id"] for m in document["memories"]}
    for link in await graph.links_of(ns, list(live)):
        pair = (min(link.source, link.target), max(link.source, link.target))
        if pair not in links and pair[0] in known and pair[1] in known:
            links.add(pair)
            update = {"source": pair[0], "target": pair[1]}
            document["links"].append(link.model_copy(update=update).model_dump(mode="json"))


async def _archive_entry(
    memory: AsyncTieredMemory, ns: str, record: ArchiveRecord
) -> dict[str, Any]:
    """An archive record with its original as text (None when it is missing)."""
    original: str | None
    try:
        original = (await memory.archiver.original(ns, record))[1].decode("utf-8")
    except ArchiveIntegrityError:
        original = None  # exported all the same; expand will say it is missing
    return {"record": record.model_dump(mode="json"), "original": original}


async def _export(
    memory: AsyncTieredMemory, ns: str, progress: Progress, unread: list[str]
) -> dict[str, Any]:
    """The document as the snapshot holds it; the ids of archived memories whose
    original was missing go to `unread` (`_read_again`)."""
    store, graph = memory.store, memory.graph
    memories: list[dict[str, Any]] = []
    links: dict[tuple[str, str], Link] = {}
    after: str | None = None
    while True:
        page = await store.scan(ns, ScanQuery(tiers=LIVE_TIERS, after_id=after, limit=PAGE))
        if not page:
            break
        ids = [m.id for m in page]
        full = await store.get_many(ns, ids, with_embeddings=True)
        for memory_id in ids:
            memories.append(full[memory_id].model_dump(mode="json"))
        for link in await graph.links_of(ns, ids):
            pair = (min(link.source, link.target), max(link.source, link.target))
            if pair not in links:  # one entry per association, seen from its smaller id
                links[pair] = link.model_copy(update={"source": pair[0], "target": pair[1]})
        progress(len(page))
        after = ids[-1]
        if len(page) < PAGE:
            break
    archives: list[dict[str, Any]] = []
    after = None
    while True:
        records = await store.scan_archives(ns, after_id=after, limit=PAGE)
        if not records:
            break
        for record in records:
            entry = await _archive_entry(memory, ns, record)
            if entry["original"] is None:
                unread.append(record.id)
            archives.append(entry)
        progress(len(records))
        after = records[-1].id
        if len(records) < PAGE:
            break
    return {
        "format": FORMAT,
        "version": VERSION,
        "namespace": ns,
        "exported_at": memory.clock.now().isoformat(),
        "dimension": await store.dimension(),
        "memories": memories,
        "links": [links[pair].model_dump(mode="json") for pair in sorted(links)],
        "archives": archives,
    }


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False)


# -- JSON import -----------------------------------------------------------------------------


@dataclass
class ImportResult:
    """What an import wrote, and what it left alone."""

    namespace: str
    memories: int = 0
    archives: int = 0
    links: int = 0
    skipped: list[str] = field(default_factory=list)  # ids already present
    sources: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "memories": self.memories,
            "archives": self.archives,
            "links": self.links,
            "skipped": self.skipped,
            "sources": self.sources,
        }


def _is(value: Any, wanted: str | int) -> bool:
    """`value == wanted` for a value of the document, of the same type (an array or a
    True would otherwise compare as something else, or not at all)."""
    return type(value) is type(wanted) and value == wanted


def _parse_document(document: Any) -> tuple[list[Memory], list[Link], list[tuple[Any, Any]]]:
    """The document's records as models (types, ranges of the models' own fields)."""
    if not isinstance(document, dict) or not _is(document.get("format"), FORMAT):
        raise ValidationError(f"not a {FORMAT} document (no 'format': {FORMAT!r} key)")
    if not _is(document.get("version"), VERSION):
        raise ValidationError(
            f"unsupported export version {document.get('version')!r:.60}; this library "
            f"reads version {VERSION}"
        )
    parts = {part: document.get(part, []) for part in ("memories", "links", "archives")}
    for part, value in parts.items():
        if not isinstance(value, list):  # JSON has arrays here; anything else is a bug
            raise ValidationError(f"malformed export document: {part!r} is not an array")
    if not all(isinstance(a, dict) for a in parts["archives"]):
        raise ValidationError("malformed export document: an archive entry is not an object")
    try:
        memories = [Memory.model_validate(m) for m in parts["memories"]]
        links = [Link.model_validate(x) for x in parts["links"]]
        archives = [
            (ArchiveRecord.model_validate(a["record"]), a.get("original"))
            for a in parts["archives"]
        ]
    except (TypeError, KeyError, ValueError) as e:
        raise ValidationError(f"malformed export document: {e}") from e
    return memories, links, archives


def _target_namespace(
    memory: AsyncTieredMemory, document: dict[str, Any], namespace: str | None, keep: bool
) -> str:
    """Where the import goes: the caller's namespace. A file never chooses it alone,
    or a document could plant (pinned, core) memories in any namespace."""
    if namespace is not None and keep:
        raise ValidationError(
            "pass either namespace=... or keep_namespace=True, not both "
            "(keep_namespace imports into the namespace the document names)"
        )
    if namespace is None and not keep:
        raise ValidationError(
            f"pass the namespace to import into (namespace=...), or keep_namespace=True to "
            f"import into the one the document names ({document.get('namespace')!r})"
        )
    if namespace is not None:
        return check_namespace(namespace, memory.policy.limits)
    target = document.get("namespace")
    if not isinstance(target, str):
        raise ValidationError("the export names no namespace; pass one to import into")
    # asked for: the document's own, a path namespace (a LangGraph store's) too
    return check_namespace(PathNamespace.parse(target) or target, memory.policy.limits)


def _check_text(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValidationError(f"{what} is not valid Unicode text (lone surrogate)") from e


def _check_label(value: str, what: str, limits: Limits) -> None:
    """A source or an archive reason: the limit `add` and `archive` apply to them."""
    check_label(value, what, limits.max_source_chars, "max_source_chars")


def _check_memory(
    m: Memory, memory: AsyncTieredMemory, ns: str, limits: Limits, dimension: int
) -> None:
    """The checks `add` applies to what it is given, and the store to what it keeps."""
    where = f"memory {m.id[:60]!r} of the export"
    try:
        check_id(m.id, limits)
        memory.objects.ref(ns, m.id)  # e.g. S3: a key too long would never archive
        check_content(m.content, limits)
        check_metadata(m.metadata, limits)
        _check_label(m.source, "its source", limits)
        for value, name in ((m.use_count, "use_count"), (m.uses_since_cold, "uses_since_cold")):
            check_int64(value, name)
        for parent in m.consolidated_from:
            check_id(parent, limits, what="an id in consolidated_from")
        if m.superseded_by is not None:
            check_id(m.superseded_by, limits, what="superseded_by")
        if m.embedding is None:
            raise ValidationError("it has no embedding")
        check_vector(m.embedding, dimension)
    except ValidationError as e:
        raise type(e)(f"{where}: {e}") from e


def _check_archive(
    record: ArchiveRecord,
    original: Any,
    memory: AsyncTieredMemory,
    ns: str,
    limits: Limits,
    dimension: int,
) -> None:
    where = f"archived {record.id[:60]!r} of the export"
    try:
        check_id(record.id, limits)
        memory.objects.ref(ns, record.id)
        check_content(record.summary, limits)
        check_metadata(record.metadata, limits)
        _check_label(record.source, "its source", limits)
        _check_label(record.archive_reason, "its archive reason", limits)
        for text, name in (
            (record.storage_ref, "its storage_ref"),
            (record.checksum, "its checksum"),
        ):
            _check_text(text, name)
        check_int64(record.use_count, "use_count")
        check_int64(record.size_bytes, "size_bytes")
        if record.summary_embedding is None:
            raise ValidationError("it has no summary embedding")
        check_vector(record.summary_embedding, dimension, what="summary embedding")
        if original is not None:
            if not isinstance(original, str):
                raise ValidationError("its original is not text")
            _check_text(original, "its original")
    except ValidationError as e:
        raise type(e)(f"{where}: {e}") from e
    if original is not None and sha256_hex(original.encode("utf-8")) != record.checksum:
        raise ArchiveIntegrityError(
            f"the exported original of {record.id!r} does not match its checksum"
        )


async def _check_references(
    memory: AsyncTieredMemory, ns: str, memories: Sequence[Memory], known: set[str]
) -> None:
    """`superseded_by` and `consolidated_from` must name a memory of the document or
    of the target namespace: a dangling `superseded_by` hides a memory for good."""
    wanted = {m.superseded_by for m in memories if m.superseded_by is not None}
    wanted.update(parent for m in memories for parent in m.consolidated_from)
    missing = sorted(wanted - known)
    for start in range(0, len(missing), PAGE):
        chunk = missing[start : start + PAGE]
        found = set(await memory.store.get_many(ns, chunk))
        found |= set(await memory.store.get_archives(ns, chunk))
        known |= found
    dangling = sorted(wanted - known)
    if dangling:
        raise ValidationError(
            f"the export refers to {len(dangling)} memory id(s) that are neither in it nor "
            f"in namespace {ns!r} (e.g. {dangling[0]!r}, in superseded_by or "
            "consolidated_from); export the whole namespace, or import the missing ones first"
        )


async def import_document(
    memory: AsyncTieredMemory,
    document: Any,
    *,
    namespace: str | None = None,
    keep_namespace: bool = False,
    skip_existing: bool = False,
    progress: Progress = _noop,
) -> ImportResult:
    """Write an exported namespace into `memory`, every field as exported: into
    `namespace`, or into the namespace the document names with `keep_namespace=True`.

    All or nothing: every record passes the checks `add` applies (content, metadata,
    ids, integer ranges, the store's embedding dimension, references that resolve)
    before the first write; then everything is written in one store transaction (on
    stores without transactions, Weaviate, the checks still come first). Ids already
    present are an error, or skipped with `skip_existing=True`.
    """
    check_flag(keep_namespace, "keep_namespace")
    check_flag(skip_existing, "skip_existing")
    memories, links, archives = _parse_document(document)
    ns = _target_namespace(memory, document, namespace, keep_namespace)
    store, graph, objects = memory.store, memory.graph, memory.objects
    result = ImportResult(namespace=ns)

    ids = [m.id for m in memories] + [r.id for r, _ in archives]
    if len(set(ids)) != len(ids):
        raise ValidationError("the export repeats an id")
    present: set[str] = set()
    for start in range(0, len(ids), PAGE):
        chunk = ids[start : start + PAGE]
        present |= set(await store.get_many(ns, chunk)) | set(await store.get_archives(ns, chunk))
    if present and not skip_existing:
        raise ValidationError(
            f"{len(present)} id(s) of the export already exist in namespace {ns!r} "
            f"(e.g. {sorted(present)[0]!r}); import into another namespace, or skip them"
        )
    result.skipped = sorted(present)
    dimension = await memory.dimension()
    exported = document.get("dimension")
    if exported is not None and not _is(exported, dimension):
        raise DimensionMismatchError(
            f"the export holds {exported!r:.60}-d embeddings but this store holds "
            f"{dimension}-d ones; import into a store whose embedder makes the same size"
        )
    limits = memory.policy.limits
    fresh = [m.model_copy(update={"namespace": ns}) for m in memories if m.id not in present]
    new_archives = [(r, o) for r, o in archives if r.id not in present]
    for m in fresh:
        _check_memory(m, memory, ns, limits, dimension)
    for record, original in new_archives:
        _check_archive(record, original, memory, ns, limits, dimension)
    await _check_references(memory, ns, fresh, set(ids))
    live = {m.id for m in memories}
    keep = [x for x in links if x.source in live and x.target in live]
    keep = [x for x in keep if x.source not in present and x.target not in present]

    written: list[str] = []  # originals put into object storage, taken back on failure
    try:
        records = [await _put_original(memory, ns, r, o, written) for r, o in new_archives]
        async with store.transaction():
            for start in range(0, len(fresh), PAGE):
                batch = fresh[start : start + PAGE]
                await store.put_many(ns, batch)
                result.memories += len(batch)
                progress(len(batch))
            for start in range(0, len(records), PAGE):
                batch_records = records[start : start + PAGE]
                await _archive(memory, ns, batch_records)
                result.archives += len(batch_records)
                progress(len(batch_records))
            if keep:
                await graph.upsert_links(ns, keep)
                result.links = len(keep)
    except BaseException:
        for key in written:
            with contextlib.suppress(Exception):
                await objects.delete(ns, key)
        raise
    return result


async def _put_original(
    memory: AsyncTieredMemory,
    ns: str,
    record: ArchiveRecord,
    original: str | None,
    written: list[str],
) -> ArchiveRecord:
    """Put an archived original (checked against its checksum) into object storage,
    before the transaction that writes its record: no record without its original."""
    objects = memory.objects
    record = record.model_copy(update={"namespace": ns})
    if original is None:
        return record.model_copy(update={"storage_verified": False})
    key = original_key(record.id, record.checksum)  # content-addressed, as archival writes
    await objects.put(ns, key, original.encode("utf-8"))
    written.append(key)
    head = await objects.head(ns, key)
    if head is None or head.checksum != record.checksum:
        raise ArchiveIntegrityError(f"the imported original of {record.id!r} did not verify")
    return record.model_copy(update={"storage_ref": objects.ref(ns, key)})


async def _archive(memory: AsyncTieredMemory, ns: str, records: Sequence[ArchiveRecord]) -> None:
    """The store only creates archive records by replacing a live memory (the archival
    path), so each record replaces a placeholder carrying its summary."""
    placeholders = [
        Memory(
            id=record.id,
            namespace=ns,
            content=record.summary,
            memory_type=record.memory_type,
            importance=record.importance,
            tier=Tier.COLD,
            embedding=record.summary_embedding,
            created_at=record.created_at,
            updated_at=record.archived_at,
        )
        for record in records
    ]
    await memory.store.put_many(ns, placeholders)
    await memory.store.archive_many(ns, records)


# -- copying into a new SQLite file -------------------------------------------------------------


def _new_file(path: str | PathLike[str]) -> Path:
    target = Path(path)
    if target.exists():
        raise ValidationError(f"{str(target)!r} already exists; export into a new file")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


async def export_sqlite(
    memory: AsyncTieredMemory,
    namespace: str,
    path: str | PathLike[str],
    *,
    progress: Progress = _noop,
) -> ImportResult:
    """Copy one namespace into a new embedded store at `path` (with its archive folder
    beside it); an existing file is never overwritten."""
    from .engine import AsyncTieredMemory

    target = _new_file(path)
    document = await export_namespace(memory, namespace, progress=progress)
    copy = await AsyncTieredMemory.embedded(
        target, embedder=memory.embedder, policy=memory.policy, clock=memory.clock
    )
    try:
        return await import_document(copy, document, keep_namespace=True)
    finally:
        await copy.close()


# -- markdown import -----------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A date or time word in a file name or a heading makes its notes episodic.
_DATE = re.compile(EPISODIC, re.IGNORECASE)


@dataclass(frozen=True)
class MarkdownNote:
    """One memory found in a markdown file."""

    text: str
    context: tuple[str, ...]  # the headings above it, outermost first
    line: int
    memory_type: MemoryType
    source: str

    @property
    def content(self) -> str:
        """The note with its headings in front: a bullet under '## Kids' saying 'Ava, 7'
        means nothing found alone."""
        if not self.context:
            return self.text
        return f"{' > '.join(self.context)}: {self.text}"


def parse_markdown(text: str, source: str) -> list[MarkdownNote]:
    """One note per bullet (indented continuation lines included) or paragraph;
    headings become context; fenced code stays with its paragraph."""
    notes: list[MarkdownNote] = []
    headings: list[tuple[int, str]] = []
    dated_file = bool(_DATE.search(Path(source).stem))
    block: list[str] = []
    block_line = 0
    in_fence = False

    def flush() -> None:
        nonlocal block
        body = " ".join(part.strip() for part in block if part.strip())
        if block and "\n".join(block).strip().startswith(("```", "~~~")):
            body = "\n".join(block).strip()
        if body:
            context = tuple(h for _, h in headings)
            joined = " ".join(context)
            notes.append(
                MarkdownNote(
                    text=body,
                    context=context,
                    line=block_line,
                    memory_type=detect_type(
                        body,
                        dated_context=dated_file or bool(_DATE.search(joined)),
                        project=bool(re.search(r"\bprojects?\b", joined, re.IGNORECASE)),
                    ),
                    source=source,
                )
            )
        block = []

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if in_fence:
            block.append(line)
            if _FENCE.match(line):
                in_fence = False
            continue
        if _FENCE.match(line):
            if not block:
                block_line = number
            block.append(line)
            in_fence = True
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            headings = [(lv, h) for lv, h in headings if lv < level]
            if heading.group(2):
                headings.append((level, heading.group(2)))
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            block, block_line = [bullet.group(2)], number
            continue
        if not line.strip():
            flush()
            continue
        if line.lstrip().startswith(">"):
            line = line.lstrip()[1:]
        if re.fullmatch(r"\s*(?:-{3,}|\*{3,}|_{3,}|={3,})\s*", line):
            flush()  # a thematic break or setext underline separates notes
            continue
        if not block:
            block_line = number
        block.append(line)
    flush()
    return notes


def markdown_files(path: str | PathLike[str]) -> list[Path]:
    """A file, or every *.md under a folder (sorted, so imports are reproducible)."""
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*.md") if p.is_file())
        if not files:
            raise ValidationError(f"no .md files under {str(root)!r}")
        return files
    if not root.is_file():
        raise NotFoundError(f"{str(root)!r} does not exist")
    return [root]


def note_id(note: MarkdownNote) -> str:
    """Stable per (file, note): importing the same file twice adds nothing, whatever
    folder the import was run from."""
    where = Path(note.source).resolve()
    digest = hashlib.sha256(f"{where}\n{note.content}".encode()).hexdigest()
    return f"md-{digest[:24]}"


async def import_markdown(
    memory: AsyncTieredMemory,
    path: str | PathLike[str],
    *,
    namespace: str,
    importance: float = 0.5,
    progress: Progress = _noop,
) -> ImportResult:
    """Import MEMORY.md-style notes as memories (HOT, as new captures are), all or
    nothing. Each note's `source` is its file's path; its headings and line are in
    `metadata`. Notes already imported (same file, same text) are skipped."""
    from .engine import MemoryInput

    ns = check_namespace(namespace, memory.policy.limits)
    result = ImportResult(namespace=ns)
    notes, result.sources = read_markdown(path)
    wanted: dict[str, MarkdownNote] = {}
    for note in notes:
        wanted.setdefault(note_id(note), note)  # a repeated line in one file is one memory
    ids = list(wanted)
    present: set[str] = set()
    for start in range(0, len(ids), PAGE):
        chunk = ids[start : start + PAGE]
        present |= set(await memory.store.get_many(ns, chunk))
        present |= set(await memory.store.get_archives(ns, chunk))
    result.skipped = sorted(present)
    items = [
        MemoryInput(
            id=i,
            content=n.content,
            memory_type=n.memory_type,
            importance=importance,
            source=n.source,
            metadata={"context": " > ".join(n.context), "line": n.line},
        )
        for i, n in wanted.items()
        if i not in present
    ]
    progress(len(present))
    if items:
        # One call, so all or nothing: every note is checked and embedded before the one
        # write. dedup off: a note is its own memory even when another says nearly the same.
        added = await memory.add_many(items, namespace=ns, dedup=False)
        result.memories = len(added)
        progress(len(items))
    return result


def read_markdown(path: str | PathLike[str]) -> tuple[list[MarkdownNote], list[str]]:
    """The notes of a file or folder, and the files they came from."""
    notes: list[MarkdownNote] = []
    sources: list[str] = []
    for file in markdown_files(path):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValidationError(f"cannot read {str(file)!r}: {e}") from e
        notes.extend(parse_markdown(text, str(file)))
        sources.append(str(file))
    return notes, sources


def load_document(path: str | PathLike[str]) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise NotFoundError(f"{str(path)!r} does not exist") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValidationError(f"{str(path)!r} is not a JSON export: {e}") from e
    if not isinstance(document, dict):
        raise ValidationError(
            f"{str(path)!r} is not a JSON export: its top level is "
            f"{type(document).__name__ if document is not None else 'null'}, not an object "
            "(export one with `tiered-memory export`)"
        )
    return document


__all__ = [
    "FORMAT",
    "VERSION",
    "ImportResult",
    "MarkdownNote",
    "count_namespace",
    "detect_type",
    "dumps",
    "export_namespace",
    "export_sqlite",
    "import_document",
    "import_markdown",
    "load_document",
    "markdown_files",
    "note_id",
    "parse_markdown",
    "read_markdown",
]
