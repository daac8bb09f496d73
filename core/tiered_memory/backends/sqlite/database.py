"""The one SQLite file behind the embedded default: connection, pragmas, locking.

The store and the association graph share this object, so both live in the same file
and the same transactions. Opening a file brings its schema to the current version
(`migrations`; the tables are in `schema`).

Durability: the file runs in WAL mode with `synchronous=FULL`, so a write whose
transaction has committed survives a process crash or a power loss. `busy_timeout`
lets several processes share the file; a writer waits up to that long for another
one to finish, and only then gets a `BackendUnavailableError`. Committed pages reach
the main file at checkpoints: a thread's of its own (`checkpointer`, every
`CHECKPOINT_PAGES`; SQLite's own inline one is the backstop), and ours after a sweep
and on close (`checkpoint`). An empty file is refused, not initialised.

Concurrency: one connection, guarded by a re-entrant lock. Async methods run their
SQL inline under the lock, with no `await` inside the critical section. SQLite calls
on this file take micro- to milliseconds, so a thread hop per call would cost more than
it saves, and inline calls cannot interleave. `transaction()` and
`read_transaction()` are the places the lock is held across `await`s; tasks of the
same event loop that are not part of them wait for them to finish (see `gate()`), so
their writes never join a transaction or get rolled back with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import sqlite3
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from tiered_memory.errors import BackendUnavailableError, ConfigurationError, ValidationError

from . import checkpointer, lexicon, migrations
from .sql import register_functions

log = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a writer waits for another process's lock

# The memory map's size (address space only: pages are mapped as they are read). SQLite
# caps it at its build's SQLITE_MAX_MMAP_SIZE (2 GB in the usual builds): asking for more
# maps as much as the build allows. At 1 GB, two thirds of a 3 GB store of a million
# memories were read with a system call per page: a vector search for 10 took 7.1 ms
# (p50) there against 3.1 ms with 2 GB mapped.
MMAP_BYTES = 1 << 40
# SQLite's own page cache (KiB; the default is 2 MB): keeps the inner pages of the big
# trees (rows by pk, vectors by pk, the lexicon) that a search walks for each of its few
# hundred candidate rows (1M memories: vector search p50/p95 7.1/19.4 -> 2.7/7.2 ms), and
# holds a bulk write's dirty pages, which with 2 MB spilled to the WAL and were read
# back mid-transaction (moving 98k of 100k rows: 0.95 -> 0.68 s; 500 rows into a 100k
# store: 0.9 -> 0.65 ms a row; bulk writes used to raise the cache to this size alone).
READ_CACHE_KIB = 65_536
# `verify=None` (the default) runs `PRAGMA quick_check` at open on files up to this size
# only: it reads the whole file, about 1.3 s per GB here, so a 1M-memory store (3 GB)
# took 4 of its 5 s to open. A larger file is checked by `tiered-memory verify`, and a
# damaged page it reads later still fails with a typed error (`translate_error`).
VERIFY_MAX_BYTES = 512 << 20


# RETURNING (3.35): the sweep's bulk moves; UPDATE ... FROM (3.33).
MIN_SQLITE = (3, 35, 0)


def _check_sqlite_version(version: tuple[int, int, int]) -> None:
    """Refuse, before any file is touched, an SQLite too old for the store's SQL: the
    sweep would otherwise fail with a syntax error at its first bulk move."""
    if version < MIN_SQLITE:
        raise ConfigurationError(
            f"the embedded store needs SQLite {'.'.join(map(str, MIN_SQLITE))} or newer; "
            f"this Python's sqlite3 module links SQLite {'.'.join(map(str, version))} "
            "(use a Python build whose sqlite3 module links a newer one)"
        )


def file_state(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """What changes whenever anyone writes to the file, for caches of what a search read:
    the connection (its uncommitted writes are its own), its change count, and
    `PRAGMA data_version` (commits by other connections and processes)."""
    return (
        id(conn),
        conn.total_changes,
        int(conn.execute("PRAGMA data_version").fetchone()[0]),
    )


def translate_error(e: sqlite3.Error, path: str) -> Exception:
    """Map a sqlite3 error onto the library's typed errors (the caller chains it)."""
    text = str(e)
    lowered = text.lower()
    if isinstance(e, sqlite3.IntegrityError):
        return ValidationError(f"rejected by the database: {text}")
    if isinstance(e, sqlite3.ProgrammingError) and "closed" in lowered:
        return BackendUnavailableError(
            f"the SQLite file {path} has been closed; open it again (SQLiteMemoryStore.open)"
        )
    if "locked" in lowered or "busy" in lowered:
        return BackendUnavailableError(
            f"the SQLite file {path} stayed locked by another process or connection "
            f"past the busy timeout: {text} (retry later, or raise busy_timeout)"
        )
    # What the file system refused is not damage: say so, and keep "corrupt" for damage.
    code = getattr(e, "sqlite_errorname", "")
    if code.startswith("SQLITE_FULL"):
        return BackendUnavailableError(
            f"the disk holding {path} is full (or the file reached its size limit): "
            "nothing was written; free some space and retry"
        )
    if code.startswith("SQLITE_READONLY"):
        return BackendUnavailableError(
            f"{path} is read-only: nothing was written. Reading works (stats, list, search, "
            "export); to change it, make the file and its folder writable"
        )
    if code.startswith("SQLITE_CANTOPEN"):
        return BackendUnavailableError(
            f"cannot open {path}: check that it exists or its folder is writable, "
            f"and that it is readable ({text})"
        )
    if code.startswith("SQLITE_IOERR"):
        return BackendUnavailableError(
            f"the disk failed while using {path}: {text} (check the disk and retry)"
        )
    if isinstance(e, (sqlite3.ProgrammingError, sqlite3.InterfaceError)):
        return ValidationError(
            f"a value SQLite cannot store reached {path}: {text}; nothing was written "
            "(an input the API should have refused: please report it)"
        )
    if isinstance(e, sqlite3.DatabaseError):
        return BackendUnavailableError(
            f"the SQLite file {path} cannot be used: {text} (if it is corrupt, restore it "
            "from a backup; PRAGMA integrity_check shows the damage)"
        )
    return BackendUnavailableError(f"SQLite error on {path}: {text}")


def _read_only_folder(path: Path, error: sqlite3.Error) -> bool:
    """A WAL file in a folder nobody may write to cannot be opened the usual way: its
    `-shm` index cannot be created. With no `-wal` there is no writer to miss, so it
    can be read as an immutable file (reading commands work on a read-only copy)."""
    if not getattr(error, "sqlite_errorname", "").startswith("SQLITE_CANTOPEN"):
        return False
    if not path.is_file() or path.with_name(path.name + "-wal").exists():
        return False
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            return False
    except OSError:
        return True


def _open_immutable(path: str, busy_timeout: float) -> sqlite3.Connection:
    uri = f"{Path(path).absolute().as_uri()}?mode=ro&immutable=1"
    try:
        return sqlite3.connect(
            uri, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as e:
        raise translate_error(e, path) from e


def _size_with_log(path: Path) -> int:
    """Bytes of the file and its WAL (what a check reads); 0 for a new file."""
    size = 0
    for part in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            size += part.stat().st_size
    return size


def _check_header(path: Path) -> None:
    """Refuse a file that is not SQLite, or is shorter than its own header says.

    O(1), so it runs on every open; `PRAGMA quick_check` (verify=True) goes further.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    try:
        wal_pending = path.with_name(path.name + "-wal").stat().st_size > 0
    except FileNotFoundError:  # none, or another process's last close just removed it
        wal_pending = False
    if size == 0:
        if wal_pending:
            return  # a store created and never checkpointed: its pages are in the WAL
        # Never opened as a new empty store: an emptied file (a failed copy, a full
        # disk, `> memory.db`) would silently become a store without memories.
        raise BackendUnavailableError(
            f"{path} is an empty file (0 bytes), not a tiered-memory store: if it held "
            "memories, restore it from a backup; to start a new store, delete it or "
            "pass a path that does not exist"
        )
    with path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise BackendUnavailableError(
            f"{path} is not a SQLite database (or its header is truncated); "
            "point the store at another file, or restore it from a backup"
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]
    # With a non-empty WAL, a checkpoint may have been interrupted midway; recovery
    # replays it, so the main file may legitimately be short.
    if pages and header_valid and not wal_pending and size < pages * page_size:
        raise BackendUnavailableError(
            f"{path} is truncated: {size} bytes, but its header says {pages * page_size}; "
            "restore it from a backup"
        )


def integrity_problems(path: Path, limit: int = 100) -> list[str]:
    """What is wrong with the SQLite file at `path`, found without changing it: its
    header (`_check_header`), then SQLite's full `PRAGMA integrity_check` on a
    read-only connection (every page, index and constraint; about a second per GB).
    An empty list when the file is sound."""
    try:
        _check_header(path)
    except BackendUnavailableError as e:
        return [str(e)]
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        return [f"{path} cannot be opened: {e}"]
    try:
        found = [str(row[0]) for row in conn.execute(f"PRAGMA integrity_check({int(limit)})")]
    except sqlite3.Error as e:
        return [f"{path} cannot be read: {e}"]
    finally:
        conn.close()
    return [] if found == ["ok"] else found


@dataclass(eq=False)
class _Transaction:
    """The open `transaction()` of this database: whose it is and when it ends."""

    thread: int
    done: asyncio.Event = field(default_factory=asyncio.Event)


# The transactions the current task is inside (of any database). Tasks created within
# one inherit it, so they count as part of it instead of waiting for it (a deadlock).
_current: contextvars.ContextVar[tuple[_Transaction, ...]] = contextvars.ContextVar(
    "tiered_memory_sqlite_transactions", default=()
)


class SQLiteDatabase:
    """An open SQLite file with the tiered-memory schema. Build it with `open()`."""

    def __init__(
        self,
        path: str,
        connection: sqlite3.Connection,
        lexicon_queue: lexicon.IndexQueue | None = None,
    ) -> None:
        self.path = path
        # The memories inserted but not yet in the lexical index (`lexicon.index_queued`).
        self.lexicon_queue = lexicon_queue if lexicon_queue is not None else lexicon.IndexQueue()
        self.lock = threading.RLock()
        self._conn: sqlite3.Connection | None = connection
        self._depth = 0  # open BEGIN/SAVEPOINT levels
        self._tx: _Transaction | None = None
        self._rollback_listeners: list[Callable[[], None]] = []
        self._commit_listeners: list[Callable[[], None]] = []
        self.checkpointer: checkpointer.Checkpointer | None = None

    def _start_checkpointer(self, busy_timeout: float) -> None:
        """Checkpoint on a thread of its own (`checkpointer`), told of every commit."""
        self.checkpointer = checkpointer.Checkpointer(self.path, busy_timeout=busy_timeout)
        self.on_commit(self.checkpointer.committed)

    @classmethod
    async def open(
        cls,
        path: str | PathLike[str],
        *,
        verify: bool | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> SQLiteDatabase:
        """Open (or create) the file, set the pragmas and create the schema if missing.

        `verify` runs `PRAGMA quick_check`, which reads the whole file once (about a
        second per GB): a damaged file is refused here rather than halfway through
        a sweep. None (the default) checks files up to `VERIFY_MAX_BYTES` and logs
        that a larger one was not checked; True and False force it either way.
        `":memory:"` gives a private in-memory database (tests).
        """
        return await asyncio.to_thread(cls._open_blocking, str(path), verify, busy_timeout)

    @classmethod
    def _open_blocking(
        cls, path: str, verify: bool | None, busy_timeout: float, *, in_place: bool = False
    ) -> SQLiteDatabase:
        _check_sqlite_version(sqlite3.sqlite_version_info)
        in_memory = path == ":memory:"
        if not in_memory:
            file = Path(path)
            if file.is_dir():
                raise ConfigurationError(f"{path} is a directory; pass the path of a file")
            file.parent.mkdir(parents=True, exist_ok=True)
            if not in_place and not file.exists():
                cls._create(file, busy_timeout)
            _check_header(file)
        if verify is None:
            size = 0 if in_memory else _size_with_log(Path(path))
            verify = size <= VERIFY_MAX_BYTES
            if not verify:
                log.info(
                    "tiered-memory: %s holds %d MB: its integrity check is left to "
                    "`tiered-memory verify` (verify=True checks it at every open)",
                    path,
                    size >> 20,
                )
        read_only = False
        try:
            conn = sqlite3.connect(
                path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.execute("PRAGMA journal_mode").fetchone()  # opens the file
            except sqlite3.Error:
                conn.close()
                raise
        except sqlite3.Error as e:
            if not _read_only_folder(Path(path), e):
                raise translate_error(e, path) from e
            conn, read_only = _open_immutable(path, busy_timeout), True
        try:
            register_functions(conn)
            queue = lexicon.register_functions(conn)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if not in_memory and not read_only and str(mode).lower() != "wal":
                raise BackendUnavailableError(
                    f"{path} cannot switch to WAL mode (got {mode!r}); "
                    "use a local file system, not a network share"
                )
            conn.execute("PRAGMA synchronous = FULL")
            # Reads through a memory map: a search touches a few hundred rows spread over
            # the file, and each read() of a page not in SQLite's small cache is a system
            # call (5x slower per row at 100k memories). Writes still go through the WAL.
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            conn.execute(f"PRAGMA cache_size = {-READ_CACHE_KIB}")
            # Checkpoints run on a thread of their own (`checkpointer`), every
            # `CHECKPOINT_PAGES` of WAL; SQLite's own, inline in a commit, is the backstop.
            # Every recall writes use counts and co-recall links (~50 pages at 20 items):
            # the default inline checkpoint every 1,000 WAL pages stalled one recall in
            # ~20, and at 10,000 one in a few hundred at 1M memories, for 120-150 ms.
            # Rare checkpoints also copy fewer pages in all (a page written often is
            # copied once).
            if not read_only and not in_memory:
                backstop = checkpointer.CHECKPOINT_PAGES * checkpointer.BACKSTOP_FACTOR
                conn.execute(f"PRAGMA wal_autocheckpoint = {backstop}")
            conn.execute("PRAGMA foreign_keys = ON")
            if verify:
                problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
                if problems != ["ok"]:
                    raise BackendUnavailableError(
                        f"{path} failed its integrity check: {'; '.join(problems)}; "
                        "restore it from a backup"
                    )
            migrations.upgrade(conn, path)
        except BaseException as e:
            conn.close()
            if isinstance(e, sqlite3.Error):
                raise translate_error(e, path) from e
            raise
        database = cls(path, conn, queue)
        if not read_only and not in_memory and not in_place:
            database._start_checkpointer(busy_timeout)
        return database

    @classmethod
    def _create(cls, path: Path, busy_timeout: float) -> None:
        """Make a new store at `path` whole or not at all: built in a temporary file
        beside it, then hard-linked into place. SQLite creates a file empty and
        writes its header a moment later, so another process opening the same new
        path in between found an empty file, which `_check_header` rightly refuses
        (an emptied store must never become a new one); workers of one app started
        together failed so. A link never replaces a file: the first process to link
        wins and the others open its store."""
        try:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
        except OSError:
            return  # a folder it cannot write to: opening in place says so, typed
        os.close(fd)
        os.unlink(name)  # SQLite creates it, in WAL mode, with the schema
        temporary = Path(name)
        try:
            cls._open_blocking(name, False, busy_timeout, in_place=True).close_blocking()
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process created it first
            except OSError as e:  # a file system without hard links
                log.debug("tiered-memory: creating %s in place (%s)", path, e)
        finally:
            for leftover in (name, f"{name}-wal", f"{name}-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    # -- access --------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._conn is None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise BackendUnavailableError(
                f"the SQLite file {self.path} has been closed; open it again"
            )
        return self._conn

    async def gate(self) -> None:
        """Wait while a `transaction()` of another task of this event loop is open.

        Call it before `read()`/`write()`, with no `await` in between. Other threads
        need no gate: they block on the lock itself.
        """
        while True:
            tx = self._tx
            if tx is None or tx.thread != threading.get_ident() or tx in _current.get():
                return
            await tx.done.wait()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock, with sqlite3 errors mapped to typed ones.

        Each statement reads the file as it is when the statement starts; several
        statements that must agree with each other belong in `snapshot()`.
        """
        with self.lock:
            conn = self._connection()
            try:
                yield conn
            except sqlite3.Error as e:
                raise translate_error(e, self.path) from e

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that all see one state of the file: one read transaction (or the
        transaction already open). Without it, a count of live memories and a count
        of archive records taken while another process archives could both include
        the memory that moved between them.

        For reads: a write inside would have to upgrade the read transaction, which
        fails when another connection wrote since it began.
        """
        with self.lock:
            conn = self._connection()
            if self._depth > 0:  # inside a transaction: it is the snapshot already
                with self.read():
                    yield conn
                return
            try:
                conn.execute("BEGIN")  # deferred: the first read fixes the snapshot
            except sqlite3.Error as e:
                raise translate_error(e, self.path) from e
            self._depth += 1
            try:
                with self.read():
                    yield conn
            finally:
                self._depth -= 1
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("COMMIT")  # nothing to commit: it only ends the snapshot

    @contextmanager
    def write(self, *, fsync: bool = True) -> Iterator[sqlite3.Connection]:
        """An atomic unit: a transaction, or a savepoint inside an open one.

        `fsync=False` is for use bookkeeping only (use counts, co-recall link weights):
        that transaction commits with `synchronous=NORMAL`, without syncing the WAL, so
        a recall does not wait for the disk. A process crash still loses nothing; a
        power cut may lose the latest such commits (never a memory, never an earlier
        commit: the WAL keeps commits in order, and the next synced commit or
        checkpoint makes them durable). Inside an open transaction it changes nothing.
        """
        with self.lock:
            conn = self._connection()
            relaxed = not fsync and self._depth == 0
            try:
                if relaxed:  # the safety level cannot change inside a transaction
                    conn.execute("PRAGMA synchronous = NORMAL")
                try:
                    self._begin(conn)
                except sqlite3.Error as e:
                    raise translate_error(e, self.path) from e
                try:
                    yield conn
                except BaseException as e:
                    self._rollback(conn)
                    if isinstance(e, sqlite3.Error):
                        raise translate_error(e, self.path) from e
                    raise
                try:
                    self._commit(conn)
                except sqlite3.Error as e:
                    self._rollback(conn)
                    raise translate_error(e, self.path) from e
            finally:
                if relaxed:
                    conn.execute("PRAGMA synchronous = FULL")

    def _begin(self, conn: sqlite3.Connection) -> None:
        # IMMEDIATE takes the write lock up front, so a busy file fails (after the
        # busy timeout) before any work, never halfway with SQLITE_BUSY on upgrade.
        conn.execute("BEGIN IMMEDIATE" if self._depth == 0 else f"SAVEPOINT sp{self._depth}")
        self._depth += 1

    def _commit(self, conn: sqlite3.Connection) -> None:
        # Memories inserted other than through `MemoryTable.insert` (which indexes its
        # rows at once) are indexed before they can commit.
        lexicon.index_queued(conn, self.lexicon_queue)
        level = self._depth - 1
        conn.execute("COMMIT" if level == 0 else f"RELEASE sp{level}")
        self._depth = level
        if level == 0:
            for listener in self._commit_listeners:
                listener()

    def _rollback(self, conn: sqlite3.Connection) -> None:
        level = self._depth - 1
        self._depth = level
        try:
            if level == 0:
                conn.execute("ROLLBACK")
            else:
                conn.execute(f"ROLLBACK TO sp{level}")
                conn.execute(f"RELEASE sp{level}")
        except sqlite3.Error:
            pass  # the transaction is already gone (SQLite rolled it back itself)
        finally:
            for listener in self._rollback_listeners:
                listener()

    def on_rollback(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every rollback (in-memory caches drop their state)."""
        self._rollback_listeners.append(listener)

    def on_commit(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every outermost commit."""
        self._commit_listeners.append(listener)

    def data_version(self) -> int:
        """Changes whenever another connection (or process) commits to the file."""
        with self.read() as conn:
            return int(conn.execute("PRAGMA data_version").fetchone()[0])

    @asynccontextmanager
    async def _transaction(self, *, snapshot: bool = False) -> AsyncIterator[None]:
        await self.gate()
        unit = self.snapshot if snapshot else self.write
        if self._tx is not None and self._tx in _current.get():
            with unit():  # nested: a savepoint, or a read, inside the open transaction
                yield
            return
        with self.lock:
            tx = _Transaction(thread=threading.get_ident())
            token = _current.set((*_current.get(), tx))
            self._tx = tx
            try:
                with unit():
                    yield
            finally:
                self._tx = None
                _current.reset(token)
                tx.done.set()

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """Everything written inside commits together, or not at all on an exception."""
        return self._transaction()

    def read_transaction(self) -> AbstractAsyncContextManager[None]:
        """Every read inside, across awaits, sees one state of the file (`snapshot`).

        Other tasks of this event loop wait for it to end, as for `transaction()`:
        they share the connection, and their writes must not land inside it. Writes of
        other processes go on; they are not seen inside.
        """
        return self._transaction(snapshot=True)

    def checkpoint(self) -> bool:
        """Copy the WAL's committed pages into the main file (and fsync it); True when
        all of them were copied.

        Until a checkpoint, commits live only in the `-wal` file: a copy of the main
        file alone, or a lost `-wal`, would miss them. A thread checkpoints every
        `checkpointer.CHECKPOINT_PAGES` pages (`Checkpointer`), SQLite when the last
        connection closes; this is for the points in between that matter: after
        a sweep, and when this connection closes while others stay open. PASSIVE: it
        never waits, so a reader of another process holding an old snapshot only
        leaves the newest pages for the next checkpoint.
        """
        with self.read() as conn:
            if self._depth > 0:
                return False  # inside a transaction: nothing of it is committed yet
            busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return not busy and (log == copied or log == -1)

    def backup(self, target: Path) -> None:
        """Copy the whole database into the new file `target` with SQLite's online
        backup API: in one step, so the copy is one consistent state of the file
        (WAL pages included) while other processes go on writing."""
        if target.exists():
            raise ValidationError(f"{str(target)!r} already exists; back up into a new file")
        with self.read() as conn:
            copy = sqlite3.connect(target, isolation_level=None)
            try:
                conn.backup(copy)
                copy.execute("PRAGMA journal_mode = WAL")
            finally:
                copy.close()

    async def close(self) -> None:
        """Close the connection (idempotent), checkpointing the WAL first: SQLite does
        so only when the last connection to the file closes, and another process may
        still hold it open; then this one's commits would stay in the `-wal` alone."""
        self.close_blocking()

    def close_blocking(self) -> None:
        """`close` from a thread of its own (no event loop)."""
        if self.checkpointer is not None:
            self.checkpointer.close()  # a checkpoint under way ends first
        with self.lock:
            if self._conn is not None:
                with contextlib.suppress(BackendUnavailableError):
                    self.checkpoint()
                conn, self._conn = self._conn, None
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA optimize")  # keeps the planner's statistics fresh
                conn.close()
