"""StopReplica (key 5), v0-4: the controller tells this broker to stop replicas, and to delete
them when a topic is deleted or a replica moved away (KafkaApis.handleStopReplicaRequest over
ReplicaManager.stopReplicas).

A broker epoch older than this broker's registration is STALE_BROKER_EPOCH with no partitions; a
stale controller epoch is STALE_CONTROLLER_EPOCH with no partitions; otherwise each partition
gets its error (FENCED_LEADER_EPOCH for an older leader epoch, v3+). Coordinators resign their
deleted `__consumer_offsets` / `__transaction_state` partitions through the replica manager's
leadership listeners.
"""
from __future__ import annotations

from typing import Any, Optional

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.inter_broker import StopReplicaRequest, StopReplicaResponse
from kafkalite.replica.control_states import NO_EPOCH, StopReplicaPartitionState
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.broker_epoch import UNKNOWN_BROKER_EPOCH
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

API_KEY = 5
MIN_VERSION, MAX_VERSION = 0, 4
FIRST_BROKER_EPOCH_VERSION = 1
FIRST_PARTITION_STATE_VERSION = 3       # leader epoch and delete flag per partition
FIRST_KRAFT_FLAG_VERSION = 4


def partition_states(req: Any, v: int) -> dict[TopicPartition, StopReplicaPartitionState]:
    """Kafka's StopReplicaRequest.partitionStates(): before v3 every partition shares the request's
    delete flag and has no leader epoch (-1)."""
    if v == 0:
        return {TopicPartition(p.topic_name, p.partition_index): StopReplicaPartitionState(NO_EPOCH, bool(req.delete_partitions))
                for p in req.ungrouped_partitions or ()}
    if v < FIRST_PARTITION_STATE_VERSION:
        return {TopicPartition(t.name, i): StopReplicaPartitionState(NO_EPOCH, bool(req.delete_partitions))
                for t in req.topics or () for i in t.partition_indexes or ()}
    return {TopicPartition(t.topic_name, p.partition_index): StopReplicaPartitionState(p.leader_epoch,
                                                                                      bool(p.delete_partition))
            for t in req.topic_states or () for p in t.partition_states or ()}


def build_response(v: int, error: int, errors: list[tuple[TopicPartition, int]]) -> Any:
    Resp = StopReplicaResponse[v]
    PE = Resp.StopReplicaPartitionError
    return Resp(error_code=error, partition_errors=[
        PE(topic_name=tp.topic, partition_index=tp.partition, error_code=code) for tp, code in errors])


def error_response(req: Any, v: int, error: int, message: Optional[str] = None) -> Any:
    """Kafka's StopReplicaRequest.getErrorResponse: the error at the top and on every partition."""
    return build_response(v, error, [(tp, error) for tp in partition_states(req, v)])


def make(services: Any) -> ApiSpec:
    """Needs `services.replica_manager` and `services.broker_epoch` (server.broker_epoch.BrokerEpoch)."""
    replica_manager = services.replica_manager
    broker_epoch = services.broker_epoch

    async def handle(ctx: RequestContext, req: StopReplicaRequest) -> StopReplicaResponse:
        v = ctx.api_version
        request_broker_epoch = req.broker_epoch if v >= FIRST_BROKER_EPOCH_VERSION else UNKNOWN_BROKER_EPOCH
        is_kraft = bool(req.is_k_raft_controller) if v >= FIRST_KRAFT_FLAG_VERSION else False
        fenced = broker_epoch.fence("StopReplica", request_broker_epoch, is_kraft, req.controller_id,
                                    req.controller_epoch)
        if fenced == ErrorCode.UNKNOWN_SERVER_ERROR:
            return error_response(req, v, fenced)
        if fenced is not None:   # a stale broker epoch: Kafka answers the code with no partitions
            return build_response(v, fenced, [])
        error, errors = await replica_manager.stop_replicas(req.controller_id, req.controller_epoch,
                                                            partition_states(req, v))
        return build_response(v, error, list(errors.items()))

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
