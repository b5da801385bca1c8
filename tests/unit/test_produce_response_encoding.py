"""The hand-written ProduceResponse encoder writes exactly kafka-python's bytes, for every version
and every shape a Produce answer takes: several topics and partitions, errors with and without
messages, per-record errors, LogAppendTime, non-ASCII names and messages, empty topics."""
from __future__ import annotations

import uuid
from typing import Any, Optional

from hypothesis import given, settings, strategies as st
from kafka.protocol.producer.produce import ProduceResponse

from kafkalite.protocol.produce_response import encode_produce_response
from kafkalite.server.encoded_response import EncodedResponse

VERSIONS = range(0, 14)

_int32 = st.integers(-2**31, 2**31 - 1)
_int64 = st.integers(-2**63, 2**63 - 1)
_text = st.text(max_size=40)
_message = st.none() | _text
_partition = st.tuples(_int32, st.integers(-1, 130), _int64, _int64, _int64,
                       st.lists(st.tuples(_int32, _message), max_size=3), _message)
_topics = st.lists(st.tuples(_text, st.uuids(), st.lists(_partition, max_size=4)), max_size=4)


def kafka_python_frame(v: int, topics: list[tuple[str, uuid.UUID, list[Any]]], throttle: int,
                       correlation_id: int) -> bytes:
    R = ProduceResponse[v]
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    out = []
    for name, tid, parts in topics:
        ps = [P(index=i, error_code=e, base_offset=b, log_append_time_ms=t, log_start_offset=s,
                record_errors=[T.PartitionProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=bi, batch_index_error_message=bm) for bi, bm in re],
                error_message=m) for i, e, b, t, s, re, m in parts]
        out.append(T(topic_id=tid, partition_responses=ps) if v >= 13 else T(name=name, partition_responses=ps))
    resp = R(responses=out, throttle_time_ms=throttle)
    resp.API_VERSION = v
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def ours(v: int, topics: list[tuple[str, uuid.UUID, list[Any]]], throttle: int, correlation_id: int) -> bytes:
    body, flexible = encode_produce_response(v, [(tid if v >= 13 else name, parts) for name, tid, parts in topics],
                                             throttle)
    return EncodedResponse(body, flexible).frame(correlation_id)


@settings(max_examples=60, deadline=None)
@given(v=st.sampled_from(VERSIONS), topics=_topics, throttle=_int32, correlation_id=_int32)
def test_same_bytes_as_kafka_python(v: int, topics: list[Any], throttle: int, correlation_id: int) -> None:
    assert ours(v, topics, throttle, correlation_id) == kafka_python_frame(v, topics, throttle, correlation_id)


def test_every_version_with_a_typical_answer() -> None:
    """One success, one per-record failure and one error without message, in two topics."""
    ok = (0, 0, 1234, -1, 0, [], None)
    bad: tuple[int, int, int, int, int, list[tuple[int, Optional[str]]], Optional[str]] = (
        1, 87, -1, -1, 0, [(0, "Compacted topic cannot accept message without key"), (2, None)],
        "One or more records have been rejected")
    gone = (7, 3, -1, -1, -1, [], None)
    topics = [("orders", uuid.UUID(int=5), [ok, bad]), ("ümlaut", uuid.UUID(int=9), [gone])]
    for v in VERSIONS:
        expected = kafka_python_frame(v, topics, 0, 41)
        assert ours(v, topics, 0, 41) == expected, v
        # and kafka-python reads back what was written (a version where fields are cut)
        decoded = ProduceResponse[v].decode(expected[4:], header=True)
        assert [p.index for t in decoded.responses for p in t.partition_responses] == [0, 1, 7]
