"""The LogManager's background flusher (issue 13): rolls advance the recovery point through fsyncs
run in a thread pool, never on the event loop; the checkpoints follow; a crash then re-validates
only the tail; a clean restart rewrites no checkpoint."""
from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path

from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log.checkpoint import PARTITION_METADATA_FILE, read_offset_checkpoint
from kafkalite.log.leader_epoch_cache import LeaderEpochCache
from kafkalite.log.log import Log
from kafkalite.log.log_manager import LogManager
from kafkalite.log.record_batch import split_batches
from kafkalite.log.segment import log_file

T0 = 1_700_000_000_000


def records(n: int, pid: int = -1, seq: int = -1) -> bytes:
    b = MemoryRecordsBuilder(2, 0, 1 << 20, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                             base_sequence=seq)
    for i in range(n):
        b.append(T0 + i, b"k", b"value-%d" % i)
    b.close()
    return bytes(b.buffer())


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_roll_flushes_off_the_loop_and_the_checkpoint_follows(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "logs"
    one = records(2)
    cfg = LogConfig(segment_bytes=len(one) * 3)
    fsync_threads: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        fsync_threads.append(threading.current_thread().name)
        real_fsync(fd)

    async def run() -> None:
        lm = LogManager([d], cfg, lock_dirs=False)
        lm.startup()
        lm.start_flusher()
        lg = lm.get_or_create_log("t", 0)
        cache = LeaderEpochCache(lg.dir / "leader-epoch-checkpoint")
        lg.set_checkpoint_sync("leader-epoch-checkpoint", cache.sync)
        monkeypatch.setattr(os, "fsync", recording_fsync)
        cache.assign(0, 0)
        for _ in range(7):                      # 3 batches a segment: rolls at 6 and 12
            lg.append_as_leader(one, 0, T0)
        assert [s.base_offset for s in lg.segments] == [0, 6, 12]
        for _ in range(100):
            if lg.recovery_point == 12:
                break
            await asyncio.sleep(0.01)
        assert lg.recovery_point == 12          # the rolls' flushes, not the active segment
        await lm.checkpoint_recovery_points_async()
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert fsync_threads and all(t.startswith("kafka-log-flush") for t in fsync_threads)
        assert read_offset_checkpoint(d / "recovery-point-offset-checkpoint") == {("t", 0): 12}
        assert not cache._unsynced              # synced before the recovery point moved
        await lm.stop_flusher()
        for log_ in lm.all_logs():              # a crash: nothing more is written
            log_.close_handlers()

    asyncio.run(run())
    part = d / "t-0"
    old_size = log_file(part, 0).stat().st_size
    flip_byte(log_file(part, 0), old_size - 3)            # inside the flushed first segment
    tail = log_file(part, 12)
    tail_size = tail.stat().st_size
    flip_byte(tail, tail_size - 3)                       # inside the tail's only batch
    lm2 = LogManager([d], cfg, lock_dirs=False)
    lm2.startup()
    lg2 = lm2.get_log(("t", 0))
    assert lg2 is not None
    # The segments below the recovery point are not re-validated (Kafka): the flipped byte
    # stays, the batch is served as it lies. The tail is, and loses its corrupt batch.
    assert log_file(part, 0).stat().st_size == old_size
    assert [s.base_offset for s in lg2.segments] == [0, 6, 12]
    assert lg2.log_end_offset == 12 and lg2.recovery_point == 12
    assert tail.stat().st_size == 0
    data = lg2.read(0, 1 << 20).read_bytes()
    assert len(split_batches(data)[0]) == 6
    lm2.shutdown()


def test_clean_restart_rewrites_no_checkpoint(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig())
    lm.startup()
    for p in range(20):
        lg = lm.get_or_create_log("t", p)
        lg.append_as_leader(records(3, pid=7 + p, seq=0), 0, T0)
        lg.maybe_increment_log_start_offset(1)
    lm.shutdown()
    files = [d / "recovery-point-offset-checkpoint", d / "log-start-offset-checkpoint"]
    stat_before = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files]
    assert read_offset_checkpoint(files[0]) == {("t", p): 3 for p in range(20)}

    async def run() -> None:
        lm2 = LogManager([d], LogConfig())
        lm2.startup()
        lm2.start_flusher()
        lg = lm2.get_log(("t", 5))
        assert lg is not None
        assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (1, 3, 3)
        # the idempotent producer's state came back from the snapshot written at shutdown
        assert lg.producer_state.producers[12].last_seq == 2
        await lm2.checkpoint_recovery_points_async()
        await lm2.checkpoint_log_start_offsets_async()
        assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files] == stat_before
        await lm2.stop_flusher()
        await asyncio.to_thread(lm2.shutdown)

    asyncio.run(run())
    assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files] == stat_before


def test_flush_messages_are_flushed_by_the_pool(tmp_path: Path) -> None:
    d = tmp_path / "logs"

    async def run() -> None:
        lm = LogManager([d], LogConfig(flush_messages=4), lock_dirs=False)
        lm.startup()
        lm.start_flusher()
        lg = lm.get_or_create_log("t", 0)
        lg.append_as_leader(records(2), 0, T0)
        assert lg.recovery_point == 0
        lg.append_as_leader(records(2), 0, T0)       # 4 unflushed: a flush is asked for
        assert lg.recovery_point == 0                # ... and runs in the pool, not here
        for _ in range(100):
            if lg.recovery_point == 4:
                break
            await asyncio.sleep(0.01)
        assert lg.recovery_point == 4
        await lm.stop_flusher()
        await asyncio.to_thread(lm.shutdown)

    asyncio.run(run())


def test_deleting_many_logs_checkpoints_once_in_the_pool(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "logs"
    writes: list[str] = []

    async def run() -> None:
        lm = LogManager([d], LogConfig(), lock_dirs=False)
        lm.startup()
        lm.start_flusher()
        for p in range(30):
            lm.get_or_create_log("t", p).append_as_leader(records(2), 0, T0)
        real = lm._write_checkpoint

        def recording(path: Path, data: bytes) -> bool:
            writes.append(f"{path.name}@{threading.current_thread().name}")
            return real(path, data)
        monkeypatch.setattr(lm, "_write_checkpoint", recording)
        for p in range(25):
            lm.delete_log("t", p)
        assert writes == []                      # nothing written on the loop
        await lm.stop_flusher()                  # waits for the checkpoint write
        assert sorted(w.split("@")[0] for w in writes) == [
            "log-start-offset-checkpoint", "recovery-point-offset-checkpoint"]
        assert all(w.split("@")[1].startswith("kafka-log-flush") for w in writes)
        assert set(read_offset_checkpoint(d / "recovery-point-offset-checkpoint")) == \
            {("t", p) for p in range(25, 30)}
        await asyncio.to_thread(lm.shutdown)

    asyncio.run(run())


def test_a_failed_flush_keeps_its_files_owed_to_the_next_one(tmp_path: Path) -> None:
    """A flush job that fails (an fsync error) moves no recovery point and gives back the files
    it was to sync (partition.metadata, roll snapshots): the next flush syncs them before the
    recovery point can pass what they describe."""
    lg = Log.open(tmp_path / "t-0", LogConfig(), now_ms=T0)
    try:
        lg.assign_topic_id(uuid.UUID(int=7))
        lg.append_as_leader(records(3), 0, T0)
        job = lg.prepare_flush()
        assert job is not None and job.snapshots == [tmp_path / "t-0" / PARTITION_METADATA_FILE]
        job.errors.append(OSError(5, "Input/output error"))
        assert lg.complete_flush(job) is False
        assert lg.recovery_point == 0
        retry = lg.prepare_flush()
        assert retry is not None and retry.offset == 3
        assert retry.snapshots == [tmp_path / "t-0" / PARTITION_METADATA_FILE]
        Log.run_flush(retry)
        assert retry.errors == [] and lg.complete_flush(retry) is True
        assert lg.recovery_point == 3
        assert lg.prepare_flush() is None          # nothing owed any more
    finally:
        lg.close()
