"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward (offset -1: to the
high watermark). The answer's low watermark is the new log start offset; segments wholly below it
are deleted at once (Kafka leaves that to its next retention pass); Fetch below it gets
OFFSET_OUT_OF_RANGE and ListOffsets(earliest) returns it. A partition whose cleanup.policy lacks
"delete" gets POLICY_VIOLATION; an offset above the high watermark OFFSET_OUT_OF_RANGE; internal topics INVALID_TOPIC_EXCEPTION. With this
broker the only replica the low watermark is reached when the call returns, so nothing waits
in a purgatory."""
from __future__ import annotations

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from kafkalite.log.errors import LogError
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
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
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                try:
                    if not cache.contains(t.name):
                        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if is_internal(t.name):
                        raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                            f"Cannot delete records of internal topic {t.name}")
                    low = replica_manager.delete_records(tp, p.offset)
                    parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=ErrorCode.NONE))
                except (KafkaApiError, LogError) as e:
                    code = e.code if isinstance(e, KafkaApiError) else ErrorCode(e.error_code)
                    parts.append(P(partition_index=p.partition_index, low_watermark=INVALID_LOW_WATERMARK,
                                   error_code=code))
            topics.append(T(name=t.name, partitions=parts))
        return Resp(throttle_time_ms=0, topics=topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
