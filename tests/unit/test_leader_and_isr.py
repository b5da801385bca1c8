"""The broker side of LeaderAndIsr and StopReplica, in process with real logs in a temp dir:
ReplicaManager.become_leader_or_follower / stop_replicas (Kafka 3.9's checks and their order),
the leader/follower state of Partition, leader epoch cache entries, leadership listeners, log
deletion, and what clients get from a follower or from a partition hosted elsewhere."""
from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, UpdateMetadataPartitionState
from kafkalite.config.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.log.record_batch import build_batch
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.control_states import (EPOCH_DURING_DELETE, NO_EPOCH, LeaderAndIsrPartitionState,
                                              StopReplicaPartitionState)
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import LATEST_TIMESTAMP, LEADER_EPOCH_LINES_MAX, ReplicaManager
from kafkalite.replica.results import FetchPartitionRequest
from kafkalite.server.broker_epoch import BrokerEpoch

CONFIG = LogConfig(segment_index_bytes=64 * 1024)
ME = 1
OTHER = 2
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
TP = TopicPartition("t", 0)
NOW = int(time.time() * 1000)


def aio(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test on its own event loop (the project runs without an asyncio plugin)."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))
    return run


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def leader(self, tp: TopicPartition, epoch: int) -> None:
        self.calls.append(("leader", tp, epoch))

    def follower(self, tp: TopicPartition) -> None:
        self.calls.append(("follower", tp))


@pytest.fixture
def cache() -> MetadataCache:
    c = MetadataCache("cluster", broker_id=ME)
    brokers = [BrokerInfo(b, (BrokerEndpoint("PLAINTEXT", "localhost", 9090 + b),)) for b in (ME, OTHER)]
    c.update_metadata(0, 1, brokers, [UpdateMetadataPartitionState("t", 0, 1, ME, 0, (ME, OTHER), 0, (ME, OTHER))],
                      {"t": TOPIC_ID})
    return c


@pytest.fixture
def lm(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager([tmp_path], CONFIG)
    manager.startup()
    yield manager
    manager.shutdown()


@pytest.fixture
def rm(lm: LogManager, cache: MetadataCache) -> Iterator[ReplicaManager]:
    manager = ReplicaManager(ME, lm, cache)
    yield manager
    manager.shutdown()


@pytest.fixture
def listener(rm: ReplicaManager) -> Listener:
    ls = Listener()
    rm.add_leadership_listener(ls.leader, ls.follower)
    return ls


def state(leader: int = ME, leader_epoch: int = 0, *, partition: int = 0, isr: tuple[int, ...] = (ME, OTHER),
          replicas: tuple[int, ...] = (ME, OTHER), partition_epoch: int = 0, controller_epoch: int = 1,
          topic: str = "t") -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(topic, partition, controller_epoch, leader, leader_epoch, isr, partition_epoch,
                                      replicas)


def lisr(rm: ReplicaManager, *states: LeaderAndIsrPartitionState, controller_epoch: int = 1,
         topic_ids: dict[str, uuid.UUID] | None = None, live: tuple[int, ...] = (ME, OTHER)
         ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    return rm.become_leader_or_follower(0, controller_epoch, list(states),
                                        {"t": TOPIC_ID} if topic_ids is None else topic_ids, list(live),
                                        lambda _topic: CONFIG)


def records(n: int = 1) -> bytes:
    return build_batch([(None, f"v{i}".encode(), NOW + i) for i in range(n)])


async def produce(rm: ReplicaManager, tp: TopicPartition = TP, acks: int = 1, timeout_ms: int = 5000) -> ErrorCode:
    return (await rm.append_records(timeout_ms, acks, {tp: records()}))[tp].error


def fetch(rm: ReplicaManager, current_leader_epoch: int = -1, tp: TopicPartition = TP) -> ErrorCode:
    [(_tp, r)] = rm.read_from_local_logs(1 << 20, 0, [(tp, FetchPartitionRequest(0, 1 << 20, current_leader_epoch))])
    return r.error


# -- become leader ------------------------------------------------------------------------------
def test_become_leader_creates_the_partition_with_its_epoch(rm: ReplicaManager, lm: LogManager,
                                                            listener: Listener) -> None:
    assert lisr(rm, state(leader_epoch=3, partition_epoch=7)) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and p.is_leader
    assert (p.leader_id, p.leader_epoch, p.partition_epoch, p.controller_epoch) == (ME, 3, 7, 1)
    assert (p.replicas, p.isr, sorted(p.remote_replicas)) == ([ME, OTHER], {ME, OTHER}, [OTHER])
    assert p.leader_epoch_cache.entries == [(3, 0)]
    assert p.leader_epoch_start_offset == 0
    assert lm.get_log(TP) is p.log and p.log.topic_id == TOPIC_ID and p.topic_id == TOPIC_ID
    assert listener.calls == [("leader", TP, 3)]
    assert rm.controller_epoch == 1


@aio
async def test_new_leader_epoch_starts_at_the_log_end(rm: ReplicaManager, listener: Listener) -> None:
    lisr(rm, state(leader_epoch=0, isr=(ME,)))
    assert await produce(rm) == ErrorCode.NONE
    assert await produce(rm) == ErrorCode.NONE
    # same leader, new epoch: the cache gets (1, 2); the broker was already leader: no election call
    assert lisr(rm, state(leader_epoch=1, isr=(ME,), partition_epoch=1)) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and p.leader_epoch_cache.entries == [(0, 0), (1, 2)]
    assert listener.calls == [("leader", TP, 0)]


def test_stale_controller_epoch_refuses_the_whole_request(rm: ReplicaManager) -> None:
    lisr(rm, state(), controller_epoch=5)
    assert lisr(rm, state(leader_epoch=1), controller_epoch=4) == (ErrorCode.STALE_CONTROLLER_EPOCH, {})
    p = rm.get_partition(TP)
    assert p is not None and p.leader_epoch == 0 and rm.controller_epoch == 5


def test_leader_epoch_not_newer_is_stale_controller_epoch(rm: ReplicaManager, listener: Listener) -> None:
    lisr(rm, state(leader_epoch=2))
    other = TopicPartition("t", 1)
    top, errors = lisr(rm, state(leader_epoch=1), state(leader_epoch=2, partition=1))
    assert top == ErrorCode.NONE
    assert errors == {TP: ErrorCode.STALE_CONTROLLER_EPOCH, other: ErrorCode.NONE}
    # the same epoch again, with the topic id the log already has
    assert lisr(rm, state(leader_epoch=2)) == (ErrorCode.NONE, {TP: ErrorCode.STALE_CONTROLLER_EPOCH})
    p = rm.get_partition(TP)
    assert p is not None and p.leader_epoch == 2
    assert listener.calls == [("leader", TP, 2), ("leader", other, 2)]


def test_same_epoch_assigns_a_missing_topic_id(rm: ReplicaManager) -> None:
    # LeaderAndIsr before v5 carries no topic id: the log has none
    assert lisr(rm, state(leader_epoch=0), topic_ids={}) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and p.log.topic_id is None
    assert lisr(rm, state(leader_epoch=0)) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert p.log.topic_id == TOPIC_ID and p.topic_id == TOPIC_ID


def test_inconsistent_topic_id_is_checked_first(rm: ReplicaManager, lm: LogManager) -> None:
    lisr(rm, state(leader_epoch=0))
    other_id = uuid.uuid4()
    assert lisr(rm, state(leader_epoch=5), topic_ids={"t": other_id}) == \
        (ErrorCode.NONE, {TP: ErrorCode.INCONSISTENT_TOPIC_ID})
    p = rm.get_partition(TP)
    assert p is not None and p.leader_epoch == 0 and p.log.topic_id == TOPIC_ID


def test_topic_id_of_a_log_on_disk_not_yet_hosted(rm: ReplicaManager, lm: LogManager) -> None:
    # a log left from before a restart (opened by the log manager, no partition yet)
    lm.get_or_create_log("t", 0, CONFIG, topic_id=uuid.uuid4())
    assert lisr(rm, state()) == (ErrorCode.NONE, {TP: ErrorCode.INCONSISTENT_TOPIC_ID})
    assert rm.get_partition(TP) is None


def test_not_in_replicas_is_unknown_topic_or_partition(rm: ReplicaManager, lm: LogManager,
                                                       listener: Listener) -> None:
    assert lisr(rm, state(leader=OTHER, replicas=(OTHER, 3), isr=(OTHER, 3))) == \
        (ErrorCode.NONE, {TP: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
    assert rm.get_partition(TP) is None and lm.get_log(TP) is None and listener.calls == []


def test_zero_topic_id_means_none(rm: ReplicaManager) -> None:
    assert lisr(rm, state(), topic_ids={"t": uuid.UUID(int=0)}) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and p.log.topic_id is None


def test_older_partition_epoch_skips_the_change(rm: ReplicaManager, listener: Listener) -> None:
    lisr(rm, state(leader_epoch=1, partition_epoch=5))
    # a newer leader epoch but an older partition epoch: Kafka answers NONE and changes nothing
    assert lisr(rm, state(leader=OTHER, leader_epoch=2, partition_epoch=4)) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and p.is_leader and p.leader_epoch == 1 and p.partition_epoch == 5
    assert listener.calls == [("leader", TP, 1)]


# -- become follower ----------------------------------------------------------------------------
@aio
async def test_leader_becomes_follower(rm: ReplicaManager, listener: Listener) -> None:
    lisr(rm, state(leader_epoch=0, isr=(ME,)))
    assert await produce(rm) == ErrorCode.NONE
    assert lisr(rm, state(leader=OTHER, leader_epoch=1, partition_epoch=1)) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and not p.is_leader
    assert (p.leader_id, p.leader_epoch, p.partition_epoch, p.replicas, p.isr) == (OTHER, 1, 1, [ME, OTHER], set())
    assert p.leader_epoch_start_offset is None
    assert p.log.log_end_offset == 1              # the follower keeps its log
    assert p.leader_epoch_cache.entries == [(0, 0)]
    assert listener.calls == [("leader", TP, 0), ("follower", TP)]


@aio
async def test_follower_answers_clients_not_leader(rm: ReplicaManager) -> None:
    lisr(rm, state(leader=OTHER, leader_epoch=4))
    assert await produce(rm) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert await produce(rm, acks=-1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(rm) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Kafka checks the client's leader epoch before leadership
    assert fetch(rm, current_leader_epoch=4) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(rm, current_leader_epoch=3) == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(rm, current_leader_epoch=5) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert rm.fetch_offset_for_timestamp(TP, LATEST_TIMESTAMP, 0, -1, True).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.fetch_offset_for_timestamp(TP, LATEST_TIMESTAMP, 0, 3, True).error == ErrorCode.FENCED_LEADER_EPOCH
    assert await rm.delete_records(1000, {TP: 0}) == {TP: (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)}
    with pytest.raises(KafkaApiError) as e:
        rm.legacy_fetch_offsets_before(TP, LATEST_TIMESTAMP, 1, True)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaApiError) as e:
        rm.last_offset_for_leader_epoch(TP, 5, 0)
    assert e.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    with pytest.raises(KafkaApiError) as e:
        rm.last_offset_for_leader_epoch(TP, -1, 0)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@aio
async def test_consumer_with_client_metadata_may_read_a_follower(rm: ReplicaManager) -> None:
    lisr(rm, state(leader_epoch=0, isr=(ME,)))
    assert await produce(rm) == ErrorCode.NONE
    lisr(rm, state(leader=OTHER, leader_epoch=1, partition_epoch=1))
    [(_tp, r)] = rm.read_from_local_logs(1 << 20, 0, [(TP, FetchPartitionRequest(0, 1 << 20, 1))],
                                         fetch_only_leader=False)
    assert (r.error, r.high_watermark, r.size > 0) == (ErrorCode.NONE, 1, True)


@aio
async def test_waiting_produce_completes_when_leadership_moves(rm: ReplicaManager) -> None:
    lisr(rm, state(leader_epoch=0))                    # ISR of two: acks=all waits for the follower
    waiting = asyncio.ensure_future(produce(rm, acks=-1, timeout_ms=30_000))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    lisr(rm, state(leader=OTHER, leader_epoch=1, partition_epoch=1))
    assert await asyncio.wait_for(waiting, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_follower_of_a_dead_leader_only_gets_its_log(rm: ReplicaManager, lm: LogManager, cache: MetadataCache,
                                                     listener: Listener) -> None:
    assert lisr(rm, state(leader=7, replicas=(ME, 7), isr=(ME, 7))) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    p = rm.get_partition(TP)
    assert p is not None and lm.get_log(TP) is p.log
    assert (p.leader_id, p.leader_epoch) == (-1, -1)
    assert listener.calls == []


def test_without_a_cache_live_leaders_tell_who_is_alive(lm: LogManager) -> None:
    rm = ReplicaManager(ME, lm)
    try:
        assert lisr(rm, state(leader=OTHER), live=(OTHER,)) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
        p = rm.get_partition(TP)
        assert p is not None and p.leader_id == OTHER
        # not hosted and no cache to know better: unknown
        with pytest.raises(KafkaApiError) as e:
            rm.partition_or_error(TopicPartition("t", 9))
        assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        rm.shutdown()


@aio
async def test_partition_hosted_elsewhere_is_not_leader(rm: ReplicaManager, cache: MetadataCache) -> None:
    # "t"-0 is in the cache (led by this broker per the cache) but not hosted here
    assert await produce(rm) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(rm) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.fetch_offset_for_timestamp(TP, LATEST_TIMESTAMP, 0, -1, True).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    unknown = TopicPartition("nope", 0)
    assert await produce(rm, unknown) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(rm, tp=unknown) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@aio
async def test_list_offsets_while_the_new_leaders_hw_lags(rm: ReplicaManager) -> None:
    lisr(rm, state(leader_epoch=0))
    # ISR of two and no fetcher yet: the record is appended, the HW stays at 0
    assert await produce(rm) == ErrorCode.NONE
    # re-elected: epoch 2 starts at 1, above the HW
    lisr(rm, state(leader_epoch=2, partition_epoch=1))
    p = rm.get_partition(TP)
    assert p is not None and (p.high_watermark, p.leader_epoch_start_offset) == (0, 1)
    assert rm.fetch_offset_for_timestamp(TP, LATEST_TIMESTAMP, 0, -1, True).error == ErrorCode.OFFSET_NOT_AVAILABLE
    r = rm.fetch_offset_for_timestamp(TP, LATEST_TIMESTAMP, 0, -1, False)   # a replica: the log end
    assert (r.error, r.offset, r.leader_epoch) == (ErrorCode.NONE, 1, 2)


# -- StopReplica --------------------------------------------------------------------------------
async def stop(rm: ReplicaManager, states: dict[TopicPartition, StopReplicaPartitionState],
               controller_epoch: int = 1) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    return await rm.stop_replicas(0, controller_epoch, states)


@aio
async def test_stop_replica_with_delete_removes_partition_and_files(rm: ReplicaManager, lm: LogManager,
                                                                   listener: Listener, tmp_path: Path) -> None:
    lisr(rm, state(leader_epoch=3, isr=(ME,)))
    assert await produce(rm) == ErrorCode.NONE
    log_dir = rm.partitions[TP].log.dir
    assert await stop(rm, {TP: StopReplicaPartitionState(EPOCH_DURING_DELETE, True)}) == \
        (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert rm.get_partition(TP) is None and lm.get_log(TP) is None
    assert not log_dir.exists()
    assert [d.name for d in tmp_path.iterdir() if d.is_dir()] == []
    assert listener.calls == [("leader", TP, 3), ("follower", TP)]


@aio
async def test_stop_replica_leader_epoch_checks(rm: ReplicaManager, listener: Listener) -> None:
    lisr(rm, state(leader_epoch=3), state(leader_epoch=3, partition=1), state(leader_epoch=3, partition=2),
         state(leader_epoch=3, partition=3))
    tps = [TopicPartition("t", i) for i in range(4)]
    top, errors = await stop(rm, {tps[0]: StopReplicaPartitionState(2, True),
                                  tps[1]: StopReplicaPartitionState(3, True),
                                  tps[2]: StopReplicaPartitionState(NO_EPOCH, True),
                                  tps[3]: StopReplicaPartitionState(4, False)})
    assert top == ErrorCode.NONE
    assert errors == {tps[0]: ErrorCode.FENCED_LEADER_EPOCH, tps[1]: ErrorCode.NONE, tps[2]: ErrorCode.NONE,
                      tps[3]: ErrorCode.NONE}
    assert sorted(rm.partitions) == [tps[0], tps[3]]      # stopped without delete: still hosted
    assert rm.partitions[tps[3]].is_leader and rm.partitions[tps[3]].leader_epoch == 3
    assert listener.calls[4:] == [("follower", tps[1]), ("follower", tps[2])]


@aio
async def test_stop_replica_stale_controller_epoch(rm: ReplicaManager) -> None:
    lisr(rm, state(), controller_epoch=3)
    assert await stop(rm, {TP: StopReplicaPartitionState(EPOCH_DURING_DELETE, True)}, controller_epoch=2) == \
        (ErrorCode.STALE_CONTROLLER_EPOCH, {})
    assert rm.get_partition(TP) is not None
    # a newer epoch is taken and remembered
    assert await stop(rm, {TP: StopReplicaPartitionState(0, False)}, controller_epoch=4) == \
        (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert rm.controller_epoch == 4


@aio
async def test_stop_replica_deletes_a_log_not_hosted(rm: ReplicaManager, lm: LogManager) -> None:
    # the topic was deleted while this broker was down: its log is on disk, no partition
    lg = lm.get_or_create_log("t", 1, CONFIG, topic_id=TOPIC_ID)
    other = TopicPartition("t", 1)
    assert await stop(rm, {other: StopReplicaPartitionState(EPOCH_DURING_DELETE, True),
                           TopicPartition("gone", 0): StopReplicaPartitionState(EPOCH_DURING_DELETE, True)}) == \
        (ErrorCode.NONE, {other: ErrorCode.NONE, TopicPartition("gone", 0): ErrorCode.NONE})
    assert lm.get_log(other) is None and not lg.dir.exists()


@aio
async def test_stop_replica_completes_waiting_produce(rm: ReplicaManager) -> None:
    lisr(rm, state(leader_epoch=0))
    waiting = asyncio.ensure_future(produce(rm, acks=-1, timeout_ms=30_000))
    await asyncio.sleep(0.01)
    await stop(rm, {TP: StopReplicaPartitionState(EPOCH_DURING_DELETE, True)})
    # the cache still has the partition: the producer is sent to refresh its metadata
    assert await asyncio.wait_for(waiting, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- broker epoch -------------------------------------------------------------------------------
def test_broker_epoch_fencing() -> None:
    epoch = BrokerEpoch()
    assert not epoch.is_stale(0) and not epoch.is_stale(-1)
    epoch.set(100)
    assert (epoch.is_stale(-1), epoch.is_stale(99), epoch.is_stale(100), epoch.is_stale(101)) == \
        (False, True, False, False)
    assert not epoch.is_stale(-1, is_kraft_controller=True)
    with pytest.raises(RuntimeError):
        epoch.is_stale(100, is_kraft_controller=True)


# -- high-watermark checkpoints -----------------------------------------------------------------
def test_high_watermark_survives_a_restart(tmp_path: Path, cache: MetadataCache) -> None:
    lm = LogManager([tmp_path], CONFIG)
    lm.startup()
    rm = ReplicaManager(ME, lm, cache)
    lisr(rm, state(leader_epoch=0, isr=(ME,)), state(leader_epoch=0, partition=1))

    async def main() -> None:
        assert await produce(rm) == ErrorCode.NONE
        assert await produce(rm) == ErrorCode.NONE
        assert await produce(rm, TopicPartition("t", 1)) == ErrorCode.NONE   # ISR of two: HW stays 0
        await rm.checkpoint_high_watermarks()
    asyncio.run(main())
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 2\nt 1 0\n"
    rm.shutdown()
    lm.shutdown()

    lm = LogManager([tmp_path], CONFIG)
    lm.startup()
    rm = ReplicaManager(ME, lm, cache)
    try:
        # a leader whose ISR still has the other replica starts from the checkpointed HW, not 0
        lisr(rm, state(leader_epoch=1), state(leader=OTHER, leader_epoch=1, partition=1))
        p0, p1 = rm.get_partition(TP), rm.get_partition(TopicPartition("t", 1))
        assert p0 is not None and (p0.high_watermark, p0.log_end_offset) == (2, 2)
        assert p1 is not None and (p1.high_watermark, p1.log_end_offset, p1.is_leader) == (0, 1, False)
    finally:
        rm.shutdown()
        lm.shutdown()


@contextlib.contextmanager
def managers(log_dir: Path, cache: MetadataCache) -> Iterator[tuple[LogManager, ReplicaManager]]:
    """A broker's log and replica managers over ``log_dir``, shut down at the end."""
    lm = LogManager([log_dir], CONFIG)
    lm.startup()
    rm = ReplicaManager(ME, lm, cache)
    try:
        yield lm, rm
    finally:
        rm.shutdown()
        lm.shutdown()


def test_restart_of_many_leaders_reads_their_epochs_and_sums_up_the_lines(
        tmp_path: Path, cache: MetadataCache, caplog: pytest.LogCaptureFixture) -> None:
    """More leaders than LEADER_EPOCH_LINES_MAX in one LeaderAndIsr (a restart): their
    leader-epoch checkpoints, read together, keep the epochs from before the restart; one INFO
    line says how many, each partition's "starts at leader epoch" line is at DEBUG."""
    n = LEADER_EPOCH_LINES_MAX + 1
    with managers(tmp_path, cache) as (_lm, rm):
        lisr(rm, *(state(leader_epoch=0, isr=(ME,), partition=i) for i in range(n)))
        assert asyncio.run(produce(rm, TopicPartition("t", 3))) == ErrorCode.NONE

    with managers(tmp_path, cache) as (_lm, rm):
        with caplog.at_level(logging.DEBUG, logger="kafkalite.replica"):
            errors = lisr(rm, *(state(leader_epoch=1, isr=(ME,), partition=i, partition_epoch=1)
                                for i in range(n)))
        assert errors == (ErrorCode.NONE, {TopicPartition("t", i): ErrorCode.NONE for i in range(n)})
        p3 = rm.get_partition(TopicPartition("t", 3))
        assert p3 is not None and p3.leader_epoch_cache.entries == [(0, 0), (1, 1)]
        p0 = rm.get_partition(TP)
        # an empty log: epoch 1 starts where epoch 0 did and replaces it (Kafka's assign)
        assert p0 is not None and p0.leader_epoch_cache.entries == [(1, 0)]
        starts = [r for r in caplog.records if "starts at leader epoch 1" in r.getMessage()]
        assert len(starts) == n and {r.levelno for r in starts} == {logging.DEBUG}
        summary = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO
                   and "LeaderAndIsr" in r.getMessage()]
        assert summary == [f"Applied the leader state of {n} partitions from the LeaderAndIsr request of "
                           "controller 0 epoch 1 (each new leader epoch's line at DEBUG)"]


def test_a_few_leaders_log_each_new_epoch_at_info(rm: ReplicaManager, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkalite.replica"):
        lisr(rm, state(leader_epoch=2, partition_epoch=4))
    assert [(r.levelno, r.getMessage()) for r in caplog.records if "starts at leader epoch" in r.getMessage()] == [
        (logging.INFO, "Leader t-0 starts at leader epoch 2 from offset 0 with partition epoch 4, high watermark 0, "
                       "ISR [1, 2]. Previous leader None and previous leader epoch was -1.")]
