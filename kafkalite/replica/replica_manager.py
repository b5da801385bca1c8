"""ReplicaManager: the partitions this broker hosts, appends and reads through them, and the
delayed produce/fetch operations that wait in purgatory."""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional

from kafkalite.cluster.metadata_cache import BrokerInfo, MetadataCache, UpdateMetadataPartitionState
from kafkalite.config.log_config import LogConfig
from kafkalite.log.checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from kafkalite.log.errors import (CorruptRecordError, DecompressionError, KafkaStorageError,
                                  RecordBatchTooLargeError, RecordTooLargeError)
from kafkalite.log.leader_epoch_cache import LeaderEpochCache
from kafkalite.log.log import ORIGIN_CLIENT, Log
from kafkalite.log.log_offset_metadata import LogOffsetMetadata
from kafkalite.log.record_batch import split_batches
from kafkalite.log.log_manager import LogManager, log_delete_dir_name
from kafkalite.metrics.stats import BrokerTopicStats, IsrChangeStats
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.purgatory import DelayedOperationPurgatory
from kafkalite.replica.delayed_delete_records import DeleteRecordsPartitionStatus, DelayedDeleteRecords
from kafkalite.replica.delayed_fetch import DelayedFetch, FetchPartitionStatus
from kafkalite.replica.delayed_produce import DelayedProduce
from kafkalite.replica.control_states import (EPOCH_DURING_DELETE, NO_EPOCH, LeaderAndIsrPartitionState,
                                              StopReplicaPartitionState)
from kafkalite.replica.partition import EpochCheckpointReader, Partition, ReplicationContext, TopicPartition
from kafkalite.replica.replica_selector import ClientMetadata, ReplicaSelector, preferred_read_replica_of
from kafkalite.slices import OffLoop, SliceClock, Steps, run_at_once, run_in_slices
from kafkalite.replica.results import (FetchPartitionRequest, FetchPartitionResult,
                                       ListOffsetsPartitionResult, ProducePartitionResult)

if TYPE_CHECKING:
    from kafkalite.replica.alter_partition_manager import AlterPartitionManager
    from kafkalite.replica.fetcher.fetch_state import InitialFetchState
    from kafkalite.replica.fetcher.replica_fetcher_manager import ReplicaFetcherManager

log = logging.getLogger(__name__)

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

# Fetch / ListOffsets isolation levels
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


ZERO_UUID = uuid.UUID(int=0)
# Kafka's ReplicaManager.HighWatermarkFilename: each log dir's high watermarks, so a restarted
# leader or follower starts from what was known committed rather than from the log start
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
# a LeaderAndIsr making more leaders than this logs their new epochs in one INFO line
LEADER_EPOCH_LINES_MAX = 100
# Kafka's KafkaController.InitialControllerEpoch: the highest controller epoch seen before any request
INITIAL_CONTROLLER_EPOCH = 0

# Leadership listeners: told after a LeaderAndIsr / StopReplica is applied (the coordinators load or
# unload their `__consumer_offsets` / `__transaction_state` partitions; the leader epoch is their
# coordinator epoch).
BecameLeaderListener = Callable[[TopicPartition, int], None]
BecameFollowerOrStoppedListener = Callable[[TopicPartition], None]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _error_of(exc: Exception) -> tuple[ErrorCode, Optional[str]]:
    if isinstance(exc, KafkaApiError):
        return exc.code, exc.message
    code = getattr(exc, "error_code", None)
    if code is not None:
        return ErrorCode(code), str(exc) or None
    log.exception("unexpected error in the replica manager")
    return ErrorCode.UNKNOWN_SERVER_ERROR, None


def _append_error_of(tp: TopicPartition, exc: Exception) -> tuple[ErrorCode, Optional[str]]:
    """An append's error code and message. A batch that does not decompress is Kafka's uncaught
    KafkaException: ReplicaManager logs "Error processing append operation on partition" at ERROR
    and the client gets UNKNOWN_SERVER_ERROR with no message (ApiError hides it)."""
    if isinstance(exc, DecompressionError):
        log.error("Error processing append operation on partition %s-%d (%s batch): %s",
                  tp.topic, tp.partition, exc.codec, exc)
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    return _error_of(exc)


# Append failures Kafka answers with LogAppendInfo.UNKNOWN_LOG_APPEND_INFO (log start offset -1).
_UNKNOWN_APPEND_INFO_ERRORS = (CorruptRecordError, RecordTooLargeError, RecordBatchTooLargeError, KafkaStorageError)
_UNKNOWN_APPEND_INFO_CODES = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def _unknown_append_info(exc: Exception) -> bool:
    return isinstance(exc, _UNKNOWN_APPEND_INFO_ERRORS) or \
        (isinstance(exc, KafkaApiError) and exc.code in _UNKNOWN_APPEND_INFO_CODES)


def _start_offset_metadata(result: FetchPartitionResult, info: FetchPartitionRequest) -> LogOffsetMetadata:
    metadata = result.data.fetch_offset_metadata if result.data is not None else None
    return metadata if metadata is not None else LogOffsetMetadata(info.fetch_offset)


def _log_start_offset(partition: Optional["Partition"]) -> int:
    return partition.log.log_start_offset if partition is not None else -1


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 metadata_cache: Optional[MetadataCache] = None, *,
                 replica_lag_time_max_ms: int = 30_000,
                 alter_partition_manager: Optional["AlterPartitionManager"] = None,
                 replica_selector: Optional[ReplicaSelector] = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        # the cluster view: tells "not hosted here but the topic exists" (NOT_LEADER_OR_FOLLOWER)
        # from "unknown" and which brokers are alive; UpdateMetadata lands in it through us
        self.metadata_cache = metadata_cache
        self.partitions: dict[TopicPartition, Partition] = {}
        # the highest controller epoch seen in LeaderAndIsr / StopReplica / UpdateMetadata: requests
        # of an older controller are refused
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        # LeaderAndIsr and StopReplica, which yield between slices, run one at a time
        self._replica_state_change_lock = asyncio.Lock()
        # Each purgatory owns its timing wheel, as in Kafka.
        self.produce_purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory("Produce")
        self.fetch_purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory("Fetch")
        self.delete_records_purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory("DeleteRecords")
        # Kafka's BrokerTopicStats and ISR meters (kafkalite.metrics reads them)
        self.broker_topic_stats, self.isr_change_stats = BrokerTopicStats(), IsrChangeStats()
        # Listeners told when a partition's high watermark moves (e.g. fetch sessions, coordinators).
        self._hw_listeners: list[Callable[[TopicPartition], None]] = []
        self._leadership_listeners: list[tuple[BecameLeaderListener, BecameFollowerOrStoppedListener]] = []
        # Kafka's HostedPartition.Offline: the log could not be created (out of descriptors,
        # memory or disk); clients get KAFKA_STORAGE_ERROR, the next LeaderAndIsr tries again.
        self.offline_partitions: set[TopicPartition] = set()
        # leaders whose last append failed on storage (a full disk): logged once when it starts
        # and once when appends succeed again, not per produce request
        self._append_storage_failures: set[TopicPartition] = set()
        # each log dir's high-watermark checkpoint as read once, for partitions created later
        self._hw_checkpoints: dict[Path, dict[tuple[str, int], int]] = {}
        # what a leader partition needs to keep its ISR (Kafka passes these to each Partition)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.alter_partition_manager = alter_partition_manager
        # KIP-392 (replica.selector.class): which replica a consumer should read; None: the leader
        self.replica_selector = replica_selector
        # the follower side: set by the broker once built (it needs this manager)
        self.fetcher_manager: Optional["ReplicaFetcherManager"] = None
        self._replication_context = ReplicationContext(
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            alter_partition_manager=alter_partition_manager,
            is_broker_alive=self._broker_alive,
            complete_delayed_requests=self._complete_delayed_and_notify,
            mark_isr_change=self.isr_change_stats.mark)

    # -- leadership (the embedded single-node controller's direct calls) ----------------------
    def become_leader(self, tp: TopicPartition, topic_id: uuid.UUID, leader_epoch: int,
                      replicas: list[int], isr: list[int], config: LogConfig) -> Partition:
        partition = self._get_or_create_partition(tp, topic_id, config)
        partition.make_leader(leader_epoch, replicas, isr)
        return partition

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        self._append_storage_failures.discard(tp)
        if partition is None:
            return
        # Waiting operations on this partition complete now with an error rather than time out.
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        if delete:
            self.log_manager.delete_log(tp.topic, tp.partition)

    def _get_or_create_partition(self, tp: TopicPartition, topic_id: Optional[uuid.UUID],
                                 config: LogConfig,
                                 read_epoch_checkpoint: EpochCheckpointReader = LeaderEpochCache.load
                                 ) -> Partition:
        """The hosted partition, created with its log (opened or made empty) if absent. Raises
        the log layer's errors (KafkaStorageError, InconsistentTopicIdError)."""
        partition = self.partitions.get(tp)
        if partition is None:
            try:
                log_ = self.log_manager.get_or_create_log(tp.topic, tp.partition, config, topic_id=topic_id)
            except KafkaStorageError:
                self.offline_partitions.add(tp)
                raise
            self.offline_partitions.discard(tp)
            partition = Partition(tp, topic_id or log_.topic_id or ZERO_UUID, log_, self.broker_id,
                                  self._replication_context, read_epoch_checkpoint)
            # Kafka's createLogIfNotExists: the checkpointed HW, kept within the log's offsets
            checkpointed = self._checkpointed_high_watermark(self.log_manager.log_dir_of(tp) or log_.dir.parent, tp)
            partition.high_watermark = max(min(checkpointed, log_.log_end_offset), log_.log_start_offset)
            self.partitions[tp] = partition
        elif topic_id is not None and partition.log.topic_id is None:
            partition.log.assign_topic_id(topic_id)
            partition.topic_id = topic_id
        if partition.log.config is not config and partition.log.config != config:
            # Logs opened at start-up got the broker defaults; the topic's own overrides (from
            # the metadata store) apply from here on.
            partition.log.update_config(config)
        return partition

    # -- high-watermark checkpoints ------------------------------------------------------------
    def _checkpointed_high_watermark(self, log_dir: Path, tp: TopicPartition) -> int:
        entries = self._hw_checkpoints.get(log_dir)
        if entries is None:
            try:
                entries = read_offset_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT_FILE)
            except (CheckpointError, OSError) as e:
                log.warning("Error reading %s in %s, high watermarks start from the log start: %s",
                            HIGH_WATERMARK_CHECKPOINT_FILE, log_dir, e)
                entries = {}
            self._hw_checkpoints[log_dir] = entries
        return entries.get((tp.topic, tp.partition), 0)

    def high_watermarks_by_dir(self) -> dict[Path, dict[tuple[str, int], int]]:
        """What the checkpoint files would hold now: each log dir's hosted partitions' HWs."""
        out: dict[Path, dict[tuple[str, int], int]] = {}
        dir_of = self.log_manager.log_dir_of
        for tp, p in self.partitions.items():
            # the log manager's shared Path per log dir: a log.dir.parent per partition builds and
            # hashes a new Path each time (a third of this at 10,000 partitions)
            out.setdefault(dir_of(tp) or p.log.dir.parent, {})[(tp.topic, tp.partition)] = p.high_watermark
        return out

    @staticmethod
    def write_high_watermark_checkpoints(snapshot: Mapping[Path, Mapping[tuple[str, int], int]]) -> None:
        """Write a snapshot from high_watermarks_by_dir (blocking file I/O: off the loop)."""
        for log_dir, entries in snapshot.items():
            write_offset_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT_FILE, entries)

    async def checkpoint_high_watermarks(self) -> None:
        """Kafka's checkpointHighWatermarks (every replica.high.watermark.checkpoint.interval.ms and
        at shutdown): the snapshot is taken on the loop, the files written in a thread."""
        snapshot = self.high_watermarks_by_dir()
        if snapshot:
            await asyncio.to_thread(self.write_high_watermark_checkpoints, snapshot)

    # -- leadership listeners ------------------------------------------------------------------
    def add_leadership_listener(self, on_became_leader: BecameLeaderListener,
                                on_became_follower_or_stopped: BecameFollowerOrStoppedListener) -> None:
        """Kafka's onLeadershipChange callback: `on_became_leader(tp, leader_epoch)` for each
        partition this broker newly leads, `on_became_follower_or_stopped(tp)` for each partition
        that became a follower at a new leader epoch or was stopped with deletion; called after
        the change is applied, in request order."""
        self._leadership_listeners.append((on_became_leader, on_became_follower_or_stopped))

    def _notify_leadership(self, leaders: list[Partition], followers: list[TopicPartition]) -> None:
        for on_leader, on_follower in list(self._leadership_listeners):
            for p in leaders:
                try:
                    on_leader(p.tp, p.leader_epoch)
                except Exception:
                    log.exception("leadership listener failed for %s", p.tp)
            for tp in followers:
                try:
                    on_follower(tp)
                except Exception:
                    log.exception("leadership listener failed for %s", tp)

    # -- LeaderAndIsr --------------------------------------------------------------------------
    def _is_alive_broker(self, broker_id: int, live_leaders: frozenset[int]) -> bool:
        # Kafka asks its metadata cache; without one (tests, the embedded mode) the request's
        # live leaders stand in
        if self.metadata_cache is not None:
            return self.metadata_cache.has_alive_broker(broker_id)
        return broker_id in live_leaders

    def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                  partition_states: Iterable[LeaderAndIsrPartitionState],
                                  topic_ids: Mapping[str, uuid.UUID], live_leaders: Iterable[int],
                                  log_config_for: Callable[[str], LogConfig], *,
                                  is_kraft_controller: bool = False
                                  ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """The LeaderAndIsr request applied in one go (see `_become_leader_or_follower_steps`)."""
        return run_at_once(self._become_leader_or_follower_steps(
            controller_id, controller_epoch, partition_states, topic_ids, live_leaders, log_config_for,
            is_kraft_controller=is_kraft_controller))

    async def become_leader_or_follower_in_slices(
            self, controller_id: int, controller_epoch: int, partition_states: Iterable[LeaderAndIsrPartitionState],
            topic_ids: Mapping[str, uuid.UUID], live_leaders: Iterable[int], log_config_for: Callable[[str], LogConfig],
            *, is_kraft_controller: bool = False) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """The same, yielding to the event loop every few ms: creating the logs of a
        1,000-partition topic takes over a second. LeaderAndIsr and StopReplica requests run one
        at a time (Kafka's replicaStateChangeLock): a new controller's request waits for an old
        one's slices to end. Clients meanwhile see the partitions not yet made as not led here,
        as they would before the request."""
        async with self._replica_state_change_lock:
            return await run_in_slices(self._become_leader_or_follower_steps(
                controller_id, controller_epoch, partition_states, topic_ids, live_leaders, log_config_for,
                is_kraft_controller=is_kraft_controller))

    def _become_leader_or_follower_steps(self, controller_id: int, controller_epoch: int,
                                         partition_states: Iterable[LeaderAndIsrPartitionState],
                                         topic_ids: Mapping[str, uuid.UUID], live_leaders: Iterable[int],
                                         log_config_for: Callable[[str], LogConfig], *,
                                         is_kraft_controller: bool = False
                                         ) -> Steps[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]]:
        """Kafka's ReplicaManager.becomeLeaderOrFollower: (top-level error, error per partition).

        A controller epoch older than the highest seen refuses the whole request
        (STALE_CONTROLLER_EPOCH, no partitions). Per partition, in Kafka's order: a topic id
        different from the log's is INCONSISTENT_TOPIC_ID; a leader epoch newer than the
        partition's (or equal, from a KRaft controller) applies the state if this broker is
        among the replicas (UNKNOWN_TOPIC_OR_PARTITION otherwise); an older one is
        STALE_CONTROLLER_EPOCH; an equal one only assigns a topic id the log lacks (NONE) or is
        STALE_CONTROLLER_EPOCH. Leaders are made before followers; a follower whose leader is not
        alive only gets its log. Storage failures are KAFKA_STORAGE_ERROR for that partition."""
        if controller_epoch < self.controller_epoch:
            log.warning("Ignoring LeaderAndIsr request from controller %d since its controller epoch %d is old. "
                        "Latest known controller epoch is %d", controller_id, controller_epoch, self.controller_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        live = frozenset(live_leaders)
        # one topic's config for all its partitions (built from the dynamic configs each call);
        # re-checked at the end, since an AlterConfigs may be applied between the slices
        configs: dict[str, LogConfig] = {}

        def config_of(topic: str) -> LogConfig:
            config = configs.get(topic)
            if config is None:
                config = configs[topic] = log_config_for(topic)
            return config

        request_topic_ids: dict[str, Optional[uuid.UUID]] = {}

        def topic_id_of(topic: str) -> Optional[uuid.UUID]:
            # once per topic: a UUID compares in Python, and a restart asks 10,000 times
            if topic not in request_topic_ids:
                tid = topic_ids.get(topic)
                request_topic_ids[topic] = None if tid is None or tid == ZERO_UUID else tid
            return request_topic_ids[topic]

        errors: dict[TopicPartition, ErrorCode] = {}
        to_lead: list[LeaderAndIsrPartitionState] = []
        to_follow: list[LeaderAndIsrPartitionState] = []
        # the existing logs of the partitions not hosted yet (all of them at start-up)
        unhosted_logs: dict[TopicPartition, Log] = {}
        for state in partition_states:
            tp = TopicPartition(state.topic, state.partition)
            errors[tp] = ErrorCode.NONE     # keeps request order; overwritten below
            partition = self.partitions.get(tp)
            if partition is not None:
                current_epoch = partition.leader_epoch
                existing_log: Optional[Log] = partition.log
            else:
                current_epoch = -1
                existing_log = self.log_manager.get_log(tp)
                if existing_log is not None:
                    unhosted_logs[tp] = existing_log
            log_topic_id = existing_log.topic_id if existing_log is not None else None
            request_topic_id = topic_id_of(state.topic)
            if request_topic_id is not None and log_topic_id is not None and request_topic_id != log_topic_id:
                log.error("Topic ID in memory: %s does not match the topic ID for partition %s received: %s.",
                          log_topic_id, tp, request_topic_id)
                errors[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
            elif state.leader_epoch > current_epoch or (state.leader_epoch == current_epoch and is_kraft_controller):
                if self.broker_id in state.replicas:
                    (to_lead if state.leader == self.broker_id else to_follow).append(state)
                else:
                    log.warning("Ignoring LeaderAndIsr request from controller %d epoch %d for partition %s as "
                                "itself is not in assigned replica list %s", controller_id, controller_epoch, tp,
                                ",".join(map(str, state.replicas)))
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state.leader_epoch < current_epoch:
                log.warning("Ignoring LeaderAndIsr request from controller %d epoch %d for partition %s since its "
                            "associated leader epoch %d is smaller than the current leader epoch %d",
                            controller_id, controller_epoch, tp, state.leader_epoch, current_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            elif request_topic_id is not None and log_topic_id is None and partition is not None:
                # the controller moving to topic ids without bumping the epoch: the log takes it
                partition.log.assign_topic_id(request_topic_id)
                partition.topic_id = request_topic_id
            elif request_topic_id is None and log_topic_id is not None and state.leader != self.broker_id:
                pass   # a downgrade away from topic ids: only a fetcher's state would change
            else:
                log.info("Ignoring LeaderAndIsr request from controller %d epoch %d for partition %s since its "
                         "associated leader epoch %d matches the current leader epoch",
                         controller_id, controller_epoch, tp, state.leader_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH

        # The logs of partitions new here are created first, off the loop when run in slices
        # (each has files to create and fsync); registered here, on the loop.
        new_logs = [(st.topic, st.partition, config_of(st.topic), topic_id_of(st.topic))
                    for st in to_lead + to_follow
                    if (tp := TopicPartition(st.topic, st.partition)) not in unhosted_logs
                    and tp not in self.partitions]
        if new_logs:
            opened = yield OffLoop(self.log_manager.new_logs_opener(new_logs))
            for key, (log_dir, new_log) in opened.items():
                yield
                self.log_manager.adopt_log(key, log_dir, new_log)
        # The leader-epoch checkpoints of the partitions made here (all of them at start-up) are
        # read together off the loop; nothing else writes them before their Partition exists.
        epoch_dirs = [(tp, lg.dir) for st in to_lead + to_follow
                      if (tp := TopicPartition(st.topic, st.partition)) not in self.partitions
                      and (lg := self.log_manager.get_log(tp)) is not None]
        epoch_checkpoints: dict[TopicPartition, Optional[LeaderEpochCache]] = {}
        if epoch_dirs:
            epoch_checkpoints = yield OffLoop(lambda: {tp: LeaderEpochCache.load(d) for tp, d in epoch_dirs})

        def read_epoch_checkpoint_of(tp: TopicPartition) -> EpochCheckpointReader:
            if tp in epoch_checkpoints:
                return lambda _dir: epoch_checkpoints[tp]
            return LeaderEpochCache.load

        # Kafka logs each new leader epoch at INFO; a LeaderAndIsr of thousands (a restart) says
        # it once, with the count, and each partition's line goes to DEBUG (~50 us a line on
        # the loop: half a second at 10,000 partitions)
        summed_up = len(to_lead) > LEADER_EPOCH_LINES_MAX
        epoch_line_level = logging.DEBUG if summed_up else logging.INFO
        became_leader: list[Partition] = []
        for state in to_lead:
            yield   # one partition per step
            tp = TopicPartition(state.topic, state.partition)
            try:
                p = self._get_or_create_partition(tp, topic_id_of(state.topic), config_of(state.topic),
                                                  read_epoch_checkpoint_of(tp))
                if p.make_leader(state.leader_epoch, list(state.replicas), list(state.isr),
                                 state.partition_epoch, state.controller_epoch, epoch_line_level):
                    became_leader.append(p)
            except KafkaStorageError as e:
                log.error("Skipped the become-leader state change for partition %s since the replica for the "
                          "partition is offline due to storage error %s", tp, e)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        if summed_up:
            log.info("Applied the leader state of %d partitions from the LeaderAndIsr request of controller %d "
                     "epoch %d (each new leader epoch's line at DEBUG)", len(to_lead), controller_id,
                     controller_epoch)
        became_follower: list[Partition] = []
        for state in to_follow:
            yield
            try:
                p = self._get_or_create_partition(state.tp, topic_id_of(state.topic), config_of(state.topic),
                                                  read_epoch_checkpoint_of(state.tp))
                if self._is_alive_broker(state.leader, live):
                    if p.make_follower(state.leader, state.leader_epoch, list(state.replicas), list(state.isr),
                                       state.partition_epoch, state.controller_epoch):
                        became_follower.append(p)
                else:
                    # Kafka keeps the state as it was and only makes sure the log exists
                    log.error("Received LeaderAndIsr request from controller %d epoch %d for partition %s but "
                              "cannot become follower since the new leader %d is unavailable.",
                              controller_id, controller_epoch, state.tp, state.leader)
            except KafkaStorageError as e:
                log.error("Skipped the become-follower state change for partition %s since the replica for the "
                          "partition is offline due to storage error %s", state.tp, e)
                errors[state.tp] = ErrorCode.KAFKA_STORAGE_ERROR
        for topic, cached in configs.items():
            current = log_config_for(topic)
            if current != cached:    # changed while this request ran: the partitions made since keep it
                for state in to_lead + to_follow:
                    p = self.partitions.get(state.tp) if state.topic == topic else None
                    if p is not None and p.log.config != current:
                        p.log.update_config(current)
        fetchers = self.fetcher_manager
        if fetchers is not None:
            # a new leader stops fetching; a follower of a new epoch restarts from its own log
            fetchers.remove_fetcher_for_partitions([p.tp for p in became_leader] + [p.tp for p in became_follower])
        for p in became_follower:
            # produce and fetch waiting on a former leader answer now (NOT_LEADER_OR_FOLLOWER)
            self._complete_delayed(p.tp)
        if fetchers is not None:
            if became_follower:
                fetchers.add_fetcher_for_partitions({p.tp: self._initial_fetch_state(p) for p in became_follower})
            # Kafka's shutdownIdleFetcherThreads: a fetcher whose leader leads nothing of ours stops
            fetchers.shutdown_idle_fetchers()
        self._notify_leadership(became_leader, [p.tp for p in became_follower])
        return ErrorCode.NONE, errors

    @staticmethod
    def _initial_fetch_state(p: Partition) -> "InitialFetchState":
        """Kafka's makeFollowers: with truncation on fetch, a follower whose log has leader epochs
        fetches from its log end and lets the leader's diverging-epoch answer truncate it; without
        epochs it starts from (and truncates to) its high watermark."""
        from kafkalite.replica.fetcher.fetch_state import InitialFetchState
        latest = p.latest_epoch()
        offset = p.log_end_offset if latest is not None else p.high_watermark
        return InitialFetchState(p.topic_id, p.leader_id, p.leader_epoch, offset, latest)

    # -- StopReplica ---------------------------------------------------------------------------
    async def stop_replicas(self, controller_id: int, controller_epoch: int,
                            partition_states: Mapping[TopicPartition, StopReplicaPartitionState]
                            ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka's ReplicaManager.stopReplicas, one at a time with LeaderAndIsr (see
        `_stop_replicas`): a deletion never lands between the slices of a LeaderAndIsr that would
        create the partition again."""
        async with self._replica_state_change_lock:
            return await self._stop_replicas(controller_id, controller_epoch, partition_states)

    async def _stop_replicas(self, controller_id: int, controller_epoch: int,
                             partition_states: Mapping[TopicPartition, StopReplicaPartitionState]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka's ReplicaManager.stopReplicas: (top-level error, error per partition).

        An old controller epoch is STALE_CONTROLLER_EPOCH with no partitions. A hosted partition is
        stopped when the request's leader epoch is -2 (topic deletion), -1 (no epoch: v0-2) or at
        least the partition's; older is FENCED_LEADER_EPOCH. A partition not hosted is stopped
        too (its log, if any, deleted when asked: a topic deleted while this broker was down).
        Without deletion the partition stays hosted in its last state (Kafka only stops its
        fetcher); with deletion it goes and its log is deleted: the directory renamed at once
        (a crash finishes the deletion at start-up), its files removed off the loop."""
        if controller_epoch < self.controller_epoch:
            log.warning("Ignoring StopReplica request from controller %d since its controller epoch %d is old. "
                        "Latest known controller epoch is %d", controller_id, controller_epoch, self.controller_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        stopped: list[tuple[TopicPartition, bool]] = []
        for tp, state in partition_states.items():
            partition = self.partitions.get(tp)
            if partition is not None and not (state.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH)
                                              or state.leader_epoch >= partition.leader_epoch):
                log.warning("Ignoring StopReplica request (delete=%s) from controller %d epoch %d for partition %s "
                            "since its associated leader epoch %d is smaller than the current leader epoch %d",
                            state.delete_partition, controller_id, controller_epoch, tp, state.leader_epoch,
                            partition.leader_epoch)
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            stopped.append((tp, state.delete_partition))
            errors[tp] = ErrorCode.NONE

        if self.fetcher_manager is not None:
            # Kafka's stopReplicas: the stopped partitions' fetchers go first
            self.fetcher_manager.remove_fetcher_for_partitions([tp for tp, _delete in stopped])
        to_delete: list[TopicPartition] = []
        for tp, delete in stopped:
            if delete:
                self.offline_partitions.discard(tp)
                self._append_storage_failures.discard(tp)   # a topic made again starts afresh
                self.partitions.pop(tp, None)
                to_delete.append(tp)
            # a former leader's waiting produce / fetch complete now instead of timing out
            self._complete_delayed(tp)
        failures = await self._delete_logs(to_delete)
        for tp, exc in failures.items():
            log.error("Ignoring StopReplica request (delete=true) from controller %d epoch %d for partition %s "
                      "due to %s", controller_id, controller_epoch, tp, exc)
            errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        self._notify_leadership([], [tp for tp in to_delete if tp not in failures])
        return ErrorCode.NONE, errors

    async def _delete_logs(self, tps: list[TopicPartition]) -> dict[TopicPartition, Exception]:
        """Delete the partitions' logs: each directory is renamed to its `-delete` name here (fast;
        the log manager removes such leftovers at start-up), the log manager forgets the log, and
        the files go in a worker thread after log.segment.delete.delay.ms, so a large log does
        not stall the loop."""
        failures: dict[TopicPartition, Exception] = {}
        doomed: list[Path] = []
        checkpoint_dirs: set[Path] = set()
        clock = SliceClock()     # thousands of partitions: the loop serves others every slice
        for tp in tps:
            await clock.tick()
            lg = self.log_manager.get_log(tp)
            if lg is None:
                continue
            try:
                target = lg.dir.with_name(log_delete_dir_name(tp.topic, tp.partition))
                os.rename(lg.dir, target)
                # the directory is gone from its name: the log manager's delete only closes the
                # log and forgets it; its directory's checkpoints are written once, below
                checkpoint_dirs.add(lg.dir.parent)
                self.log_manager.delete_log(tp.topic, tp.partition, checkpoint=False)
                doomed.append(target)
            except OSError as e:
                failures[tp] = e
        for d in sorted(checkpoint_dirs):
            self.log_manager.checkpoint_dir(d)
        # removed after log.segment.delete.delay.ms by the log manager (Kafka's asyncDelete)
        if doomed and not self.log_manager.delete_dirs_later(doomed):
            await asyncio.to_thread(lambda: [shutil.rmtree(d, ignore_errors=True) for d in doomed])
        return failures

    # -- UpdateMetadata ------------------------------------------------------------------------
    def maybe_update_metadata_cache(self, controller_id: int, controller_epoch: int,
                                    live_brokers: Iterable[BrokerInfo],
                                    partition_states: Iterable[UpdateMetadataPartitionState],
                                    topic_ids: Mapping[str, uuid.UUID]) -> list[TopicPartition]:
        """Kafka's maybeUpdateMetadataCache: an older controller epoch raises Kafka's
        ControllerMovedException, whose code is STALE_CONTROLLER_EPOCH; otherwise
        the cache takes the update and the epoch is remembered. Returns the deleted partitions."""
        if controller_epoch < self.controller_epoch:
            message = (f"Received update metadata request from an old controller {controller_id} with epoch "
                       f"{controller_epoch}. Latest known controller epoch is {self.controller_epoch}")
            log.warning(message)
            raise KafkaApiError(ErrorCode.STALE_CONTROLLER_EPOCH, message)
        if self.metadata_cache is None:
            raise RuntimeError("the replica manager has no metadata cache to update")
        deleted = self.metadata_cache.update_metadata(controller_id, controller_epoch, live_brokers,
                                                      partition_states, topic_ids)
        self.controller_epoch = controller_epoch
        if self.fetcher_manager is not None:
            # followers whose leader's endpoint was unknown may start fetching now
            self.fetcher_manager.retry_pending()
        return deleted

    # -- lookups -------------------------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Optional[Partition]:
        return self.partitions.get(tp)

    def partition_or_error(self, tp: TopicPartition) -> Partition:
        """Kafka's getPartitionOrException: the hosted partition; else NOT_LEADER_OR_FOLLOWER when
        the cluster has the partition elsewhere (the client refreshes its metadata), else
        UNKNOWN_TOPIC_OR_PARTITION."""
        p = self.partitions.get(tp)
        if p is not None:
            return p
        if tp in self.offline_partitions:
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR)
        if self.metadata_cache is not None and self.metadata_cache.contains_partition(tp):
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def _partition_or_error_code(self, tp: TopicPartition) -> Partition | ErrorCode:
        try:
            return self.partition_or_error(tp)
        except KafkaApiError as e:
            return e.code

    def leader_partition(self, tp: TopicPartition) -> Partition:
        p = self.partition_or_error(tp)
        if not p.is_leader:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return p

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch from a client (Kafka checks the current leader epoch before
        leadership). Raises KafkaApiError."""
        return self.partition_or_error(tp).last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def _complete_delayed(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    def _complete_delayed_and_notify(self, tp: TopicPartition) -> None:
        """The HW moved (a follower caught up, the ISR changed): acks=all produces and consumer
        fetches waiting on it may complete; coordinators and fetch sessions hear of it."""
        self._complete_delayed(tp)
        for listener in self._hw_listeners:
            listener(tp)

    def _broker_alive(self, broker_id: int) -> bool:
        return self.metadata_cache.has_alive_broker(broker_id) if self.metadata_cache is not None else True

    def on_follower_append(self, tp: TopicPartition) -> None:
        """The fetcher appended the leader's batches (and took its HW): consumers reading this
        follower (KIP-392) may have data now."""
        self._complete_delayed_and_notify(tp)

    def shrink_isrs(self) -> None:
        """Kafka's isr-expiration task (every replica.lag.time.max.ms / 2): each led partition
        proposes dropping the followers that fell behind."""
        now = now_ms()
        for p in list(self.partitions.values()):
            if p.is_leader and len(p.replicas) > 1:
                try:
                    p.maybe_shrink_isr(now)
                except Exception:
                    log.exception("ISR expiration failed for %s", p.tp)

    def update_log_config(self, topic: str, config: LogConfig) -> None:
        for tp, p in self.partitions.items():
            if tp.topic == topic:
                p.log.update_config(config)

    # -- produce -----------------------------------------------------------------------------
    def has_ongoing_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> bool:
        """Kafka's UnifiedLog.hasOngoingTransaction: the partition's producer state holds an open
        transaction of this producer at this epoch (so its coordinator already knows the partition
        is in the transaction: KIP-890 verification is only needed before the first batch)."""
        p = self.partitions.get(tp)
        if p is None:
            return False
        entry = p.log.producer_state.last_entry(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None \
            and entry.producer_epoch == producer_epoch

    def _note_append_storage_failure(self, tp: TopicPartition, e: Exception) -> None:
        """Kafka logs "Error while appending records to <tp> in dir <dir>" (and takes the dir
        offline); here the partition keeps its leadership and answers KAFKA_STORAGE_ERROR until
        an append succeeds (room made on a full disk), so the line comes once per episode."""
        if tp in self._append_storage_failures:
            return
        self._append_storage_failures.add(tp)
        partition = self.partitions.get(tp)
        where = partition.log.dir.parent if partition is not None and partition.log is not None else "?"
        log.error("Error while appending records to %s in dir %s: %s; its producers get KAFKA_STORAGE_ERROR "
                  "until an append succeeds again", tp, where, e)

    async def append_records(self, timeout_ms: int, required_acks: int,
                             entries: dict[TopicPartition, bytes | memoryview], *,
                             origin: str = ORIGIN_CLIENT
                             ) -> dict[TopicPartition, ProducePartitionResult]:
        """Append to the leaders' logs; `origin` is Kafka's AppendOrigin: clients' batches are
        validated in full, the coordinators' (offsets, transaction markers) are trusted."""
        ts = now_ms()
        results: dict[TopicPartition, ProducePartitionResult] = {}
        pending: dict[TopicPartition, tuple[int, ProducePartitionResult]] = {}
        for tp, records in entries.items():
            result = ProducePartitionResult()
            results[tp] = result
            try:
                partition = self.leader_partition(tp)
                info = partition.append_records_to_leader(records, required_acks, ts, origin)
            except Exception as e:  # the log's errors carry Kafka codes
                if isinstance(e, KafkaStorageError):
                    self._note_append_storage_failure(tp, e)
                result.error, message = _append_error_of(tp, e)
                result.record_errors = list(getattr(e, "record_errors", None) or [])
                # Kafka's appendToLocalLog: only a RecordValidationException (per-record errors)
                # carries its message to the client; besides it, every failure but the
                # "unknown append info" ones reports the partition's log start offset.
                result.error_message = message if result.record_errors else None
                if not _unknown_append_info(e):
                    result.log_start_offset = _log_start_offset(self.partitions.get(tp))
                continue
            if self._append_storage_failures and tp in self._append_storage_failures:
                self._append_storage_failures.discard(tp)
                log.info("Appends to %s succeed again", tp)
            self.broker_topic_stats.record_append(tp.topic, len(records), info.last_offset - info.first_offset + 1)
            result.base_offset = info.first_offset
            result.log_append_time = info.log_append_time
            result.log_start_offset = info.log_start_offset
            pending[tp] = (info.last_offset + 1, result)
            self._on_append(tp)
        if required_acks == -1 and pending:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            op = DelayedProduce(timeout_ms, pending, self._partition_or_error_code, future)
            if not self.produce_purgatory.try_complete_else_watch(op, list(pending)):
                await future
        return results

    def _on_append(self, tp: TopicPartition) -> None:
        # New data may satisfy fetches waiting on this partition; a moved HW may satisfy produces.
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        for listener in self._hw_listeners:
            listener(tp)

    def add_high_watermark_listener(self, fn: Callable[[TopicPartition], None]) -> None:
        self._hw_listeners.append(fn)

    # -- fetch -------------------------------------------------------------------------------
    async def fetch_messages(self, max_wait_ms: int, min_bytes: int, max_bytes: int,
                             isolation_level: int,
                             fetch_infos: list[tuple[TopicPartition, FetchPartitionRequest]],
                             min_one_message: bool = True, fetch_only_leader: bool = True,
                             replica_id: int = -1, client_metadata: Optional[ClientMetadata] = None
                             ) -> list[tuple[TopicPartition, FetchPartitionResult]]:
        """`min_one_message` False is Kafka's hard max-bytes limit of Fetch v0-2 (FetchParams.
        hardMaxBytesLimit): a first batch above the limits is not returned whole.
        `fetch_only_leader` False lets a consumer read a follower up to its high watermark (Kafka's
        FetchParams.fetchOnlyLeader is false for consumers sending client metadata, Fetch v11+).
        `replica_id` >= 0: a follower's fetch, read up to the log end; its position is recorded
        once, at the first read (Kafka's updateFetchState = !readFromPurgatory)."""
        results = self.read_from_local_logs(max_bytes, isolation_level, fetch_infos, min_one_message,
                                            fetch_only_leader, replica_id, update_fetch_state=True,
                                            client_metadata=client_metadata)

        def read() -> list[tuple[TopicPartition, FetchPartitionResult]]:
            return self.read_from_local_logs(max_bytes, isolation_level, fetch_infos, min_one_message,
                                             fetch_only_leader, replica_id, update_fetch_state=False)

        total = sum(r.size for _tp, r in results)
        answer_now = any(r.error != ErrorCode.NONE or r.diverging_epoch is not None or r.preferred_read_replica >= 0
                         for _tp, r in results)
        if max_wait_ms <= 0 or not fetch_infos or total >= min_bytes or answer_now:
            return results
        # Kafka's fetchPartitionStatus: each partition waits from where its first read started
        statuses = [(tp, FetchPartitionStatus(_start_offset_metadata(r, info), info))
                    for (tp, info), (_tp, r) in zip(fetch_infos, results)]
        future: asyncio.Future[list[tuple[TopicPartition, FetchPartitionResult]]] = \
            asyncio.get_running_loop().create_future()
        op = DelayedFetch(max_wait_ms, min_bytes, statuses,
                          lambda tp, status: self._fetch_end_offset(tp, status.fetch_info, isolation_level,
                                                                    fetch_only_leader, replica_id),
                          read, future)
        self.fetch_purgatory.try_complete_else_watch(op, [tp for tp, _ in fetch_infos])
        return await future

    def _fetch_end_offset(self, tp: TopicPartition, info: FetchPartitionRequest, isolation_level: int,
                          fetch_only_leader: bool = True, replica_id: int = -1) -> Optional[LogOffsetMetadata]:
        """Where a waiting fetch of `tp` may read up to now, with its position; None when it must
        answer now (Kafka's DelayedFetch cases A-E and H: the partition is gone, this broker no
        longer leads it, the epoch is fenced, or a follower's log diverged meanwhile)."""
        p = self.partitions.get(tp)
        if p is None:
            return None
        try:
            # Kafka's fetchOffsetSnapshot: a fenced epoch or lost leadership completes the fetch
            p.local_log_with_epoch(info.current_leader_epoch, fetch_only_leader)
            end = p.fetch_upper_bound_metadata(isolation_level, is_follower=replica_id >= 0)
            if info.last_fetched_epoch >= 0 and self._diverging_epoch(p, info) is not None:
                return None     # case H: a truncation happened while it waited
        except Exception:   # the read on completion reports the partition's error
            return None
        return end

    @staticmethod
    def _diverging_epoch(p: Partition, info: FetchPartitionRequest) -> Optional[tuple[int, int]]:
        """Kafka's Partition.readRecords check: where the fetcher's last fetched epoch ended in this
        leader's log, if that is before its fetch offset or the epoch is unknown here. Raises
        KafkaApiError (OFFSET_OUT_OF_RANGE when no end can be given, or the offset is below the log
        start)."""
        epoch, end_offset = p.last_offset_for_leader_epoch(info.current_leader_epoch, info.last_fetched_epoch,
                                                           fetch_only_from_leader=False)
        if epoch < 0 or end_offset < 0:
            raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"Could not determine the end offset of the last fetched epoch {info.last_fetched_epoch}")
        if info.fetch_offset < p.log_start_offset:
            raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE)
        if epoch < info.last_fetched_epoch or end_offset < info.fetch_offset:
            return epoch, end_offset
        return None

    def read_from_local_logs(self, max_bytes: int, isolation_level: int,
                             fetch_infos: Iterable[tuple[TopicPartition, FetchPartitionRequest]],
                             min_one_message: bool = True, fetch_only_leader: bool = True,
                             replica_id: int = -1, update_fetch_state: bool = False,
                             client_metadata: Optional[ClientMetadata] = None
                             ) -> list[tuple[TopicPartition, FetchPartitionResult]]:
        """Kafka's readFromLocalLog: partitions in request order share `max_bytes`; the first
        partition with data may exceed the limits by one batch so a consumer always progresses
        (unless `min_one_message` is False: Fetch v0-2). A follower (`replica_id` >= 0) reads up to
        the log end, gets a diverging epoch instead of data when its log forked from this one, and
        has its position recorded when `update_fetch_state`."""
        out: list[tuple[TopicPartition, FetchPartitionResult]] = []
        limit = max_bytes
        is_follower = replica_id >= 0
        fetch_time = now_ms()
        for tp, info in fetch_infos:
            try:
                p = self.partition_or_error(tp)
                p.local_log_with_epoch(info.current_leader_epoch, fetch_only_leader)
                if is_follower and replica_id not in p.remote_replicas:
                    log.debug("Leader %d failed to record follower %d's position %d for %s: not one of the "
                              "assigned replicas %s in leader epoch %d", self.broker_id, replica_id,
                              info.fetch_offset, tp, p.replicas, p.leader_epoch)
                    raise KafkaApiError(p.follower_not_recognized_error(info.current_leader_epoch))
                # offsets before the read: appends after it must not keep a follower from catching up
                hw, lso, lso_start, leo = p.high_watermark, p.last_stable_offset, p.log_start_offset, p.log_end_offset
                preferred = None
                if client_metadata is not None and self.metadata_cache is not None:
                    preferred = preferred_read_replica_of(p, self.replica_selector, client_metadata, replica_id,
                                                          info.fetch_offset, fetch_time, self.metadata_cache)
                if preferred is not None:
                    # KIP-392: no data, the consumer moves to the replica named
                    out.append((tp, FetchPartitionResult(ErrorCode.NONE, hw, lso, lso_start, None, p.leader_id,
                                                         p.leader_epoch, preferred_read_replica=preferred,
                                                         # null even for read_committed: Kafka skips the read
                                                         # (FetchDataInfo without aborted transactions)
                                                         aborted_transactions=None)))
                    continue
                if info.last_fetched_epoch >= 0:
                    diverging = self._diverging_epoch(p, info)
                    if diverging is not None:
                        out.append((tp, FetchPartitionResult(ErrorCode.NONE, hw, lso, lso_start, None, p.leader_id,
                                                             p.leader_epoch, diverging_epoch=diverging,
                                                             aborted_transactions=None)))
                        continue
                upper = p.fetch_upper_bound(isolation_level, is_follower=is_follower)
                adjusted = max(0, min(info.partition_max_bytes, limit))
                # at the bound (a caught-up consumer) the bound's known position is the fetch's
                upper_metadata = p.fetch_upper_bound_metadata(isolation_level, is_follower) \
                    if info.fetch_offset == upper else None
                data = p.log.read(info.fetch_offset, adjusted, upper, min_one_message,
                                  max_offset_metadata=upper_metadata)
                result = FetchPartitionResult(ErrorCode.NONE, hw, lso, lso_start, data,
                                              p.leader_id, p.leader_epoch)
                if isolation_level == READ_COMMITTED and not is_follower:
                    result.aborted_transactions = self._aborted_transactions(p, info.fetch_offset, result)
                if data.size > 0:
                    min_one_message = False
                limit = max(0, limit - data.size)
                if is_follower and update_fetch_state:
                    p.update_follower_fetch_state(replica_id, info.fetch_offset, info.log_start_offset,
                                                  fetch_time, leo)
            except Exception as e:
                code, _msg = _error_of(e)
                # Kafka's createLogReadResult(e): every offset unknown (-1), out of range included;
                # the client asks ListOffsets where to reset
                result = FetchPartitionResult(code)
            out.append((tp, result))
        return out

    @staticmethod
    def _aborted_transactions(p: Partition, fetch_offset: int, result: FetchPartitionResult
                              ) -> list[tuple[int, int]]:
        """Kafka's addAbortedTransactions: the aborted transactions overlapping the fetched range,
        [fetch offset, the offset after the last batch read)."""
        if result.size == 0:
            return []
        # none up to the log end: no need to read the records (they stay in the files for sendfile)
        if not p.log.collect_aborted_transactions(fetch_offset, p.log.log_end_offset):
            return []
        batches, _valid = split_batches(result.records())
        if not batches:
            return []
        upper_bound = batches[-1][1].next_offset
        return [(t.producer_id, t.first_offset)
                for t in p.log.collect_aborted_transactions(fetch_offset, upper_bound)]

    # -- list offsets ------------------------------------------------------------------------
    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, isolation_level: int,
                                   current_leader_epoch: int, from_consumer: bool,
                                   fetch_only_from_leader: bool = True) -> ListOffsetsPartitionResult:
        """`fetch_only_from_leader` False: Kafka's debugging replica id (-2) may read a follower."""
        try:
            p = self.partition_or_error(tp)
            p.local_log_with_epoch(current_leader_epoch, fetch_only_from_leader)
        except KafkaApiError as e:
            return ListOffsetsPartitionResult(e.code)
        # A new leader whose HW has not reached its epoch's start does not know yet what is
        # committed: a consumer asking the latest offset, or a timestamp found nowhere below the
        # fetchable end, gets OFFSET_NOT_AVAILABLE and retries (Kafka's Partition.fetchOffsetForTimestamp).
        hw_lagging = from_consumer and p.leader_epoch_start_offset is not None \
            and p.leader_epoch_start_offset > p.high_watermark
        last_fetchable = (p.fetch_upper_bound(isolation_level, is_follower=False)
                          if from_consumer else p.log_end_offset)
        epoch = p.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            if hw_lagging:
                return ListOffsetsPartitionResult(ErrorCode.OFFSET_NOT_AVAILABLE)
            return ListOffsetsPartitionResult(ErrorCode.NONE, -1, last_fetchable, epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ListOffsetsPartitionResult(ErrorCode.NONE, -1, p.log_start_offset, epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            # No tiered storage: Kafka answers "no such offset".
            return ListOffsetsPartitionResult(ErrorCode.NONE, -1, -1, -1)
        if timestamp == MAX_TIMESTAMP:
            found = p.log.max_timestamp_and_offset()
        elif timestamp < 0:
            return ListOffsetsPartitionResult(ErrorCode.INVALID_REQUEST)
        else:
            found = p.log.fetch_offset_by_timestamp(timestamp)
        if found is None or found[1] >= last_fetchable:
            if hw_lagging:
                return ListOffsetsPartitionResult(ErrorCode.OFFSET_NOT_AVAILABLE)
            # KafkaApis' buildErrorResponse(NONE): no offset, no timestamp, no leader epoch
            return ListOffsetsPartitionResult(ErrorCode.NONE, -1, -1, -1)
        return ListOffsetsPartitionResult(ErrorCode.NONE, found[0], found[1], epoch)

    def legacy_fetch_offsets_before(self, tp: TopicPartition, timestamp: int, max_num_offsets: int,
                                    from_consumer: bool, fetch_only_from_leader: bool = True) -> list[int]:
        """ListOffsets v0 (Kafka's Partition/UnifiedLog.legacyFetchOffsetsForTimestamp): segment
        base offsets (at least the log start offset) paired with the segments' file mtimes, plus
        the log end offset stamped now if the active segment holds data; the offsets of the
        newest entry at or before `timestamp` (-1: the last, -2: the first) and older ones,
        newest first, at most `max_num_offsets`. A consumer sees nothing above the high
        watermark: the HW takes the place of larger offsets. Raises KafkaApiError."""
        p = self.partition_or_error(tp)
        p.local_log_with_epoch(-1, fetch_only_from_leader)
        log = p.log
        segments = log.segments
        entries = [(max(s.base_offset, log.log_start_offset), s.last_modified_ms()) for s in segments]
        if segments[-1].size > 0:
            entries.append((log.log_end_offset, now_ms()))
        if timestamp == LATEST_TIMESTAMP:
            start = len(entries) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = next((i for i in range(len(entries) - 1, -1, -1) if entries[i][1] <= timestamp), -1)
        offsets = [entries[i][0] for i in range(start, max(start - max_num_offsets, -1), -1)]
        hw = p.high_watermark
        if from_consumer and any(o > hw for o in offsets):
            # Scala's `hw +: allOffsets.dropWhile(_ > hw)`: offsets are newest first
            above = next((i for i, o in enumerate(offsets) if o <= hw), len(offsets))
            offsets = [hw] + offsets[above:]
        return offsets

    # -- delete records ----------------------------------------------------------------------
    def delete_records_on_leader(self, tp: TopicPartition, offset: int) -> int:
        """Kafka's Partition.deleteRecordsOnLeader: move the leader's log start offset to `offset`
        (-1: the high watermark) and drop the segments wholly below it; returns the requested
        offset, which the followers reach through their fetches. Raises KafkaApiError."""
        p = self.leader_partition(tp)
        if "delete" not in {x.strip() for x in p.log.config.cleanup_policy.split(",")}:
            raise KafkaApiError(ErrorCode.POLICY_VIOLATION,
                                f"Records of partition {tp} can not be deleted due to the configured policy")
        hw = p.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"Cannot increment the log start offset to {target} of partition {tp} "
                                f"since it is larger than the high watermark {hw}" if target > hw else
                                f"The offset {target} for partition {tp} is not valid")
        p.log.maybe_increment_log_start_offset(target, hw)
        p.log.delete_log_start_offset_breached_segments(hw)
        return target

    async def delete_records(self, timeout_ms: int, offsets: Mapping[TopicPartition, int]
                             ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """Kafka's ReplicaManager.deleteRecords: per partition (error, low watermark); the answer
        waits (DelayedDeleteRecords, up to `timeout_ms`) until every live replica's log start
        offset reached the requested one."""
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        status: dict[TopicPartition, DeleteRecordsPartitionStatus] = {}
        for tp, offset in offsets.items():
            try:
                status[tp] = DeleteRecordsPartitionStatus(self.delete_records_on_leader(tp, offset))
            except KafkaApiError as e:
                results[tp] = (e.code, -1)
            except Exception as e:  # the log's errors carry Kafka codes
                results[tp] = (_error_of(e)[0], -1)
        if status:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            op = DelayedDeleteRecords(timeout_ms, status, self._partition_or_error_code, future)
            if not self.delete_records_purgatory.try_complete_else_watch(op, list(status)):
                await future
            for tp, st in status.items():
                results[tp] = (st.error, st.low_watermark if st.error == ErrorCode.NONE else -1)
        return {tp: results[tp] for tp in offsets}

    def complete_delayed_requests(self) -> int:
        """At shutdown: answer every waiting fetch and produce now, with what the logs hold,
        instead of letting them wait out their timeouts while the broker stops."""
        completed = 0
        for purgatory in (self.fetch_purgatory, self.produce_purgatory, self.delete_records_purgatory):
            for tp in list(self.partitions):
                for op in purgatory.cancel_for_key(tp):
                    if op.force_complete():
                        completed += 1
        return completed

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.delete_records_purgatory.shutdown()
