"""ApiVersions (key 18): the (api, version range) pairs this broker implements completely."""
from __future__ import annotations

import re
from typing import Callable

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

# KIP-511: client software name and version must match this (checked from v3 on)
_SOFTWARE_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

API_KEY = 18
MIN_VERSION, MAX_VERSION = 0, 4
# A ZooKeeper-mode Kafka broker reports the epoch of its (empty) finalized-feature ZNode, which
# the controller creates at version 0 (KIP-584); the schema default -1 would mean "unknown".
FINALIZED_FEATURES_EPOCH = 0


def make(all_specs: Callable[[], list[ApiSpec]]) -> ApiSpec:
    async def handle(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
        v = ctx.api_version
        Resp = ApiVersionsResponse[v]
        if v >= 3 and not (_SOFTWARE_RE.match(req.client_software_name or "")
                           and _SOFTWARE_RE.match(req.client_software_version or "")):
            return Resp(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        keys = [Resp.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
                for s in sorted(all_specs(), key=lambda s: s.api_key)]
        return Resp(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0,
                    finalized_features_epoch=FINALIZED_FEATURES_EPOCH)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
