"""Keep two sweeps of one store from running at once, in one process or across many.

Two concurrent sweeps would not corrupt anything (every transition is idempotent) but
they would summarise and upload the same memories twice. For a SQLite file an OS file
lock next to it covers every process on the machine, and the OS releases it if the
process dies, so a crashed sweep never leaves the store locked.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import IO, Protocol


class SweepLock(Protocol):
    def try_acquire(self) -> bool:
        """Take the lock without waiting; False when a sweep already holds it."""

    def release(self) -> None: ...


class ProcessLock:
    """Only one sweep at a time within this process (for stores shared over a network,
    run one maintenance runner per deployment)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        return self._lock.acquire(blocking=False)

    def release(self) -> None:
        self._lock.release()


class FileLock:
    """An exclusive, non-blocking `flock` on a file, plus the in-process lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._local = ProcessLock()
        self._handle: IO[bytes] | None = None

    def try_acquire(self) -> bool:
        if not self._local.try_acquire():
            return False
        if sys.platform == "win32":  # pragma: no cover - only the in-process lock there
            return True
        import fcntl

        handle = open(self.path, "a+b")  # noqa: SIM115 - held open while locked
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            self._local.release()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None and sys.platform != "win32":
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
        self._local.release()
