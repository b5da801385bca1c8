"""Sendfile workers block for as long as their client does not read. Clients that stopped
reading must hold only their own connections (as in Kafka): once every worker is taken, a large
response goes out through the copy path instead of queueing behind them. Real sockets, a real
file, the real SocketServer."""
from __future__ import annotations

import asyncio
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

from kafkalite.network.send import FileRegion, ResponseSend
from kafkalite.network.socket_server import ConnectionInfo, Endpoint, SendfileConfig, SocketServer

SIZE = 8 << 20


class _Owner:
    truncations = 0


def test_a_stalled_client_does_not_hold_other_connections_large_responses(tmp_path: Path) -> None:
    data = os.urandom(SIZE)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)

    async def handler(conn: ConnectionInfo, frame: memoryview) -> Optional[ResponseSend]:
        return ResponseSend([SIZE.to_bytes(4, "big"), FileRegion(fd, 0, SIZE, _Owner(), 0)])

    async def run() -> bytes:
        server = SocketServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], handler, 1 << 20,
                              send_buffer_bytes=64 * 1024)
        # one sendfile worker, so a single stalled client takes them all
        server._sendfile = SendfileConfig(ThreadPoolExecutor(1, thread_name_prefix="sendfile-test"),
                                          64 * 1024, max_in_flight=1)
        (ep,) = await server.bind()
        await server.start_serving()
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", ep.port))
        try:
            stalled.sendall((4).to_bytes(4, "big") + b"ping")      # asks, then never reads
            deadline = time.monotonic() + 10
            while server._sendfile.in_flight < 1:
                assert time.monotonic() < deadline, "the stalled client's response never started"
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            assert server._sendfile.in_flight == 1        # its worker is stuck in poll()
            reader, writer = await asyncio.open_connection("127.0.0.1", ep.port)
            writer.write((4).to_bytes(4, "big") + b"ping")
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 30), "big")
            body = await asyncio.wait_for(reader.readexactly(size), 30)
            writer.close()
            return body
        finally:
            stalled.close()
            await server.shutdown(grace_s=1.0)
            server._sendfile.executor.shutdown(wait=True)  # type: ignore[union-attr]

    try:
        assert asyncio.run(run()) == data
    finally:
        os.close(fd)
