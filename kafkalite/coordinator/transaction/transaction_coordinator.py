"""The transaction coordinator (Kafka's TransactionCoordinator).

Requests for a transactional id go to the leader of its `__transaction_state` partition. Every
state change is prepared on the metadata (a pending state: concurrent requests get
CONCURRENT_TRANSACTIONS), appended to `__transaction_state` (acks=-1) and completed once durable.
EndTxn answers the client as soon as PrepareCommit/PrepareAbort is durable; the markers are then
written to every partition of the transaction by a task of the coordinator, through the marker
channel (the partitions' leaders: this broker's own log, or WriteTxnMarkers to another broker),
retried until they are all in, and CompleteCommit/CompleteAbort is appended last. After a restart, loading a
partition resumes the markers of transactions found in a Prepare state.

Transaction timeouts are TimerTasks on the coordinator's own SystemTimer (the purgatory's timing
wheel), one per ongoing transaction, armed for txnStartTimestamp + timeout: on expiry the
transaction is aborted with the producer epoch bumped (PrepareEpochFence), which fences the
producer. The expiration of idle transactional ids (transactional.id.expiration.ms) is a
recurring task on the same timer.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Optional, Union

from kafkalite.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, IllegalTransactionStateError, TransactionMetadata,
    TransactionState, TxnTransitMetadata, end_txn_decision, is_epoch_exhausted)
from kafkalite.coordinator.transaction.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC_NAME, ListedTransaction, TransactionStateManager)
from kafkalite.coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from kafkalite.coordinator.transaction.txn_marker_writer import write_txn_markers
from kafkalite.protocol.errors import ErrorCode
from kafkalite.purgatory import SystemTimer, TimerTask
from kafkalite.replica.partition import TopicPartition

log = logging.getLogger(__name__)

S = TransactionState


MARKER_RETRY_BACKOFF_S = 0.1

# Marker results per partition (TransactionMarkerRequestCompletionHandler).
_MARKER_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
_MARKER_ABORT_SENDING = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_MARKER_SKIP_PARTITION = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class DescribedTransaction:
    transactional_id: str
    error_code: int
    state_name: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topics: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ListTransactionsResult:
    error: ErrorCode
    unknown_state_filters: list[str]
    transactions: list[ListedTransaction]


class _TxnTimeoutTask(TimerTask):
    """Fires when an ongoing transaction outlives its timeout."""
    __slots__ = ("coordinator", "transactional_id", "producer_id", "txn_start_timestamp")

    def __init__(self, coordinator: "TransactionCoordinator", delay_ms: int, transactional_id: str,
                 producer_id: int, txn_start_timestamp: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.txn_start_timestamp = txn_start_timestamp

    def run(self) -> None:
        self.coordinator._on_txn_timeout(self)


class _RecurringTask(TimerTask):
    __slots__ = ("fn",)

    def __init__(self, delay_ms: int, fn: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self.fn = fn

    def run(self) -> None:
        self.fn()


class TransactionCoordinator:
    def __init__(self, broker_id: int, state_manager: TransactionStateManager, producer_id_manager: Any,
                 replica_manager: Any, metadata_cache: Any, group_coordinator: Optional[Any] = None,
                 clock_ms: Callable[[], int] = wall_clock_ms, inter_broker_listener: str = "PLAINTEXT") -> None:
        self.broker_id = broker_id
        self.txn_manager = state_manager
        self.producer_id_manager = producer_id_manager
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.group_coordinator = group_coordinator
        self.clock_ms = clock_ms
        self.is_active = False
        self.timer: Optional[SystemTimer] = None
        self._timeout_tasks: dict[str, _TxnTimeoutTask] = {}
        self._expiration_task: Optional[_RecurringTask] = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # transactional id -> the marker task in flight for it
        self._marker_tasks: dict[str, asyncio.Task[Any]] = {}
        self.marker_channel = TransactionMarkerChannelManager(
            broker_id, metadata_cache, inter_broker_listener, state_manager.config.request_timeout_ms,
            self._write_local_markers)
        state_manager.on_transition = self._on_transition

    # ==== lifecycle ==================================================================================

    def startup(self, enable_transactional_id_expiration: bool = True) -> None:
        self.timer = SystemTimer("transaction-coordinator")
        if enable_transactional_id_expiration:
            interval = self.txn_manager.config.remove_expired_transactional_ids_interval_ms
            self._expiration_task = _RecurringTask(interval, self._on_expiration_tick)
            self.timer.add(self._expiration_task)
        self.marker_channel.start()
        self.is_active = True

    async def shutdown(self) -> None:
        self.is_active = False
        if self.timer is not None:
            self.timer.shutdown()
        for t in self._timeout_tasks.values():
            t.cancel()
        self._timeout_tasks.clear()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._marker_tasks.clear()
        await self.marker_channel.shutdown()
        self.txn_manager.clear()

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task %s failed", task.get_name(), exc_info=task.exception())

    # ==== partitions =================================================================================

    def partition_for(self, transactional_id: str) -> int:
        return self.txn_manager.partition_for(transactional_id)

    def ensure_topic(self) -> bool:
        return self.txn_manager.ensure_topic()

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """Leader of `__transaction_state`-`partition` at `coordinator_epoch`: load it; requests
        for its ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        if not self.txn_manager.begin_loading(partition):
            return
        self._spawn(self._load(partition, coordinator_epoch), f"load-txn-partition-{partition}")

    async def _load(self, partition: int, coordinator_epoch: int) -> None:
        started = time.monotonic()
        try:
            loaded = await asyncio.to_thread(self.txn_manager.load_partition, partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("failed to load %s partition %d", TRANSACTION_STATE_TOPIC_NAME, partition)
            loaded = {}
        if not self.txn_manager.complete_loading(partition, coordinator_epoch, loaded):
            return
        log.info("loaded %d transactional ids of %s-%d (coordinator epoch %d) in %.1f ms", len(loaded),
                 TRANSACTION_STATE_TOPIC_NAME, partition, coordinator_epoch, (time.monotonic() - started) * 1000)
        for m in loaded.values():
            if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                # The markers may not all be written: write them (again) and complete.
                complete = m.prepare_complete(self.clock_ms())
                self._start_markers(m.transactional_id, coordinator_epoch, m, complete)
            else:
                self._schedule_timeout(m)

    def on_resignation(self, partition: int) -> None:
        self.txn_manager.remove_partition(partition)

    # ==== timeouts ===================================================================================

    def _on_transition(self, m: TransactionMetadata) -> None:
        self._schedule_timeout(m)

    def _schedule_timeout(self, m: TransactionMetadata) -> None:
        """Arm (or disarm) the timeout of ``m``'s transaction after each completed transition."""
        current = self._timeout_tasks.get(m.transactional_id)
        if m.state is not S.ONGOING:
            if current is not None:
                current.cancel()
                del self._timeout_tasks[m.transactional_id]
            return
        if current is not None and current.producer_id == m.producer_id \
                and current.txn_start_timestamp == m.txn_start_timestamp:
            return
        if current is not None:
            current.cancel()
        self._arm_timeout(m.transactional_id, m.producer_id, m.txn_start_timestamp,
                          m.txn_start_timestamp + m.txn_timeout_ms + 1 - self.clock_ms())

    def _arm_timeout(self, transactional_id: str, producer_id: int, start: int, delay_ms: int) -> None:
        if self.timer is None or self.timer.is_shutdown:
            return
        task = _TxnTimeoutTask(self, max(0, delay_ms), transactional_id, producer_id, start)
        self._timeout_tasks[transactional_id] = task
        self.timer.add(task)

    def _on_txn_timeout(self, task: _TxnTimeoutTask) -> None:
        txn_id = task.transactional_id
        if self._timeout_tasks.get(txn_id) is task:
            del self._timeout_tasks[txn_id]
        error, entry = self.txn_manager.get_transaction_state(txn_id)
        if error != ErrorCode.NONE or entry is None:
            return
        m = entry.metadata
        if m.state is not S.ONGOING or m.producer_id != task.producer_id \
                or m.txn_start_timestamp != task.txn_start_timestamp:
            return
        now = self.clock_ms()
        if m.txn_start_timestamp + m.txn_timeout_ms >= now:     # Kafka: start + timeout < now
            self._arm_timeout(txn_id, m.producer_id, m.txn_start_timestamp,
                              m.txn_start_timestamp + m.txn_timeout_ms + 1 - now)
            return
        if m.pending_transition_in_progress:
            # Something else is changing it; look again later (Kafka's periodic check would).
            self._arm_timeout(txn_id, m.producer_id, m.txn_start_timestamp,
                              self.txn_manager.config.abort_timed_out_transactions_interval_ms)
            return
        log.info("Aborting transaction of %s (producer id %d, epoch %d): it is older than its timeout "
                 "of %d ms", txn_id, m.producer_id, m.producer_epoch, m.txn_timeout_ms)
        fence = m.prepare_fence_producer_epoch()
        prepared = self._prepare_end_transaction(txn_id, fence.producer_id, fence.producer_epoch, False,
                                                 from_client=False)
        if isinstance(prepared, ErrorCode):
            self._drop_fence(m)
            log.info("Rollback of the timed out transaction of %s cancelled: %s", txn_id, prepared.name)
            return
        self._spawn(self._finish_end_transaction(txn_id, fence.producer_id, fence.producer_epoch, False,
                                                 *prepared), f"abort-timed-out-{txn_id}")

    def _on_expiration_tick(self) -> None:
        if self._expiration_task is not None and self.timer is not None and not self.timer.is_shutdown:
            self.timer.add(self._expiration_task)   # re-arm for the next interval
        self._spawn(self.txn_manager.remove_expired_transactional_ids(), "expire-transactional-ids")

    # ==== InitProducerId =============================================================================

    async def handle_init_producer_id(self, transactional_id: Optional[str], transaction_timeout_ms: int,
                                      expected: Optional[tuple[int, int]] = None) -> InitProducerIdResult:
        """``expected``: the (producer id, epoch) a KIP-360 client presents, or None."""
        if transactional_id is None:
            return InitProducerIdResult(ErrorCode.NONE, self.producer_id_manager.generate_producer_id(), 0)
        if transactional_id == "":
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if not self.is_active:
            return InitProducerIdResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error, entry = self.txn_manager.get_transaction_state(transactional_id)
        if error == ErrorCode.NONE and entry is None:
            fresh = TransactionMetadata(transactional_id, self.producer_id_manager.generate_producer_id(),
                                        txn_timeout_ms=transaction_timeout_ms, state=S.EMPTY,
                                        txn_last_update_timestamp=self.clock_ms())
            error, entry = self.txn_manager.put_transaction_state_if_not_exists(fresh)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        assert entry is not None
        m = entry.metadata
        prepared = self._prepare_init_producer_id(m, transaction_timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return InitProducerIdResult(prepared)
        if prepared.state is S.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction at the bumped epoch; the client retries and then
            # gets a bump of its own (or a new producer id if the fence used the last epoch).
            end = self._prepare_end_transaction(transactional_id, prepared.producer_id,
                                                prepared.producer_epoch, False, from_client=False)
            if isinstance(end, ErrorCode):
                self._drop_fence(m)
                return InitProducerIdResult(end)
            error = await self._finish_end_transaction(transactional_id, prepared.producer_id,
                                                       prepared.producer_epoch, False, *end)
            return InitProducerIdResult(error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)
        error = await self.txn_manager.append_transaction_to_log(transactional_id, entry.coordinator_epoch,
                                                                 prepared)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition %s-%d",
                 transactional_id, prepared.producer_id, prepared.producer_epoch, TRANSACTION_STATE_TOPIC_NAME,
                 self.partition_for(transactional_id))
        return InitProducerIdResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

    def _prepare_init_producer_id(self, m: TransactionMetadata, timeout_ms: int,
                                  expected: Optional[tuple[int, int]]) -> Union[ErrorCode, TxnTransitMetadata]:
        if m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None:
            pid, epoch = expected
            valid = m.producer_epoch == NO_PRODUCER_EPOCH or pid == m.producer_id or \
                (pid == m.last_producer_id and is_epoch_exhausted(epoch))
            if not valid:
                return ErrorCode.PRODUCER_FENCED
        if m.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        now = self.clock_ms()
        if m.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if m.is_producer_epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
                return m.prepare_producer_id_rotation(self.producer_id_manager.generate_producer_id(),
                                                      timeout_ms, now, expected is not None)
            return m.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
        if m.state is S.ONGOING:
            return m.prepare_fence_producer_epoch()
        raise IllegalTransactionStateError(
            f"Found transactionalId {m.transactional_id} with state {m.state.state_name}. This is illegal as "
            f"we should never have transitioned to this state.")

    @staticmethod
    def _drop_fence(m: TransactionMetadata) -> None:
        # A fence that did not turn into an abort must not block the id.
        if m.pending_state is S.PREPARE_EPOCH_FENCE:
            m.pending_state = None

    # ==== AddPartitionsToTxn / AddOffsetsToTxn ======================================================

    async def handle_add_partitions_to_transaction(self, transactional_id: Optional[str], producer_id: int,
                                                   producer_epoch: int, partitions: Iterable[TopicPartition]
                                                   ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        parts = frozenset(partitions)
        error, entry = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if entry is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        m = entry.metadata
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.pending_transition_in_progress or m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if m.state is S.ONGOING and parts <= m.topic_partitions:
            return ErrorCode.NONE       # nothing new: no need to write
        transit = m.prepare_add_partitions(parts, self.clock_ms())
        return await self.txn_manager.append_transaction_to_log(transactional_id, entry.coordinator_epoch, transit)

    def handle_verify_partitions_in_transaction(self, transactional_id: Optional[str], producer_id: int,
                                                producer_epoch: int, partitions: Iterable[TopicPartition]
                                                ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4 verify_only (KIP-890): are the partitions in the transaction?"""
        parts = list(dict.fromkeys(partitions))
        if not transactional_id:
            return {tp: ErrorCode.INVALID_REQUEST for tp in parts}
        error, entry = self.txn_manager.get_transaction_state(transactional_id)
        if error == ErrorCode.NONE:
            if entry is None or entry.metadata.producer_id != producer_id:
                error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            elif entry.metadata.producer_epoch != producer_epoch:
                error = ErrorCode.PRODUCER_FENCED
            elif entry.metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return {tp: error for tp in parts}
        assert entry is not None
        return {tp: (ErrorCode.NONE if tp in entry.metadata.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE)
                for tp in parts}

    # ==== EndTxn =====================================================================================

    async def handle_end_transaction(self, transactional_id: Optional[str], producer_id: int, producer_epoch: int,
                                     commit: bool) -> ErrorCode:
        prepared = self._prepare_end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                                 from_client=True)
        if isinstance(prepared, ErrorCode):
            return prepared
        assert transactional_id is not None
        return await self._finish_end_transaction(transactional_id, producer_id, producer_epoch, commit, *prepared)

    def _prepare_end_transaction(self, transactional_id: Optional[str], producer_id: int, producer_epoch: int,
                                 commit: bool, from_client: bool
                                 ) -> Union[ErrorCode, tuple[int, TxnTransitMetadata, bool]]:
        """Synchronous first half of endTransaction: validate and prepare PrepareCommit/Abort.
        Returns (coordinator epoch, transit, whether this is an epoch fence)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        error, entry = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if entry is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        m = entry.metadata
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # Clients must present the current epoch; the coordinator's own abort may be ahead.
        if (from_client and producer_epoch != m.producer_epoch) or producer_epoch < m.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.pending_transition_in_progress and m.pending_state is not S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        decision = end_txn_decision(m.state, commit)
        if isinstance(decision, ErrorCode):
            if decision == ErrorCode.INVALID_TXN_STATE:
                log.debug("TransactionalId %s's state is %s, but received transaction marker result to "
                          "send: %s", transactional_id, m.state.state_name, "COMMIT" if commit else "ABORT")
            return decision
        is_epoch_fence = False
        if decision is S.PREPARE_ABORT and m.pending_state is S.PREPARE_EPOCH_FENCE:
            # The fence becomes this abort, at the bumped epoch.
            is_epoch_fence = True
            m.pending_state = None
            m.producer_epoch = producer_epoch
            m.last_producer_epoch = NO_PRODUCER_EPOCH
        elif m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return entry.coordinator_epoch, m.prepare_abort_or_commit(decision, self.clock_ms()), is_epoch_fence

    async def _finish_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      commit: bool, coordinator_epoch: int, transit: TxnTransitMetadata,
                                      is_epoch_fence: bool) -> ErrorCode:
        error = await self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            if is_epoch_fence:
                state_error, entry = self.txn_manager.get_transaction_state(transactional_id)
                if state_error == ErrorCode.NONE and entry is not None \
                        and entry.coordinator_epoch == coordinator_epoch:
                    # the bumped epoch was never returned to a client: do not bump it again
                    entry.metadata.has_failed_epoch_fence = True
            return error
        state_error, entry = self.txn_manager.get_transaction_state(transactional_id)
        if state_error != ErrorCode.NONE:
            return state_error
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        m = entry.metadata
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if m.state is not expected:
            return ErrorCode.INVALID_TXN_STATE
        complete = m.prepare_complete(self.clock_ms())
        self._start_markers(transactional_id, coordinator_epoch, m, complete)
        return ErrorCode.NONE

    # ==== markers ====================================================================================

    def _start_markers(self, transactional_id: str, coordinator_epoch: int, m: TransactionMetadata,
                       complete: TxnTransitMetadata) -> None:
        old = self._marker_tasks.pop(transactional_id, None)
        if old is not None:
            old.cancel()
        task = self._spawn(self._send_markers(transactional_id, coordinator_epoch, m, complete),
                           f"txn-markers-{transactional_id}")
        self._marker_tasks[transactional_id] = task
        task.add_done_callback(lambda t: self._marker_tasks.pop(transactional_id, None)
                               if self._marker_tasks.get(transactional_id) is t else None)

    def _still_current(self, transactional_id: str, coordinator_epoch: int, m: TransactionMetadata) -> bool:
        error, entry = self.txn_manager.get_transaction_state(transactional_id)
        return error == ErrorCode.NONE and entry is not None and entry.metadata is m \
            and entry.coordinator_epoch == coordinator_epoch

    async def _write_local_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                   commit: bool, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """The marker channel's writer for the partitions this broker leads."""
        return await write_txn_markers(self.replica_manager, self.group_coordinator, producer_id, producer_epoch,
                                       coordinator_epoch, commit, partitions)

    async def _send_markers(self, transactional_id: str, coordinator_epoch: int, m: TransactionMetadata,
                            complete: TxnTransitMetadata) -> None:
        commit = complete.state is S.COMPLETE_COMMIT
        while True:
            if not self._still_current(transactional_id, coordinator_epoch, m):
                log.info("No longer the coordinator of %s at epoch %d; markers cancelled", transactional_id,
                         coordinator_epoch)
                return
            pending = sorted(m.topic_partitions, key=lambda tp: (tp.topic, tp.partition))
            abort_sending = False
            if pending:
                outcome = await self.marker_channel.send_markers(m.producer_id, m.producer_epoch, coordinator_epoch,
                                                                 commit, pending)
                if not self._still_current(transactional_id, coordinator_epoch, m):
                    log.info("I am no longer the coordinator for %s at epoch %d; cancel sending transaction "
                             "markers to the brokers", transactional_id, coordinator_epoch)
                    return
                for tp in outcome.deleted:
                    # Kafka: a partition the metadata does not know is likely deleted; skip it
                    log.info("Couldn't find leader endpoint for %s while sending the markers of %s; it is likely "
                             "deleted and is skipped", tp, transactional_id)
                    m.remove_partition(tp)
                if outcome.unreachable:
                    log.debug("No reachable leader for %s (markers of %s); retrying", outcome.unreachable,
                              transactional_id)
                for tp, error in outcome.errors.items():
                    if error == ErrorCode.NONE or error in _MARKER_SKIP_PARTITION:
                        m.remove_partition(tp)
                    elif error in _MARKER_ABORT_SENDING:
                        # the producer or coordinator epoch moved on: this transaction is done with
                        abort_sending = True
                    elif error in _MARKER_RETRIABLE:
                        log.info("Sending %s's transaction marker for partition %s has failed with error %s, "
                                 "retrying with current coordinator epoch %d", transactional_id, tp, error.name,
                                 coordinator_epoch)
                    else:
                        log.error("Unexpected error %s writing the marker of %s to %s; retrying", error.name,
                                  transactional_id, tp)
            if abort_sending:
                log.info("Markers of %s abandoned: the producer or coordinator epoch changed", transactional_id)
                m.pending_state = None
                return
            if not m.topic_partitions:
                error = await self.txn_manager.append_transaction_to_log(
                    transactional_id, coordinator_epoch, complete,
                    retry_on_error=lambda e: e == ErrorCode.COORDINATOR_NOT_AVAILABLE)
                if error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                    await asyncio.sleep(MARKER_RETRY_BACKOFF_S)
                    continue
                if error != ErrorCode.NONE:
                    log.info("Completing the transaction of %s failed: %s", transactional_id, error.name)
                return
            # the rest go to the leaders the metadata names by then (Kafka re-enqueues them)
            await self.marker_channel.wait_for_retry(MARKER_RETRY_BACKOFF_S)

    # ==== DescribeTransactions / ListTransactions ===================================================

    def handle_describe_transactions(self, transactional_id: str) -> DescribedTransaction:
        if not self.is_active:
            return DescribedTransaction(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if transactional_id == "":
            return DescribedTransaction(transactional_id, ErrorCode.INVALID_REQUEST)
        error, entry = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return DescribedTransaction(transactional_id, error)
        if entry is None or entry.metadata.state is S.DEAD:
            return DescribedTransaction(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        m = entry.metadata
        topics: dict[str, list[int]] = {}
        for tp in sorted(m.topic_partitions, key=lambda tp: (tp.topic, tp.partition)):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return DescribedTransaction(transactional_id, ErrorCode.NONE, m.state.state_name, m.txn_timeout_ms,
                                    m.txn_start_timestamp, m.producer_id, m.producer_epoch, topics)

    def handle_list_transactions(self, producer_ids: Iterable[int], state_names: Iterable[str],
                                 duration_filter_ms: int = -1) -> ListTransactionsResult:
        if not self.is_active:
            return ListTransactionsResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, [], [])
        error, unknown, listed = self.txn_manager.list_transaction_states(producer_ids, state_names,
                                                                          duration_filter_ms)
        return ListTransactionsResult(error, unknown, listed)
