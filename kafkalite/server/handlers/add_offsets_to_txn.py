"""AddOffsetsToTxn (key 25), v0-4: adds the `__consumer_offsets` partition of the group to the
transaction (Kafka's KafkaApis: the coordinator's AddPartitions with that one partition), so
the transaction's markers reach the offsets its TxnOffsetCommits write. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. v4 (KIP-890 part 1) only announces that the client understands
TRANSACTION_ABORTABLE, which Kafka 3.9's coordinator never answers here: v4 is answered as v3."""
from __future__ import annotations

from kafka.protocol.producer.transaction import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from kafkalite.coordinator.group.types import GROUP_METADATA_TOPIC_NAME
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 25
MIN_VERSION, MAX_VERSION = 0, 4


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
        v = ctx.api_version
        Resp = AddOffsetsToTxnResponse[v]
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, services.group_coordinator.partition_for(req.group_id))
        error = await services.transaction_coordinator.handle_add_partitions_to_transaction(
            req.transactional_id, req.producer_id, req.producer_epoch, [tp])
        if v < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return Resp(throttle_time_ms=0, error_code=error)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
