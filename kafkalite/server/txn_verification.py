"""Transaction verification (KIP-890 part 1, Kafka 3.6+; `transaction.partition.verification.enable`).

Before the first transactional batch of a producer on a partition is appended, the transaction
coordinator is asked whether the partition is in the producer's ongoing transaction; if not, the
batch is refused. A write that no coordinator knows about (a zombie's late batch, a retry after
the transaction ended) would otherwise open a transaction that no marker ever ends, holding the
partition's last stable offset back forever.

As Kafka's ReplicaManager.handleProduceAppend and AddPartitionsToTxnManager, for one broker:
the coordinator is local, so verification is a synchronous lookup; callers run it right before
the append with no await in between, so no EndTxn can slip in (what Kafka's VerificationGuard
protects against across threads). Only partitions whose producer state shows no open
transaction of the producer at that epoch are verified (UnifiedLog.hasOngoingTransaction).

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


def transactional_producer(records: Optional[bytes]) -> Optional[tuple[int, int]]:
    """(producer id, epoch) of a validated partition's batch if it is transactional, else None."""
    if not records or len(records) < RECORD_BATCH_OVERHEAD:
        return None
    if not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:
        return None     # the common case, decided without parsing the header
    header = parse_header(records)
    if not (header.is_transactional and header.has_producer_id):
        return None
    return header.producer_id, header.producer_epoch


class TransactionVerifier:
    """The broker's side of verification: which partitions need it, and the coordinator's answer."""

    def __init__(self, config: Any, replica_manager: Any, transaction_coordinator: Any,
                 metadata_cache: Any) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.coordinator = transaction_coordinator
        self.cache = metadata_cache

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

    def _coordinator_unavailable(self, transactional_id: str) -> bool:
        """No leader for the id's `__transaction_state` partition (AddPartitionsToTxnManager's
        COORDINATOR_NOT_AVAILABLE), or no coordinator running."""
        c = self.coordinator
        if c is None or not c.is_active:
            return True
        topic = self.cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        info = topic.partitions.get(c.partition_for(transactional_id)) if topic is not None else None
        return info is None or info.leader < 0

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: list[TopicPartition], op: TransactionSupportedOperation
               ) -> dict[TopicPartition, ErrorCode]:
        """Synchronous; the partitions that failed verification with their (translated) error."""
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
        """ADD_PARTITION: put the partitions into the transaction (an append to
        `__transaction_state`); the failed ones with their error. The caller verifies again
        right before its append, since this awaits."""
        if not partitions:
            return {}
        if self._coordinator_unavailable(transactional_id):
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        error = await self.coordinator.handle_add_partitions_to_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
        if error == ErrorCode.NONE:
            return {}
        return {tp: map_coordinator_error(ErrorCode(error), op) for tp in partitions}
