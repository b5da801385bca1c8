"""Periodic background work (Kafka's KafkaScheduler) as asyncio tasks the scheduler owns and
cancels on shutdown."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def schedule(self, name: str, fn: Callable[[], object], period_ms: int, initial_delay_ms: int | None = None) -> None:
        if period_ms <= 0 or period_ms >= 2**62:
            return  # "never", as Kafka's Long.MaxValue defaults mean

        async def run() -> None:
            await asyncio.sleep((period_ms if initial_delay_ms is None else initial_delay_ms) / 1000)
            while True:
                try:
                    result = fn()
                    if asyncio.iscoroutine(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("scheduled task %s failed", name)
                await asyncio.sleep(period_ms / 1000)

        self._tasks.append(asyncio.get_running_loop().create_task(run(), name=name))

    async def shutdown(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
