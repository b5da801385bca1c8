"""The connection's request reader (socket_server._RequestProtocol): size-prefixed frames come out
whole and in order however the bytes are cut into reads, a large frame through a buffer of its
own; a bad size prefix ends the stream after the frames before it; reading pauses while too many
request bytes wait and resumes once they are taken. Then the real SocketServer over real sockets:
pipelined requests of every size answered in order, a half-closed client still answered."""
from __future__ import annotations

import asyncio
import socket
import struct
from typing import Callable, Optional

import pytest
import uvloop
from hypothesis import given, settings, strategies as st

from kafkalite.network.socket_server import (AREA_SHRINK_AFTER_S, LARGE_FRAME_BYTES, MAX_BUFFERED_REQUEST_BYTES,
                                             RECEIVE_AREA_BYTES, ConnectionInfo, Endpoint, SocketServer,
                                             _FrameError, _RequestProtocol)


class FakeTransport:
    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0
        self.resumes = 0

    def pause_reading(self) -> None:
        assert not self.paused
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        assert self.paused
        self.paused = False
        self.resumes += 1


def reader(max_request_bytes: int = 1 << 30) -> tuple[_RequestProtocol, FakeTransport]:
    p = _RequestProtocol(max_request_bytes, lambda _p: None)
    t = FakeTransport()
    p.connection_made(t)  # type: ignore[arg-type]
    return p, t


def feed(p: _RequestProtocol, data: bytes, cuts: list[int]) -> None:
    """Hand `data` over as the kernel would: reads cut at `cuts`, each no larger than the buffer
    the protocol offers."""
    pos = 0
    bounds = sorted({c for c in cuts if 0 < c < len(data)}) + [len(data)]
    for bound in bounds:
        while pos < bound:
            view = p.get_buffer(-1)
            assert len(view) > 0
            n = min(len(view), bound - pos)
            view[:n] = data[pos:pos + n]
            del view            # released before buffer_updated returns, as the event loops do
            p.buffer_updated(n)
            pos += n


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def take_all(p: _RequestProtocol) -> list[bytes]:
    out = []
    while (f := p.next_frame()) is not None:
        out.append(bytes(f))
    return out


_sizes = st.lists(st.integers(0, 300) | st.integers(LARGE_FRAME_BYTES - 4, LARGE_FRAME_BYTES + 70_000)
                  | st.integers(20_000, 60_000), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(sizes=_sizes, cuts=st.lists(st.integers(0, 1 << 20), max_size=30), take_between=st.booleans())
def test_frames_come_out_whole_and_in_order_however_the_reads_are_cut(sizes: list[int], cuts: list[int],
                                                                      take_between: bool) -> None:
    bodies = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = b"".join(frame(b) for b in bodies)
    p, _t = reader()
    got: list[bytes] = []
    if take_between:
        # the connection takes frames as they complete, between reads
        pos = 0
        for bound in sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]:
            feed(p, data[pos:bound], [])
            pos = max(pos, bound)
            got += take_all(p)
    else:
        feed(p, data, [c % (len(data) + 1) for c in cuts])
        got = take_all(p)
    assert got == bodies
    assert p.next_frame() is None


def test_one_byte_reads() -> None:
    bodies = [b"", b"a", b"xyz" * 100, b"q" * (LARGE_FRAME_BYTES + 1)]
    data = b"".join(frame(b) for b in bodies)
    p, _t = reader()
    feed(p, data, list(range(len(data))))
    assert take_all(p) == bodies


@pytest.mark.parametrize("bad", [-1, -2**31, 1001])
def test_a_bad_size_prefix_ends_the_stream_after_the_frames_before_it(bad: int) -> None:
    p, t = reader(max_request_bytes=1000)
    feed(p, frame(b"first") + frame(b"second") + struct.pack(">i", bad) + b"never read" + frame(b"after"), [3, 9])
    assert t.paused        # nothing after the bad prefix is read
    assert [bytes(p.next_frame() or b"?"), bytes(p.next_frame() or b"?")] == [b"first", b"second"]
    with pytest.raises(_FrameError, match=rf"request size {bad} outside \[0, socket.request.max.bytes=1000\]"):
        p.next_frame()
    assert t.resumes == 0


def test_reading_pauses_while_too_many_request_bytes_wait() -> None:
    p, t = reader()
    body = b"r" * 100_000
    count = MAX_BUFFERED_REQUEST_BYTES // len(body) + 3
    feed(p, frame(body) * count, [])
    assert t.paused and t.pauses == 1
    taken = 0
    while t.paused:
        assert p.next_frame() == body
        taken += 1
    # resumed once half the limit or less is left waiting
    assert (count - taken) * len(body) <= MAX_BUFFERED_REQUEST_BYTES // 2
    assert t.resumes == 1
    assert take_all(p) == [body] * (count - taken)


def test_empty_frames_count_against_the_limit_too() -> None:
    """A frame costs more than its bytes: a client sending size-0 frames while its connection's
    task is busy must not queue them without bound."""
    p, t = reader()
    chunk = frame(b"") * 1024
    reads = 0
    while not t.paused:     # the transport reads no more once paused
        feed(p, chunk, [])
        reads += 1
        assert reads < 1000
    queued = len(take_all(p))
    assert queued == reads * 1024 and queued <= MAX_BUFFERED_REQUEST_BYTES // 68 + 1024


def test_memory_follows_the_bytes_received_not_the_declared_size() -> None:
    """Four bytes declaring a 100 MiB frame allocate nothing yet; the frame's buffer grows as its
    bytes arrive, and the frame comes out whole, read-only like the smaller ones."""
    p, _t = reader(max_request_bytes=100 << 20)
    size = (100 << 20) - 1
    feed(p, struct.pack(">i", size), [])
    assert p.next_frame() is None
    assert p._large is not None and len(p._large) == 0
    assert len(p.get_buffer(-1)) == RECEIVE_AREA_BYTES
    p.buffer_updated(0)
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    sent = 0
    while sent < 3 * RECEIVE_AREA_BYTES:
        view = p.get_buffer(-1)
        n = min(len(view), 100_000)
        view[:n] = body[sent:sent + n]
        del view
        p.buffer_updated(n)
        sent += n
        assert p._large is not None and len(p._large) <= 2 * sent + RECEIVE_AREA_BYTES
    feed(p, body[sent:], [])
    got = p.next_frame()
    assert isinstance(got, memoryview) and got.readonly and got == body


def test_a_reset_drops_the_requests_not_yet_handled() -> None:
    """As StreamReader did: a connection reset ends the stream at once (a clean EOF does not)."""
    p, _t = reader()
    feed(p, frame(b"a") + frame(b"b"), [])
    assert p.next_frame() == b"a"
    p.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
    with pytest.raises(EOFError):
        p.next_frame()


def test_a_grown_area_shrinks_back_once_its_reads_stay_small() -> None:
    """A burst grows the receive area to RECEIVE_AREA_BYTES and arms one timer. When it fires, a
    connection whose reads stayed small since (a consumer's periodic fetches) gives the area back;
    one that read a lot keeps it and the timer is armed again. The callback is called here
    directly, so that the test does not depend on the machine's speed."""

    def fire(p: _RequestProtocol) -> None:
        handle = p._shrink_handle
        assert handle is not None and handle.when() - asyncio.get_running_loop().time() <= AREA_SHRINK_AFTER_S
        handle.cancel()
        p._shrink_if_idle()     # what the timer runs, now

    async def run() -> None:
        p, _t = reader()
        feed(p, frame(b"b" * 100_000) * 8, [])
        assert len(take_all(p)) == 8 and len(p._area) == RECEIVE_AREA_BYTES
        fire(p)                                 # large reads in the window: kept, armed again
        assert len(p._area) == RECEIVE_AREA_BYTES and p._shrink_handle is not None
        for _ in range(3):                      # small periodic requests
            feed(p, frame(b"f" * 100), [])
            assert take_all(p) == [b"f" * 100]
        fire(p)
        assert len(p._area) == 8 * 1024 and p._shrink_handle is None
        feed(p, frame(b"after") * 3, [])        # still reads whole frames into the small area
        assert take_all(p) == [b"after"] * 3
        feed(p, frame(b"b" * 100_000), [])      # a new burst grows it again, with a new timer
        assert take_all(p) == [b"b" * 100_000]
        assert len(p._area) > 8 * 1024 and p._shrink_handle is not None
        p.connection_lost(None)
        assert p._shrink_handle is None

    asyncio.run(run())


def test_eof_after_the_frames() -> None:
    p, _t = reader()
    feed(p, frame(b"last") + b"\x00\x00", [])
    assert p.eof_received() is True        # half-closed: answers still go out
    assert p.next_frame() == b"last"
    with pytest.raises(EOFError):
        p.next_frame()


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_pipelined_requests_of_every_size_answered_in_order_and_a_half_closed_client_answered(
        loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    """The real SocketServer: 200 pipelined requests from 0 bytes to past LARGE_FRAME_BYTES sent
    in one go, answered in order with a digest of each; then a client that sends its request and
    shuts its sending side down still gets the answer."""
    sizes = [(i * 7919) % 3000 for i in range(190)] + [LARGE_FRAME_BYTES + i * 1000 for i in range(10)]

    async def handler(conn: ConnectionInfo, request: memoryview) -> Optional[bytes]:
        body = struct.pack(">iB", len(request), sum(request[:64]) % 256 if len(request) else 0)
        return frame(body)

    def expected(body: bytes) -> bytes:
        return struct.pack(">iB", len(body), sum(body[:64]) % 256 if body else 0)

    async def run() -> tuple[list[bytes], bytes]:
        server = SocketServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], handler, 1 << 20)
        (ep,) = await server.bind()
        await server.start_serving()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", ep.port)
            w.write(b"".join(frame(bytes([(i + j) % 256 for j in range(min(n, 64))]) + b"z" * max(0, n - 64))
                             for i, n in enumerate(sizes)))
            answers = []
            for _ in sizes:
                size = int.from_bytes(await asyncio.wait_for(r.readexactly(4), 30), "big")
                answers.append(await r.readexactly(size))
            w.close()

            def half_closed_client() -> bytes:
                with socket.create_connection(("127.0.0.1", ep.port)) as s:
                    s.sendall(frame(b"half"))
                    s.shutdown(socket.SHUT_WR)
                    s.settimeout(10)
                    data = b""
                    while chunk := s.recv(100):     # until the broker closes its side
                        data += chunk
                    return data
            return answers, await asyncio.get_running_loop().run_in_executor(None, half_closed_client)
        finally:
            await server.shutdown()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        answers, half_closed = runner.run(run())
    assert answers == [expected(bytes([(i + j) % 256 for j in range(min(n, 64))]) + b"z" * max(0, n - 64))
                       for i, n in enumerate(sizes)]
    assert half_closed == frame(expected(b"half"))
