"""Stopping the asyncio tasks a component owns.

A single `task.cancel()` can be lost: on Python 3.11, `asyncio.wait_for` returns the result of an
inner operation that completed as the cancellation arrived, so a loop around a request (a
follower's fetch, a controller's send) keeps running and `await task` never returns. Shutdown
cancels again until the task has ended."""
from __future__ import annotations

import asyncio
from typing import Any

RECANCEL_INTERVAL_S = 0.5


async def cancel_and_wait(task: "asyncio.Task[Any] | None") -> None:
    """Cancel `task` and wait until it has ended, re-cancelling if a cancellation was swallowed.
    Neither raises the task's own CancelledError nor swallows a cancellation of the caller."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=RECANCEL_INTERVAL_S)
    if not task.cancelled():
        task.exception()   # retrieved: an error it ended with is not logged as never retrieved
