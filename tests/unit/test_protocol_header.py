"""Request header decoding against headers encoded by kafka-python 3 and against the results of
Kafka's own RequestHeader.parse (kafka-clients 4.3.0) on hand-built bytes."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader as KpRequestHeader
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kafkalite.protocol.header import (MalformedHeaderError, RequestHeader, decode_request_header,
                                       peek_api, read_unsigned_varint)


def _metadata(v: int) -> MetadataRequest:
    kw: dict = {"topics": None}
    if v >= 4:
        kw["allow_auto_topic_creation"] = True
    if 8 <= v <= 10:
        kw["include_cluster_authorized_operations"] = False
    if v >= 8:
        kw["include_topic_authorized_operations"] = False
    return MetadataRequest[v](**kw)


def _api_versions(v: int) -> ApiVersionsRequest:
    if v >= 3:
        return ApiVersionsRequest[v](client_software_name="kafkalite-test", client_software_version="1.0")
    return ApiVersionsRequest[v]()


def _produce(v: int) -> ProduceRequest:
    return ProduceRequest[v](transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[])


def _fetch(v: int) -> FetchRequest:
    return FetchRequest[v](replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                           forgotten_topics_data=[], rack_id="")


def _list_offsets(v: int) -> ListOffsetsRequest:
    return ListOffsetsRequest[v](replica_id=-1, isolation_level=0, topics=[])


# (builder, version, flexible per Kafka's message spec)
CASES = [
    (_metadata, 1, False), (_metadata, 8, False), (_metadata, 9, True), (_metadata, 12, True),
    (_api_versions, 0, False), (_api_versions, 2, False), (_api_versions, 3, True),
    (_produce, 3, False), (_produce, 8, False), (_produce, 9, True),
    (_fetch, 4, False), (_fetch, 11, False), (_fetch, 12, True),
    (_list_offsets, 1, False), (_list_offsets, 6, True),
]


@pytest.mark.parametrize("client_id", ["kafkalite-test", "", "клиент-é-\u4e2d"])
@pytest.mark.parametrize("build,version,flexible", CASES)
def test_decodes_kafka_python_headers(build, version: int, flexible: bool, client_id: str) -> None:
    req = build(version)
    assert type(req).flexible_version_q(version) is flexible
    req.with_header(correlation_id=123456, client_id=client_id)
    frame = req.encode(header=True)
    header, pos = decode_request_header(frame, flexible)
    assert header == RequestHeader(req.API_KEY, version, 123456, client_id)
    expected_header = KpRequestHeader(request_api_key=req.API_KEY, request_api_version=version,
                                      correlation_id=123456, client_id=client_id).encode(flexible=flexible)
    assert pos == len(expected_header)
    assert frame[:pos] == expected_header
    # the body starts exactly at pos: kafka-python decodes it back to the same request
    assert type(req).decode(frame[pos:], version=version) == req
    assert peek_api(frame) == (req.API_KEY, version, 123456)


@pytest.mark.parametrize("flexible", [False, True])
def test_null_client_id_reads_as_empty_string_like_kafka(flexible: bool) -> None:
    version = 9 if flexible else 1
    req = _metadata(version)
    req.with_header(correlation_id=7, client_id=None)
    frame = req.encode(header=True)
    assert frame[8:10] == b"\xff\xff"
    header, pos = decode_request_header(frame, flexible)
    # RequestHeader.parse: "we treat a null client ID as equivalent to an empty client ID"
    assert header == RequestHeader(3, version, 7, "")
    assert pos == (11 if flexible else 10)


def test_decodes_from_memoryview_with_body_offset() -> None:
    req = _metadata(12)
    req.with_header(correlation_id=-5, client_id="mv")
    frame = memoryview(req.encode(header=True))
    header, pos = decode_request_header(frame, True)
    assert header == RequestHeader(3, 12, -5, "mv")
    assert MetadataRequest.decode(frame[pos:], version=12) == req


FIXED = bytes.fromhex("0003000100000007")   # Metadata v1, correlation id 7
FIXED_V2 = bytes.fromhex("0003000900000007")  # Metadata v9 (header v2), correlation id 7


# Each row was checked against org.apache.kafka.common.requests.RequestHeader.parse (4.3.0):
# hex after the fixed part, flexible, expected (client_id, body position) or None for an error.
KAFKA_ORACLE = [
    ("00026162", False, ("ab", 12)),
    ("ffff", False, ("", 10)),
    ("fffe", False, ("", 10)),                    # any negative length is null
    ("00056162", False, None),                    # client id runs past the frame
    ("0002ff61", False, ("\ufffda", 12)),         # malformed UTF-8 is replaced, not refused
    ("0002616200", True, ("ab", 13)),
    ("00026162" "01" "05" "02" "aabb", True, ("ab", 17)),
    ("00026162" "02" "05" "01" "aa" "01" "00", True, ("ab", 18)),  # tags out of order: accepted
    ("00026162" "02" "05" "01" "aa" "05" "00", True, ("ab", 18)),  # duplicate tag: accepted
    ("00026162", True, None),                     # no tagged-field section
    ("00026162" "01" "05" "03" "aabb", True, None),  # tagged field runs past the frame
    ("00026162" "ffffffffff01", True, None),      # varint longer than 5 bytes
    ("00026162" "8080808000", True, ("ab", 17)),  # 5-byte encoding of 0
    ("00026162" "ffffffff0f", True, ("ab", 17)),  # count wraps to -1: no fields
    ("00026162" "01" "00" "ffffffff07", True, None),  # size 2^31-1 past the frame
    ("00026162" "01" "00" "ffffffff0f", True, None),  # size -1
]


@pytest.mark.parametrize("tail,flexible,expected", KAFKA_ORACLE)
def test_matches_kafka_request_header_parse(tail: str, flexible: bool, expected) -> None:
    frame = (FIXED_V2 if flexible else FIXED) + bytes.fromhex(tail)
    if expected is None:
        with pytest.raises(MalformedHeaderError):
            decode_request_header(frame, flexible)
        return
    header, pos = decode_request_header(frame, flexible)
    assert (header.client_id, pos) == expected
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 9 if flexible else 1, 7)


def test_tagged_fields_are_skipped_and_body_follows() -> None:
    body = b"BODY"
    tags = bytes([2, 0, 3]) + b"xyz" + bytes([200 & 0x7F | 0x80, 1, 1]) + b"q"  # tag 0 (3 bytes), tag 200 (1 byte)
    frame = FIXED_V2 + b"\x00\x01c" + tags + body
    header, pos = decode_request_header(frame, True)
    assert header == RequestHeader(3, 9, 7, "c")
    assert frame[pos:] == body


def test_every_truncation_of_a_valid_header_is_malformed() -> None:
    req = _metadata(12)
    req.with_header(correlation_id=99, client_id="truncate-me")
    header_len = len(KpRequestHeader(request_api_key=3, request_api_version=12, correlation_id=99,
                                     client_id="truncate-me").encode(flexible=True))
    frame = req.encode(header=True)
    for n in range(header_len):
        with pytest.raises(MalformedHeaderError):
            decode_request_header(frame[:n], True)
    assert decode_request_header(frame[:header_len], True)[1] == header_len


def test_peek_api() -> None:
    assert peek_api(bytes.fromhex("0012000380000000")) == (18, 3, -2**31)
    assert peek_api(bytes.fromhex("ffffffff00000001ffff")) == (-1, -1, 1)
    for n in range(8):
        with pytest.raises(MalformedHeaderError):
            peek_api(bytes(n))


@pytest.mark.parametrize("encoded,value", [
    ("00", 0), ("7f", 127), ("8001", 128), ("ac02", 300), ("ffff03", 65535),
    ("ffffffff07", 2**31 - 1), ("8080808008", -2**31), ("ffffffff0f", -1), ("ffffffff7f", -1),
])
def test_read_unsigned_varint_like_java(encoded: str, value: int) -> None:
    buf = b"\xee" + bytes.fromhex(encoded) + b"\xee"
    assert read_unsigned_varint(buf, 1) == (value, 1 + len(encoded) // 2)


@pytest.mark.parametrize("encoded", ["", "80", "ffff", "ffffffff", "ffffffffff", "ffffffffff00"])
def test_read_unsigned_varint_rejects_truncated_and_overlong(encoded: str) -> None:
    with pytest.raises(MalformedHeaderError):
        read_unsigned_varint(bytes.fromhex(encoded), 0)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64), st.booleans())
def test_random_bytes_raise_only_malformed_header_error(data: bytes, flexible: bool) -> None:
    try:
        header, pos = decode_request_header(data, flexible)
    except MalformedHeaderError:
        return
    assert 10 <= pos <= len(data)
    assert isinstance(header.client_id, str)
    assert header.api_key == struct.unpack_from(">h", data)[0]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=10, max_size=40), st.booleans())
def test_random_bytes_after_a_valid_prefix(tail: bytes, flexible: bool) -> None:
    frame = FIXED_V2 + tail
    try:
        _, pos = decode_request_header(memoryview(frame), flexible)
    except MalformedHeaderError:
        return
    assert 10 <= pos <= len(frame)


@settings(max_examples=200, deadline=None)
@given(api_key=st.integers(-2**15, 2**15 - 1), version=st.integers(-2**15, 2**15 - 1),
       correlation_id=st.integers(-2**31, 2**31 - 1), client_id=st.none() | st.text(max_size=30),
       flexible=st.booleans(), body=st.binary(max_size=16))
def test_roundtrip_against_kafka_python_encoder(api_key: int, version: int, correlation_id: int,
                                                client_id: str | None, flexible: bool, body: bytes) -> None:
    encoded = KpRequestHeader(request_api_key=api_key, request_api_version=version,
                              correlation_id=correlation_id, client_id=client_id).encode(flexible=flexible)
    header, pos = decode_request_header(encoded + body, flexible)
    if (api_key, version) == (7, 0):
        # ControlledShutdown v0 is read with header v0 (no client id), as Kafka reads it
        assert (header, pos) == (RequestHeader(7, 0, correlation_id, ""), 8)
        return
    assert header == RequestHeader(api_key, version, correlation_id, client_id or "")
    assert pos == len(encoded)
