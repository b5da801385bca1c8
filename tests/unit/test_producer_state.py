"""Idempotent producer state: Kafka's epoch/sequence rules, duplicate detection over the last five
batches, staging (all-or-nothing) and the lenient replication origin."""
from __future__ import annotations

import pytest

from kafkalite.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kafkalite.log.producer_state import (NUM_BATCHES_TO_RETAIN, ORIGIN_CLIENT, CompletedTxn,
                                          EndTxnMarker,
                                          ORIGIN_COORDINATOR, ORIGIN_REPLICATION,
                                          ProducerStateManager, in_sequence)
from kafkalite.log.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader

INT32_MAX = 2**31 - 1


def hdr(pid: int, epoch: int, seq: int, n: int, offset: int, ts: int = 1000,
        attributes: int = 0) -> BatchHeader:
    return BatchHeader(offset, 100, 0, 2, 0, attributes, n - 1, ts, ts, pid, epoch, seq, n)


def append(psm: ProducerStateManager, *headers: BatchHeader, origin: str = ORIGIN_CLIENT):
    updates, dup = psm.analyze(headers, origin)
    if dup is None:
        psm.commit(updates, headers[-1].next_offset)
    return dup


def test_in_sequence_wraps() -> None:
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(-1, 0)


def test_unknown_producer_accepts_any_sequence() -> None:
    psm = ProducerStateManager()
    assert append(psm, hdr(7, 0, 42, 3, 0)) is None
    e = psm.last_entry(7)
    assert e is not None and (e.producer_epoch, e.first_seq, e.last_seq) == (0, 42, 44)
    assert (e.first_data_offset, e.last_data_offset) == (0, 2)
    # Known now: the next batch must continue the sequence.
    with pytest.raises(OutOfOrderSequenceError) as exc:
        append(psm, hdr(7, 0, 50, 1, 3))
    assert exc.value.error_code == 45
    assert append(psm, hdr(7, 0, 45, 2, 3)) is None
    assert psm.last_entry(7).last_seq == 46


def test_duplicates_within_last_five_batches() -> None:
    psm = ProducerStateManager()
    seq, off = 0, 0
    sent = []
    for _ in range(7):
        h = hdr(1, 2, seq, 2, off, ts=5000 + off)
        assert append(psm, h) is None
        sent.append(h)
        seq += 2
        off += 2
    assert len(psm.last_entry(1).batches) == NUM_BATCHES_TO_RETAIN
    for h in sent[-5:]:
        # A retry carries the client's original batch: offsets differ until assigned.
        dup = append(psm, h._replace(base_offset=999))
        assert dup is not None
        assert (dup.first_offset, dup.last_offset) == (h.base_offset, h.last_offset)
        assert dup.timestamp == h.max_timestamp
    # Older than the cached five: not recognised, and out of order.
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, sent[0]._replace(base_offset=999))
    # Same sequence range but another epoch is not a duplicate.
    with pytest.raises(InvalidProducerEpochError):
        append(psm, sent[-1]._replace(producer_epoch=1))


def test_epoch_rules() -> None:
    psm = ProducerStateManager()
    append(psm, hdr(3, 5, 0, 4, 0))
    with pytest.raises(InvalidProducerEpochError) as exc:
        append(psm, hdr(3, 4, 4, 1, 4))
    assert exc.value.error_code == 47
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, hdr(3, 6, 4, 1, 4))           # new epoch must restart at 0
    assert append(psm, hdr(3, 6, 0, 1, 4)) is None
    e = psm.last_entry(3)
    assert e.producer_epoch == 6 and len(e.batches) == 1 and e.last_seq == 0


def test_sequence_wraparound() -> None:
    psm = ProducerStateManager()
    append(psm, hdr(9, 0, INT32_MAX - 1, 2, 0))
    assert psm.last_entry(9).last_seq == INT32_MAX
    assert append(psm, hdr(9, 0, 0, 3, 2)) is None
    assert psm.last_entry(9).last_seq == 2


def test_failed_append_stages_nothing() -> None:
    psm = ProducerStateManager()
    append(psm, hdr(1, 0, 0, 1, 0))
    before = psm.last_entry(1).copy()
    # First batch fine, second out of order: the whole append is refused, state unchanged.
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, hdr(1, 0, 1, 1, 1), hdr(1, 0, 5, 1, 2))
    after = psm.last_entry(1)
    assert list(after.batches) == list(before.batches)
    # Two in-order batches of one append are checked against each other.
    assert append(psm, hdr(1, 0, 1, 1, 1), hdr(1, 0, 2, 3, 2)) is None
    assert psm.last_entry(1).last_seq == 4
    assert psm.map_end_offset == 5


def test_several_producers_and_non_idempotent() -> None:
    psm = ProducerStateManager()
    assert append(psm, hdr(-1, -1, -1, 3, 0), hdr(1, 0, 0, 1, 3), hdr(2, 0, 0, 1, 4)) is None
    assert set(psm.producers) == {1, 2}


def test_replication_and_coordinator_origins() -> None:
    psm = ProducerStateManager()
    append(psm, hdr(4, 3, 10, 1, 0))
    # Replication: no sequence check, a lower epoch only warns.
    assert append(psm, hdr(4, 2, 99, 1, 1), origin=ORIGIN_REPLICATION) is None
    assert psm.last_entry(4).producer_epoch == 2
    # Coordinator: epoch checked, sequence not.
    append(psm, hdr(4, 3, 0, 1, 2), origin=ORIGIN_COORDINATOR)
    assert append(psm, hdr(4, 3, 77, 1, 3), origin=ORIGIN_COORDINATOR) is None
    with pytest.raises(InvalidProducerEpochError):
        append(psm, hdr(4, 1, 0, 1, 4), origin=ORIGIN_COORDINATOR)


def test_transactions_and_expiration() -> None:
    psm = ProducerStateManager()
    append(psm, hdr(8, 0, 0, 2, 10, ts=100, attributes=TRANSACTIONAL_MASK))
    assert psm.last_entry(8).current_txn_first_offset == 10
    append(psm, hdr(8, 0, 2, 1, 12, ts=100, attributes=TRANSACTIONAL_MASK))
    assert psm.last_entry(8).current_txn_first_offset == 10
    append(psm, hdr(9, 0, 0, 1, 13, ts=100))
    # Open transactions keep a producer alive.
    assert psm.remove_expired_producers(now_ms=100 + 10_000, expiration_ms=1000) == 1
    assert set(psm.producers) == {8}
    marker = hdr(8, 0, -1, 1, 14, ts=100, attributes=CONTROL_MASK | TRANSACTIONAL_MASK)
    updates, dup = psm.analyze([marker], ORIGIN_COORDINATOR, {14: EndTxnMarker(1, 0)})
    assert dup is None
    assert psm.commit(updates, 15) == [(CompletedTxn(8, 10, 14, False), 15)]
    assert psm.last_entry(8).current_txn_first_offset is None
    assert psm.remove_expired_producers(now_ms=100 + 999, expiration_ms=1000) == 0
    assert psm.remove_expired_producers(now_ms=100 + 1000, expiration_ms=1000) == 1
    assert not psm.producers


def test_apply_replicated_rebuilds_state() -> None:
    psm = ProducerStateManager()
    psm.apply_replicated([hdr(1, 0, 0, 2, 0), hdr(-1, -1, -1, 1, 2), hdr(1, 0, 2, 2, 3)])
    e = psm.last_entry(1)
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches] == \
        [(0, 1, 0, 1), (2, 3, 3, 4)]
    assert psm.map_end_offset == 5
    psm.truncate_fully_and_start_at(42)
    assert not psm.producers and psm.map_end_offset == 42
