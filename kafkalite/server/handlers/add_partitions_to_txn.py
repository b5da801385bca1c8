"""AddPartitionsToTxn (key 24), v0-5.

v0-3 (clients): one transaction. v4-5 (brokers, KIP-890: another broker's
AddPartitionsToTxnManager): a batch of transactions, handled concurrently, each either added or,
with verify_only, checked (a partition not in the transaction: TRANSACTION_ABORTABLE,
at v4 as at v5 — Kafka 3.9's coordinator answers it whatever the version; v5 only announces that
the sending broker understands it). As Kafka's KafkaApis: clients (v0-3) may not add internal
topics (Kafka leaves them out of the topics it authorizes: TOPIC_AUTHORIZATION_FAILED); if any
partition of a transaction is refused or unknown (UNKNOWN_TOPIC_OR_PARTITION), the others get
OPERATION_NOT_ATTEMPTED and nothing is added; otherwise every partition gets the coordinator's
answer (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2).
"""
from __future__ import annotations

import asyncio

from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import is_internal

API_KEY = 24
MIN_VERSION, MAX_VERSION = 0, 5
MIN_BATCHED_VERSION = 4


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache

    def known(tp: TopicPartition) -> bool:
        topic = cache.topic(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    async def one_transaction(v: int, transactional_id: str, producer_id: int, producer_epoch: int,
                              verify_only: bool, topics) -> dict[TopicPartition, int]:
        partitions = list(dict.fromkeys(TopicPartition(t.name, p) for t in topics or () for p in t.partitions or ()))
        refused: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            if v < MIN_BATCHED_VERSION and is_internal(tp.topic):
                refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not known(tp):
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if refused:
            return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        coordinator = services.transaction_coordinator
        if verify_only:
            return dict(coordinator.handle_verify_partitions_in_transaction(
                transactional_id, producer_id, producer_epoch, partitions))
        error = await coordinator.handle_add_partitions_to_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
        if v < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return {tp: error for tp in partitions}

    def topic_results(Resp, errors: dict[TopicPartition, int]) -> list:
        TopicResult = Resp.AddPartitionsToTxnTopicResult
        PartResult = TopicResult.AddPartitionsToTxnPartitionResult
        by_topic: dict[str, list] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(PartResult(partition_index=tp.partition,
                                                                partition_error_code=error))
        return [TopicResult(name=name, results_by_partition=parts) for name, parts in by_topic.items()]

    async def handle(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        v = ctx.api_version
        Resp = AddPartitionsToTxnResponse[v]
        if v < MIN_BATCHED_VERSION:
            errors = await one_transaction(v, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                           req.v3_and_below_producer_epoch, False, req.v3_and_below_topics)
            return Resp(throttle_time_ms=0, results_by_topic_v3_and_below=topic_results(Resp, errors))
        # the transactions of a batch (another broker's verifications) are handled concurrently,
        # as Kafka's handler does, and answered together
        txns = list(req.transactions or ())
        answers = await asyncio.gather(*(one_transaction(v, txn.transactional_id, txn.producer_id,
                                                         txn.producer_epoch, txn.verify_only, txn.topics)
                                         for txn in txns))
        results = [Resp.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                 topic_results=topic_results(Resp, errors))
                   for txn, errors in zip(txns, answers)]
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
