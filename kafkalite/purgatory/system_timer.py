"""SystemTimer: the timing wheel driven by the asyncio event loop (Kafka's SystemTimer).

Kafka polls a DelayQueue of buckets from a reaper thread. Here the buckets sit in a min-heap and
the timer keeps exactly one loop timer handle, armed for the earliest bucket. When it fires:
advance the wheel's clock to each due bucket's expiration, flush the bucket (entries cascade into
finer wheels or run), then re-arm for the next earliest bucket. There is no polling loop and no
asyncio timer per task, so insert and cancel stay O(1) however many operations wait.

Expired tasks run on the loop thread as plain callbacks (they may create tasks). A task added
with a deadline that is already due runs on the next loop iteration (``call_soon``), never
inside ``add``, so callers are not re-entered.

Time is milliseconds from an injectable clock (default ``time.monotonic_ns() / 1e6``, the same
CLOCK_MONOTONIC the loop uses). A deadline is rounded *up* to a whole millisecond and the wheel
clock *down*, so with the default 1 ms tick a task never runs before its deadline.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Callable

from kafkalite.purgatory.timer_task import TaskCounter, TimerTask, TimerTaskEntry
from kafkalite.purgatory.timing_wheel import BucketQueue, TimingWheel

log = logging.getLogger(__name__)

Clock = Callable[[], float]


def monotonic_ms() -> float:
    return time.monotonic_ns() / 1_000_000


class SystemTimer:
    __slots__ = (
        "name",
        "_clock",
        "_loop",
        "_counter",
        "_queue",
        "_wheel",
        "_handle",
        "_handle_expiration",
        "_closed",
        "timer_fires",
    )

    def __init__(
        self,
        name: str = "timer",
        *,
        tick_ms: int = 1,
        wheel_size: int = 20,
        clock: Clock | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else monotonic_ms
        # Bound lazily to the running loop on first use, so a timer can be built outside it.
        self._loop = loop
        self._counter = TaskCounter()
        self._queue = BucketQueue()
        self._wheel = TimingWheel(
            tick_ms, wheel_size, math.floor(self._clock()), self._counter, self._queue
        )
        self._handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self._handle_expiration = math.inf  # bucket expiration the handle is armed for
        self._closed = False
        self.timer_fires = 0  # loop timer callbacks so far (observability, tests)

    # -- public API ---------------------------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; re-adding a task reschedules it."""
        if self._closed:
            # Shutting down: like Kafka after close(), the task will never run.
            log.debug("timer %s is shut down; dropping %r", self.name, task)
            return
        now = self._clock()
        if task.delay_ms <= 0:
            # Due now: skip the wheel (rounding now up would delay it by up to a tick). The
            # entry still exists so that cancel() before the next iteration is honoured.
            entry = TimerTaskEntry(task, math.floor(now))
            self._get_loop().call_soon(self._run_if_live, entry)
            return
        entry = TimerTaskEntry(task, math.ceil(now + task.delay_ms))
        if self._wheel.add(entry):
            exp = self._queue.peek_expiration()
            if exp is not None and exp < self._handle_expiration:
                self._arm(exp)
        elif not entry.cancelled():
            self._get_loop().call_soon(self._run_if_live, entry)

    @property
    def size(self) -> int:
        """Number of tasks waiting in the wheel."""
        return self._counter.value

    @property
    def wheel(self) -> TimingWheel:
        return self._wheel

    @property
    def armed(self) -> bool:
        """Whether a loop timer handle is outstanding."""
        return self._handle is not None

    def shutdown(self) -> None:
        """Cancel the loop timer; pending tasks will not run (as Kafka's timer close)."""
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._handle_expiration = math.inf
        self._queue.clear()

    @property
    def is_shutdown(self) -> bool:
        return self._closed

    # -- internals ----------------------------------------------------------------------------

    def _get_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _arm(self, expiration: int) -> None:
        """(Re)arm the single loop timer for the bucket expiring at ``expiration``."""
        if self._handle is not None:
            self._handle.cancel()
        loop = self._get_loop()
        # Whole milliseconds from the floor of now: loops with a millisecond clock (uvloop
        # rounds the delay to ms, libuv floors its time) then fire no earlier than the bucket.
        delay_ms = expiration - math.floor(self._clock())
        self._handle = loop.call_later(delay_ms / 1000 if delay_ms > 0 else 0, self._on_timer)
        self._handle_expiration = expiration

    def _on_timer(self) -> None:
        self._handle = None
        self._handle_expiration = math.inf
        if self._closed:
            return
        self.timer_fires += 1
        # One fixed "now" per firing bounds the work; buckets that fall due while tasks run are
        # picked up by the next firing.
        now = math.floor(self._clock())
        queue, wheel, reinsert = self._queue, self._wheel, self._reinsert
        while True:
            bucket = queue.poll(now)
            if bucket is None:
                break
            wheel.advance_clock(bucket.expiration)
            bucket.flush(reinsert)
            if self._closed:
                return
        exp = queue.peek_expiration()
        # A task run above may already have armed the handle early enough.
        if exp is not None and exp < self._handle_expiration:
            self._arm(exp)

    def _reinsert(self, entry: TimerTaskEntry) -> None:
        # Kafka's addTimerTaskEntry: cascade into a finer wheel, or run if due.
        if not self._wheel.add(entry) and not entry.cancelled():
            self._run(entry)

    def _run_if_live(self, entry: TimerTaskEntry) -> None:
        if not self._closed and not entry.cancelled():
            self._run(entry)

    def _run(self, entry: TimerTaskEntry) -> None:
        task = entry.task
        assert task is not None
        try:
            task.run()
        except Exception:  # one failing task must not stall the others in its bucket
            log.exception("timer %s: task %r failed", self.name, task)

    def __repr__(self) -> str:
        return f"SystemTimer({self.name!r}, size={self.size}, armed={self.armed})"

