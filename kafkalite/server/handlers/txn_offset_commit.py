"""TxnOffsetCommit (key 28), v0-3: a transactional producer's consumer offsets
(sendOffsetsToTransaction), written to `__consumer_offsets` inside the producer's transaction and
visible to OffsetFetch only once the transaction commits.

As Kafka's KafkaApis.handleTxnOffsetCommitRequest: a topic this broker does not know, or a
partition it does not have, gets UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator;
v2 adds the committed leader epoch, v3 the member id, generation and group instance id (checked
like an OffsetCommit's: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). Before v2,
COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE: clients from 0.11 to 2.0
did not expect the loading error (KAFKA-7296). A fenced producer (stale epoch) gets
INVALID_PRODUCER_EPOCH from the log append, as from Kafka's.
"""
from __future__ import annotations

import time

from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from kafkalite.coordinator.group.types import OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 28
MIN_VERSION, MAX_VERSION = 0, 3
MIN_LEADER_EPOCH_VERSION = 2
MIN_MEMBER_VERSION = 3
MIN_LOAD_IN_PROGRESS_VERSION = 2


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator
    cache = services.metadata_cache

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
        if to_commit:
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
