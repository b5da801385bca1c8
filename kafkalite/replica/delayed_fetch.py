"""DelayedFetch: a fetch waits for `min_bytes` of new data up to `max_wait_ms`, and completes as
soon as an append (or an error) makes it satisfiable — never by polling.

Like Kafka's DelayedFetch it decides from positions, not by reading the log: each partition keeps
where its first read ended (the fetch offset's LogOffsetMetadata), and an append only compares
that with where the partition's readable end now lies (log end, high watermark or last stable
offset, each with its segment and byte position).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Optional

from kafkalite.log.log_offset_metadata import LogOffsetMetadata
from kafkalite.purgatory import DelayedOperation
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.results import FetchPartitionRequest, FetchPartitionResult


@dataclass(slots=True)
class FetchPartitionStatus:
    """Kafka's FetchPartitionStatus: where the first read of the partition started, and the request."""
    start_offset_metadata: LogOffsetMetadata
    fetch_info: FetchPartitionRequest


def bytes_available(fetch_offset: LogOffsetMetadata, end_offset: LogOffsetMetadata,
                    partition_max_bytes: int) -> Optional[int]:
    """The bytes a waiting fetch can read now, at most `partition_max_bytes`; None when it must
    answer now (Kafka's DelayedFetch case F): its offset is past the end (the log was truncated),
    or the end moved to a later segment (it rolled, or the fetch fell behind) — or to an earlier
    one, which a truncation does — where positions cannot be compared."""
    if fetch_offset.message_offset > end_offset.message_offset:
        return None
    if fetch_offset.message_offset == end_offset.message_offset:
        # same offset, maybe not the same segment (the log just rolled): nothing new
        return 0
    if fetch_offset.message_offset_only or end_offset.message_offset_only:
        return None     # positions unknown: answer rather than wait blind
    if fetch_offset.on_same_segment(end_offset):
        # a negative difference can only be positions from before a compaction: wait for more
        return max(0, min(end_offset.position_diff(fetch_offset), partition_max_bytes))
    return None


# The end a partition may be read up to now, with its position, or None when the fetch must
# answer now for that partition (an error: not leader, unknown, fenced epoch; a diverging epoch).
EndOffsetOf = Callable[[TopicPartition, FetchPartitionStatus], Optional[LogOffsetMetadata]]


class DelayedFetch(DelayedOperation):
    def __init__(self, delay_ms: int, min_bytes: int,
                 fetch_statuses: list[tuple[TopicPartition, FetchPartitionStatus]],
                 end_offset_of: EndOffsetOf,
                 read: Callable[[], list[tuple[TopicPartition, FetchPartitionResult]]],
                 future: asyncio.Future[list[tuple[TopicPartition, FetchPartitionResult]]]) -> None:
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.fetch_statuses = fetch_statuses
        self.end_offset_of = end_offset_of
        self.read = read
        self.future = future

    def try_complete(self) -> bool:
        accumulated = 0
        for tp, status in self.fetch_statuses:
            end = self.end_offset_of(tp, status)
            if end is None:
                return self.force_complete()
            start = status.start_offset_metadata
            if end.message_offset == start.message_offset:
                continue    # nothing new: most partitions of a fetch on most checks
            n = bytes_available(start, end, status.fetch_info.partition_max_bytes)
            if n is None:
                return self.force_complete()
            accumulated += n
        if accumulated >= self.min_bytes:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        # Like Kafka, read the logs on completion (or expiry) so the answer has the newest data.
        if self.future.done():
            return
        try:
            self.future.set_result(self.read())
        except Exception as e:  # surfaced to the handler, which closes nothing but logs
            self.future.set_exception(e)
