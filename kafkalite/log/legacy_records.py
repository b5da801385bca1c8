"""Message formats v0 and v1 (magic 0/1, Kafka's LegacyRecord): what Produce v0-2 may carry and
what Fetch v0-3 must answer with.

The log stores magic v2 batches only, as a Kafka 3.x broker does (inter.broker.protocol.version
>= 3.0 ignores message.format.version). So the old formats exist at two edges:

- append: :func:`convert_to_batch` turns a produced v0/v1 message set into one v2 batch with
  Kafka's LogValidator rules (CRC-32 of each message, one compressed wrapper per request, inner
  messages checked, key/timestamp rules), leaving offsets, LogAppendTime and compression.type to
  the log's ordinary v2 path;
- fetch: :func:`lazy_down_convert` is Kafka's LazyDownConversionRecords with its
  LazyDownConversionRecordsSend: stored v2 batches rewritten as magic 0/1 messages (control
  batches dropped, headers lost, compressed batches re-compressed into one wrapper message), the
  answer's size fixed beforehand and filled with an "overflow" stub when conversion comes out
  shorter, or cut when longer.

Message layout (big-endian)::

    offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | [timestamp i64 (v1)] |
    key_length i32 | key | value_length i32 | value

The CRC is CRC-32 (not 32C) over magic..end. Attributes: codec in bits 0-2, LogAppendTime in
bit 3 (v1). A compressed message ("wrapper") holds a compressed message set in its value; v1
inner offsets are relative (0..n-1) and the wrapper carries the absolute last offset.
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterator, NamedTuple, Sequence

from kafkalite.log.errors import (CorruptRecordError, DecompressionError, InvalidRecordError,
                                  InvalidTimestampError, RecordTooLargeError, UnsupportedCompressionTypeError)
from kafkalite.log.record_batch import (COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SNAPPY,
                                        COMPRESSION_ZSTD, CREATE_TIME, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC_V2,
                                        NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, BatchHeader, Record, build_batch,
                                        decode_records, parse_header)

MAGIC_V0 = 0
MAGIC_V1 = 1
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
RECORD_OVERHEAD_V0 = 14          # crc, magic, attributes, key length, value length
RECORD_OVERHEAD_V1 = 22          # + timestamp
CRC_OFFSET = LOG_OVERHEAD        # the crc follows offset and size
MAGIC_OFFSET = LOG_OVERHEAD + 4
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1
MAX_READ_SIZE = 128 * 1024       # LazyDownConversionRecordsSend.MAX_READ_SIZE: one conversion chunk
MIN_OVERFLOW_MESSAGE_LENGTH = LOG_OVERHEAD
LONG_MAX = 2**63 - 1

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_LOG_HEADER = struct.Struct(">qi")                 # offset, size
_HEAD_V0 = struct.Struct(">Ibb")                   # crc, magic, attributes
_HEAD_V1 = struct.Struct(">Ibbq")                  # crc, magic, attributes, timestamp


class LegacyMessage(NamedTuple):
    """One message as it lies in a message set (Kafka's AbstractLegacyRecordBatch entry)."""
    offset: int
    magic: int
    attributes: int
    timestamp: int              # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None
    size: int                   # bytes on the wire, offset and size fields included
    crc: int
    crc_valid: bool

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.magic > MAGIC_V0 and self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


def record_overhead(magic: int) -> int:
    return RECORD_OVERHEAD_V0 if magic == MAGIC_V0 else RECORD_OVERHEAD_V1


# -- reading ------------------------------------------------------------------------------------

def split_entries(buf: bytes | memoryview) -> list[tuple[int, int, int]]:
    """``(position, size, magic)`` of each complete entry, as Kafka's ByteBufferLogInputStream:
    a size below the v0 overhead or a magic outside 0..2 is CORRUPT_MESSAGE, a trailing partial
    entry ends the iteration."""
    out: list[tuple[int, int, int]] = []
    n, pos = len(buf), 0
    while n - pos >= LOG_OVERHEAD:
        size = _I32.unpack_from(buf, pos + 8)[0]
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})")
        if n - pos < HEADER_SIZE_UP_TO_MAGIC:
            break
        magic = buf[pos + MAGIC_OFFSET]
        if magic > MAGIC_V2:    # unsigned here: a negative magic shows as > 127
            raise CorruptRecordError(f"Invalid magic found in record: {magic if magic < 128 else magic - 256}")
        if n - pos < size + LOG_OVERHEAD:
            break
        out.append((pos, size + LOG_OVERHEAD, magic))
        pos += size + LOG_OVERHEAD
    return out


def _read_bytes(buf: bytes | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("Record is corrupt (a key or value length lies past its end)")
    length = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"Record is corrupt (a {length}-byte key or value lies past its end)")
    return bytes(buf[pos:pos + length]), pos + length


def parse_message(buf: bytes | memoryview, pos: int, size: int) -> LegacyMessage:
    """The message of ``size`` bytes (log overhead included) at ``pos``. The CRC is checked, not
    enforced: Kafka reports a bad one at a point of its own choosing (:attr:`crc_valid`)."""
    end = pos + size
    offset, _length = _LOG_HEADER.unpack_from(buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    if size - LOG_OVERHEAD < record_overhead(magic):
        raise CorruptRecordError(f"Record is corrupt (crc could not be retrieved as the record is too small, "
                                 f"size = {size - LOG_OVERHEAD})")
    crc = struct.unpack_from(">I", buf, pos + CRC_OFFSET)[0]
    crc_valid = zlib.crc32(buf[pos + MAGIC_OFFSET:end]) == crc
    if magic == MAGIC_V0:
        _crc, _magic, attributes = _HEAD_V0.unpack_from(buf, pos + CRC_OFFSET)
        timestamp, body = NO_TIMESTAMP, pos + CRC_OFFSET + _HEAD_V0.size
    else:
        _crc, _magic, attributes, timestamp = _HEAD_V1.unpack_from(buf, pos + CRC_OFFSET)
        body = pos + CRC_OFFSET + _HEAD_V1.size
    key, p = _read_bytes(buf, body, end)
    value, p = _read_bytes(buf, p, end)
    return LegacyMessage(offset, magic, attributes & 0xFF, timestamp, key, value, size, crc, crc_valid)


def _decompress(codec: int, magic: int, data: bytes) -> bytes:
    from kafka import codec as kc
    try:
        if codec == COMPRESSION_GZIP:
            return kc.gzip_decode(data)
        if codec == COMPRESSION_SNAPPY:
            return kc.snappy_decode(data)
        if codec == COMPRESSION_LZ4:
            # magic 0 frames carry Kafka's old, wrong header checksum (KAFKA-3160)
            return _lz4_decode_v0(data) if magic == MAGIC_V0 else kc.lz4_decode(data)
    except Exception as e:   # every codec library has its own error types
        raise DecompressionError(f"Failed to decompress record stream: {e}", str(codec)) from e
    raise InvalidRecordError(f"Invalid wrapper compressionType found in legacy deep record iterator {magic}")


def inner_messages(wrapper: LegacyMessage) -> list[LegacyMessage]:
    """The deep entries of a compressed wrapper with absolute offsets and, for v1, the wrapper's
    LogAppendTime (Kafka's DeepRecordsIterator)."""
    if wrapper.codec == COMPRESSION_ZSTD:
        raise InvalidRecordError(
            f"Invalid wrapper compressionType found in legacy deep record iterator {wrapper.magic}")
    if wrapper.value is None:
        raise InvalidRecordError(
            f"Found invalid compressed record set with null value (magic = {wrapper.magic})")
    data = _decompress(wrapper.codec, wrapper.magic, wrapper.value)
    inner = [parse_message(data, pos, size) for pos, size, _magic in split_entries(data)]
    if not inner:
        raise InvalidRecordError("Found invalid compressed record set with no inner records")
    if wrapper.magic == MAGIC_V1:
        if wrapper.offset == 0:
            base = 0      # "the outer offset may be 0 if this is produce data from certain librdkafka versions"
        else:
            if wrapper.offset < inner[-1].offset:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper.offset}' is less than the last inner message offset '{inner[-1].offset}' "
                    "and it is not zero.")
            base = wrapper.offset - inner[-1].offset
        lat = wrapper.timestamp_type == LOG_APPEND_TIME
        inner = [m._replace(offset=base + m.offset,
                            timestamp=wrapper.timestamp if lat and m.magic == MAGIC_V1 else m.timestamp)
                 for m in inner]
    for m in inner:
        if m.codec != COMPRESSION_NONE:
            raise InvalidRecordError("Inner messages must not be compressed")
    return inner


# -- produce: v0/v1 message set -> one v2 batch ----------------------------------------------------

def is_legacy(records: bytes | memoryview | None) -> bool:
    """Whether a produced payload starts with a magic 0/1 message (the only case that converts)."""
    return records is not None and len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] < MAGIC_V2


def _check_record(outer: LegacyMessage, record: LegacyMessage, *, compacted: bool, timestamp_type: int,
                  before_max_ms: int, after_max_ms: int, now_ms: int) -> tuple[int, str] | None:
    """LogValidator.validateRecord for one record of a legacy entry: (error code, message) of a
    record error, or None. A corrupt inner message raises at once, as in Kafka."""
    if record.magic != outer.magic:
        return InvalidRecordError.error_code, (f"Record's magic does not match outer magic {outer.magic}")
    if outer.codec != COMPRESSION_NONE and not record.crc_valid:
        raise CorruptRecordError(f"Record is corrupt (stored crc = {record.crc})")
    if compacted and record.key is None:
        return InvalidRecordError.error_code, "Compacted topic cannot accept message without key"
    if timestamp_type == CREATE_TIME and record.timestamp != NO_TIMESTAMP:
        diff = now_ms - record.timestamp
        if diff > before_max_ms or -diff > after_max_ms:
            return InvalidTimestampError.error_code, (
                f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                f"The timestamp should be within [{now_ms - before_max_ms}, {now_ms + after_max_ms}]")
    elif outer.timestamp_type == LOG_APPEND_TIME:
        return InvalidTimestampError.error_code, ("Invalid timestamp type in message. Producer should not set "
                                                  "timestamp type to LogAppendTime.")
    return None


def _raise_record_errors(errors: list[tuple[int, int, str]]) -> None:
    """LogValidator.processRecordErrors: INVALID_TIMESTAMP if any record had a bad timestamp."""
    if not errors:
        return
    record_errors = [(index, message) for index, _code, message in errors]
    if any(code == InvalidTimestampError.error_code for _i, code, _m in errors):
        raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp",
                                    record_errors=record_errors)
    raise InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total",
        record_errors=record_errors)


def convert_to_batch(records: bytes | memoryview, *, max_message_bytes: int, compacted: bool,
                     timestamp_type: int, before_max_ms: int, after_max_ms: int, target_codec: int | None,
                     now_ms: int) -> bytes:
    """One CreateTime v2 batch at base offset 0 holding every record of a produced v0/v1 message
    set (b"" when no message is whole: nothing to append, no error), after Kafka's checks in
    Kafka's order (UnifiedLog.analyzeAndValidateRecords, then LogValidator): MESSAGE_TOO_LARGE per
    message, CORRUPT_MESSAGE for a bad CRC-32, INVALID_RECORD for more than one compressed wrapper
    or mixed magics, then each record.

    ``target_codec`` is compression.type's codec (None: "producer", keep the source codec). The
    log then assigns offsets and, on a LogAppendTime topic, stamps the batch as for any v2 batch;
    a v0 record keeps timestamp -1 (NO_TIMESTAMP), as Kafka's conversion does.
    """
    entries = split_entries(records)
    source_codec = COMPRESSION_NONE
    messages: list[LegacyMessage] = []
    for pos, size, magic in entries:
        if magic == MAGIC_V2:
            raise InvalidRecordError(f"Batch magic {MAGIC_V2} is not the same as the first batch's magic byte "
                                     f"{entries[0][2]}")
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append is {size} bytes which exceeds the maximum configured "
                f"value of {max_message_bytes}.")
        message = parse_message(records, pos, size)
        if not message.crc_valid:
            raise CorruptRecordError(f"Record is corrupt (stored crc = {message.crc})")
        if message.codec != COMPRESSION_NONE:
            source_codec = message.codec
        messages.append(message)
    if not messages:
        return b""      # no whole message: nothing to append, no error (Kafka's validBytes == 0)
    if source_codec != COMPRESSION_NONE and len(messages) > 1:
        raise InvalidRecordError("Compressed outer record has more than one batch")
    first_magic = messages[0].magic
    converted: list[tuple[bytes | None, bytes | None, int]] = []
    for outer in messages:
        if outer.magic != first_magic:
            raise InvalidRecordError(
                f"Batch magic {outer.magic} is not the same as the first batch's magic byte {first_magic}")
        errors: list[tuple[int, int, str]] = []
        inner = inner_messages(outer) if outer.codec != COMPRESSION_NONE else [outer]
        for index, record in enumerate(inner):
            error = _check_record(outer, record, compacted=compacted, timestamp_type=timestamp_type,
                                  before_max_ms=before_max_ms, after_max_ms=after_max_ms, now_ms=now_ms)
            if error is not None:
                errors.append((index, *error))
            converted.append((record.key, record.value, record.timestamp))
        _raise_record_errors(errors)
    codec = source_codec if target_codec is None else target_codec
    batch = build_batch(converted)
    if codec == COMPRESSION_NONE:
        return batch
    from kafkalite.log.append_policy import recompress_batch   # the broker's own encoder settings
    mv = memoryview(batch)
    return recompress_batch(mv, 0, parse_header(mv), codec)


# -- fetch: v2 batches -> v0/v1 message sets -------------------------------------------------------

def encode_message(magic: int, offset: int, timestamp: int, attributes: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    """One message with its CRC-32 (LegacyRecord.write behind AbstractLegacyRecordBatch.writeHeader)."""
    body = bytearray()
    if magic == MAGIC_V0:
        body += bytes((MAGIC_V0, attributes))
    else:
        body += bytes((MAGIC_V1, attributes)) + _I64.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(part)) + part
    crc = zlib.crc32(body)
    return _LOG_HEADER.pack(offset, len(body) + 4) + struct.pack(">I", crc) + bytes(body)


def _compress(codec: int, magic: int, data: bytes) -> bytes:
    from kafkalite.log.append_policy import _encode      # gzip at Java's default level, xerial snappy
    if codec == COMPRESSION_LZ4 and magic == MAGIC_V0:
        return _lz4_encode_v0(data)
    return _encode(codec, data)


def build_message_set(magic: int, codec: int, timestamp_type: int, log_append_time: int,
                      records: Sequence[Record]) -> bytes:
    """Kafka's MemoryRecordsBuilder for magic 0/1: one message per record uncompressed, else one
    wrapper message (offset = last offset, timestamp = max or LogAppendTime) around the inner
    messages (v1: relative offsets)."""
    lat = timestamp_type == LOG_APPEND_TIME
    attributes = TIMESTAMP_TYPE_MASK if lat and magic > MAGIC_V0 else 0
    base = records[0].offset
    out = bytearray()
    max_timestamp = NO_TIMESTAMP
    for r in records:
        timestamp = log_append_time if lat else r.timestamp
        if magic > MAGIC_V0 and timestamp > max_timestamp:
            max_timestamp = timestamp
        inner_offset = r.offset - base if magic > MAGIC_V0 and codec != COMPRESSION_NONE else r.offset
        out += encode_message(magic, inner_offset, timestamp, attributes, r.key, r.value)
    if codec == COMPRESSION_NONE:
        return bytes(out)
    wrapper_ts = log_append_time if lat else max_timestamp
    return encode_message(magic, records[-1].offset, wrapper_ts, attributes | codec, None,
                          _compress(codec, magic, bytes(out)))


def down_convert_batch(batch: memoryview, header: BatchHeader, to_magic: int, first_offset: int) -> bytes:
    """RecordsUtil.downConvert of one stored v2 batch (b"" when nothing of it survives): control
    batches vanish, zstd cannot be expressed (UNSUPPORTED_COMPRESSION_TYPE), records before the
    fetch offset are left out of uncompressed batches only."""
    if header.is_control:
        return b""
    if header.compression_type == COMPRESSION_ZSTD:
        raise UnsupportedCompressionTypeError("Down-conversion of zstandard-compressed batches is not supported")
    records = decode_records(batch, header)
    if header.compression_type == COMPRESSION_NONE:
        records = [r for r in records if r.offset >= first_offset]
    if not records:
        return b""
    log_append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else NO_TIMESTAMP
    return build_message_set(to_magic, header.compression_type, header.timestamp_type, log_append_time, records)


def _v2_batches(records: bytes) -> list[tuple[int, BatchHeader]]:
    """Complete v2 batches of a fetched slice (a FileRecords batch iterator stops at a partial one)."""
    out: list[tuple[int, BatchHeader]] = []
    pos, n = 0, len(records)
    while n - pos >= RECORD_BATCH_OVERHEAD:
        h = parse_header(records, pos)
        if n - pos < h.size:
            break
        out.append((pos, h))
        pos += h.size
    return out


def _overflow(remaining: int) -> bytes:
    """LazyDownConversionRecordsSend.buildOverflowBatch: offset -1 and a size past the end, which
    a consumer reads as a partial message and ignores."""
    size = max(MIN_OVERFLOW_MESSAGE_LENGTH, min(remaining + 1, MAX_READ_SIZE))
    head = _LOG_HEADER.pack(-1, max(remaining + 1, RECORD_BATCH_OVERHEAD))
    return head + bytes(size - len(head))


def lazy_down_convert(records: bytes, to_magic: int, first_offset: int) -> bytes:
    """The bytes Kafka 3.9 sends for a partition of a Fetch v0-3 (LazyDownConversionRecords and
    its Send), from the stored v2 batches read for it.

    The size is fixed first: max(bytes read, first converted chunk), or 12 (one overflow stub)
    when batches were read but none converts. The chunks follow — the first batch that converts,
    then groups of batches up to 128 KiB (counting from the batch after the *first* one read, as
    Kafka's iterator skips exactly one batch: a control batch ahead of the first data batch makes
    that batch go out twice) — cut at the size, or padded with overflow stubs. Raises
    UnsupportedCompressionTypeError when the first convertible batch is zstd.
    """
    mv = memoryview(records)
    batches = _v2_batches(records)

    def convert(group: Sequence[tuple[int, BatchHeader]]) -> bytes:
        return b"".join(down_convert_batch(mv[p:p + h.size], h, to_magic, first_offset) for p, h in group)

    first = b""
    for pos, h in batches:
        first = convert([(pos, h)])
        if first:
            break
    if not first:
        return _empty_or_stub(bool(batches))
    size = max(len(records), len(first))

    def chunks() -> Iterator[bytes]:
        yield first
        i = 1
        while i < len(batches):
            group = [batches[i]]
            total = batches[i][1].size
            i += 1
            while i < len(batches) and total + batches[i][1].size <= MAX_READ_SIZE:
                group.append(batches[i])
                total += batches[i][1].size
                i += 1
            converted = convert(group)
            if converted:
                yield converted

    out = bytearray()
    it = chunks()
    while len(out) < size:
        remaining = size - len(out)
        try:
            chunk = next(it)
        except (StopIteration, UnsupportedCompressionTypeError):
            it = iter(())
            chunk = _overflow(remaining)
        out += chunk[:remaining]
    return bytes(out)


def _empty_or_stub(had_batches: bool) -> bytes:
    """Nothing converted: one 12-byte overflow stub if there were batches, so an old consumer sees
    a message too large for its fetch size; nothing at all otherwise."""
    return _overflow(MIN_OVERFLOW_MESSAGE_LENGTH)[:MIN_OVERFLOW_MESSAGE_LENGTH] if had_batches else b""


# -- LZ4 frames of magic 0 (Kafka's KafkaLZ4BlockOutputStream with the broken header checksum) -----

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of a short input (the LZ4 frame header checksum; no 16-byte stripes needed there,
    but they are handled for completeness)."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for j in range(4):
                lane = int.from_bytes(data[i + 4 * j:i + 4 * j + 4], "little")
                v[j] = (_rotl((v[j] + lane * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _lz4_frame_header_end(frame: bytes) -> int:
    flg = frame[4]
    return 7 + (8 if flg & 0x08 else 0)     # magic 4, FLG, BD, [content size 8], HC


def _lz4_encode_v0(data: bytes) -> bytes:
    """An LZ4 frame whose header checksum covers the magic number too, as Kafka 0.8/0.9 wrote it
    and as Kafka still writes (and expects) for magic 0."""
    from kafka import codec as kc
    frame = kc.lz4_encode(data)
    end = _lz4_frame_header_end(frame)
    header = frame[:end - 1]
    return header + bytes(((xxh32(header) >> 8) & 0xFF,)) + frame[end:]


def _lz4_decode_v0(data: bytes) -> bytes:
    from kafka import codec as kc
    end = _lz4_frame_header_end(data)
    descriptor = data[4:end - 1]
    fixed = data[:end - 1] + bytes(((xxh32(descriptor) >> 8) & 0xFF,)) + data[end:]
    return kc.lz4_decode(fixed)
