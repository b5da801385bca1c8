"""OffsetDelete (key 47): deletes committed offsets of a group. An Empty group loses any of them;
a consumer group with members keeps those of topics it subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC); any other group with members refuses (NON_EMPTY_GROUP). Partitions
of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; a group-level error empties the answer."""
from __future__ import annotations

from kafka.protocol.consumer.group import OffsetDeleteRequest, OffsetDeleteResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 47
MIN_VERSION, MAX_VERSION = 0, 0


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator
    cache = services.metadata_cache

    async def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
        v = ctx.api_version
        errors: dict[tuple[str, int], ErrorCode] = {}
        order: list[tuple[str, int]] = []
        eligible: list[tuple[str, int]] = []
        for t in req.topics:
            info = cache.topic(t.name)
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                order.append(tp)
                if info is None or p.partition_index not in info.partitions:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    eligible.append(tp)
        group_error, partition_errors = await coordinator.handle_delete_offsets(req.group_id, eligible)
        Resp = OffsetDeleteResponse[v]
        if group_error != ErrorCode.NONE:
            return Resp(error_code=group_error, throttle_time_ms=0, topics=[])
        errors.update(partition_errors)
        T = Resp.OffsetDeleteResponseTopic
        P = T.OffsetDeleteResponsePartition
        by_topic: dict[str, list] = {}
        for tp in dict.fromkeys(order):
            by_topic.setdefault(tp[0], []).append(P(partition_index=tp[1], error_code=errors[tp]))
        return Resp(error_code=ErrorCode.NONE, throttle_time_ms=0,
                    topics=[T(name=name, partitions=parts) for name, parts in by_topic.items()])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
