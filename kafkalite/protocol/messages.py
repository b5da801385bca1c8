"""Request/response classes by API key, taken from kafka-python's JSON-driven codec.

kafka-python >= 3 ships Apache Kafka's JSON message specs and generates encoders/decoders from
them; the broker uses the same classes in the other direction (decode requests, encode responses).
The inter-broker APIs kafka-python lacks (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown, AlterPartition) come from our own specs, in :mod:`kafkalite.protocol.inter_broker`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Iterator

from kafka.protocol.api_message import ApiMessage

_CODEC_MODULES = (
    "kafka.protocol.metadata",
    "kafka.protocol.producer",
    "kafka.protocol.consumer",
    "kafka.protocol.admin",
    "kafkalite.protocol.inter_broker",
)


@dataclass(frozen=True)
class ApiMessages:
    api_key: int
    request: type[ApiMessage]
    response: type[ApiMessage]

    @property
    def name(self) -> str:
        return self.request.name.removesuffix("Request")


def _all_subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _load() -> dict[int, ApiMessages]:
    for mod in _CODEC_MODULES:
        importlib.import_module(mod)
    pairs: dict[int, dict[str, type[ApiMessage]]] = {}
    for cls in _all_subclasses(ApiMessage):
        # versioned wrappers (Foo_v3) carry a _class_version; keep only the primary classes
        if getattr(cls, "_class_version", None) is not None:
            continue
        try:
            pairs.setdefault(cls.API_KEY, {})[cls.type] = cls
        except (AttributeError, TypeError, KeyError):
            continue
    return {
        key: ApiMessages(key, kinds["request"], kinds["response"])
        for key, kinds in pairs.items()
        if "request" in kinds and "response" in kinds
    }


API_MESSAGES: dict[int, ApiMessages] = _load()


def messages_for(api_key: int) -> ApiMessages | None:
    return API_MESSAGES.get(api_key)
