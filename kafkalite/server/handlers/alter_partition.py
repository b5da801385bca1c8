"""AlterPartition (key 56), v0-3: a partition leader asks the controller to change its ISR (or
leader recovery state). The active controller validates the broker epoch, the leader epoch and
the partition epoch, writes the new state conditionally and answers with what it wrote; any
other broker answers NOT_CONTROLLER (Kafka's KafkaApis.handleAlterPartitionRequest and
KafkaController.alterPartitions). From v2 topics are named by id; an unknown id gets
UNKNOWN_TOPIC_ID for each of its partitions."""
from __future__ import annotations

import uuid
from typing import Any

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.controller.states import LeaderAndIsr, LeaderRecoveryState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.inter_broker import AlterPartitionRequest, AlterPartitionResponse
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

API_KEY = 56
MIN_VERSION, MAX_VERSION = 0, 3
ZERO_UUID = uuid.UUID(int=0)


def make(services: Any) -> ApiSpec:
    """Needs `services.kafka_controller` (controller.kafka_controller.KafkaController)."""

    async def handle(ctx: RequestContext, req: AlterPartitionRequest) -> AlterPartitionResponse:
        v = ctx.api_version
        Resp = AlterPartitionResponse[v]
        T = Resp.TopicData
        P = T.PartitionData
        controller = services.kafka_controller
        if not controller.is_active:
            return Resp(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, topics=[])
        names = controller.context.topic_names()
        changes: dict[TopicPartition, LeaderAndIsr] = {}
        unknown_topics = []
        for t in req.topics:
            name = names.get(t.topic_id) if v >= 2 else t.topic_name
            if name is None:
                unknown_topics.append(T(topic_id=t.topic_id, partitions=[
                    P(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions]))
                continue
            for p in t.partitions:
                isr = [b.broker_id for b in p.new_isr_with_epochs] if v >= 3 else list(p.new_isr)
                recovery = LeaderRecoveryState(p.leader_recovery_state) if v >= 1 else LeaderRecoveryState.RECOVERED
                changes[TopicPartition(name, p.partition_index)] = LeaderAndIsr(
                    req.broker_id, p.leader_epoch, tuple(isr), recovery, p.partition_epoch)
        error, results = await controller.alter_partition(req.broker_id, req.broker_epoch, changes)
        if error != ErrorCode.NONE:
            # a refused request (stale or unknown broker epoch) says nothing about its topics
            return Resp(throttle_time_ms=0, error_code=error, topics=[])
        by_topic: dict[str, list] = {}
        for tp, r in results.items():
            if isinstance(r, LeaderAndIsr):
                part = P(partition_index=tp.partition, error_code=ErrorCode.NONE, leader_id=r.leader,
                         leader_epoch=r.leader_epoch, isr=list(r.isr), leader_recovery_state=int(r.leader_recovery_state),
                         partition_epoch=r.partition_epoch)
            else:
                part = P(partition_index=tp.partition, error_code=r)
            by_topic.setdefault(tp.topic, []).append(part)
        topics = list(unknown_topics)
        for topic, parts in by_topic.items():
            if v >= 2:
                topics.append(T(topic_id=controller.context.topic_ids.get(topic, ZERO_UUID), partitions=parts))
            else:
                topics.append(T(topic_name=topic, partitions=parts))
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
