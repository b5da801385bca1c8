"""Kafka's hierarchical timing wheel, pure and deterministic (no clock, no asyncio).

A wheel has ``wheel_size`` buckets of ``tick_ms`` each and covers
``[current_time_ms, current_time_ms + interval)``. An entry due within that window goes into
the bucket of its slot; one due later goes to an overflow wheel whose tick is this wheel's
interval (created on demand, so 1 ms x 20 gives levels of 20 ms, 400 ms, 8 s, 160 s, ...).
Insert costs O(levels), cancel O(1).

The wheel never looks at a clock. Whoever drives it (``SystemTimer``, or a test) keeps the
buckets that received an expiration in a priority queue (``BucketQueue``), pops a bucket once
time reaches its expiration, calls ``advance_clock(bucket.expiration)`` and flushes the bucket
through ``add``: entries that are now due are returned as not-added (the driver runs them),
the rest cascade into finer wheels.

A bucket's expiration is the *start* of its slot (as in Kafka). With ``tick_ms = 1`` and
integer millisecond deadlines that is exactly the deadline; with a coarser tick a task can run
up to ``tick_ms - 1`` ms before its deadline.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Protocol

from kafkalite.purgatory.timer_task import TaskCounter, TimerTaskEntry, TimerTaskList


class BucketSink(Protocol):
    """Where a wheel reports a bucket whose expiration was (re)set (Kafka's DelayQueue.offer)."""

    def offer(self, bucket: TimerTaskList) -> None: ...


class BucketQueue:
    """Min-heap of buckets by expiration; stands in for Java's DelayQueue.

    A bucket is offered only when its expiration changes, which the wheel does only after the
    bucket has been flushed, so a bucket is in the heap at most once with a live expiration.
    ``poll`` still skips an entry whose bucket no longer carries the heap's expiration, as a
    cheap guard.
    """

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()  # tie-break: buckets themselves are not ordered

    def offer(self, bucket: TimerTaskList) -> None:
        heapq.heappush(self._heap, (bucket.expiration, next(self._seq), bucket))

    def peek_expiration(self) -> int | None:
        heap = self._heap
        while heap:
            expiration, _, bucket = heap[0]
            if bucket.expiration == expiration:
                return expiration
            heapq.heappop(heap)  # stale
        return None

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Pop and return the earliest bucket if its expiration is <= now_ms, else None."""
        heap = self._heap
        while heap:
            expiration, _, bucket = heap[0]
            if bucket.expiration != expiration:
                heapq.heappop(heap)  # stale
                continue
            if expiration > now_ms:
                return None
            heapq.heappop(heap)
            return bucket
        return None

    def clear(self) -> None:
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)


class TimingWheel:
    __slots__ = (
        "tick_ms",
        "wheel_size",
        "interval",
        "task_counter",
        "queue",
        "buckets",
        "current_time_ms",
        "overflow_wheel",
    )

    def __init__(
        self,
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int = 0,
        task_counter: TaskCounter | None = None,
        queue: BucketSink | None = None,
    ) -> None:
        if tick_ms <= 0 or wheel_size <= 0:
            raise ValueError("tick_ms and wheel_size must be positive")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.task_counter = task_counter if task_counter is not None else TaskCounter()
        self.queue: BucketSink = queue if queue is not None else BucketQueue()
        self.buckets = [TimerTaskList(self.task_counter) for _ in range(wheel_size)]
        # The dial always points at a multiple of tick_ms.
        self.current_time_ms = start_ms - (start_ms % tick_ms)
        self.overflow_wheel: TimingWheel | None = None

    def _add_overflow_wheel(self) -> TimingWheel:
        wheel = self.overflow_wheel
        if wheel is None:
            wheel = TimingWheel(
                self.interval, self.wheel_size, self.current_time_ms, self.task_counter, self.queue
            )
            self.overflow_wheel = wheel
        return wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        """Link ``entry`` into a bucket. False if it is cancelled or already due (the caller
        then runs it unless cancelled)."""
        expiration = entry.expiration_ms
        if entry.cancelled():
            return False
        current = self.current_time_ms
        if expiration < current + self.tick_ms:
            return False
        if expiration < current + self.interval:
            virtual_id = expiration // self.tick_ms
            bucket = self.buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            # Only a change of expiration means the bucket left the queue (it was flushed and
            # is now reused for a later slot), so only then is it offered again.
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self.queue.offer(bucket)
            return True
        wheel = self.overflow_wheel
        if wheel is None:
            wheel = self._add_overflow_wheel()
        return wheel.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        """Move the dial to ``time_ms`` (rounded down to a tick), and the overflow wheels too."""
        if time_ms >= self.current_time_ms + self.tick_ms:
            self.current_time_ms = time_ms - (time_ms % self.tick_ms)
            if self.overflow_wheel is not None:
                self.overflow_wheel.advance_clock(self.current_time_ms)

    # -- introspection (tests, metrics) ------------------------------------------------------

    def levels(self) -> int:
        """Number of wheels in the hierarchy, this one included."""
        n, wheel = 1, self.overflow_wheel
        while wheel is not None:
            n += 1
            wheel = wheel.overflow_wheel
        return n

    def level_of(self, entry: TimerTaskEntry) -> int | None:
        """Level (0 = this wheel) of the bucket holding ``entry``, None if it is in none."""
        lst = entry.list
        if lst is None:
            return None
        level, wheel = 0, self
        while wheel is not None:
            if any(b is lst for b in wheel.buckets):
                return level
            level += 1
            wheel = wheel.overflow_wheel
        return None

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time_ms={self.current_time_ms}, levels={self.levels()})"
        )
