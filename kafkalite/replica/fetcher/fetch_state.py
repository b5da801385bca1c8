"""Per-partition state of a follower's fetcher (Kafka's PartitionFetchState, InitialFetchState,
OffsetTruncationState) and the pure decisions over it: which fetcher a partition goes to
(AbstractFetcherManager.getFetcherId) and where a diverging log is truncated
(AbstractFetcherThread.getOffsetTruncationState).

No I/O here: the fetcher task feeds these functions what the leader answered and what the local
log says, so the decisions are unit-tested on their own.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Optional

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class ReplicaFetchPhase(enum.Enum):
    """Kafka's ReplicaState: Truncating until the log is known to agree with the leader's."""
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(frozen=True)
class InitialFetchState:
    """What LeaderAndIsr hands the fetcher manager for one followed partition.
    `init_fetch_offset` < 0 asks the leader where to start (ListOffsets); `last_fetched_epoch`
    None (nothing known of the log's epochs) starts by truncating to the high watermark."""
    topic_id: uuid.UUID
    leader_id: int
    current_leader_epoch: int
    init_fetch_offset: int
    last_fetched_epoch: Optional[int]


@dataclass(frozen=True)
class PartitionFetchState:
    topic_id: uuid.UUID
    fetch_offset: int
    current_leader_epoch: int
    state: ReplicaFetchPhase
    last_fetched_epoch: Optional[int] = None
    # monotonic ms before which the partition is not fetched (replica.fetch.backoff.ms after an error)
    delayed_until_ms: int = 0
    # the leader's HW minus our fetch position after the last response (None: no response yet)
    lag: Optional[int] = None

    def is_delayed(self, now_ms: int) -> bool:
        return self.delayed_until_ms > now_ms

    def is_ready_for_fetch(self, now_ms: int) -> bool:
        return self.state is ReplicaFetchPhase.FETCHING and not self.is_delayed(now_ms)

    def is_truncating(self, now_ms: int) -> bool:
        return self.state is ReplicaFetchPhase.TRUNCATING and not self.is_delayed(now_ms)

    def delayed(self, until_ms: int) -> "PartitionFetchState":
        """Kafka's delayPartitions: an existing delay is not extended."""
        return self if self.delayed_until_ms > until_ms else replace(self, delayed_until_ms=until_ms)


def initial_partition_fetch_state(initial: InitialFetchState,
                                  current: Optional[PartitionFetchState]) -> Optional[PartitionFetchState]:
    """Kafka's AbstractFetcherThread.partitionFetchState for a fetcher supporting truncation on
    fetch: the state already held for the same leader epoch is kept; a known last fetched epoch
    fetches at once (the leader's diverging-epoch answer truncates); without one the partition
    truncates to its high watermark first. None: the start offset must be asked of the leader
    (init_fetch_offset < 0, Kafka's fetchOffsetAndTruncate)."""
    if current is not None and current.current_leader_epoch == initial.current_leader_epoch:
        return current
    if initial.init_fetch_offset < 0:
        return None
    phase = ReplicaFetchPhase.TRUNCATING if initial.last_fetched_epoch is None else ReplicaFetchPhase.FETCHING
    return PartitionFetchState(initial.topic_id, initial.init_fetch_offset, initial.current_leader_epoch,
                               phase, initial.last_fetched_epoch)


@dataclass(frozen=True)
class OffsetTruncationState:
    offset: int
    truncation_completed: bool = True

    def __str__(self) -> str:
        return f"TruncationState(offset={self.offset}, completed={str(self.truncation_completed).lower()})"


@dataclass(frozen=True)
class EpochEndOffset:
    """The leader's answer for a diverging log: its end offset for `leader_epoch`."""
    leader_epoch: int
    end_offset: int
    partition: int = -1

    def __str__(self) -> str:
        # as Kafka's generated EpochEndOffset prints in the truncation log line
        return (f"EpochEndOffset(errorCode=0, partition={self.partition}, leaderEpoch={self.leader_epoch}, "
                f"endOffset={self.end_offset})")


def offset_truncation_state(leader: EpochEndOffset, fetch_offset: int, replica_end_offset: int,
                            end_offset_for_epoch: Callable[[int], Optional[tuple[int, int]]]
                            ) -> OffsetTruncationState:
    """Where to truncate, from the leader's (epoch, end offset) and this replica's log (Kafka's
    getOffsetTruncationState). `end_offset_for_epoch(e)` is the follower's (largest epoch <= e,
    its end offset), None when the follower tracks no epoch that old.

    - the leader knows no end offset: fall back to the fetch offset (the high watermark);
    - no epoch in the answer (pre-KIP-279 leaders): the leader's offset, capped at our end;
    - an epoch the follower does not have: truncate to the end of the follower's largest
      epoch below it and ask again (not completed);
    - otherwise the smaller of the two ends for that epoch, capped at our log end.
    """
    if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(fetch_offset, True)
    if leader.leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader.end_offset, replica_end_offset), True)
    ours = end_offset_for_epoch(leader.leader_epoch)
    if ours is None or ours[1] == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(min(leader.end_offset, replica_end_offset), True)
    follower_epoch, follower_end = ours
    if follower_epoch != leader.leader_epoch:
        return OffsetTruncationState(min(follower_end, replica_end_offset), False)
    return OffsetTruncationState(min(follower_end, leader.end_offset, replica_end_offset), True)


def out_of_range_fetch_offset(replica_end_offset: int, leader_end_offset: int,
                              leader_start_offset: Optional[int]) -> tuple[int, str]:
    """Kafka's fetchOffsetAndTruncate after OFFSET_OUT_OF_RANGE, as (offset, action):
    "truncate" to the leader's end when it is behind ours (an unclean election), "truncate_fully"
    to start at the leader's log start when our whole log is below it, else "none" (fetch from
    our end). `leader_start_offset` is only needed (and only asked) when the leader is not behind."""
    if leader_end_offset < replica_end_offset:
        return leader_end_offset, "truncate"
    assert leader_start_offset is not None
    if leader_start_offset > replica_end_offset:
        return leader_start_offset, "truncate_fully"
    return max(leader_start_offset, replica_end_offset), "none"


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's getFetcherId: Utils.abs(31 * topic.hashCode + partition) % num.replica.fetchers,
    in 32-bit int arithmetic (Utils.abs maps Integer.MIN_VALUE to 0)."""
    v = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    if v >= 1 << 31:
        v -= 1 << 32
    return (0 if v == -(1 << 31) else abs(v)) % num_fetchers
