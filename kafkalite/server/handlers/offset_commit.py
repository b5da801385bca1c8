"""OffsetCommit (key 8), v1-10: committed offsets of a group's partitions, stored in
`__consumer_offsets` (v0, which Kafka 3.9 stores in ZooKeeper, is not served).

Partitions of topics this broker does not know get UNKNOWN_TOPIC_OR_PARTITION (v10, which names
topics by id: UNKNOWN_TOPIC_ID for an unknown id) without reaching the coordinator, as in Kafka.
v1 may carry each partition's commit timestamp; v2-4 a retention time (an explicit expire
timestamp per offset); later versions use `offsets.retention.minutes`. v6 adds the leader epoch,
v7 the group instance id; at v10 (Kafka 4 only) a commit with a generation for a group that does
not exist gets GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION.
"""
from __future__ import annotations

import time
import uuid
from typing import Optional

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from kafkalite.coordinator.group.types import OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 8
MIN_VERSION, MAX_VERSION = 1, 10
DEFAULT_TIMESTAMP = -1   # OffsetCommitRequest.DEFAULT_TIMESTAMP
MIN_TOPIC_ID_VERSION = 10
DEFAULT_RETENTION_TIME = -1
ZERO_UUID = uuid.UUID(int=0)


def commit_timestamp_of(version: int, requested: int, now_ms: int) -> int:
    """v1 may name each partition's commit timestamp (GroupCoordinatorAdapter.createOffsetAndMetadata:
    -1 means now); other versions commit at the broker's time."""
    return requested if version == 1 and requested != DEFAULT_TIMESTAMP else now_ms


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator
    cache = services.metadata_cache

    def partition_exists(topic: str, partition: int) -> bool:
        info = cache.topic(topic)
        return info is not None and partition in info.partitions

    async def handle(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
        v = ctx.api_version
        use_ids = v >= MIN_TOPIC_ID_VERSION
        now = time.time_ns() // 1_000_000
        retention = req.retention_time_ms if 2 <= v <= 4 else DEFAULT_RETENTION_TIME
        expire = -1 if retention == DEFAULT_RETENTION_TIME else now + retention
        # (topic key in the response, partition) in request order, with the error or None
        order: list[tuple[tuple[str, uuid.UUID], int]] = []
        errors: dict[tuple[tuple[str, uuid.UUID], int], ErrorCode] = {}
        to_commit: dict[tuple[str, int], OffsetAndMetadata] = {}
        key_of: dict[tuple[str, int], tuple[tuple[str, uuid.UUID], int]] = {}
        for t in req.topics:
            topic_id = t.topic_id if use_ids else ZERO_UUID
            name: Optional[str] = (cache.topic_name(topic_id) if topic_id != ZERO_UUID else None) if use_ids else t.name
            tkey = (name or "", topic_id)
            for p in t.partitions:
                k = (tkey, p.partition_index)
                order.append(k)
                if use_ids and name is None:
                    errors[k] = ErrorCode.UNKNOWN_TOPIC_ID
                elif name is None or not partition_exists(name, p.partition_index):
                    errors[k] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    tp = (name, p.partition_index)
                    to_commit[tp] = OffsetAndMetadata(
                        offset=p.committed_offset,
                        leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                        metadata=p.committed_metadata if p.committed_metadata is not None else "",
                        commit_timestamp=commit_timestamp_of(v, p.commit_timestamp, now), expire_timestamp=expire)
                    key_of[tp] = k
        if to_commit:
            results = await coordinator.handle_commit_offsets(
                req.group_id, req.member_id, req.group_instance_id if v >= 7 else None,
                req.generation_id_or_member_epoch, to_commit, v)
            for tp, error in results.items():
                errors[key_of[tp]] = error
        Resp = OffsetCommitResponse[v]
        T = Resp.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        by_topic: dict[tuple[str, uuid.UUID], list] = {}
        for k in dict.fromkeys(order):
            by_topic.setdefault(k[0], []).append(P(partition_index=k[1], error_code=errors[k]))
        return Resp(throttle_time_ms=0,
                    topics=[T(name=name, topic_id=tid, partitions=parts) for (name, tid), parts in by_topic.items()])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
