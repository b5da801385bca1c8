"""DescribeProducers (key 61), v0: the producers a partition's leader log knows (the admin
client's describeProducers, kafka-transactions.sh describe-producers).

As Kafka's KafkaApis.handleDescribeProducersRequest: an invalid topic name gets
INVALID_TOPIC_EXCEPTION with its message, an unknown topic UNKNOWN_TOPIC_OR_PARTITION for each
requested partition; a partition the topic does not have UNKNOWN_TOPIC_OR_PARTITION, one this
broker does not host NOT_LEADER_OR_FOLLOWER (ReplicaManager.getPartitionOrError). Each producer:
id, epoch, last sequence, last timestamp, coordinator epoch, and the first offset of its ongoing
transaction (-1 if none).
"""
from __future__ import annotations

from typing import Optional

from kafka.protocol.admin.transactions import DescribeProducersRequest, DescribeProducersResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import topic_name_error

UNKNOWN_TOPIC_OR_PARTITION_MESSAGE = "This server does not host this topic-partition."

API_KEY = 61
MIN_VERSION, MAX_VERSION = 0, 0


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache
    replica_manager = services.replica_manager

    async def handle(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
        Resp = DescribeProducersResponse[ctx.api_version]
        T = Resp.TopicResponse
        P = T.PartitionResponse
        S = P.ProducerState
        topics = []
        for t in req.topics:
            topic_error: Optional[tuple[ErrorCode, Optional[str]]] = None
            invalid = topic_name_error(t.name)
            if invalid is not None:
                topic_error = (ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
            elif not cache.contains(t.name):
                # a topic-level ApiError: Kafka sends the error's default message along
                topic_error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
            parts = []
            for index in t.partition_indexes:
                if topic_error is not None:
                    parts.append(P(partition_index=index, error_code=topic_error[0], error_message=topic_error[1],
                                   active_producers=[]))
                    continue
                partition = replica_manager.get_partition(TopicPartition(t.name, index))
                if partition is None:
                    info = cache.topic(t.name)
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER if info is not None and index in info.partitions \
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    parts.append(P(partition_index=index, error_code=code, error_message=None, active_producers=[]))
                    continue
                parts.append(P(partition_index=index, error_code=ErrorCode.NONE, error_message=None, active_producers=[
                    S(producer_id=a.producer_id, producer_epoch=a.producer_epoch, last_sequence=a.last_sequence,
                      last_timestamp=a.last_timestamp, coordinator_epoch=a.coordinator_epoch,
                      current_txn_start_offset=a.current_txn_start_offset)
                    for a in partition.active_producers()]))
            topics.append(T(name=t.name, partitions=parts))
        return Resp(throttle_time_ms=0, topics=topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
