"""Transaction verification (KIP-890 part 1, Kafka 3.6+; `transaction.partition.verification.enable`).

Before the first transactional batch of a producer on a partition is appended, the transaction
coordinator is asked whether the partition is in the producer's ongoing transaction; if not, the
batch is refused. A write that no coordinator knows about (a zombie's late batch, a retry after
the transaction ended) would otherwise open a transaction that no marker ever ends, holding the
partition's last stable offset back forever.

As Kafka's ReplicaManager.handleProduceAppend and AddPartitionsToTxnManager: when the
transactional id's coordinator is this broker, verification is a synchronous lookup that
callers run right before the append with no await in between, so no EndTxn can slip in; when it
is another broker, AddPartitionsToTxn goes over the network and a guard taken from the producer
state before asking refuses the append if a marker came in meanwhile (what Kafka's
VerificationGuard does; see TransactionVerifier). Only partitions whose producer state shows no
open transaction of the producer at that epoch are verified (UnifiedLog.hasOngoingTransaction).

The client's request version chooses Kafka's TransactionSupportedOperation:
* DEFAULT_ERROR (Produce <= 10, TxnOffsetCommit <= 3): TRANSACTION_ABORTABLE is answered as
  INVALID_TXN_STATE, which these clients know;
* GENERIC_ERROR_SUPPORTED (Produce 11, TxnOffsetCommit 4): TRANSACTION_ABORTABLE as is;
* ADD_PARTITION (Produce >= 12, TxnOffsetCommit >= 5): the broker adds the partition to the
  transaction itself (transaction version 2 clients send no AddPartitionsToTxn), whatever the
  switch says.
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH (what producers expect here).
"""
from __future__ import annotations

import enum
from typing import Any, Iterable, Optional

from kafkalite.log.record_batch import (ATTRIBUTES_OFFSET, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_MASK,
                                        parse_header)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.cluster.topic_validation import TRANSACTION_STATE_TOPIC_NAME


class TransactionSupportedOperation(enum.Enum):
    DEFAULT_ERROR = "default_error"
    GENERIC_ERROR_SUPPORTED = "generic_error_supported"
    ADD_PARTITION = "add_partition"

    @property
    def supports_epoch_bump(self) -> bool:
        return self is TransactionSupportedOperation.ADD_PARTITION


def produce_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's produceRequestVersionToTransactionSupportedOperation."""
    if version > 11:
        return TransactionSupportedOperation.ADD_PARTITION
    if version > 10:
        return TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED
    return TransactionSupportedOperation.DEFAULT_ERROR


def txn_offset_commit_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation."""
    if version > 4:
        return TransactionSupportedOperation.ADD_PARTITION
    if version > 3:
        return TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED
    return TransactionSupportedOperation.DEFAULT_ERROR


def map_coordinator_error(error: ErrorCode, op: TransactionSupportedOperation) -> ErrorCode:
    """AddPartitionsToTxnManager's per-partition translation of the coordinator's answer."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and op is TransactionSupportedOperation.DEFAULT_ERROR:
        return ErrorCode.INVALID_TXN_STATE
    return error


# Retriable verification errors older producers may not retry: Kafka answers NOT_ENOUGH_REPLICAS,
# which they retry without a metadata refresh.
_PRODUCE_RETRIABLE = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def produce_error(error: ErrorCode, op: TransactionSupportedOperation) -> tuple[ErrorCode, Optional[str]]:
    """ReplicaManager's translation of a verification error into the Produce answer."""
    if error == ErrorCode.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error in _PRODUCE_RETRIABLE or (error == ErrorCode.CONCURRENT_TRANSACTIONS and not op.supports_epoch_bump):
        return ErrorCode.NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added to the "
                                               f"transaction. Underlying error: {error.name}")
    return error, None


def txn_offset_commit_error(error: ErrorCode) -> ErrorCode:
    """GroupMetadataManager.maybeConvertOffsetCommitError, applied to verification errors."""
    if error == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def transactional_producer(records: Optional[bytes | memoryview]) -> Optional[tuple[int, int]]:
    """(producer id, epoch) of a validated partition's batch if it is transactional, else None."""
    if not records or len(records) < RECORD_BATCH_OVERHEAD:
        return None
    if not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:
        return None     # the common case, decided without parsing the header
    header = parse_header(records)
    if not (header.is_transactional and header.has_producer_id):
        return None
    return header.producer_id, header.producer_epoch


# What the verification saw of one partition before it asked a remote coordinator: the
# partition object and the producer's state entry there (see VerificationGuards).
_GuardSnapshot = tuple[Any, Any]


class TransactionVerifier:
    """The broker's side of verification: which partitions need it, and the coordinator's answer.

    The coordinator of a transactional id is the leader of its `__transaction_state` partition:
    this broker's own coordinator is asked directly (synchronously for a check), another broker's
    through the AddPartitionsToTxnManager (AddPartitionsToTxn v5, verify_only or not).

    The remote case awaits the network between the coordinator's answer and the append: an
    EndTxn may complete meanwhile and its marker land on the partition, after which the append
    would open a transaction no marker ends. Kafka's VerificationGuard (a token in the producer
    state, cleared by the next append of the producer) refuses such an append; kafkalite's logs
    have no guard, so the verifier takes the same evidence from the producer state: the producer's
    entry object before asking. Every append of the producer's that is not a plain in-sequence
    continuation (a marker, a transaction start, a new epoch) replaces the entry, as does a reload
    of the state. Right before the append (no await in between) a partition without an ongoing
    transaction of the producer whose entry is no longer the one seen before is refused with
    INVALID_TXN_STATE ("Record was not part of an ongoing transaction", Kafka's answer)."""

    def __init__(self, config: Any, replica_manager: Any, transaction_coordinator: Any,
                 metadata_cache: Any, add_partitions_manager: Any = None, broker_id: Optional[int] = None) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.coordinator = transaction_coordinator
        self.cache = metadata_cache
        self.add_partitions_manager = add_partitions_manager
        self.broker_id = broker_id if broker_id is not None else getattr(transaction_coordinator, "broker_id", -1)

    def applies(self, transactional_id: Optional[str], op: TransactionSupportedOperation) -> bool:
        # Read per request: the switch turns verification off without a restart in Kafka.
        return transactional_id is not None and (
            op.supports_epoch_bump or bool(self.config.transaction_partition_verification_enable))

    def partitions_to_verify(self, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Those without an open transaction of this producer and epoch in their producer state.
        Partitions not hosted here are left to the append, which answers their error."""
        rm = self.replica_manager
        return [tp for tp in partitions
                if rm.get_partition(tp) is not None and not rm.has_ongoing_transaction(tp, producer_id, producer_epoch)]

    def remote_coordinator(self, transactional_id: str) -> Optional[int]:
        """The broker to ask when the id's coordinator is another broker reachable through the
        AddPartitionsToTxnManager; None: ask (or fail with) the local coordinator."""
        m = self.add_partitions_manager
        if m is None:
            return None
        coordinator_id = m.coordinator_of(transactional_id)
        return coordinator_id if coordinator_id is not None and coordinator_id != self.broker_id else None

    def _coordinator_unavailable(self, transactional_id: str) -> bool:
        """No leader for the id's `__transaction_state` partition (AddPartitionsToTxnManager's
        COORDINATOR_NOT_AVAILABLE), or no coordinator running."""
        if self.add_partitions_manager is not None and self.add_partitions_manager.coordinator_of(transactional_id) is None:
            return True
        c = self.coordinator
        if c is None or not c.is_active:
            return True
        topic = self.cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        info = topic.partitions.get(c.partition_for(transactional_id)) if topic is not None else None
        return info is None or info.leader < 0

    async def verify_before_append(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                   partitions: Iterable[TopicPartition], op: TransactionSupportedOperation
                                   ) -> dict[TopicPartition, ErrorCode]:
        """The partitions (of those needing it) that failed verification, with their translated
        error; with ADD_PARTITION the others are added to the transaction first. The caller must
        append right after this returns, with no await in between."""
        todo = self.partitions_to_verify(producer_id, producer_epoch, partitions)
        if not todo:
            return {}
        remote = self.remote_coordinator(transactional_id)
        if remote is None:
            failed: dict[TopicPartition, ErrorCode] = {}
            if op.supports_epoch_bump:
                # Transaction version 2 clients do not add partitions: the broker does.
                failed = await self.add(transactional_id, producer_id, producer_epoch, todo, op)
                todo = [tp for tp in self.partitions_to_verify(producer_id, producer_epoch, todo) if tp not in failed]
            failed.update(self.verify(transactional_id, producer_id, producer_epoch, todo, op))
            return failed
        guards = self.snapshot(producer_id, todo)
        answers = await self.add_partitions_manager.verify_transaction(
            remote, transactional_id, producer_id, producer_epoch, todo, verify_only=not op.supports_epoch_bump)
        failed = {tp: map_coordinator_error(e, op) for tp, e in answers.items() if e != ErrorCode.NONE}
        failed.update(self.stale_verifications(producer_id, producer_epoch,
                                               {tp: g for tp, g in guards.items() if tp not in failed}))
        return failed

    def snapshot(self, producer_id: int, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, _GuardSnapshot]:
        out: dict[TopicPartition, _GuardSnapshot] = {}
        for tp in partitions:
            p = self.replica_manager.get_partition(tp)
            if p is not None:
                out[tp] = (p, p.log.producer_state.last_entry(producer_id))
        return out

    def stale_verifications(self, producer_id: int, producer_epoch: int,
                            guards: dict[TopicPartition, _GuardSnapshot]) -> dict[TopicPartition, ErrorCode]:
        """Partitions whose verification no longer holds (see the class doc)."""
        rm = self.replica_manager
        stale: dict[TopicPartition, ErrorCode] = {}
        for tp, (partition, entry) in guards.items():
            p = rm.get_partition(tp)
            if p is None or p is not partition:
                continue    # the append answers the partition's new state (gone, not leader)
            if rm.has_ongoing_transaction(tp, producer_id, producer_epoch):
                continue
            if p.log.producer_state.last_entry(producer_id) is not entry:
                stale[tp] = ErrorCode.INVALID_TXN_STATE
        return stale

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: list[TopicPartition], op: TransactionSupportedOperation
               ) -> dict[TopicPartition, ErrorCode]:
        """The local coordinator, synchronously; the partitions that failed verification with
        their (translated) error."""
        if not partitions:
            return {}
        if self._coordinator_unavailable(transactional_id):
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        answers = self.coordinator.handle_verify_partitions_in_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
        return {tp: map_coordinator_error(e, op) for tp, e in answers.items() if e != ErrorCode.NONE}

    async def add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                  partitions: list[TopicPartition], op: TransactionSupportedOperation
                  ) -> dict[TopicPartition, ErrorCode]:
        """ADD_PARTITION with the local coordinator: put the partitions into the transaction (an
        append to `__transaction_state`); the failed ones with their error. The caller verifies
        again right before its append, since this awaits."""
        if not partitions:
            return {}
        if self._coordinator_unavailable(transactional_id):
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        error = await self.coordinator.handle_add_partitions_to_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
        if error == ErrorCode.NONE:
            return {}
        return {tp: map_coordinator_error(ErrorCode(error), op) for tp in partitions}
