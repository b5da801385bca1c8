"""The asyncio reactor: one server per listener, one task per connection.

Kafka mutes a channel while one of its requests is in flight, so requests of one connection are
handled strictly one after another and responses leave in request order; many connections are
served concurrently. A frame whose size prefix exceeds `socket.request.max.bytes` (or is negative)
closes the connection before any of it is read into memory.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import logging
import os
import socket
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional, Protocol, Union

from kafkalite.network.send import RegionChangedError, ResponseSend, send_blocking

log = logging.getLogger(__name__)


class SocketBindError(OSError):
    """A listener that cannot be bound (port in use, host unknown here): Kafka's "Socket server
    failed to bind to host:port: reason." """

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        # asyncio words a bind failure its own way; the plain system message is what Java prints
        if isinstance(cause, socket.gaierror) or not cause.errno:
            reason = cause.strerror or str(cause)
        else:
            reason = os.strerror(cause.errno)
        super().__init__(cause.errno, f"Socket server failed to bind to {host or '0.0.0.0'}:{port}: {reason}.")

    def __str__(self) -> str:
        return str(self.strerror)


class CloseConnection(Exception):
    """Raised by the request handler when Kafka would close the connection instead of answering."""


@dataclass(slots=True)
class ConnectionInfo:
    connection_id: str
    listener_name: str
    client_host: str
    client_port: int
    security_protocol: str = "PLAINTEXT"


Response = Union[bytes, bytearray, ResponseSend]


class RequestHandler(Protocol):
    def __call__(self, conn: ConnectionInfo, frame: memoryview) -> Awaitable[Optional[Response]]: ...


@dataclass
class Endpoint:
    listener_name: str
    host: str
    port: int


_SIZE = 4
_conn_ids = itertools.count()
# Responses answered within one turn of the event loop leave in one write: a client that
# pipelines (librdkafka sends one Produce request per partition) gets them in one segment
# instead of paying a loopback send and a wake-up per response. Past this many bytes they are
# written at once (bounded memory per connection).
COALESCE_MAX_BYTES = 256 * 1024
_PRODUCE_KEY = b"\x00\x00"    # api key 0, the first two bytes of a request frame
# Responses with fewer file bytes than this are copied into one buffer and written by the
# event loop: below it a worker thread's hand-off and the wait for an empty transport buffer
# cost more than the copy (measured: docs/benchmarks.md, "Zero-copy fetch").
# KAFKALITE_SENDFILE_MIN_BYTES overrides it (for benchmarks; a negative value always copies).
SENDFILE_MIN_BYTES = int(os.environ.get("KAFKALITE_SENDFILE_MIN_BYTES", 64 * 1024))
SENDFILE_WORKERS = 8


@dataclass(slots=True)
class SendfileConfig:
    """How file-backed responses leave: ``executor`` runs the sendfile loops; None copies.

    A worker blocks for as long as its client does not read, so at most ``max_in_flight``
    sends run at once and a response beyond them takes the copy path (the transport buffers
    it): clients that stopped reading hold only their own connections, as in Kafka, never
    every other connection's large fetches (replication's included)."""
    executor: Optional[ThreadPoolExecutor]
    min_bytes: int = SENDFILE_MIN_BYTES
    max_in_flight: int = SENDFILE_WORKERS
    in_flight: int = 0


# Bytes the kernel may hand over in one read into a connection's receive area (it starts small,
# doubles while reads fill it up to this, and shrinks back once the connection is idle). A
# request frame larger than LARGE_FRAME_BYTES is read straight into a buffer of its own (Kafka's
# NetworkReceive does the same: the size first, then a buffer of that size).
RECEIVE_AREA_BYTES = 256 * 1024
_FIRST_AREA_BYTES = 8 * 1024
# a grown receive area goes back to _FIRST_AREA_BYTES once its connection's reads stayed small
# (a quarter of that at most) for this long with nothing pending: consumers' and members' small
# periodic requests give it back, a pipelining producer keeps it (one timer per grown area)
AREA_SHRINK_AFTER_S = 5.0
LARGE_FRAME_BYTES = 128 * 1024
# Unhandled pipelined request bytes a connection holds before it stops reading the socket
# (asyncio's StreamReader paused at twice its 1 MiB limit; requests are handled one at a time).
MAX_BUFFERED_REQUEST_BYTES = 2 << 20
_I32 = struct.Struct(">i")
# what a queued frame costs beyond its bytes (its object and queue slot), counted against
# MAX_BUFFERED_REQUEST_BYTES so that empty or tiny frames cannot pile up unbounded
_FRAME_OVERHEAD = 64


class _FrameError(Exception):
    """A size prefix outside [0, socket.request.max.bytes]: the connection is closed once the
    requests before it are answered."""


class _RequestProtocol(asyncio.BufferedProtocol):
    """Reads size-prefixed request frames with one copy: the kernel writes into the connection's
    receive area (asyncio's BufferedProtocol, which uvloop drives from its own read loop), and
    each frame is copied out once as the ``bytes`` its handler reads (a large frame is read into
    a buffer of its own, without even that copy). Writes go to the transport directly; drain()
    waits for the transport's low-water mark as StreamWriter.drain() does."""

    def __init__(self, max_request_bytes: int, on_connection: Callable[[_RequestProtocol], None]) -> None:
        self._max_request_bytes = max_request_bytes
        self._on_connection = on_connection
        self.transport: Optional[asyncio.Transport] = None
        self._area = bytearray(_FIRST_AREA_BYTES)   # grows to RECEIVE_AREA_BYTES while reads fill it
        self._grow = False
        self._offered = 0
        self._largest_read = 0          # since the shrink timer was armed
        self._shrink_handle: Optional[asyncio.TimerHandle] = None
        self._start = 0                 # first byte of the area not yet cut into a frame
        self._end = 0                   # end of the bytes received into the area
        self._large: Optional[bytearray] = None     # a frame being read into its own buffer
        self._large_size = 0            # its declared size (the buffer grows as its bytes arrive)
        self._large_filled = 0
        self._frames: collections.deque[Union[bytes, memoryview]] = collections.deque()
        self._buffered = 0              # bytes of the frames queued, not yet taken
        self._frame_error: Optional[str] = None
        self._eof = False
        self._lost = False
        self._reading_paused = False
        self._frame_waiter: Optional[asyncio.Future[None]] = None
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    # -- asyncio.BufferedProtocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._on_connection(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        large = self._large
        if large is not None:
            if self._large_filled == len(large):
                # memory follows the bytes received, not the size a client declared: the buffer
                # doubles (at least by the receive area's size) up to the frame's size
                more = bytes(min(self._large_size - len(large), max(len(large), RECEIVE_AREA_BYTES)))
                try:
                    large.extend(more)
                except BufferError:     # a loop still holding the last read's view
                    large = self._large = large + more
            return memoryview(large)[self._large_filled:]
        area = self._area
        if self._frame_error is not None:
            return memoryview(area)     # what follows a bad size prefix is never read
        start, end = self._start, self._end
        if self._grow or len(area) - end < len(area) // 4:
            # room for a read: a larger area if the last read filled what it was offered (more
            # was waiting) or nothing can be moved, else the partial frame at the end moved to the
            # front (it is at most LARGE_FRAME_BYTES: a larger one goes to a buffer of its own)
            pending = end - start
            if self._grow or start == 0:
                self._grow = False
                area = bytearray(max(2 * len(area), 2 * pending))
                if self._shrink_handle is None:
                    self._arm_shrink()
            area[:pending] = self._area[start:end]
            self._area, self._start, self._end = area, 0, pending
            end = pending
        view = memoryview(area)[end:]
        self._offered = len(view)
        return view

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame_error is not None:
            return
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled == self._large_size:
                # read-only, as the bytes of the smaller frames are
                self._queue(memoryview(self._large).toreadonly())
                self._large = None
        else:
            self._end += nbytes
            if nbytes > self._largest_read:
                self._largest_read = nbytes
            if nbytes == self._offered and len(self._area) < RECEIVE_AREA_BYTES:
                self._grow = True
            self._cut_frames()
        self._wake_reader()

    def eof_received(self) -> Optional[bool]:
        self._eof = True
        self._wake_reader()
        return True     # half-closed: the requests read before it are still answered, then closed

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self._shrink_handle is not None:
            self._shrink_handle.cancel()
            self._shrink_handle = None
        if exc is not None:
            # a reset: the requests not yet handled are dropped, as StreamReader's exception did
            self._frames.clear()
            self._buffered = 0
        self._lost = True
        self._eof = True
        self._wake_reader()
        self._release_drain_waiters()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._release_drain_waiters()

    def _release_drain_waiters(self) -> None:
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- frames ---------------------------------------------------------------------------------
    def _cut_frames(self) -> None:
        area, start, end = self._area, self._start, self._end
        while self._frame_error is None and end - start >= _SIZE:
            size = _I32.unpack_from(area, start)[0]
            if size < 0 or size > self._max_request_bytes:
                self._frame_error = (f"request size {size} outside [0, socket.request.max.bytes="
                                     f"{self._max_request_bytes}]")
                self._pause_reading()     # nothing after it is read
                break
            if end - start - _SIZE >= size:
                self._queue(bytes(memoryview(area)[start + _SIZE:start + _SIZE + size]))
                start += _SIZE + size
                continue
            if size > LARGE_FRAME_BYTES:
                # the rest of this frame comes into a buffer of its own, straight from the kernel
                self._large = bytearray(memoryview(area)[start + _SIZE:end])
                self._large_size = size
                self._large_filled = len(self._large)
                start = end
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _queue(self, frame: Union[bytes, memoryview]) -> None:
        self._frames.append(frame)
        self._buffered += _SIZE + _FRAME_OVERHEAD + len(frame)
        if self._buffered > MAX_BUFFERED_REQUEST_BYTES:
            self._pause_reading()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self._lost:
            self._reading_paused = True
            self.transport.pause_reading()

    def _wake_reader(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def next_frame(self) -> Optional[Union[bytes, memoryview]]:
        """The next request frame if one is complete, else None (then wait_frame()). Raises
        _FrameError for a bad size prefix and EOFError once the peer is gone, each only after the
        frames received before it were taken."""
        if self._frames:
            frame = self._frames.popleft()
            self._buffered -= _SIZE + _FRAME_OVERHEAD + len(frame)
            if self._reading_paused and self._buffered <= MAX_BUFFERED_REQUEST_BYTES // 2 \
                    and self._frame_error is None and not self._lost and self.transport is not None:
                self._reading_paused = False
                self.transport.resume_reading()
            return frame
        if self._frame_error is not None:
            raise _FrameError(self._frame_error)
        if self._eof:
            raise EOFError
        return None

    def _arm_shrink(self) -> None:
        self._largest_read = 0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:    # a protocol driven by hand, outside a loop (unit tests): no timer
            return
        self._shrink_handle = loop.call_later(AREA_SHRINK_AFTER_S, self._shrink_if_idle)

    def _shrink_if_idle(self) -> None:
        self._shrink_handle = None
        if self._lost or len(self._area) <= _FIRST_AREA_BYTES:
            return
        if self._largest_read <= _FIRST_AREA_BYTES // 4 and self._start == self._end and self._large is None:
            self._area = bytearray(_FIRST_AREA_BYTES)
            self._start = self._end = 0
            self._grow = False
        else:
            self._arm_shrink()

    async def wait_frame(self) -> None:
        if self._frames or self._frame_error is not None or self._eof:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._frame_waiter = waiter
        try:
            await waiter
        finally:
            self._frame_waiter = None

    # -- writing --------------------------------------------------------------------------------
    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if not self._write_paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter
        if self._lost:
            raise ConnectionResetError("Connection lost")


class _Connection:
    __slots__ = ("info", "protocol", "transport", "handler", "busy", "task",
                 "sendfile", "_sock", "_closing", "_pending", "_out", "_out_bytes", "_flush_handle")

    def __init__(self, info: ConnectionInfo, protocol: _RequestProtocol, handler: RequestHandler,
                 sendfile: SendfileConfig) -> None:
        self.info = info
        self.protocol = protocol
        assert protocol.transport is not None
        self.transport: asyncio.Transport = protocol.transport
        self.handler = handler
        self.busy = False
        self.task: Optional[asyncio.Task[None]] = None
        self.sendfile = sendfile
        self._sock: Optional[socket.socket] = None      # a dup of the transport's socket, for sendfile
        self._closing = [False]                          # tells a worker's send loop to stop
        self._pending: Optional[concurrent.futures.Future[None]] = None
        self._out: list[Union[bytes, bytearray]] = []     # answered, not yet handed to the transport
        self._out_bytes = 0
        self._flush_handle: Optional[asyncio.Handle] = None

    def _flush_out(self) -> None:
        """Hand the held responses to the transport in one write, in request order."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_bytes = 0
        if not self.transport.is_closing():
            self.transport.write(data)

    async def _write(self, response: Response) -> None:
        transport = self.transport
        if isinstance(response, ResponseSend):
            self._flush_out()
            cfg = self.sendfile
            if cfg.executor is None or response.file_bytes < cfg.min_bytes \
                    or cfg.in_flight >= cfg.max_in_flight \
                    or self.info.security_protocol not in ("PLAINTEXT", "SASL_PLAINTEXT"):
                response = response.materialize()
            else:
                cfg.in_flight += 1
                try:
                    await self._send_zero_copy(response, cfg.executor)
                finally:
                    cfg.in_flight -= 1
                return
        self._out.append(response)
        self._out_bytes += len(response)
        if self._out_bytes < COALESCE_MAX_BYTES and transport.get_write_buffer_size() <= 1 << 20:
            # written once this turn of the loop ends: when the connection's task waits (for the
            # next request's bytes or a delayed operation), never later
            if self._flush_handle is None:
                self._flush_handle = asyncio.get_running_loop().call_soon(self._flush_out)
            return
        self._flush_out()
        if transport.get_write_buffer_size() > 1 << 20:
            await self.protocol.drain()

    async def _send_zero_copy(self, response: ResponseSend, executor: ThreadPoolExecutor) -> None:
        """Hold the connection's response stream (the next request is read only after this one
        is answered), let the transport flush what it buffered, then a worker thread sends the
        parts on a duplicate of the socket's descriptor; the loop keeps reading into the stream."""
        transport = self.transport
        if transport.get_write_buffer_size() > 0:
            transport.set_write_buffer_limits(high=0, low=0)
            try:
                await self.protocol.drain()
            finally:
                if not transport.is_closing():  # a closed uvloop transport raises here
                    transport.set_write_buffer_limits()
            while transport.get_write_buffer_size() > 0:  # drain() wakes on low water; be sure
                if transport.is_closing():
                    raise ConnectionResetError("connection closed while flushing")
                await asyncio.sleep(0.001)
        if self._sock is None:
            raw = transport.get_extra_info("socket")
            if raw is None:
                transport.write(response.materialize())
                return
            self._sock = socket.socket(fileno=os.dup(raw.fileno()))
        parts = response.for_sendfile()
        # The concurrent future, not an asyncio wrapper: a cancelled wrapper reports done while
        # the worker still sends, and _release_socket must not close the descriptor under it.
        fut = executor.submit(send_blocking, self._sock, parts, self._closing)
        self._pending = fut
        await asyncio.wrap_future(fut)
        self._pending = None

    def _release_socket(self) -> None:
        self._closing[0] = True
        sock, self._sock = self._sock, None
        if sock is None:
            return
        pending = self._pending
        if pending is not None and not pending.done():
            # a worker is mid-send (the task was cancelled): end the connection now, which also
            # fails the worker's next send, and close the descriptor once the worker let go
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            pending.add_done_callback(lambda _f: sock.close())
        else:
            sock.close()

    async def run(self) -> None:
        protocol = self.protocol
        try:
            while True:
                frame = protocol.next_frame()
                if frame is None:
                    await protocol.wait_frame()
                    continue
                if self._out and frame[:2] != _PRODUCE_KEY:
                    # held answers wait only behind pipelined Produce requests (short, and what
                    # the coalescing is for), never behind a request that may take long
                    self._flush_out()
                self.busy = True
                try:
                    response = await self.handler(self.info, memoryview(frame))
                    if response is not None:
                        await self._write(response)
                finally:
                    self.busy = False
        except _FrameError as e:
            log.warning("closing %s: %s", self.info.connection_id, e)
        except CloseConnection as e:
            log.info("closing %s: %s", self.info.connection_id, e)
        except RegionChangedError as e:
            # the response is incomplete on the wire: the client sees a closed connection, never
            # bytes other than the ones the log read
            log.warning("closing %s: %s", self.info.connection_id, e)
        except (EOFError, ConnectionError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one connection take the broker down
            log.exception("closing %s after an unexpected error", self.info.connection_id)
        finally:
            self._flush_out()     # answers to earlier requests still leave before the close
            self._release_socket()
            self.transport.close()


class SocketServer:
    """Owns the listening sockets and the connection tasks it starts."""

    def __init__(self, endpoints: list[Endpoint], handler: RequestHandler, max_request_bytes: int,
                 send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1,
                 zero_copy: bool = True, sendfile_min_bytes: int = SENDFILE_MIN_BYTES,
                 listen_backlog: int = 1024) -> None:
        self._endpoints = endpoints
        self._listen_backlog = listen_backlog     # socket.listen.backlog.size
        # sendfile loops block in poll() while a slow consumer's socket is full: their own threads
        self._sendfile = SendfileConfig(
            ThreadPoolExecutor(max_workers=SENDFILE_WORKERS, thread_name_prefix="sendfile")
            if zero_copy and sendfile_min_bytes >= 0 else None,
            sendfile_min_bytes)
        self._handler = handler
        self._max_request_bytes = max_request_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._servers: list[tuple[Endpoint, asyncio.base_events.Server]] = []
        self._connections: set[_Connection] = set()
        self.bound: list[Endpoint] = []

    async def bind(self) -> list[Endpoint]:
        """Bind every listener (port 0 gets a real port) without accepting yet: Kafka enables
        request processing only once the broker is ready."""
        for ep in self._endpoints:
            try:
                server = await asyncio.get_running_loop().create_server(
                    lambda ep=ep: _RequestProtocol(self._max_request_bytes, lambda p, ep=ep: self._accept(ep, p)),
                    host=ep.host or None, port=ep.port, reuse_address=True,
                    backlog=self._listen_backlog, start_serving=False)
            except OSError as e:
                raise SocketBindError(ep.host, ep.port, e) from e
            self._servers.append((ep, server))
            sock = server.sockets[0]
            host = ep.host or "0.0.0.0"
            self.bound.append(Endpoint(ep.listener_name, host, sock.getsockname()[1]))
        return self.bound

    async def start_serving(self) -> None:
        for _ep, server in self._servers:
            await server.start_serving()

    def connection_counts(self) -> dict[str, int]:
        """Open connections per listener (Kafka's connection-count; read by kafkalite.metrics)."""
        counts = {ep.listener_name: 0 for ep, _server in self._servers}
        for c in self._connections:
            counts[c.info.listener_name] = counts.get(c.info.listener_name, 0) + 1
        return counts

    def _accept(self, ep: Endpoint, protocol: _RequestProtocol) -> None:
        transport = protocol.transport
        assert transport is not None
        sock: socket.socket | None = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
                if self._receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            except OSError:
                pass
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        info = ConnectionInfo(
            connection_id=f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{next(_conn_ids)}",
            listener_name=ep.listener_name, client_host=str(peer[0]), client_port=int(peer[1]))
        conn = _Connection(info, protocol, self._handler, self._sendfile)
        self._connections.add(conn)
        conn.task = asyncio.get_running_loop().create_task(conn.run())
        conn.task.add_done_callback(lambda _t, c=conn: self._connections.discard(c))

    def stop_accepting(self) -> None:
        """No new connections; existing ones keep being served until shutdown()."""
        for _ep, server in self._servers:
            server.close()

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish and answer, then close every connection."""
        self.stop_accepting()
        deadline = asyncio.get_running_loop().time() + grace_s
        while any(c.busy for c in self._connections) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        tasks = [c.task for c in self._connections if c.task is not None]
        for c in list(self._connections):
            if c.task is not None:
                c.task.cancel()
            c._flush_out()      # answers held for this turn of the loop still leave
            c.transport.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._connections.clear()
        if self._sendfile.executor is not None:
            # every send loop was told to stop; their threads end within a poll interval
            self._sendfile.executor.shutdown(wait=False, cancel_futures=True)
