"""Record-level rules applied to client batches on append (Kafka's LogValidator parts below the
batch header): the CreateTime timestamp window (message.timestamp.before/after.max.ms, or the
deprecated difference.max.ms) and broker-side recompression (compression.type).

Every client batch's records are walked once (validate_records: their structure, the real
maximum timestamp; keys and timestamps collected only when the topic is compacted or bounds
timestamps); no record is ever built on the produce path.
"""
from __future__ import annotations

import struct
import zlib
from typing import Sequence

from crc32c import crc32c

from kafkalite.config.log_config import LogConfig
from kafkalite.log.errors import InvalidRecordError, InvalidTimestampError, LogError, RecordTooLargeError
from kafkalite.log.record_batch import (COMPRESSION_CODEC_MASK, COMPRESSION_GZIP, COMPRESSION_LZ4,
                                        COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_ZSTD,
                                        LOG_OVERHEAD, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, BatchHeader,
                                        record_body, split_batches, walk_records)

LONG_MAX = 2**63 - 1
CODECS = {"uncompressed": COMPRESSION_NONE, "gzip": COMPRESSION_GZIP, "snappy": COMPRESSION_SNAPPY,
          "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD}
GZIP_DEFAULT_LEVEL = 6      # java.util.zip.Deflater.DEFAULT_COMPRESSION, what Kafka's broker uses

_PREFIX = struct.Struct(">qiib")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _long(x: int) -> int:
    """Java long arithmetic wraps."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def validate_records(buf: memoryview, batches: Sequence[tuple[int, BatchHeader]], config: LogConfig,
                     now_ms: int, partition: str, compacted: bool) -> list[int]:
    """Kafka's per-record part of LogValidator for client batches: one structural walk over each
    batch's records (decompressed once when compressed; see record_batch.walk_records), then the
    record errors of the batch: a null key on a compacted topic, else a CreateTime timestamp
    outside the topic's window. Returns each batch's real maximum record timestamp (Kafka stamps
    it into the batch header).

    A compressed batch whose offset deltas are not 0..n-1 and that is kept in its codec makes
    Kafka 3.9 rebuild it from records read without their keys and values, which fails: an
    UNKNOWN_SERVER_ERROR, answered the same here."""
    before = config.effective_timestamp_before_max_ms
    after = config.effective_timestamp_after_max_ms
    check_ts = config.message_timestamp_type == "CreateTime" and (before != LONG_MAX or after != LONG_MAX)
    collect = compacted or check_ts
    target = CODECS.get(config.compression_type)
    max_timestamps: list[int] = []
    for pos, h in batches:
        compressed = h.compression_type != COMPRESSION_NONE
        max_ts, in_order, seen = walk_records(record_body(buf, pos, h), h.records_count, h.base_timestamp,
                                              compressed=compressed, collect=collect)
        max_timestamps.append(max_ts)
        if seen:
            _record_errors(seen, h, now_ms, partition, compacted, check_ts, before, after)
        if compressed and not in_order and target in (None, h.compression_type):
            raise LogError(f"Record offsets of a compressed batch in {partition} are not consecutive from 0")
    return max_timestamps


def _record_errors(seen: list[tuple[int, int, bool]], h: BatchHeader, now_ms: int, partition: str,
                   compacted: bool, check_ts: bool, before: int, after: int) -> None:
    """LogValidator.validateRecord's errors for one batch and processRecordErrors' answer."""
    errors: list[tuple[int, str | None]] = []
    any_timestamp = False
    key_msg = f"Compacted topic cannot accept message without key in topic partition {partition}"
    for index, (ts, offset_delta, has_key) in enumerate(seen):
        if compacted and not has_key:
            errors.append((index, key_msg))
        elif check_ts and ts != NO_TIMESTAMP:
            diff = _long(now_ms - ts)
            if diff > before or _long(-diff) > after:
                any_timestamp = True
                errors.append((index, f"Timestamp {ts} of message with offset {h.base_offset + offset_delta} is out "
                                      f"of range. The timestamp should be within [{_long(now_ms - before)}, "
                                      f"{_long(now_ms + after)}]"))
    if not errors:
        return
    if any_timestamp:
        raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp",
                                    record_errors=errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message={'null' if m is None else repr_java(m)})"
                      for i, m in errors[:3])
    raise InvalidRecordError(f"One or more records have been rejected due to {len(errors)} record errors in total, "
                             f"and only showing the first three errors at most: [{shown}]", record_errors=errors)


def repr_java(message: str) -> str:
    return "'" + message + "'"


_JAVA_GZIP_HEADER = bytes((0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF))   # no mtime, XFL 0, OS unknown


def java_gzip(data: bytes, level: int) -> bytes:
    """Java's GZIPOutputStream (JDK 16+) as Kafka's broker writes gzip: the same header bytes
    (kafka-python's encoder stamps the current time, Python's gzip.compress OS 3), a raw
    deflate stream at `level`, then CRC-32 and size, so the output is byte for byte Kafka's."""
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
    body = deflater.compress(data) + deflater.flush()
    return _JAVA_GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def _encode(codec: int, data: bytes) -> bytes:
    from kafka import codec as kc
    if codec == COMPRESSION_GZIP:
        return java_gzip(data, GZIP_DEFAULT_LEVEL)
    if codec == COMPRESSION_SNAPPY:
        return kc.snappy_encode(data)       # xerial framing, as Kafka's snappy-java streams
    if codec == COMPRESSION_LZ4:
        return kc.lz4_encode(data)
    if codec == COMPRESSION_ZSTD:
        return kc.zstd_encode(data)
    return data


def recompress_batch(buf: memoryview, pos: int, h: BatchHeader, codec: int) -> bytes:
    """The batch with its records' bytes re-encoded with `codec`; every other header field is
    kept (offsets, timestamps, producer id/epoch/sequence, transactional flag), CRC recomputed."""
    payload = _encode(codec, bytes(record_body(buf, pos, h)))
    attributes = (h.attributes & ~COMPRESSION_CODEC_MASK) | codec
    tail = bytearray(buf[pos + 21:pos + RECORD_BATCH_OVERHEAD])     # attributes .. recordsCount
    _I16.pack_into(tail, 0, attributes)
    crc = crc32c(payload, crc32c(bytes(tail)))
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    return _PREFIX.pack(h.base_offset, length, h.partition_leader_epoch, h.magic) + _U32.pack(crc) + \
        bytes(tail) + payload


def apply_compression_type(buf: memoryview, batches: Sequence[tuple[int, BatchHeader]], config: LogConfig,
                           partition: str) -> tuple[memoryview, list[tuple[int, BatchHeader]], int] | None:
    """Recompress the batches whose codec differs from compression.type (None: nothing to do).
    Returns the new payload, its batches and valid byte count. The recompressed batches must still
    fit max.message.bytes (MESSAGE_TOO_LARGE), as Kafka re-checks after recompression."""
    target = CODECS.get(config.compression_type)
    if target is None or all(h.compression_type == target for _pos, h in batches):
        return None
    out = bytearray()
    for pos, h in batches:
        out += recompress_batch(buf, pos, h, target) if h.compression_type != target else buf[pos:pos + h.size]
    mv = memoryview(bytes(out))
    new_batches, valid = split_batches(mv)
    for _pos, h in new_batches:
        if h.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"Message batch size is {h.size} bytes in append to partition {partition} which exceeds the "
                f"maximum configured size of {config.max_message_bytes}.")
    return mv, new_batches, valid
