"""Produce (0) v9: magic-2 batches whose CRC is RIGHT but whose contents Kafka's LogValidator
refuses for a client (an invalid offset range, a record count that is not positive or disagrees
with lastOffsetDelta, a control batch, a producer id without a base sequence, malformed records:
bad varints, a record running past the batch, fewer or more records than the count, leftover
bytes, a record whose length disagrees with its fields, a null key on a compacted topic), and the
record fields it does not look at (attributes, offset deltas). Every batch is built here byte by
byte and its CRC-32C recomputed over the modified bytes; a Fetch after each produce shows that
nothing (or exactly what Kafka stores) was appended."""
from __future__ import annotations

import struct
from typing import Optional, Sequence

from crc32c import crc32c
from kafka import codec

from tests.differential.corpus.steps import BASE_TS, create_topic
from tests.differential.framework import Case, Step
from tests.integration.util import uvarint

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
GZIP = 1
CONTROL = 0x20

_TAIL = struct.Struct(">hiqqqhii")     # attributes .. recordsCount (the first CRC'd bytes)
_PREFIX = struct.Struct(">qiib")       # baseOffset, batchLength, partitionLeaderEpoch, magic


def varint(value: int) -> bytes:
    """Zig-zag varint, as Kafka's ByteUtils.writeVarint/writeVarlong."""
    return uvarint((value << 1) ^ (value >> 63))


def _bytes_field(data: Optional[bytes]) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record_fields(offset_delta: int, key: Optional[bytes] = b"k", value: Optional[bytes] = b"v",
                  attributes: int = 0, ts_delta: int = 0,
                  headers: Sequence[tuple[bytes, Optional[bytes]]] = (), header_count: Optional[int] = None) -> bytes:
    """A record's bytes after its length varint."""
    out = bytes([attributes]) + varint(ts_delta) + varint(offset_delta) + _bytes_field(key) + _bytes_field(value)
    out += varint(len(headers) if header_count is None else header_count)
    for hk, hv in headers:
        out += varint(len(hk)) + hk + _bytes_field(hv)
    return out


def record(offset_delta: int, extra: bytes = b"", length_delta: int = 0, **kwargs) -> bytes:
    """A whole record: its length varint (off by `length_delta` if asked), fields, `extra` bytes."""
    fields = record_fields(offset_delta, **kwargs) + extra
    return varint(len(fields) + length_delta) + fields


def records_body(n: int = 3) -> bytes:
    return b"".join(record(i, value=b"v%d" % i, ts_delta=10 * i) for i in range(n))


def batch(body: bytes, count: int = 3, last_offset_delta: Optional[int] = None, attributes: int = 0,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
          compression: int = 0, max_timestamp: Optional[int] = None) -> bytes:
    """A magic-2 batch around `body` (the records, uncompressed), with a correct CRC-32C."""
    payload = codec.gzip_encode(body) if compression == GZIP else body
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    max_ts = BASE_TS + 10 * max(delta, 0) if max_timestamp is None else max_timestamp
    tail = _TAIL.pack(attributes | compression, delta, BASE_TS, max_ts,
                      producer_id, producer_epoch, base_sequence, count)
    crc = crc32c(payload, crc32c(tail))
    return _PREFIX.pack(0, 49 + len(payload), -1, 2) + struct.pack(">I", crc) + tail + payload


def _produce(records: bytes) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": "{topic}", "partition_data": [{"index": 0, "records": records}]}]}


FETCH_ALL = Step(FETCH, 12, {
    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
    "session_id": 0, "session_epoch": -1,
    "topics": [{"topic": "{topic}", "partitions": [{
        "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
    "forgotten_topics_data": [], "rack_id": ""})


# the log's largest timestamp and its offset: what the stored batch header says
MAX_TIMESTAMP = Step(LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000, "topics": [
    {"name": "{topic}", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]})


def _case(name: str, records: bytes, configs: Optional[dict[str, str]] = None, stored: bool = False) -> Case:
    """A produce and the fetch after it; `stored`: the batch is appended, and ListOffsets shows its
    stored maxTimestamp."""
    then = [FETCH_ALL, MAX_TIMESTAMP] if stored else [FETCH_ALL]
    return Case(f"produce_v9_batch_{name}", PRODUCE, 9, _produce(records), setup=create_topic(configs=configs),
                then=then)


BODY = records_body()
# record 1 of 3 with its length varint pointing past the end of the batch
PAST_END = record(0) + varint(200) + record_fields(1) + record(2)
# a varint of 11 continuation bytes where record 0's length belongs
BAD_VARINT = b"\xff" * 11 + b"\x01" + records_body(2)
# a varint cut short by the end of the batch
CUT_VARINT = records_body(2) + b"\x80"
# record 0's length counts one byte more than its fields (the extra byte inside the record)
LONG_RECORD = record(0, extra=b"\x00") + records_body(3)[len(record(0, value=b"v0")):]
# record 0's length counts one byte fewer than its fields
SHORT_RECORD = record(0, value=b"v0", length_delta=-1) + records_body(3)[len(record(0, value=b"v0")):]
NEGATIVE_HEADERS = record(0, header_count=-1) + records_body(3)[len(record(0, value=b"v0")):]

CASES = [
    # --- the batch header (LogValidator.validateBatch, client origin) ---------------------------
    _case("negative_last_offset_delta", batch(BODY, count=3, last_offset_delta=-1)),
    _case("zero_count", batch(BODY, count=0, last_offset_delta=2)),
    _case("zero_count_zero_delta_range", batch(BODY, count=0, last_offset_delta=-1)),
    _case("negative_count", batch(BODY, count=-3, last_offset_delta=2)),
    _case("count_above_offset_range", batch(BODY, count=4, last_offset_delta=2)),
    _case("count_below_offset_range", batch(BODY, count=2, last_offset_delta=2)),
    _case("control_from_client", batch(BODY, attributes=CONTROL)),
    _case("control_transactional_from_client",
          batch(BODY, attributes=CONTROL | 0x10, producer_id=5, producer_epoch=0, base_sequence=0)),
    _case("producer_id_negative_sequence", batch(BODY, producer_id=1000, producer_epoch=0, base_sequence=-1)),
    _case("producer_id_sequence_minus_five", batch(BODY, producer_id=1000, producer_epoch=0, base_sequence=-5)),
    # --- the records of an uncompressed batch ---------------------------------------------------
    _case("well_formed", batch(BODY), stored=True),
    _case("fewer_records_than_count", batch(BODY, count=4)),
    _case("more_records_than_count", batch(BODY + record(3), count=3)),
    _case("leftover_bytes", batch(BODY + b"\x00\x00", count=3)),
    _case("record_past_batch_end", batch(PAST_END)),
    _case("varint_too_long", batch(BAD_VARINT)),
    _case("varint_cut_short", batch(CUT_VARINT, count=3)),
    _case("record_longer_than_fields", batch(LONG_RECORD)),
    _case("record_shorter_than_fields", batch(SHORT_RECORD)),
    _case("negative_header_count", batch(NEGATIVE_HEADERS)),
    _case("empty_body", batch(b"", count=1)),
    _case("record_attributes_set", batch(b"".join(record(i, attributes=0x7F) for i in range(3))), stored=True),
    _case("offset_deltas_not_consecutive", batch(b"".join(record(d) for d in (0, 5, 9))), stored=True),
    _case("offset_deltas_reversed", batch(b"".join(record(d) for d in (2, 1, 0))), stored=True),
    # --- the same inside a gzip batch (walked after decompression) -----------------------------
    _case("gzip_well_formed", batch(BODY, compression=GZIP), stored=True),
    _case("gzip_fewer_records_than_count", batch(BODY, count=4, compression=GZIP)),
    _case("gzip_more_records_than_count", batch(BODY + record(3), count=3, compression=GZIP)),
    _case("gzip_leftover_bytes", batch(BODY + b"\x00\x00", compression=GZIP)),
    _case("gzip_varint_too_long", batch(BAD_VARINT, compression=GZIP)),
    _case("gzip_record_longer_than_fields", batch(LONG_RECORD, compression=GZIP)),
    _case("gzip_negative_header_count", batch(NEGATIVE_HEADERS, compression=GZIP)),
    _case("gzip_offset_deltas_not_consecutive", batch(b"".join(record(d) for d in (0, 5, 9)), compression=GZIP)),
    _case("gzip_zero_count", batch(BODY, count=0, last_offset_delta=2, compression=GZIP)),
    _case("gzip_control_from_client", batch(BODY, attributes=CONTROL, compression=GZIP)),
    # --- the header's maxTimestamp is the records' (Kafka rewrites it) -------------------------
    _case("max_timestamp_above_records", batch(BODY, max_timestamp=BASE_TS + 5000), stored=True),
    _case("max_timestamp_below_records", batch(BODY, max_timestamp=BASE_TS), stored=True),
    _case("gzip_max_timestamp_above_records", batch(BODY, max_timestamp=BASE_TS + 5000, compression=GZIP),
          stored=True),
    # --- compacted topics: keys --------------------------------------------------------------
    _case("compacted_null_key", batch(record(0) + record(1, key=None) + record(2, key=None)),
          configs={"cleanup.policy": "compact"}),
    _case("compacted_all_keyed", batch(BODY), configs={"cleanup.policy": "compact"}, stored=True),
    _case("gzip_compacted_null_key", batch(record(0, key=None) + record(1) + record(2), compression=GZIP),
          configs={"cleanup.policy": "compact"}),
]
