"""Magic v2 record batches as bytes: header parsing, validation, offset assignment, stamping.

The broker works per batch, never per record, on the produce and fetch paths: it parses the
61-byte batch header, checks CRC-32C, and rewrites ``baseOffset`` and
``partitionLeaderEpoch`` — both outside the CRC, so no checksum work. LogAppendTime stamping
changes ``attributes`` and ``maxTimestamp``, which are inside the CRC, so that path recomputes it.

A client's batch is also walked once, record by record but without building records
(:func:`walk_records`: varints skipped, lengths and counts checked, the real maximum timestamp
taken), as Kafka's LogValidator iterates it. Records are decoded only where the broker must look
(offset-for-timestamp inside one batch, tests): :func:`decode_records`.

Layout (big-endian)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records...

``batchLength`` counts the bytes after itself; the CRC covers ``attributes`` to the end.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple, Sequence

from crc32c import crc32c

from kafkalite.log.errors import (CorruptRecordError, DecompressionError, InvalidRecordError,
                                  InvalidTimestampError, LogError, RecordTooLargeError)

Buffer = bytes | bytearray | memoryview

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD = HEADER_STRUCT.size          # 61
assert RECORD_BATCH_OVERHEAD == 61

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57

LOG_OVERHEAD = 12                # baseOffset + batchLength: the part every magic shares
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14          # smallest legal legacy record: Kafka's first size sanity bound

MAGIC_V2 = 2

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08       # 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_OFFSET = -1
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 2**31 - 1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">qiib")          # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC_TAIL = struct.Struct(">hiqqqhii")     # attributes .. recordsCount: the first CRC'd bytes
assert _PREFIX.size == HEADER_SIZE_UP_TO_MAGIC and _CRC_TAIL.size == 40


def increment_sequence(sequence: int, increment: int) -> int:
    """Producer sequences wrap from INT32_MAX to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch, log overhead included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


_make_header = BatchHeader._make
_unpack_header = HEADER_STRUCT.unpack_from


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``. Magic must be 2 (the layout differs otherwise)."""
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"Record batch header truncated: {len(buf) - pos} bytes")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"Invalid magic {magic} (expected {MAGIC_V2})")
    return _make_header(_unpack_header(buf, pos))


def split_batches(buf: Buffer) -> tuple[list[tuple[int, BatchHeader]], int]:
    """Split a MemoryRecords payload into ``[(position, header)]`` and the valid byte count.

    Like Kafka's ByteBufferLogInputStream: a trailing incomplete batch ends the iteration
    (its bytes are not counted as valid and Kafka trims them); a batch length below the minimum
    or an invalid magic is CORRUPT_MESSAGE. Legacy magic 0/1 batches are INVALID_RECORD (Kafka
    rejects them for every produce version the broker supports).
    """
    n = len(buf)
    pos = 0
    out: list[tuple[int, BatchHeader]] = []
    unpack_i32 = _I32.unpack_from
    while n - pos >= LOG_OVERHEAD:
        length = unpack_i32(buf, pos + LENGTH_OFFSET)[0]
        if length < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size {length} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})")
        if n - pos < HEADER_SIZE_UP_TO_MAGIC:
            break
        magic = buf[pos + MAGIC_OFFSET]
        if magic > MAGIC_V2:   # buf[] is unsigned: a negative magic shows up as > 127
            raise CorruptRecordError(f"Invalid magic found in record: {magic if magic < 128 else magic - 256}")
        size = length + LOG_OVERHEAD
        if n - pos < size:
            break
        if magic != MAGIC_V2:
            raise InvalidRecordError(
                f"Record batches with magic {magic} are not supported; only magic version 2 is")
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {size} is smaller than the minimum allowed "
                f"overhead {RECORD_BATCH_OVERHEAD})")
        out.append((pos, _make_header(_unpack_header(buf, pos))))
        pos += size
    return out, pos


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch of a MemoryRecords payload."""
    batches, _valid = split_batches(buf)
    return iter(batches)


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch at ``pos`` of ``size`` bytes."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c(mv[pos + ATTRIBUTES_OFFSET: pos + size])


def is_crc_valid(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def validate_batch(buf: Buffer, pos: int, header: BatchHeader, *, from_client: bool = True,
                   max_message_bytes: int | None = None) -> None:
    """Kafka's checks on one incoming v2 batch, in Kafka's order, raising the mapped errors.

    ``from_client`` adds LogValidator's client-only checks (baseOffset 0, consistent count,
    no control batch, sequence present with a producer id, no client-set LogAppendTime).
    ``max_message_bytes`` (``max.message.bytes``) bounds the batch size (MESSAGE_TOO_LARGE).
    """
    size = header.size
    if from_client and header.base_offset != 0:
        # UnifiedLog.analyzeAndValidateRecords: client v2 batches must start at offset 0.
        raise InvalidRecordError(
            f"The baseOffset of the record batch should be 0, but it is {header.base_offset}")
    if max_message_bytes is not None and size > max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size is {size} bytes which exceeds the maximum configured value "
            f"of {max_message_bytes}.")
    if size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"Record batch is corrupt (the size {size} is smaller than the minimum allowed "
            f"overhead {RECORD_BATCH_OVERHEAD})")
    if len(buf) - pos < size:
        raise CorruptRecordError(f"Record batch truncated: {len(buf) - pos} of {size} bytes")
    computed = compute_crc(buf, pos, size)
    if computed != header.crc:
        raise CorruptRecordError(
            f"Record batch is corrupt (stored crc = {header.crc}, computed crc = {computed})")
    if header.compression_type > COMPRESSION_ZSTD:
        raise CorruptRecordError(f"Unknown compression type id {header.compression_type}")
    if not from_client:
        return
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]")
    if header.records_count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {header.records_count}")
    if count_from_offsets != header.records_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.records_count}")
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id}")
    if header.timestamp_type == LOG_APPEND_TIME:
        msg = "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."
        raise InvalidTimestampError(msg, record_errors=[(0, msg)])


# -- rewriting ------------------------------------------------------------------------------

def assign_offsets(buf: bytearray | memoryview, pos: int, base_offset: int,
                   partition_leader_epoch: int) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place. Both lie outside the CRC."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Stamp LogAppendTime in place: timestamp-type bit and maxTimestamp, then the CRC again
    (Kafka's DefaultRecordBatch.setMaxTimestamp)."""
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    size = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def stamped_header(header: BatchHeader, batch: memoryview, base_offset: int,
                   partition_leader_epoch: int, log_append_time: int | None = None) -> bytes:
    """The rewritten leading bytes of a batch, for a gather write without copying the body.

    Without ``log_append_time`` it returns the first 17 bytes (through magic): the rest of the
    batch is unchanged. With it, the whole 61-byte header with the LogAppendTime bit, the new
    maxTimestamp and a recomputed CRC (``batch`` supplies the records for the CRC).
    """
    if log_append_time is None:
        return _PREFIX.pack(base_offset, header.batch_length, partition_leader_epoch, MAGIC_V2)
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    tail = _CRC_TAIL.pack(attributes, header.last_offset_delta, header.base_timestamp,
                          log_append_time, header.producer_id, header.producer_epoch,
                          header.base_sequence, header.records_count)
    crc = crc32c(batch[RECORD_BATCH_OVERHEAD:header.size], crc32c(tail))
    return _PREFIX.pack(base_offset, header.batch_length, partition_leader_epoch, MAGIC_V2) + \
        _U32.pack(crc) + tail


# -- records inside one batch ---------------------------------------------------------------

class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    attributes: int = 0


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zig-zag varint (protobuf style, as Kafka's ByteUtils.readVarint/readVarlong)."""
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("Varint is too long")
    return (raw >> 1) ^ -(raw & 1), pos


CODEC_NAMES = {COMPRESSION_NONE: "none", COMPRESSION_GZIP: "gzip", COMPRESSION_SNAPPY: "snappy",
               COMPRESSION_LZ4: "lz4", COMPRESSION_ZSTD: "zstd"}


def _decompress(codec: int, data: memoryview) -> bytes:
    from kafka import codec as kc   # imported lazily: only the inspection paths need it
    name = CODEC_NAMES.get(codec)
    if name is None or codec == COMPRESSION_NONE:
        raise CorruptRecordError(f"Unknown compression type id {codec}")
    try:
        if codec == COMPRESSION_GZIP:
            return kc.gzip_decode(bytes(data))
        if codec == COMPRESSION_SNAPPY:
            return kc.snappy_decode(bytes(data))
        if codec == COMPRESSION_LZ4:
            return kc.lz4_decode(bytes(data))
        return kc.zstd_decode(bytes(data))
    except Exception as e:  # every codec library has its own error types
        # NotImplementedError too: kafka-python's codec raises it when the library is missing
        raise DecompressionError(f"Failed to decompress record stream ({name}): {e!r}", name) from e


def check_decompresses(buf: memoryview, pos: int, h: BatchHeader) -> None:
    """Decompress a compressed batch's records and drop them: DecompressionError when its payload
    is no stream of its codec. Kafka's LogValidator reads every compressed client batch, so such a
    batch never reaches its log; this is that check without decoding the records."""
    if h.compression_type != COMPRESSION_NONE:
        _decompress(h.compression_type, buf[pos + RECORD_BATCH_OVERHEAD:pos + h.size])


_INVALID_STRUCTURE = "Found invalid record structure"


def _varint_tail(buf: Buffer, pos: int, first: int, max_bytes: int) -> tuple[int, int]:
    """The rest of a zig-zag varint whose first byte ``first`` (at ``pos - 1``) has the
    continuation bit: Kafka's ByteUtils.readVarint (``max_bytes`` 5, an int: bits past 32 are
    dropped) or readVarlong (10). Raises ValueError for a longer varint, IndexError at the end."""
    raw = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 7 * max_bytes:
            raise ValueError("Varint is too long")
    if max_bytes == 5:
        raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def walk_records(body: Buffer, count: int, base_timestamp: int, *, compressed: bool,
                 collect: bool = False) -> tuple[int, bool, list[tuple[int, int, bool]] | None]:
    """Check the structure of ``count`` records in ``body`` (one batch's records, decompressed)
    without building them, as Kafka's LogValidator does while iterating a client batch: varints,
    each record's length against its fields and the batch's end, no negative header count or
    header key size, exactly ``count`` records and no bytes left over.

    One- and two-byte varints are read inline (the common case); no object is made per record
    unless ``collect``. Returns ``(max_timestamp, offsets_in_order, seen)``: the largest record
    timestamp, whether the offset deltas are 0..count-1, and (with ``collect``)
    ``(timestamp, offset_delta, has_key)`` per record. A malformed record is INVALID_RECORD (no
    message reaches the client); a length varint longer than 5 bytes in an uncompressed batch
    escapes Kafka's iterator as an IllegalArgumentException, so UNKNOWN_SERVER_ERROR there
    (LogError).
    """
    n = len(body)
    pos = 0
    max_delta = None
    in_order = True
    seen: list[tuple[int, int, bool]] | None = [] if collect else None
    tail = _varint_tail
    index = 0
    try:
        while index < count:
            b = body[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:                   # two bytes: records up to 8 KB
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                try:
                    length, pos = tail(body, pos + 1, b, 5)
                except ValueError:
                    if compressed:
                        raise
                    raise LogError("Varint is too long in a record length") from None
            end = pos + length
            if length < 0 or end > n:
                raise InvalidRecordError(_INVALID_STRUCTURE)
            b = body[pos + 1]                               # after attributes (not checked by Kafka)
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = tail(body, pos + 2, b, 10)
            b = body[pos]
            if b < 0x80:
                if b != index << 1:
                    in_order = False
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = tail(body, pos + 1, b, 5)
                if offset_delta != index:
                    in_order = False
            b = body[pos]
            if b < 0x80:
                key_len = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_len, pos = tail(body, pos + 1, b, 5)
            if key_len > 0:
                pos += key_len
            b = body[pos]
            if b < 0x80:
                pos += 1
                if not b & 1:
                    pos += b >> 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                pos += 2
                if not raw & 1:
                    pos += raw >> 1
            else:
                value_len, pos = tail(body, pos + 1, b, 5)
                if value_len > 0:
                    pos += value_len
            b = body[pos]
            pos += 1
            if b:       # header count: 0 is the one-byte varint 0
                headers, pos = ((b >> 1) ^ -(b & 1), pos) if b < 0x80 else tail(body, pos, b, 5)
                if headers < 0:
                    raise InvalidRecordError(_INVALID_STRUCTURE)
                for _h in range(headers):
                    b = body[pos]
                    pos += 1
                    hk, pos = ((b >> 1) ^ -(b & 1), pos) if b < 0x80 else tail(body, pos, b, 5)
                    if hk < 0:
                        raise InvalidRecordError(_INVALID_STRUCTURE)
                    pos += hk
                    b = body[pos]
                    pos += 1
                    hv, pos = ((b >> 1) ^ -(b & 1), pos) if b < 0x80 else tail(body, pos, b, 5)
                    if hv > 0:
                        pos += hv
            if pos != end:
                raise InvalidRecordError(_INVALID_STRUCTURE)
            if max_delta is None or ts_delta > max_delta:
                max_delta = ts_delta
            if seen is not None:
                seen.append((base_timestamp + ts_delta, offset_delta, key_len >= 0))
            index += 1
    except (IndexError, ValueError):
        raise InvalidRecordError(_INVALID_STRUCTURE) from None
    if pos != n:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    max_ts = NO_TIMESTAMP if max_delta is None else max(NO_TIMESTAMP, base_timestamp + max_delta)
    return max_ts, in_order, seen


def record_body(buf: Buffer, pos: int, h: BatchHeader) -> Buffer:
    """The records of the batch at ``pos``: a slice, or decompressed once."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    body = mv[pos + RECORD_BATCH_OVERHEAD:pos + h.size]
    if h.compression_type != COMPRESSION_NONE:
        return _decompress(h.compression_type, body)
    return body


def set_max_timestamp(buf: bytearray, pos: int, max_timestamp: int) -> None:
    """Rewrite a CreateTime batch's maxTimestamp in place and its CRC (Kafka's
    DefaultRecordBatch.setMaxTimestamp, as LogValidator stamps the records' real maximum)."""
    size = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def decode_records(batch: Buffer, header: BatchHeader | None = None) -> list[Record]:
    """Decode every record of ONE batch (decompressing it). Not for the produce/fetch path."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    h = header if header is not None else parse_header(mv, 0)
    body: Buffer = mv[RECORD_BATCH_OVERHEAD:h.size]
    if h.compression_type != COMPRESSION_NONE:
        body = _decompress(h.compression_type, body)
    log_append = h.timestamp_type == LOG_APPEND_TIME
    out: list[Record] = []
    pos = 0
    end = len(body)
    try:
        for _ in range(h.records_count):
            length, pos = _read_varint(body, pos)
            start = pos
            attributes = body[pos]
            pos += 1
            ts_delta, pos = _read_varint(body, pos)
            offset_delta, pos = _read_varint(body, pos)
            klen, pos = _read_varint(body, pos)
            key = None
            if klen >= 0:
                key = bytes(body[pos:pos + klen])
                pos += klen
            vlen, pos = _read_varint(body, pos)
            value = None
            if vlen >= 0:
                value = bytes(body[pos:pos + vlen])
                pos += vlen
            nheaders, pos = _read_varint(body, pos)
            if nheaders < 0:
                raise CorruptRecordError(f"Found invalid number of record headers {nheaders}")
            headers = []
            for _h in range(nheaders):
                hklen, pos = _read_varint(body, pos)
                if hklen < 0:
                    raise CorruptRecordError(f"Invalid negative header key size {hklen}")
                hkey = bytes(body[pos:pos + hklen]).decode("utf-8")
                pos += hklen
                hvlen, pos = _read_varint(body, pos)
                hval = None
                if hvlen >= 0:
                    hval = bytes(body[pos:pos + hvlen])
                    pos += hvlen
                headers.append((hkey, hval))
            if pos - start != length or pos > end:
                raise CorruptRecordError(
                    f"Invalid record size: expected {length} bytes, read {pos - start}")
            ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
            out.append(Record(h.base_offset + offset_delta, ts, key, value, tuple(headers),
                              attributes))
    except (IndexError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"Found invalid record structure: {e!r}") from e
    if pos != end:
        raise CorruptRecordError(f"{end - pos} unconsumed bytes after all records consumed")
    return out


# -- building (tests, broker-written batches) -----------------------------------------------

def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _compress(codec: int, data: bytes) -> bytes:
    from kafka import codec as kc
    if codec == COMPRESSION_GZIP:
        return kc.gzip_encode(data)
    if codec == COMPRESSION_SNAPPY:
        return kc.snappy_encode(data)
    if codec == COMPRESSION_LZ4:
        return kc.lz4_encode(data)
    if codec == COMPRESSION_ZSTD:
        return kc.zstd_encode(data)
    raise ValueError(f"Unknown compression type id {codec}")


def build_batch(records: Sequence[tuple[bytes | None, bytes | None, int]], *, base_offset: int = 0,
                compression: int = COMPRESSION_NONE, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                transactional: bool = False, control: bool = False,
                headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    """Encode one v2 batch of ``(key, value, timestamp)`` records (CreateTime).

    For tests and for batches the broker writes itself (coordinators); the produce path never
    re-encodes client batches.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    base_ts = records[0][2]
    max_ts = max(r[2] for r in records)
    body = bytearray()
    for i, (key, value, ts) in enumerate(records):
        rec = bytearray()
        rec.append(0)                      # record attributes (unused)
        _write_varint(rec, ts - base_ts)
        _write_varint(rec, i)
        if key is None:
            _write_varint(rec, -1)
        else:
            _write_varint(rec, len(key))
            rec += key
        if value is None:
            _write_varint(rec, -1)
        else:
            _write_varint(rec, len(value))
            rec += value
        _write_varint(rec, len(headers))
        for hk, hv in headers:
            hkb = hk.encode("utf-8")
            _write_varint(rec, len(hkb))
            rec += hkb
            if hv is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(hv))
                rec += hv
        _write_varint(body, len(rec))
        body += rec
    payload = bytes(body) if compression == COMPRESSION_NONE else _compress(compression, bytes(body))
    attributes = compression
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    tail = _CRC_TAIL.pack(attributes, len(records) - 1, base_ts, max_ts, producer_id,
                          producer_epoch, base_sequence, len(records))
    crc = crc32c(payload, crc32c(tail))
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    return _PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC_V2) + \
        _U32.pack(crc) + tail + payload


# -- transaction markers (control batches) ---------------------------------------------------

# Kafka's ControlRecordType ids, in the control record's key.
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VALUE_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")      # version, type
_END_TXN_VALUE = struct.Struct(">hi")    # version, coordinator epoch


def build_end_txn_marker(producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool, timestamp: int, partition_leader_epoch: int = -1) -> bytes:
    """A COMMIT/ABORT marker as Kafka's MemoryRecords.withEndTransactionMarker writes it: a v2
    batch with the transactional and control bits, no sequence, and one record whose key is
    ``int16 version 0, int16 type`` and whose value is ``int16 version 0, int32 coordinator
    epoch`` (EndTransactionMarker)."""
    key = _CONTROL_KEY.pack(CONTROL_RECORD_KEY_VERSION,
                            CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT)
    value = _END_TXN_VALUE.pack(END_TXN_MARKER_VALUE_VERSION, coordinator_epoch)
    return build_batch([(key, value, timestamp)], producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       partition_leader_epoch=partition_leader_epoch, transactional=True,
                       control=True)


def parse_control_type(key: bytes | None) -> int:
    """The type id of a control record key (Kafka's ControlRecordType.parse): at least 4 bytes,
    a non-negative version; a newer version is read as version 0."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(
            f"Invalid value size found for end control record key. Must have at least "
            f"{_CONTROL_KEY.size} bytes, but found only {0 if key is None else len(key)}")
    version, ctype = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}. "
                                 f"May indicate data corruption")
    return ctype


def parse_end_txn_marker(batch: Buffer, header: BatchHeader) -> tuple[int, int]:
    """``(control_type, coordinator_epoch)`` of the marker batch ``batch`` (its whole bytes).

    Raises CorruptRecordError for undecodable records and InvalidRecordError for a batch that
    is not one COMMIT/ABORT marker record (Kafka's EndTransactionMarker.deserialize)."""
    if not header.is_control:
        raise InvalidRecordError("Not a control batch")
    records = decode_records(batch, header)
    if len(records) != 1:
        raise InvalidRecordError(
            f"A transaction marker batch holds exactly one record, found {len(records)}")
    rec = records[0]
    ctype = parse_control_type(rec.key)
    if ctype not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(f"Invalid record type for end transaction marker: {ctype}")
    value = rec.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise InvalidRecordError(
            f"Invalid value size found for end transaction marker. Must have at least "
            f"{_END_TXN_VALUE.size} bytes, but found only {0 if value is None else len(value)}")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for end transaction marker: {version}. "
                                 f"May indicate data corruption")
    return ctype, coordinator_epoch
