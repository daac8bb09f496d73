"""Backing up the embedded store, and verifying a store: what `tiered-memory backup`
and `tiered-memory verify` run.

A store is two things that must agree: the SQLite file (memories, archive records,
links) and the archived originals each record points at, checked by its sha256.

- `backup` copies the file with SQLite's online backup API (one consistent state,
  while other processes go on writing), then the originals of exactly the records in
  that copy, each checked against its record, into a new folder laid out as the
  embedded store expects (`<name>` and `<name>.archive`). A memory restored between
  the two steps takes its original with it; the backup is then taken again.
- `verify` reads everything without changing it: SQLite's full integrity check of the
  file, then every archived original against its record's size and sha256.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from .backends.local import LocalFolderObjectStore
from .backends.sqlite import SQLiteMemoryStore
from .backends.sqlite.database import integrity_problems
from .errors import ArchiveIntegrityError, ConfigurationError, ValidationError
from .models import ArchiveRecord
from .namespaces import PathNamespace
from .ports import MemoryStore

if TYPE_CHECKING:
    from .engine import AsyncTieredMemory

PAGE = 500
ATTEMPTS = 3  # backups taken again when memories were restored while one was copied


@dataclass(frozen=True)
class BackupReport:
    """What a backup holds, and where."""

    database: Path
    archive: Path
    namespaces: int
    archives: int  # archive records, each with its verified original
    bytes: int  # of the database and the originals

    def as_dict(self) -> dict[str, object]:
        return {
            "database": str(self.database),
            "archive": str(self.archive),
            "namespaces": self.namespaces,
            "archives": self.archives,
            "bytes": self.bytes,
        }


@dataclass
class VerifyReport:
    """What `verify` checked and what it found wrong (nothing, when `ok`)."""

    database: Path | None  # the SQLite file checked, None for a server store
    archives: int = 0  # originals checked against their records
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "database": None if self.database is None else str(self.database),
            "archives": self.archives,
            "problems": list(self.problems),
        }


def _namespace(name: str) -> str:
    """A namespace as `namespaces()` names it, typed again when it is a face's path
    namespace (which the core refuses as plain text)."""
    return PathNamespace.parse(name) or name


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _matches(record: ArchiveRecord, data: bytes) -> bool:
    return len(data) == record.size_bytes and _sha256(data) == record.checksum


async def _records(store: MemoryStore) -> list[ArchiveRecord]:
    found: list[ArchiveRecord] = []
    for name in await store.namespaces():
        ns = _namespace(name)
        after: str | None = None
        while True:
            page = await store.scan_archives(ns, after_id=after, limit=PAGE)
            found.extend(page)
            if len(page) < PAGE:
                break
            after = page[-1].id
    return found


async def _still_there(store: MemoryStore, record: ArchiveRecord) -> bool:
    """Whether `record` is still the store's record of its memory (not restored,
    deleted or archived again since it was read)."""
    now = (await store.get_archives(_namespace(record.namespace), [record.id])).get(record.id)
    return now is not None and now.checksum == record.checksum


async def _original(memory: AsyncTieredMemory, record: ArchiveRecord) -> tuple[str, bytes] | str:
    """The record's original (its object key and bytes), checked against the record;
    or what is wrong with it."""
    where = f"{record.namespace!r}/{record.id!r}"
    try:
        key, data = await memory.archiver.original(_namespace(record.namespace), record)
    except ArchiveIntegrityError as e:
        return f"the archived original of {where} is missing or unreadable: {e}"
    if not _matches(record, data):
        return (
            f"the archived original of {where} does not match its record "
            f"({len(data)} bytes, sha256 {_sha256(data)[:12]}...; the record says "
            f"{record.size_bytes} bytes, {record.checksum[:12]}...)"
        )
    return key, data


# -- verify ------------------------------------------------------------------------------


async def verify(memory: AsyncTieredMemory, database: Path | None = None) -> VerifyReport:
    """Check the store without changing it: the SQLite file (when `database` is given:
    the full integrity check), then every archived original against its record.

    Reads go on while other processes write: an original reported missing or wrong is
    looked at again after the pass, and dropped from the problems when its memory was
    restored or deleted meanwhile (its record is gone or changed).
    """
    report = VerifyReport(database)
    if database is not None:
        report.problems.extend(integrity_problems(database))
        if report.problems:
            return report  # the records of a damaged file cannot be trusted
    suspects: list[tuple[ArchiveRecord, str]] = []
    for record in await _records(memory.store):
        report.archives += 1
        found = await _original(memory, record)
        if isinstance(found, str):
            suspects.append((record, found))
    for record, problem in suspects:
        if await _still_there(memory.store, record):
            report.problems.append(problem)
    return report


def verify_file(database: Path) -> VerifyReport:
    """SQLite's full integrity check of an embedded store's file alone, before anything
    opens it (a damaged file would not open): run `verify` over the memory when it is
    `ok`."""
    return VerifyReport(database, problems=integrity_problems(database))


# -- backup ------------------------------------------------------------------------------


def _new_folder(destination: str | PathLike[str]) -> Path:
    folder = Path(destination)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValidationError(
            f"{str(folder)!r} exists and is not an empty folder; back up into a new one"
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _size(path: Path) -> int:
    return path.stat().st_size


def _clear(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


async def backup(memory: AsyncTieredMemory, destination: str | PathLike[str]) -> BackupReport:
    """Copy the embedded store into the new (or empty) folder `destination`: the SQLite
    file as `<file name>`, the originals of its archive records in `<file name>.archive/`,
    so `--db <destination>/<file name>` opens the copy as it was.

    The originals may live in any object store (a local folder, S3); in the backup
    they are a local folder. Raises `ConfigurationError` for a server store (back it
    up with its own tools), `ArchiveIntegrityError` when a record's original is
    missing or damaged in the store itself (nothing to back up for it: run `verify`).
    """
    store = memory.store
    if not isinstance(store, SQLiteMemoryStore):
        raise ConfigurationError(
            "backup copies the embedded store (one SQLite file); back up a "
            f"{type(store).__name__} with its own tools (e.g. Weaviate's backup module)"
        )
    folder = _new_folder(destination)
    name = Path(store.database.path).name
    database = folder / name
    archive = folder / f"{name}.archive"
    try:
        for attempt in range(ATTEMPTS):
            await store.backup(database)
            copied = await _copy_originals(memory, database, archive)
            if copied is not None:
                namespaces, records, size = copied
                return BackupReport(database, archive, namespaces, records, size)
            if attempt + 1 < ATTEMPTS:
                _clear(folder)
        raise ArchiveIntegrityError(
            f"memories were restored or deleted during each of {ATTEMPTS} backups; "
            "run the backup again when the store is quieter"
        )
    except BaseException:
        _clear(folder)
        raise


async def _copy_originals(
    memory: AsyncTieredMemory, database: Path, archive: Path
) -> tuple[int, int, int] | None:
    """Copy the original of every record in the backed-up file; (namespaces, records,
    bytes), or None when one had gone with a restore since the copy was taken."""
    copy = await SQLiteMemoryStore.open(database, verify=False)
    target = LocalFolderObjectStore(archive)
    try:
        records = await _records(copy)
        namespaces = len(await copy.namespaces())
    finally:
        await copy.close()
    size = _size(database)
    written: set[str] = set()
    for record in records:
        found = await _original(memory, record)
        if isinstance(found, str):
            if not await _still_there(memory.store, record):
                return None  # restored or deleted after the copy: take it again
            raise ArchiveIntegrityError(f"{found}; run `tiered-memory verify`")
        key, data = found
        ns = _namespace(record.namespace)
        await target.put(ns, key, data, sync_folder=False)  # the key the record names
        written.add(ns)
        size += len(data)
    for ns in sorted(written):
        await target.sync_folder(ns)
    return namespaces, len(records), size
