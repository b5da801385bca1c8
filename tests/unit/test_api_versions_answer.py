"""ApiVersions is answered from an encoding made once per version: the same bytes as kafka-python's
codec writes for the response object (header v0 at every version, KIP-511), a new encoding when
the broker's handler set changes, and KIP-511's INVALID_REQUEST for a bad client software name."""
from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from kafkalite.network.socket_server import ConnectionInfo
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.header import RequestHeader
from kafkalite.server.encoded_response import EncodedResponse
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.api_versions import FINALIZED_FEATURES_EPOCH, make
from kafkalite.server.request_context import RequestContext

CONN = ConnectionInfo("c", "PLAINTEXT", "127.0.0.1", 1)


async def _nothing(ctx: Any, req: Any) -> None:
    return None


def ask(spec: ApiSpec, v: int, software: str = "kafkalite-test") -> Any:
    req = ApiVersionsRequest[v](client_software_name=software, client_software_version="1.0")
    return asyncio.run(spec.handler(RequestContext(RequestHeader(18, v, 5, "t"), CONN), req))


def expected_frame(v: int, ranges: list[tuple[int, int, int]], correlation_id: int) -> bytes:
    R = ApiVersionsResponse[v]
    resp = R(error_code=0, throttle_time_ms=0, finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
             api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges])
    resp.API_VERSION = v
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def test_the_encoded_answer_is_the_codecs_for_every_version_and_follows_the_handler_set() -> None:
    specs = [ApiSpec(3, 0, 13, _nothing), ApiSpec(0, 0, 13, _nothing)]
    spec = make(lambda: specs + [api_versions])
    api_versions = ApiSpec(18, 0, 4, spec.handler)
    ranges = [(0, 0, 13), (3, 0, 13), (18, 0, 4)]
    for v in range(5):
        first = ask(spec, v)
        assert isinstance(first, EncodedResponse)
        assert first.frame(77) == expected_frame(v, ranges, 77), v
        assert ask(spec, v) is first          # encoded once
        decoded = ApiVersionsResponse[v].decode(first.frame(77)[4:], header=True)
        assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == ranges
    specs.append(ApiSpec(1, 0, 18, _nothing))
    for v in range(5):
        assert ask(spec, v).frame(3) == expected_frame(v, [(0, 0, 13), (1, 0, 18)] + ranges[1:], 3), v


def test_a_malformed_client_software_name_is_invalid_request_from_v3() -> None:
    spec = make(lambda: [ApiSpec(18, 0, 4, _nothing)])
    for v in (3, 4):
        resp = ask(spec, v, software="-bad name-")
        assert (resp.error_code, resp.api_keys) == (ErrorCode.INVALID_REQUEST, []), v
    assert isinstance(ask(spec, 2, software="-bad name-"), EncodedResponse)   # not checked below v3
