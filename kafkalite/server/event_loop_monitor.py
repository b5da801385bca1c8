"""Event-loop lag: how late a periodic callback fires. Every request, timer and replica task of a
broker shares one event loop, so a callback that runs for 200 ms delays every client by 200 ms;
this monitor makes such stalls visible (log line, metrics) without a profiler.

A task sleeps `interval_ms` and measures how much later than asked it woke up. The figures are
plain attributes, read by the metrics endpoint and by operators' debugging tools:
- `max_lag_ms`: the largest lag seen since start (or since `reset()`);
- `lag_samples`: how many wake-ups were later than `threshold_ms` (each one a stall);
- `samples`: how many wake-ups were measured; `last_lag_ms`: the latest one's lag.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional

from kafkalite.tasks import cancel_and_wait

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 100
DEFAULT_THRESHOLD_MS = 50


class EventLoopMonitor:
    def __init__(self, interval_ms: int = DEFAULT_INTERVAL_MS, threshold_ms: int = DEFAULT_THRESHOLD_MS) -> None:
        self.interval_ms = interval_ms
        self.threshold_ms = threshold_ms
        self.max_lag_ms = 0.0
        self.last_lag_ms = 0.0
        self.lag_samples = 0
        self.samples = 0
        self._task: Optional[asyncio.Task[None]] = None
        # also told every lag (the metrics endpoint's percentile window), when set
        self.on_sample: Optional[Callable[[float], None]] = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="event-loop-monitor")

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    def reset(self) -> None:
        self.max_lag_ms = self.last_lag_ms = 0.0
        self.lag_samples = self.samples = 0

    def record(self, lag_ms: float) -> None:
        """Account one wake-up that came `lag_ms` later than asked."""
        lag_ms = max(0.0, lag_ms)
        self.samples += 1
        self.last_lag_ms = lag_ms
        if self.on_sample is not None:
            self.on_sample(lag_ms)
        if lag_ms > self.max_lag_ms:
            self.max_lag_ms = lag_ms
        if lag_ms > self.threshold_ms:
            self.lag_samples += 1
            log.warning("event loop blocked: a callback fired %.0f ms late", lag_ms)

    async def _run(self) -> None:
        interval = self.interval_ms / 1000
        while True:
            asked = time.monotonic()
            await asyncio.sleep(interval)
            self.record((time.monotonic() - asked - interval) * 1000)
