"""A broker's client connections to the other brokers of the cluster, one per destination broker,
reused across requests (the NetworkClient of Kafka's InterBrokerSendThreads: the transaction
marker channel, the AddPartitionsToTxn verification channel).

A destination is found in the metadata cache on the inter-broker listener; a broker that is not
alive (or lacks the listener) has no connection. A connection whose broker came back on another
address is replaced; connections to brokers that left the cluster are closed on the next
lookup. Each connection keeps one request in flight (BrokerConnection), as Kafka's senders do.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from kafkalite.network.broker_client import BrokerConnection

log = logging.getLogger(__name__)


class InterBrokerConnections:
    def __init__(self, metadata_cache: Any, listener_name: str, client_id: str, request_timeout_ms: int,
                 connect_timeout_ms: int = 10_000) -> None:
        self.cache = metadata_cache
        self.listener_name = listener_name
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def connection(self, broker_id: int) -> Optional[BrokerConnection]:
        """The connection to `broker_id` on the inter-broker listener; None when the broker is not
        alive or has no such listener."""
        if self._closed:
            return None
        self._forget_departed()
        ep = self.cache.alive_endpoint(broker_id, self.listener_name)
        if ep is None:
            return None
        conn = self._connections.get(broker_id)
        if conn is not None and (conn.host, conn.port) == (ep.host, ep.port):
            return conn
        if conn is not None:
            self._retire(conn)
        conn = BrokerConnection(ep.host, ep.port, client_id=self.client_id,
                                request_timeout_ms=self.request_timeout_ms,
                                connect_timeout_ms=self.connect_timeout_ms)
        self._connections[broker_id] = conn
        return conn

    def _forget_departed(self) -> None:
        for broker_id in [b for b in self._connections if not self.cache.has_alive_broker(b)]:
            self._retire(self._connections.pop(broker_id))

    def _retire(self, conn: BrokerConnection) -> None:
        task = asyncio.get_running_loop().create_task(conn.close(), name=f"close-{conn!r}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        self._closed = True
        conns = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in conns), *self._closing, return_exceptions=True)
