"""Read isolation in the replica layer, in process (LogManager + ReplicaManager + a leader
Partition): transactional batches hold the last stable offset back until their marker, read_committed
fetches stop below it and carry the aborted transactions of the range, ListOffsets(latest) answers
the LSO, and a waiting read_committed fetch wakes when a marker moves the LSO."""
from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from kafkalite.config.log_config import LogConfig
from kafkalite.log.log import ORIGIN_COORDINATOR
from kafkalite.log.log_manager import LogManager
from kafkalite.log.record_batch import build_batch, build_end_txn_marker, split_batches
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import LATEST_TIMESTAMP, ReplicaManager
from kafkalite.replica.results import ActiveProducer, FetchPartitionRequest, FetchPartitionResult

TP = TopicPartition("t", 0)
CONFIG = LogConfig(segment_index_bytes=64 * 1024)
NOW = int(time.time() * 1000)


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    lm = LogManager([tmp_path], CONFIG)
    lm.startup()
    manager = ReplicaManager(0, lm)
    manager.become_leader(TP, uuid.uuid4(), 0, [0], [0], CONFIG)
    yield manager
    manager.shutdown()
    lm.shutdown()


def data(n: int, *, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False, tag: str = "v") -> bytes:
    return build_batch([(None, f"{tag}{i}".encode(), NOW + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=txn)


async def append(rm: ReplicaManager, records: bytes, origin: Optional[str] = None) -> Any:
    kw = {} if origin is None else {"origin": origin}
    r = (await rm.append_records(5000, 1, {TP: records}, **kw))[TP]
    assert r.error == ErrorCode.NONE, r
    return r.base_offset


async def marker(rm: ReplicaManager, pid: int, commit: bool, epoch: int = 0) -> int:
    return await append(rm, build_end_txn_marker(pid, epoch, 0, commit, NOW), ORIGIN_COORDINATOR)


def fetch(rm: ReplicaManager, offset: int, isolation: int) -> FetchPartitionResult:
    [(_tp, r)] = rm.read_from_local_logs(1 << 20, isolation, [(TP, FetchPartitionRequest(offset, 1 << 20))])
    assert r.error == ErrorCode.NONE, r
    return r


def batches(r: FetchPartitionResult) -> list[tuple[int, int, int, bool]]:
    """(base offset, last offset, producer id, control) of each batch served."""
    found, _ = split_batches(r.records())
    return [(h.base_offset, h.last_offset, h.producer_id, h.is_control) for _pos, h in found]


def latest(rm: ReplicaManager, isolation: int) -> int:
    r = rm.fetch_offset_for_timestamp(TP, LATEST_TIMESTAMP, isolation, -1, True)
    assert r.error == ErrorCode.NONE
    return r.offset


def test_lso_fetch_bounds_and_aborted_transactions(rm: ReplicaManager) -> None:
    async def main() -> None:
        p = rm.get_partition(TP)
        assert p is not None
        assert await append(rm, data(3)) == 0                                        # 0-2
        assert await append(rm, data(2, pid=1, epoch=0, seq=0, txn=True)) == 3        # 3-4
        assert await append(rm, data(1, pid=2, epoch=0, seq=0, txn=True)) == 5        # 5
        assert (p.high_watermark, p.last_stable_offset) == (6, 3)
        assert (latest(rm, 0), latest(rm, 1)) == (6, 3)

        rc = fetch(rm, 0, 1)
        assert (rc.high_watermark, rc.last_stable_offset, rc.aborted_transactions) == (6, 3, [])
        assert batches(rc) == [(0, 2, -1, False)]
        ru = fetch(rm, 0, 0)
        assert (ru.last_stable_offset, ru.aborted_transactions) == (3, None)
        assert batches(ru) == [(0, 2, -1, False), (3, 4, 1, False), (5, 5, 2, False)]
        # at the LSO a read_committed fetch gets nothing yet
        assert batches(fetch(rm, 3, 1)) == [] and fetch(rm, 3, 1).aborted_transactions == []

        assert await marker(rm, 1, commit=False) == 6          # ABORT of producer 1
        assert (p.high_watermark, p.last_stable_offset) == (7, 5)  # producer 2 still open at 5
        rc = fetch(rm, 0, 1)
        assert batches(rc) == [(0, 2, -1, False), (3, 4, 1, False)]
        assert rc.aborted_transactions == [(1, 3)]

        assert await marker(rm, 2, commit=True) == 7           # COMMIT of producer 2
        assert (p.high_watermark, p.last_stable_offset) == (8, 8)
        assert (latest(rm, 0), latest(rm, 1)) == (8, 8)
        rc = fetch(rm, 0, 1)
        assert batches(rc) == [(0, 2, -1, False), (3, 4, 1, False), (5, 5, 2, False), (6, 6, 1, True),
                               (7, 7, 2, True)]
        assert rc.aborted_transactions == [(1, 3)]
        # only the aborted transactions overlapping the range read
        assert fetch(rm, 5, 1).aborted_transactions == [(1, 3)]   # its marker (6) is in the range
        assert fetch(rm, 7, 1).aborted_transactions == []

        # across a segment roll, and a second aborted transaction of the same producer
        p.log.roll()
        assert await append(rm, data(1, pid=1, epoch=0, seq=2, txn=True)) == 8
        assert await marker(rm, 1, commit=False) == 9
        assert fetch(rm, 0, 1).aborted_transactions == [(1, 3), (1, 8)]
        assert fetch(rm, 7, 1).aborted_transactions == [(1, 8)]
        assert p.active_producers() == [
            ActiveProducer(1, 0, 2, NOW, 0, -1), ActiveProducer(2, 0, 0, NOW, 0, -1)]
    asyncio.run(main())


def test_open_transaction_in_active_producers(rm: ReplicaManager) -> None:
    async def main() -> None:
        p = rm.get_partition(TP)
        assert p is not None
        await append(rm, data(2))
        await append(rm, data(3, pid=42, epoch=7, seq=0, txn=True))
        assert p.active_producers() == [ActiveProducer(42, 7, 2, NOW + 2, -1, 2)]
        await marker(rm, 42, commit=True, epoch=7)
        # the marker's timestamp and coordinator epoch, as Kafka's appendEndTxnMarker records them
        assert p.active_producers() == [ActiveProducer(42, 7, 2, NOW, 0, -1)]
    asyncio.run(main())


def test_waiting_read_committed_fetch_wakes_on_the_marker(rm: ReplicaManager) -> None:
    async def main() -> None:
        p = rm.get_partition(TP)
        assert p is not None
        await append(rm, data(1))                                   # 0
        info = [(TP, FetchPartitionRequest(1, 1 << 20))]
        committed = asyncio.ensure_future(rm.fetch_messages(30_000, 1, 1 << 20, 1, info))
        uncommitted = asyncio.ensure_future(rm.fetch_messages(30_000, 1, 1 << 20, 0, info))
        await asyncio.sleep(0)
        assert not committed.done() and not uncommitted.done()
        await append(rm, data(2, pid=5, epoch=0, seq=0, txn=True))  # 1-2: new data, LSO stays at 1
        [(_tp, r)] = await asyncio.wait_for(uncommitted, 10)
        assert batches(r) == [(1, 2, 5, False)] and r.aborted_transactions is None
        for _ in range(3):
            await asyncio.sleep(0)
        assert not committed.done() and p.last_stable_offset == 1
        await marker(rm, 5, commit=True)                            # 3: LSO -> 4
        [(_tp, r)] = await asyncio.wait_for(committed, 10)
        assert (r.last_stable_offset, r.aborted_transactions) == (4, [])
        assert batches(r) == [(1, 2, 5, False), (3, 3, 5, True)]
    asyncio.run(main())
