"""BrokerConnection framing and failure handling, against in-process fake servers on localhost
(a real broker is in tests/integration/test_broker_client.py)."""
from __future__ import annotations

import asyncio
import struct
import time
from typing import Awaitable, Callable, Optional

import pytest
import uvloop

from kafkalite.network.broker_client import BrokerConnection, encode_request
from kafkalite.protocol.header import decode_request_header
from kafkalite.protocol.inter_broker import ControlledShutdownRequest, ControlledShutdownResponse


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_encode_request_header_versions() -> None:
    # ControlledShutdown v0: header v0, no client id
    assert encode_request(ControlledShutdownRequest(broker_id=3), 0, 7, "c") == \
        struct.pack(">ihhii", 12, 7, 0, 7, 3)
    # v1: header v1 (client id as a classic nullable string)
    body = struct.pack(">i", 3)
    header = struct.pack(">hhi", 7, 1, 8) + _string("ctl")
    assert encode_request(ControlledShutdownRequest(broker_id=3), 1, 8, "ctl") == \
        struct.pack(">i", len(header + body)) + header + body
    # v3: header v2 (same client id encoding, then an empty tagged-field section)
    body = struct.pack(">iq", 3, 42) + b"\x00"
    header = struct.pack(">hhi", 7, 3, 9) + _string("ctl") + b"\x00"
    request = ControlledShutdownRequest(broker_id=3, broker_epoch=42)
    assert encode_request(request, 3, 9, "ctl") == \
        struct.pack(">i", len(header + body)) + header + body
    assert request.version is None  # encoding at a version leaves the object as it was
    with pytest.raises(ValueError):
        encode_request(request, 4, 0, "ctl")


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class FakeBroker:
    """A localhost server running `handler` per connection; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: Optional[asyncio.base_events.Server] = None

    async def __aenter__(self) -> "FakeBroker":
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self.writers.append(writer)
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:  # ends handlers still reading
            writer.close()
        await asyncio.sleep(0)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _response_frame(correlation_id: int, response: ControlledShutdownResponse, version: int) -> bytes:
    # response header v1 for flexible v3: correlation id + empty tagged fields
    payload = struct.pack(">i", correlation_id) + b"\x00" + bytes(response.encode(version=version))
    return struct.pack(">i", len(payload)) + payload


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.read(4096):
        pass


def _run(test: Callable[[], Awaitable[None]]) -> None:
    """On the standard event loop and on uvloop, which the broker runs on."""
    asyncio.run(asyncio.wait_for(test(), 20))  # type: ignore[arg-type]
    uvloop.run(asyncio.wait_for(test(), 20))  # type: ignore[arg-type]


def test_answers_in_order_with_headers_the_server_decodes() -> None:
    seen: list[tuple[int, int, int, str, int]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            frame = await _read_frame(reader)
            header, pos = decode_request_header(frame, flexible=True)
            request = ControlledShutdownRequest.decode(frame[pos:], version=3)
            seen.append((header.api_key, header.api_version, header.correlation_id,
                         header.client_id, request.broker_id))
            R = ControlledShutdownResponse.RemainingPartition
            writer.write(_response_frame(header.correlation_id, ControlledShutdownResponse(
                error_code=0, remaining_partitions=[R(topic_name="t", partition_index=request.broker_id)]), 3))
            await writer.drain()

    async def run() -> None:
        seen.clear()
        async with FakeBroker(answer) as fake:
            conn = BrokerConnection("127.0.0.1", fake.port, client_id="broker-5")
            answers = await asyncio.gather(*(conn.send(ControlledShutdownRequest(broker_id=i, broker_epoch=1), 3)
                                             for i in range(3)))
            assert [[(r.topic_name, r.partition_index) for r in a.remaining_partitions] for a in answers] \
                == [[("t", 0)], [("t", 1)], [("t", 2)]]
            assert all(a.version == 3 and a.error_code == 0 for a in answers)
            assert seen == [(7, 3, 0, "broker-5", 0), (7, 3, 1, "broker-5", 1), (7, 3, 2, "broker-5", 2)]
            assert fake.connections == 1
            await conn.close()

    _run(run)


def test_silent_broker_times_out_and_next_send_reconnects() -> None:
    async def run() -> None:
        async with FakeBroker(_silent) as fake:
            conn = BrokerConnection("127.0.0.1", fake.port, client_id="c", request_timeout_ms=200)
            for attempt in (1, 2):
                started = time.monotonic()
                with pytest.raises(asyncio.TimeoutError):
                    await conn.send(ControlledShutdownRequest(broker_id=1, broker_epoch=1), 3)
                assert 0.19 <= time.monotonic() - started < 2
                assert not conn.connected
                await asyncio.sleep(0.05)  # let the server see the connection
                assert fake.connections == attempt  # a fresh connection per send after a failure
            await conn.close()

    _run(run)


def test_wrong_correlation_id_drops_the_connection() -> None:
    async def wrong_id(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frame = await _read_frame(reader)
        header, _ = decode_request_header(frame, flexible=True)
        writer.write(_response_frame(header.correlation_id + 1, ControlledShutdownResponse(
            error_code=0, remaining_partitions=[]), 3))
        await writer.drain()
        await _silent(reader, writer)

    async def run() -> None:
        async with FakeBroker(wrong_id) as fake:
            conn = BrokerConnection("127.0.0.1", fake.port, client_id="c")
            with pytest.raises(ConnectionError, match="correlation id 1 does not match request 0"):
                await conn.send(ControlledShutdownRequest(broker_id=1, broker_epoch=1), 3)
            assert not conn.connected
            await conn.close()

    _run(run)


@pytest.mark.parametrize("reply, message", [
    (struct.pack(">i", 3) + b"\x00\x00\x00", "malformed ControlledShutdown v3 response"),
    (struct.pack(">i", -5), "response size -5 out of range"),
    (b"\x00\x00", "2 bytes read on a total of 4 expected bytes"),  # closed mid-size
])
def test_garbage_answers_are_connection_errors(reply: bytes, message: str) -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_frame(reader)
        writer.write(reply)
        await writer.drain()

    async def run() -> None:
        async with FakeBroker(garbage) as fake:
            conn = BrokerConnection("127.0.0.1", fake.port, client_id="c", request_timeout_ms=5000)
            with pytest.raises(ConnectionError, match=message):
                await conn.send(ControlledShutdownRequest(broker_id=1, broker_epoch=1), 3)
            assert not conn.connected
            await conn.close()

    _run(run)


def test_refused_is_a_connection_error() -> None:
    async def run() -> None:
        async with FakeBroker(_silent) as fake:
            port = fake.port
        conn = BrokerConnection("127.0.0.1", port, client_id="c")
        with pytest.raises(ConnectionError):
            await conn.send(ControlledShutdownRequest(broker_id=1), 1)
        await conn.close()

    _run(run)


def test_close_fails_the_send_in_flight_and_later_sends() -> None:
    async def run() -> None:
        async with FakeBroker(_silent) as fake:
            conn = BrokerConnection("127.0.0.1", fake.port, client_id="c", request_timeout_ms=10000)
            pending = asyncio.ensure_future(conn.send(ControlledShutdownRequest(broker_id=1), 1))
            # connected (and so the request written) within 5 s, however busy the machine
            for _ in range(500):
                if conn.connected:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            assert conn.connected and not pending.done()
            await conn.close()
            with pytest.raises(ConnectionError):
                await pending
            with pytest.raises(ConnectionError, match="is closed"):
                await conn.send(ControlledShutdownRequest(broker_id=1), 1)

    _run(run)


def test_cancelled_send_drops_the_connection() -> None:
    async def run() -> None:
        async with FakeBroker(_silent) as fake:
            conn = BrokerConnection("127.0.0.1", fake.port, client_id="c", request_timeout_ms=10000)
            pending = asyncio.ensure_future(conn.send(ControlledShutdownRequest(broker_id=1), 1))
            await asyncio.sleep(0.1)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            assert not conn.connected  # a late answer must not be read as the next one's
            await conn.close()

    _run(run)
