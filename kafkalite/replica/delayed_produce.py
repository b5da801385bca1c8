"""DelayedProduce: an acks=all produce waits until the ISR holds what it appended."""
from __future__ import annotations

import asyncio
from typing import Callable

from kafkalite.protocol.errors import ErrorCode
from kafkalite.purgatory import DelayedOperation
from kafkalite.replica.results import ProducePartitionResult
from kafkalite.replica.partition import Partition, TopicPartition


class DelayedProduce(DelayedOperation):
    def __init__(self, delay_ms: int, pending: dict[TopicPartition, tuple[int, ProducePartitionResult]],
                 get_partition: Callable[[TopicPartition], Partition | ErrorCode],
                 future: asyncio.Future[None]) -> None:
        super().__init__(delay_ms)
        # tp -> (required offset: last appended offset + 1, the result to fill in)
        self.pending = pending
        self.get_partition = get_partition
        self.future = future
        self._acked: set[TopicPartition] = set()

    def try_complete(self) -> bool:
        for tp, (required_offset, result) in self.pending.items():
            if tp in self._acked:
                continue
            partition = self.get_partition(tp)
            if isinstance(partition, ErrorCode):
                # gone from this broker (Kafka's getPartitionOrError): NOT_LEADER_OR_FOLLOWER when
                # the cluster still has it, else UNKNOWN_TOPIC_OR_PARTITION
                result.error = partition
                self._acked.add(tp)
                continue
            done, error = partition.check_enough_replicas_reach_offset(required_offset)
            if done:
                if error != ErrorCode.NONE:
                    result.error = error
                self._acked.add(tp)
        if len(self._acked) == len(self.pending):
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        for tp, (_off, result) in self.pending.items():
            if tp not in self._acked:
                result.error = ErrorCode.REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(None)
