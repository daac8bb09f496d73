"""The background runner: repeat the sweep every `interval` (6 h by default).

It runs as a task on the engine's event loop, so it shares the engine's connections;
stop() waits for a sweep in progress to finish rather than cutting it off, because a
finished sweep is cheaper to reason about than a resumed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from .models import MaintenanceReport
from .policy import Policy

log = logging.getLogger(__name__)


class Maintainable(Protocol):
    """What the runner needs of a memory (`AsyncTieredMemory` is one). Declared here so
    the engine, which makes runners, is not also imported by them: no import circle."""

    policy: Policy

    async def maintain(self) -> MaintenanceReport: ...


class MaintenanceRunner:
    def __init__(
        self,
        memory: Maintainable,
        *,
        interval: timedelta | None = None,
        on_report: Callable[[MaintenanceReport], None] | None = None,
    ) -> None:
        self.memory = memory
        self.interval = interval or memory.policy.maintenance_interval
        if self.interval <= timedelta(0):
            from .errors import ValidationError

            raise ValidationError("the maintenance interval must be positive")
        self.on_report = on_report
        self.reports: list[MaintenanceReport] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        if self.running:
            return
        self._stopping = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="tm-maintain")

    async def stop(self) -> None:
        if self._task is None or self._stopping is None:
            return
        self._stopping.set()
        await self._task
        self._task = None

    async def _loop(self) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set():
            try:
                report = await self.memory.maintain()
                self.reports = [*self.reports[-99:], report]
                if self.on_report is not None:
                    self.on_report(report)
            except Exception:  # keep running: the next sweep may succeed
                log.exception("maintenance sweep failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval.total_seconds())
