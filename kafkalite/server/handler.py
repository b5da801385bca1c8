"""The shape of an API handler and the registry of the APIs the broker advertises."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from kafka.protocol.api_message import ApiMessage

from kafkalite.server.request_context import RequestContext

# A handler answers a decoded request with a response object, or None when Kafka sends no
# response (Produce with acks=0). It may await delayed operations (purgatory) before answering.
HandlerFn = Callable[[RequestContext, Any], Awaitable[Optional[ApiMessage]]]


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
