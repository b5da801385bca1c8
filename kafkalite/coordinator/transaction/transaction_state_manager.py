"""TransactionStateManager: the transaction coordinator's storage in `__transaction_state`.

Kafka's TransactionStateManager duties: which partition holds a transactional id
(abs(String.hashCode) % partition count), creating the compacted topic on first use (through
the controller), the cache of transaction metadata per owned partition with its coordinator
epoch (the partition's leader epoch), replaying a partition's log when this broker becomes its
leader, appending transitions (acks=-1, origin coordinator) and completing them once durable,
transactional.id.expiration.ms (tombstones), and ListTransactions.

No tasks are started here: the coordinator owns them (loading runs ``load_partition`` off the
loop, expiration is driven by the coordinator's timer).
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from kafkalite.cluster.topic_record import NewTopic
from kafkalite.coordinator.group.records import java_abs, java_string_hash
from kafkalite.coordinator.internal_topics import internal_topic_replication_factor
from kafkalite.coordinator.transaction import transaction_log
from kafkalite.coordinator.transaction.transaction_metadata import (
    EXPIRATION_ALLOWED, TransactionMetadata, TransactionState, TxnTransitMetadata)
from kafkalite.log.errors import LogError
from kafkalite.log.producer_state import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import build_batch, decode_records
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
ENFORCED_REQUIRED_ACKS = -1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class TransactionConfig:
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_max_timeout_ms: int = 15 * 60 * 1000
    num_partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024
    load_buffer_size: int = 5 * 1024 * 1024
    min_isr: int = 2
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3600 * 1000
    request_timeout_ms: int = 30_000


@dataclass(frozen=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


@dataclass
class _PartitionCache:
    coordinator_epoch: int
    metadata: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state_name: str


class TxnLoadError(RuntimeError):
    """A record of `__transaction_state` could not be read; Kafka fails the load likewise."""


# Every request of a transaction looks its id up several times; String.hashCode in Python is a
# per-character loop (~4 us for a 20-character id), so the answers are memoised (bounded).
@functools.lru_cache(maxsize=1 << 14)
def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(transactional_id)) % num_partitions


def append_error(error: ErrorCode) -> ErrorCode:
    """What a failed `__transaction_state` append answers (appendTransactionToLog)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def should_expire(m: TransactionMetadata, now_ms: int, expiration_ms: int) -> bool:
    return m.state in EXPIRATION_ALLOWED and not m.pending_transition_in_progress \
        and m.txn_last_update_timestamp <= now_ms - expiration_ms


def include_in_listing(m: TransactionMetadata, producer_ids: frozenset[int], state_names: frozenset[str],
                       duration_filter_ms: int, now_ms: int) -> bool:
    """ListTransactions filters; Dead (being expired) is never listed."""
    if m.state is TransactionState.DEAD:
        return False
    if producer_ids and m.producer_id not in producer_ids:
        return False
    if state_names and m.state.state_name not in state_names:
        return False
    if duration_filter_ms >= 0 and now_ms - m.txn_start_timestamp <= duration_filter_ms:
        return False
    return True


# A callback told of every completed transition (the coordinator schedules timeouts with it).
TransitionListener = Callable[[TransactionMetadata], None]


class TransactionStateManager:
    def __init__(self, broker_id: int, replica_manager, controller, config: TransactionConfig,
                 clock_ms: Callable[[], int] = _now_ms) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.controller = controller
        self.config = config
        self.clock_ms = clock_ms
        # Kafka keeps the partition count of an existing topic: ids must keep their partition.
        existing = controller.topic_record(TRANSACTION_STATE_TOPIC_NAME)
        self.num_partitions = existing.num_partitions if existing is not None else config.num_partitions
        self.loading_partitions: set[int] = set()
        # partition -> the leader epoch its current load is for (None: unknown); a load begun
        # before a resignation and a new election must not install its older view
        self._loading_epochs: dict[int, Optional[int]] = {}
        self._cache: dict[int, _PartitionCache] = {}
        self.on_transition: Optional[TransitionListener] = None

    # -- partitioning and the topic --------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    def ensure_topic(self) -> bool:
        """Create `__transaction_state` if missing; whether it existed before (FindCoordinator
        answers COORDINATOR_NOT_AVAILABLE the first time, as Kafka does). As Kafka, with
        transaction.state.log.replication.factor and transaction.state.log.min.isr as configured
        (fewer live brokers than the factor: the creation fails and is tried again at the next
        request); the embedded single broker reduces both to what it can hold."""
        if self.controller.topic_record(TRANSACTION_STATE_TOPIC_NAME) is not None:
            return True
        rf = internal_topic_replication_factor(self.config.replication_factor, self.controller)
        min_isr = min(self.config.min_isr, rf) if self.controller.alone else self.config.min_isr
        result = self.controller.create_topics([NewTopic(
            TRANSACTION_STATE_TOPIC_NAME, num_partitions=self.num_partitions, replication_factor=rf,
            configs={"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "unclean.leader.election.enable": "false",
                     "min.insync.replicas": str(min_isr),
                     "segment.bytes": str(self.config.segment_bytes)})],
            validate_only=False)[0]
        if result.error == ErrorCode.NONE:
            log.info("Created %s with %d partitions", TRANSACTION_STATE_TOPIC_NAME, self.num_partitions)
        elif result.error != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.error("Could not create %s: %s %s", TRANSACTION_STATE_TOPIC_NAME, result.error.name,
                      result.message)
        return False

    # -- the cache -------------------------------------------------------------------------------
    def is_owned(self, partition: int) -> bool:
        return partition in self._cache

    def get_transaction_state(self, transactional_id: str
                              ) -> tuple[ErrorCode, Optional[CoordinatorEpochAndTxnMetadata]]:
        """(NONE, entry or None), or (COORDINATOR_LOAD_IN_PROGRESS | NOT_COORDINATOR, None)."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        cache = self._cache.get(partition)
        if cache is None:
            return ErrorCode.NOT_COORDINATOR, None
        m = cache.metadata.get(transactional_id)
        return ErrorCode.NONE, (CoordinatorEpochAndTxnMetadata(cache.coordinator_epoch, m) if m else None)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata
                                            ) -> tuple[ErrorCode, Optional[CoordinatorEpochAndTxnMetadata]]:
        partition = self.partition_for(metadata.transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        cache = self._cache.get(partition)
        if cache is None:
            return ErrorCode.NOT_COORDINATOR, None
        current = cache.metadata.setdefault(metadata.transactional_id, metadata)
        return ErrorCode.NONE, CoordinatorEpochAndTxnMetadata(cache.coordinator_epoch, current)

    def all_metadata(self) -> Iterable[tuple[int, TransactionMetadata]]:
        for cache in list(self._cache.values()):
            for m in list(cache.metadata.values()):
                yield cache.coordinator_epoch, m

    # -- appends ---------------------------------------------------------------------------------
    async def _append(self, tp: TopicPartition, batch: bytes, timeout_ms: int) -> ErrorCode:
        results = await self.replica_manager.append_records(
            timeout_ms, ENFORCED_REQUIRED_ACKS, {tp: batch}, origin=ORIGIN_COORDINATOR)
        return results[tp].error

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata,
                                        retry_on_error: Callable[[ErrorCode], bool] = lambda e: False
                                        ) -> ErrorCode:
        """Write ``transit`` and, once durable and still ours, complete it on the metadata.

        On failure the pending state is cleared (so the client may retry), unless
        ``retry_on_error`` says the caller will retry this very transition."""
        error, entry = self.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, self.partition_for(transactional_id))
        batch = build_batch([(transaction_log.key_bytes(transactional_id),
                              transaction_log.value_bytes(transit), self.clock_ms())])
        try:
            raw = await self._append(tp, batch, transit.txn_timeout_ms)
        except Exception:
            log.exception("appending %s for %s failed", transit, transactional_id)
            raw = ErrorCode.UNKNOWN_SERVER_ERROR
        error = append_error(ErrorCode(raw))

        # The partition may have been unloaded or reloaded while the append waited.
        state_error, entry = self.get_transaction_state(transactional_id)
        if error == ErrorCode.NONE:
            if state_error != ErrorCode.NONE:
                return state_error
            if entry is None or entry.coordinator_epoch != coordinator_epoch:
                return ErrorCode.NOT_COORDINATOR
            entry.metadata.complete_transition_to(transit)
            if self.on_transition is not None:
                self.on_transition(entry.metadata)
            return ErrorCode.NONE
        log.info("Appending %s's transition to %s failed with %s", transactional_id,
                 transit.state.state_name, error.name)
        if state_error == ErrorCode.NONE and entry is not None \
                and entry.coordinator_epoch == coordinator_epoch and not retry_on_error(error):
            entry.metadata.pending_state = None
        return error

    # -- loading ---------------------------------------------------------------------------------
    def begin_loading(self, partition: int) -> bool:
        """Whether a load of `partition` should start: not while one for the same leader epoch
        runs (the partition's epoch now, as the election that calls this just set it)."""
        replica = self.replica_manager.get_partition(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition))
        epoch = getattr(replica, "leader_epoch", None)
        if partition in self.loading_partitions and self._loading_epochs.get(partition) == epoch:
            return False
        self.loading_partitions.add(partition)
        self._loading_epochs[partition] = epoch
        return True

    def load_partition(self, partition: int) -> dict[str, TransactionMetadata]:
        """Replay the partition's log start to end: the latest record per id (tombstones
        remove). File-bound: run off the event loop."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
        p = self.replica_manager.get_partition(tp)
        if p is None:
            log.warning("Attempted to load transactions from %s, but found no log", tp)
            return {}
        return load_log(p.log, tp, self.config.load_buffer_size)

    def complete_loading(self, partition: int, coordinator_epoch: int,
                         loaded: dict[str, TransactionMetadata]) -> bool:
        """Install the loaded state, unless the partition was unloaded meanwhile or a load for a
        later election has begun."""
        if partition not in self.loading_partitions:
            return False
        epoch = self._loading_epochs.get(partition)
        if epoch is not None and epoch != coordinator_epoch:
            return False
        self.loading_partitions.discard(partition)
        self._loading_epochs.pop(partition, None)
        self._cache[partition] = _PartitionCache(coordinator_epoch, dict(loaded))
        return True

    def remove_partition(self, partition: int) -> None:
        """Resignation: forget the partition's transactions."""
        self.loading_partitions.discard(partition)
        self._loading_epochs.pop(partition, None)
        self._cache.pop(partition, None)

    def clear(self) -> None:
        self.loading_partitions.clear()
        self._loading_epochs.clear()
        self._cache.clear()

    # -- expiration ------------------------------------------------------------------------------
    async def remove_expired_transactional_ids(self) -> int:
        """Tombstone ids idle for transactional.id.expiration.ms in Empty/Complete* states;
        drop them from the cache once the tombstones are written. Returns how many went."""
        now = self.clock_ms()
        removed = 0
        for partition, cache in list(self._cache.items()):
            if partition in self.loading_partitions:
                continue
            expiring: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
            for m in list(cache.metadata.values()):
                if should_expire(m, now, self.config.transactional_id_expiration_ms):
                    expiring.append((m, m.prepare_dead()))
            if not expiring:
                continue
            tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
            batch = build_batch([(transaction_log.key_bytes(m.transactional_id), None, now)
                                 for m, _ in expiring])
            try:
                error = ErrorCode(await self._append(tp, batch, self.config.request_timeout_ms))
            except Exception:
                log.exception("writing tombstones to %s failed", tp)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
            current = self._cache.get(partition)
            for m, _ in expiring:
                if current is not cache or cache.metadata.get(m.transactional_id) is not m:
                    continue
                if error == ErrorCode.NONE and m.pending_state is TransactionState.DEAD:
                    del cache.metadata[m.transactional_id]
                    removed += 1
                else:
                    m.pending_state = None
            if error != ErrorCode.NONE:
                log.warning("Expiring transactional ids of %s failed: %s", tp, error.name)
        return removed

    # -- ListTransactions ------------------------------------------------------------------------
    def list_transaction_states(self, producer_ids: Iterable[int], state_names: Iterable[str],
                                duration_filter_ms: int = -1
                                ) -> tuple[ErrorCode, list[str], list[ListedTransaction]]:
        """(error, unknown state filters, transactions)."""
        if self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        known = {s.state_name for s in TransactionState}
        names = frozenset(state_names)
        unknown = [s for s in names if s not in known]
        pids = frozenset(producer_ids)
        now = self.clock_ms()
        out = [ListedTransaction(m.transactional_id, m.producer_id, m.state.state_name)
               for _epoch, m in self.all_metadata()
               if include_in_listing(m, pids, names, duration_filter_ms, now)]
        return ErrorCode.NONE, unknown, out


def load_log(log_, tp: TopicPartition, load_buffer_size: int) -> dict[str, TransactionMetadata]:
    loaded: dict[str, TransactionMetadata] = {}
    batches = log_.iter_batches(load_buffer_size)
    while True:
        try:
            item = next(batches, None)
        except LogError as e:
            raise TxnLoadError(f"Reading {tp} failed: {e}") from e
        if item is None:
            break
        batch, header = item
        if header.is_control:
            continue
        try:
            recs = decode_records(batch, header)
        except LogError as e:
            raise TxnLoadError(f"Corrupt batch at offset {header.base_offset} of {tp}: {e}") from e
        for r in recs:
            if r.key is None:
                raise TxnLoadError(f"Record at offset {r.offset} of {tp} has no key")
            try:
                txn_id = transaction_log.decode_key(r.key)
                m = transaction_log.decode_value(txn_id, r.value)
            except transaction_log.UnknownKeyTypeError as e:
                log.warning("Unknown key type %d at offset %d of %s; ignoring it", e.key_type,
                            r.offset, tp)
                continue
            except transaction_log.TxnRecordDecodeError as e:
                raise TxnLoadError(f"Deserializing the record at offset {r.offset} of {tp} failed: {e}") from e
            if m is None:
                loaded.pop(txn_id, None)
            else:
                loaded[txn_id] = m
    return loaded
