"""LeaderAndIsr (key 4), v0-7: the controller tells this broker which partitions it leads or
follows, at which leader epoch, with which replicas and ISR (KafkaApis.handleLeaderAndIsrRequest
over ReplicaManager.becomeLeaderOrFollower).

Checks in Kafka's order: a broker epoch older than this broker's registration is
STALE_BROKER_EPOCH for every partition (the request was meant for an earlier incarnation); a
controller epoch older than the highest seen is STALE_CONTROLLER_EPOCH for every partition;
then each partition gets its own error. Responses up to v4 list partitions by topic name, from v5
by topic id, as Kafka builds them.
"""
from __future__ import annotations

import uuid
from typing import Any, Iterator, Optional

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.inter_broker import LeaderAndIsrRequest, LeaderAndIsrResponse, row_type
from kafkalite.replica.control_states import LeaderAndIsrPartitionState
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.broker_epoch import UNKNOWN_BROKER_EPOCH
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.slices import SliceClock

API_KEY = 4
MIN_VERSION, MAX_VERSION = 0, 7
FIRST_GROUPED_VERSION = 2          # partitions grouped by topic, broker epoch
FIRST_TOPIC_ID_VERSION = 5         # topic ids in the request and the response's key
FIRST_KRAFT_FLAG_VERSION = 7
ZERO_UUID = uuid.UUID(int=0)


def partition_states(req: Any, v: int) -> list[LeaderAndIsrPartitionState]:
    """The request's partitions in order, whatever the version's layout (Kafka's partitionStates())."""
    return list(iter_partition_states(req, v))


async def partition_states_in_slices(req: Any, v: int) -> list[LeaderAndIsrPartitionState]:
    """partition_states, yielding to the loop every slice: ~2 us a partition, a CreateTopics
    of 1,000 partitions (or a restart of 10,000) sends them in one request."""
    clock = SliceClock()
    out = []
    for state in iter_partition_states(req, v):
        out.append(state)
        await clock.tick()
    return out


def iter_partition_states(req: Any, v: int) -> Iterator[LeaderAndIsrPartitionState]:
    """partition_states, one at a time."""
    def state(topic: str, p: Any) -> LeaderAndIsrPartitionState:
        return LeaderAndIsrPartitionState(
            topic=topic, partition=p.partition_index, controller_epoch=p.controller_epoch, leader=p.leader,
            leader_epoch=p.leader_epoch, isr=tuple(p.isr or ()), partition_epoch=p.partition_epoch,
            replicas=tuple(p.replicas or ()),
            adding_replicas=tuple(p.adding_replicas or ()) if v >= 3 else (),
            removing_replicas=tuple(p.removing_replicas or ()) if v >= 3 else (),
            is_new=bool(p.is_new) if v >= 1 else False,
            leader_recovery_state=p.leader_recovery_state if v >= 6 else 0)
    if v < FIRST_GROUPED_VERSION:
        return (state(p.topic_name, p) for p in req.ungrouped_partition_states or ())
    return (state(t.topic_name, p) for t in req.topic_states or () for p in t.partition_states or ())


def topic_ids(req: Any, v: int) -> dict[str, uuid.UUID]:
    """Kafka's LeaderAndIsrRequest.topicIds(): name -> id of each topic state (zero before v5)."""
    if v < FIRST_GROUPED_VERSION:
        return {}
    return {t.topic_name: (t.topic_id if v >= FIRST_TOPIC_ID_VERSION and t.topic_id is not None else ZERO_UUID)
            for t in req.topic_states or ()}


def build_response(v: int, error: int, errors: list[tuple[TopicPartition, int]],
                   ids: dict[str, uuid.UUID]) -> Any:
    """Up to v4 one flat list with topic names; from v5 grouped by topic id, topics in the order
    their first partition appears."""
    Resp = LeaderAndIsrResponse[v]
    PE = Resp.LeaderAndIsrPartitionError
    if v < FIRST_TOPIC_ID_VERSION:
        return Resp(error_code=error, partition_errors=[
            PE(topic_name=tp.topic, partition_index=tp.partition, error_code=code) for tp, code in errors],
            topics=[])
    TE = Resp.LeaderAndIsrTopicError
    # a restart answers for every partition: rows, not DataContainers (see row_type)
    PE = row_type(TE.LeaderAndIsrPartitionError, v)
    by_id: dict[uuid.UUID, list[Any]] = {}
    for tp, code in errors:
        by_id.setdefault(ids.get(tp.topic, ZERO_UUID), []).append(PE(tp.partition, code))
    return Resp(error_code=error, partition_errors=[],
                topics=[TE(topic_id=tid, partition_errors=parts) for tid, parts in by_id.items()])


def error_response(req: Any, v: int, error: int, message: Optional[str] = None) -> Any:
    """Kafka's LeaderAndIsrRequest.getErrorResponse: the error at the top and on every partition."""
    return build_response(v, error, [(TopicPartition(s.topic, s.partition), error) for s in partition_states(req, v)],
                          topic_ids(req, v))


def make(services: Any) -> ApiSpec:
    """Needs `services.replica_manager`, `services.broker_epoch` (server.broker_epoch.BrokerEpoch)
    and `services.topic_log_config(topic) -> LogConfig` (the topic's configs over the broker's)."""
    replica_manager = services.replica_manager
    broker_epoch = services.broker_epoch

    async def handle(ctx: RequestContext, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        v = ctx.api_version
        request_broker_epoch = req.broker_epoch if v >= FIRST_GROUPED_VERSION else UNKNOWN_BROKER_EPOCH
        is_kraft = bool(req.is_k_raft_controller) if v >= FIRST_KRAFT_FLAG_VERSION else False
        fenced = broker_epoch.fence("LeaderAndIsr", request_broker_epoch, is_kraft, req.controller_id,
                                    req.controller_epoch)
        if fenced is not None:
            return error_response(req, v, fenced)
        ids = topic_ids(req, v)
        error, errors = await replica_manager.become_leader_or_follower_in_slices(
            req.controller_id, req.controller_epoch, await partition_states_in_slices(req, v), ids,
            [leader.broker_id for leader in req.live_leaders or ()], services.topic_log_config,
            is_kraft_controller=is_kraft)
        if error != ErrorCode.NONE:
            return error_response(req, v, error)
        return build_response(v, ErrorCode.NONE, list(errors.items()), ids)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
