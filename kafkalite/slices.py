"""Long loops on the event loop, cut into slices: work written as a generator that yields between
units (one partition's log created, one log deleted) runs either at once (`run_at_once`) or in
slices of about `SLICE_S` that let the loop serve other clients in between (`run_in_slices`).
A CreateTopics of 1,000 partitions creates 1,000 logs; done in one go it stalls every client for
over a second."""
from __future__ import annotations

import asyncio
import time
from typing import Generator, TypeVar

T = TypeVar("T")

SLICE_S = 0.005

Steps = Generator[None, None, T]


def run_at_once(steps: Steps[T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


async def run_in_slices(steps: Steps[T], slice_s: float = SLICE_S) -> T:
    deadline = time.monotonic() + slice_s
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        if time.monotonic() >= deadline:
            await asyncio.sleep(0)
            deadline = time.monotonic() + slice_s
