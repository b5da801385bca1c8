"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local
(-4, v8+), latest tiered (-5, v9+), or the first offset at/after a timestamp; v0 answers the
old-style list of segment-boundary offsets before a time."""
from __future__ import annotations

from collections import Counter
from typing import Any

from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse

from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP,
                                               LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP)
from kafkalite.replica.results import ListOffsetsPartitionResult
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 2
MIN_VERSION, MAX_VERSION = 0, 10

# the first version at which each special (negative) timestamp may be asked for; any other
# negative timestamp is UNSUPPORTED_VERSION (KafkaApis' timestampMinSupportedVersion)
_MIN_VERSION_FOR = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
                    LATEST_TIERED_TIMESTAMP: 9}
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2


def make(services: BrokerServices) -> ApiSpec:
    replica_manager = services.replica_manager

    def old_style(topic: str, p: Any, from_consumer: bool, fetch_only_from_leader: bool) -> dict[str, Any]:
        """Kafka's handleListOffsetRequestV0: up to max_num_offsets offsets per partition
        (segment boundaries), and only -1 and -2 among the negative timestamps."""
        if p.timestamp < EARLIEST_TIMESTAMP:
            return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "old_style_offsets": []}
        try:
            offsets = replica_manager.legacy_fetch_offsets_before(
                TopicPartition(topic, p.partition_index), p.timestamp, p.max_num_offsets, from_consumer,
                fetch_only_from_leader=fetch_only_from_leader)
        except KafkaApiError as e:
            return {"error_code": e.code, "old_style_offsets": []}
        return {"error_code": ErrorCode.NONE, "old_style_offsets": offsets}

    async def handle(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
        v = ctx.api_version
        Resp = ListOffsetsResponse[v]
        T = Resp.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        isolation = req.isolation_level if v >= 2 else 0
        # KafkaApis: only the consumer id (-1) is a client request (isolation, the HW bound); the
        # debugging id (-2) reads any replica up to its log end, as a follower (>= 0) reads its leader
        from_consumer = req.replica_id == CONSUMER_REPLICA_ID
        if v == 0:
            return Resp(throttle_time_ms=0, topics=[
                T(name=t.name, partitions=[P(partition_index=p.partition_index, **old_style(
                    t.name, p, from_consumer, req.replica_id != DEBUGGING_REPLICA_ID))
                                           for p in t.partitions]) for t in req.topics])
        counts = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if counts[(t.name, p.partition_index)] > 1:
                    r = ListOffsetsPartitionResult(ErrorCode.INVALID_REQUEST)
                elif p.timestamp < 0 and v < _MIN_VERSION_FOR.get(p.timestamp, MAX_VERSION + 1):
                    r = ListOffsetsPartitionResult(ErrorCode.UNSUPPORTED_VERSION)
                else:
                    r = replica_manager.fetch_offset_for_timestamp(
                        TopicPartition(t.name, p.partition_index), p.timestamp, isolation,
                        p.current_leader_epoch if v >= 4 else -1, from_consumer,
                        fetch_only_from_leader=req.replica_id != DEBUGGING_REPLICA_ID)
                parts.append(P(partition_index=p.partition_index, error_code=r.error,
                               timestamp=r.timestamp, offset=r.offset, leader_epoch=r.leader_epoch))
            topics.append(T(name=t.name, partitions=parts))
        return Resp(throttle_time_ms=0, topics=topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
