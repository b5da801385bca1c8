"""ReplicaManager: the partitions this broker hosts, appends and reads through them, and the
delayed produce/fetch operations that wait in purgatory."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable, Iterable, Optional

from kafkalite.config.log_config import LogConfig
from kafkalite.log.errors import (CorruptRecordError, DecompressionError, KafkaStorageError, OffsetOutOfRangeError,
                                  RecordBatchTooLargeError, RecordTooLargeError)
from kafkalite.log.log import ORIGIN_CLIENT
from kafkalite.log.record_batch import split_batches
from kafkalite.log.log_manager import LogManager
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.purgatory import DelayedOperationPurgatory
from kafkalite.replica.delayed_fetch import DelayedFetch
from kafkalite.replica.delayed_produce import DelayedProduce
from kafkalite.replica.partition import Partition, TopicPartition
from kafkalite.replica.results import (FetchPartitionRequest, FetchPartitionResult,
                                       ListOffsetsPartitionResult, ProducePartitionResult)

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


def _log_start_offset(partition: Optional["Partition"]) -> int:
    return partition.log.log_start_offset if partition is not None else -1


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        # Each purgatory owns its timing wheel, as in Kafka.
        self.produce_purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory("Produce")
        self.fetch_purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory("Fetch")
        # Listeners told when a partition's high watermark moves (e.g. fetch sessions, coordinators).
        self._hw_listeners: list[Callable[[TopicPartition], None]] = []

    # -- leadership (what LeaderAndIsr / StopReplica do) -------------------------------------
    def become_leader(self, tp: TopicPartition, topic_id: uuid.UUID, leader_epoch: int,
                      replicas: list[int], isr: list[int], config: LogConfig) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            log_ = self.log_manager.get_or_create_log(tp.topic, tp.partition, config, topic_id=topic_id)
            partition = Partition(tp, topic_id, log_, self.broker_id)
            self.partitions[tp] = partition
        if partition.log.config != config:
            # Logs opened at start-up got the broker defaults; the topic's own overrides (from
            # the metadata store) apply from here on.
            partition.log.update_config(config)
        partition.make_leader(leader_epoch, replicas, isr)
        return partition

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is None:
            return
        # Waiting operations on this partition complete now with an error rather than time out.
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        if delete:
            self.log_manager.delete_log(tp.topic, tp.partition)

    def get_partition(self, tp: TopicPartition) -> Optional[Partition]:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not p.is_leader:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return p

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
                result.error, message = _append_error_of(tp, e)
                result.record_errors = list(getattr(e, "record_errors", None) or [])
                # Kafka's appendToLocalLog: only a RecordValidationException (per-record errors)
                # carries its message to the client; besides it, every failure but the
                # "unknown append info" ones reports the partition's log start offset.
                result.error_message = message if result.record_errors else None
                if not _unknown_append_info(e):
                    result.log_start_offset = _log_start_offset(self.partitions.get(tp))
                continue
            result.base_offset = info.first_offset
            result.log_append_time = info.log_append_time
            result.log_start_offset = info.log_start_offset
            pending[tp] = (info.last_offset + 1, result)
            self._on_append(tp)
        if required_acks == -1 and pending:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            op = DelayedProduce(timeout_ms, pending, self.get_partition, future)
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
                             min_one_message: bool = True
                             ) -> list[tuple[TopicPartition, FetchPartitionResult]]:
        """`min_one_message` False is Kafka's hard max-bytes limit of Fetch v0-2 (FetchParams.
        hardMaxBytesLimit): a first batch above the limits is not returned whole."""
        def read() -> list[tuple[TopicPartition, FetchPartitionResult]]:
            return self.read_from_local_logs(max_bytes, isolation_level, fetch_infos, min_one_message)

        results = read()
        total = sum(r.size for _tp, r in results)
        has_error = any(r.error != ErrorCode.NONE for _tp, r in results)
        if max_wait_ms <= 0 or not fetch_infos or total >= min_bytes or has_error:
            return results
        future: asyncio.Future[list[tuple[TopicPartition, FetchPartitionResult]]] = \
            asyncio.get_running_loop().create_future()
        op = DelayedFetch(max_wait_ms, min_bytes, fetch_infos,
                          lambda tp, info: self._available_bytes(tp, info, isolation_level),
                          read, future)
        self.fetch_purgatory.try_complete_else_watch(op, [tp for tp, _ in fetch_infos])
        return await future

    def _available_bytes(self, tp: TopicPartition, info: FetchPartitionRequest,
                         isolation_level: int) -> Optional[int]:
        p = self.partitions.get(tp)
        if p is None or not p.is_leader:
            return None
        upper = p.fetch_upper_bound(isolation_level, is_follower=False)
        if info.fetch_offset > p.log_end_offset or info.fetch_offset < p.log_start_offset:
            return None
        if info.fetch_offset >= upper:
            return 0
        try:
            data = p.log.read(info.fetch_offset, info.partition_max_bytes, upper, True)
        except OffsetOutOfRangeError:
            return None
        return data.size

    def read_from_local_logs(self, max_bytes: int, isolation_level: int,
                             fetch_infos: Iterable[tuple[TopicPartition, FetchPartitionRequest]],
                             min_one_message: bool = True
                             ) -> list[tuple[TopicPartition, FetchPartitionResult]]:
        """Kafka's readFromLocalLog: partitions in request order share `max_bytes`; the first
        partition with data may exceed the limits by one batch so a consumer always progresses
        (unless `min_one_message` is False: Fetch v0-2)."""
        out: list[tuple[TopicPartition, FetchPartitionResult]] = []
        limit = max_bytes
        for tp, info in fetch_infos:
            try:
                p = self.leader_partition(tp)
                p.check_leader_epoch(info.current_leader_epoch)
                upper = p.fetch_upper_bound(isolation_level, is_follower=False)
                hw, lso, lso_start = p.high_watermark, p.last_stable_offset, p.log_start_offset
                adjusted = max(0, min(info.partition_max_bytes, limit))
                data = p.log.read(info.fetch_offset, adjusted, upper, min_one_message)
                result = FetchPartitionResult(ErrorCode.NONE, hw, lso, lso_start, data,
                                              p.leader_id, p.leader_epoch)
                if isolation_level == READ_COMMITTED:
                    result.aborted_transactions = self._aborted_transactions(p, info.fetch_offset, result)
                if data.size > 0:
                    min_one_message = False
                limit = max(0, limit - data.size)
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
        batches, _valid = split_batches(result.records())
        if not batches:
            return []
        upper_bound = batches[-1][1].next_offset
        return [(t.producer_id, t.first_offset)
                for t in p.log.collect_aborted_transactions(fetch_offset, upper_bound)]

    # -- list offsets ------------------------------------------------------------------------
    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, isolation_level: int,
                                   current_leader_epoch: int, from_consumer: bool
                                   ) -> ListOffsetsPartitionResult:
        try:
            p = self.leader_partition(tp)
            p.check_leader_epoch(current_leader_epoch)
        except KafkaApiError as e:
            return ListOffsetsPartitionResult(e.code)
        last_fetchable = (p.fetch_upper_bound(isolation_level, is_follower=False)
                          if from_consumer else p.log_end_offset)
        epoch = p.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
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
            # KafkaApis' buildErrorResponse(NONE): no offset, no timestamp, no leader epoch
            return ListOffsetsPartitionResult(ErrorCode.NONE, -1, -1, -1)
        return ListOffsetsPartitionResult(ErrorCode.NONE, found[0], found[1], epoch)

    def legacy_fetch_offsets_before(self, tp: TopicPartition, timestamp: int, max_num_offsets: int,
                                    from_consumer: bool) -> list[int]:
        """ListOffsets v0 (Kafka's Partition/UnifiedLog.legacyFetchOffsetsForTimestamp): segment
        base offsets (at least the log start offset) paired with the segments' file mtimes, plus
        the log end offset stamped now if the active segment holds data; the offsets of the
        newest entry at or before `timestamp` (-1: the last, -2: the first) and older ones,
        newest first, at most `max_num_offsets`. A consumer sees nothing above the high
        watermark: the HW takes the place of larger offsets. Raises KafkaApiError."""
        p = self.leader_partition(tp)
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
    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """DeleteRecords on the leader (Kafka's Partition.deleteRecordsOnLeader): move the log
        start offset to `offset` (-1: the high watermark) and drop the segments wholly below it.
        Returns the low watermark (the log start offset: this broker is the only replica).
        Raises KafkaApiError."""
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
        return p.log.log_start_offset

    def complete_delayed_requests(self) -> int:
        """At shutdown: answer every waiting fetch and produce now, with what the logs hold,
        instead of letting them wait out their timeouts while the broker stops."""
        completed = 0
        for purgatory in (self.fetch_purgatory, self.produce_purgatory):
            for tp in list(self.partitions):
                for op in purgatory.cancel_for_key(tp):
                    if op.force_complete():
                        completed += 1
        return completed

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
