"""WriteTxnMarkers (key 27), v0-1: a coordinator asks this broker to write COMMIT/ABORT markers
to partitions it leads. Each partition gets its own error (UNKNOWN_TOPIC_OR_PARTITION for one
this broker does not host; the log's epoch checks give INVALID_PRODUCER_EPOCH /
TRANSACTION_COORDINATOR_FENCED). Markers written to `__consumer_offsets` complete the producer's
transactional offset commits."""
from __future__ import annotations

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from kafkalite.coordinator.transaction.txn_marker_writer import write_txn_markers
from kafkalite.network.socket_server import CloseConnection
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
        if any(t.name is None for marker in req.markers or () for t in marker.topics or ()):
            # Kafka's parser refuses a null in this non-nullable string: the connection is closed.
            raise CloseConnection("WriteTxnMarkers: null topic name")
        markers = []
        for marker in req.markers or ():
            partitions = [TopicPartition(t.name, p) for t in marker.topics or () for p in t.partition_indexes or ()]
            errors = await write_txn_markers(services.replica_manager, services.group_coordinator,
                                             marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                             bool(marker.transaction_result), partitions, timeout_ms=timeout_ms)
            topics = []
            for t in marker.topics or ():
                topics.append(TopicResult(name=t.name, partitions=[
                    PartResult(partition_index=p, error_code=errors[TopicPartition(t.name, p)])
                    for p in dict.fromkeys(t.partition_indexes or ())]))
            markers.append(MarkerResult(producer_id=marker.producer_id, topics=topics))
        return Resp(markers=markers)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
