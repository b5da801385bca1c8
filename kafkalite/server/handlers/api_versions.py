"""ApiVersions (key 18): the (api, version range) pairs this broker implements completely.

Every connection starts with it and the answer only changes with the broker's handlers, so it is
encoded once per version (and per handler set) and framed per request: building and encoding ~45
entries took ~0.1 ms per request on the event loop."""
from __future__ import annotations

import re
from typing import Callable

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.encoded_response import EncodedResponse
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
    encoded: dict[int, tuple[tuple[tuple[int, int, int], ...], EncodedResponse]] = {}   # version -> (ranges, answer)

    def answer(v: int) -> EncodedResponse:
        ranges = tuple(sorted((s.api_key, s.min_version, s.max_version) for s in all_specs()))
        found = encoded.get(v)
        if found is None or found[0] != ranges:
            Resp = ApiVersionsResponse[v]
            resp = Resp(error_code=ErrorCode.NONE, throttle_time_ms=0,
                        api_keys=[Resp.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges],
                        finalized_features_epoch=FINALIZED_FEATURES_EPOCH)
            resp.API_VERSION = v
            # response header v0 at every version, tagged fields or not (KIP-511: a client that
            # sent a version the broker does not know must still read the header)
            found = encoded[v] = (ranges, EncodedResponse(bytes(resp.encode(header=False, framed=False)), False))
        return found[1]

    async def handle(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse | EncodedResponse:
        v = ctx.api_version
        Resp = ApiVersionsResponse[v]
        if v >= 3 and not (_SOFTWARE_RE.match(req.client_software_name or "")
                           and _SOFTWARE_RE.match(req.client_software_version or "")):
            return Resp(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        return answer(v)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
