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
    # What ApiVersions reports as the minimum when it differs from what is served. Kafka 4
    # advertises Produce from v0 although it refuses v0-2 (KAFKA-18659): librdkafka up to 2.11
    # enables gzip/snappy/lz4 only when Produce v0 is in the advertised range.
    advertised_min_version: int | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
