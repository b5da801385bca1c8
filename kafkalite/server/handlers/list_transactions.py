"""ListTransactions (key 66), v0-1: the transactions this broker coordinates, filtered by state
names and producer ids; v1 adds the duration filter (only transactions running longer than it).
Unknown state names are echoed in unknown_state_filters; while a partition loads the answer is
COORDINATOR_LOAD_IN_PROGRESS."""
from __future__ import annotations

from kafka.protocol.admin.transactions import ListTransactionsRequest, ListTransactionsResponse

from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 66
MIN_VERSION, MAX_VERSION = 0, 1


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
        v = ctx.api_version
        Resp = ListTransactionsResponse[v]
        duration = req.duration_filter if v >= 1 else -1
        result = services.transaction_coordinator.handle_list_transactions(
            [p for p in req.producer_id_filters or ()], [s for s in req.state_filters or () if s is not None],
            duration)
        State = Resp.TransactionState
        return Resp(throttle_time_ms=0, error_code=result.error, unknown_state_filters=result.unknown_state_filters,
                    transaction_states=[State(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                              transaction_state=t.state_name) for t in result.transactions])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
