"""InitProducerId (key 22) for idempotent producers: a fresh producer id, epoch 0.

Transactional ids need the transaction coordinator (a later issue): such requests get
NOT_COORDINATOR, exactly what a broker that does not coordinate that id answers."""
from __future__ import annotations

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 22
MIN_VERSION, MAX_VERSION = 0, 5


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
        Resp = InitProducerIdResponse[ctx.api_version]
        if req.transactional_id is not None:
            return Resp(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR, producer_id=-1,
                        producer_epoch=-1)
        # Kafka: with no transactional id the coordinator always hands out a new producer id,
        # whatever producer id/epoch the client presents (KIP-360 bumps are for transactions).
        pid = services.producer_id_manager.generate_producer_id()
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
