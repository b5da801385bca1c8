"""KafkaApis: frame -> request header -> handler lookup by (api_key, api_version) -> response frame.

Unknown api keys, unsupported versions and undecodable requests close the connection, as Kafka
does; the one exception is ApiVersions, whose unsupported versions get an UNSUPPORTED_VERSION
answer in the v0 layout so that clients can fall back (KIP-511).
"""
from __future__ import annotations

import logging
from typing import Optional

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from kafkalite.network.socket_server import CloseConnection, ConnectionInfo
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.header import MalformedHeaderError, decode_request_header, peek_api
from kafkalite.protocol.messages import messages_for
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

log = logging.getLogger(__name__)


class KafkaApis:
    def __init__(self, specs: list[ApiSpec]) -> None:
        self.specs: dict[int, ApiSpec] = {s.api_key: s for s in specs}

    async def handle_frame(self, conn: ConnectionInfo, frame: memoryview) -> Optional[bytes]:
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except MalformedHeaderError as e:
            raise CloseConnection(str(e)) from None
        spec = self.specs.get(api_key)
        msgs = messages_for(api_key)
        if spec is None or msgs is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if not spec.supports(api_version):
            if api_key == ApiKey.ApiVersions:
                # Kafka still parses the header (v2 from version 3 on) and closes on garbage
                try:
                    decode_request_header(frame, msgs.request.flexible_version_q(api_version))
                except MalformedHeaderError as e:
                    raise CloseConnection(f"malformed ApiVersions v{api_version} header: {e}") from None
                return self._unsupported_api_versions(correlation_id)
            raise CloseConnection(f"unsupported version {api_version} of api {msgs.name}")
        try:
            header, body_pos = decode_request_header(frame, msgs.request.flexible_version_q(api_version))
            request = msgs.request.decode(frame[body_pos:], version=api_version)
        except Exception as e:  # the codec raises assorted errors on garbage
            raise CloseConnection(f"malformed {msgs.name} v{api_version} request: {e!r}") from None
        response = await spec.handler(RequestContext(header, conn), request)
        if response is None:
            return None
        # version before header: kafka-python's version setter writes into a request header
        # (request_api_version), which a response header lacks
        response.API_VERSION = api_version
        response.with_header(correlation_id=correlation_id)
        return response.encode(header=True, framed=True)

    def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        spec = self.specs[ApiKey.ApiVersions]
        resp = ApiVersionsResponse[0](
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse[0].ApiVersion(
                api_key=ApiKey.ApiVersions, min_version=spec.min_version, max_version=spec.max_version)])
        resp.with_header(correlation_id=correlation_id)
        return resp.encode(header=True, framed=True)  # v0 layout and header, as Kafka sends it
