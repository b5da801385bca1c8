"""TxnOffsetCommit (key 28), v0-4: a transactional producer's consumer offsets
(sendOffsetsToTransaction), written to `__consumer_offsets` inside the producer's transaction and
visible to OffsetFetch only once the transaction commits.

As Kafka's KafkaApis.handleTxnOffsetCommitRequest: a topic this broker does not know, or a
partition it does not have, gets UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator;
v2 adds the committed leader epoch, v3 the member id, generation and group instance id (checked
like an OffsetCommit's: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). Before v2,
COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE: clients from 0.11 to 2.0
did not expect the loading error (KAFKA-7296). A fenced producer (stale epoch) gets
INVALID_PRODUCER_EPOCH from the log append, as from Kafka's.

Transaction verification (KIP-890, Kafka 3.6+ GroupCoordinator.handleTxnCommitOffsets): once the
group's status is fine, the group's `__consumer_offsets` partition must be in the producer's
transaction (AddOffsetsToTxn put it there) unless the producer already has a transaction open on
it; otherwise every offset is refused (the coordinator's TRANSACTION_ABORTABLE from v4, KIP-890
part 1; INVALID_TXN_STATE up to v3, where Kafka turns TRANSACTION_ABORTABLE into it;
PRODUCER_FENCED as INVALID_PRODUCER_EPOCH) and nothing is written. Kafka's
maybeConvertOffsetCommitError applies to those errors. v5 (the implicit AddOffsetsToTxn of
transaction version 2, KIP-890 part 2) is not implemented.
"""
from __future__ import annotations

import time

from kafka.protocol.producer.transaction import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from kafkalite.coordinator.group.types import OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import GROUP_METADATA_TOPIC_NAME
from kafkalite.server.txn_verification import (TransactionVerifier, txn_offset_commit_error,
                                               txn_offset_commit_operation)

API_KEY = 28
MIN_VERSION, MAX_VERSION = 0, 4
MIN_LEADER_EPOCH_VERSION = 2
MIN_MEMBER_VERSION = 3
MIN_LOAD_IN_PROGRESS_VERSION = 2


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator
    cache = services.metadata_cache
    # (unit tests build this handler with a group coordinator and a metadata cache only)
    verifier = TransactionVerifier(services.live_config, services.replica_manager, services.transaction_coordinator,
                                   cache, getattr(services, "add_partitions_to_txn_manager", None), services.broker_id) \
        if hasattr(services, "transaction_coordinator") else None

    async def verification_error(v: int, req: TxnOffsetCommitRequest) -> ErrorCode:
        """The verification of the group's `__consumer_offsets` partition; its last step is
        synchronous, so nothing runs between it and the coordinator's append."""
        op = txn_offset_commit_operation(v)
        group_id = req.group_id
        if verifier is None or not verifier.applies(req.transactional_id, op):
            return ErrorCode.NONE
        # Kafka checks the group's status first: those errors are the coordinator's to answer.
        if not group_id or not coordinator.is_active or coordinator.is_group_loading(group_id) \
                or not coordinator.is_group_local(group_id):
            return ErrorCode.NONE
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(group_id))
        failed = await verifier.verify_before_append(req.transactional_id, req.producer_id, req.producer_epoch,
                                                     [tp], op)
        return txn_offset_commit_error(failed.get(tp, ErrorCode.NONE))

    def partition_exists(topic: str, partition: int) -> bool:
        info = cache.topic(topic)
        return info is not None and partition in info.partitions

    async def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        v = ctx.api_version
        now = time.time_ns() // 1_000_000
        order: list[tuple[str, int]] = []           # request order, duplicates once
        errors: dict[tuple[str, int], ErrorCode] = {}
        to_commit: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t in req.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp not in errors and tp not in to_commit:
                    order.append(tp)
                if not partition_exists(t.name, p.partition_index):
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                # a repeated partition: the last entry wins, as Kafka's request map keeps it
                to_commit[tp] = OffsetAndMetadata(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if v >= MIN_LEADER_EPOCH_VERSION else -1,
                    metadata=p.committed_metadata if p.committed_metadata is not None else "",
                    commit_timestamp=now)
        verify_error = await verification_error(v, req) if to_commit else ErrorCode.NONE
        if verify_error != ErrorCode.NONE:
            errors.update({tp: verify_error for tp in to_commit})
        elif to_commit:
            member = v >= MIN_MEMBER_VERSION
            results = await coordinator.handle_txn_commit_offsets(
                req.group_id, req.transactional_id, req.producer_id, req.producer_epoch,
                req.member_id if member else "", req.group_instance_id if member else None,
                req.generation_id if member else -1, to_commit)
            errors.update(results)
        if v < MIN_LOAD_IN_PROGRESS_VERSION:
            errors = {tp: (ErrorCode.COORDINATOR_NOT_AVAILABLE if e == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                           else e) for tp, e in errors.items()}
        Resp = TxnOffsetCommitResponse[v]
        T = Resp.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        by_topic: dict[str, list] = {}
        for topic, partition in order:
            by_topic.setdefault(topic, []).append(P(partition_index=partition,
                                                    error_code=errors[(topic, partition)]))
        return Resp(throttle_time_ms=0, topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
