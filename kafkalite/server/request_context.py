"""What a handler knows about the request it is answering."""
from __future__ import annotations

from typing import NamedTuple

from kafkalite.network.socket_server import ConnectionInfo
from kafkalite.protocol.header import RequestHeader


class RequestContext(NamedTuple):
    """A named tuple: one is built per request."""
    header: RequestHeader
    connection: ConnectionInfo

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def listener_name(self) -> str:
        return self.connection.listener_name
