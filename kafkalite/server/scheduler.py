"""Periodic background work (Kafka's KafkaScheduler) as asyncio tasks the scheduler owns and
stops on shutdown."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

log = logging.getLogger(__name__)


class _Periodic:
    """One scheduled function's task, and whether a run of it is under way."""

    __slots__ = ("task", "running")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.running = False


class Scheduler:
    def __init__(self) -> None:
        self._periodic: list[_Periodic] = []
        self._stopping = False

    def schedule(self, name: str, fn: Callable[[], object], period_ms: int, initial_delay_ms: int | None = None) -> None:
        if period_ms <= 0 or period_ms >= 2**62:
            return  # "never", as Kafka's Long.MaxValue defaults mean
        if self._stopping:
            return
        periodic = _Periodic()

        async def run() -> None:
            await asyncio.sleep((period_ms if initial_delay_ms is None else initial_delay_ms) / 1000)
            while not self._stopping:
                periodic.running = True
                try:
                    result = fn()
                    if asyncio.iscoroutine(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("scheduled task %s failed", name)
                finally:
                    periodic.running = False
                if self._stopping:
                    return
                await asyncio.sleep(period_ms / 1000)

        periodic.task = asyncio.get_running_loop().create_task(run(), name=name)
        self._periodic.append(periodic)

    async def shutdown(self) -> None:
        """Kafka's KafkaScheduler.shutdown: no run starts any more, a run under way finishes
        (awaitTermination). Cancelling one mid-run would leave the thread it waits for (a
        checkpoint written by asyncio.to_thread) writing while the shutdown writes the same
        file: the two renames of one temp file failed the clean shutdown."""
        self._stopping = True
        for p in self._periodic:
            if not p.running and p.task is not None:
                p.task.cancel()
        await asyncio.gather(*(p.task for p in self._periodic if p.task is not None), return_exceptions=True)
        self._periodic.clear()
