"""OffsetForLeaderEpoch (key 23): where a leader epoch ended, from the partition's leader-epoch
cache. Consumers use it to validate their position after a leader change (KIP-320)."""
from __future__ import annotations

from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 23
MIN_VERSION, MAX_VERSION = 0, 4


def make(services: BrokerServices) -> ApiSpec:
    replica_manager = services.replica_manager

    async def handle(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
        Resp = OffsetForLeaderEpochResponse[ctx.api_version]
        T = Resp.OffsetForLeaderTopicResult
        P = T.EpochEndOffset
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                try:
                    # Kafka checks the client's current leader epoch before leadership
                    epoch, end_offset = replica_manager.last_offset_for_leader_epoch(
                        TopicPartition(t.topic, p.partition), p.current_leader_epoch, p.leader_epoch)
                    parts.append(P(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch,
                                   end_offset=end_offset))
                except KafkaApiError as e:
                    parts.append(P(error_code=e.code, partition=p.partition, leader_epoch=-1, end_offset=-1))
            topics.append(T(topic=t.topic, partitions=parts))
        return Resp(throttle_time_ms=0, topics=topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
