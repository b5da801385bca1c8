"""Message formats v0/v1 (kafkalite/log/legacy_records.py): the produce-side conversion to one v2
batch with LogValidator's checks, the fetch-side down-conversion with LazyDownConversionRecords'
sizing, and message.format.version's validator. Messages are built and read back with
kafka-python's own legacy codec wherever it has one."""
from __future__ import annotations

import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkalite.config.topic_config import (InvalidTopicConfigError, is_valid_metadata_version,
                                           message_format_version_warning, validate_topic_configs)
from kafkalite.log.errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                                  RecordTooLargeError, UnsupportedCompressionTypeError)
from kafkalite.log.legacy_records import (LONG_MAX, _lz4_decode_v0, _lz4_encode_v0, convert_to_batch,
                                          encode_message, lazy_down_convert, xxh32)
from kafkalite.log.record_batch import (LOG_APPEND_TIME, build_batch, build_end_txn_marker,
                                        decode_records, parse_header, set_log_append_time)

TS = 1_700_000_000_000


def legacy(magic: int, codec: int, records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, (k, v) in enumerate(records):
        assert b.append(i, TS + i, k, v) is not None
    return bytes(b.build())


def convert(data: bytes, *, compacted: bool = False, lat: bool = False, codec: int | None = None,
            max_bytes: int = 1 << 20, before: int = LONG_MAX, now: int = TS) -> bytes:
    return convert_to_batch(data, max_message_bytes=max_bytes, compacted=compacted,
                            timestamp_type=LOG_APPEND_TIME if lat else 0, before_max_ms=before,
                            after_max_ms=LONG_MAX, target_codec=codec, now_ms=now)


def read_legacy(data: bytes) -> list[tuple]:
    out = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        out += [(batch.magic, r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


# -- produce ---------------------------------------------------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_a_message_set_becomes_one_v2_batch(magic: int, codec: int) -> None:
    batch = convert(legacy(magic, codec, [(b"k0", b"v0"), (None, b"v1"), (b"k2", None)]))
    h = parse_header(batch)
    assert (h.base_offset, h.magic, h.records_count, h.compression_type, h.producer_id) == (0, 2, 3, codec, -1)
    ts = [-1, -1, -1] if magic == 0 else [TS, TS + 1, TS + 2]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_records(batch, h)] == [
        (0, ts[0], b"k0", b"v0", ()), (1, ts[1], None, b"v1", ()), (2, ts[2], b"k2", None, ())]
    assert h.max_timestamp == max(ts) and h.base_timestamp == ts[0]


def test_compression_type_of_the_topic_is_the_batch_codec() -> None:
    batch = convert(legacy(1, 2, [(b"k", b"v")]), codec=1)      # snappy in, compression.type=gzip
    assert parse_header(batch).compression_type == 1
    plain = convert(legacy(1, 1, [(b"k", b"v")]), codec=0)      # gzip in, compression.type=uncompressed
    assert parse_header(plain).compression_type == 0


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0xFF
    return bytes(out)


def test_kafka_checks_in_kafka_order() -> None:
    one = encode_message(1, 0, TS, 0, b"k", b"v")
    with pytest.raises(CorruptRecordError):                      # CRC-32 of an uncompressed message
        convert(one + _flip(one, 30))
    with pytest.raises(RecordTooLargeError):                     # size before CRC
        convert(_flip(encode_message(1, 0, TS, 0, b"k", b"v" * 100), 30), max_bytes=50)
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        convert(legacy(1, 1, [(b"a", b"1")]) * 2)
    with pytest.raises(InvalidRecordError, match="magic"):
        convert(encode_message(0, 0, -1, 0, b"k", b"v") + one)
    with pytest.raises(InvalidRecordError) as keyless:
        convert(legacy(1, 0, [(b"k", b"1"), (None, b"2")]), compacted=True)
    assert keyless.value.record_errors == [(0, "Compacted topic cannot accept message without key")]
    with pytest.raises(InvalidTimestampError):
        convert(legacy(1, 0, [(b"k", b"old")]), before=1000, now=TS + 5000)
    with pytest.raises(InvalidTimestampError):                   # LogAppendTime set by a producer
        convert(encode_message(1, 0, -1, 0x08, b"k", b"v"))
    inner = encode_message(1, 0, TS, 0, b"k", b"v") + _flip(encode_message(1, 1, TS, 0, b"k", b"w"), 30)
    with pytest.raises(CorruptRecordError):                      # an inner message's CRC-32
        convert(encode_message(1, 1, TS, 1, None, _gzip(inner)))
    with pytest.raises(InvalidRecordError, match="null value"):
        convert(encode_message(1, 0, TS, 1, None, None))
    assert convert(one[:-1]) == b""                              # no whole message: nothing, no error


def _gzip(data: bytes) -> bytes:
    from kafka import codec
    return codec.gzip_encode(data)


def test_v1_timestamps_on_a_log_append_time_topic_are_kept_for_the_log_to_stamp() -> None:
    batch = convert(legacy(1, 0, [(b"k", b"v")]), lat=True)
    h = parse_header(batch)
    assert (h.timestamp_type, h.max_timestamp) == (0, TS)       # the log stamps LogAppendTime


# -- fetch ------------------------------------------------------------------------------------

def _stored(*batches: bytes) -> bytes:
    """Batches as a log holds them: consecutive offsets."""
    out, offset = bytearray(), 0
    for b in batches:
        h = parse_header(b)
        out += offset.to_bytes(8, "big", signed=True) + b[8:]
        offset += h.last_offset_delta + 1
    return bytes(out)


def test_uncompressed_batch_to_v0_and_v1_from_the_fetch_offset() -> None:
    stored = _stored(build_batch([(b"a", b"1", TS), (b"b", b"2", TS + 7)], headers=[("h", b"x")]))
    v1 = lazy_down_convert(stored, 1, 1)
    assert read_legacy(v1) == [(1, 1, TS + 7, b"b", b"2")]       # headers gone, offset 0 left out
    assert len(v1) == len(stored)                               # padded to the stored size
    assert read_legacy(lazy_down_convert(stored, 0, 0)) == [(0, 0, None, b"a", b"1"), (0, 1, None, b"b", b"2")]


def test_compressed_batch_becomes_one_wrapper_with_relative_inner_offsets() -> None:
    stored = _stored(build_batch([(b"x", b"0", TS)]), build_batch([(b"a", b"1", TS), (b"b", b"2", TS + 3)],
                                                                  compression=1))
    out = lazy_down_convert(stored, 1, 2)
    # the uncompressed batch loses its record below the fetch offset; the compressed one is
    # kept whole even though offset 1 lies below it
    assert read_legacy(out) == [(1, 1, TS, b"a", b"1"), (1, 2, TS + 3, b"b", b"2")]
    assert int.from_bytes(out[0:8], "big") == 2                  # the wrapper: last offset
    assert out[17] == 1 and int.from_bytes(out[18:26], "big") == TS + 3      # gzip, max timestamp


def test_log_append_time_batches_carry_the_append_time() -> None:
    b = bytearray(build_batch([(b"a", b"1", TS)]))
    set_log_append_time(b, 0, TS + 999)
    out = lazy_down_convert(bytes(b), 1, 0)
    assert read_legacy(out) == [(1, 0, TS + 999, b"a", b"1")] and out[17] == 0x08


def test_sizing_overflow_stub_and_the_duplicate_after_a_leading_marker() -> None:
    marker = build_end_txn_marker(7, 0, 0, True, TS)
    data = build_batch([(b"a", b"1", TS)])
    stored = _stored(marker, data)
    out = lazy_down_convert(stored, 1, 0)
    one = encode_message(1, 1, TS, 0, b"a", b"1")
    # Kafka's iterator skips one batch after the first converted one, which came from the second:
    # that batch is converted again; then an overflow stub fills the answer up to the stored size
    rest = len(stored) - 2 * len(one)
    stub = (-1).to_bytes(8, "big", signed=True) + (rest + 1).to_bytes(4, "big") + bytes(rest - 12)
    assert out == one + one + stub and len(out) == len(stored)
    assert lazy_down_convert(_stored(marker), 1, 0) == (-1).to_bytes(8, "big", signed=True) + (61).to_bytes(4, "big")
    assert lazy_down_convert(b"", 0, 0) == b""
    with pytest.raises(UnsupportedCompressionTypeError):
        lazy_down_convert(_stored(build_batch([(b"z", b"1", TS)], compression=4)), 1, 0)


def test_shorter_conversion_is_padded_with_an_overflow_stub() -> None:
    stored = _stored(build_batch([(b"k%d" % i, b"v", TS) for i in range(3)], headers=[("hdr", b"y" * 40)]))
    out = lazy_down_convert(stored, 0, 0)
    converted = b"".join(encode_message(0, i, -1, 0, b"k%d" % i, b"v") for i in range(3))
    assert len(out) == len(stored) > len(converted) and out.startswith(converted)
    stub = out[len(converted):]
    assert stub[:8] == b"\xff" * 8 and int.from_bytes(stub[8:12], "big") == max(len(stub) + 1, 61)


def test_lz4_magic0_frames() -> None:
    payload = b"hello kafka " * 50
    framed = _lz4_encode_v0(payload)
    assert _lz4_decode_v0(framed) == payload
    from kafka import codec
    with pytest.raises(RuntimeError, match="headerChecksum"):     # not a standard frame
        codec.lz4_decode(framed)
    # XXH32 reference values (the second one exercises the 16-byte stripes)
    assert xxh32(b"") == 0x02CC5D05 and xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_crc_is_crc32_not_crc32c() -> None:
    m = encode_message(1, 0, TS, 0, b"k", b"v")
    assert int.from_bytes(m[12:16], "big") == zlib.crc32(m[16:])


# -- message.format.version ---------------------------------------------------------------------

@pytest.mark.parametrize("value,valid", [
    ("0.10.0", True), ("0.10.0-IV1", True), ("0.10.0.1", True), ("0.8.2", True), ("2.8", True),
    ("3.0-IV1", True), ("3.9.1", True), ("4.0-IV0", True), ("4.0", False), ("0.7", False),
    ("0.10", False), ("foo", False), ("", False), ("3.0-IV9", False)])
def test_message_format_version_values(value: str, valid: bool) -> None:
    assert is_valid_metadata_version(value) is valid
    if valid:
        assert validate_topic_configs({"message.format.version": value}) == {"message.format.version": value}
    else:
        with pytest.raises(InvalidTopicConfigError) as e:
            validate_topic_configs({"message.format.version": value})
        assert str(e.value) == (f"Invalid value {value} for configuration message.format.version: "
                                f"Version {value} is not a valid version")


def test_message_format_version_warning_only_before_v2() -> None:
    assert "is ignored for `t`" in message_format_version_warning("t", "0.10.2")
    assert message_format_version_warning("t", "0.11.0") is None
    assert message_format_version_warning("t", "2.8") is None
