"""The hand-written Metadata topic entry is kafka-python's bytes for every version: a response
with the entry spliced into an empty answer's envelope (as the Metadata handler splices it) equals
kafka-python's encoding of the response holding that topic — partitions with and without leaders,
epochs, offline replicas, empty lists, errors, internal topics, authorized operations or none."""
from __future__ import annotations

import uuid
from typing import Any, Optional

from hypothesis import given, settings, strategies as st
from kafka.protocol.metadata.metadata import MetadataResponse

from kafkalite.protocol.metadata_response import authorized_operations_bits, encode_metadata_topic
from kafkalite.server.handlers.metadata import TOPIC_AUTHORIZED_OPERATIONS, array_count, topics_array_tail

VERSIONS = range(0, 14)
_int32 = st.integers(-2**31, 2**31 - 1)
_ids = st.lists(st.integers(-1, 2**31 - 1), max_size=5)
_partition = st.tuples(st.integers(-1, 120), _int32, _int32, _int32, _ids, _ids, _ids)
_ops = st.none() | st.just(TOPIC_AUTHORIZED_OPERATIONS) | st.frozensets(st.integers(0, 31), max_size=6)


def body(v: int, topics: list) -> bytes:
    R = MetadataResponse[v]
    kwargs: dict[str, Any] = dict(throttle_time_ms=0, cluster_id="c-1", controller_id=1, topics=topics, error_code=0,
                                  brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=9, rack=None)])
    if 8 <= v <= 10:
        kwargs["authorized_operations"] = None
    resp = R(**kwargs)
    resp.API_VERSION = v
    return bytes(resp.encode(header=False, framed=False))


def kafka_python_topic(v: int, error: int, name: str, tid: uuid.UUID, internal: bool, parts: list,
                       ops: Optional[frozenset]) -> Any:
    T = MetadataResponse[v].MetadataResponseTopic
    P = T.MetadataResponsePartition
    return T(error_code=error, name=name, topic_id=tid, is_internal=internal, authorized_operations=ops,
             partitions=[P(error_code=e, partition_index=i, leader_id=leader, leader_epoch=epoch,
                           replica_nodes=list(r), isr_nodes=list(isr), offline_replicas=list(off))
                         for e, i, leader, epoch, r, isr, off in parts])


@settings(max_examples=200, deadline=None)
@given(v=st.sampled_from(VERSIONS), error=st.integers(-1, 120), name=st.text(min_size=1, max_size=30),
       tid=st.uuids(), internal=st.booleans(), parts=st.lists(_partition, max_size=6), ops=_ops)
def test_spliced_entry_is_kafka_pythons_encoding(v: int, error: int, name: str, tid: uuid.UUID, internal: bool,
                                                 parts: list, ops: Optional[frozenset]) -> None:
    expected = body(v, [kafka_python_topic(v, error, name, tid, internal, parts, ops)])
    flexible = v >= 9
    envelope = body(v, [])
    tail = topics_array_tail(v)
    head = len(envelope) - tail - len(array_count(0, flexible))
    entry = encode_metadata_topic(v, error, name, tid, internal, parts, ops)
    assert envelope[:head] + array_count(1, flexible) + entry + envelope[len(envelope) - tail:] == expected


def test_authorized_operations_bits() -> None:
    assert authorized_operations_bits(None) == -2**31
    assert authorized_operations_bits(TOPIC_AUTHORIZED_OPERATIONS) == sum(1 << b for b in TOPIC_AUTHORIZED_OPERATIONS)
    assert authorized_operations_bits({31}) == -2**31      # the sign bit, as an int32
