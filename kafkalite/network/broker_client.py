"""An asyncio client connection to one broker: the controller's channel to a broker, and a
broker's channel to the controller (ControlledShutdown, AlterPartition).

One request is in flight per connection at a time (Kafka's controller channel also keeps one
in flight per broker, so requests are applied in the order they were sent). The connection is
opened lazily on the first send. Any failure (refused, reset, timeout, a response that does not
parse or answers another correlation id, a cancelled send) drops the socket, since the byte
stream can no longer be trusted, and the next send opens a new one.

Framing, from the protocol guide: a request is int32 size + request header + body; the header
is v2 (with a tagged-field section) for flexible versions, v1 otherwise, and v0 (no client id)
for ControlledShutdown v0. A response is int32 size + response header (v1 for flexible
versions, v0 otherwise, always v0 for ApiVersions) + body.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any, Optional

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from kafkalite.protocol.inter_broker import request_header_version
from kafkalite.protocol.messages import messages_for

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">hhi")  # api key, api version, correlation id
# a response larger than this is taken as a desynchronised stream, not a real answer
MAX_RESPONSE_SIZE = 512 * 1024 * 1024


def encode_request(request: ApiMessage, api_version: int, correlation_id: int,
                   client_id: str) -> bytes:
    """The framed request (size, header, body) without touching the request object's own
    version or header, so one request object may be sent at several versions."""
    cls = type(request)[None]
    if not 0 <= api_version <= cls.max_version:
        raise ValueError(f"{cls.name} has no version {api_version} (max {cls.max_version})")
    flexible = cls.flexible_version_q(api_version)
    header_version = request_header_version(cls.API_KEY, api_version, flexible)
    if header_version == 0:
        header = _HEADER_V0.pack(cls.API_KEY, api_version, correlation_id)
    else:
        header = RequestHeader(request_api_key=cls.API_KEY, request_api_version=api_version,
                               correlation_id=correlation_id, client_id=client_id
                               ).encode(flexible=header_version == 2)
    encode_body = cls._struct.compiled_encode_into(api_version, compact=flexible, tagged=flexible)
    with EncodeBufferPool.acquire() as out:
        encode_body(request, out)
        body = out.result()
    return _SIZE.pack(len(header) + len(body)) + bytes(header) + bytes(body)


def decode_response(response_class: type[ApiMessage], frame: bytes, api_version: int
                    ) -> tuple[int, ApiMessage]:
    """(correlation id, response) from a response frame without its size prefix. The response
    class picks its header version (ApiVersionsResponse always reads header v0)."""
    response = response_class[None].decode(frame, version=api_version, header=True)
    return response.header.correlation_id, response


class BrokerConnection:
    """A lazily (re)connecting request/response channel to one broker. See the module doc."""

    def __init__(self, host: str, port: int, *, client_id: str, request_timeout_ms: int = 30000,
                 connect_timeout_ms: int = 10000) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._lock = asyncio.Lock()
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._next_correlation_id = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, client_id={self.client_id!r})"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def send(self, request: ApiMessage, api_version: int) -> Any:
        """Send `request` at `api_version` and return the decoded response (an instance of the
        api's response class at that version).

        Raises ConnectionError when the broker cannot be reached, the connection breaks, the
        response is malformed or answers another correlation id, or after close();
        asyncio.TimeoutError when connecting takes longer than connect_timeout_ms or the response
        does not arrive within request_timeout_ms; ValueError for a version the api lacks or a
        request that expects no response (acks=0 produce)."""
        msgs = messages_for(type(request).API_KEY)
        if msgs is None:
            raise ValueError(f"no response class registered for api key {type(request).API_KEY}")
        if not request.expect_response():
            raise ValueError(f"{type(request).name} expects no response; not supported here")
        async with self._lock:
            if self._closed:
                raise ConnectionError(f"{self!r} is closed")
            correlation_id = self._next_correlation_id
            self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
            frame = encode_request(request, api_version, correlation_id, self.client_id)
            try:
                await self._ensure_connected()
                raw = await asyncio.wait_for(self._round_trip(frame),
                                             self.request_timeout_ms / 1000)
            except asyncio.TimeoutError:
                self._drop(f"no response to {msgs.name} v{api_version} within "
                           f"{self.request_timeout_ms} ms")
                raise
            except (OSError, EOFError) as e:  # IncompleteReadError is an EOFError
                self._drop(f"{msgs.name} v{api_version} failed: {e!r}")
                if isinstance(e, ConnectionError):
                    raise
                raise ConnectionError(f"{self.host}:{self.port}: {e}") from e
            except BaseException:  # cancelled mid-request: the stream position is unknown
                self._drop(f"{msgs.name} v{api_version} interrupted")
                raise
            try:
                answered_id, response = decode_response(msgs.response, raw, api_version)
            except Exception as e:  # the codec raises assorted errors on garbage
                self._drop(f"malformed {msgs.name} v{api_version} response: {e!r}")
                raise ConnectionError(f"{self.host}:{self.port}: malformed {msgs.name} "
                                      f"v{api_version} response: {e!r}") from e
            if answered_id != correlation_id:
                self._drop(f"correlation id {answered_id} answers request {correlation_id}")
                raise ConnectionError(f"{self.host}:{self.port}: response correlation id "
                                      f"{answered_id} does not match request {correlation_id}")
            return response

    async def close(self) -> None:
        """Drop the socket for good; later sends raise ConnectionError. A send in progress fails
        with ConnectionError (its read sees the socket closed)."""
        self._closed = True
        writer = self._writer
        self._drop("closed")
        if writer is not None:
            try:
                # a peer that stopped reading (paused, cut off) must not hold a shutdown: the
                # socket is aborted when closing does not finish within a second
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                writer.transport.abort()
            except OSError:
                pass

    async def _ensure_connected(self) -> None:
        if self.connected:
            return
        self._drop("reconnecting")
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise asyncio.TimeoutError(
                f"connecting to {self.host}:{self.port} took over {self.connect_timeout_ms} ms"
            ) from None
        log.debug("%r connected", self)

    async def _round_trip(self, frame: bytes) -> bytes:
        assert self._reader is not None and self._writer is not None
        reader = self._reader
        self._writer.write(frame)
        await self._writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        if not 0 < size <= MAX_RESPONSE_SIZE:
            raise ConnectionError(f"{self.host}:{self.port}: response size {size} out of range")
        return await reader.readexactly(size)

    def _drop(self, why: str) -> None:
        if self._writer is not None:
            log.debug("%r dropping its connection: %s", self, why)
            self._writer.close()
        self._reader = None
        self._writer = None
