"""The leader side of replication in Partition, in process with a real log in a temp dir: the
follower positions a leader records from fetches, the high watermark over the maximal ISR, ISR
expansion and shrinking proposed to the controller and applied only when accepted (Kafka 3.9's
Partition: updateFollowerFetchState, maybeExpandIsr, maybeShrinkIsr, maybeIncrementLeaderHW,
handleAlterPartitionUpdate / handleAlterPartitionError), and what acks=all sees.

The controller channel is a recording stand-in for the AlterPartitionManager (its network side is
tested against a real controller in tests/cluster): each proposal's future is answered by the test."""
from __future__ import annotations

import asyncio
import functools
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.log_config import LogConfig
from kafkalite.log.log import Log
from kafkalite.log.record_batch import build_batch
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.alter_partition_manager import LeaderAndIsr
from kafkalite.replica.partition import Partition, ReplicationContext

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID(int=7)
LEADER, F1, F2 = 1, 2, 3
LAG_MS = 10_000


class ProposalRecorder:
    """Stands in for AlterPartitionManager.submit: keeps (LeaderAndIsr, future) per proposal."""

    def __init__(self) -> None:
        self.proposals: list[tuple[LeaderAndIsr, asyncio.Future[LeaderAndIsr]]] = []

    def submit(self, tp: TopicPartition, topic_id: uuid.UUID, leader_and_isr: LeaderAndIsr,
               controller_epoch: int) -> "asyncio.Future[LeaderAndIsr]":
        future: asyncio.Future[LeaderAndIsr] = asyncio.get_running_loop().create_future()
        self.proposals.append((leader_and_isr, future))
        return future


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def run(test: Callable[..., Any]) -> Callable[..., None]:
    """Run an async test on its own event loop (the project runs without an asyncio plugin)."""
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))
    return wrapper


def make_partition(tmp_path: Path, min_isr: int = 1, alive: Callable[[int], bool] = lambda b: True
                   ) -> tuple[Partition, ProposalRecorder, Clock, list[TopicPartition]]:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_index_bytes=64 * 1024, min_insync_replicas=min_isr))
    recorder, clock, woken = ProposalRecorder(), Clock(), []
    ctx = ReplicationContext(replica_lag_time_max_ms=LAG_MS, alter_partition_manager=recorder,  # type: ignore[arg-type]
                             is_broker_alive=alive, complete_delayed_requests=woken.append, now_ms=clock)
    p = Partition(TP, TOPIC_ID, log, LEADER, ctx)
    return p, recorder, clock, woken


def append(p: Partition, n: int, clock: Clock) -> None:
    p.append_records_to_leader(build_batch([(None, b"v%d" % i, clock.ms) for i in range(n)]), 1, clock.ms)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@run
async def test_hw_is_the_minimum_leo_over_the_isr_and_waits_for_every_member(tmp_path: Path) -> None:
    p, recorder, clock, woken = make_partition(tmp_path)
    p.make_leader(1, [LEADER, F1, F2], [LEADER, F1, F2], partition_epoch=0, controller_epoch=1)
    append(p, 5, clock)
    assert (p.log_end_offset, p.high_watermark) == (5, 0)
    assert p.update_follower_fetch_state(F1, 5, 0, clock.ms, 5)
    assert p.high_watermark == 0          # F2 (in the ISR) has nothing yet
    # (the first fetch told F1's log start: a waiting DeleteRecords is checked)
    assert woken == [TP]
    assert p.update_follower_fetch_state(F2, 3, 0, clock.ms, 5)
    assert p.high_watermark == 3 and woken == [TP, TP]
    assert p.update_follower_fetch_state(F2, 5, 0, clock.ms, 5)
    assert p.high_watermark == 5 and woken == [TP, TP, TP]
    assert p.low_watermark() == 0
    # a follower's fetch offset going back (it truncated) never moves the HW back
    assert p.update_follower_fetch_state(F2, 2, 0, clock.ms, 5)
    assert p.high_watermark == 5
    assert recorder.proposals == []       # everyone already in the ISR
    # a broker that is not a replica is not recorded
    assert not p.update_follower_fetch_state(9, 5, 0, clock.ms, 5)


@run
async def test_expansion_is_proposed_when_a_follower_reaches_the_hw_of_this_epoch(tmp_path: Path) -> None:
    p, recorder, clock, woken = make_partition(tmp_path)
    p.make_leader(1, [LEADER, F1, F2], [LEADER, F1], partition_epoch=4, controller_epoch=1)
    append(p, 4, clock)
    p.update_follower_fetch_state(F1, 4, 0, clock.ms, 4)
    assert p.high_watermark == 4
    p.update_follower_fetch_state(F2, 2, 0, clock.ms, 4)     # below the HW: not in sync yet
    assert recorder.proposals == []
    p.update_follower_fetch_state(F2, 4, 0, clock.ms, 4)
    assert len(recorder.proposals) == 1
    sent, future = recorder.proposals[0]
    assert sent == LeaderAndIsr(LEADER, 1, (LEADER, F1, F2), 0, 4)
    # pending: counted in the maximal ISR (the HW waits for it), not yet in the committed ISR
    assert p.isr == {LEADER, F1} and p.maximal_isr == {LEADER, F1, F2}
    append(p, 2, clock)
    p.update_follower_fetch_state(F1, 6, 0, clock.ms, 6)
    assert p.high_watermark == 4          # F2 holds it back as a pending member
    # one change in flight at a time
    p.update_follower_fetch_state(F2, 5, 0, clock.ms, 6)
    assert len(recorder.proposals) == 1
    future.set_result(LeaderAndIsr(LEADER, 1, (LEADER, F1, F2), 0, 5))
    await settle()
    assert p.isr == {LEADER, F1, F2} and p.pending_isr_change is None and p.partition_epoch == 5


@run
async def test_a_follower_below_the_epoch_start_cannot_join(tmp_path: Path) -> None:
    p, recorder, clock, _ = make_partition(tmp_path)
    append_epoch0 = build_batch([(None, b"old", 0)])
    p.make_leader(0, [LEADER, F1], [LEADER], partition_epoch=0)
    p.append_records_to_leader(append_epoch0, 1, clock.ms)
    assert p.high_watermark == 1
    p.make_leader(1, [LEADER, F1], [LEADER], partition_epoch=1)   # a new epoch starts at offset 1
    # F1 at offset 1 reaches both the HW and the epoch start: it joins
    p.update_follower_fetch_state(F1, 0, 0, clock.ms, 1)
    assert recorder.proposals == []
    p.update_follower_fetch_state(F1, 1, 0, clock.ms, 1)
    assert [sent.isr for sent, _f in recorder.proposals] == [(LEADER, F1)]


@run
async def test_shrink_after_the_lag_time_applies_only_when_accepted(tmp_path: Path) -> None:
    p, recorder, clock, woken = make_partition(tmp_path, min_isr=2)
    p.make_leader(3, [LEADER, F1, F2], [LEADER, F1, F2], partition_epoch=7, controller_epoch=2)
    append(p, 3, clock)
    p.update_follower_fetch_state(F1, 3, 0, clock.ms, 3)
    clock.ms += LAG_MS // 2
    assert not p.maybe_shrink_isr()       # nobody lagging for longer than the limit yet
    p.update_follower_fetch_state(F1, 3, 0, clock.ms, 3)   # F1 keeps fetching; F2 is silent
    clock.ms += LAG_MS // 2 + 1
    assert p.out_of_sync_replicas(clock.ms) == {F2}
    assert p.maybe_shrink_isr()
    sent, future = recorder.proposals[0]
    assert sent == LeaderAndIsr(LEADER, 3, (LEADER, F1), 0, 7)
    # a pending shrink drops nobody: the HW still waits for F2
    assert p.isr == {LEADER, F1, F2} and p.maximal_isr == {LEADER, F1, F2} and p.high_watermark == 0
    assert not p.maybe_shrink_isr()       # in flight: no second proposal
    future.set_result(LeaderAndIsr(LEADER, 3, (LEADER, F1), 0, 8))
    await settle()
    assert p.isr == {LEADER, F1} and p.partition_epoch == 8
    assert p.high_watermark == 3 and TP in woken
    # acks=all needs min.insync.replicas=2: met with {LEADER, F1}
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.NONE)


@run
async def test_under_min_isr_the_hw_stays_and_acks_all_is_refused(tmp_path: Path) -> None:
    p, recorder, clock, _ = make_partition(tmp_path, min_isr=2)
    p.make_leader(1, [LEADER, F1, F2], [LEADER], partition_epoch=0)
    append(p, 2, clock)
    assert p.high_watermark == 0          # KAFKA-15583: no HW advance under min ISR
    with pytest.raises(KafkaApiError) as e:
        p.append_records_to_leader(build_batch([(None, b"x", 0)]), -1, clock.ms)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 2          # nothing appended


@run
async def test_rejected_and_stale_answers(tmp_path: Path) -> None:
    p, recorder, clock, _ = make_partition(tmp_path)
    p.make_leader(1, [LEADER, F1, F2], [LEADER, F1, F2], partition_epoch=0)
    clock.ms += LAG_MS + 1
    assert p.maybe_shrink_isr()
    _sent, future = recorder.proposals[-1]
    # OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA: back to the committed state, may propose again
    future.set_exception(KafkaApiError(ErrorCode.INELIGIBLE_REPLICA))
    await settle()
    assert p.pending_isr_change is None and p.isr == {LEADER, F1, F2}
    assert p.maybe_shrink_isr()
    _sent, future = recorder.proposals[-1]
    # INVALID_UPDATE_VERSION: stays pending until the controller's LeaderAndIsr arrives
    future.set_exception(KafkaApiError(ErrorCode.INVALID_UPDATE_VERSION))
    await settle()
    assert p.pending_isr_change is not None and not p.maybe_shrink_isr()
    p.make_leader(2, [LEADER, F1, F2], [LEADER, F1], partition_epoch=3)
    assert p.pending_isr_change is None and p.isr == {LEADER, F1}
    # an unexpected error is retried with the same proposal
    clock.ms += LAG_MS + 1
    assert p.maybe_shrink_isr()
    count = len(recorder.proposals)
    recorder.proposals[-1][1].set_exception(KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR))
    await settle()
    assert len(recorder.proposals) == count + 1
    assert recorder.proposals[-1][0] == recorder.proposals[-2][0]
    # an answer for an older leader epoch is ignored (stays pending)
    recorder.proposals[-1][1].set_result(LeaderAndIsr(LEADER, 1, (LEADER,), 0, 9))
    await settle()
    assert p.isr == {LEADER, F1} and p.pending_isr_change is not None


@run
async def test_a_dead_broker_is_not_added(tmp_path: Path) -> None:
    p, recorder, clock, _ = make_partition(tmp_path, alive=lambda b: b != F2)
    p.make_leader(1, [LEADER, F1, F2], [LEADER, F1], partition_epoch=0)
    p.update_follower_fetch_state(F1, 0, 0, clock.ms, 0)
    p.update_follower_fetch_state(F2, 0, 0, clock.ms, 0)
    assert recorder.proposals == []


@run
async def test_a_leader_and_isr_that_shrinks_the_isr_moves_the_hw_and_wakes_waiting_produces(tmp_path: Path) -> None:
    p, recorder, clock, woken = make_partition(tmp_path)
    p.make_leader(1, [LEADER, F1, F2], [LEADER, F1, F2], partition_epoch=0)
    append(p, 2, clock)
    p.update_follower_fetch_state(F1, 2, 0, clock.ms, 2)
    assert p.high_watermark == 0 and p.check_enough_replicas_reach_offset(2) == (False, ErrorCode.NONE)
    woken.clear()
    # the controller took dead F2 out of the ISR (epoch + 1): the HW moves to F1's end at once
    p.make_leader(2, [LEADER, F1, F2], [LEADER, F1], partition_epoch=1)
    assert p.high_watermark == 2 and woken == [TP]
    assert p.check_enough_replicas_reach_offset(2) == (True, ErrorCode.NONE)
