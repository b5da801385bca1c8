"""DeleteTopics (key 20): by name, or from v6 by topic id."""
from __future__ import annotations

from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.metadata import ZERO_UUID
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 20
MIN_VERSION, MAX_VERSION = 1, 6


def make(services: BrokerServices) -> ApiSpec:
    async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
        v = ctx.api_version
        Resp = DeleteTopicsResponse[v]
        R = Resp.DeletableTopicResult
        out = []
        names: list[str] = []
        if v >= 6:
            for t in req.topics:
                has_id = t.topic_id is not None and t.topic_id != ZERO_UUID
                if t.name is not None and has_id:
                    out.append(R(name=t.name, topic_id=t.topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                 error_message="Topic name and topic id may not both be set"))
                elif has_id:
                    name = services.metadata_cache.topic_name(t.topic_id)
                    if name is None:
                        out.append(R(name=None, topic_id=t.topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                     error_message="This server does not host this topic ID."))
                    else:
                        names.append(name)
                elif t.name is not None:
                    names.append(t.name)
                else:
                    out.append(R(name=None, topic_id=ZERO_UUID, error_code=ErrorCode.INVALID_REQUEST,
                                 error_message="Either a topic name or a topic id must be set"))
        else:
            names = list(req.topic_names)
        for r in services.controller.delete_topics(list(dict.fromkeys(names))):
            tid = r.record.topic_id if r.record is not None else ZERO_UUID
            if r.error == ErrorCode.NONE and r.record is not None:
                services.fetch_sessions.remove_topic(r.record.topic_id, r.name)
            out.append(R(name=r.name, topic_id=tid, error_code=r.error,
                         error_message=r.message if r.error != ErrorCode.NONE else None))
        return Resp(throttle_time_ms=0, responses=out)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
