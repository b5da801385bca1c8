"""`__transaction_state` records: Kafka's TransactionLogKey / TransactionLogValue layouts."""
from __future__ import annotations

import struct

import pytest

from kafkalite.coordinator.transaction import transaction_log as tl
from kafkalite.coordinator.transaction.transaction_metadata import TransactionState as S, TxnTransitMetadata
from kafkalite.replica.partition import TopicPartition


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _transit(state: S, partitions: frozenset[TopicPartition] = frozenset(), start: int = 1_700_000_000_000
             ) -> TxnTransitMetadata:
    return TxnTransitMetadata(producer_id=4242, last_producer_id=-1, producer_epoch=7, last_producer_epoch=-1,
                              txn_timeout_ms=60_000, state=state, topic_partitions=partitions,
                              txn_start_timestamp=start, txn_last_update_timestamp=1_700_000_000_123)


def test_key_bytes_exact() -> None:
    assert tl.key_bytes("my-txn") == b"\x00\x00" + _string("my-txn")
    assert tl.decode_key(tl.key_bytes("my-txn")) == "my-txn"
    assert tl.decode_key(tl.key_bytes("é€")) == "é€"


def test_value_bytes_exact_ongoing() -> None:
    parts = frozenset({TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)})
    expected = (
        struct.pack(">h", 0)                      # value version 0
        + struct.pack(">q", 4242)                 # producer id
        + struct.pack(">h", 7)                    # producer epoch
        + struct.pack(">i", 60_000)               # transaction timeout
        + struct.pack(">b", 1)                    # status: Ongoing
        + struct.pack(">i", 2)                    # two topics, sorted
        + _string("a") + struct.pack(">iii", 2, 0, 2)
        + _string("b") + struct.pack(">ii", 1, 1)
        + struct.pack(">q", 1_700_000_000_123)    # last update
        + struct.pack(">q", 1_700_000_000_000))   # start
    assert tl.value_bytes(_transit(S.ONGOING, parts)) == expected
    m = tl.decode_value("x", expected)
    assert m is not None
    assert (m.transactional_id, m.producer_id, m.producer_epoch, m.txn_timeout_ms, m.state) == \
        ("x", 4242, 7, 60_000, S.ONGOING)
    assert m.topic_partitions == set(parts)
    assert (m.txn_last_update_timestamp, m.txn_start_timestamp) == (1_700_000_000_123, 1_700_000_000_000)
    assert (m.last_producer_epoch, m.pending_state) == (-1, None)


def test_empty_state_writes_null_partitions() -> None:
    data = tl.value_bytes(_transit(S.EMPTY, start=-1))
    assert data == (struct.pack(">hqhib", 0, 4242, 7, 60_000, 0) + struct.pack(">i", -1)
                    + struct.pack(">qq", 1_700_000_000_123, -1))
    m = tl.decode_value("x", data)
    assert m is not None and m.state is S.EMPTY and m.topic_partitions == set()


def test_empty_state_with_partitions_is_refused() -> None:
    with pytest.raises(Exception):
        tl.value_bytes(_transit(S.EMPTY, frozenset({TopicPartition("a", 0)})))


@pytest.mark.parametrize("state", list(S))
def test_round_trip_every_status(state: S) -> None:
    parts = frozenset() if state in (S.EMPTY, S.DEAD) else frozenset({TopicPartition("topic", 3)})
    m = tl.decode_value("id", tl.value_bytes(_transit(state, parts)))
    assert m is not None and m.state is state and m.topic_partitions == set(parts)


def test_flexible_v1_is_read() -> None:
    parts = frozenset({TopicPartition("a", 0)})
    data = tl.value_bytes(_transit(S.PREPARE_COMMIT, parts), version=1)
    assert data[:2] == b"\x00\x01"
    m = tl.decode_value("id", data)
    assert m is not None and m.state is S.PREPARE_COMMIT and m.topic_partitions == set(parts)


def test_tombstone() -> None:
    assert tl.decode_value("id", None) is None


def test_garbage_is_a_decode_error() -> None:
    with pytest.raises(tl.UnknownKeyTypeError):
        tl.decode_key(b"\x00\x01" + _string("x"))
    with pytest.raises(tl.TxnRecordDecodeError):
        tl.decode_key(b"\x00")
    with pytest.raises(tl.TxnRecordDecodeError):
        tl.decode_value("x", b"\x00\x05" + b"\x00" * 30)              # unknown version
    with pytest.raises(tl.TxnRecordDecodeError):
        tl.decode_value("x", b"\x00\x00\x00")                          # truncated
    bad_status = struct.pack(">hqhib", 0, 1, 0, 1000, 9) + struct.pack(">i", -1) + struct.pack(">qq", 0, -1)
    with pytest.raises(tl.TxnRecordDecodeError):
        tl.decode_value("x", bad_status)
