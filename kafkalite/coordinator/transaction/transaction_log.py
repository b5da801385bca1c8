"""Keys and values of the `__transaction_state` records, byte for byte as Kafka writes them.

A key is an int16 *coordinator record type* (0, TRANSACTION_LOG) followed by TransactionLogKey
(transactional id: string). A value is an int16 *version* followed by TransactionLogValue at that
version: producer id (int64), producer epoch (int16), transaction timeout (int32), status (int8,
Empty 0 .. PrepareEpochFence 7), the partitions grouped by topic (null for Empty), last update and
start timestamps (int64). Kafka writes v0 (v1, flexible, only under transaction.version 2); both
are read. A null value is a tombstone (an expired transactional id).

Encoding is kafka-python's JSON-driven codec over the specs in ``schemas/``.
"""
from __future__ import annotations

import functools
import io
import struct
from typing import Any, Optional

from kafka.protocol.api_data import ApiData

from kafkalite.coordinator.transaction.transaction_metadata import (
    IllegalTransactionStateError, TransactionMetadata, TransactionState, TxnTransitMetadata,
    metadata_from_transit, state_from_id)
from kafkalite.replica.partition import TopicPartition

_SCHEMAS = "kafkalite.coordinator.transaction.schemas"


class TransactionLogKey(ApiData, load_json=_SCHEMAS):
    pass


class TransactionLogValue(ApiData, load_json=_SCHEMAS):
    pass


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# TransactionLogValue v0 around its partitions: version, producer id, epoch, timeout, status ...
_VALUE_V0_HEAD = struct.Struct(">hqhib")
# ... last update and start timestamps.
_VALUE_V0_TAIL = struct.Struct(">qq")

TRANSACTION_LOG_KEY_TYPE = 0        # CoordinatorRecordType.TRANSACTION_LOG
VALUE_VERSION = 0                   # what Kafka writes below transaction.version 2
MAX_VALUE_VERSION = 1


class TxnRecordDecodeError(ValueError):
    """Bytes that are not a valid `__transaction_state` key or value."""


class UnknownKeyTypeError(TxnRecordDecodeError):
    def __init__(self, key_type: int) -> None:
        super().__init__(f"Unknown transaction log key type {key_type}")
        self.key_type = key_type


# -- encoding ------------------------------------------------------------------------------------

def key_bytes(transactional_id: str) -> bytes:
    if not isinstance(transactional_id, str):
        raise ValueError(f"transactional id must be a string, got {transactional_id!r}")
    return _key_bytes(transactional_id)


# Every transition of an id writes the same key: encode it once (bounded, ids are client-chosen).
@functools.lru_cache(maxsize=1 << 14)
def _key_bytes(transactional_id: str) -> bytes:
    try:
        body = TransactionLogKey(transactional_id=transactional_id).encode(version=0, header=False)
    except struct.error as e:
        raise ValueError(f"cannot encode transactional id: {e}") from e
    return _INT16.pack(TRANSACTION_LOG_KEY_TYPE) + body


def partitions_by_topic(partitions: frozenset[TopicPartition] | set[TopicPartition]
                        ) -> list[tuple[str, list[int]]]:
    """Partitions grouped per topic, topics and partitions sorted (a stable record)."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return [(t, sorted(ps)) for t, ps in sorted(grouped.items())]


def value_bytes(t: TxnTransitMetadata, version: int = VALUE_VERSION) -> bytes:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise ValueError(f"TransactionLogValue version {version} is not supported")
    if t.state is TransactionState.EMPTY and t.topic_partitions:
        raise IllegalTransactionStateError(
            f"Transaction is not expected to have any partitions since its state is Empty: {t}")
    if version == 0:
        return _value_bytes_v0(t)
    P = TransactionLogValue.PartitionsSchema
    partitions: Optional[list[Any]] = None
    if t.state is not TransactionState.EMPTY:
        partitions = [P(topic=topic, partition_ids=ids) for topic, ids in partitions_by_topic(t.topic_partitions)]
    value = TransactionLogValue(
        producer_id=t.producer_id, producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms, transaction_status=int(t.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
        transaction_start_timestamp_ms=t.txn_start_timestamp)
    return _INT16.pack(version) + value.encode(version=version, header=False)


def _value_bytes_v0(t: TxnTransitMetadata) -> bytes:
    """v0 (non-flexible) by hand: the codec takes ~13 us per record and every AddPartitionsToTxn
    and EndTxn writes one or two on the client's path. Same bytes (tests compare with the codec)."""
    out = [_VALUE_V0_HEAD.pack(0, t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.state))]
    if t.state is TransactionState.EMPTY:
        out.append(_INT32.pack(-1))         # null partitions
    else:
        groups = partitions_by_topic(t.topic_partitions)
        out.append(_INT32.pack(len(groups)))
        for topic, ids in groups:
            name = topic.encode("utf-8")
            out.append(_INT16.pack(len(name)))
            out.append(name)
            out.append(struct.pack(f">i{len(ids)}i", len(ids), *ids))
    out.append(_VALUE_V0_TAIL.pack(t.txn_last_update_timestamp, t.txn_start_timestamp))
    return b"".join(out)


# -- decoding ------------------------------------------------------------------------------------

def decode_key(data: bytes) -> str:
    """The transactional id of a key; UnknownKeyTypeError for other record types."""
    data = bytes(data)
    if len(data) < 2:
        raise TxnRecordDecodeError("Could not read the key type")
    (key_type,) = _INT16.unpack_from(data)
    if key_type != TRANSACTION_LOG_KEY_TYPE:
        raise UnknownKeyTypeError(key_type)
    try:
        key = TransactionLogKey.decode(io.BytesIO(data[2:]), version=0, header=False)
    except (struct.error, UnicodeDecodeError, ValueError, TypeError, IndexError) as e:
        raise TxnRecordDecodeError(f"Could not read TransactionLogKey: {e}") from e
    if key.transactional_id is None:
        raise TxnRecordDecodeError("null transactional id in TransactionLogKey")
    return key.transactional_id


def decode_value(transactional_id: str, data: Optional[bytes]) -> Optional[TransactionMetadata]:
    """The metadata a value holds, or None for a tombstone."""
    if data is None:
        return None
    data = bytes(data)
    if len(data) < 2:
        raise TxnRecordDecodeError("Could not read the value version")
    (version,) = _INT16.unpack_from(data)
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise TxnRecordDecodeError(f"Unknown version {version} from the transaction log message value")
    try:
        v = TransactionLogValue.decode(io.BytesIO(data[2:]), version=version, header=False)
    except (struct.error, UnicodeDecodeError, ValueError, TypeError, IndexError) as e:
        raise TxnRecordDecodeError(f"Could not read TransactionLogValue v{version}: {e}") from e
    try:
        state = state_from_id(v.transaction_status)
    except IllegalTransactionStateError as e:
        raise TxnRecordDecodeError(str(e)) from e
    partitions: set[TopicPartition] = set()
    if state is not TransactionState.EMPTY:
        for p in v.transaction_partitions or ():
            if p.topic is None:
                raise TxnRecordDecodeError("null topic in TransactionLogValue")
            partitions.update(TopicPartition(p.topic, i) for i in p.partition_ids or ())
    transit = TxnTransitMetadata(
        producer_id=v.producer_id, last_producer_id=-1, producer_epoch=v.producer_epoch,
        last_producer_epoch=-1, txn_timeout_ms=v.transaction_timeout_ms, state=state,
        topic_partitions=frozenset(partitions), txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms)
    return metadata_from_transit(transactional_id, transit)
