"""UpdateMetadata (key 6), v0-8: the controller's view of live brokers and partition states for
this broker's metadata cache (KafkaApis.handleUpdateMetadataRequest over
ReplicaManager.maybeUpdateMetadataCache and ZkMetadataCache.updateMetadata).

A broker epoch older than this broker's registration is STALE_BROKER_EPOCH; a controller epoch
older than the highest seen is refused as Kafka refuses it (ControllerMovedException, answered
STALE_CONTROLLER_EPOCH); the response is only an error code. What waits on the metadata (the admin
manager's CreateTopics/DeleteTopics, the group coordinator's deleted partitions) hears of the
change through the metadata cache's listeners.
"""
from __future__ import annotations

import uuid
from typing import Any, Optional

from kafkalite.cluster.metadata_cache import (SECURITY_PROTOCOL_NAMES, BrokerEndpoint, BrokerInfo,
                                              UpdateMetadataPartitionState)
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.protocol.inter_broker import UpdateMetadataRequest, UpdateMetadataResponse
from kafkalite.server.broker_epoch import UNKNOWN_BROKER_EPOCH
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

API_KEY = 6
MIN_VERSION, MAX_VERSION = 0, 8
FIRST_ENDPOINTS_VERSION = 1
FIRST_RACK_VERSION = 2
FIRST_LISTENER_VERSION = 3
FIRST_OFFLINE_REPLICAS_VERSION = 4
FIRST_GROUPED_VERSION = 5           # partitions grouped by topic, broker epoch
FIRST_TOPIC_ID_VERSION = 7
FIRST_KRAFT_FLAG_VERSION = 8
PLAINTEXT = 0
ZERO_UUID = uuid.UUID(int=0)


def live_brokers(req: Any, v: int) -> list[BrokerInfo]:
    """The live brokers with their endpoints. v0 has one PLAINTEXT host/port; before v3 an
    endpoint's listener is named after its security protocol (ListenerName.forSecurityProtocol)."""
    out: list[BrokerInfo] = []
    for b in req.live_brokers or ():
        if v < FIRST_ENDPOINTS_VERSION:
            endpoints: tuple[BrokerEndpoint, ...] = (
                BrokerEndpoint(SECURITY_PROTOCOL_NAMES[PLAINTEXT], b.v0_host, b.v0_port, PLAINTEXT),)
        else:
            endpoints = tuple(
                BrokerEndpoint(ep.listener if v >= FIRST_LISTENER_VERSION
                               else SECURITY_PROTOCOL_NAMES.get(ep.security_protocol, str(ep.security_protocol)),
                               ep.host, ep.port, ep.security_protocol)
                for ep in b.endpoints or ())
        out.append(BrokerInfo(b.id, endpoints, b.rack if v >= FIRST_RACK_VERSION else None))
    return out


def partition_states(req: Any, v: int) -> list[UpdateMetadataPartitionState]:
    def state(topic: str, p: Any) -> UpdateMetadataPartitionState:
        return UpdateMetadataPartitionState(
            topic=topic, partition=p.partition_index, controller_epoch=p.controller_epoch, leader=p.leader,
            leader_epoch=p.leader_epoch, isr=tuple(p.isr or ()), zk_version=p.zk_version,
            replicas=tuple(p.replicas or ()),
            offline_replicas=tuple(p.offline_replicas or ()) if v >= FIRST_OFFLINE_REPLICAS_VERSION else ())
    if v < FIRST_GROUPED_VERSION:
        return [state(p.topic_name, p) for p in req.ungrouped_partition_states or ()]
    return [state(t.topic_name, p) for t in req.topic_states or () for p in t.partition_states or ()]


def topic_ids(req: Any, v: int) -> dict[str, uuid.UUID]:
    """The topic states' ids: v5-6 topic states carry none (zero, which makes the cache forget the
    topic's id, as Kafka's does); before v5 there are no topic states."""
    if v < FIRST_GROUPED_VERSION:
        return {}
    return {t.topic_name: (t.topic_id if v >= FIRST_TOPIC_ID_VERSION and t.topic_id is not None else ZERO_UUID)
            for t in req.topic_states or ()}


def error_response(req: Any, v: int, error: int, message: Optional[str] = None) -> Any:
    """Kafka's UpdateMetadataRequest.getErrorResponse: the error code alone."""
    return UpdateMetadataResponse[v](error_code=error)


def make(services: Any) -> ApiSpec:
    """Needs `services.replica_manager` (built with the metadata cache) and `services.broker_epoch`
    (server.broker_epoch.BrokerEpoch)."""
    replica_manager = services.replica_manager
    broker_epoch = services.broker_epoch

    async def handle(ctx: RequestContext, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        v = ctx.api_version
        Resp = UpdateMetadataResponse[v]
        request_broker_epoch = req.broker_epoch if v >= FIRST_GROUPED_VERSION else UNKNOWN_BROKER_EPOCH
        is_kraft = bool(req.is_k_raft_controller) if v >= FIRST_KRAFT_FLAG_VERSION else False
        fenced = broker_epoch.fence("UpdateMetadata", request_broker_epoch, is_kraft, req.controller_id,
                                    req.controller_epoch)
        if fenced is not None:
            return Resp(error_code=fenced)
        try:
            replica_manager.maybe_update_metadata_cache(req.controller_id, req.controller_epoch,
                                                        live_brokers(req, v), partition_states(req, v),
                                                        topic_ids(req, v))
        except KafkaApiError as e:
            return Resp(error_code=e.code)
        return Resp(error_code=ErrorCode.NONE)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
