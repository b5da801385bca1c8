"""EndTxn (key 26), v0-4: commit or abort. Answered once PrepareCommit/PrepareAbort is durable
in `__transaction_state`; the markers follow. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

v4 (KIP-890 part 1) only tells the broker the client understands TRANSACTION_ABORTABLE; Kafka
3.9's coordinator never answers it to EndTxn, so v4 is answered as v3. v5 (the epoch bump per
transaction, KIP-890 part 2) is not implemented."""
from __future__ import annotations

from kafka.protocol.producer.transaction import EndTxnRequest, EndTxnResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 26
MIN_VERSION, MAX_VERSION = 0, 4


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
        v = ctx.api_version
        error = await services.transaction_coordinator.handle_end_transaction(
            req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed))
        if v < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return EndTxnResponse[v](throttle_time_ms=0, error_code=error)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
