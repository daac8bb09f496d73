"""WAL checkpoints on a thread of their own, so that no write or recall waits for one.

SQLite checkpoints inside the commit that crosses its `wal_autocheckpoint` mark: that
commit copies the whole WAL into the main file and syncs it. At 1M memories (40 MB of
WAL into a 3-4 GB file) a recall's use-count commit took 120-150 ms so, once every few
hundred recalls, and `add_many`'s commits 65-435 ms (about 1 s of every 16 s of
sustained adds). The copy needs no lock a reader or writer of this process holds: a
PASSIVE checkpoint on a second connection runs beside them (SQLite releases the GIL
for it), and the commits go on appending to the WAL meanwhile.

When: after each commit the store reads how many frames the log holds that no
checkpoint has copied yet, from the header of the wal-index (the `-shm` file, which
every connection to the file maps: `mxFrame` and the checkpoint's `nBackfill`, at the
offsets of sqlite.org/walformat.html; a format every SQLite version sharing a file
must agree on). One 100-byte `pread`, no lock: a torn read only moves one wake-up.
Past `CHECKPOINT_PAGES`, this thread checkpoints. The committing connection keeps
SQLite's own checkpoint as a backstop at a multiple of the trigger, for when this
thread falls behind, a reader holds the log, or the wal-index cannot be read. The
log file itself is left as SQLite keeps it: reused from its start after a complete
checkpoint, never cut back (the kernel zeroes each new page of a growing file).
An unexpected error ends the thread with a record in the library's log (a bare
thread traceback goes to stderr, which a service's logging never sees); the backstop
then does the work. When the thread cannot open its own connection, it warns once and
backs off (`CONNECT_BACKOFF_MAX`) while the backstop does it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import threading
import time

log = logging.getLogger(__name__)

# Frames (pages) of WAL not yet copied that start a checkpoint here.
CHECKPOINT_PAGES = 10_000
# What SQLite's own checkpoint, inline in a commit, waits for: this thread's backstop.
BACKSTOP_FACTOR = 4
# The wal-index header (walformat.html, native byte order): `WalIndexHdr.mxFrame`, the
# last valid frame, and after the header's two 48-byte copies `WalCkptInfo.nBackfill`,
# the frames already copied into the main file.
_MX_FRAME = 16
_N_BACKFILL = 96
# A checkpoint that could not copy everything (commits kept coming, or a reader holds
# an old snapshot) is tried again by the thread after this long, until the log is
# copied whole: only then does the next write restart the log from its start. Left to
# the next commit past the trigger, a burst of writes left a log of up to the
# backstop's size behind it, and readers read their pages from it (a 1M recall loop
# after 6,000 adds: 15.5k frames in the log, p95 37 against 31 ms once it was copied).
RETRY_SECONDS = 0.1
# When the thread cannot open its own connection (no file descriptors left, say), it
# tries again after RETRY_SECONDS, doubled after each failure up to this; the backstop
# copies the log meanwhile. Retried every RETRY_SECONDS, a lasting failure logged ten
# warnings a second.
CONNECT_BACKOFF_MAX = 30.0


class Checkpointer:
    """Checkpoints the WAL of the file at `path` on a thread of its own when more
    than `pages` of its frames wait to be copied (`committed` tells it a commit
    happened)."""

    def __init__(
        self,
        path: str,
        *,
        pages: int | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        self._path = path
        self._index: int | None = None  # the `-shm` file, opened at the first commit
        self._trigger = CHECKPOINT_PAGES if pages is None else pages
        self._busy_timeout = busy_timeout
        self._wake = threading.Event()
        self._stopping = False
        self._idle = threading.Condition()
        self._asked = 0  # checkpoints asked for (`committed`), and the last one answered
        self._answered = 0
        self._next_try = 0.0
        self.checkpoints = 0  # completed by this thread (tests, telemetry)
        self._thread = threading.Thread(
            target=self._run, name="tiered-memory-checkpoint", daemon=True
        )
        self._thread.start()

    def committed(self) -> None:
        """After a commit: wake the thread when the log's uncopied frames are past the
        trigger. One read of a few microseconds; never waits."""
        waiting = self.uncopied()
        if waiting is None or waiting < self._trigger or self._stopping:
            return
        if time.monotonic() >= self._next_try:
            with self._idle:
                self._asked += 1
            self._wake.set()

    def uncopied(self) -> int | None:
        """Frames of the log no checkpoint has copied yet, or None when the wal-index
        cannot be read (then SQLite's own checkpoint, the backstop, does the work)."""
        try:
            if self._index is None:
                self._index = os.open(f"{self._path}-shm", os.O_RDONLY)
            header = os.pread(self._index, _N_BACKFILL + 4, 0)
        except OSError:
            return None
        if len(header) < _N_BACKFILL + 4:
            return None
        last: int = struct.unpack_from("=I", header, _MX_FRAME)[0]
        copied: int = struct.unpack_from("=I", header, _N_BACKFILL)[0]
        return max(0, last - copied)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every checkpoint asked for so far has run (tests)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._answered >= self._asked, timeout)

    def close(self) -> None:
        """Stop the thread (a checkpoint under way finishes first) and close its
        connection. Idempotent."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if self._index is not None:
            os.close(self._index)
            self._index = None

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        retry: float | None = None  # after a partial checkpoint: try again by itself
        failures = 0  # connections refused in a row
        try:
            while True:
                woken = self._wake.wait(retry)
                self._wake.clear()  # a commit from here on wakes it again
                if self._stopping:
                    return
                if not woken and not self.uncopied():
                    retry = None  # copied whole meanwhile (SQLite's backstop, a close)
                    continue
                with self._idle:
                    asked = self._asked
                if conn is None:
                    conn = self._connect(failures)
                if conn is None:
                    failures += 1
                    retry = min(RETRY_SECONDS * 2 ** (failures - 1), CONNECT_BACKOFF_MAX)
                    self._next_try = time.monotonic() + retry
                else:
                    failures = 0
                    retry = None if self._checkpoint(conn) else RETRY_SECONDS
                with self._idle:
                    self._answered = asked
                    self._idle.notify_all()
        except Exception:  # a bug: said in the host's log; SQLite's backstop goes on
            log.exception("tiered-memory: the checkpoint thread of %s stopped", self._path)
        finally:
            if conn is not None:
                conn.close()
            with self._idle:
                self._answered = self._asked
                self._idle.notify_all()

    def _connect(self, failures: int) -> sqlite3.Connection | None:
        """The thread's own connection, or None. The first of a run of failures is a
        warning, the rest are debug records (the caller backs off between tries), and
        the first success after them says the thread is back."""
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
            conn.execute("PRAGMA synchronous = FULL")  # as the store's own connection
        except sqlite3.Error as e:  # SQLite's inline checkpoint (the backstop) still runs
            if conn is not None:
                conn.close()
            say = log.debug if failures else log.warning
            say(
                "tiered-memory: no background checkpoint for %s (SQLite's own checkpoint "
                "copies the log meanwhile; retrying with backoff): %s",
                self._path,
                e,
            )
            return None
        if failures:
            log.info(
                "tiered-memory: background checkpoints of %s resumed after %d failed tries",
                self._path,
                failures,
            )
        return conn

    def _checkpoint(self, conn: sqlite3.Connection) -> bool:
        """One PASSIVE checkpoint; True when it copied the whole log."""
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as e:  # counted as partial: the thread tries again
            log.debug("tiered-memory: background checkpoint of %s failed: %s", self._path, e)
            busy, frames, copied = 1, -1, 0
        if not busy and frames == copied:
            self.checkpoints += 1
            self._next_try = 0.0
            return True
        # a reader holds part of the log, or commits came meanwhile: the thread tries
        # again after RETRY_SECONDS, and commits do not wake it before that
        self._next_try = time.monotonic() + RETRY_SECONDS
        return False
