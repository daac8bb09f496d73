"""Run the async core from sync code, including inside a running event loop (Jupyter).

`asyncio.run()` fails when a loop is already running, and nesting loops is fragile, so
the sync facade owns one private event loop on a daemon thread and submits coroutines
to it. Every backend connection lives on that loop, which also serialises the
facade's calls the way a single async caller would.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A private event loop on a daemon thread; started on first use, stopped by close()."""

    def __init__(self, name: str = "tiered-memory") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Block until `coro` has run on this loop."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a sync TieredMemory method was called from inside its own event loop; "
                "use AsyncTieredMemory from async code"
            )
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on this loop; cancelling the future cancels it there."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure())

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
