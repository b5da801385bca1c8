"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward (offset -1: to the
high watermark). The answer's low watermark is the new log start offset; segments wholly below it
are deleted at once (Kafka leaves that to its next retention pass); Fetch below it gets
OFFSET_OUT_OF_RANGE and ListOffsets(earliest) returns it. A partition whose cleanup.policy lacks
"delete" gets POLICY_VIOLATION; an offset above the high watermark OFFSET_OUT_OF_RANGE; internal
topics INVALID_TOPIC_EXCEPTION. The answer waits (up to the request's timeout) until every live
replica's log start offset reached the requested offset (the leader's low watermark), as Kafka's
DelayedDeleteRecords."""
from __future__ import annotations

from kafka.protocol.admin.topics import DeleteRecordsRequest, DeleteRecordsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import is_internal

API_KEY = 21
MIN_VERSION, MAX_VERSION = 0, 2

INVALID_LOW_WATERMARK = -1


def make(services: BrokerServices) -> ApiSpec:
    replica_manager = services.replica_manager
    cache = services.metadata_cache

    async def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
        Resp = DeleteRecordsResponse[ctx.api_version]
        T = Resp.DeleteRecordsTopicResult
        P = T.DeleteRecordsPartitionResult
        refused: dict[TopicPartition, ErrorCode] = {}
        wanted: dict[TopicPartition, int] = {}
        for t in req.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if not cache.contains(t.name):
                    refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif is_internal(t.name):
                    refused[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
                else:
                    wanted[tp] = p.offset
        done = await replica_manager.delete_records(req.timeout_ms, wanted) if wanted else {}
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code, low = (refused[tp], INVALID_LOW_WATERMARK) if tp in refused else done[tp]
                parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=code))
            topics.append(T(name=t.name, partitions=parts))
        return Resp(throttle_time_ms=0, topics=topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
