"""ProduceRequest (key 0), v0-13, read straight from the frame.

A producer spreading over many partitions sends one small Produce request per partition
(librdkafka does), so reading the request is paid per request, like writing its answer
(:mod:`kafkalite.protocol.produce_response`). kafka-python's generated decoder builds three
objects per partition path and copies each partition's records out of the frame; this reads the
same fields into named tuples and hands the records on as a slice of the frame (no copy: the
frame is an immutable ``bytes`` the connection read, and the log writes from the slice).

Equivalence with kafka-python's decoder plus the broker's non-nullable check (what every other
request goes through, :func:`kafkalite.server.kafka_apis.decode_body`) is property-tested: the
same fields for every input both accept, an error for every input either refuses. It is stricter
in three places, each as Kafka's own parser is (it closes the connection on them):

- an array count below -1 in a classic (non-flexible) version: kafka-python reads it as an empty
  array; Kafka throws "non-nullable field ... was serialized as null" (the topic and partition
  arrays are non-nullable in every version);
- a tagged field declared longer than what is left of the body: kafka-python reads it short and
  stops at the end; Kafka runs out of buffer;
- a compact (v9+) string longer than 32,767 bytes: Kafka's readers refuse it ("string field ...
  had invalid length").

Strings are UTF-8 read strictly, as kafka-python reads them (an invalid one closes the
connection; Kafka would decode it with replacement characters).
"""
from __future__ import annotations

import struct
import uuid
from typing import NamedTuple, Optional

FIRST_FLEXIBLE_VERSION = 9
FIRST_TRANSACTIONAL_ID_VERSION = 3
FIRST_TOPIC_ID_VERSION = 13

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_ZERO_UUID_BYTES = bytes(16)
_MAX_STRING_LENGTH = 0x7FFF     # a string's length is an int16 in the classic versions


class MalformedProduceRequest(ValueError):
    """The body does not parse (the connection is closed)."""


class NegativeArrayCountError(MalformedProduceRequest):
    """A classic array count below -1 (kafka-python reads an empty array; Kafka refuses)."""


class TruncatedTaggedFieldError(MalformedProduceRequest):
    """A tagged field running past the body (kafka-python reads it short; Kafka refuses)."""


class InvalidStringLengthError(MalformedProduceRequest):
    """A compact string longer than 32,767 bytes (kafka-python reads it; Kafka refuses)."""


class PartitionProduceData(NamedTuple):
    index: int
    records: Optional[memoryview]


class TopicProduceData(NamedTuple):
    name: Optional[str]                 # up to v12 (never None: the field is non-nullable)
    topic_id: Optional[uuid.UUID]       # from v13; None for the all-zero id, as kafka-python reads it
    partition_data: list[PartitionProduceData]


class ProduceRequestData(NamedTuple):
    transactional_id: Optional[str]
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


# a named tuple built without the Python frame of its generated __new__ (per partition, per request)
_new = tuple.__new__


def _past_end() -> MalformedProduceRequest:
    return MalformedProduceRequest("the body ends inside a field")


def _uvarint(data: memoryview, pos: int, five_bytes_at_most: bool = False) -> tuple[int, int]:
    """An unsigned varint as kafka-python reads it. Lengths and counts (its generated decoder):
    no limit on the length and no wrap to int32 (Kafka refuses a varint longer than 5 bytes and
    reads a 5-byte length of 2^31 or more as negative; neither is what a client writes).
    Tagged-field counts, tags and sizes: 5 bytes at most (a value past 32 bits, which
    kafka-python's zigzag round trip reads differently, runs past the body either way)."""
    value = 0
    shift = 0
    n = len(data)
    while True:
        if pos >= n:
            raise _past_end()
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if five_bytes_at_most and shift > 28:
            raise MalformedProduceRequest("varint too long")


def _skip_tagged_fields(data: memoryview, pos: int) -> int:
    """Produce declares no tagged fields: every one is unknown and skipped (nearly always
    there are none: one zero byte)."""
    if pos < len(data) and data[pos] == 0:
        return pos + 1
    count, pos = _uvarint(data, pos, True)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos, True)
        size, pos = _uvarint(data, pos, True)
        pos += size
        if pos > len(data):
            raise TruncatedTaggedFieldError("a tagged field runs past the end of the body")
    return pos


def _length(data: memoryview, pos: int, flexible: bool, classic: struct.Struct) -> tuple[int, int]:
    """A string's or records' length or an array's count: compact (unsigned varint, minus one)
    from v9, else a classic int16 / int32."""
    if flexible:
        n = len(data)
        value = data[pos] if pos < n else 0x80
        if value < 0x80:
            pos += 1
        elif pos + 1 < n and data[pos + 1] < 0x80:     # two bytes: up to 16 KiB (a small batch)
            value = (value & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            value, pos = _uvarint(data, pos)
        return value - 1, pos
    end = pos + classic.size
    if end > len(data):
        raise _past_end()
    return classic.unpack_from(data, pos)[0], end


def _string(data: memoryview, pos: int, flexible: bool) -> tuple[Optional[str], int]:
    length, pos = _length(data, pos, flexible, _I16)
    if length < 0:
        return None, pos
    if length > _MAX_STRING_LENGTH:
        # only a compact length can be this large; Kafka's generated readers refuse it
        raise InvalidStringLengthError(f"string field had invalid length {length}")
    end = pos + length
    if end > len(data):
        raise _past_end()
    return str(data[pos:end], "utf-8"), end


def _array_count(data: memoryview, pos: int, flexible: bool, field: str) -> tuple[int, int]:
    count, pos = _length(data, pos, flexible, _I32)
    if count < 0:
        if count == -1:
            raise MalformedProduceRequest(f"non-nullable field {field} was serialized as null")
        raise NegativeArrayCountError(f"non-nullable field {field} was serialized as null")
    return count, pos


def decode_produce_request(body: memoryview, version: int) -> ProduceRequestData:
    """The request body (after the header) at `version`; bytes after it are ignored, as Kafka
    does. Raises MalformedProduceRequest for a body that does not parse."""
    data = body if isinstance(body, memoryview) else memoryview(body)
    n = len(data)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    pos = 0
    transactional_id = None
    if version >= FIRST_TRANSACTIONAL_ID_VERSION:
        transactional_id, pos = _string(data, pos, flexible)
    if pos + 6 > n:
        raise _past_end()
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(data, pos)
    pos += 6
    topic_count, pos = _array_count(data, pos, flexible, "topicData")
    topics: list[TopicProduceData] = []
    for _ in range(topic_count):
        name: Optional[str] = None
        topic_id: Optional[uuid.UUID] = None
        if version >= FIRST_TOPIC_ID_VERSION:
            if pos + 16 > n:
                raise _past_end()
            raw = bytes(data[pos:pos + 16])
            pos += 16
            topic_id = None if raw == _ZERO_UUID_BYTES else uuid.UUID(bytes=raw)
        else:
            name, pos = _string(data, pos, flexible)
            if name is None:
                raise MalformedProduceRequest("non-nullable field name was serialized as null")
        partition_count, pos = _array_count(data, pos, flexible, "partitionData")
        partitions: list[PartitionProduceData] = []
        for _ in range(partition_count):
            if pos + 4 > n:
                raise _past_end()
            index = _I32.unpack_from(data, pos)[0]
            length, pos = _length(data, pos + 4, flexible, _I32)
            records: Optional[memoryview] = None
            if length >= 0:
                end = pos + length
                if end > n:
                    raise _past_end()
                records = data[pos:end]
                pos = end
            if flexible:
                pos = _skip_tagged_fields(data, pos)
            partitions.append(_new(PartitionProduceData, (index, records)))
        if flexible:
            pos = _skip_tagged_fields(data, pos)
        topics.append(_new(TopicProduceData, (name, topic_id, partitions)))
    if flexible:
        _skip_tagged_fields(data, pos)
    return _new(ProduceRequestData, (transactional_id, acks, timeout_ms, topics))
