"""Transaction states and the metadata of one transactional id (Kafka's TransactionMetadata).

A transactional id moves through::

    Empty -> Ongoing -> PrepareCommit -> CompleteCommit -> (Ongoing | Empty | Dead)
                     -> PrepareAbort  -> CompleteAbort  -> (Ongoing | Empty | Dead)
    Ongoing -> PrepareEpochFence -> PrepareAbort            (fencing a zombie / a timeout)

Every change is two-phase, as in Kafka: ``prepare_*`` computes the target as an immutable
:class:`TxnTransitMetadata` and marks the metadata with a *pending state* (so a concurrent
request gets CONCURRENT_TRANSACTIONS); the coordinator appends the target to
`__transaction_state` and only once that append is durable calls
:meth:`TransactionMetadata.complete_transition_to`. A failed append clears the pending state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Optional, Union

from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767      # Short.MaxValue


class TransactionState(IntEnum):
    """The status byte stored in TransactionLogValue."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions / ListTransactions report (and filter on)."""
        return _NAMES[self]


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

S = TransactionState

# Kafka's validPreviousStates: the states a transition into the key may start from.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

# States whose transactional id may expire (transactional.id.expiration.ms).
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransactionStateError(RuntimeError):
    """A transition Kafka treats as a coordinator bug (IllegalStateException)."""


# -- small pure functions ------------------------------------------------------------------------

def is_valid_transition(current: TransactionState, target: TransactionState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def state_from_id(state_id: int) -> TransactionState:
    try:
        return TransactionState(state_id)
    except ValueError:
        raise IllegalTransactionStateError(
            f"Unknown transaction state id {state_id} from the transaction status message") from None


def state_from_name(name: str) -> Optional[TransactionState]:
    return _BY_NAME.get(name)


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka never hands out Short.MaxValue, so that a producer can always be fenced by a bump."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


def has_pending_transaction(state: TransactionState) -> bool:
    return state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)


def epoch_bump(current_epoch: int, last_epoch: int, expected_epoch: Optional[int]
               ) -> Union[ErrorCode, tuple[int, int]]:
    """InitProducerId's epoch rule (prepareIncrementProducerEpoch): (next epoch, last epoch) or
    PRODUCER_FENCED.

    * no expected epoch (a new producer instance): bump, forget the last epoch;
    * expected == current, or no current epoch: a producer recovering (KIP-360): bump, remember it;
    * expected == last epoch: a retry of a bump whose answer was lost: answer the current one;
    * otherwise the caller is a fenced producer."""
    if expected_epoch is None:
        return current_epoch + 1, NO_PRODUCER_EPOCH
    if current_epoch == NO_PRODUCER_EPOCH or expected_epoch == current_epoch:
        return current_epoch + 1, current_epoch
    if expected_epoch == last_epoch:
        return current_epoch, last_epoch
    return ErrorCode.PRODUCER_FENCED


def end_txn_decision(state: TransactionState, commit: bool
                     ) -> Union[ErrorCode, TransactionState]:
    """EndTxn against the current state (no pending transition): the prepare state to move to,
    or the answer without a transition (NONE for a retried EndTxn of a completed transaction)."""
    if state is S.ONGOING:
        return S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    if state is S.COMPLETE_COMMIT:
        return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
    if state is S.COMPLETE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
    if state is S.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
    if state is S.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
    if state is S.EMPTY:
        return ErrorCode.INVALID_TXN_STATE
    raise IllegalTransactionStateError(f"EndTxn found the transaction in state {state.state_name}")


def complete_state_for(prepare: TransactionState) -> TransactionState:
    if prepare is S.PREPARE_COMMIT:
        return S.COMPLETE_COMMIT
    if prepare is S.PREPARE_ABORT:
        return S.COMPLETE_ABORT
    raise IllegalTransactionStateError(f"no completion for state {prepare.state_name}")


# -- the metadata ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a transition: what is written to `__transaction_state`."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = S.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The state an in-flight transition goes to; blocks further transitions meanwhile.
    pending_state: Optional[TransactionState] = None
    # A fence whose append failed already bumped the epoch (never shown to a client): the next
    # fence reuses it rather than bumping again.
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def snapshot(self) -> TxnTransitMetadata:
        """The current state as a transit (no pending state set; Kafka's prepareNoTransit)."""
        return TxnTransitMetadata(self.producer_id, self.last_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp)

    # -- prepare ---------------------------------------------------------------------------------
    def _prepare(self, state: TransactionState, producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, txn_timeout_ms: int,
                 topic_partitions: frozenset[TopicPartition], txn_start_timestamp: int,
                 update_timestamp: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {state.state_name} while it already has "
                f"a pending state {self.pending_state.state_name}")
        if producer_id < 0:
            raise IllegalTransactionStateError(f"Illegal new producer id {producer_id}")
        if state is not S.DEAD and producer_epoch < 0:
            raise IllegalTransactionStateError(f"Illegal new producer epoch {producer_epoch}")
        if not is_valid_transition(self.state, state):
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {state.state_name} failed since the target "
                f"state {state.state_name} is not a valid previous state of the current state "
                f"{self.state.state_name}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.producer_id, producer_epoch, last_producer_epoch,
                                  txn_timeout_ms, state, topic_partitions, txn_start_timestamp,
                                  update_timestamp)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise IllegalTransactionStateError(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.topic_partitions),
                             self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: Optional[int],
                                         now_ms: int) -> Union[ErrorCode, TxnTransitMetadata]:
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateError(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bump = epoch_bump(self.producer_epoch, self.last_producer_epoch, expected_epoch)
        if isinstance(bump, ErrorCode):
            return bump
        next_epoch, last_epoch = bump
        return self._prepare(S.EMPTY, self.producer_id, next_epoch, last_epoch, txn_timeout_ms,
                             frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if has_pending_transaction(self.state):
            raise IllegalTransactionStateError("Cannot rotate producer ids while a transaction is still pending")
        return self._prepare(S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions: frozenset[TopicPartition] | set[TopicPartition],
                               now_ms: int) -> TxnTransitMetadata:
        # A new transaction starts with its first partition.
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) \
            else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions | set(partitions)),
                             start, now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions),
                             self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        # The prepare was written: a failed fence before it no longer matters.
        self.has_failed_epoch_fence = False
        return self._prepare(complete_state_for(self.state), self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                             self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    # -- complete --------------------------------------------------------------------------------
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply a transition whose record is durable; checks it is the one prepared."""
        target = self.pending_state
        if target is None or target is not t.state:
            self._fail(t)
        if target is S.EMPTY:   # InitProducerId
            bump_ok = t.producer_epoch == self.producer_epoch + 1 or \
                (t.producer_epoch == 0 and t.producer_id != self.producer_id)
            if (self.producer_epoch != t.producer_epoch and not bump_ok) or t.topic_partitions \
                    or t.txn_start_timestamp != -1:
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.last_producer_id = t.last_producer_id
        elif target is S.ONGOING:   # AddPartitions / AddOffsets
            if not self._same_producer(t) or not self.topic_partitions <= t.topic_partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions |= t.topic_partitions
        elif target in (S.PREPARE_ABORT, S.PREPARE_COMMIT):   # EndTxn
            if not self._same_producer(t) or self.topic_partitions != t.topic_partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms \
                    or self.txn_start_timestamp != t.txn_start_timestamp:
                self._fail(t)
        elif target in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):   # markers written
            if not self._same_producer(t) or self.txn_timeout_ms != t.txn_timeout_ms \
                    or t.txn_start_timestamp == -1:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
        else:
            # PrepareEpochFence is never completed (it becomes PrepareAbort at once); Dead is
            # removed from the cache, never completed.
            self._fail(t)
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = target

    def _same_producer(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _fail(self, t: TxnTransitMetadata) -> None:
        raise IllegalTransactionStateError(
            f"TransactionalId {self.transactional_id} failed transition to state {t} due to unexpected "
            f"metadata (current {self.state.state_name}, pending "
            f"{self.pending_state.state_name if self.pending_state else None})")

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` is written (or the partition is gone): stop waiting for it."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransactionStateError(
                f"Transaction metadata's current state is {self.state.state_name} while trying to "
                f"remove partitions whose txn marker has been sent")
        self.topic_partitions.discard(tp)


def metadata_from_transit(transactional_id: str, t: TxnTransitMetadata) -> TransactionMetadata:
    """Metadata as loaded from a record (Kafka forgets the last epoch on load)."""
    return TransactionMetadata(
        transactional_id=transactional_id, producer_id=t.producer_id,
        last_producer_id=NO_PRODUCER_ID, producer_epoch=t.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH, txn_timeout_ms=t.txn_timeout_ms, state=t.state,
        topic_partitions=set(t.topic_partitions) if t.state is not S.EMPTY else set(),
        txn_start_timestamp=t.txn_start_timestamp,
        txn_last_update_timestamp=t.txn_last_update_timestamp)
