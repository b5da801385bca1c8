"""DelayedDeleteRecords: a DeleteRecords waits until every live replica's log start offset reached
the requested offset (Kafka's DelayedDeleteRecords: the leader's low watermark)."""
from __future__ import annotations

import asyncio
from typing import Callable

from kafkalite.protocol.errors import ErrorCode
from kafkalite.purgatory import DelayedOperation
from kafkalite.replica.partition import Partition, TopicPartition


class DeleteRecordsPartitionStatus:
    __slots__ = ("required_offset", "low_watermark", "error", "acked")

    def __init__(self, required_offset: int) -> None:
        self.required_offset = required_offset
        self.low_watermark = -1
        self.error = ErrorCode.REQUEST_TIMED_OUT   # until the low watermark gets there
        self.acked = False


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, delay_ms: int, status: dict[TopicPartition, DeleteRecordsPartitionStatus],
                 get_partition: Callable[[TopicPartition], Partition | ErrorCode],
                 future: asyncio.Future[None]) -> None:
        super().__init__(delay_ms)
        self.status = status
        self.get_partition = get_partition
        self.future = future

    def try_complete(self) -> bool:
        for tp, s in self.status.items():
            if s.acked:
                continue
            partition = self.get_partition(tp)
            if isinstance(partition, ErrorCode):
                s.error, s.low_watermark, s.acked = partition, -1, True
            elif not partition.is_leader:
                s.error, s.low_watermark, s.acked = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, True
            else:
                low = partition.low_watermark()
                if low >= s.required_offset:
                    s.error, s.low_watermark, s.acked = ErrorCode.NONE, low, True
        if all(s.acked for s in self.status.values()):
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass    # the unacknowledged partitions keep REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(None)
