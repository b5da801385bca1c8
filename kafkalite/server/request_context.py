"""What a handler knows about the request it is answering."""
from __future__ import annotations

from dataclasses import dataclass

from kafkalite.network.socket_server import ConnectionInfo
from kafkalite.protocol.header import RequestHeader


@dataclass(frozen=True, slots=True)
class RequestContext:
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
