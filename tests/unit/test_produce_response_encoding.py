"""The hand-written ProduceResponse encoder writes exactly kafka-python's bytes, for every version
and every shape a Produce answer takes: several topics and partitions, errors with and without
messages, per-record errors, LogAppendTime, non-ASCII names and messages, empty topics, and from
v10 the current leaders and their endpoints (KIP-951), left out when unknown as Kafka does."""
from __future__ import annotations

import uuid
from typing import Any, Sequence

from hypothesis import given, settings, strategies as st
from kafka.protocol.producer.produce import ProduceResponse

from kafkalite.protocol.produce_response import encode_produce_response
from kafkalite.server.encoded_response import EncodedResponse

VERSIONS = range(0, 14)

_int32 = st.integers(-2**31, 2**31 - 1)
_int64 = st.integers(-2**63, 2**63 - 1)
_text = st.text(max_size=40)
_message = st.none() | _text
_leader = st.none() | st.just((-1, -1)) | st.tuples(_int32, _int32)
_partition = st.tuples(_int32, st.integers(-1, 130), _int64, _int64, _int64,
                       st.lists(st.tuples(_int32, _message), max_size=3), _message, _leader)
_topics = st.lists(st.tuples(_text, st.uuids(), st.lists(_partition, max_size=4)), max_size=4)
_endpoints = st.lists(st.tuples(_int32, _text, _int32, _message), max_size=3)


def kafka_python_frame(v: int, topics: list[tuple[str, uuid.UUID, list[Any]]], throttle: int,
                       correlation_id: int, endpoints: Sequence[Any] = ()) -> bytes:
    R = ProduceResponse[v]
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    out = []
    for name, tid, parts in topics:
        ps = []
        for i, e, b, t, s, re, m, leader in parts:
            tagged = {}
            if v >= 10 and leader is not None and leader != (-1, -1):    # Kafka writes no default leader
                tagged["current_leader"] = P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            ps.append(P(index=i, error_code=e, base_offset=b, log_append_time_ms=t, log_start_offset=s,
                        record_errors=[T.PartitionProduceResponse.BatchIndexAndErrorMessage(
                            batch_index=bi, batch_index_error_message=bm) for bi, bm in re],
                        error_message=m, **tagged))
        out.append(T(topic_id=tid, partition_responses=ps) if v >= 13 else T(name=name, partition_responses=ps))
    tagged = {}
    if v >= 10 and endpoints:
        tagged["node_endpoints"] = [R.NodeEndpoint(node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints]
    resp = R(responses=out, throttle_time_ms=throttle, **tagged)
    resp.API_VERSION = v
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def ours(v: int, topics: list[tuple[str, uuid.UUID, list[Any]]], throttle: int, correlation_id: int,
         endpoints: Sequence[Any] = ()) -> bytes:
    body, flexible = encode_produce_response(v, [(tid if v >= 13 else name, parts) for name, tid, parts in topics],
                                             throttle, endpoints)
    return EncodedResponse(body, flexible).frame(correlation_id)


@settings(max_examples=150, deadline=None)
@given(v=st.sampled_from(VERSIONS), topics=_topics, throttle=_int32, correlation_id=_int32, endpoints=_endpoints)
def test_same_bytes_as_kafka_python(v: int, topics: list[Any], throttle: int, correlation_id: int,
                                    endpoints: list[Any]) -> None:
    assert ours(v, topics, throttle, correlation_id, endpoints) == \
        kafka_python_frame(v, topics, throttle, correlation_id, endpoints)


def test_every_version_with_a_typical_answer() -> None:
    """One success, one per-record failure and one error without message, in two topics."""
    ok = (0, 0, 1234, -1, 0, [], None, None)
    bad: tuple[Any, ...] = (
        1, 87, -1, -1, 0, [(0, "Compacted topic cannot accept message without key"), (2, None)],
        "One or more records have been rejected", None)
    gone = (7, 3, -1, -1, -1, [], None, None)
    moved = (8, 6, -1, -1, -1, [], None, (2, 14))
    topics = [("orders", uuid.UUID(int=5), [ok, bad]), ("ümlaut", uuid.UUID(int=9), [gone, moved])]
    endpoints = [(2, "127.0.0.1", 19093, None)]
    for v in VERSIONS:
        expected = kafka_python_frame(v, topics, 0, 41, endpoints)
        assert ours(v, topics, 0, 41, endpoints) == expected, v
        # and kafka-python reads back what was written (a version where fields are cut)
        decoded = ProduceResponse[v].decode(expected[4:], header=True)
        assert [p.index for t in decoded.responses for p in t.partition_responses] == [0, 1, 7, 8]
        if v >= 10:
            assert decoded.responses[1].partition_responses[1].current_leader.leader_id == 2
            assert [(e.node_id, e.host, e.port) for e in decoded.node_endpoints] == [(2, "127.0.0.1", 19093)]
