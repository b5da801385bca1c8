"""KafkaApis dispatch: version gating, Kafka's ApiVersions fallback (ApiVersionsRequest.getErrorResponse),
closing on garbage, and response framing — driven directly with a tiny handler list."""
from __future__ import annotations

import asyncio
import struct
from typing import Any, Optional

import pytest
from kafka.protocol.api_header import RequestHeader as KpRequestHeader
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
                                     MetadataResponse)

from kafkalite.network.socket_server import CloseConnection, ConnectionInfo
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.kafka_apis import KafkaApis
from kafkalite.server.request_context import RequestContext

CONN = ConnectionInfo("127.0.0.1:9092-127.0.0.1:50000-0", "PLAINTEXT", "127.0.0.1", 50000)


class Recorder:
    """Handlers that remember what they were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[RequestContext, Any]] = []

    async def api_versions(self, ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
        self.calls.append((ctx, req))
        resp_cls = ApiVersionsResponse[ctx.api_version]
        return resp_cls(error_code=0, throttle_time_ms=0, api_keys=[
            resp_cls.ApiVersion(api_key=3, min_version=1, max_version=9),
            resp_cls.ApiVersion(api_key=18, min_version=0, max_version=3)])

    async def metadata(self, ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
        self.calls.append((ctx, req))
        v = ctx.api_version
        resp_cls = MetadataResponse[v]
        broker = resp_cls.MetadataResponseBroker(node_id=0, host="localhost", port=9092, rack=None)
        kw: dict = {"brokers": [broker], "controller_id": 0, "topics": []}
        if v >= 2:
            kw["cluster_id"] = "kafkalite-cluster"
        if v >= 3:
            kw["throttle_time_ms"] = 0
        return resp_cls(**kw)

    async def silent(self, ctx: RequestContext, req: Any) -> None:
        self.calls.append((ctx, req))
        return None


def make_apis(rec: Recorder, api_versions_range: tuple[int, int] = (0, 3),
              metadata_range: tuple[int, int] = (1, 9), silent_metadata: bool = False) -> KafkaApis:
    return KafkaApis([
        ApiSpec(18, *api_versions_range, rec.api_versions),
        ApiSpec(3, *metadata_range, rec.silent if silent_metadata else rec.metadata),
    ])


def handle(apis: KafkaApis, frame: bytes) -> Optional[bytes]:
    return asyncio.run(apis.handle_frame(CONN, memoryview(frame)))


def encoded(req: Any, correlation_id: int, client_id: Optional[str] = "test-client") -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return req.encode(header=True)


def metadata_request(v: int) -> MetadataRequest:
    kw: dict = {"topics": None}
    if v >= 4:
        kw["allow_auto_topic_creation"] = False
    if 8 <= v <= 10:
        kw["include_cluster_authorized_operations"] = False
    if v >= 8:
        kw["include_topic_authorized_operations"] = False
    return MetadataRequest[v](**kw)


def split_response(frame: bytes, flexible_header: bool) -> tuple[int, bytes]:
    """(correlation id, body) of a size-prefixed response frame."""
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    if flexible_header:
        assert frame[8] == 0  # response header v1: no tagged fields
        return correlation_id, frame[9:]
    return correlation_id, frame[8:]


# --- the ApiVersions fallback -------------------------------------------------------------------

def unsupported_api_versions_bytes(correlation_id: int, lo: int, hi: int) -> bytes:
    # ApiVersionsResponse v0 with response header v0: error_code, [api_key, min, max]
    body = struct.pack(">hihhh", 35, 1, 18, lo, hi)
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def test_unsupported_api_versions_version_gets_error_35_in_v0_layout() -> None:
    rec = Recorder()
    apis = make_apis(rec, api_versions_range=(0, 2))
    frame = encoded(ApiVersionsRequest[3](client_software_name="kafka-python", client_software_version="3.0"),
                    correlation_id=4242)
    out = handle(apis, frame)
    assert out == unsupported_api_versions_bytes(4242, 0, 2)
    resp = ApiVersionsResponse.decode(out[8:], version=0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 2)]
    assert rec.calls == []  # the handler never sees it


@pytest.mark.parametrize("version", [4, 5, 127, 32767])
def test_future_api_versions_versions_fall_back(version: int) -> None:
    # a newer client sends a version neither kafka-python nor we know, with a v2 (flexible) header
    rec = Recorder()
    apis = make_apis(rec, api_versions_range=(0, 3))
    header = KpRequestHeader(request_api_key=18, request_api_version=version, correlation_id=77,
                             client_id="future-client").encode(flexible=True)
    out = handle(apis, header + b"\x0bfuture-body\x00unparseable")
    assert out == unsupported_api_versions_bytes(77, 0, 3)
    assert rec.calls == []


@pytest.mark.parametrize("version", [-1, -32768])
def test_negative_api_versions_versions_fall_back(version: int) -> None:
    rec = Recorder()
    apis = make_apis(rec, api_versions_range=(1, 3))
    header = KpRequestHeader(request_api_key=18, request_api_version=version, correlation_id=-9,
                             client_id=None).encode(flexible=False)
    assert handle(apis, header) == unsupported_api_versions_bytes(-9, 1, 3)


def test_unsupported_api_versions_with_a_garbage_header_closes() -> None:
    # Kafka parses the header first (v2 from version 3): a client id running past the frame closes
    apis = make_apis(Recorder(), api_versions_range=(0, 2))
    frame = struct.pack(">hhih", 18, 9, 1, 50) + b"short"
    with pytest.raises(CloseConnection):
        handle(apis, frame)
    # flexible header without its tagged-field section
    frame = struct.pack(">hhih", 18, 9, 1, 2) + b"ab"
    with pytest.raises(CloseConnection):
        handle(apis, frame)


# --- closing the connection ----------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 10, 12])
def test_unsupported_version_of_another_api_closes(version: int) -> None:
    rec = Recorder()
    apis = make_apis(rec, metadata_range=(1, 9))
    with pytest.raises(CloseConnection):
        handle(apis, encoded(metadata_request(version), correlation_id=1))
    assert rec.calls == []


def test_unknown_api_key_closes() -> None:
    rec = Recorder()
    apis = make_apis(rec)
    for api_key in (-1, 1, 9999, 32767):  # 1 (Fetch) is a real key, just not registered here
        header = KpRequestHeader(request_api_key=api_key, request_api_version=0, correlation_id=1,
                                 client_id="c").encode(flexible=False)
        with pytest.raises(CloseConnection):
            handle(apis, header + b"\x00\x00\x00\x00")
    assert rec.calls == []


def test_api_versions_unregistered_closes_like_any_unknown_api() -> None:
    rec = Recorder()
    apis = KafkaApis([ApiSpec(3, 1, 9, rec.metadata)])
    with pytest.raises(CloseConnection):
        handle(apis, encoded(ApiVersionsRequest[0](), correlation_id=1))


@pytest.mark.parametrize("n", range(8))
def test_frame_shorter_than_the_fixed_header_closes(n: int) -> None:
    with pytest.raises(CloseConnection):
        handle(make_apis(Recorder()), bytes.fromhex("0003000100000001")[:n])


def test_undecodable_bodies_close() -> None:
    rec = Recorder()
    apis = make_apis(rec)
    good = encoded(metadata_request(1), correlation_id=5, client_id="c")
    header_len = 10 + 1
    # topics array claims 1000 entries but the frame ends
    with pytest.raises(CloseConnection):
        handle(apis, good[:header_len] + struct.pack(">i", 1000))
    # topics array count present but truncated
    with pytest.raises(CloseConnection):
        handle(apis, good[:header_len] + b"\x00\x00")
    # truncated header of a supported version
    with pytest.raises(CloseConnection):
        handle(apis, good[:9])
    # flexible v9: compact array length varint runs off the end
    flex = encoded(metadata_request(9), correlation_id=5, client_id="c")
    with pytest.raises(CloseConnection):
        handle(apis, flex[:12] + b"\xff\xff")
    assert rec.calls == []


# --- the normal path ------------------------------------------------------------------------------

@pytest.mark.parametrize("version,flexible", [(1, False), (4, False), (8, False), (9, True)])
def test_supported_request_reaches_the_handler_and_is_framed(version: int, flexible: bool) -> None:
    rec = Recorder()
    apis = make_apis(rec)
    req = metadata_request(version)
    out = handle(apis, encoded(req, correlation_id=31337, client_id="my-client"))
    assert len(rec.calls) == 1
    ctx, decoded = rec.calls[0]
    assert (ctx.header.api_key, ctx.api_version, ctx.header.correlation_id, ctx.client_id) == \
        (3, version, 31337, "my-client")
    assert ctx.connection is CONN and ctx.listener_name == "PLAINTEXT"
    assert decoded == req
    assert out is not None
    correlation_id, body = split_response(out, flexible_header=flexible)
    assert correlation_id == 31337
    resp = MetadataResponse.decode(body, version=version)
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(0, "localhost", 9092)]
    assert resp.controller_id == 0 and resp.topics == []


def test_null_client_id_reaches_the_handler_as_empty_string() -> None:
    rec = Recorder()
    handle(make_apis(rec), encoded(metadata_request(1), correlation_id=2, client_id=None))
    assert rec.calls[0][0].client_id == ""


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_supported_api_versions_uses_response_header_v0(version: int) -> None:
    rec = Recorder()
    apis = make_apis(rec, api_versions_range=(0, 3))
    req = ApiVersionsRequest[version](client_software_name="kafka-python", client_software_version="3.0") \
        if version >= 3 else ApiVersionsRequest[version]()
    out = handle(apis, encoded(req, correlation_id=8))
    assert out is not None
    correlation_id, body = split_response(out, flexible_header=False)  # never a tagged-field byte
    assert correlation_id == 8
    resp = ApiVersionsResponse.decode(body, version=version)
    assert resp.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(3, 1, 9), (18, 0, 3)]


def test_handler_answering_none_sends_nothing() -> None:
    rec = Recorder()
    apis = make_apis(rec, silent_metadata=True)
    assert handle(apis, encoded(metadata_request(1), correlation_id=3)) is None
    assert len(rec.calls) == 1


def test_requests_on_one_instance_are_independent() -> None:
    rec = Recorder()
    apis = make_apis(rec)

    async def many() -> list[Optional[bytes]]:
        frames = [encoded(metadata_request(1 + i % 9), correlation_id=i) for i in range(20)]
        return await asyncio.gather(*(apis.handle_frame(CONN, memoryview(f)) for f in frames))

    outs = asyncio.run(many())
    assert [struct.unpack_from(">i", o, 4)[0] for o in outs] == list(range(20))
    assert [c[0].api_version for c in rec.calls] == [1 + i % 9 for i in range(20)]
