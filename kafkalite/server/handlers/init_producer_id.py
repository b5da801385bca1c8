"""InitProducerId (key 22), v0-5.

Without a transactional id: a fresh producer id at epoch 0 (idempotent producers). With one: the
transaction coordinator bumps the epoch of the id (or hands out a new producer id), fencing
older instances; v3+ requests may carry the producer id/epoch for KIP-360 recovery. As Kafka's
KafkaApis: a producer id without an epoch (or the reverse) is INVALID_REQUEST, and clients
before v4 get INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED.
"""
from __future__ import annotations

from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 22
MIN_VERSION, MAX_VERSION = 0, 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
        v = ctx.api_version
        Resp = InitProducerIdResponse[v]
        pid = req.producer_id if v >= 3 else NO_PRODUCER_ID
        epoch = req.producer_epoch if v >= 3 else NO_PRODUCER_EPOCH
        if pid == NO_PRODUCER_ID and epoch == NO_PRODUCER_EPOCH:
            expected = None
        elif pid == NO_PRODUCER_ID or epoch == NO_PRODUCER_EPOCH:
            return Resp(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, producer_id=NO_PRODUCER_ID,
                        producer_epoch=NO_PRODUCER_EPOCH)
        else:
            expected = (pid, epoch)
        await services.producer_id_manager.ensure_block()
        if req.transactional_id is None:
            # Kafka: no transactional id -> always a new producer id, whatever id/epoch is presented.
            new_pid = services.producer_id_manager.generate_producer_id()
            return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=new_pid, producer_epoch=0)
        result = await services.transaction_coordinator.handle_init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, expected)
        error = result.error
        if v < 4 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return Resp(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                    producer_epoch=result.producer_epoch)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
