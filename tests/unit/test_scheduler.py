"""The broker's periodic tasks at shutdown (Kafka's KafkaScheduler: awaitTermination)."""
from __future__ import annotations

import asyncio
import threading
import time

from kafkalite.server.scheduler import Scheduler


def test_shutdown_lets_a_run_under_way_finish_and_starts_no_other() -> None:
    # A periodic checkpoint waits for a thread that writes the file; cancelling it mid-run left
    # that thread writing while the shutdown wrote the same file.
    in_thread = threading.Event()
    release = threading.Event()
    finished: list[float] = []
    starts: list[str] = []

    def write_checkpoint() -> None:
        in_thread.set()
        assert release.wait(10)
        time.sleep(0.05)
        finished.append(time.monotonic())

    async def checkpoint() -> None:
        starts.append("checkpoint")
        await asyncio.to_thread(write_checkpoint)

    async def main() -> tuple[float, list[str]]:
        sched = Scheduler()
        sched.schedule("checkpoint", checkpoint, 10, initial_delay_ms=0)
        sched.schedule("sleeper", lambda: starts.append("sleeper"), 60_000)   # waits its first delay
        while not in_thread.is_set():
            await asyncio.sleep(0.001)
        stopping = asyncio.get_running_loop().create_task(sched.shutdown())
        await asyncio.sleep(0.05)
        assert not stopping.done()          # the run under way holds the shutdown
        release.set()
        await asyncio.wait_for(stopping, 5)
        returned = time.monotonic()
        await asyncio.sleep(0.05)           # nothing runs after the shutdown returned
        sched.schedule("late", lambda: starts.append("late"), 10, initial_delay_ms=0)
        await asyncio.sleep(0.05)
        return returned, starts

    returned, seen = asyncio.run(main())
    assert len(finished) == 1 and finished[0] <= returned
    assert seen == ["checkpoint"]


def test_shutdown_cancels_tasks_between_runs_at_once() -> None:
    runs: list[int] = []

    async def main() -> None:
        sched = Scheduler()
        sched.schedule("tick", lambda: runs.append(1), 60_000, initial_delay_ms=0)
        await asyncio.sleep(0.05)
        await asyncio.wait_for(sched.shutdown(), 5)   # not the 60 s the task sleeps

    asyncio.run(main())
    assert runs == [1]
