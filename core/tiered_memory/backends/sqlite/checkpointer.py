"""WAL checkpoints on a thread of their own, so that no write or recall waits for one.

SQLite checkpoints inside the commit that crosses its `wal_autocheckpoint` mark: that
commit copies the whole WAL into the main file and syncs it. At 1M memories (40 MB of
WAL into a 3-4 GB file) a recall's use-count commit took 120-150 ms so, once every few
hundred recalls, and `add_many`'s commits 65-435 ms (about 1 s of every 16 s of
sustained adds). The copy needs no lock a reader or writer of this process holds: a
PASSIVE checkpoint on a second connection runs beside them (SQLite releases the GIL
for it), and the commits go on appending to the WAL meanwhile.

When: the connection's `journal_size_limit` is set below the trigger, so the WAL file
is cut back to it each time SQLite restarts the log after a complete checkpoint; its
size on disk then says how much was written since that restart. After each commit the
store compares it with the trigger (one `stat`); past it, this thread checkpoints.
The committing connection keeps SQLite's own checkpoint as a backstop at a multiple of
the trigger, for when this thread falls behind or a long reader holds the log.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time

log = logging.getLogger(__name__)

# Pages of WAL (4 KB each) written since its last restart that start a checkpoint here.
CHECKPOINT_PAGES = 10_000
# What SQLite's own checkpoint, inline in a commit, waits for: this thread's backstop.
BACKSTOP_FACTOR = 4
# The WAL file's size after a restart: below the trigger, so that its size tells, and
# large enough that the log's usual writes reuse its blocks instead of growing the file
# again (the kernel zeroes each new page of a file).
KEEP_PAGES = CHECKPOINT_PAGES // 2
# A checkpoint that could not copy everything (a reader holds an old snapshot) is tried
# again after this long at the earliest, not after every commit.
RETRY_SECONDS = 0.5


class Checkpointer:
    """Checkpoints the WAL of the file at `path` on a thread of its own when the
    log passes `pages` pages (`committed` tells it a commit happened)."""

    def __init__(
        self,
        path: str,
        *,
        page_size: int,
        pages: int | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        self._path = path
        self._wal = f"{path}-wal"
        self._trigger = (CHECKPOINT_PAGES if pages is None else pages) * page_size
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
        """After a commit: wake the thread when the log is past the trigger. One
        `stat` (a few microseconds); never waits."""
        try:
            size = os.stat(self._wal).st_size
        except OSError:
            return  # no log file (yet): nothing to copy
        if size >= self._trigger and time.monotonic() >= self._next_try and not self._stopping:
            with self._idle:
                self._asked += 1
            self._wake.set()

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

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()  # a commit from here on wakes it again
                if self._stopping:
                    return
                with self._idle:
                    asked = self._asked
                if conn is None:
                    conn = self._connect()
                if conn is not None:
                    self._checkpoint(conn)
                with self._idle:
                    self._answered = asked
                    self._idle.notify_all()
        finally:
            if conn is not None:
                conn.close()
            with self._idle:
                self._answered = self._asked
                self._idle.notify_all()

    def _connect(self) -> sqlite3.Connection | None:
        try:
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
            conn.execute("PRAGMA synchronous = FULL")  # as the store's own connection
        except sqlite3.Error as e:  # SQLite's inline checkpoint (the backstop) still runs
            log.warning("tiered-memory: no background checkpoint for %s yet: %s", self._path, e)
            self._next_try = time.monotonic() + RETRY_SECONDS
            return None
        return conn

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as e:  # the next commit past the trigger tries again
            log.debug("tiered-memory: background checkpoint of %s failed: %s", self._path, e)
            busy, frames, copied = 1, -1, 0
        if not busy and frames == copied:
            self.checkpoints += 1
            self._next_try = 0.0
        else:  # a reader holds part of the log: not after every commit
            self._next_try = time.monotonic() + RETRY_SECONDS
