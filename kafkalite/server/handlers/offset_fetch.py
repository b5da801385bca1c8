"""OffsetFetch (key 9), v1-10: a group's committed offsets (-1 and empty metadata for partitions
without one), for the listed partitions or, from v2 with null topics, all of them.

v2 adds the top-level error, v5 the leader epoch, v7 RequireStable, v8 many groups per request
(the per-group error replaces the top-level one), v10 names topics by id (UNKNOWN_TOPIC_ID for an
unknown id; offsets of topics that no longer exist cannot be named and are left out of an
all-topics answer). v9's member id and epoch only concern KIP-848 groups, which this broker does
not have; classic groups ignore them, as Kafka does.
"""
from __future__ import annotations

import uuid
from typing import Any, Optional

from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

from kafkalite.coordinator.group.group_coordinator import INVALID_OFFSET, NO_METADATA, OffsetFetchPartitionData
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 9
MIN_VERSION, MAX_VERSION = 1, 10
MIN_MULTI_GROUP_VERSION = 8
MIN_TOPIC_ID_VERSION = 10
ZERO_UUID = uuid.UUID(int=0)

TopicKey = tuple[str, uuid.UUID]   # (name, id): what the answer names a topic by


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator
    cache = services.metadata_cache

    def fetch_group(group_id: str, topics: Optional[list[Any]], require_stable: bool, use_ids: bool
                    ) -> tuple[ErrorCode, list[tuple[TopicKey, list[tuple[int, OffsetFetchPartitionData]]]]]:
        """(group error, [(topic, [(partition, data)])]) in request order."""
        unknown_ids: list[tuple[TopicKey, list[int]]] = []
        wanted: Optional[list[tuple[str, int]]] = None
        order: list[TopicKey] = []
        known: dict[str, TopicKey] = {}
        if topics is not None:
            wanted = []
            for t in topics:
                if use_ids:
                    name = cache.topic_name(t.topic_id) if t.topic_id != ZERO_UUID else None
                    if name is None:
                        unknown_ids.append(((t.name or "", t.topic_id), list(t.partition_indexes)))
                        order.append((t.name or "", t.topic_id))
                        continue
                    key: TopicKey = (name, t.topic_id)
                else:
                    key = (t.name, ZERO_UUID)
                order.append(key)
                known[key[0]] = key
                wanted.extend((key[0], p) for p in t.partition_indexes)
        error, data = coordinator.handle_fetch_offsets(group_id, require_stable, wanted)
        if error != ErrorCode.NONE:
            return error, []
        by_topic: dict[TopicKey, list[tuple[int, OffsetFetchPartitionData]]] = {k: [] for k in order}
        unknown = OffsetFetchPartitionData(INVALID_OFFSET, -1, NO_METADATA, ErrorCode.UNKNOWN_TOPIC_ID)
        for key, partitions in unknown_ids:
            by_topic[key] = [(p, unknown) for p in partitions]
        if topics is not None:
            for (topic, partition), d in data.items():
                by_topic[known[topic]].append((partition, d))
        else:
            for (topic, partition), d in sorted(data.items()):
                if use_ids:
                    tid = cache.topic_id(topic)
                    if tid is None:
                        continue  # a deleted topic has no id to be named by
                    key = (topic, tid)
                else:
                    key = (topic, ZERO_UUID)
                by_topic.setdefault(key, []).append((partition, d))
        return ErrorCode.NONE, list(by_topic.items())

    async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
        v = ctx.api_version
        Resp = OffsetFetchResponse[v]
        require_stable = bool(req.require_stable) if v >= 7 else False
        if v < MIN_MULTI_GROUP_VERSION:
            T = Resp.OffsetFetchResponseTopic
            P = T.OffsetFetchResponsePartition
            error, topics = fetch_group(req.group_id, req.topics, require_stable, False)
            if error != ErrorCode.NONE and v < 2:
                # no top-level error before v2: each requested partition carries it
                return Resp(throttle_time_ms=0, topics=[
                    T(name=t.name, partitions=[P(partition_index=p, committed_offset=INVALID_OFFSET,
                                                 committed_leader_epoch=-1, metadata=NO_METADATA, error_code=error)
                                               for p in t.partition_indexes])
                    for t in (req.topics or [])])
            return Resp(throttle_time_ms=0, error_code=error, topics=[
                T(name=name, partitions=[P(partition_index=p, committed_offset=d.offset,
                                           committed_leader_epoch=d.leader_epoch, metadata=d.metadata,
                                           error_code=d.error) for p, d in parts])
                for (name, _tid), parts in topics])
        G = Resp.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        use_ids = v >= MIN_TOPIC_ID_VERSION
        groups = []
        for g in req.groups:
            error, topics = fetch_group(g.group_id, g.topics, require_stable, use_ids)
            groups.append(G(group_id=g.group_id, error_code=error, topics=[
                T(name=name, topic_id=tid,
                  partitions=[P(partition_index=p, committed_offset=d.offset, committed_leader_epoch=d.leader_epoch,
                                metadata=d.metadata, error_code=d.error) for p, d in parts])
                for (name, tid), parts in topics]))
        return Resp(throttle_time_ms=0, groups=groups)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
