"""LeaderAndIsr and StopReplica for many partitions run in slices: the logs are created in a worker
thread and the event loop keeps running other tasks meanwhile, with the same outcome as applying
the request at once (logs, topic ids, leaders, checkpoints)."""
from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from kafkalite.config.log_config import LogConfig
from kafkalite.log.checkpoint import RECOVERY_POINT_CHECKPOINT_FILE, read_offset_checkpoint, read_partition_metadata
from kafkalite.log.log_manager import LogManager
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.control_states import LeaderAndIsrPartitionState, StopReplicaPartitionState
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.slices import OffLoop, gather_in_slices, run_at_once, run_in_slices

CONFIG = LogConfig(segment_index_bytes=64 * 1024)
ME, OTHER = 1, 2
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
N = 120


def states(topic: str, n: int) -> list[LeaderAndIsrPartitionState]:
    # even partitions led here, odd ones followed (leader OTHER, not alive: only the log is made)
    return [LeaderAndIsrPartitionState(topic, p, 1, ME if p % 2 == 0 else OTHER, 0, (ME, OTHER), 0, (ME, OTHER))
            for p in range(n)]


def _replica_manager(tmp_path: Path) -> tuple[LogManager, ReplicaManager]:
    lm = LogManager([tmp_path], CONFIG)
    lm.startup()
    cache = MetadataCache("cluster", broker_id=ME)
    cache.update_brokers([BrokerInfo(ME, (BrokerEndpoint("PLAINTEXT", "localhost", 9091),))], ME)
    return lm, ReplicaManager(ME, lm, cache)


def test_steps_run_the_same_at_once_and_in_slices() -> None:
    def steps():   # type: ignore[no-untyped-def]
        got = yield OffLoop(lambda: 40)
        yield
        yield
        return got + 2

    assert run_at_once(steps()) == 42
    assert asyncio.run(run_in_slices(steps())) == 42


def test_many_partitions_made_leader_and_deleted_in_slices(tmp_path: Path) -> None:
    lm, rm = _replica_manager(tmp_path)

    async def run() -> tuple[int, int]:
        ticks = 0
        running = True

        async def ticker() -> None:
            nonlocal ticks
            while running:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = ticks
        error, errors = await rm.become_leader_or_follower_in_slices(
            0, 1, states("t", N), {"t": TOPIC_ID}, [ME], lambda _topic: CONFIG)
        during_create = ticks - start
        assert error == ErrorCode.NONE
        assert errors == {TopicPartition("t", p): ErrorCode.NONE for p in range(N)}
        start = ticks
        error, stop_errors = await rm.stop_replicas(
            0, 1, {TopicPartition("t", p): StopReplicaPartitionState(-2, True) for p in range(N // 2)})
        during_delete = ticks - start
        assert (error, stop_errors) == (ErrorCode.NONE, {TopicPartition("t", p): ErrorCode.NONE for p in range(N // 2)})
        running = False
        await task
        return during_create, during_delete

    try:
        during_create, during_delete = asyncio.run(run())
        # other tasks ran while the logs were made (in a worker thread) and deleted
        assert during_create > 0 and during_delete > 0
        assert sorted(tp.partition for tp in rm.partitions) == list(range(N // 2, N))
        assert sorted(p.tp.partition for p in rm.partitions.values() if p.is_leader) == \
            [p for p in range(N // 2, N) if p % 2 == 0]
        for p in range(N):
            d = tmp_path / f"t-{p}"
            assert d.is_dir() == (p >= N // 2)
            if p >= N // 2:
                assert read_partition_metadata(d) == TOPIC_ID
                assert lm.get_log(TopicPartition("t", p)) is rm.partitions[TopicPartition("t", p)].log
        # the directory's checkpoint was written once the deletions were done
        assert sorted(read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE)) == \
            [("t", p) for p in range(N // 2, N)]
    finally:
        rm.shutdown()
        lm.shutdown()


def test_gather_in_slices_keeps_order_and_lets_the_loop_run() -> None:
    async def run() -> tuple[list, int]:
        ticks = 0
        running = True

        async def ticker() -> None:
            nonlocal ticks
            while running:
                ticks += 1
                await asyncio.sleep(0)

        async def one(i: int) -> int:
            if i == 7:
                raise ValueError(i)
            await asyncio.sleep(0)
            return i * 2

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = ticks
        results = await gather_in_slices([one(i) for i in range(300)], return_exceptions=True, chunk=50)
        during = ticks - start
        running = False
        await task
        return results, during

    results, during = asyncio.run(run())
    assert [r for i, r in enumerate(results) if i != 7] == [i * 2 for i in range(300) if i != 7]
    assert isinstance(results[7], ValueError)
    assert during >= 5   # at least one loop iteration between each chunk of 50


def test_stop_replica_waits_for_a_leader_and_isr_in_slices(tmp_path: Path) -> None:
    """Kafka's replicaStateChangeLock: a topic deletion (StopReplica with delete) sent while a
    LeaderAndIsr for that topic is between slices runs after it, so the partitions end deleted
    rather than created again by the LeaderAndIsr's later steps."""
    lm, rm = _replica_manager(tmp_path)

    async def run() -> tuple[tuple, tuple]:
        create = asyncio.create_task(rm.become_leader_or_follower_in_slices(
            0, 1, states("t", N), {"t": TOPIC_ID}, [ME], lambda _topic: CONFIG))
        await asyncio.sleep(0)     # the LeaderAndIsr has started (its logs are being made)
        assert not create.done()
        stop = await rm.stop_replicas(0, 1, {TopicPartition("t", p): StopReplicaPartitionState(-2, True)
                                             for p in range(N)})
        assert create.done()       # the deletion ran only after the whole LeaderAndIsr
        return create.result(), stop

    try:
        (error, errors), (stop_error, stop_errors) = asyncio.run(run())
        assert error == ErrorCode.NONE and set(errors.values()) == {ErrorCode.NONE}
        assert stop_error == ErrorCode.NONE and set(stop_errors.values()) == {ErrorCode.NONE}
        assert rm.partitions == {}
        assert all(lm.get_log(TopicPartition("t", p)) is None for p in range(N))
        assert not any((tmp_path / f"t-{p}").exists() for p in range(N))
    finally:
        rm.shutdown()
        lm.shutdown()


def test_a_config_change_between_slices_is_kept(tmp_path: Path) -> None:
    """The topic config is built once per LeaderAndIsr; a change applied while the request is
    between slices (AlterConfigs updates the partitions hosted by then) is not undone by the
    request's later partitions: every partition ends with the current config."""
    lm, rm = _replica_manager(tmp_path)
    current = {"t": CONFIG}
    changed = LogConfig(segment_index_bytes=64 * 1024, retention_ms=12345)

    async def run() -> tuple:
        create = asyncio.create_task(rm.become_leader_or_follower_in_slices(
            0, 1, states("t", N), {"t": TOPIC_ID}, [ME], lambda topic: current[topic]))
        while not rm.partitions:       # some partitions made, the rest to come
            await asyncio.sleep(0)
        assert not create.done()
        current["t"] = changed
        for p in list(rm.partitions.values()):    # what the AlterConfigs handler does
            p.log.update_config(changed)
        return await create

    try:
        error, errors = asyncio.run(run())
        assert error == ErrorCode.NONE and set(errors.values()) == {ErrorCode.NONE}
        assert len(rm.partitions) == N
        assert {p.log.config.retention_ms for p in rm.partitions.values()} == {12345}
    finally:
        rm.shutdown()
        lm.shutdown()


def test_log_in_slices_writes_every_line_in_order_and_lets_others_run(caplog: pytest.LogCaptureFixture) -> None:
    from kafkalite.slices import log_in_slices
    logger = logging.getLogger("kafkalite.state.change.logger")
    others: list[int] = []

    async def other() -> None:
        for i in range(1000):
            others.append(i)
            await asyncio.sleep(0)

    async def main() -> int:
        ticker = asyncio.get_running_loop().create_task(other())
        await asyncio.sleep(0)
        before = len(others)
        await log_in_slices(logger, logging.INFO, "Changed partition %s state from %s",
                            [(f"t-{i}", "NewPartition") for i in range(3000)], slice_s=0.0)
        ran = len(others) - before
        ticker.cancel()
        return ran

    with caplog.at_level(logging.INFO, logger="kafkalite.state.change.logger"):
        ran = asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkalite.state.change.logger"]
    assert lines == [f"Changed partition t-{i} state from NewPartition" for i in range(3000)]
    assert ran > 0          # with a zero slice every line yields: the other task ran meanwhile
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafkalite.state.change.logger"):
        asyncio.run(log_in_slices(logger, logging.INFO, "x %s", [(1,)]))
    assert caplog.records == []


def test_slice_clock_yields_once_its_slice_is_over() -> None:
    """SliceClock.tick: no yield within a slice, a yield (other tasks run) once it is over."""
    from kafkalite.slices import SliceClock
    ran: list[int] = []

    async def other() -> None:
        while True:
            ran.append(1)
            await asyncio.sleep(0)

    async def main() -> tuple[int, int]:
        ticker = asyncio.get_running_loop().create_task(other())
        await asyncio.sleep(0)
        long_slice = SliceClock(slice_s=60.0)
        before = len(ran)
        for _ in range(100):
            await long_slice.tick()
        within = len(ran) - before
        zero = SliceClock(slice_s=0.0)
        before = len(ran)
        for _ in range(100):
            await zero.tick()
        over = len(ran) - before
        ticker.cancel()
        return within, over

    within, over = asyncio.run(main())
    assert within == 0          # the slice never ended: the loop was not given up
    assert over >= 99           # every tick's slice was over: the other task ran in between
