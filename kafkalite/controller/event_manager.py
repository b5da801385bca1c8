"""ControllerEventManager: every controller event goes through one asyncio queue and is processed
by one task, in order, so the controller's state is only ever changed by one event at a time
(Kafka's ControllerEventManager and its single event thread)."""
from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from typing import Optional

from kafkalite.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class ControllerEvent(ABC):
    """One unit of controller work. `preempt` runs instead of `process` for events still queued
    when the manager shuts down (so a waiting API caller gets an answer)."""

    name: str = "ControllerEvent"

    @abstractmethod
    async def process(self) -> None: ...

    def preempt(self) -> None:
        pass


class ControllerEventManager:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: Optional[asyncio.Task[None]] = None
        self.current_event: Optional[ControllerEvent] = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-event-{self.broker_id}")

    def put(self, event: ControllerEvent) -> None:
        self._queue.put_nowait(event)

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop what is queued (each dropped event is pre-empted) and queue `event`: used when the
        session expired, when everything queued was decided under a state that is gone."""
        while not self._queue.empty():
            self._queue.get_nowait().preempt()
        self.put(event)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            self.current_event = event
            started = time.monotonic()
            try:
                await event.process()
            except asyncio.CancelledError:
                raise
            except Exception:   # one failed event must not stop the controller
                log.exception("[Controller id=%d] Error processing event %s", self.broker_id, event.name)
            finally:
                self.current_event = None
            elapsed = (time.monotonic() - started) * 1000
            if elapsed > 1000:
                log.info("[Controller id=%d] event %s took %.0f ms", self.broker_id, event.name, elapsed)

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        while not self._queue.empty():
            self._queue.get_nowait().preempt()
