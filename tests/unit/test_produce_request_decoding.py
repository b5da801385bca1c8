"""The hand-written ProduceRequest decoder reads what kafka-python's decoder plus the broker's
non-nullable check (kafka_apis.decode_body, the path of every other request) reads, for every
version: the same fields for any body both accept, an error for any body either refuses, except
the two places where it refuses as Kafka's own parser does and kafka-python does not (an array
count below -1; a tagged field running past the body). Records come out as slices of the frame."""
from __future__ import annotations

import struct
import uuid
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.protocol.producer.produce import ProduceRequest

from kafkalite.protocol.produce_request import (InvalidStringLengthError, MalformedProduceRequest,
                                                NegativeArrayCountError, TruncatedTaggedFieldError,
                                                decode_produce_request)
from kafkalite.server.kafka_apis import decode_body
from tests.integration.util import uvarint

VERSIONS = range(0, 14)
FLEXIBLE = 9
_int32 = st.integers(-2**31, 2**31 - 1)
# past 126 bytes a compact length takes two bytes or more
_records = st.none() | st.binary(max_size=40) | st.binary(min_size=120, max_size=400)
_partitions = st.lists(st.tuples(_int32, _records), max_size=3)
_topics = st.lists(st.tuples(st.text(max_size=12) | st.text(min_size=127, max_size=140), st.uuids() | st.just(uuid.UUID(int=0)), _partitions), max_size=3)


Plain = tuple[Optional[str], int, int, list[tuple[Optional[str], Optional[uuid.UUID], list[tuple[int, Optional[bytes]]]]]]


def reference(body: bytes, v: int) -> Plain:
    """kafka-python's reading, as decode_body does it for every other API."""
    r = decode_body(ProduceRequest, memoryview(body), v)
    return (r.transactional_id if v >= 3 else None, r.acks, r.timeout_ms,
            [(t.name if v < 13 else None, t.topic_id if v >= 13 else None,
              [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
             for t in r.topic_data])


def ours(body: bytes, v: int) -> Plain:
    r = decode_produce_request(memoryview(body), v)
    for t in r.topic_data:
        for p in t.partition_data:
            assert p.records is None or (isinstance(p.records, memoryview) and p.records.obj is body)
    return (r.transactional_id, r.acks, r.timeout_ms,
            [(t.name, t.topic_id, [(p.index, None if p.records is None else bytes(p.records))
                                   for p in t.partition_data]) for t in r.topic_data])


def encode(v: int, txn: Optional[str], acks: int, timeout: int, topics: list[Any]) -> bytes:
    P = ProduceRequest.TopicProduceData
    D = P.PartitionProduceData
    data = [P(topic_id=tid, partition_data=[D(index=i, records=r) for i, r in parts]) if v >= 13 else
            P(name=name, partition_data=[D(index=i, records=r) for i, r in parts]) for name, tid, parts in topics]
    req = ProduceRequest[v](transactional_id=txn, acks=acks, timeout_ms=timeout, topic_data=data)
    return bytes(req.encode(version=v))


def outcome(fn: Any, body: bytes, v: int) -> Any:
    try:
        return fn(body, v)
    except Exception as e:  # noqa: BLE001 - the broker closes the connection on any of them
        return e


def assert_same_reading(body: bytes, v: int) -> None:
    expected, actual = outcome(reference, body, v), outcome(ours, body, v)
    if isinstance(expected, Exception):
        # the decoder's own refusal, or the strict UTF-8 reading kafka-python does too
        assert isinstance(actual, (MalformedProduceRequest, UnicodeDecodeError)), (v, body, expected, actual)
    elif isinstance(actual, Exception):
        # stricter only where Kafka is: its parser refuses these, kafka-python reads them
        assert isinstance(actual, NegativeArrayCountError) and v < FLEXIBLE or \
            isinstance(actual, (TruncatedTaggedFieldError, InvalidStringLengthError)) and v >= FLEXIBLE, \
            (v, body, expected, actual)
    else:
        assert actual == expected, (v, body)


@settings(max_examples=300, deadline=None)
@given(v=st.sampled_from(VERSIONS), txn=st.none() | st.text(max_size=10), acks=st.integers(-2**15, 2**15 - 1),
       timeout=_int32, topics=_topics, trailing=st.binary(max_size=4))
def test_valid_bodies_read_the_same(v: int, txn: Optional[str], acks: int, timeout: int, topics: list[Any],
                                    trailing: bytes) -> None:
    body = encode(v, txn, acks, timeout, topics)
    expected = reference(body + trailing, v)
    assert ours(body + trailing, v) == expected
    assert [len(t[2]) for t in expected[3]] == [len(t[2]) for t in topics]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(v=st.sampled_from(VERSIONS), topics=_topics, txn=st.none() | st.text(max_size=4), data=st.data())
def test_damaged_bodies_are_refused_or_read_the_same(v: int, topics: list[Any], txn: Optional[str],
                                                     data: st.DataObject) -> None:
    body = bytearray(encode(v, txn, 1, 1000, topics))
    kind = data.draw(st.sampled_from(["truncate", "overwrite", "insert", "random"]))
    if kind == "truncate":
        body = body[:data.draw(st.integers(0, len(body)))]
    elif kind == "overwrite":
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, max(0, len(body) - 1)))
            chunk = data.draw(st.sampled_from([b"\xff", b"\xfe", b"\x00", b"\x80", b"\xff\xff\xff\xfe", b"\x7f\xff",
                                               b"\x81\x80\x80\x80\x10"]) | st.binary(min_size=1, max_size=4))
            body[at:at + len(chunk)] = chunk
    elif kind == "insert":
        at = data.draw(st.integers(0, len(body)))
        body[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    else:
        body = bytearray(data.draw(st.binary(max_size=40)))
    assert_same_reading(bytes(body), v)


def _tags(*fields: tuple[int, bytes]) -> bytes:
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(v)) + v for tag, v in fields)


def flexible_body(v: int, *, top: bytes = b"\x00", topic: bytes = b"\x00", partition: bytes = b"\x00",
                  records: bytes = b"batch") -> bytes:
    """A v9+ body with one topic and one partition and the given tagged-field sections."""
    key = uuid.UUID(int=7).bytes if v >= 13 else uvarint(len(b"t") + 1) + b"t"
    return (b"\x00" + struct.pack(">hi", 1, 1000) + uvarint(2) + key + uvarint(2)
            + struct.pack(">i", 3) + uvarint(len(records) + 1) + records + partition + topic + top)


@pytest.mark.parametrize("v", range(FLEXIBLE, 14))
def test_unknown_tagged_fields_are_skipped_at_every_level(v: int) -> None:
    tags = _tags((0, b"abc"), (7, b""), (300, b"\x01" * 200))
    body = flexible_body(v, top=tags, topic=tags, partition=tags)
    assert ours(body, v) == reference(body, v)
    read = decode_produce_request(memoryview(body), v)
    assert [(t.name, t.topic_id, [(p.index, bytes(p.records)) for p in t.partition_data]) for t in read.topic_data] \
        == [("t" if v < 13 else None, None if v < 13 else uuid.UUID(int=7), [(3, b"batch")])]


@pytest.mark.parametrize("v", range(FLEXIBLE, 14))
def test_a_tagged_field_past_the_body_is_refused(v: int) -> None:
    """kafka-python reads the field short and stops at the end of the body; Kafka runs out of
    buffer and closes the connection."""
    body = flexible_body(v, top=uvarint(1) + uvarint(5) + uvarint(10) + b"short")
    assert isinstance(outcome(reference, body, v), tuple)
    with pytest.raises(TruncatedTaggedFieldError):
        decode_produce_request(memoryview(body), v)


@pytest.mark.parametrize("v", range(0, FLEXIBLE))
@pytest.mark.parametrize("where", ["topics", "partitions"])
def test_array_counts_below_minus_one_are_refused(v: int, where: str) -> None:
    """kafka-python reads a count of -2 as an empty array; Kafka's parser throws "non-nullable
    field ... was serialized as null" for any negative count of these arrays."""
    txn = struct.pack(">h", -1) if v >= 3 else b""
    head = txn + struct.pack(">hi", 1, 1000)
    body = head + struct.pack(">i", -2) if where == "topics" else \
        head + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -2)
    assert isinstance(outcome(reference, body, v), tuple)
    with pytest.raises(NegativeArrayCountError, match="was serialized as null"):
        decode_produce_request(memoryview(body), v)


@pytest.mark.parametrize("v", VERSIONS)
def test_nulls_where_the_schema_allows_none_are_refused(v: int) -> None:
    flexible = v >= FLEXIBLE
    null_array = b"\x00" if flexible else struct.pack(">i", -1)
    txn = (b"\x00" if flexible else struct.pack(">h", -1)) if v >= 3 else b""
    head = txn + struct.pack(">hi", 1, 1000)
    with pytest.raises(MalformedProduceRequest, match="topicData was serialized as null"):
        decode_produce_request(memoryview(head + null_array), v)
    if v < 13:
        null_name = b"\x00" if flexible else struct.pack(">h", -1)
        count = uvarint(2) if flexible else struct.pack(">i", 1)
        with pytest.raises(MalformedProduceRequest, match="name was serialized as null"):
            decode_produce_request(memoryview(head + count + null_name + null_array), v)


def test_null_records_and_the_zero_topic_id_read_as_kafka_python_reads_them() -> None:
    body = encode(13, "tx", -1, 5, [("", uuid.UUID(int=0), [(2, None)])])
    assert ours(body, 13) == reference(body, 13) == ("tx", -1, 5, [(None, None, [(2, None)])])
    body = encode(7, None, 0, 5, [("t", uuid.UUID(int=0), [(2, None), (4, b"")])])
    assert ours(body, 7) == reference(body, 7) == (None, 0, 5, [("t", None, [(2, None), (4, b"")])])


@pytest.mark.parametrize("v", range(FLEXIBLE, 14))
def test_a_compact_string_longer_than_an_int16_length_is_refused(v: int) -> None:
    """Kafka's generated readers refuse a string of more than 32,767 bytes ("string field
    transactionalId had invalid length"); a classic length cannot say more."""
    long_id = "x" * 0x8000
    body = encode(v, long_id, 1, 1000, [])
    assert reference(body, v)[0] == long_id
    with pytest.raises(InvalidStringLengthError, match="invalid length 32768"):
        decode_produce_request(memoryview(body), v)
    body = encode(v, "x" * 0x7FFF, 1, 1000, [])
    assert ours(body, v) == reference(body, v)


@pytest.mark.parametrize("v", range(FLEXIBLE, 14))
def test_tagged_field_varints_of_five_bytes(v: int) -> None:
    """Tagged-field counts, tags and sizes are read as kafka-python reads them (5 bytes at
    most): a 5-byte tag is skipped, a 6-byte one refused by both."""
    five = b"\x81\x80\x80\x80\x01"
    body = flexible_body(v, partition=uvarint(1) + five + uvarint(2) + b"ab")
    assert ours(body, v) == reference(body, v)
    body = flexible_body(v, partition=uvarint(1) + b"\x81\x80\x80\x80\x80\x01" + uvarint(0))
    assert isinstance(outcome(reference, body, v), Exception)
    with pytest.raises(MalformedProduceRequest, match="varint too long"):
        decode_produce_request(memoryview(body), v)
