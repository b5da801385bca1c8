"""KafkaApis: frame -> request header -> handler lookup by (api_key, api_version) -> response frame.

Unknown api keys, unsupported versions and undecodable requests close the connection, as Kafka
does; the one exception is ApiVersions, whose unsupported versions get an UNSUPPORTED_VERSION
answer in the v0 layout so that clients can fall back (KIP-511). A handler that fails
unexpectedly is logged at ERROR with its traceback and answered as Kafka's KafkaApis answers
any Throwable: the API's error response (``server/error_responses.py``, UNKNOWN_SERVER_ERROR or
the exception's Kafka error code) on the same, still open, connection.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Optional, Union

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata.api_versions import ApiVersionsResponse

from kafkalite.log.log import FetchDataInfo
from kafkalite.network.send import ResponseSend
from kafkalite.network.socket_server import CloseConnection, ConnectionInfo
from kafkalite.protocol.errors import ErrorCode, kafka_error_of
from kafkalite.protocol.header import MalformedHeaderError, RequestHeader, decode_request_header, peek_api
from kafkalite.protocol.messages import messages_for
from kafkalite.protocol.non_nullable import check_non_nullable
from kafkalite.protocol.produce_request import decode_produce_request
from kafkalite.server.encoded_response import EncodedResponse
from kafkalite.server.error_responses import error_response
from kafkalite.server.fetch_response import UnsupportedShape, encode_fetch_response
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.tasks import cancel_and_wait

log = logging.getLogger(__name__)
# Kafka's kafka.request.logger: one line per request at DEBUG
request_log = logging.getLogger("kafkalite.request.logger")


def _encode(response: Any, api_version: int, correlation_id: int) -> Optional[Union[bytes, ResponseSend]]:
    if response is None:
        return None
    if isinstance(response, EncodedResponse):
        return response.frame(correlation_id)
    if response.API_KEY == ApiKey.Fetch:
        return _encode_fetch(response, api_version, correlation_id)
    # version before header: kafka-python's version setter writes into a request header
    # (request_api_version), which a response header lacks
    response.API_VERSION = api_version
    response.with_header(correlation_id=correlation_id)
    return response.encode(header=True, framed=True)


def _encode_fetch(response: Any, api_version: int, correlation_id: int) -> Union[bytes, ResponseSend]:
    """Record bytes stay in the segment files (server/fetch_response.py); a response shape that
    encoder does not write goes through the generic codec with the bytes read."""
    try:
        return encode_fetch_response(response, api_version, correlation_id)
    except UnsupportedShape:
        for t in response.responses or ():
            for p in t.partitions or ():
                if isinstance(p.records, FetchDataInfo):
                    p.records = p.records.read_bytes()
        response.API_VERSION = api_version
        response.with_header(correlation_id=correlation_id)
        return response.encode(header=True, framed=True)


def decode_body(request_class: Any, body: memoryview, version: int) -> Any:
    """The request body at `version`. A field declared longer than what is left of the frame (a
    string, bytes or array count running past its end) fails here, as Kafka's parser fails on
    it: kafka-python's decoder slices leniently and would hand back a shortened value. So does a
    null in a field the schema says is not nullable (kafka-python hands back None). Bytes left
    over after the body are ignored, as Kafka does."""
    flexible = request_class.flexible_version_q(version)
    decode = request_class._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                                        data_class=request_class[None])
    request, end = decode(body, 0)
    if end > len(body):
        raise ValueError(f"the body runs {end - len(body)} bytes past the end of the frame")
    check_non_nullable(request_class, request, version)
    return request


# Bodies read by hand, for APIs whose requests come one per partition and often (each is
# property-tested against decode_body): api key -> (body, version) -> request
BODY_DECODERS: dict[int, Callable[[memoryview, int], Any]] = {
    ApiKey.Produce: decode_produce_request,
}


class KafkaApis:
    def __init__(self, specs: list[ApiSpec]) -> None:
        self.specs: dict[int, ApiSpec] = {s.api_key: s for s in specs}
        self._local_requests: set[asyncio.Task[Any]] = set()
        self._local_requests_closed = False

    async def handle_frame(self, conn: ConnectionInfo, frame: memoryview) -> Optional[bytes | ResponseSend]:
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
            decode = BODY_DECODERS.get(api_key)
            request = decode(frame[body_pos:], api_version) if decode is not None \
                else decode_body(msgs.request, frame[body_pos:], api_version)
        except Exception as e:  # the codec raises assorted errors on garbage
            raise CloseConnection(f"malformed {msgs.name} v{api_version} request: {e!r}") from None
        if not request_log.isEnabledFor(logging.DEBUG):
            return await self._handle(spec, msgs.name, header, conn, request, api_key, api_version, correlation_id)
        started = time.perf_counter()
        try:
            return await self._handle(spec, msgs.name, header, conn, request, api_key, api_version, correlation_id)
        finally:
            # Kafka's kafka.request.logger line at DEBUG, one per request
            request_log.debug("Completed request:%s v%d (correlation id %d, client id %s) from connection %s;"
                              "totalTime:%.3fms", msgs.name, api_version, correlation_id, header.client_id,
                              conn.connection_id, (time.perf_counter() - started) * 1000)

    async def handle_request(self, request: Any, api_version: int, client_id: str, conn: ConnectionInfo) -> Any:
        """A request object handled as its frame would be, minus the codec: the controller's
        requests to its own broker (a restart's LeaderAndIsr and UpdateMetadata name every
        partition; encoding them to decode them again in the same process is a second of work
        at 10,000 partitions). The response object is returned unencoded; a handler's failure
        gives the API's error response, as over the wire. As a request read from a connection,
        it runs to its end when the caller stops waiting (a controller that resigned mid-way
        must not leave a LeaderAndIsr half applied); only `cancel_local_requests` (the broker's
        shutdown, where the socket server cancels its connections) stops it."""
        if self._local_requests_closed:
            # as a connection to a broker whose socket server has shut down: the controller's
            # sender retries until it stops, and no handler runs against closed managers
            raise ConnectionRefusedError("the broker is shutting down")
        task = asyncio.get_running_loop().create_task(self._handle_request(request, api_version, client_id, conn))
        self._local_requests.add(task)
        task.add_done_callback(self._local_request_done)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled() and self._local_requests_closed:
                # stopped by the broker's shutdown, not the caller: a connection that closed
                raise ConnectionResetError("the broker shut down during the request") from None
            raise

    def _local_request_done(self, task: "asyncio.Task[Any]") -> None:
        self._local_requests.discard(task)
        if not task.cancelled():
            task.exception()   # retrieved: a caller that stopped waiting does not make it "never retrieved"

    async def cancel_local_requests(self) -> None:
        self._local_requests_closed = True
        for task in list(self._local_requests):
            await cancel_and_wait(task)

    async def _handle_request(self, request: Any, api_version: int, client_id: str, conn: ConnectionInfo) -> Any:
        api_key = request.API_KEY
        spec = self.specs.get(api_key)
        msgs = messages_for(api_key)
        if spec is None or msgs is None or not spec.supports(api_version):
            raise CloseConnection(f"unsupported version {api_version} of api {api_key}")
        header = RequestHeader(api_key, api_version, 0, client_id)
        try:
            return await spec.handler(RequestContext(header, conn), request)
        except CloseConnection:
            raise
        except Exception as e:  # noqa: BLE001 - answered as handle_frame answers it
            return self._error_response(e, msgs.name, api_key, api_version, 0, client_id, conn, request)

    async def _handle(self, spec: Any, name: str, header: Any, conn: ConnectionInfo, request: Any, api_key: int,
                      api_version: int, correlation_id: int) -> Optional[bytes | ResponseSend]:
        try:
            # encoding too: Kafka serializes the response on the handler's call stack
            return _encode(await spec.handler(RequestContext(header, conn), request), api_version,
                           correlation_id)
        except CloseConnection:
            raise
        except Exception as e:  # noqa: BLE001 - answered as Kafka does, never a dropped connection
            response = self._error_response(e, name, api_key, api_version, correlation_id,
                                            header.client_id, conn, request)
            return _encode(response, api_version, correlation_id)

    @staticmethod
    def _error_response(e: Exception, name: str, api_key: int, api_version: int, correlation_id: int,
                        client_id: Optional[str], conn: ConnectionInfo, request: Any) -> Any:
        """KafkaApis.handle's catch-all: log at ERROR, answer request.getErrorResponse(e)
        (Errors.forException: a Kafka error keeps its code, anything else is UNKNOWN_SERVER_ERROR)."""
        log.error("Unexpected error handling request %s v%d (correlation id %d, client id %s, "
                  "connection %s)", name, api_version, correlation_id, client_id, conn.connection_id,
                  exc_info=e)
        code, message = kafka_error_of(e)
        response = error_response(api_key, api_version, request, code, message)
        if response is None:
            raise CloseConnection(f"{name} v{api_version} failed and has no error response "
                                  f"(acks=0 produce)") from None
        return response

    def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        spec = self.specs[ApiKey.ApiVersions]
        resp = ApiVersionsResponse[0](
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse[0].ApiVersion(
                api_key=ApiKey.ApiVersions, min_version=spec.min_version, max_version=spec.max_version)])
        resp.with_header(correlation_id=correlation_id)
        return resp.encode(header=True, framed=True)  # v0 layout and header, as Kafka sends it
