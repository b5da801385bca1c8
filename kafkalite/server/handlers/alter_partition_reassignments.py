"""AlterPartitionReassignments (key 45), v0: move partitions' replicas (a null replica list cancels
a reassignment in progress). Handled by the active controller (Kafka's
KafkaApis.handleAlterPartitionReassignmentsRequest and KafkaController.processApiPartitionReassignment);
any other broker answers NOT_CONTROLLER at the top level. Per partition, Kafka's ApiError: its
message, or the error's default message where Kafka names none."""
from __future__ import annotations

from typing import Any, Optional

from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

API_KEY = 45
MIN_VERSION, MAX_VERSION = 0, 0

# Errors.X.message() of the errors this API reports without a message of its own
DEFAULT_MESSAGES = {
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
}


def make(services: Any) -> ApiSpec:
    """Needs `services.kafka_controller`."""

    async def handle(ctx: RequestContext, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
        Resp = AlterPartitionReassignmentsResponse[ctx.api_version]
        requested: dict[TopicPartition, Optional[list[int]]] = {}
        for t in req.topics:
            for p in t.partitions:
                requested[TopicPartition(t.name, p.partition_index)] = None if p.replicas is None else list(p.replicas)
        error, results = await services.kafka_controller.alter_partition_reassignments(requested)
        if error != ErrorCode.NONE:
            return Resp(throttle_time_ms=0, error_code=error, error_message=DEFAULT_MESSAGES.get(error),
                        responses=[])
        T = Resp.ReassignableTopicResponse
        P = T.ReassignablePartitionResponse
        by_topic: dict[str, list] = {}
        for tp, (code, message) in results.items():
            if code != ErrorCode.NONE and message is None:
                message = DEFAULT_MESSAGES.get(code)
            by_topic.setdefault(tp.topic, []).append(
                P(partition_index=tp.partition, error_code=code, error_message=message))
        # Kafka leaves the top-level message at its generated default, "" (the spec names no
        # default and says "null if there was no error", but Kafka answers "")
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
                    responses=[T(name=t, partitions=ps) for t, ps in by_topic.items()])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
