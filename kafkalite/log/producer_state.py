"""Idempotent-producer state of one log (Kafka's ProducerStateManager / ProducerAppendInfo).

Per producer id: the current epoch and the metadata of its last 5 batches (first/last
sequence, first/last offset, timestamp). A produce is validated against it before anything is
written: a retried batch (same epoch and exact sequence range as a cached one) is a duplicate
and is answered with the original offsets; otherwise sequences must continue without a gap.

The rules follow Kafka's ``ProducerAppendInfo.checkProducerEpoch/checkSequence`` (2.5+):

* epoch lower than the current one -> INVALID_PRODUCER_EPOCH (clients; replication only warns);
* new epoch: the first sequence must be 0, unless the producer has no known epoch;
* same epoch: ``first_seq == last_seq + 1`` (wrapping at INT32_MAX), unless the producer has no
  known epoch — an unknown producer (e.g. its batches were removed by retention) is accepted
  with any sequence; Kafka no longer answers UNKNOWN_PRODUCER_ID.

Validation stages changes on copies; nothing is committed until the append succeeded, so a
multi-batch append is all-or-nothing here as in the log.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kafkalite.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kafkalite.log.record_batch import (INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader,
                                        increment_sequence)

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000    # producer.id.expiration.ms

# Where an append comes from (Kafka's AppendOrigin): it decides how much is validated.
ORIGIN_CLIENT = "client"            # a producer: full validation
ORIGIN_COORDINATOR = "coordinator"  # the broker's coordinators: no sequence checks
ORIGIN_REPLICATION = "replication"  # a follower copying the leader / log recovery: none


@dataclass(frozen=True, slots=True)
class BatchMetadata:
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

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                  last_offset: int, timestamp: int) -> None:
        if epoch != self.producer_epoch:
            # A new epoch starts a new sequence space: the old batches say nothing about it.
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        self.last_timestamp = timestamp


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validates one producer's batches of one append against its committed entry."""

    __slots__ = ("producer_id", "origin", "current_epoch", "entry")

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, origin: str) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self.current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
        self.entry = current.copy() if current is not None else ProducerStateEntry(producer_id)

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
            if not (self.current_epoch == NO_PRODUCER_EPOCH or in_sequence(last_seq, first_seq)):
                raise OutOfOrderSequenceError(
                    f"Out of order sequence number for producer {self.producer_id} at offset "
                    f"{offset}: {first_seq} (incoming seq. number), {last_seq} (current end "
                    f"sequence number)")

    def append(self, header: BatchHeader) -> None:
        """Validate and stage one batch (offsets already assigned in ``header``)."""
        epoch = header.producer_epoch
        first_offset = header.base_offset
        if header.is_control:
            # A transaction marker: epoch is checked; it ends the ongoing transaction.
            self._check_epoch(epoch, first_offset)
            if epoch != self.entry.producer_epoch:
                self.entry.batches.clear()
                self.entry.producer_epoch = epoch
            self.entry.current_txn_first_offset = None
            return
        self._check_epoch(epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(epoch, header.base_sequence, first_offset)
        self.entry.add_batch(epoch, header.base_sequence, header.last_sequence, first_offset,
                             header.last_offset, header.max_timestamp)
        if header.is_transactional and self.entry.current_txn_first_offset is None:
            self.entry.current_txn_first_offset = first_offset


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        # The offset up to which the state reflects the log.
        self.map_end_offset = 0

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self._producers.get(producer_id), origin)

    def analyze(self, headers: Iterable[BatchHeader], origin: str
                ) -> tuple[dict[int, ProducerAppendInfo], BatchMetadata | None]:
        """Validate the batches of one append (offsets assigned). Returns the staged updates, or
        a duplicate's metadata (then nothing must be appended). Raises the sequence/epoch errors.
        """
        updates: dict[int, ProducerAppendInfo] = {}
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
            info.append(h)
        return updates, None

    def update(self, info: ProducerAppendInfo) -> None:
        self._producers[info.producer_id] = info.entry

    def commit(self, updates: Mapping[int, ProducerAppendInfo], map_end_offset: int) -> None:
        for info in updates.values():
            self._producers[info.producer_id] = info.entry
        self.map_end_offset = map_end_offset

    def apply_replicated(self, headers: Iterable[BatchHeader]) -> None:
        """Fold batches already in the log into the state (rebuild on load / after truncation)."""
        for h in headers:
            if h.producer_id >= 0:
                info = self.prepare_update(h.producer_id, ORIGIN_REPLICATION)
                info.append(h)
                self._producers[h.producer_id] = info.entry
            self.map_end_offset = h.next_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._producers.clear()
        self.map_end_offset = offset

    def remove_expired_producers(self, now_ms: int,
                                 expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` without an open transaction."""
        expired = [pid for pid, e in self._producers.items()
                   if e.current_txn_first_offset is None
                   and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self._producers[pid]
        return len(expired)


__all__ = [
    "BatchMetadata", "ProducerStateEntry", "ProducerAppendInfo", "ProducerStateManager",
    "ORIGIN_CLIENT", "ORIGIN_COORDINATOR", "ORIGIN_REPLICATION", "NUM_BATCHES_TO_RETAIN",
    "in_sequence", "increment_sequence",
]
