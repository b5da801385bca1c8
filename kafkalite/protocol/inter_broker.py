"""The inter-broker APIs (controller <-> broker) that kafka-python does not ship, as kafka-python
ApiMessage classes generated from our JSON specs in :mod:`kafkalite.protocol.schemas`.

Field attributes are the spec names in snake_case, as kafka-python derives them (``controller_epoch``,
``topic_states``, ``is_k_raft_controller`` ...), with one exception: Kafka's ``Type`` field of
LeaderAndIsr (v5+) and UpdateMetadata (v8+, tagged) is ``request_type`` here, because
kafka-python makes every field a slot and ``type`` is the class's "request"/"response" property.

Nested struct classes hang off their parent by the spec's struct type name, e.g.
``LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState`` (v2+) and
``LeaderAndIsrRequest.LeaderAndIsrPartitionState`` (the v0-v1 ungrouped list). Versions Kafka 3.9
brokers (IBP 3.9) speak between themselves: LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8,
ControlledShutdown v3, AlterPartition v3 (see :data:`IBP_3_9_VERSIONS`).
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from functools import cache
from typing import Any, Optional
from uuid import UUID

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "kafkalite.protocol.schemas"


class LeaderAndIsrRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class LeaderAndIsrResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class StopReplicaRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class StopReplicaResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class UpdateMetadataRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class UpdateMetadataResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ControlledShutdownRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ControlledShutdownResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class AlterPartitionRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class AlterPartitionResponse(ApiMessage, load_json=_SCHEMAS):
    pass


# api key -> the version a Kafka 3.9 broker (inter.broker.protocol.version 3.9) sends
IBP_3_9_VERSIONS: dict[int, int] = {
    LeaderAndIsrRequest.API_KEY: 7,
    StopReplicaRequest.API_KEY: 4,
    UpdateMetadataRequest.API_KEY: 8,
    ControlledShutdownRequest.API_KEY: 3,
    AlterPartitionRequest.API_KEY: 3,
}


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """Kafka's request header version: 2 for flexible versions, else 1, except ControlledShutdown
    v0, whose header (v0) has no client id."""
    if api_key == ControlledShutdownRequest.API_KEY and api_version == 0:
        return 0
    return 2 if flexible else 1


@cache
def row_type(container: type, version: int) -> type:
    """A named tuple of a nested struct's fields at `version`, in wire order, to build the
    thousands of per-partition entries of a big request or response with: kafka-python's compiled
    encoder writes a list of tuples positionally (same bytes as its DataContainers: a unit test
    compares them), and a tuple is built ~20x faster than a DataContainer. Only for structs
    without tagged fields (a tuple carries none). One class per (struct, version)."""
    struct = container._struct
    if struct.tagged_fields(version)._names:
        raise ValueError(f"{container.__name__} v{version} has tagged fields")
    return namedtuple(f"{container.__name__}Row", [f.name for f in struct.untagged_fields(version)])


# -- version-independent views of the requests (Kafka's partitionStates()/topicStates()) ---------


def leader_and_isr_partition_states(request: Any, version: int) -> list[tuple[str, Any]]:
    """(topic name, partition state) for every partition, whether the version lists them
    ungrouped (v0-v1) or by topic (v2+); each state is that version's LeaderAndIsrPartitionState."""
    if version < 2:
        return [(p.topic_name, p) for p in request.ungrouped_partition_states]
    return [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]


def leader_and_isr_topic_ids(request: Any, version: int) -> dict[str, UUID]:
    """Topic name -> topic id as the request carries them (v5+; none before, nor zero ids)."""
    if version < 5:
        return {}
    return {t.topic_name: t.topic_id for t in request.topic_states if t.topic_id is not None}


def update_metadata_partition_states(request: Any, version: int) -> list[tuple[str, Any]]:
    """(topic name, partition state) for every partition, v0-v4 ungrouped or v5+ by topic."""
    if version < 5:
        return [(p.topic_name, p) for p in request.ungrouped_partition_states]
    return [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]


@dataclass(frozen=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int       # -1 before v3 (no epoch check); -2 marks a topic being deleted
    delete_partition: bool


def stop_replica_partitions(request: Any, version: int) -> list[StopReplicaPartition]:
    """Every partition of a StopReplica request at any version: v0 ungrouped, v1-v2 by topic
    with one delete flag for all, v3+ per-partition leader epoch and delete flag. Before v1 Kafka
    groups the ungrouped partitions in a hash map (no defined order); this keeps request order."""
    if version < 1:
        return [StopReplicaPartition(p.topic_name, p.partition_index, -1, request.delete_partitions)
                for p in request.ungrouped_partitions]
    if version < 3:
        return [StopReplicaPartition(t.name, i, -1, request.delete_partitions)
                for t in request.topics for i in t.partition_indexes]
    return [StopReplicaPartition(t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
            for t in request.topic_states for p in t.partition_states]


# -- Kafka's request.getErrorResponse(e) for each, as (request, version, code, message) -> response
# (the signature of kafkalite.server.error_responses' builders; none of these carries a message)


def leader_and_isr_error_response(request: Any, version: int, error_code: int,
                                  message: Optional[str] = None) -> LeaderAndIsrResponse:
    """The error at the top and for every partition: by topic name up to v4, by topic id from v5."""
    Resp = LeaderAndIsrResponse
    if version < 5:
        return Resp(version=version, error_code=error_code, partition_errors=[
            Resp.LeaderAndIsrPartitionError(topic_name=topic, partition_index=p.partition_index,
                                            error_code=error_code)
            for topic, p in leader_and_isr_partition_states(request, version)])
    TopicError = Resp.LeaderAndIsrTopicError
    return Resp(version=version, error_code=error_code, topics=[
        TopicError(topic_id=t.topic_id, partition_errors=[
            TopicError.LeaderAndIsrPartitionError(partition_index=p.partition_index,
                                                  error_code=error_code)
            for p in t.partition_states])
        for t in request.topic_states])


def stop_replica_error_response(request: Any, version: int, error_code: int,
                                message: Optional[str] = None) -> StopReplicaResponse:
    """The error at the top and for every partition of the request."""
    Resp = StopReplicaResponse
    return Resp(version=version, error_code=error_code, partition_errors=[
        Resp.StopReplicaPartitionError(topic_name=p.topic, partition_index=p.partition,
                                       error_code=error_code)
        for p in stop_replica_partitions(request, version)])


def update_metadata_error_response(request: Any, version: int, error_code: int,
                                   message: Optional[str] = None) -> UpdateMetadataResponse:
    return UpdateMetadataResponse(version=version, error_code=error_code)


def controlled_shutdown_error_response(request: Any, version: int, error_code: int,
                                       message: Optional[str] = None) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(version=version, error_code=error_code, remaining_partitions=[])


def alter_partition_error_response(request: Any, version: int, error_code: int,
                                   message: Optional[str] = None) -> AlterPartitionResponse:
    """Top-level error only, no topics; throttle time 0."""
    return AlterPartitionResponse(version=version, throttle_time_ms=0, error_code=error_code,
                                  topics=[])


ERROR_RESPONSES = {
    LeaderAndIsrRequest.API_KEY: leader_and_isr_error_response,
    StopReplicaRequest.API_KEY: stop_replica_error_response,
    UpdateMetadataRequest.API_KEY: update_metadata_error_response,
    ControlledShutdownRequest.API_KEY: controlled_shutdown_error_response,
    AlterPartitionRequest.API_KEY: alter_partition_error_response,
}


__all__ = [
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "StopReplicaRequest", "StopReplicaResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
    "ControlledShutdownRequest", "ControlledShutdownResponse",
    "AlterPartitionRequest", "AlterPartitionResponse",
    "IBP_3_9_VERSIONS", "request_header_version", "row_type",
    "leader_and_isr_partition_states", "leader_and_isr_topic_ids", "update_metadata_partition_states",
    "StopReplicaPartition", "stop_replica_partitions",
    "leader_and_isr_error_response", "stop_replica_error_response", "update_metadata_error_response",
    "controlled_shutdown_error_response", "alter_partition_error_response", "ERROR_RESPONSES",
]
