"""The follower fetcher's pure decisions (kafkalite.replica.fetcher.fetch_state): Kafka's
getOffsetTruncationState, fetchOffsetAndTruncate's choice, partitionFetchState, getFetcherId; the
follower section of Partition over a real log (appends keep the leader's epochs, truncation, the
leader's HW and log start); ReplicaFetcherManager's assignment of partitions to fetchers."""
from __future__ import annotations

import asyncio
import socket
import uuid
from pathlib import Path
from typing import Optional

import pytest

from kafkalite.config.log_config import LogConfig
from kafkalite.config.server_config import KafkaConfig
from kafkalite.log.errors import OffsetOutOfRangeError, UnexpectedAppendOffsetError
from kafkalite.log.leader_epoch_cache import LeaderEpochCache
from kafkalite.log.log import Log
from kafkalite.log.record_batch import build_batch
from kafkalite.replica.fetcher.fetch_state import (EpochEndOffset, InitialFetchState, OffsetTruncationState,
                                                   PartitionFetchState, ReplicaFetchPhase, fetcher_id,
                                                   initial_partition_fetch_state, java_string_hash,
                                                   offset_truncation_state, out_of_range_fetch_offset)
from kafkalite.replica.fetcher.replica_fetcher_manager import ReplicaFetcherManager
from kafkalite.replica.partition import Partition, TopicPartition

TID = uuid.UUID("11111111-2222-3333-4444-555555555555")
T0 = 1_700_000_000_000


def follower_ends(entries: list[tuple[int, int]], log_end: int):
    """The follower's end_offset_for_epoch over a real LeaderEpochCache with `entries`,
    None when it has no answer (Kafka's UnifiedLog.endOffsetForEpoch)."""
    cache = LeaderEpochCache(None, entries)

    def ends(epoch: int) -> Optional[tuple[int, int]]:
        e, o = cache.end_offset_for(epoch, log_end)
        return None if o == -1 else (e, o)
    return ends


# -- getOffsetTruncationState -------------------------------------------------------------------
def test_truncation_leader_without_end_offset_uses_fetch_offset() -> None:
    ends = follower_ends([(0, 0), (2, 10)], 20)
    assert offset_truncation_state(EpochEndOffset(3, -1), 7, 20, ends) == OffsetTruncationState(7, True)


def test_truncation_leader_without_epoch_caps_at_our_end() -> None:
    ends = follower_ends([(0, 0)], 20)
    assert offset_truncation_state(EpochEndOffset(-1, 25), 20, 20, ends) == OffsetTruncationState(20, True)
    assert offset_truncation_state(EpochEndOffset(-1, 12), 20, 20, ends) == OffsetTruncationState(12, True)


def test_truncation_same_epoch_takes_the_smaller_end() -> None:
    # follower: epoch 1 from 0, epoch 2 from 10 to its end 20; the leader's epoch 2 ended at 15
    ends = follower_ends([(1, 0), (2, 10)], 20)
    assert offset_truncation_state(EpochEndOffset(2, 15), 20, 20, ends) == OffsetTruncationState(15, True)
    # the leader's epoch 1 ended at 12 but ours at 10 (epoch 2 starts there)
    assert offset_truncation_state(EpochEndOffset(1, 12), 20, 20, ends) == OffsetTruncationState(10, True)
    # never past our own end
    assert offset_truncation_state(EpochEndOffset(2, 30), 20, 20, ends) == OffsetTruncationState(20, True)


def test_truncation_epoch_unknown_to_follower_is_intermediate() -> None:
    # follower has epochs 1 and 3; the leader answers with epoch 2 (ended at 14 on its side):
    # truncate to where our epoch 1 ends (epoch 3's start, 10), not completed
    ends = follower_ends([(1, 0), (3, 10)], 20)
    assert offset_truncation_state(EpochEndOffset(2, 14), 20, 20, ends) == OffsetTruncationState(10, False)


def test_truncation_epoch_below_every_tracked_epoch() -> None:
    # Kafka's endOffsetFor answers (requested, first start) for an epoch older than all: the
    # follower's end for it is its first epoch's start offset
    ends = follower_ends([(5, 8)], 20)
    assert offset_truncation_state(EpochEndOffset(3, 12), 20, 20, ends) == OffsetTruncationState(8, True)
    # nothing tracked at all: the leader's offset, capped at our end
    none = follower_ends([], 20)
    assert offset_truncation_state(EpochEndOffset(3, 12), 20, 20, none) == OffsetTruncationState(12, True)


def test_truncation_leader_epoch_newer_than_ours() -> None:
    # ours ends at epoch 4; the leader reports epoch 6 (newer than any we know): cache answers
    # undefined, so the leader's offset is used, capped at our end
    ends = follower_ends([(2, 0), (4, 5)], 9)
    assert offset_truncation_state(EpochEndOffset(6, 7), 9, 9, ends) == OffsetTruncationState(7, True)


def test_truncation_state_prints_as_kafka() -> None:
    assert str(OffsetTruncationState(15, True)) == "TruncationState(offset=15, completed=true)"
    assert str(EpochEndOffset(2, 15)) == "EpochEndOffset(errorCode=0, partition=-1, leaderEpoch=2, endOffset=15)"


# -- fetchOffsetAndTruncate ---------------------------------------------------------------------
def test_out_of_range_positions() -> None:
    # the leader is behind us (unclean election): truncate to its end
    assert out_of_range_fetch_offset(50, 40, None) == (40, "truncate")
    # our whole log is below the leader's start: start over there
    assert out_of_range_fetch_offset(10, 100, 30) == (30, "truncate_fully")
    # otherwise fetch on from our end
    assert out_of_range_fetch_offset(40, 100, 30) == (40, "none")
    assert out_of_range_fetch_offset(30, 100, 30) == (30, "none")


# -- partitionFetchState ------------------------------------------------------------------------
def test_initial_state_with_and_without_epoch() -> None:
    with_epoch = initial_partition_fetch_state(InitialFetchState(TID, 2, 5, 100, 4), None)
    assert with_epoch == PartitionFetchState(TID, 100, 5, ReplicaFetchPhase.FETCHING, 4)
    without = initial_partition_fetch_state(InitialFetchState(TID, 2, 5, 100, None), None)
    assert without == PartitionFetchState(TID, 100, 5, ReplicaFetchPhase.TRUNCATING, None)
    assert initial_partition_fetch_state(InitialFetchState(TID, 2, 5, -1, None), None) is None


def test_initial_state_keeps_the_current_one_at_the_same_epoch() -> None:
    current = PartitionFetchState(TID, 140, 5, ReplicaFetchPhase.FETCHING, 5, delayed_until_ms=9, lag=3)
    assert initial_partition_fetch_state(InitialFetchState(TID, 2, 5, 100, 4), current) is current
    newer = initial_partition_fetch_state(InitialFetchState(TID, 2, 6, 140, 5), current)
    assert newer == PartitionFetchState(TID, 140, 6, ReplicaFetchPhase.FETCHING, 5)


def test_delay_is_not_extended_and_gates_fetching() -> None:
    s = PartitionFetchState(TID, 0, 1, ReplicaFetchPhase.FETCHING, 1)
    assert s.is_ready_for_fetch(1000)
    d = s.delayed(2000)
    assert (d.is_ready_for_fetch(1999), d.is_ready_for_fetch(2000)) == (False, True)
    assert d.delayed(1500) is d
    assert d.delayed(2500).delayed_until_ms == 2500
    t = PartitionFetchState(TID, 0, 1, ReplicaFetchPhase.TRUNCATING, None)
    assert (t.is_truncating(0), t.is_ready_for_fetch(0), t.delayed(10).is_truncating(5)) == (True, False, False)


# -- getFetcherId -------------------------------------------------------------------------------
def test_java_string_hash() -> None:
    # values printed by java.lang.String.hashCode (OpenJDK)
    assert java_string_hash("test") == 3556498
    assert java_string_hash("__consumer_offsets") == -970371369
    assert java_string_hash("topic-\u00e9\u4e2d") == -957316158
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("orders.v2") == -390712795


@pytest.mark.parametrize("topic, ids", [
    # Utils.abs(31 * topic.hashCode + p) % 3 for p = 0..4, printed by the JVM
    ("test", [1, 2, 0, 1, 2]),
    ("__consumer_offsets", [2, 1, 0, 2, 1]),
    ("topic-\u00e9\u4e2d", [1, 2, 0, 1, 2]),
    ("polygenelubricants", [0, 1, 0, 2, 1]),   # Integer.MIN_VALUE at p = 0: Utils.abs gives 0
    ("orders.v2", [2, 0, 1, 2, 0]),
])
def test_fetcher_id(topic: str, ids: list[int]) -> None:
    assert [fetcher_id(topic, p, 3) for p in range(5)] == ids
    assert {fetcher_id(topic, p, 1) for p in range(5)} == {0}


# -- Partition, follower section ----------------------------------------------------------------
@pytest.fixture
def follower(tmp_path: Path):
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=T0)
    p = Partition(TopicPartition("t", 0), TID, log, 1)
    p.make_follower(2, 3, [2, 1], [2, 1])
    yield p
    log.close()


def batch(base: int, n: int, epoch: int) -> bytes:
    return build_batch([(b"k", b"v%d" % i, T0) for i in range(n)], base_offset=base, partition_leader_epoch=epoch)


def test_follower_append_keeps_epochs_and_fills_the_cache(follower: Partition) -> None:
    info = follower.append_records_to_follower(batch(0, 3, 1) + batch(3, 2, 1) + batch(5, 4, 3))
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 8, 9)
    assert follower.leader_epoch_cache.entries == [(1, 0), (3, 5)]
    assert follower.latest_epoch() == 3
    assert follower.end_offset_for_epoch(1) == (1, 5)
    assert follower.end_offset_for_epoch(2) == (1, 5)
    assert follower.end_offset_for_epoch(3) == (3, 9)
    assert follower.high_watermark == 0      # the leader's HW moves it, not the append
    assert [h.partition_leader_epoch for h in follower.log.iter_batch_headers()] == [1, 1, 3]
    # the checkpoint on disk says the same
    assert LeaderEpochCache.load(follower.log.dir).entries == [(1, 0), (3, 5)]


def test_follower_high_watermark_follows_the_leader_clamped(follower: Partition) -> None:
    follower.append_records_to_follower(batch(0, 10, 1))
    assert follower.update_follower_high_watermark(6) is True
    assert follower.high_watermark == 6
    assert follower.update_follower_high_watermark(6) is False
    assert follower.update_follower_high_watermark(50) is True and follower.high_watermark == 10   # log end
    assert follower.update_follower_high_watermark(4) is True and follower.high_watermark == 4     # may go back
    follower.update_follower_log_start_offset(3)
    assert follower.log_start_offset == 3
    assert follower.update_follower_high_watermark(1) is True and follower.high_watermark == 3     # log start


def test_follower_log_start_follows_the_leader_up_to_the_hw(follower: Partition) -> None:
    follower.append_records_to_follower(batch(0, 5, 1) + batch(5, 5, 2))
    follower.update_follower_high_watermark(8)
    assert follower.update_follower_log_start_offset(6) is True
    assert follower.log_start_offset == 6
    assert follower.leader_epoch_cache.entries == [(2, 6)]
    assert follower.update_follower_log_start_offset(4) is False     # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        follower.update_follower_log_start_offset(9)                 # past the HW
    assert follower.log_start_offset == 6


def test_follower_truncate_to(follower: Partition) -> None:
    follower.append_records_to_follower(batch(0, 5, 1) + batch(5, 5, 2) + batch(10, 5, 4))
    follower.update_follower_high_watermark(12)
    follower.truncate_to(10)
    assert follower.log_end_offset == 10
    assert follower.leader_epoch_cache.entries == [(1, 0), (2, 5)]
    assert follower.high_watermark == 10
    follower.truncate_to(10)                                        # at the end: nothing changes
    follower.truncate_to(99)
    assert (follower.log_end_offset, follower.leader_epoch_cache.entries) == (10, [(1, 0), (2, 5)])
    follower.truncate_to(5)
    assert (follower.log_end_offset, follower.leader_epoch_cache.entries, follower.high_watermark) == \
        (5, [(1, 0)], 5)
    assert LeaderEpochCache.load(follower.log.dir).entries == [(1, 0)]
    # appending again from there works as after a real truncation
    follower.append_records_to_follower(batch(5, 2, 5))
    assert (follower.log_end_offset, follower.leader_epoch_cache.entries) == (7, [(1, 0), (5, 5)])


def test_follower_truncate_fully_and_start_at(follower: Partition) -> None:
    follower.append_records_to_follower(batch(0, 5, 1))
    follower.update_follower_high_watermark(5)
    follower.truncate_fully_and_start_at(40)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (40, 40, 40)
    assert follower.leader_epoch_cache.entries == []
    assert follower.latest_epoch() is None
    assert follower.end_offset_for_epoch(1) == (-1, -1)
    follower.append_records_to_follower(batch(40, 3, 6))
    assert (follower.log_end_offset, follower.leader_epoch_cache.entries) == (43, [(6, 40)])


def test_follower_empty_log_restarts_at_the_base_of_a_batch_across_its_start(follower: Partition) -> None:
    # DeleteRecords on the leader put its log start (120) inside a batch 50..149; this replica
    # emptied its log to start at 120 and gets that batch whole
    follower.truncate_fully_and_start_at(120)
    info = follower.append_records_to_follower(batch(50, 100, 2))
    assert (info.first_offset, follower.log_start_offset, follower.log_end_offset) == (50, 50, 150)
    assert follower.leader_epoch_cache.entries == [(2, 50)]
    follower.update_follower_high_watermark(150)
    follower.update_follower_log_start_offset(120)
    assert (follower.log_start_offset, follower.high_watermark) == (120, 150)
    assert follower.leader_epoch_cache.entries == [(2, 120)]
    # a log that is not empty refuses a batch below its end
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_records_to_follower(batch(140, 20, 2))
    assert follower.log_end_offset == 150


# -- ReplicaFetcherManager ----------------------------------------------------------------------
class FakeReplicaManager:
    """The replica manager's face towards the fetchers: partitions by tp (none here, so a running
    fetcher drops what it would fetch; these tests look at the assignment only)."""

    def get_partition(self, tp: TopicPartition) -> None:
        return None


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(coro) -> None:
    asyncio.run(coro)


def initial(leader: int, epoch: int = 1) -> InitialFetchState:
    return InitialFetchState(TID, leader, epoch, 0, 0)


def test_manager_assigns_by_leader_and_fetcher_id() -> None:
    async def go() -> None:
        endpoints = {2: ("127.0.0.1", closed_port()), 3: ("127.0.0.1", closed_port())}
        m = ReplicaFetcherManager(1, KafkaConfig(**{"num.replica.fetchers": 3}), FakeReplicaManager(),
                                  endpoints.get, lambda: 7)
        tps = [TopicPartition("test", p) for p in range(5)]
        # with no partition object behind them, running fetchers would drop the partitions at once:
        # look at the assignment before the loop runs
        m.add_fetcher_for_partitions({tp: initial(2) for tp in tps})
        assert {k: sorted(f.partitions) for k, f in m.fetchers.items()} == {
            (2, 0): [tps[2]], (2, 1): [tps[0], tps[3]], (2, 2): [tps[1], tps[4]]}
        f = m.fetchers[(2, 1)]
        assert (f.source_endpoint, f.name) == (endpoints[2], "ReplicaFetcherThread-1-2")
        # the leader of test-0 moves to broker 3: it leaves broker 2's fetcher
        m.add_fetcher_for_partitions({tps[0]: initial(3, 2)})
        assert sorted(m.fetchers[(2, 1)].partitions) == [tps[3]]
        assert m.get_fetcher(tps[0]) is m.fetchers[(3, 1)]
        assert m.fetch_state(tps[0]) == PartitionFetchState(TID, 0, 2, ReplicaFetchPhase.FETCHING, 0)
        m.remove_fetcher_for_partitions([tps[3]])
        m.shutdown_idle_fetchers()
        assert sorted(m.fetchers) == [(2, 0), (2, 2), (3, 1)]
        assert f.partition_count == 0
        fetchers = list(m.fetchers.values())
        await m.shutdown()
        assert m.fetchers == {} and not any(x.running for x in fetchers + [f])
    run(go())


def test_manager_keeps_partitions_of_unknown_leaders_pending() -> None:
    async def go() -> None:
        endpoints: dict[int, tuple[str, int]] = {}
        m = ReplicaFetcherManager(1, KafkaConfig(), FakeReplicaManager(), endpoints.get, lambda: 7)
        tp = TopicPartition("t", 0)
        m.add_fetcher_for_partitions({tp: initial(2)})
        assert (m.fetchers, m.pending) == ({}, {tp: initial(2)})
        m.retry_pending()
        assert m.fetchers == {}
        endpoints[2] = ("127.0.0.1", closed_port())
        m.retry_pending()
        assert (m.pending, sorted(m.fetchers[(2, 0)].partitions)) == ({}, [tp])
        # a removal also forgets a pending partition
        endpoints.clear()
        m.add_fetcher_for_partitions({tp: initial(3, 2)})
        assert m.pending == {tp: initial(3, 2)} and m.get_fetcher(tp) is None
        m.remove_fetcher_for_partitions([tp])
        assert m.pending == {}
        await m.shutdown()
    run(go())


def test_manager_replaces_a_fetcher_whose_leader_moved_address() -> None:
    async def go() -> None:
        endpoints = {2: ("127.0.0.1", closed_port())}
        m = ReplicaFetcherManager(1, KafkaConfig(), FakeReplicaManager(), endpoints.get, lambda: 7)
        a, b = TopicPartition("a", 0), TopicPartition("b", 0)
        m.add_fetcher_for_partitions({a: initial(2), b: initial(2)})
        old = m.fetchers[(2, 0)]
        endpoints[2] = ("127.0.0.1", closed_port())
        m.add_fetcher_for_partitions({a: initial(2, 3)})
        new = m.fetchers[(2, 0)]
        assert new is not old and new.source_endpoint == endpoints[2]
        # b's state moves over as it was; a starts at its new epoch
        assert (new.fetch_state(a).current_leader_epoch, new.fetch_state(b).current_leader_epoch) == (3, 1)
        await m.shutdown()
        assert not old.running and not new.running
    run(go())
