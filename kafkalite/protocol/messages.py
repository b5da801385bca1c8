"""Request/response classes by API key, taken from kafka-python's JSON-driven codec.

kafka-python >= 3 ships Apache Kafka's JSON message specs and generates encoders/decoders from
them; the broker uses the same classes in the other direction (decode requests, encode responses).
The inter-broker APIs kafka-python lacks (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown, AlterPartition) come from our own specs, in :mod:`kafkalite.protocol.inter_broker`.

An API's classes load on its first use (`messages_for`): each module builds its classes from their
JSON schemas when it is imported, ~0.1 s for all of them, most of which a broker needs late or
never (ACLs, quotas, SCRAM ...). `API_MODULES` says where each API key's pair lives; a unit test
checks it against the classes an import of every module defines.
"""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import Optional

from kafka.protocol.api_message import ApiMessage

# api key -> the module defining its Request and Response classes
API_MODULES: dict[int, str] = {
    0: "kafka.protocol.producer.produce",
    1: "kafka.protocol.consumer.fetch",
    2: "kafka.protocol.consumer.offsets",
    3: "kafka.protocol.metadata.metadata",
    4: "kafkalite.protocol.inter_broker",
    5: "kafkalite.protocol.inter_broker",
    6: "kafkalite.protocol.inter_broker",
    7: "kafkalite.protocol.inter_broker",
    8: "kafka.protocol.consumer.group",
    9: "kafka.protocol.consumer.group",
    10: "kafka.protocol.metadata.find_coordinator",
    11: "kafka.protocol.consumer.group",
    12: "kafka.protocol.consumer.group",
    13: "kafka.protocol.consumer.group",
    14: "kafka.protocol.consumer.group",
    15: "kafka.protocol.admin.groups",
    16: "kafka.protocol.admin.groups",
    17: "kafka.protocol.sasl",
    18: "kafka.protocol.metadata.api_versions",
    19: "kafka.protocol.admin.topics",
    20: "kafka.protocol.admin.topics",
    21: "kafka.protocol.admin.topics",
    22: "kafka.protocol.producer.transaction",
    23: "kafka.protocol.consumer.offsets",
    24: "kafka.protocol.producer.transaction",
    25: "kafka.protocol.producer.transaction",
    26: "kafka.protocol.producer.transaction",
    27: "kafka.protocol.producer.transaction",
    28: "kafka.protocol.producer.transaction",
    29: "kafka.protocol.admin.acl",
    30: "kafka.protocol.admin.acl",
    31: "kafka.protocol.admin.acl",
    32: "kafka.protocol.admin.configs",
    33: "kafka.protocol.admin.configs",
    34: "kafka.protocol.admin.cluster",
    35: "kafka.protocol.admin.cluster",
    36: "kafka.protocol.sasl",
    37: "kafka.protocol.admin.topics",
    42: "kafka.protocol.admin.groups",
    43: "kafka.protocol.admin.topics",
    44: "kafka.protocol.admin.configs",
    45: "kafka.protocol.admin.topics",
    46: "kafka.protocol.admin.topics",
    47: "kafka.protocol.consumer.group",
    48: "kafka.protocol.admin.client_quotas",
    49: "kafka.protocol.admin.client_quotas",
    50: "kafka.protocol.admin.users",
    51: "kafka.protocol.admin.users",
    55: "kafka.protocol.admin.cluster",
    56: "kafkalite.protocol.inter_broker",
    57: "kafka.protocol.admin.cluster",
    60: "kafka.protocol.admin.cluster",
    61: "kafka.protocol.admin.transactions",
    65: "kafka.protocol.admin.transactions",
    66: "kafka.protocol.admin.transactions",
    74: "kafka.protocol.admin.configs",
    75: "kafka.protocol.admin.topics",
}


@dataclass(frozen=True)
class ApiMessages:
    api_key: int
    request: type[ApiMessage]
    response: type[ApiMessage]
    name: str = field(init=False)   # "Produce", ...: read per request, computed once

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.request.name.removesuffix("Request"))


def module_pairs(module_name: str) -> dict[int, ApiMessages]:
    """The (request, response) pairs `module_name` defines, by api key: its primary classes
    (versioned wrappers such as Foo_v3 carry a _class_version and are left out)."""
    module = importlib.import_module(module_name)
    kinds: dict[int, dict[str, type[ApiMessage]]] = {}
    for value in vars(module).values():
        if (isinstance(value, type) and issubclass(value, ApiMessage) and value.__module__ == module_name
                and getattr(value, "_class_version", None) is None and getattr(value, "_json", None) is not None):
            kinds.setdefault(value.API_KEY, {})[value.type] = value
    return {key: ApiMessages(key, pair["request"], pair["response"])
            for key, pair in kinds.items() if "request" in pair and "response" in pair}


_loaded: dict[int, ApiMessages] = {}
# Requests are decoded on the event loop, but a client of another thread (broker_client users,
# tools) may ask too: one thread loads a module's classes while the others wait for them.
_load_lock = threading.Lock()


def messages_for(api_key: int) -> Optional[ApiMessages]:
    """The classes of `api_key`, loaded on first use; None for a key kafka-python has no classes for."""
    msgs = _loaded.get(api_key)
    if msgs is not None:
        return msgs
    module_name = API_MODULES.get(api_key)
    if module_name is None:
        return None
    with _load_lock:
        if api_key not in _loaded:
            _loaded.update(module_pairs(module_name))
        return _loaded.get(api_key)
