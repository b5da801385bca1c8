"""CreatePartitions (key 37), v0-3: raise a topic's partition count. Only increases; existing
partitions keep their data (keys hashed before the change stay where they were; producers hash
new records over the new count). New partitions are led by this broker from leader epoch 0.
A topic named twice in one request gets INVALID_REQUEST "Duplicate topic in request.", as in
Kafka."""
from __future__ import annotations

from collections import Counter

from kafka.protocol.admin.topics import CreatePartitionsRequest, CreatePartitionsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 37
MIN_VERSION, MAX_VERSION = 0, 3


def make(services: BrokerServices) -> ApiSpec:
    admin = services.admin_manager

    async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
        Resp = CreatePartitionsResponse[ctx.api_version]
        R = Resp.CreatePartitionsTopicResult
        counts = Counter(t.name for t in req.topics)
        out = []
        for t in req.topics:
            if counts[t.name] > 1:
                if t.name not in {r.name for r in out}:
                    out.append(R(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                 error_message="Duplicate topic in request."))
                continue
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            code, message = await admin.create_partitions(t.name, t.count, assignments, bool(req.validate_only),
                                                          req.timeout_ms)
            out.append(R(name=t.name, error_code=code, error_message=message))
        return Resp(throttle_time_ms=0, results=out)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
