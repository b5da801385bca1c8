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


__all__ = [
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "StopReplicaRequest", "StopReplicaResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
    "ControlledShutdownRequest", "ControlledShutdownResponse",
    "AlterPartitionRequest", "AlterPartitionResponse",
    "IBP_3_9_VERSIONS", "request_header_version",
]
