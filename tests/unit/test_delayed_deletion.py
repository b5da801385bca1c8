"""file.delete.delay.ms / log.segment.delete.delay.ms and flush.ms in the LogManager (issue 14,
"settings that do nothing"): segments deleted by retention or truncation are renamed ``.deleted``
and removed after the topic's delay; a deleted partition's directory is renamed ``-delete`` and
removed after the broker's delay; reads that located the files before keep being served; a
restart removes what a stop left behind; a dirty log is flushed once its flush.ms is up."""
from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log.checkpoint import read_offset_checkpoint
from kafkalite.log.log import Log
from kafkalite.log.log_manager import LogManager

T0 = 1_700_000_000_000


def records(n: int, first: int = 0) -> bytes:
    b = MemoryRecordsBuilder(2, 0, 1 << 20)
    for i in range(first, first + n):
        b.append(T0 + i, b"k", b"value-%03d" % i)
    b.close()
    return bytes(b.buffer())


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


async def wait_for(pred, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


@asynccontextmanager
async def running(d: Path, config: LogConfig) -> AsyncIterator[LogManager]:
    """A started LogManager with its flusher (so deletions are delayed), stopped after."""
    lm = LogManager([d], config, lock_dirs=False)
    lm.startup()
    lm.start_flusher()
    try:
        yield lm
    finally:
        await lm.stop_flusher()
        await asyncio.to_thread(lm.shutdown)


def three_segments(lm: LogManager, topic: str = "t") -> Log:
    """Offsets 0-1, 2-3 in two rolled segments and 4-5 in the active one."""
    lg = lm.get_or_create_log(topic, 0)
    for first in (0, 2, 4):
        lg.append_as_leader(records(2, first), 0, T0)
        if first < 4:
            lg.roll()
    assert [s.base_offset for s in lg.segments] == [0, 2, 4]
    return lg


def test_retention_renames_segments_and_deletes_them_after_the_delay(tmp_path: Path) -> None:
    d = tmp_path / "logs"

    async def run() -> None:
        async with running(d, LogConfig(file_delete_delay_ms=400)) as lm:
            lg = three_segments(lm)
            part = lg.dir
            in_flight = lg.read(0, 1 << 20)              # a fetch located before the deletion
            expected = in_flight.read_bytes()
            assert len(expected) > 0
            lg.maybe_increment_log_start_offset(4)
            assert lg.delete_old_segments(T0) == 2
            assert [s.base_offset for s in lg.segments] == [4]
            assert "00000000000000000000.log.deleted" in names(part)
            assert "00000000000000000002.log.deleted" in names(part)
            assert "00000000000000000002.index.deleted" in names(part)
            assert "00000000000000000000.log" not in names(part)
            assert lm.pending_deletions == 1
            assert in_flight.read_bytes() == expected     # served from the renamed files
            await wait_for(lambda: not any(n.endswith(".deleted") for n in names(part)))
            assert lm.pending_deletions == 0
            assert in_flight.read_bytes() == expected     # the open descriptor outlives the unlink
            assert lg.read(4, 1 << 20).size > 0

    asyncio.run(run())


def test_truncation_renames_segments_too(tmp_path: Path) -> None:
    d = tmp_path / "logs"

    async def run() -> None:
        async with running(d, LogConfig(file_delete_delay_ms=60_000)) as lm:
            lg = three_segments(lm)
            assert lg.truncate_to(1)
            assert lg.log_end_offset == 1
            deleted = sorted(n for n in names(lg.dir) if n.endswith(".log.deleted"))
            assert deleted == ["00000000000000000002.log.deleted", "00000000000000000004.log.deleted"]
            lg.truncate_fully_and_start_at(2)   # a new segment at 2 while 2's old files wait
            assert lg.log_end_offset == 2 and [s.base_offset for s in lg.segments] == [2]
            assert "00000000000000000000.log.deleted" in names(lg.dir)
            assert "00000000000000000002.log" in names(lg.dir)
            assert "00000000000000000002.log.deleted" in names(lg.dir)

    asyncio.run(run())


def test_deleted_partition_directory_waits_for_the_broker_delay(tmp_path: Path) -> None:
    d = tmp_path / "logs"

    async def run() -> None:
        # the broker's default (log.segment.delete.delay.ms) counts, not the topic's override
        async with running(d, LogConfig(file_delete_delay_ms=400)) as lm:
            lg = lm.get_or_create_log("gone", 0, LogConfig(file_delete_delay_ms=600_000))
            lg.append_as_leader(records(3), 0, T0)
            in_flight = lg.read(0, 1 << 20)
            expected = in_flight.read_bytes()
            assert lm.delete_log("gone", 0) is lg
            delete_dirs = [n for n in names(d) if n.startswith("gone-0.") and n.endswith("-delete")]
            assert len(delete_dirs) == 1 and len(delete_dirs[0]) == len("gone-0.") + 32 + len("-delete")
            assert "gone-0" not in names(d)
            assert "00000000000000000000.log" in names(d / delete_dirs[0])
            assert in_flight.read_bytes() == expected
            # the same partition again meanwhile: a new, empty log beside the one waiting
            again = lm.get_or_create_log("gone", 0)
            assert again.log_end_offset == 0
            await wait_for(lambda: delete_dirs[0] not in names(d))
            assert in_flight.read_bytes() == expected
            assert "gone-0" in names(d)

    asyncio.run(run())


def test_a_restart_removes_what_a_stop_left_pending(tmp_path: Path) -> None:
    d = tmp_path / "logs"

    async def run() -> None:
        lm = LogManager([d], LogConfig(file_delete_delay_ms=600_000), lock_dirs=False)
        lm.startup()
        lm.start_flusher()
        lg = three_segments(lm)
        lg.maybe_increment_log_start_offset(2)
        assert lg.delete_old_segments(T0) == 1
        lm.get_or_create_log("gone", 1).append_as_leader(records(1), 0, T0)
        lm.delete_log("gone", 1)
        assert lm.pending_deletions == 2
        await lm.stop_flusher()                      # dropped, as Kafka's scheduler drops them
        await asyncio.to_thread(lm.shutdown)

    asyncio.run(run())
    assert "00000000000000000000.log.deleted" in names(d / "t-0")
    assert [n for n in names(d) if n.endswith("-delete")] != []
    lm = LogManager([d], LogConfig(), lock_dirs=False)
    lm.startup()
    assert not [n for n in names(d / "t-0") if n.endswith(".deleted")]
    assert not [n for n in names(d) if n.endswith("-delete")]
    lg = lm.get_log(("t", 0))
    assert lg is not None and lg.log_start_offset == 2 and lg.log_end_offset == 6
    lm.shutdown()


def test_without_a_flusher_segments_are_deleted_at_once(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "logs"], LogConfig(file_delete_delay_ms=600_000), lock_dirs=False)
    lm.startup()
    lg = three_segments(lm)
    lg.maybe_increment_log_start_offset(4)
    assert lg.delete_old_segments(T0) == 2
    assert not [n for n in names(lg.dir) if n.endswith(".deleted")]
    assert [n for n in names(lg.dir) if n.endswith(".log")] == ["00000000000000000004.log"]
    lm.shutdown()


def test_flush_ms_flushes_a_dirty_log_when_due_and_the_checkpoint_follows(tmp_path: Path) -> None:
    d = tmp_path / "logs"

    async def run() -> None:
        async with running(d, LogConfig()) as lm:
            timed = lm.get_or_create_log("timed", 0, LogConfig(flush_ms=300))
            untimed = lm.get_or_create_log("untimed", 0)
            for lg in (timed, untimed):
                lg.append_as_leader(records(3), 0, T0)
            assert timed.recovery_point == 0
            await wait_for(lambda: timed.recovery_point == 3)
            await lm.checkpoint_recovery_points_async()
            cp = read_offset_checkpoint(d / "recovery-point-offset-checkpoint")
            assert cp[("timed", 0)] == 3
            assert cp[("untimed", 0)] == 0 and untimed.recovery_point == 0
            # the next appends arm the timer again
            timed.append_as_leader(records(2, 3), 0, T0)
            await wait_for(lambda: timed.recovery_point == 5)
            # flush.ms set on a dirty log (AlterConfigs) takes effect without another append
            untimed.update_config(LogConfig(flush_ms=100))
            await wait_for(lambda: untimed.recovery_point == 3)

    asyncio.run(run())
