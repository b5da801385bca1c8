"""Long loops on the event loop, cut into slices: work written as a generator that yields between
units (one partition's log made leader, one log deleted) runs either at once (`run_at_once`) or
in slices of about `SLICE_S` that let the loop serve other clients in between (`run_in_slices`).
A step may also yield `OffLoop(fn)`: blocking work (creating files) that `run_in_slices` runs in
a worker thread and `run_at_once` runs inline; either way its result is sent back into the
generator. A CreateTopics of 1,000 partitions creates 1,000 logs: done in one go on the loop it
stalled every client for seconds."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Generator, Optional, TypeVar

T = TypeVar("T")

# Another client's request waits about three turns of the loop (its bytes read, its handler,
# its response flushed), each one slice long: 5 ms slices kept a probe's p99 at ~15 ms during a
# 1,000-partition CreateTopics, 1 ms slices at ~6 ms; the work sliced took about as long
# (10,000 partitions: restarts within the noise, CreateTopics 8.1-8.3 s against 7.8-7.9 s;
# docs/benchmarks.md).
SLICE_S = 0.001


@dataclass(frozen=True)
class OffLoop:
    fn: Callable[[], Any]


Steps = Generator[Optional[OffLoop], Any, T]


def run_at_once(steps: Steps[T]) -> T:
    sent: Any = None
    while True:
        try:
            step = steps.send(sent)
        except StopIteration as done:
            return done.value
        sent = step.fn() if step is not None else None


async def run_in_slices(steps: Steps[T], slice_s: float = SLICE_S) -> T:
    clock = SliceClock(slice_s)
    sent: Any = None
    while True:
        try:
            step = steps.send(sent)
        except StopIteration as done:
            return done.value
        sent = None
        if step is not None:
            sent = await asyncio.to_thread(step.fn)
            clock.restart()      # the loop ran others while the thread worked
        else:
            await clock.tick()


class SliceClock:
    """A long loop inside a coroutine (one unit per partition): `await clock.tick()` after each
    unit yields to the event loop once `slice_s` has passed since the last yield."""
    __slots__ = ("_slice_s", "_deadline")

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self._slice_s = slice_s
        self._deadline = time.monotonic() + slice_s

    async def tick(self) -> None:
        if time.monotonic() >= self._deadline:
            await asyncio.sleep(0)
            self._deadline = time.monotonic() + self._slice_s

    def restart(self) -> None:
        """A new slice from now (after an await that let the loop run anyway)."""
        self._deadline = time.monotonic() + self._slice_s


async def log_in_slices(logger: logging.Logger, level: int, msg: str, args: list[tuple[Any, ...]],
                        slice_s: float = SLICE_S) -> None:
    """``logger.log(level, msg, *a)`` for each ``a`` in ``args``, yielding to the loop every
    ``slice_s``: a record written to stderr costs ~20 us, and the controller's per-partition
    state-change lines for a 1,000-partition CreateTopics held the loop ~20 ms per batch."""
    if not args or not logger.isEnabledFor(level):
        return
    clock = SliceClock(slice_s)
    for a in args:
        logger.log(level, msg, *a)
        await clock.tick()


GATHER_CHUNK = 64


async def gather_in_slices(coros: list[Coroutine[Any, Any, T]], *, return_exceptions: bool = False,
                           chunk: int = GATHER_CHUNK) -> list[Any]:
    """`asyncio.gather` of many coroutines (pipelined store requests, one per partition) whose
    tasks are started `chunk` at a time, one loop iteration apart: gather starts them all at
    once, and the loop then runs thousands of first steps back to back before it polls sockets
    again. The results are in the coroutines' order, as gather's."""
    tasks: list[asyncio.Task[Any]] = []
    try:
        for i, coro in enumerate(coros):
            if i and i % chunk == 0:
                await asyncio.sleep(0)
            tasks.append(asyncio.ensure_future(coro))
    except BaseException:   # cancelled while starting them: nothing is left running or unawaited
        for t in tasks:
            t.cancel()
        for coro in coros[len(tasks):]:
            coro.close()
        raise
    return await asyncio.gather(*tasks, return_exceptions=return_exceptions)
