"""The inter-broker message specs (kafkalite/protocol/schemas) through kafka-python's codec.

Two kinds of checks: exact bytes written by hand from the protocol guide's BNF (field order,
int widths, compact vs. classic strings/arrays, tagged fields), so a spec with a field in the
wrong place or version fails; and a round trip at every valid version of every message with
values drawn by hypothesis from the spec itself.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from kafkalite.protocol.inter_broker import (
    ERROR_RESPONSES, IBP_3_9_VERSIONS, AlterPartitionRequest, AlterPartitionResponse,
    ControlledShutdownRequest, ControlledShutdownResponse, LeaderAndIsrRequest,
    LeaderAndIsrResponse, StopReplicaPartition, StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse, alter_partition_error_response,
    controlled_shutdown_error_response, leader_and_isr_error_response, leader_and_isr_partition_states,
    leader_and_isr_topic_ids, request_header_version, row_type, stop_replica_error_response,
    stop_replica_partitions, update_metadata_error_response, update_metadata_partition_states)
from kafkalite.protocol.messages import messages_for
from kafkalite.server.kafka_apis import decode_body
from tests.integration.util import uvarint

# ---------------------------------------------------------------------------------------------
# hand encoders, straight from the protocol guide's primitive types


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def string(s: str) -> bytes:  # STRING: int16 length + bytes
    b = s.encode()
    return i16(len(b)) + b


def nullable_string(s: str | None) -> bytes:
    return i16(-1) if s is None else string(s)


def compact_string(s: str) -> bytes:  # COMPACT_STRING: uvarint(length + 1) + bytes
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_nullable_string(s: str | None) -> bytes:
    return b"\x00" if s is None else compact_string(s)


def array(n: int) -> bytes:  # ARRAY length prefix
    return i32(n)


def compact_array(n: int) -> bytes:  # COMPACT_ARRAY length prefix
    return uvarint(n + 1)


def int32_array(vs: list[int]) -> bytes:
    return array(len(vs)) + b"".join(i32(v) for v in vs)


def compact_int32_array(vs: list[int]) -> bytes:
    return compact_array(len(vs)) + b"".join(i32(v) for v in vs)


NO_TAGS = b"\x00"  # an empty tagged-field section: uvarint count 0

TOPIC_ID = uuid.UUID("5f2b1a3c-0d4e-4f60-8a7b-9c0d1e2f3a4b")

# ---------------------------------------------------------------------------------------------
# registration


@pytest.mark.parametrize("api_key, request_cls, response_cls, max_version, first_flexible", [
    (4, LeaderAndIsrRequest, LeaderAndIsrResponse, 7, 4),
    (5, StopReplicaRequest, StopReplicaResponse, 4, 2),
    (6, UpdateMetadataRequest, UpdateMetadataResponse, 8, 6),
    (7, ControlledShutdownRequest, ControlledShutdownResponse, 3, 3),
    (56, AlterPartitionRequest, AlterPartitionResponse, 3, 0),
])
def test_registered_with_versions(api_key: int, request_cls: Any, response_cls: Any,
                                  max_version: int, first_flexible: int) -> None:
    msgs = messages_for(api_key)
    assert msgs is not None
    assert msgs.request is request_cls and msgs.response is response_cls
    for cls in (request_cls, response_cls):
        assert cls.API_KEY == api_key
        assert cls.valid_versions == (0, max_version)
        assert [v for v in range(max_version + 1) if cls.flexible_version_q(v)] == \
            list(range(first_flexible, max_version + 1))
    assert request_cls.is_request() and not response_cls.is_request()
    assert IBP_3_9_VERSIONS[api_key] == max_version


def test_request_header_versions() -> None:
    assert request_header_version(7, 0, flexible=False) == 0   # ControlledShutdown v0: no client id
    assert request_header_version(7, 1, flexible=False) == 1
    assert request_header_version(7, 3, flexible=True) == 2
    assert request_header_version(4, 3, flexible=False) == 1
    assert request_header_version(4, 7, flexible=True) == 2


# ---------------------------------------------------------------------------------------------
# exact bytes: LeaderAndIsr


def _lai_partition_v7(cls: Any) -> Any:
    return cls(partition_index=2, controller_epoch=5, leader=1, leader_epoch=3, isr=[1, 2],
               partition_epoch=7, replicas=[1, 2, 3], adding_replicas=[3], removing_replicas=[],
               is_new=True, leader_recovery_state=1)


def test_leader_and_isr_request_v7_bytes() -> None:
    TopicState = LeaderAndIsrRequest.LeaderAndIsrTopicState
    req = LeaderAndIsrRequest(
        version=7, controller_id=1, is_k_raft_controller=False, controller_epoch=5,
        broker_epoch=0x100000002, request_type=2,
        topic_states=[TopicState(topic_name="foo", topic_id=TOPIC_ID, partition_states=[
            _lai_partition_v7(TopicState.LeaderAndIsrPartitionState)])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="h1", port=9092)])
    expected = (
        i32(1) + boolean(False) + i32(5) + i64(0x100000002) + i8(2)
        + compact_array(1) + compact_string("foo") + TOPIC_ID.bytes
        + compact_array(1)
        + i32(2) + i32(5) + i32(1) + i32(3) + compact_int32_array([1, 2]) + i32(7)
        + compact_int32_array([1, 2, 3]) + compact_int32_array([3]) + compact_int32_array([])
        + boolean(True) + i8(1) + NO_TAGS
        + NO_TAGS                                   # end of topic state
        + compact_array(1) + i32(1) + compact_string("h1") + i32(9092) + NO_TAGS
        + NO_TAGS)                                  # end of request
    assert bytes(req.encode(version=7)) == expected
    back = LeaderAndIsrRequest.decode(expected, version=7)
    assert back == req
    part = back.topic_states[0].partition_states[0]
    assert (part.partition_index, part.leader, part.isr, part.partition_epoch, part.is_new) == \
        (2, 1, [1, 2], 7, True)
    assert back.request_type == 2 and back.broker_epoch == 0x100000002


def test_leader_and_isr_request_v1_bytes_ungrouped() -> None:
    Part = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    req = LeaderAndIsrRequest(
        version=1, controller_id=3, controller_epoch=9,
        ungrouped_partition_states=[Part(topic_name="t", partition_index=0, controller_epoch=9,
                                         leader=3, leader_epoch=0, isr=[3], partition_epoch=0,
                                         replicas=[3], is_new=False)],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=3, host_name="b3", port=1)])
    expected = (
        i32(3) + i32(9)                             # no broker epoch before v2
        + array(1) + string("t") + i32(0) + i32(9) + i32(3) + i32(0) + int32_array([3]) + i32(0)
        + int32_array([3]) + boolean(False)         # no adding/removing before v3
        + array(1) + i32(3) + string("b3") + i32(1))
    assert bytes(req.encode(version=1)) == expected
    assert LeaderAndIsrRequest.decode(expected, version=1) == req


def test_leader_and_isr_response_v5_bytes() -> None:
    TopicError = LeaderAndIsrResponse.LeaderAndIsrTopicError
    resp = LeaderAndIsrResponse(version=5, error_code=0, topics=[TopicError(
        topic_id=TOPIC_ID, partition_errors=[
            TopicError.LeaderAndIsrPartitionError(partition_index=0, error_code=0),
            TopicError.LeaderAndIsrPartitionError(partition_index=1, error_code=6)])])
    expected = (i16(0) + compact_array(1) + TOPIC_ID.bytes + compact_array(2)
                + i32(0) + i16(0) + NO_TAGS + i32(1) + i16(6) + NO_TAGS + NO_TAGS + NO_TAGS)
    assert bytes(resp.encode(version=5)) == expected
    assert LeaderAndIsrResponse.decode(expected, version=5) == resp


def test_leader_and_isr_response_v4_bytes_by_topic_name() -> None:
    resp = LeaderAndIsrResponse(version=4, error_code=11, partition_errors=[
        LeaderAndIsrResponse.LeaderAndIsrPartitionError(topic_name="foo", partition_index=3,
                                                        error_code=11)])
    expected = (i16(11) + compact_array(1) + compact_string("foo") + i32(3) + i16(11) + NO_TAGS
                + NO_TAGS)
    assert bytes(resp.encode(version=4)) == expected
    assert LeaderAndIsrResponse.decode(expected, version=4) == resp


# ---------------------------------------------------------------------------------------------
# exact bytes: StopReplica


def test_stop_replica_request_v4_bytes() -> None:
    TopicState = StopReplicaRequest.StopReplicaTopicState
    req = StopReplicaRequest(
        version=4, controller_id=0, is_k_raft_controller=False, controller_epoch=2, broker_epoch=40,
        topic_states=[TopicState(topic_name="bar", partition_states=[
            TopicState.StopReplicaPartitionState(partition_index=1, leader_epoch=-2, delete_partition=True),
            TopicState.StopReplicaPartitionState(partition_index=4, leader_epoch=6, delete_partition=False)])])
    expected = (
        i32(0) + boolean(False) + i32(2) + i64(40)  # no delete_partitions after v2
        + compact_array(1) + compact_string("bar") + compact_array(2)
        + i32(1) + i32(-2) + boolean(True) + NO_TAGS
        + i32(4) + i32(6) + boolean(False) + NO_TAGS
        + NO_TAGS + NO_TAGS)
    assert bytes(req.encode(version=4)) == expected
    assert StopReplicaRequest.decode(expected, version=4) == req


def test_stop_replica_request_v0_and_v1_bytes() -> None:
    v0 = StopReplicaRequest(version=0, controller_id=1, controller_epoch=1, delete_partitions=True,
                            ungrouped_partitions=[StopReplicaRequest.StopReplicaPartitionV0(
                                topic_name="a", partition_index=5)])
    expected_v0 = i32(1) + i32(1) + boolean(True) + array(1) + string("a") + i32(5)
    assert bytes(v0.encode(version=0)) == expected_v0
    assert StopReplicaRequest.decode(expected_v0, version=0) == v0
    v1 = StopReplicaRequest(version=1, controller_id=1, controller_epoch=1, broker_epoch=-1,
                            delete_partitions=False, topics=[StopReplicaRequest.StopReplicaTopicV1(
                                name="a", partition_indexes=[0, 2])])
    expected_v1 = (i32(1) + i32(1) + i64(-1) + boolean(False) + array(1) + string("a")
                   + int32_array([0, 2]))
    assert bytes(v1.encode(version=1)) == expected_v1
    assert StopReplicaRequest.decode(expected_v1, version=1) == v1


def test_stop_replica_response_v4_bytes() -> None:
    resp = StopReplicaResponse(version=4, error_code=0, partition_errors=[
        StopReplicaResponse.StopReplicaPartitionError(topic_name="bar", partition_index=1, error_code=0)])
    expected = i16(0) + compact_array(1) + compact_string("bar") + i32(1) + i16(0) + NO_TAGS + NO_TAGS
    assert bytes(resp.encode(version=4)) == expected
    assert StopReplicaResponse.decode(expected, version=4) == resp


# ---------------------------------------------------------------------------------------------
# exact bytes: UpdateMetadata


def test_update_metadata_request_v8_bytes_with_tagged_type() -> None:
    TopicState = UpdateMetadataRequest.UpdateMetadataTopicState
    Broker = UpdateMetadataRequest.UpdateMetadataBroker
    req = UpdateMetadataRequest(
        version=8, controller_id=2, is_k_raft_controller=False, request_type=2, controller_epoch=4,
        broker_epoch=77,
        topic_states=[TopicState(topic_name="foo", topic_id=TOPIC_ID, partition_states=[
            TopicState.UpdateMetadataPartitionState(
                partition_index=0, controller_epoch=4, leader=2, leader_epoch=1, isr=[2],
                zk_version=3, replicas=[2, 1], offline_replicas=[1])])],
        live_brokers=[
            Broker(id=2, endpoints=[Broker.UpdateMetadataEndpoint(port=9092, host="h2",
                                                                 listener="PLAINTEXT",
                                                                 security_protocol=0)],
                   rack=None),
            Broker(id=1, endpoints=[], rack="r1")])
    body = (
        i32(2) + boolean(False) + i32(4) + i64(77)
        + compact_array(1) + compact_string("foo") + TOPIC_ID.bytes + compact_array(1)
        + i32(0) + i32(4) + i32(2) + i32(1) + compact_int32_array([2]) + i32(3)
        + compact_int32_array([2, 1]) + compact_int32_array([1]) + NO_TAGS
        + NO_TAGS
        + compact_array(2)
        + i32(2) + compact_array(1) + i32(9092) + compact_string("h2") + compact_string("PLAINTEXT")
        + i16(0) + NO_TAGS + compact_nullable_string(None) + NO_TAGS
        + i32(1) + compact_array(0) + compact_nullable_string("r1") + NO_TAGS)
    # Type is tag 0 of the request's own tagged fields: one field, tag 0, size 1, int8 2
    expected = body + uvarint(1) + uvarint(0) + uvarint(1) + i8(2)
    assert bytes(req.encode(version=8)) == expected
    back = UpdateMetadataRequest.decode(expected, version=8)
    assert back == req and back.request_type == 2
    # the default type (0) is not written at all
    req.request_type = 0
    assert bytes(req.encode(version=8)) == body + NO_TAGS
    assert UpdateMetadataRequest.decode(body + NO_TAGS, version=8).request_type == 0


def test_update_metadata_request_v0_and_v4_bytes() -> None:
    Broker = UpdateMetadataRequest.UpdateMetadataBroker
    Part = UpdateMetadataRequest.UpdateMetadataPartitionState
    v0 = UpdateMetadataRequest(
        version=0, controller_id=1, controller_epoch=1,
        ungrouped_partition_states=[Part(topic_name="t", partition_index=0, controller_epoch=1,
                                         leader=1, leader_epoch=0, isr=[1], zk_version=0,
                                         replicas=[1])],
        live_brokers=[Broker(id=1, v0_host="h", v0_port=9092)])
    expected_v0 = (i32(1) + i32(1) + array(1) + string("t") + i32(0) + i32(1) + i32(1) + i32(0)
                   + int32_array([1]) + i32(0) + int32_array([1])
                   + array(1) + i32(1) + string("h") + i32(9092))
    assert bytes(v0.encode(version=0)) == expected_v0
    assert UpdateMetadataRequest.decode(expected_v0, version=0) == v0
    v4 = UpdateMetadataRequest(
        version=4, controller_id=1, controller_epoch=1,
        ungrouped_partition_states=[Part(topic_name="t", partition_index=0, controller_epoch=1,
                                         leader=-1, leader_epoch=0, isr=[], zk_version=0,
                                         replicas=[1], offline_replicas=[1])],
        live_brokers=[Broker(id=1, endpoints=[Broker.UpdateMetadataEndpoint(
            port=1, host="h", listener="L", security_protocol=1)], rack=None)])
    expected_v4 = (i32(1) + i32(1) + array(1) + string("t") + i32(0) + i32(1) + i32(-1) + i32(0)
                   + int32_array([]) + i32(0) + int32_array([1]) + int32_array([1])
                   + array(1) + i32(1) + array(1) + i32(1) + string("h") + string("L") + i16(1)
                   + nullable_string(None))
    assert bytes(v4.encode(version=4)) == expected_v4
    assert UpdateMetadataRequest.decode(expected_v4, version=4) == v4


def test_update_metadata_response_bytes() -> None:
    assert bytes(UpdateMetadataResponse(version=8, error_code=11).encode(version=8)) == i16(11) + NO_TAGS
    assert bytes(UpdateMetadataResponse(version=5, error_code=0).encode(version=5)) == i16(0)
    assert UpdateMetadataResponse.decode(i16(11) + NO_TAGS, version=8).error_code == 11


# ---------------------------------------------------------------------------------------------
# exact bytes: ControlledShutdown


def test_controlled_shutdown_bytes() -> None:
    assert bytes(ControlledShutdownRequest(version=3, broker_id=4, broker_epoch=99).encode(version=3)) \
        == i32(4) + i64(99) + NO_TAGS
    assert bytes(ControlledShutdownRequest(version=2, broker_id=4, broker_epoch=99).encode(version=2)) \
        == i32(4) + i64(99)
    assert bytes(ControlledShutdownRequest(version=1, broker_id=4).encode(version=1)) == i32(4)
    Remaining = ControlledShutdownResponse.RemainingPartition
    resp = ControlledShutdownResponse(version=3, error_code=0, remaining_partitions=[
        Remaining(topic_name="foo", partition_index=0), Remaining(topic_name="foo", partition_index=2)])
    expected = (i16(0) + compact_array(2) + compact_string("foo") + i32(0) + NO_TAGS
                + compact_string("foo") + i32(2) + NO_TAGS + NO_TAGS)
    assert bytes(resp.encode(version=3)) == expected
    assert ControlledShutdownResponse.decode(expected, version=3) == resp
    expected_v1 = i16(35) + array(0)
    assert ControlledShutdownResponse.decode(expected_v1, version=1) == \
        ControlledShutdownResponse(version=1, error_code=35, remaining_partitions=[])


# ---------------------------------------------------------------------------------------------
# exact bytes: AlterPartition


def test_alter_partition_request_v3_bytes() -> None:
    Topic = AlterPartitionRequest.TopicData
    Broker = Topic.PartitionData.BrokerState
    req = AlterPartitionRequest(version=3, broker_id=1, broker_epoch=12, topics=[Topic(
        topic_id=TOPIC_ID, partitions=[Topic.PartitionData(
            partition_index=0, leader_epoch=4,
            new_isr_with_epochs=[Broker(broker_id=1, broker_epoch=12), Broker(broker_id=2, broker_epoch=-1)],
            leader_recovery_state=0, partition_epoch=8)])])
    expected = (
        i32(1) + i64(12) + compact_array(1) + TOPIC_ID.bytes + compact_array(1)
        + i32(0) + i32(4)
        + compact_array(2) + i32(1) + i64(12) + NO_TAGS + i32(2) + i64(-1) + NO_TAGS
        + i8(0) + i32(8) + NO_TAGS
        + NO_TAGS + NO_TAGS)
    assert bytes(req.encode(version=3)) == expected
    assert AlterPartitionRequest.decode(expected, version=3) == req


def test_alter_partition_request_v0_bytes() -> None:
    Topic = AlterPartitionRequest.TopicData
    req = AlterPartitionRequest(version=0, broker_id=1, broker_epoch=12, topics=[Topic(
        topic_name="foo", partitions=[Topic.PartitionData(partition_index=0, leader_epoch=4,
                                                          new_isr=[1, 2], partition_epoch=8)])])
    expected = (i32(1) + i64(12) + compact_array(1) + compact_string("foo") + compact_array(1)
                + i32(0) + i32(4) + compact_int32_array([1, 2]) + i32(8) + NO_TAGS + NO_TAGS + NO_TAGS)
    assert bytes(req.encode(version=0)) == expected
    assert AlterPartitionRequest.decode(expected, version=0) == req


def test_alter_partition_response_v3_bytes() -> None:
    Topic = AlterPartitionResponse.TopicData
    resp = AlterPartitionResponse(version=3, throttle_time_ms=0, error_code=0, topics=[Topic(
        topic_id=TOPIC_ID, partitions=[Topic.PartitionData(
            partition_index=0, error_code=0, leader_id=1, leader_epoch=4, isr=[1, 2],
            leader_recovery_state=0, partition_epoch=9)])])
    expected = (i32(0) + i16(0) + compact_array(1) + TOPIC_ID.bytes + compact_array(1)
                + i32(0) + i16(0) + i32(1) + i32(4) + compact_int32_array([1, 2]) + i8(0) + i32(9)
                + NO_TAGS + NO_TAGS + NO_TAGS)
    assert bytes(resp.encode(version=3)) == expected
    assert AlterPartitionResponse.decode(expected, version=3) == resp


def test_server_side_body_decoder_reads_them() -> None:
    """kafka_apis.decode_body (what the broker runs on a request frame) reads our classes."""
    raw = i32(4) + i64(99) + NO_TAGS
    req = decode_body(messages_for(7).request, memoryview(raw), 3)
    assert (req.broker_id, req.broker_epoch) == (4, 99)
    with pytest.raises(struct.error):  # truncated: kafka_apis closes the connection on this
        decode_body(messages_for(7).request, memoryview(raw[:-3]), 3)


def test_unknown_tagged_field_is_skipped() -> None:
    """A tag this spec does not know (a newer Kafka) is kept aside, not mistaken for a field."""
    raw = i32(4) + i64(99) + uvarint(1) + uvarint(5) + uvarint(2) + b"\xab\xcd"
    req = ControlledShutdownRequest.decode(raw, version=3)
    assert (req.broker_id, req.broker_epoch) == (4, 99)
    assert req.unknown_tags == {"_5": b"\xab\xcd"}


# ---------------------------------------------------------------------------------------------
# round trip at every version, values drawn from the spec


_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _simple_strategy(field: SimpleField, version: int) -> st.SearchStrategy[Any]:
    kind = field.type_str
    if kind in _INT_RANGES:
        bits = _INT_RANGES[kind]
        return st.integers(-(1 << bits), (1 << bits) - 1)
    if kind == "bool":
        return st.booleans()
    if kind == "uuid":  # the all-zero id reads back as "no id"
        return st.integers(1, (1 << 128) - 1).map(lambda n: uuid.UUID(int=n))
    if kind == "string":
        text = st.text(max_size=12)
        return st.none() | text if field.nullable_for_version_q(version) else text
    raise AssertionError(f"no strategy for {kind}")


def _field_strategy(field: Any, version: int) -> st.SearchStrategy[Any]:
    if isinstance(field, StructArrayField):
        items = st.lists(_struct_strategy(field.data_class, field.array_of, version), max_size=3)
    elif isinstance(field, ArrayField):
        items = st.lists(_simple_strategy(field.array_of, version), max_size=4)
    elif isinstance(field, StructField):
        return _struct_strategy(field.data_class, field, version)
    else:
        return _simple_strategy(field, version)
    return st.none() | items if field.nullable_for_version_q(version) else items


def _struct_strategy(data_class: Any, struct_field: StructField, version: int,
                     top_level: bool = False) -> st.SearchStrategy[Any]:
    fields = {f.name: _field_strategy(f, version)
              for f in struct_field._fields if f.for_version_q(version)}
    # the message itself carries its version; nested structs take it from the encoder
    extra = {"version": version} if top_level else {}
    return st.fixed_dictionaries(fields).map(lambda kw: data_class(**kw, **extra))


_ALL_CLASSES = [LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
                UpdateMetadataRequest, UpdateMetadataResponse, ControlledShutdownRequest,
                ControlledShutdownResponse, AlterPartitionRequest, AlterPartitionResponse]


@pytest.mark.parametrize("cls, version", [(c, v) for c in _ALL_CLASSES
                                          for v in range(c.max_version + 1)],
                         ids=lambda x: x.__name__ if isinstance(x, type) else str(x))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_version(cls: Any, version: int, data: st.DataObject) -> None:
    message = data.draw(_struct_strategy(cls, cls._struct, version, top_level=True))
    encoded = bytes(message.encode(version=version))
    decoded = cls.decode(encoded, version=version)
    assert decoded == message
    assert decoded.version == version
    # no version argument: kafka-python's version setter touches a header a decoded message lacks
    assert bytes(decoded.encode()) == encoded


# the per-partition lists the controller and the broker build as rows (row_type)
_ROW_CASES = [(LeaderAndIsrRequest, 7, "topic_states", "partition_states"),
              (UpdateMetadataRequest, 8, "topic_states", "partition_states"),
              (LeaderAndIsrResponse, 7, "topics", "partition_errors")]


@pytest.mark.parametrize("cls, version, outer, inner", _ROW_CASES, ids=lambda x: getattr(x, "__name__", str(x)))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rows_encode_as_the_data_containers_they_stand_for(cls: Any, version: int, outer: str, inner: str,
                                                           data: st.DataObject) -> None:
    message = data.draw(_struct_strategy(cls, cls._struct, version, top_level=True))
    expected = bytes(message.encode(version=version))
    for entry in getattr(message, outer) or ():
        items = getattr(entry, inner)
        if items:
            Row = row_type(type(items[0]), version)
            # the controller passes its tuples (ISR, replicas) as they are
            setattr(entry, inner, [Row(*(tuple(v) if isinstance(v, list) else v
                                         for v in (getattr(i, f) for f in Row._fields))) for i in items])
    assert bytes(message.encode(version=version)) == expected


def test_row_type_refuses_a_struct_with_tagged_fields() -> None:
    Broker = UpdateMetadataRequest.UpdateMetadataBroker
    assert row_type(Broker, 8)._fields == ("id", "endpoints", "rack")
    with pytest.raises(ValueError, match="tagged"):
        row_type(UpdateMetadataRequest[8], 8)


# ---------------------------------------------------------------------------------------------
# version-independent views and Kafka's getErrorResponse


def _lai_request(version: int) -> Any:
    if version < 2:
        Part = LeaderAndIsrRequest.LeaderAndIsrPartitionState
        return LeaderAndIsrRequest(version=version, controller_id=0, controller_epoch=1,
                                   ungrouped_partition_states=[
                                       Part(topic_name="a", partition_index=1),
                                       Part(topic_name="b", partition_index=0)],
                                   live_leaders=[])
    TopicState = LeaderAndIsrRequest.LeaderAndIsrTopicState
    Part = TopicState.LeaderAndIsrPartitionState
    return LeaderAndIsrRequest(version=version, controller_id=0, controller_epoch=1, topic_states=[
        TopicState(topic_name="a", topic_id=TOPIC_ID,
                   partition_states=[Part(partition_index=1), Part(partition_index=3)]),
        TopicState(topic_name="b", topic_id=None, partition_states=[Part(partition_index=0)])],
        live_leaders=[])


@pytest.mark.parametrize("version", [0, 1, 2, 4])
def test_leader_and_isr_views_and_error_response_by_name(version: int) -> None:
    request = LeaderAndIsrRequest.decode(_lai_request(version).encode(version=version), version=version)
    expected = [("a", 1), ("b", 0)] if version < 2 else [("a", 1), ("a", 3), ("b", 0)]
    assert [(t, p.partition_index) for t, p in leader_and_isr_partition_states(request, version)] == expected
    assert leader_and_isr_topic_ids(request, version) == {}
    resp = leader_and_isr_error_response(request, version, 11, None)
    assert resp.version == version and resp.error_code == 11
    assert [(e.topic_name, e.partition_index, e.error_code) for e in resp.partition_errors] == \
        [(t, p, 11) for t, p in expected]
    resp.encode(version=version)  # encodable at that version


def test_leader_and_isr_error_response_by_topic_id() -> None:
    request = LeaderAndIsrRequest.decode(_lai_request(7).encode(version=7), version=7)
    assert leader_and_isr_topic_ids(request, 7) == {"a": TOPIC_ID}  # the zero id is no id
    resp = leader_and_isr_error_response(request, 7, 77, None)
    assert (resp.version, resp.error_code) == (7, 77)
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors])
            for t in resp.topics] == [(TOPIC_ID, [(1, 77), (3, 77)]), (None, [(0, 77)])]
    expected = (i16(77) + compact_array(2)
                + TOPIC_ID.bytes + compact_array(2) + i32(1) + i16(77) + NO_TAGS + i32(3) + i16(77) + NO_TAGS
                + NO_TAGS
                + bytes(16) + compact_array(1) + i32(0) + i16(77) + NO_TAGS + NO_TAGS
                + NO_TAGS)
    assert bytes(resp.encode(version=7)) == expected


def test_update_metadata_partition_states_every_layout() -> None:
    Part = UpdateMetadataRequest.UpdateMetadataPartitionState
    v4 = UpdateMetadataRequest(version=4, controller_id=0, controller_epoch=1, ungrouped_partition_states=[
        Part(topic_name="a", partition_index=2, leader=1)], live_brokers=[])
    assert [(t, p.partition_index, p.leader) for t, p in update_metadata_partition_states(v4, 4)] == [("a", 2, 1)]
    TopicState = UpdateMetadataRequest.UpdateMetadataTopicState
    v8 = UpdateMetadataRequest(version=8, controller_id=0, controller_epoch=1, topic_states=[
        TopicState(topic_name="a", partition_states=[TopicState.UpdateMetadataPartitionState(
            partition_index=0, leader=2), TopicState.UpdateMetadataPartitionState(partition_index=1, leader=-2)])],
        live_brokers=[])
    assert [(t, p.partition_index, p.leader) for t, p in update_metadata_partition_states(v8, 8)] == \
        [("a", 0, 2), ("a", 1, -2)]
    assert bytes(update_metadata_error_response(v8, 8, 11, None).encode(version=8)) == i16(11) + NO_TAGS


def test_stop_replica_partitions_every_layout_and_error_response() -> None:
    v0 = StopReplicaRequest(version=0, controller_id=0, controller_epoch=1, delete_partitions=True,
                            ungrouped_partitions=[StopReplicaRequest.StopReplicaPartitionV0(
                                topic_name="a", partition_index=1)])
    v2 = StopReplicaRequest(version=2, controller_id=0, controller_epoch=1, broker_epoch=3, delete_partitions=False,
                            topics=[StopReplicaRequest.StopReplicaTopicV1(name="a", partition_indexes=[0, 1])])
    TopicState = StopReplicaRequest.StopReplicaTopicState
    v4 = StopReplicaRequest(version=4, controller_id=0, controller_epoch=1, broker_epoch=3, topic_states=[
        TopicState(topic_name="b", partition_states=[TopicState.StopReplicaPartitionState(
            partition_index=5, leader_epoch=-2, delete_partition=True)])])
    assert stop_replica_partitions(v0, 0) == [StopReplicaPartition("a", 1, -1, True)]
    assert stop_replica_partitions(v2, 2) == [StopReplicaPartition("a", 0, -1, False),
                                              StopReplicaPartition("a", 1, -1, False)]
    assert stop_replica_partitions(v4, 4) == [StopReplicaPartition("b", 5, -2, True)]
    resp = stop_replica_error_response(v4, 4, 11, None)
    assert bytes(resp.encode(version=4)) == \
        i16(11) + compact_array(1) + compact_string("b") + i32(5) + i16(11) + NO_TAGS + NO_TAGS
    assert [(e.topic_name, e.partition_index, e.error_code)
            for e in stop_replica_error_response(v2, 2, 11, None).partition_errors] == [("a", 0, 11), ("a", 1, 11)]


def test_controlled_shutdown_and_alter_partition_error_responses() -> None:
    cs = controlled_shutdown_error_response(ControlledShutdownRequest(version=3, broker_id=1), 3, 8, None)
    assert bytes(cs.encode(version=3)) == i16(8) + compact_array(0) + NO_TAGS
    ap = alter_partition_error_response(AlterPartitionRequest(version=3, broker_id=1, topics=[]), 3, 41, None)
    assert bytes(ap.encode(version=3)) == i32(0) + i16(41) + compact_array(0) + NO_TAGS
    assert ERROR_RESPONSES == {4: leader_and_isr_error_response, 5: stop_replica_error_response,
                               6: update_metadata_error_response, 7: controlled_shutdown_error_response,
                               56: alter_partition_error_response}
