"""Idempotent and transactional producer state of one log (Kafka's ProducerStateManager /
ProducerAppendInfo).

Per producer id: the current epoch, the metadata of its last 5 batches (first/last sequence,
first/last offset, timestamp), the coordinator epoch of the last transaction marker and the
first offset of its ongoing transaction. A produce is validated against it before anything is
written: a retried batch (same epoch and exact sequence range as a cached one) is a duplicate
and is answered with the original offsets; otherwise sequences must continue without a gap.

The rules follow Kafka's ``ProducerAppendInfo`` (2.5+ / KIP-360):

* epoch lower than the current one -> INVALID_PRODUCER_EPOCH (clients and coordinators;
  replication only warns);
* new epoch: the first sequence must be 0, unless the producer has no known epoch;
* same epoch: ``first_seq == last_seq + 1`` (wrapping at INT32_MAX), unless the producer has no
  known epoch. An unknown producer (never seen, its batches removed by retention or
  DeleteRecords, or expired) is accepted with any sequence: since KIP-360 (Kafka 2.5) brokers no
  longer answer UNKNOWN_PRODUCER_ID for it — that is what "as Kafka does" means here;
* a non-transactional batch from a producer whose transaction is ongoing -> INVALID_TXN_STATE;
  the first transactional batch starts a transaction (its offset is the transaction's first
  offset, which holds the last stable offset back);
* a COMMIT/ABORT marker checks the producer epoch, then the coordinator epoch (lower than the
  producer's last -> TRANSACTION_COORDINATOR_FENCED; replication only logs), and completes the
  ongoing transaction as a :class:`CompletedTxn` whose last offset is the marker's offset. A
  marker for a producer without an ongoing transaction completes nothing but is still applied.

Validation stages changes on copies; nothing is committed until the append succeeded, so a
multi-batch append is all-or-nothing here as in the log.

The last stable offset: ``ongoing`` transactions (ordered by first offset) are undecided;
completed ones stay "unreplicated" until the high watermark passes their marker (Kafka's
unreplicatedTxns), so a read_committed consumer never sees data whose outcome could still be
lost in a leader change.
"""
from __future__ import annotations

import bisect
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple

from kafkalite.log.errors import (InvalidProducerEpochError, InvalidTxnStateError,
                                  OutOfOrderSequenceError, TransactionCoordinatorFencedError)
from kafkalite.log.record_batch import (CONTROL_MASK, CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT,
                                        INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE,
                                        TRANSACTIONAL_MASK, BatchHeader, increment_sequence)

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000    # producer.id.expiration.ms

# Where an append comes from (Kafka's AppendOrigin): it decides how much is validated.
ORIGIN_CLIENT = "client"            # a producer: full validation
ORIGIN_COORDINATOR = "coordinator"  # the broker's coordinators: no sequence checks
ORIGIN_REPLICATION = "replication"  # a follower copying the leader / log recovery: none


class EndTxnMarker(NamedTuple):
    """The content of a COMMIT/ABORT control record (Kafka's EndTransactionMarker)."""
    control_type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == CONTROL_TYPE_COMMIT


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker; ``last_offset`` is the marker's offset."""
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None      # the marker's offset once completed


class BatchMetadata(NamedTuple):
    """One of a producer's last batches (a tuple: made on every idempotent append)."""
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        b = self.batches[-1] if self.batches else None
        return b.last_offset - b.first_offset if b is not None else 0

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.last_timestamp, self.coordinator_epoch,
                                  self.current_txn_first_offset)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, header.last_sequence)

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            # A new epoch starts a new sequence space: the old batches say nothing about it.
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                  last_offset: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        self.last_timestamp = timestamp


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validates one producer's batches of one append against its committed entry, staging
    the new entry, the transactions it starts and those its markers complete."""

    __slots__ = ("producer_id", "origin", "current_epoch", "entry", "started_transactions",
                 "completed_transactions")

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, origin: str) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self.current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
        self.entry = current.copy() if current is not None else ProducerStateEntry(producer_id)
        self.started_transactions: list[TxnMetadata] = []
        self.completed_transactions: list[CompletedTxn] = []

    def _check_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.entry.producer_epoch:
            msg = (f"Epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is "
                   f"smaller than the last seen epoch {self.entry.producer_epoch}")
            if self.origin == ORIGIN_REPLICATION:
                log.warning(msg)
            else:
                raise InvalidProducerEpochError(msg)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        entry = self.entry
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{entry.producer_epoch} (current producer epoch)")
        else:
            last_seq = entry.last_seq
            # No known epoch (KIP-360): any sequence is accepted.
            if not (self.current_epoch == NO_PRODUCER_EPOCH or in_sequence(last_seq, first_seq)):
                raise OutOfOrderSequenceError(
                    f"Out of order sequence number for producer {self.producer_id} at offset "
                    f"{offset}: {first_seq} (incoming seq. number), {last_seq} (current end "
                    f"sequence number)")

    def _check_coordinator_epoch(self, marker: EndTxnMarker, offset: int) -> None:
        if self.entry.coordinator_epoch > marker.coordinator_epoch:
            msg = (f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                   f"{marker.coordinator_epoch} (zombie), {self.entry.coordinator_epoch} (current)")
            if self.origin == ORIGIN_REPLICATION:
                log.info(msg)
            else:
                raise TransactionCoordinatorFencedError(msg)

    def append(self, header: BatchHeader, marker: EndTxnMarker | None = None
               ) -> CompletedTxn | None:
        """Validate and stage one batch (offsets already assigned in ``header``). A control
        batch needs its ``marker``; an empty one (its marker cleaned away) changes nothing."""
        if header.is_control:
            if marker is None:
                if header.records_count > 0:
                    raise ValueError(f"control batch at offset {header.base_offset} of producer "
                                     f"{self.producer_id} needs its marker")
                return None
            return self.append_end_txn_marker(marker, header.producer_epoch, header.base_offset,
                                              header.max_timestamp)
        self.append_data_batch(header)
        return None

    def append_data_batch(self, header: BatchHeader) -> None:
        epoch = header.producer_epoch
        first_offset = header.base_offset
        self._check_epoch(epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(epoch, header.base_sequence, first_offset)
        entry = self.entry
        entry.add_batch(epoch, header.base_sequence, header.last_sequence, first_offset,
                        header.last_offset, header.max_timestamp)
        if entry.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset}")
        if entry.current_txn_first_offset is None and header.is_transactional:
            entry.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, marker: EndTxnMarker, producer_epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        self._check_epoch(producer_epoch, offset)
        self._check_coordinator_epoch(marker, offset)
        entry = self.entry
        completed = None
        # Only a transaction with data is completed: an empty one has no effect on the LSO.
        if entry.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, entry.current_txn_first_offset, offset,
                                     marker.control_type == CONTROL_TYPE_ABORT)
            self.completed_transactions.append(completed)
        entry.maybe_update_producer_epoch(producer_epoch)
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = timestamp
        return completed


class InSequenceBatch:
    """The common case staged without copying the entry: one data batch of a known producer at
    its current epoch that continues its sequence and neither starts nor breaks a transaction
    (every batch of an idempotent producer after its first). Committing appends the batch to the
    live entry, which is what the full path's copy-and-replace ends with."""

    __slots__ = ("producer_id", "entry", "batch")
    started_transactions: tuple[TxnMetadata, ...] = ()
    completed_transactions: tuple[CompletedTxn, ...] = ()

    def __init__(self, producer_id: int, entry: ProducerStateEntry, batch: BatchMetadata) -> None:
        self.producer_id = producer_id
        self.entry = entry
        self.batch = batch


StagedUpdate = ProducerAppendInfo | InSequenceBatch


class _OffsetOrdered:
    """Transactions keyed by first offset, in offset order (Kafka's TreeMap)."""

    __slots__ = ("_keys", "_txns")

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._txns: dict[int, TxnMetadata] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return (self._txns[k] for k in self._keys)

    def put(self, txn: TxnMetadata) -> None:
        if txn.first_offset not in self._txns:
            bisect.insort(self._keys, txn.first_offset)
        self._txns[txn.first_offset] = txn

    def pop(self, first_offset: int) -> TxnMetadata | None:
        txn = self._txns.pop(first_offset, None)
        if txn is not None:
            del self._keys[bisect.bisect_left(self._keys, first_offset)]
        return txn

    def first(self) -> TxnMetadata | None:
        return self._txns[self._keys[0]] if self._keys else None

    def remove_where(self, pred) -> None:
        gone = [k for k in self._keys if pred(self._txns[k])]
        for k in gone:
            self.pop(k)

    def clear(self) -> None:
        self._keys.clear()
        self._txns.clear()


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        # Undecided transactions, and completed ones whose marker the high watermark has not
        # passed yet: both hold the last stable offset back.
        self._ongoing = _OffsetOrdered()
        self._unreplicated = _OffsetOrdered()
        # The offset up to which the state reflects the log.
        self.map_end_offset = 0

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self._producers.get(producer_id), origin)

    def analyze(self, headers: Iterable[BatchHeader], origin: str,
                markers: Mapping[int, EndTxnMarker] | None = None
                ) -> tuple[dict[int, StagedUpdate], BatchMetadata | None]:
        """Validate the batches of one append (offsets assigned). ``markers`` maps the base
        offset of each control batch to its marker. Returns the staged updates, or a
        duplicate's metadata (then nothing must be appended). Raises the sequence, epoch and
        transaction errors."""
        if origin == ORIGIN_CLIENT and type(headers) is list and len(headers) == 1:
            fast = self._analyze_in_sequence(headers[0])
            if fast is not None:
                return fast
        updates: dict[int, StagedUpdate] = {}
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            if origin == ORIGIN_CLIENT:
                current = self._producers.get(pid)
                if current is not None:
                    dup = current.find_duplicate_batch(h)
                    if dup is not None:
                        return updates, dup
            info = updates.get(pid)
            if info is None:
                info = updates[pid] = self.prepare_update(pid, origin)
            info.append(h, markers.get(h.base_offset) if markers else None)
        return updates, None

    def _analyze_in_sequence(self, h: BatchHeader
                             ) -> tuple[dict[int, StagedUpdate], BatchMetadata | None] | None:
        """One client batch: the answer of the full path when it is a non-producer batch, a
        duplicate or an :class:`InSequenceBatch`; None when the full path must decide (new
        producer or epoch, a gap, a transaction starting or a plain write inside one)."""
        pid = h.producer_id
        if pid < 0:
            return {}, None
        current = self._producers.get(pid)
        if current is None or h.attributes & CONTROL_MASK or h.producer_epoch != current.producer_epoch \
                or not current.batches:
            return None
        first_seq, last_seq = h.base_sequence, h.last_sequence
        dup = current.batch_with_sequence_range(first_seq, last_seq)
        if dup is not None:
            return {}, dup
        if not in_sequence(current.batches[-1].last_seq, first_seq) or \
                bool(h.attributes & TRANSACTIONAL_MASK) != (current.current_txn_first_offset is not None):
            return None
        return {pid: InSequenceBatch(pid, current, BatchMetadata(
            first_seq, last_seq, h.base_offset, h.last_offset, h.max_timestamp))}, None

    def update(self, info: StagedUpdate) -> None:
        if type(info) is InSequenceBatch:
            entry = info.entry
            entry.batches.append(info.batch)      # the deque keeps the last 5
            entry.last_timestamp = info.batch.timestamp
            return
        self._producers[info.producer_id] = info.entry
        for txn in info.started_transactions:
            self._ongoing.put(txn)

    def commit(self, updates: Mapping[int, StagedUpdate], map_end_offset: int
               ) -> list[tuple[CompletedTxn, int]]:
        """Apply staged updates after the append. Returns each completed transaction (in
        marker order) with the last stable offset at its completion — what the transaction
        index records for an abort (Kafka: update, then lastStableOffset + completeTxn)."""
        completed: list[CompletedTxn] = []
        for info in updates.values():
            self.update(info)
            if info.completed_transactions:
                completed.extend(info.completed_transactions)
        if not completed:
            self.map_end_offset = map_end_offset
            return []
        completed.sort(key=lambda c: c.last_offset)
        out = []
        for c in completed:
            out.append((c, self.last_stable_offset_of(c)))
            self.complete_txn(c)
        self.map_end_offset = map_end_offset
        return out

    def apply_replicated(self, headers: Iterable[BatchHeader],
                         markers: Mapping[int, EndTxnMarker] | None = None
                         ) -> list[tuple[CompletedTxn, int]]:
        """Fold batches already in the log into the state (load, recovery, truncation).
        Returns the transactions completed, each with its LSO at completion."""
        out: list[tuple[CompletedTxn, int]] = []
        for h in headers:
            if h.producer_id >= 0:
                info = self.prepare_update(h.producer_id, ORIGIN_REPLICATION)
                info.append(h, markers.get(h.base_offset) if markers else None)
                out.extend(self.commit({h.producer_id: info}, h.next_offset))
            self.map_end_offset = h.next_offset
        return out

    # -- transactions ------------------------------------------------------------------------
    def last_stable_offset_of(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: the first offset of the earliest transaction
        of another producer still ongoing, else just past the marker (Kafka's
        lastStableOffset(completedTxn))."""
        for txn in self._ongoing:
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed.first_offset)
        if txn is None:
            log.warning("Completed transaction %s was not ongoing", completed)
            txn = TxnMetadata(completed.producer_id, completed.first_offset)
        txn.last_offset = completed.last_offset
        self._unreplicated.put(txn)

    @property
    def ongoing_transactions(self) -> list[TxnMetadata]:
        return list(self._ongoing)

    @property
    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction."""
        txn = self._ongoing.first()
        return None if txn is None else txn.first_offset

    @property
    def first_unstable_offset(self) -> int | None:
        """Like :attr:`first_undecided_offset` but also counting completed transactions whose
        marker the high watermark has not passed (Kafka's firstUnstableOffset)."""
        offsets = [t.first_offset for t in (self._ongoing.first(), self._unreplicated.first())
                   if t is not None]
        return min(offsets) if offsets else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._unreplicated.remove_where(
            lambda t: t.last_offset is not None and t.last_offset < high_watermark)

    # -- housekeeping --------------------------------------------------------------------------
    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing.put(TxnMetadata(entry.producer_id, entry.current_txn_first_offset))

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """The log start offset moved (retention, DeleteRecords): drop completed transactions
        below it. Producers are kept even when all their data is gone — as Kafka 2.8+ does,
        they go only after ``producer.id.expiration.ms`` — so a retried batch is still
        recognised; a producer that has expired is then accepted with any sequence (KIP-360)."""
        self._unreplicated.remove_where(
            lambda t: t.last_offset is not None and t.last_offset < log_start_offset)
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.map_end_offset = offset

    def remove_expired_producers(self, now_ms: int,
                                 expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` without an open transaction."""
        expired = [pid for pid, e in self._producers.items()
                   if is_producer_expired(e, now_ms, expiration_ms)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)


def is_producer_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms


__all__ = [
    "BatchMetadata", "ProducerStateEntry", "ProducerAppendInfo", "InSequenceBatch", "ProducerStateManager",
    "EndTxnMarker", "CompletedTxn", "TxnMetadata", "is_producer_expired",
    "ORIGIN_CLIENT", "ORIGIN_COORDINATOR", "ORIGIN_REPLICATION", "NUM_BATCHES_TO_RETAIN",
    "in_sequence", "increment_sequence", "CONTROL_TYPE_ABORT", "CONTROL_TYPE_COMMIT",
]
