"""ListPartitionReassignments (key 46), v0: the reassignments in progress (all, or of the named
partitions) with their replicas, adding and removing replicas, from the active controller (Kafka's
KafkaController.listPartitionReassignments); any other broker answers NOT_CONTROLLER."""
from __future__ import annotations

from typing import Any, Optional

from kafka.protocol.admin.topics import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.alter_partition_reassignments import DEFAULT_MESSAGES
from kafkalite.server.request_context import RequestContext

API_KEY = 46
MIN_VERSION, MAX_VERSION = 0, 0


def make(services: Any) -> ApiSpec:
    """Needs `services.kafka_controller`."""

    async def handle(ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
        Resp = ListPartitionReassignmentsResponse[ctx.api_version]
        partitions: Optional[list[TopicPartition]] = None
        if req.topics is not None:
            partitions = [TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes]
        error, found = await services.kafka_controller.list_partition_reassignments(partitions)
        if error != ErrorCode.NONE:
            return Resp(throttle_time_ms=0, error_code=error, error_message=DEFAULT_MESSAGES.get(error), topics=[])
        T = Resp.OngoingTopicReassignment
        P = T.OngoingPartitionReassignment
        by_topic: dict[str, list] = {}
        for tp, a in found.items():
            by_topic.setdefault(tp.topic, []).append(P(
                partition_index=tp.partition, replicas=list(a.replicas), adding_replicas=list(a.adding_replicas),
                removing_replicas=list(a.removing_replicas)))
        # Kafka leaves the top-level message at its generated default, "" (the spec names no
        # default and says "null if there was no error", but Kafka answers "")
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
                    topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
