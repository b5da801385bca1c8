"""What the replica manager hands back to the Produce / Fetch / ListOffsets handlers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kafkalite.log.log import FetchDataInfo
from kafkalite.protocol.errors import ErrorCode


@dataclass(slots=True)
class ProducePartitionResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: Optional[str] = None
    record_errors: list[tuple[int, Optional[str]]] = field(default_factory=list)


@dataclass(slots=True)
class FetchPartitionRequest:
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # Fetch v12+: the epoch of the last batch the fetcher has (followers), for the diverging-epoch check
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    data: Optional[FetchDataInfo] = None
    leader_id: int = -1
    leader_epoch: int = -1
    # read_committed fetches: the aborted transactions overlapping the data, (producer id, first
    # offset), so the client drops their records; None (null on the wire) for read_uncommitted
    aborted_transactions: Optional[list[tuple[int, int]]] = None
    # the data's bytes once read (a read_committed fetch reads them to bound the aborted list)
    data_bytes: Optional[bytes] = None
    # a follower's log diverges from this leader's: (epoch, end offset) to truncate to (Fetch v12+)
    diverging_epoch: Optional[tuple[int, int]] = None
    # KIP-392: the replica a consumer should fetch from instead (-1: none)
    preferred_read_replica: int = -1

    @property
    def size(self) -> int:
        return self.data.size if self.data is not None else 0

    def records(self) -> bytes:
        if self.data_bytes is None:
            self.data_bytes = self.data.read_bytes() if self.data is not None else b""
        return self.data_bytes


@dataclass(slots=True)
class ListOffsetsPartitionResult:
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """One producer of a partition's log, as DescribeProducers reports it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int       # -1: no ongoing transaction
