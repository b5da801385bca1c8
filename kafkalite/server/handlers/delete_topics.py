"""DeleteTopics (key 20): by name, or from v6 by topic id."""
from __future__ import annotations

import uuid
from typing import Optional

from kafka.protocol.admin.topics import DeleteTopicsRequest, DeleteTopicsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.metadata import ZERO_UUID
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 20
MIN_VERSION, MAX_VERSION = 0, 6


def _requested(req: DeleteTopicsRequest, v: int) -> list[tuple[Optional[str], uuid.UUID]]:
    """(name, topic id) per requested topic, in request order; v0-5 name topics only."""
    if v >= 6:
        return [(t.name, t.topic_id or ZERO_UUID) for t in req.topics]
    return [(name, ZERO_UUID) for name in req.topic_names]


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
        v = ctx.api_version
        Resp = DeleteTopicsResponse[v]
        R = Resp.DeletableTopicResult
        requested = _requested(req, v)
        if any(name is not None and tid != ZERO_UUID for name, tid in requested):
            # Kafka's handler throws InvalidRequestException: every topic gets INVALID_REQUEST
            return Resp(throttle_time_ms=0, responses=[
                R(name=name, topic_id=tid, error_code=ErrorCode.INVALID_REQUEST, error_message=None)
                for name, tid in requested])
        # As Kafka's KafkaApis: one result per requested topic, in request order, carrying the
        # request's topic id (zero when named); an id is resolved to its name first. Only error
        # codes: a ZooKeeper-mode broker sets no error message here.
        resolved = [(services.metadata_cache.topic_name(tid) if tid != ZERO_UUID else name, tid)
                    for name, tid in requested]
        to_delete = [name for name, _ in resolved if name is not None and services.metadata_cache.contains(name)]
        errors = {}
        for r in await services.admin_manager.delete_topics(list(dict.fromkeys(to_delete)), req.timeout_ms):
            errors[r.name] = r.error
            if r.error == ErrorCode.NONE and r.record is not None:
                services.fetch_sessions.remove_topic(r.record.topic_id, r.name)
        out = []
        for name, tid in resolved:
            if name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID if tid != ZERO_UUID else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                error = errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            out.append(R(name=name, topic_id=tid, error_code=error, error_message=None))
        return Resp(throttle_time_ms=0, responses=out)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
