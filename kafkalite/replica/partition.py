"""One partition replica on this broker (Kafka's Partition): leader or follower, leader epoch,
partition epoch, ISR, high watermark.

As leader it keeps what each follower's fetches told it (log end offset, last caught-up time),
moves the high watermark to the minimum log end offset over the maximal ISR (the committed ISR
plus a pending expansion, KIP-497), and proposes ISR expansions and shrinks to the controller
through the AlterPartition manager; a proposal changes the committed ISR only once the controller
accepts it. As follower it appends the leader's batches as they are, truncates by leader epoch
and takes the leader's high watermark (the fetcher drives that side).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.log.errors import UnexpectedAppendOffsetError
from kafkalite.log.leader_epoch_cache import LeaderEpochCache
from kafkalite.log.log import LEADER_OFFSET_INCREMENTED, ORIGIN_CLIENT, Log
from kafkalite.log.log_offset_metadata import LogOffsetMetadata
from kafkalite.log.record_batch import split_batches
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.alter_partition_manager import AlterPartitionManager, LeaderAndIsr
from kafkalite.replica.results import ActiveProducer

log = logging.getLogger(__name__)

LEADER_RECOVERY_RECOVERED = 0

__all__ = ["Partition", "ReplicaState", "TopicPartition"]   # TopicPartition re-exported for its importers


UNKNOWN_OFFSET = -1


@dataclass
class ReplicaState:
    """What the leader knows of a follower from its fetches (Kafka's Replica/ReplicaState)."""
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    # the leader's log end offset at the follower's previous fetch: reaching it counts as caught up
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int) -> None:
        """Kafka's Replica.updateFetchStateOrThrow: a fetch at the leader's end offset, or at the
        end offset the leader had at the previous fetch, proves the follower was caught up then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> None:
        """Kafka's Replica.resetReplicaState at a new leader epoch: an ISR member counts as caught up
        now (so it is not dropped before its first fetch), others not at all."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if is_new_leader:
            self.log_end_offset = UNKNOWN_OFFSET
            self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms


@dataclass(frozen=True)
class PendingIsrChange:
    """An ISR change sent to the controller and not answered yet (Kafka's PendingExpandIsr /
    PendingShrinkIsr). An expansion counts the new member for the high watermark at once (a
    stricter bound, safe if refused); a shrink does not drop anyone until accepted."""
    expand: bool
    replica_ids: frozenset[int]          # the member added, or the members dropped
    sent: LeaderAndIsr
    last_committed_isr: frozenset[int]


@dataclass
class ReplicationContext:
    """What a leader needs from outside the partition: the lag limit, the controller channel,
    who is alive, and how to wake the delayed operations waiting on this partition."""
    replica_lag_time_max_ms: int = 30_000
    alter_partition_manager: Optional[AlterPartitionManager] = None
    is_broker_alive: Callable[[int], bool] = lambda _b: True
    complete_delayed_requests: Callable[[TopicPartition], None] = lambda _tp: None
    now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000
    mark_isr_change: Callable[[bool], None] = lambda _expand: None   # True: an expansion (metrics)


# Reads a partition directory's leader-epoch checkpoint (None: none to trust): the file itself,
# or what a LeaderAndIsr of many partitions read for it off the event loop.
EpochCheckpointReader = Callable[[Path], Optional[LeaderEpochCache]]


class Partition:
    def __init__(self, tp: TopicPartition, topic_id: uuid.UUID, log: Log, local_broker_id: int,
                 context: Optional[ReplicationContext] = None,
                 read_epoch_checkpoint: EpochCheckpointReader = LeaderEpochCache.load) -> None:
        self.tp = tp
        self.context = context or ReplicationContext()
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
        # the committed ISR: what the controller last sent or accepted
        self.isr: set[int] = set()
        # the committed ISR in the controller's order: proposals keep it (new members last), as
        # Kafka's insertion-ordered small sets do, so the ISR reads the same in Metadata
        self.isr_order: list[int] = []
        self.pending_isr_change: Optional[PendingIsrChange] = None
        self.remote_replicas: dict[int, ReplicaState] = {}
        # the high watermark with its position in the log, found when a waiting fetch first
        # needs it (Kafka's highWatermarkMetadata, converted lazily)
        self._high_watermark_metadata = LogOffsetMetadata(0)
        # the last stable offset's position while it is below the high watermark
        self._last_stable_offset_metadata: Optional[LogOffsetMetadata] = None
        # positions found before a truncation of the log are stale
        self._positions_truncations = log.truncations
        self.leader_epoch_cache = self._load_leader_epoch_cache(log, read_epoch_checkpoint)

    @staticmethod
    def _load_leader_epoch_cache(log: Log, read_epoch_checkpoint: EpochCheckpointReader) -> LeaderEpochCache:
        cache = read_epoch_checkpoint(log.dir)
        if cache is None:
            # No checkpoint (or an unreadable one): rebuild it from the batches' leader epochs.
            entries: list[tuple[int, int]] = []
            for h in log.iter_batch_headers():
                if h.partition_leader_epoch >= 0 and (not entries or h.partition_leader_epoch > entries[-1][0]):
                    entries.append((h.partition_leader_epoch, h.base_offset))
            cache = LeaderEpochCache(log.dir / "leader-epoch-checkpoint", entries)
            cache.flush()
        elif log.recovery_point < log.log_end_offset:
            # The checkpoint is fsynced by the log's flushes only: after a crash, epochs of the
            # unflushed tail may be missing from it (Kafka's recovery assigns them likewise).
            for h in log.iter_batch_headers(log.recovery_point):
                if h.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(h.partition_leader_epoch, h.base_offset)
        # Recovery may have cut a torn tail: epochs that start beyond the log end never happened.
        cache.truncate_from_end(log.log_end_offset)
        log.set_checkpoint_sync("leader-epoch-checkpoint", cache.sync)
        return cache

    # -- leadership (LeaderAndIsr) -----------------------------------------------------------
    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int],
                    partition_epoch: Optional[int] = None, controller_epoch: int = -1,
                    epoch_line_level: int = logging.INFO) -> bool:
        """Kafka's Partition.makeLeader: take the assignment and the committed ISR; a new leader
        epoch starts at the log end (leader epoch cache entry) and resets what is known of the
        followers. Skipped (False) when `partition_epoch` is older than the one already applied
        (None: no check). Returns whether this broker was not the leader. `epoch_line_level`:
        of the "starts at leader epoch" line (a LeaderAndIsr of thousands sums them up)."""
        if partition_epoch is not None and partition_epoch < self.partition_epoch:
            log.info("Skipped the become-leader state change for %s since the leader is already at a newer "
                     "partition epoch %d (request: %d)", self.tp, self.partition_epoch, partition_epoch)
            return False
        self.controller_epoch = controller_epoch
        is_new_leader = not self.is_leader
        is_new_leader_epoch = leader_epoch > self.leader_epoch
        now = self.context.now_ms()
        self.replicas = list(replicas)
        self.isr = set(isr)
        self.isr_order = list(isr)
        self.pending_isr_change = None
        followers = [b for b in replicas if b != self.local_broker_id]
        self.remote_replicas = {b: self.remote_replicas.get(b) or ReplicaState(b) for b in followers}
        if is_new_leader_epoch:
            start = self.log.log_end_offset
            if log.isEnabledFor(epoch_line_level):
                log.log(epoch_line_level, "Leader %s starts at leader epoch %d from offset %d with partition epoch "
                        "%s, high watermark %d, ISR %s. Previous leader %s and previous leader epoch was %d.",
                        self.tp, leader_epoch, start, partition_epoch, self.high_watermark, sorted(self.isr),
                        self.leader_id if self.leader_id >= 0 else None, self.leader_epoch)
            # Followers that saw later epochs must truncate against this one: record it now.
            self.leader_epoch_cache.assign(leader_epoch, start)
            for r in self.remote_replicas.values():
                r.reset(now, start, is_new_leader, r.broker_id in self.isr)
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = start
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        self.leader_id = self.local_broker_id
        # A new leader starts from what it has; the HW only moves forward from here.
        self.high_watermark = max(min(self.high_watermark, self.log.log_end_offset), self.log.log_start_offset)
        # A smaller ISR (a dead follower removed) may move the HW: acks=all produces waiting on it
        # complete now, not at their timeout (Kafka's makeLeader: tryCompleteDelayedRequests).
        if self.maybe_increment_high_watermark(now):
            self.context.complete_delayed_requests(self.tp)
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
        self.isr_order = []
        self.pending_isr_change = None
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

    @property
    def high_watermark(self) -> int:
        return self._high_watermark_metadata.message_offset

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        # at the log end (every append of a single-replica partition) the position is known;
        # elsewhere it is looked up only if a waiting fetch asks for it
        self._high_watermark_metadata = self.log.log_end_offset_metadata \
            if offset == self.log.log_end_offset else LogOffsetMetadata(offset)

    def _check_positions(self) -> None:
        truncations = self.log.truncations
        if truncations != self._positions_truncations:
            self._positions_truncations = truncations
            self._high_watermark_metadata = LogOffsetMetadata(self.high_watermark)
            self._last_stable_offset_metadata = None

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        """The high watermark and where it lies (Kafka's fetchHighWatermarkMetadata). Raises
        OffsetOutOfRangeError if it is outside the log."""
        metadata = self._high_watermark_metadata
        # checked by every waiting fetch on every append: the common case in two comparisons
        if metadata.segment_base_offset >= 0 and self._positions_truncations == self.log.truncations:
            return metadata
        self._check_positions()
        metadata = self._high_watermark_metadata
        if metadata.message_offset_only:
            metadata = self._high_watermark_metadata = self.log.convert_to_offset_metadata(metadata.message_offset)
        return metadata

    @property
    def last_stable_offset_metadata(self) -> LogOffsetMetadata:
        """The last stable offset and where it lies (Kafka's fetchLastStableOffsetMetadata)."""
        lso = self.last_stable_offset
        if lso == self.high_watermark:
            return self.high_watermark_metadata
        self._check_positions()
        metadata = self._last_stable_offset_metadata
        if metadata is None or metadata.message_offset != lso:
            metadata = self._last_stable_offset_metadata = self.log.convert_to_offset_metadata(lso)
        return metadata

    @property
    def maximal_isr(self) -> set[int]:
        """The committed ISR plus a member whose addition is pending (KIP-497): the HW waits for it."""
        change = self.pending_isr_change
        if change is not None and change.expand:
            return self.isr | change.replica_ids
        return self.isr

    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr()

    def maybe_increment_high_watermark(self, now_ms: Optional[int] = None) -> bool:
        """Kafka's maybeIncrementLeaderHW: the minimum log end offset over the maximal ISR and the
        followers that are caught up and could join it; never while under min ISR (KAFKA-15583),
        never backwards. True if the HW moved."""
        if not self.is_leader or self.is_under_min_isr():
            return False
        now = self.context.now_ms() if now_ms is None else now_ms
        leo = self.log.log_end_offset
        new_hw = leo
        maximal = self.maximal_isr
        lag = self.context.replica_lag_time_max_ms
        for r in self.remote_replicas.values():
            if r.log_end_offset < new_hw and (
                    r.broker_id in maximal
                    or (r.is_caught_up(leo, now, lag) and self.context.is_broker_alive(r.broker_id))):
                new_hw = r.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    # -- leader: follower fetches and the ISR ------------------------------------------------------
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, follower_log_start_offset: int,
                                    now_ms: int, leader_end_offset: int) -> bool:
        """Kafka's Partition.updateFollowerFetchState, after a follower's fetch was read: record its
        position, maybe add it to the ISR, maybe move the HW (waking delayed produces and fetches).
        False if `replica_id` is not a follower of this partition."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            return False
        previous_end, previous_start = replica.log_end_offset, replica.log_start_offset
        replica.update_fetch_state(fetch_offset, follower_log_start_offset, now_ms, leader_end_offset)
        self.maybe_expand_isr(replica, now_ms)
        hw_moved = previous_end != replica.log_end_offset and self.maybe_increment_high_watermark(now_ms)
        # a follower's log start moving may satisfy a waiting DeleteRecords (the low watermark)
        if hw_moved or previous_start != replica.log_start_offset:
            self.context.complete_delayed_requests(self.tp)
        return True

    def low_watermark(self) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start offset over this log and the live
        followers (-1 while one of them has not fetched in this epoch)."""
        low = self.log.log_start_offset
        for r in self.remote_replicas.values():
            if r.log_start_offset < low and self.context.is_broker_alive(r.broker_id):
                low = r.log_start_offset
        return low

    def follower_not_recognized_error(self, current_leader_epoch: int) -> ErrorCode:
        """Kafka's followerReplicaOrThrow: a fetching broker that is not a replica retries."""
        return ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 else ErrorCode.NOT_LEADER_OR_FOLLOWER

    def _follower_in_sync(self, replica: ReplicaState) -> bool:
        # caught up to the HW, and to an offset of the current leader epoch: otherwise a replica
        # missing committed data between the HW and this leader's LEO could become leader
        start = self.leader_epoch_start_offset
        return replica.log_end_offset >= self.high_watermark and start is not None \
            and replica.log_end_offset >= start

    def maybe_expand_isr(self, replica: ReplicaState, now_ms: int) -> None:
        """Kafka's maybeExpandIsr: a follower not in the ISR that reached the HW in this epoch is
        proposed to the controller (one change in flight at a time)."""
        if (not self.is_leader or self.pending_isr_change is not None or replica.broker_id in self.isr
                or not self.context.is_broker_alive(replica.broker_id) or not self._follower_in_sync(replica)):
            return
        self._submit_isr_change(True, frozenset({replica.broker_id}), self.isr_order + [replica.broker_id])

    def out_of_sync_replicas(self, now_ms: int) -> set[int]:
        """Kafka's getOutOfSyncReplicas: ISR followers not caught up within replica.lag.time.max.ms
        (none while a change is in flight)."""
        if self.pending_isr_change is not None or not self.is_leader:
            return set()
        leo = self.log.log_end_offset
        lag = self.context.replica_lag_time_max_ms
        out = set()
        for b in self.isr:
            if b == self.local_broker_id:
                continue
            r = self.remote_replicas.get(b)
            if r is None or not r.is_caught_up(leo, now_ms, lag):
                out.add(b)
        return out

    def maybe_shrink_isr(self, now_ms: Optional[int] = None) -> bool:
        """Kafka's maybeShrinkIsr (the leader's periodic ISR expiration): propose the ISR without
        the followers that fell behind. True if a shrink was proposed."""
        now = self.context.now_ms() if now_ms is None else now_ms
        out = self.out_of_sync_replicas(now)
        if not out:
            return False
        details = " ".join(
            f"(brokerId: {b}, endOffset: {self.remote_replicas[b].log_end_offset if b in self.remote_replicas else 'unknown'}, "
            f"lastCaughtUpTimeMs: {self.remote_replicas[b].last_caught_up_time_ms if b in self.remote_replicas else 'unknown'})"
            for b in sorted(out))
        log.info("[Partition %s] Shrinking ISR from %s to %s. Leader: (highWatermark: %d, endOffset: %d). "
                 "Out of sync replicas: %s.", self.tp, ",".join(map(str, self.isr_order)),
                 ",".join(str(b) for b in self.isr_order if b not in out), self.high_watermark, self.log.log_end_offset, details)
        self._submit_isr_change(False, frozenset(out), [b for b in self.isr_order if b not in out])
        return True

    def _submit_isr_change(self, expand: bool, replica_ids: frozenset[int], new_isr: list[int]) -> None:
        manager = self.context.alter_partition_manager
        if manager is None:
            return      # no controller channel (unit tests of the leader alone): the ISR stays as it is
        sent = LeaderAndIsr(self.local_broker_id, self.leader_epoch, tuple(new_isr),
                            LEADER_RECOVERY_RECOVERED, self.partition_epoch)
        change = PendingIsrChange(expand, replica_ids, sent, frozenset(self.isr))
        self.pending_isr_change = change
        self._send_isr_change(manager, change)

    def _send_isr_change(self, manager: AlterPartitionManager, change: PendingIsrChange) -> None:
        log.debug("[Partition %s] Submitting ISR state change %s", self.tp, change)
        future = manager.submit(self.tp, self.topic_id, change.sent, self.controller_epoch)
        future.add_done_callback(lambda f: self._on_isr_change_answer(manager, change, f))

    def _on_isr_change_answer(self, manager: AlterPartitionManager, change: PendingIsrChange,
                              future: "asyncio.Future[LeaderAndIsr]") -> None:
        """Kafka's submitAlterPartition completion: an answer to a change that is no longer the
        pending one (a LeaderAndIsr overtook it) is ignored."""
        if self.pending_isr_change is not change:
            log.debug("[Partition %s] Ignoring the answer to ISR update %s: the state changed since", self.tp, change)
            return
        if future.cancelled():
            return
        exc = future.exception()
        if exc is None:
            if self._apply_accepted_isr(future.result()):
                self.context.complete_delayed_requests(self.tp)
            return
        code = exc.code if isinstance(exc, KafkaApiError) else ErrorCode.UNKNOWN_SERVER_ERROR
        if code in (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA):
            # the controller says the partition epoch is right and nothing was applied
            self.pending_isr_change = None
            log.info("[Partition %s] Failed to alter partition to %s since the controller rejected the request "
                     "with %s. Partition state has been reset to the latest committed state (isr=%s).",
                     self.tp, change, code.name, sorted(self.isr))
        elif code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                      ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST,
                      ErrorCode.NEW_LEADER_ELECTED):
            # stays pending until a LeaderAndIsr brings the controller's state
            log.debug("[Partition %s] Failed to alter partition to %s: %s; awaiting new metadata",
                      self.tp, change, code.name)
        else:
            log.warning("[Partition %s] Failed to update ISR to %s due to unexpected %s. Retrying.",
                        self.tp, change, code.name)
            self._send_isr_change(manager, change)

    def _apply_accepted_isr(self, accepted: LeaderAndIsr) -> bool:
        """Kafka's handleAlterPartitionUpdate: the controller's ISR becomes the committed one unless
        the epochs moved on meanwhile. True if the HW moved."""
        if accepted.leader_epoch != self.leader_epoch or accepted.partition_epoch < self.partition_epoch:
            log.debug("[Partition %s] Ignoring new ISR %s: stale against leader epoch %d / partition epoch %d",
                      self.tp, accepted, self.leader_epoch, self.partition_epoch)
            return False
        self.isr = set(accepted.isr)
        self.isr_order = list(accepted.isr)
        if self.pending_isr_change is not None:   # Kafka's IsrExpandsPerSec / IsrShrinksPerSec
            self.context.mark_isr_change(self.pending_isr_change.expand)
        self.pending_isr_change = None
        self.partition_epoch = accepted.partition_epoch
        log.info("[Partition %s] ISR updated to %s%s and version updated to %d", self.tp,
                 ",".join(map(str, self.isr_order)), " (under-min-isr)" if self.is_under_min_isr() else "",
                 self.partition_epoch)
        return self.maybe_increment_high_watermark()

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
        self.maybe_increment_high_watermark(now_ms)
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For DelayedProduce: has the ISR got everything up to required_offset?"""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            # the records may have been appended before the ISR shrank below min.insync.replicas
            if len(self.maximal_isr) < self.effective_min_isr():
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    # -- follower (replication) --------------------------------------------------------------
    # (the fetcher's side: appends of the leader's batches, truncation, the leader's HW and log start)
    def append_records_to_follower(self, records: bytes | memoryview):
        """Kafka's appendRecordsToFollowerOrFutureReplica / UnifiedLog.appendAsFollower: the
        leader's batches as they are (offsets, epochs, timestamps); a batch whose leader epoch is
        newer than the cache's latest starts that epoch at its base offset, so this replica can
        answer OffsetForLeaderEpoch (and truncate) the way the leader would."""
        try:
            info = self.log.append_as_follower(records)
        except UnexpectedAppendOffsetError as e:
            end = self.log.log_end_offset
            if not (end == self.log.log_start_offset and e.first_offset < end <= e.last_offset):
                raise
            # The leader's log start (DeleteRecords) fell inside the batch this empty log asked
            # for: start the log at the batch's base instead (Kafka does the same); the leader's
            # log start, taken after the append, moves ours back up.
            log.info("[Partition %s broker=%d] Unexpected offset in append to %s. First offset %d is less than "
                     "log start offset %d. Since this is the first record to be appended to the follower's log, "
                     "will start the log from offset %d.", self.tp, self.local_broker_id, self.tp,
                     e.first_offset, end, e.first_offset)
            self.truncate_fully_and_start_at(e.first_offset)
            info = self.log.append_as_follower(records)
        if info.num_batches:
            batches, _valid = split_batches(records if isinstance(records, memoryview) else memoryview(records))
            for _pos, h in batches:
                if h.partition_leader_epoch > self.leader_epoch_cache.latest_epoch:
                    self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        return info

    def truncate_to(self, offset: int) -> None:
        """Kafka's Partition.truncateTo / UnifiedLog.truncateTo: the log and the leader-epoch
        cache lose everything from `offset` on; the HW is capped at the new log end. At or past
        the log end nothing changes (an epoch entry starting at the log end stays)."""
        if offset >= self.log.log_end_offset:
            return
        log.info("[Partition %s broker=%d] Truncating to offset %d (log end offset %d)",
                           self.tp, self.local_broker_id, offset, self.log.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(offset)
        self.log.truncate_to(offset)
        self.high_watermark = max(min(self.high_watermark, self.log.log_end_offset), self.log.log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Kafka's truncateFullyAndStartAt: every segment goes, the log restarts empty at
        `offset` (the leader's log start, beyond our end), the epoch cache is cleared, HW there."""
        log.info("[Partition %s broker=%d] Truncating fully and starting at offset %d "
                           "(log end offset %d)", self.tp, self.local_broker_id, offset, self.log.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(0)   # Kafka's clearAndFlush: every entry starts >= 0
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """Kafka's UnifiedLog.maybeUpdateHighWatermark on a follower: the leader's HW, clamped to
        [log start, log end]. It follows the leader's, so it may go back (a new leader's HW can be
        behind the old one's). Returns whether it changed."""
        start, end = self.log.log_start_offset, self.log.log_end_offset
        new_hw = start if leader_high_watermark < start else min(leader_high_watermark, end)
        if new_hw == self.high_watermark:
            return False
        self.high_watermark = new_hw
        # completed transactions whose markers are below the HW no longer hold the LSO back
        self.log.producer_state.on_high_watermark_updated(new_hw)
        return True

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Kafka's maybeIncrementLogStartOffset(LeaderOffsetIncremented): follow the leader's log
        start forward (retention, DeleteRecords), never past our HW (raises
        OffsetOutOfRangeError then, as Kafka does). Returns whether it moved."""
        if not self.log.maybe_increment_log_start_offset(leader_log_start_offset, high_watermark=self.high_watermark,
                                                         reason=LEADER_OFFSET_INCREMENTED):
            return False
        self.leader_epoch_cache.truncate_from_start(self.log.log_start_offset)
        return True

    def latest_epoch(self) -> Optional[int]:
        """The latest leader epoch this replica's log has (None: no epoch recorded)."""
        epoch = self.leader_epoch_cache.latest_epoch
        return None if epoch < 0 else epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, where it ends) in this replica's log; (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log.log_end_offset)

    # -- end follower --

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

    def fetch_upper_bound_metadata(self, isolation_level: int, is_follower: bool) -> LogOffsetMetadata:
        """Where a fetch may read up to, with its position (Kafka's FetchIsolation: the log end
        for followers, the last stable offset for read_committed, else the high watermark)."""
        if is_follower:
            return self.log.log_end_offset_metadata
        return self.last_stable_offset_metadata if isolation_level == 1 else self.high_watermark_metadata
