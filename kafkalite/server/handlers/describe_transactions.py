"""DescribeTransactions (key 65), v0: the state of transactional ids this broker coordinates
(NOT_COORDINATOR for others, TRANSACTIONAL_ID_NOT_FOUND (105) for unknown ids)."""
from __future__ import annotations

from kafka.protocol.admin.transactions import DescribeTransactionsRequest, DescribeTransactionsResponse

from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 65
MIN_VERSION, MAX_VERSION = 0, 0


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        Resp = DescribeTransactionsResponse[ctx.api_version]
        State = Resp.TransactionState
        Topic = State.TopicData
        states = []
        for txn_id in req.transactional_ids or ():
            d = services.transaction_coordinator.handle_describe_transactions(txn_id)
            if d.error_code != 0:
                # Kafka sets only the error on a fresh TransactionState: every other field keeps
                # its schema default (0, "", no topics)
                states.append(State(error_code=d.error_code, transactional_id=txn_id, transaction_state="",
                                    transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                                    producer_epoch=0, topics=[]))
                continue
            states.append(State(error_code=d.error_code, transactional_id=txn_id, transaction_state=d.state_name,
                                transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_time_ms,
                                producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                                topics=[Topic(topic=t, partitions=ps) for t, ps in d.topics.items()]))
        return Resp(throttle_time_ms=0, transaction_states=states)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
