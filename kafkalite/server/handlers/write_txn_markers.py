"""WriteTxnMarkers (key 27), v0-1: another broker's transaction
coordinator (or this broker's, never over the wire: it writes its own partitions directly) asks
this broker to write COMMIT/ABORT markers to partitions it leads.

As Kafka's KafkaApis.handleWriteTxnMarkersRequest (cluster authorization aside): each marker is
one append (origin coordinator, acks=-1, request.timeout.ms), the markers of a request are
appended concurrently and answered together; each partition gets its own error
(UNKNOWN_TOPIC_OR_PARTITION for one this broker does not host, NOT_LEADER_OR_FOLLOWER from a
follower, the log's epoch checks give INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED).
The answer is keyed by producer id (errorsByProducerId: two markers of one producer are merged).
Markers written to `__consumer_offsets` complete the producer's transactional offset commits."""
from __future__ import annotations

import asyncio

from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from kafkalite.coordinator.transaction.txn_marker_writer import write_txn_markers
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 27
MIN_VERSION, MAX_VERSION = 0, 1


def make(services: BrokerServices) -> ApiSpec:
    timeout_ms = services.config.request_timeout_ms

    async def handle(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        Resp = WriteTxnMarkersResponse[ctx.api_version]
        MarkerResult = Resp.WritableTxnMarkerResult
        TopicResult = MarkerResult.WritableTxnMarkerTopicResult
        PartResult = TopicResult.WritableTxnMarkerPartitionResult
        markers = list(req.markers or ())
        answers = await asyncio.gather(*(
            write_txn_markers(services.replica_manager, services.group_coordinator, marker.producer_id,
                              marker.producer_epoch, marker.coordinator_epoch, bool(marker.transaction_result),
                              [TopicPartition(t.name, p) for t in marker.topics or () for p in t.partition_indexes or ()],
                              timeout_ms=timeout_ms)
            for marker in markers))
        by_producer: dict[int, dict[TopicPartition, ErrorCode]] = {}
        for marker, errors in zip(markers, answers):
            by_producer.setdefault(marker.producer_id, {}).update(errors)
        results = []
        for producer_id, errors in by_producer.items():
            by_topic: dict[str, list] = {}
            for tp, error in errors.items():
                by_topic.setdefault(tp.topic, []).append(PartResult(partition_index=tp.partition, error_code=error))
            results.append(MarkerResult(producer_id=producer_id, topics=[
                TopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]))
        return Resp(markers=results)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
