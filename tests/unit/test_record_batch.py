"""Record batch bytes: parsing, validation, offset assignment and LogAppendTime stamping, checked
against kafka-python's own magic-v2 builder and reader."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.log import errors
from kafkalite.log.record_batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, MAGIC_OFFSET,
                                        RECORD_BATCH_OVERHEAD, RECORDS_COUNT_OFFSET,
                                        BatchHeader, assign_offsets, build_batch, compute_crc,
                                        decode_records, increment_sequence, iter_batches,
                                        parse_header, set_log_append_time, split_batches,
                                        stamped_header, validate_batch)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def kp_batch(n: int = 3, *, codec: int = 0, ts: int = 1_700_000_000_000, pid: int = -1,
             epoch: int = -1, seq: int = -1, transactional: bool = False,
             headers: list | None = None) -> bytes:
    b = MemoryRecordsBuilder(2, codec, 1 << 20, producer_id=pid, producer_epoch=epoch,
                             base_sequence=seq, transactional=transactional)
    for i in range(n):
        b.append(ts + i * 7, f"key-{i}".encode(), f"value-{i}".encode() * (i + 1),
                 headers=headers or [])
    b.close()
    return bytes(b.buffer())


def reread(data: bytes) -> DefaultRecordBatch:
    return DefaultRecordBatch(data)


def patch(data: bytes, fmt: str, offset: int, value: int, *, fix_crc: bool = True) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_parse_header_matches_kafka_python(codec: int) -> None:
    data = kp_batch(4, codec=codec, pid=77, epoch=3, seq=10)
    batches, valid = split_batches(data)
    assert valid == len(data)
    assert len(batches) == 1
    pos, h = batches[0]
    kb = reread(data)
    assert pos == 0
    assert (h.base_offset, h.size, h.magic, h.crc) == (0, kb.size_in_bytes, 2, kb.crc)
    assert h.attributes == kb.attributes and h.compression_type == codec
    assert (h.last_offset_delta, h.records_count) == (3, 4)
    assert (h.base_timestamp, h.max_timestamp) == (kb.first_timestamp, kb.max_timestamp)
    assert h.max_timestamp == 1_700_000_000_000 + 21
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (77, 3, 10, 13)
    assert h.partition_leader_epoch == kb.leader_epoch
    validate_batch(data, pos, h)
    assert parse_header(data) == h


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_decode_records_matches_kafka_python(codec: int) -> None:
    data = kp_batch(5, codec=codec, headers=[("h1", b"x"), ("h2", None)])
    mine = decode_records(data)
    theirs = list(reread(data))
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in mine] == \
        [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert [r.offset for r in mine] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_build_batch_is_readable_by_kafka_python(codec: int) -> None:
    recs = [(b"k1", b"v1", 100), (None, b"v2", 90), (b"k3", None, 130)]
    data = build_batch(recs, compression=codec, producer_id=5, producer_epoch=1, base_sequence=7)
    kb = reread(data)
    assert kb.validate_crc()
    got = [(r.key, r.value, r.timestamp) for r in reread(data)]
    assert got == recs
    h = parse_header(data)
    assert (h.max_timestamp, h.base_timestamp, h.records_count, h.base_sequence) == (130, 100, 3, 7)
    validate_batch(data, 0, h)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_flipped_byte_inside_crc_is_corrupt(codec: int) -> None:
    data = kp_batch(3, codec=codec)
    h = parse_header(data)
    # Every byte the CRC covers (attributes..end): step through them.
    positions = list(range(ATTRIBUTES_OFFSET, len(data), max(1, len(data) // 40)))
    positions.append(len(data) - 1)
    for i in positions:
        buf = bytearray(data)
        buf[i] ^= 0x01
        # Re-parse so header fields follow the flip, as they would on the wire.
        flipped = bytes(buf)
        with pytest.raises(errors.CorruptRecordError) as exc:
            fh = BatchHeader._make(struct.unpack_from(">qiibIhiqqqhii", flipped))
            if fh.size != h.size:
                raise errors.CorruptRecordError("size changed")  # not reached for these offsets
            validate_batch(flipped, 0, fh)
        assert exc.value.error_code == 2


def test_flipped_crc_field_is_corrupt() -> None:
    data = kp_batch(2)
    buf = bytearray(data)
    buf[CRC_OFFSET + 2] ^= 0x80
    with pytest.raises(errors.CorruptRecordError):
        validate_batch(buf, 0, parse_header(buf))


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = patch(kp_batch(2), ">i", 12, 42, fix_crc=False)     # partitionLeaderEpoch
    validate_batch(data, 0, parse_header(data))
    moved = patch(data, ">q", 0, 1000, fix_crc=False)           # baseOffset
    h = parse_header(moved)
    validate_batch(moved, 0, h, from_client=False)               # CRC still fine
    with pytest.raises(errors.InvalidRecordError) as exc:        # but a client must send 0
        validate_batch(moved, 0, h, from_client=True)
    assert exc.value.error_code == 87


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_assign_offsets_keeps_crc_valid(codec: int) -> None:
    buf = bytearray(kp_batch(4, codec=codec))
    assign_offsets(buf, 0, 1234, 9)
    kb = reread(bytes(buf))
    assert kb.validate_crc()
    assert (kb.base_offset, kb.leader_epoch) == (1234, 9)
    assert [r.offset for r in reread(bytes(buf))] == [1234, 1235, 1236, 1237]
    assert [r.offset for r in decode_records(bytes(buf))] == [1234, 1235, 1236, 1237]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_log_append_time_stamping_recomputes_crc(codec: int) -> None:
    original = kp_batch(3, codec=codec)
    buf = bytearray(original)
    set_log_append_time(buf, 0, 1_800_000_000_000)
    kb = reread(bytes(buf))
    assert kb.validate_crc()
    assert kb.timestamp_type == 1 and kb.max_timestamp == 1_800_000_000_000
    assert [r.timestamp for r in reread(bytes(buf))] == [1_800_000_000_000] * 3
    assert [r.timestamp for r in decode_records(bytes(buf))] == [1_800_000_000_000] * 3
    # The gather-write header builder produces the same bytes as in-place rewriting.
    h = parse_header(original)
    head = stamped_header(h, memoryview(original), 50, 4, 1_800_000_000_000)
    assert len(head) == RECORD_BATCH_OVERHEAD
    expected = bytearray(original)
    set_log_append_time(expected, 0, 1_800_000_000_000)
    assign_offsets(expected, 0, 50, 4)
    assert head + original[len(head):] == bytes(expected)
    assert reread(bytes(expected)).validate_crc()


def test_stamped_header_without_stamp_is_prefix_rewrite() -> None:
    data = kp_batch(2)
    head = stamped_header(parse_header(data), memoryview(data), 77, 5)
    assert len(head) == 17
    rewritten = head + data[17:]
    kb = reread(rewritten)
    assert kb.validate_crc() and kb.base_offset == 77 and kb.leader_epoch == 5


def test_split_multiple_batches_and_trailing_partial() -> None:
    a = kp_batch(2)
    b = kp_batch(3, codec=1)
    payload = a + b
    batches, valid = split_batches(payload)
    assert [p for p, _ in batches] == [0, len(a)]
    assert valid == len(payload)
    # A trailing incomplete batch is not part of the valid bytes (Kafka trims it).
    batches, valid = split_batches(payload + b[:30])
    assert len(batches) == 2 and valid == len(payload)
    batches, valid = split_batches(payload + b"\x00" * 5)
    assert len(batches) == 2 and valid == len(payload)
    assert [h.records_count for _p, h in iter_batches(payload)] == [2, 3]
    assert split_batches(b"") == ([], 0)


def test_structural_errors() -> None:
    data = kp_batch(2)
    with pytest.raises(errors.CorruptRecordError):          # length below the minimum
        split_batches(patch(data, ">i", 8, 5, fix_crc=False))
    with pytest.raises(errors.CorruptRecordError):          # magic 3
        split_batches(patch(data, ">b", MAGIC_OFFSET, 3, fix_crc=False))
    with pytest.raises(errors.CorruptRecordError):          # negative magic
        split_batches(patch(data, ">b", MAGIC_OFFSET, -1, fix_crc=False))
    with pytest.raises(errors.InvalidRecordError):          # legacy magic
        split_batches(patch(data, ">b", MAGIC_OFFSET, 1, fix_crc=False))
    short = bytearray(data[:40])
    struct.pack_into(">i", short, 8, 28)                    # a 40-byte "v2 batch"
    with pytest.raises(errors.CorruptRecordError):
        split_batches(bytes(short))


def test_size_limit_is_message_too_large() -> None:
    data = kp_batch(10)
    h = parse_header(data)
    validate_batch(data, 0, h, max_message_bytes=len(data))
    with pytest.raises(errors.RecordTooLargeError) as exc:
        validate_batch(data, 0, h, max_message_bytes=len(data) - 1)
    assert exc.value.error_code == 10


def test_client_only_checks() -> None:
    data = kp_batch(3)
    bad_count = patch(data, ">i", RECORDS_COUNT_OFFSET, 5)
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(bad_count, 0, parse_header(bad_count))
    validate_batch(bad_count, 0, parse_header(bad_count), from_client=False)
    zero_count = patch(data, ">i", RECORDS_COUNT_OFFSET, 0)
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(zero_count, 0, parse_header(zero_count))
    neg_delta = patch(data, ">i", 23, -1)
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(neg_delta, 0, parse_header(neg_delta))
    control = patch(data, ">h", ATTRIBUTES_OFFSET, 0x20)
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(control, 0, parse_header(control))
    no_seq = patch(patch(data, ">q", 43, 99), ">i", 53, -1)     # producer id without sequence
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(no_seq, 0, parse_header(no_seq))
    log_append = patch(data, ">h", ATTRIBUTES_OFFSET, 0x08)
    with pytest.raises(errors.InvalidTimestampError) as exc:
        validate_batch(log_append, 0, parse_header(log_append))
    assert exc.value.error_code == 32 and exc.value.record_errors
    bad_codec = patch(data, ">h", ATTRIBUTES_OFFSET, 0x06)
    with pytest.raises(errors.CorruptRecordError):
        validate_batch(bad_codec, 0, parse_header(bad_codec))


def test_error_codes_are_kafkas() -> None:
    expected = {
        errors.OffsetOutOfRangeError: 1, errors.CorruptRecordError: 2,
        errors.RecordTooLargeError: 10, errors.RecordBatchTooLargeError: 18,
        errors.InvalidTimestampError: 32, errors.UnsupportedForMessageFormatError: 43,
        errors.OutOfOrderSequenceError: 45, errors.DuplicateSequenceError: 46,
        errors.InvalidProducerEpochError: 47, errors.InvalidTxnStateError: 48,
        errors.KafkaStorageError: 56, errors.UnknownProducerIdError: 59,
        errors.UnsupportedCompressionTypeError: 76, errors.InvalidRecordError: 87,
        errors.InconsistentTopicIdError: 103,
    }
    for cls, code in expected.items():
        assert cls.error_code == code
        assert cls("x").error_code == code
        assert isinstance(cls("x"), errors.LogError)


def test_increment_sequence_wraps() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 3, 5) == 2
    data = kp_batch(4, pid=1, epoch=0, seq=2**31 - 2)
    assert parse_header(data).last_sequence == 1


def test_corrupt_compressed_payload_is_a_decompression_error() -> None:
    data = build_batch([(b"k", b"v" * 100, 1)], compression=1)
    buf = bytearray(data)
    buf[-6] ^= 0xFF            # inside gzip's CRC32 trailer: decompression must fail
    with pytest.raises(errors.DecompressionError) as info:
        decode_records(bytes(buf))
    # Kafka's uncaught KafkaException("Failed to decompress record stream"): UNKNOWN_SERVER_ERROR
    assert info.value.error_code == -1 and info.value.codec == "gzip"
    assert str(info.value).startswith("Failed to decompress record stream (gzip): ")


record_st = st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200),
                      st.integers(min_value=0, max_value=2**41))


@settings(max_examples=60, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=12), codec=st.sampled_from(sorted(CODECS)),
       base=st.integers(min_value=0, max_value=2**40), epoch=st.integers(min_value=0, max_value=2**31 - 1),
       stamp=st.none() | st.integers(min_value=0, max_value=2**41))
def test_roundtrip_property(records: list, codec: int, base: int, epoch: int, stamp: int | None) -> None:
    data = build_batch(records, compression=codec)
    h = parse_header(data)
    validate_batch(data, 0, h)
    head = stamped_header(h, memoryview(data), base, epoch, stamp)
    out = head + data[len(head):]
    kb = reread(out)
    assert kb.validate_crc()
    assert (kb.base_offset, kb.leader_epoch) == (base, epoch)
    got = decode_records(out)
    assert [r.offset for r in got] == list(range(base, base + len(records)))
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _ in records]
    if stamp is None:
        assert [r.timestamp for r in got] == [ts for _, _, ts in records]
    else:
        assert [r.timestamp for r in got] == [stamp] * len(records)
    validate_batch(out, 0, parse_header(out), from_client=False)


# -- the structural walk over a client batch's records (LogValidator's iteration) ------------

def _walk(batch: bytes, **kwargs):
    from kafkalite.log.record_batch import walk_records
    h = parse_header(batch)
    return walk_records(memoryview(batch)[RECORD_BATCH_OVERHEAD:h.size], h.records_count, h.base_timestamp,
                        compressed=False, **kwargs)


def test_walk_records_well_formed() -> None:
    batch = kp_batch(5, headers=[("h", b"v"), ("n", None)])
    max_ts, in_order, seen = _walk(batch, collect=True)
    assert max_ts == 1_700_000_000_000 + 4 * 7 and in_order
    assert seen == [(r.timestamp, r.offset, True) for r in decode_records(batch)]
    big = build_batch([(None, b"x" * 300, 5), (b"k", None, 9)])      # two-byte varints, null key
    assert _walk(big, collect=True) == (9, True, [(5, 0, False), (9, 1, True)])


@pytest.mark.parametrize("extra, count_delta", [(b"\x00\x00", 0), (b"", 1), (b"", -1)])
def test_walk_records_count_and_leftover_bytes(extra: bytes, count_delta: int) -> None:
    from kafkalite.log.record_batch import walk_records
    batch = build_batch([(b"k", b"v", 1), (b"k", b"w", 2)])
    body = batch[RECORD_BATCH_OVERHEAD:] + extra
    with pytest.raises(errors.InvalidRecordError):
        walk_records(body, 2 + count_delta, 0, compressed=False)


def test_walk_records_length_varint_too_long() -> None:
    from kafkalite.log.record_batch import walk_records
    body = b"\xff" * 6 + b"\x01"
    with pytest.raises(errors.LogError) as e:      # Kafka: an IllegalArgumentException escapes
        walk_records(body, 1, 0, compressed=False)
    assert e.value.error_code == -1
    with pytest.raises(errors.InvalidRecordError):
        walk_records(body, 1, 0, compressed=True)


def test_walk_records_negative_header_count_and_short_record() -> None:
    from kafkalite.log.record_batch import walk_records
    record = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([1])     # header count -1
    with pytest.raises(errors.InvalidRecordError):
        walk_records(bytes([len(record) << 1]) + record, 1, 0, compressed=False)
    ok = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([0])
    assert walk_records(bytes([len(ok) << 1]) + ok, 1, 0, compressed=False)[0] == 0
    with pytest.raises(errors.InvalidRecordError):
        walk_records(bytes([(len(ok) - 1) << 1]) + ok, 1, 0, compressed=False)
