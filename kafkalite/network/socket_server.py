"""The asyncio reactor: one server per listener, one task per connection.

Kafka mutes a channel while one of its requests is in flight, so requests of one connection are
handled strictly one after another and responses leave in request order; many connections are
served concurrently. A frame whose size prefix exceeds `socket.request.max.bytes` (or is negative)
closes the connection before any of it is read into memory.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Optional, Protocol

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """Raised by the request handler when Kafka would close the connection instead of answering."""


@dataclass(slots=True)
class ConnectionInfo:
    connection_id: str
    listener_name: str
    client_host: str
    client_port: int
    security_protocol: str = "PLAINTEXT"


class RequestHandler(Protocol):
    def __call__(self, conn: ConnectionInfo, frame: memoryview) -> Awaitable[Optional[bytes]]: ...


@dataclass
class Endpoint:
    listener_name: str
    host: str
    port: int


_SIZE = 4
_conn_ids = itertools.count()


class _Connection:
    __slots__ = ("info", "reader", "writer", "handler", "max_request_bytes", "busy", "task")

    def __init__(self, info: ConnectionInfo, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 handler: RequestHandler, max_request_bytes: int) -> None:
        self.info = info
        self.reader = reader
        self.writer = writer
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.busy = False
        self.task: Optional[asyncio.Task[None]] = None

    async def run(self) -> None:
        reader, writer = self.reader, self.writer
        try:
            while True:
                size_bytes = await reader.readexactly(_SIZE)
                size = int.from_bytes(size_bytes, "big", signed=True)
                if size < 0 or size > self.max_request_bytes:
                    log.warning("closing %s: request size %d outside [0, socket.request.max.bytes=%d]",
                                self.info.connection_id, size, self.max_request_bytes)
                    return
                frame = await reader.readexactly(size)
                self.busy = True
                try:
                    response = await self.handler(self.info, memoryview(frame))
                    if response is not None:
                        writer.write(response)
                        if writer.transport.get_write_buffer_size() > 1 << 20:
                            await writer.drain()
                finally:
                    self.busy = False
        except CloseConnection as e:
            log.info("closing %s: %s", self.info.connection_id, e)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one connection take the broker down
            log.exception("closing %s after an unexpected error", self.info.connection_id)
        finally:
            writer.close()


class SocketServer:
    """Owns the listening sockets and the connection tasks it starts."""

    def __init__(self, endpoints: list[Endpoint], handler: RequestHandler, max_request_bytes: int,
                 send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1) -> None:
        self._endpoints = endpoints
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
            server = await asyncio.start_server(
                lambda r, w, ep=ep: self._accept(ep, r, w),
                host=ep.host or None, port=ep.port, reuse_address=True, limit=1 << 20,
                backlog=1024, start_serving=False)
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

    def _accept(self, ep: Endpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock: socket.socket | None = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
                if self._receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            except OSError:
                pass
        peer = writer.get_extra_info("peername") or ("?", 0)
        local = writer.get_extra_info("sockname") or ("?", 0)
        info = ConnectionInfo(
            connection_id=f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{next(_conn_ids)}",
            listener_name=ep.listener_name, client_host=str(peer[0]), client_port=int(peer[1]))
        conn = _Connection(info, reader, writer, self._handler, self._max_request_bytes)
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
            c.writer.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._connections.clear()
