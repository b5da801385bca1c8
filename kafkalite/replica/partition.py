"""One partition replica on this broker (Kafka's Partition): leader or follower, leader epoch,
partition epoch, ISR, high watermark.

The high watermark is the minimum log end offset over the ISR; with this broker alone in the ISR
it follows the local log end offset. Remote replicas' state arrives with replication (a follower
keeps its log and its last high watermark until a fetcher moves them).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Optional

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.log.leader_epoch_cache import LeaderEpochCache
from kafkalite.log.log import ORIGIN_CLIENT, Log
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.results import ActiveProducer

__all__ = ["Partition", "ReplicaState", "TopicPartition"]   # TopicPartition re-exported for its importers


@dataclass
class ReplicaState:
    """What the leader knows of a follower (filled in by replication)."""
    broker_id: int
    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0


class Partition:
    def __init__(self, tp: TopicPartition, topic_id: uuid.UUID, log: Log, local_broker_id: int) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        # the state znode's version as the controller last sent it (Kafka's partition epoch):
        # leadership changes carrying an older one are skipped
        self.partition_epoch = -1
        # the epoch of the controller that made the last leadership decision
        self.controller_epoch = -1
        # where the current leader epoch began in this log, while this broker leads
        self.leader_epoch_start_offset: Optional[int] = None
        self.replicas: list[int] = []
        self.isr: set[int] = set()
        self.remote_replicas: dict[int, ReplicaState] = {}
        self.high_watermark = 0
        self.leader_epoch_cache = self._load_leader_epoch_cache(log)

    @staticmethod
    def _load_leader_epoch_cache(log: Log) -> LeaderEpochCache:
        cache = LeaderEpochCache.load(log.dir)
        if cache is None:
            # No checkpoint (or an unreadable one): rebuild it from the batches' leader epochs.
            entries: list[tuple[int, int]] = []
            for h in log.iter_batch_headers():
                if h.partition_leader_epoch >= 0 and (not entries or h.partition_leader_epoch > entries[-1][0]):
                    entries.append((h.partition_leader_epoch, h.base_offset))
            cache = LeaderEpochCache(log.dir / "leader-epoch-checkpoint", entries)
            cache.flush()
        # Recovery may have cut a torn tail: epochs that start beyond the log end never happened.
        cache.truncate_from_end(log.log_end_offset)
        return cache

    # -- leadership (LeaderAndIsr) -----------------------------------------------------------
    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int],
                    partition_epoch: Optional[int] = None, controller_epoch: int = -1) -> bool:
        """Kafka's Partition.makeLeader: take the assignment and ISR; a new leader epoch starts at
        the log end (leader epoch cache entry) and resets what is known of the followers.
        Skipped (False) when `partition_epoch` is older than the one already applied (None: no
        check, the embedded controller's call). Returns whether this broker was not the leader."""
        if partition_epoch is not None and partition_epoch < self.partition_epoch:
            return False
        self.controller_epoch = controller_epoch
        is_new_leader = not self.is_leader
        is_new_leader_epoch = leader_epoch > self.leader_epoch
        self.replicas = list(replicas)
        self.isr = set(isr)
        old_remote = self.remote_replicas
        keep_state = not is_new_leader and not is_new_leader_epoch
        self.remote_replicas = {b: (old_remote[b] if keep_state and b in old_remote else ReplicaState(b))
                                for b in replicas if b != self.local_broker_id}
        if is_new_leader_epoch:
            start = self.log.log_end_offset
            # Followers that saw later epochs must truncate against this one: record it now.
            self.leader_epoch_cache.assign(leader_epoch, start)
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = start
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        self.leader_id = self.local_broker_id
        # A new leader starts from what it has; HW can only move forward from the log start.
        self.high_watermark = max(min(self.high_watermark, self.log.log_end_offset), self.log.log_start_offset)
        self.maybe_increment_high_watermark()
        return is_new_leader

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: list[int], isr: list[int],
                      partition_epoch: Optional[int] = None, controller_epoch: int = -1) -> bool:
        """Kafka's Partition.makeFollower: record the leader, its epoch and the assignment; the log
        stays as it is (the fetcher of issue 12 truncates and fetches). A follower keeps no ISR
        (Kafka's follower state has an empty ISR: only the leader maintains it), so `isr` is not
        stored. Skipped (False) when `partition_epoch` is older than the one applied. Returns
        whether the leader epoch is new (the fetcher must restart)."""
        if partition_epoch is not None and partition_epoch < self.partition_epoch:
            return False
        self.controller_epoch = controller_epoch
        is_new_leader_epoch = leader_epoch > self.leader_epoch
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = None
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = set()
        self.remote_replicas = {}
        # a follower never serves above what it knew committed; nothing moves it until replication
        self.high_watermark = max(min(self.high_watermark, self.log.log_end_offset), self.log.log_start_offset)
        return is_new_leader_epoch

    def local_log_with_epoch(self, current_leader_epoch: int, require_leader: bool = True) -> Log:
        """Kafka's Partition.localLogWithEpochOrThrow: the client's leader epoch is checked first
        (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), then leadership (NOT_LEADER_OR_FOLLOWER)."""
        self.check_leader_epoch(current_leader_epoch)
        if require_leader and not self.is_leader:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.log

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided (Kafka's LSO): the first offset of the earliest
        ongoing transaction, capped by the high watermark."""
        return self.log.last_stable_offset(self.high_watermark)

    def maybe_increment_high_watermark(self) -> bool:
        leo = self.log.log_end_offset
        new_hw = leo
        for b in self.isr:
            if b == self.local_broker_id:
                continue
            r = self.remote_replicas.get(b)
            new_hw = min(new_hw, r.log_end_offset if r else -1)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing: -1 means the client does not know; older -> FENCED, newer -> UNKNOWN."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaApiError(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > self.leader_epoch:
            raise KafkaApiError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool = True) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= leader_epoch, the offset where it ended)."""
        self.local_log_with_epoch(current_leader_epoch, fetch_only_from_leader)
        # Retention may have moved the log start since the last lookup.
        self.leader_epoch_cache.truncate_from_start(self.log.log_start_offset)
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log.log_end_offset)

    # -- produce -----------------------------------------------------------------------------
    def effective_min_isr(self) -> int:
        """Kafka's Partition.effectiveMinIsr: min.insync.replicas capped at the replica count, so
        a topic with fewer replicas than its min.insync.replicas still takes acks=all writes."""
        return min(self.log.config.min_insync_replicas, len(self.replicas))

    def append_records_to_leader(self, records: bytes | memoryview, required_acks: int, now_ms: int,
                                 origin: str = ORIGIN_CLIENT):
        if not self.is_leader:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        min_isr = self.effective_min_isr()
        if required_acks == -1 and len(self.isr) < min_isr:
            raise KafkaApiError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                f"The size of the current ISR {sorted(self.isr)} is insufficient "
                                f"to satisfy the min.isr requirement of {min_isr} for partition {self.tp}")
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms, origin=origin)
        self.maybe_increment_high_watermark()
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For DelayedProduce: has the ISR got everything up to required_offset?"""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.isr) < self.effective_min_isr():
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    # -- producers ---------------------------------------------------------------------------
    def active_producers(self) -> list[ActiveProducer]:
        """The producers the log's producer state knows (Kafka's Partition.activeProducerState)."""
        out: list[ActiveProducer] = []
        for pid, e in sorted(self.log.producer_state.producers.items()):
            txn = e.current_txn_first_offset
            out.append(ActiveProducer(pid, e.producer_epoch, e.last_seq, e.last_timestamp,
                                      e.coordinator_epoch, -1 if txn is None else txn))
        return out

    # -- fetch -------------------------------------------------------------------------------
    def fetch_upper_bound(self, isolation_level: int, is_follower: bool) -> int:
        if is_follower:
            return self.log.log_end_offset
        return self.last_stable_offset if isolation_level == 1 else self.high_watermark
