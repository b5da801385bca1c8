"""DelayedFetch by position (Kafka's DelayedFetch.tryComplete with LogOffsetMetadata): the pure
decision per partition, the positions the log and the partition keep, and waiting fetches in
process (LogManager + ReplicaManager) completing exactly when their bytes are there."""
from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.config.log_config import LogConfig
from kafkalite.log.errors import OffsetOutOfRangeError
from kafkalite.log.log import ORIGIN_COORDINATOR, Log
from kafkalite.log.log_manager import LogManager
from kafkalite.log.log_offset_metadata import UNKNOWN_OFFSET_METADATA, LogOffsetMetadata
from kafkalite.log.record_batch import build_batch, build_end_txn_marker, split_batches
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.delayed_fetch import bytes_available
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.replica.results import FetchPartitionRequest, FetchPartitionResult

TP = TopicPartition("t", 0)
CONFIG = LogConfig(segment_index_bytes=64 * 1024)
NOW = int(time.time() * 1000)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def data(n: int, *, tag: str = "v", pid: int = -1, txn: bool = False, seq: int = -1) -> bytes:
    return build_batch([(None, f"{tag}{i}".encode(), NOW + i) for i in range(n)], producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, transactional=txn)


def md(offset: int, base: int, pos: int) -> LogOffsetMetadata:
    return LogOffsetMetadata(offset, base, pos)


# -- LogOffsetMetadata and the per-partition decision ------------------------------------------

def test_log_offset_metadata_comparisons() -> None:
    a, b, c = md(5, 0, 100), md(9, 0, 400), md(12, 10, 0)
    assert b.position_diff(a) == 300
    assert a.on_same_segment(b) and not a.on_same_segment(c)
    assert a.on_older_segment(c) and not c.on_older_segment(a)
    assert LogOffsetMetadata(7).message_offset_only and not a.message_offset_only
    assert UNKNOWN_OFFSET_METADATA.message_offset_only
    assert not LogOffsetMetadata(7).on_same_segment(a)
    with pytest.raises(ValueError):
        c.position_diff(a)
    with pytest.raises(ValueError):
        LogOffsetMetadata(7).on_older_segment(a)


def test_same_segment_accumulates_the_position_difference_capped_by_partition_max_bytes() -> None:
    assert bytes_available(md(5, 0, 100), md(9, 0, 400), 1 << 20) == 300
    assert bytes_available(md(5, 0, 100), md(9, 0, 400), 120) == 120


def test_no_new_offset_is_nothing_even_when_the_end_rolled_to_a_new_segment() -> None:
    assert bytes_available(md(9, 0, 400), md(9, 0, 400), 1 << 20) == 0
    # the log rolled at the end: same offset, new segment -- not Kafka's case F
    assert bytes_available(md(9, 0, 400), md(9, 9, 0), 1 << 20) == 0


def test_end_on_a_later_segment_answers_now() -> None:
    assert bytes_available(md(5, 0, 100), md(12, 10, 30), 1 << 20) is None


def test_end_on_an_earlier_segment_answers_now() -> None:
    # positions from before a truncation: the end lies on a segment before the fetch's
    assert bytes_available(md(5, 10, 0), md(8, 0, 300), 1 << 20) is None


def test_fetch_offset_past_the_end_answers_now() -> None:
    # the leader truncated below the fetch offset (Kafka's case F on a truncated leader)
    assert bytes_available(md(9, 0, 400), md(7, 0, 300), 1 << 20) is None


def test_unknown_positions_answer_now_once_the_end_moved() -> None:
    assert bytes_available(LogOffsetMetadata(5), md(9, 0, 400), 1 << 20) is None
    assert bytes_available(md(5, 0, 100), LogOffsetMetadata(9), 1 << 20) is None
    assert bytes_available(LogOffsetMetadata(9), md(9, 0, 400), 1 << 20) == 0


# -- positions kept by the log and the partition ------------------------------------------------

@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg = Log.open(tmp_path / "t-0", CONFIG)
    yield lg
    lg.close()


def test_log_positions_of_offsets_reads_and_the_log_end(log: Log) -> None:
    b1, b2 = data(3), data(2)
    log.append_as_leader(b1, 0, NOW)        # 0-2 at 0
    log.append_as_leader(b2, 0, NOW)        # 3-4 at len(b1)
    assert log.log_end_offset_metadata == md(5, 0, len(b1) + len(b2))
    assert log.convert_to_offset_metadata(0) == md(0, 0, 0)
    assert log.convert_to_offset_metadata(4) == md(4, 0, len(b1))    # the batch holding it
    assert log.convert_to_offset_metadata(5) == log.log_end_offset_metadata
    with pytest.raises(OffsetOutOfRangeError):
        log.convert_to_offset_metadata(6)
    assert log.read(3, 1 << 20).fetch_offset_metadata == md(3, 0, len(b1))
    assert log.read(5, 1 << 20).fetch_offset_metadata == md(5, 0, len(b1) + len(b2))
    # at a bound below the end: its given position, or the position looked up
    assert log.read(3, 1 << 20, 3).fetch_offset_metadata == md(3, 0, len(b1))
    given = md(3, 0, len(b1))
    assert log.read(3, 1 << 20, 3, max_offset_metadata=given).fetch_offset_metadata is given
    log.roll()
    b3 = data(1)
    log.append_as_leader(b3, 0, NOW)        # 5 in the new segment
    assert log.log_end_offset_metadata == md(6, 5, len(b3))
    assert log.convert_to_offset_metadata(5) == md(5, 5, 0)
    assert log.read(5, 1 << 20).fetch_offset_metadata == md(5, 5, 0)


# -- waiting fetches in process -------------------------------------------------------------------

@pytest.fixture
def lm(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager([tmp_path], CONFIG)
    manager.startup()
    yield manager
    manager.shutdown()


def leader(lm: LogManager, replicas: list[int]) -> ReplicaManager:
    rm = ReplicaManager(0, lm)
    rm.become_leader(TP, uuid.uuid4(), 0, replicas, replicas, CONFIG)
    return rm


async def append(rm: ReplicaManager, records: bytes, origin: str | None = None) -> int:
    kw: dict[str, Any] = {} if origin is None else {"origin": origin}
    r = (await rm.append_records(5000, 1, {TP: records}, **kw))[TP]
    assert r.error == ErrorCode.NONE, r
    return r.base_offset


def offsets(r: FetchPartitionResult) -> list[tuple[int, int]]:
    found, _ = split_batches(r.records())
    return [(h.base_offset, h.last_offset) for _pos, h in found]


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def start_fetch(rm: ReplicaManager, offset: int, min_bytes: int, isolation: int = READ_UNCOMMITTED,
                max_wait_ms: int = 30_000, replica_id: int = -1, **request: int
                ) -> asyncio.Future[list[tuple[TopicPartition, FetchPartitionResult]]]:
    info = [(TP, FetchPartitionRequest(offset, 1 << 20, **request))]
    return asyncio.ensure_future(rm.fetch_messages(max_wait_ms, min_bytes, 1 << 20, isolation, info,
                                                   replica_id=replica_id))


def test_consumer_fetch_completes_exactly_at_min_bytes_without_reading_the_log(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        batches = [data(2, tag=f"b{k}-") for k in range(3)]
        p = rm.get_partition(TP)
        assert p is not None
        reads = 0
        real_read = p.log.read

        def counting_read(*a: Any, **kw: Any) -> Any:
            nonlocal reads
            reads += 1
            return real_read(*a, **kw)
        p.log.read = counting_read  # type: ignore[method-assign]
        fut = start_fetch(rm, 0, sum(len(b) for b in batches))
        await settle()
        assert not fut.done() and reads == 1
        for b in batches[:2]:
            await append(rm, b)
            await settle()
            assert not fut.done()
        assert reads == 1               # appends compared positions, read nothing
        await append(rm, batches[2])
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert reads == 2               # the answer's read
        assert r.error == ErrorCode.NONE and r.high_watermark == 6
        assert offsets(r) == [(0, 1), (2, 3), (4, 5)]
        rm.shutdown()
    asyncio.run(main())


def test_bytes_already_there_count_toward_min_bytes(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        first, second = data(3), data(3, tag="w")
        await append(rm, first)
        fut = start_fetch(rm, 0, len(first) + len(second))
        await settle()
        assert not fut.done()
        await append(rm, second)
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert offsets(r) == [(0, 2), (3, 5)]
        rm.shutdown()
    asyncio.run(main())


def test_read_committed_fetch_counts_only_bytes_below_the_last_stable_offset(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        txn = data(4, pid=7, txn=True, seq=0)
        fut_committed = start_fetch(rm, 0, len(txn) + 1, READ_COMMITTED)
        fut_uncommitted = start_fetch(rm, 0, len(txn) + 1, READ_UNCOMMITTED)
        await settle()
        await append(rm, txn)                                          # 0-3, open
        await settle()
        assert not fut_committed.done() and not fut_uncommitted.done()
        await append(rm, build_end_txn_marker(7, 0, 0, True, NOW), ORIGIN_COORDINATOR)   # 4
        [(_tp, u)] = await asyncio.wait_for(fut_uncommitted, 5)
        [(_tp, c)] = await asyncio.wait_for(fut_committed, 5)
        assert offsets(u) == offsets(c) == [(0, 3), (4, 4)]
        assert c.last_stable_offset == 5 and c.aborted_transactions == []
        rm.shutdown()
    asyncio.run(main())


def test_read_committed_fetch_waits_while_a_transaction_holds_the_lso_back(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        plain, txn, more = data(2), data(2, pid=7, txn=True, seq=0), data(3, tag="m")
        await append(rm, plain)                 # 0-1
        await append(rm, txn)                   # 2-3 open: LSO 2
        fut = start_fetch(rm, 2, 1, READ_COMMITTED)
        await settle()
        await append(rm, more)                  # 4-6, above the LSO: nothing for read_committed
        await settle()
        assert not fut.done()
        p = rm.get_partition(TP)
        assert p is not None and p.last_stable_offset_metadata == md(2, 0, len(plain))
        await append(rm, build_end_txn_marker(7, 0, 0, False, NOW), ORIGIN_COORDINATOR)   # abort: 7
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert offsets(r) == [(2, 3), (4, 6), (7, 7)] and r.aborted_transactions == [(7, 2)]
        rm.shutdown()
    asyncio.run(main())


def test_consumer_waits_on_the_high_watermark_whose_position_is_found_lazily(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0, 1])
        batches = [data(2, tag=f"b{k}-") for k in range(3)]
        for b in batches:
            await append(rm, b)                 # 0-5, HW 0: the follower has nothing yet
        p = rm.get_partition(TP)
        assert p is not None and p.high_watermark == 0
        fut = start_fetch(rm, 0, len(batches[0]) + len(batches[1]))
        await settle()
        assert not fut.done()
        # the follower's fetch at 2 moves the HW to 2, then at 4: positions of offsets below the
        # log end, looked up from the index when the waiting fetch asks
        [(_tp, f)] = await rm.fetch_messages(0, 1, 1 << 20, 0, [(TP, FetchPartitionRequest(2, 1 << 20))],
                                             replica_id=1)
        assert f.error == ErrorCode.NONE and p.high_watermark == 2
        await settle()
        assert not fut.done()
        await rm.fetch_messages(0, 1, 1 << 20, 0, [(TP, FetchPartitionRequest(4, 1 << 20))], replica_id=1)
        assert p.high_watermark == 4 and p.high_watermark_metadata == md(4, 0, len(batches[0]) + len(batches[1]))
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert offsets(r) == [(0, 1), (2, 3)] and r.high_watermark == 4
        rm.shutdown()
    asyncio.run(main())


def test_follower_fetch_waits_on_the_log_end_not_the_high_watermark(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0, 1])
        first, second = data(2), data(2, tag="w")
        fut = start_fetch(rm, 0, len(first) + len(second), replica_id=1)
        await settle()
        await append(rm, first)
        await settle()
        assert not fut.done()
        await append(rm, second)                # HW still 0: the follower reads to the log end
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert offsets(r) == [(0, 1), (2, 3)] and r.high_watermark == 0
        rm.shutdown()
    asyncio.run(main())


def test_follower_fetch_with_a_diverging_epoch_answers_now(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0, 1])
        await append(rm, data(2))                                  # epoch 0: 0-1
        fut = start_fetch(rm, 2, 1 << 20, replica_id=1, last_fetched_epoch=0, current_leader_epoch=0)
        await settle()
        assert not fut.done()
        # a new epoch starting at 1 (as after an unclean election): epoch 0 now ends at 1 < 2
        p = rm.get_partition(TP)
        assert p is not None
        p.leader_epoch_cache.assign(1, 1)
        await append(rm, data(1, tag="e1"))
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert r.error == ErrorCode.NONE and r.diverging_epoch == (0, 1)
        rm.shutdown()
    asyncio.run(main())


def test_a_new_segment_answers_now(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        await append(rm, data(2))
        fut = start_fetch(rm, 0, 1 << 20)
        await settle()
        p = rm.get_partition(TP)
        assert p is not None
        p.log.roll()
        await append(rm, data(1, tag="n"))      # the end is on a later segment: Kafka's case F
        [(_tp, r)] = await asyncio.wait_for(fut, 5)
        assert offsets(r) == [(0, 1), (2, 2)]
        rm.shutdown()
    asyncio.run(main())


def test_partition_errors_answer_now(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        fenced = start_fetch(rm, 0, 1 << 20, current_leader_epoch=0)
        stopped = start_fetch(rm, 0, 1 << 20)
        await settle()
        assert not fenced.done() and not stopped.done()
        rm.become_leader(TP, uuid.uuid4(), 1, [0], [0], CONFIG)
        await append(rm, data(1))               # epoch 1 now: the epoch-0 fetch is fenced
        [(_tp, r)] = await asyncio.wait_for(fenced, 5)
        assert r.error == ErrorCode.FENCED_LEADER_EPOCH
        assert not stopped.done()
        rm.stop_replica(TP, delete=False)       # no longer hosted here (and no metadata knows it)
        [(_tp, r)] = await asyncio.wait_for(stopped, 5)
        assert r.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        rm.shutdown()
    asyncio.run(main())


def test_expiry_answers_with_what_is_there(lm: LogManager) -> None:
    async def main() -> None:
        rm = leader(lm, [0])
        b = data(2)
        await append(rm, b)
        [(_tp, r)] = await asyncio.wait_for(
            rm.fetch_messages(50, len(b) + 1, 1 << 20, 0, [(TP, FetchPartitionRequest(0, 1 << 20))]), 5)
        assert offsets(r) == [(0, 1)]
        rm.shutdown()
    asyncio.run(main())
