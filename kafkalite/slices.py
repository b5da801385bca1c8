"""Long loops on the event loop, cut into slices: work written as a generator that yields between
units (one partition's log made leader, one log deleted) runs either at once (`run_at_once`) or
in slices of about `SLICE_S` that let the loop serve other clients in between (`run_in_slices`).
A step may also yield `OffLoop(fn)`: blocking work (creating files) that `run_in_slices` runs in
a worker thread and `run_at_once` runs inline; either way its result is sent back into the
generator. A CreateTopics of 1,000 partitions creates 1,000 logs: done in one go on the loop it
stalled every client for seconds."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, Optional, TypeVar

T = TypeVar("T")

SLICE_S = 0.005


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
    deadline = time.monotonic() + slice_s
    sent: Any = None
    while True:
        try:
            step = steps.send(sent)
        except StopIteration as done:
            return done.value
        sent = None
        if step is not None:
            sent = await asyncio.to_thread(step.fn)
            deadline = time.monotonic() + slice_s
        elif time.monotonic() >= deadline:
            await asyncio.sleep(0)
            deadline = time.monotonic() + slice_s
