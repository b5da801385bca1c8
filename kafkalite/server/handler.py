"""The shape of an API handler and the registry of the APIs the broker advertises."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Awaitable, Callable, Optional

from kafka.protocol.api_message import ApiMessage

from kafkalite.server.request_context import RequestContext

# A handler answers a decoded request with a response object, or None when Kafka sends no
# response (Produce with acks=0). It may await delayed operations (purgatory) before answering.
HandlerFn = Callable[[RequestContext, Any], Awaitable[Optional[ApiMessage]]]

HANDLERS_PACKAGE = "kafkalite.server.handlers"

# handler module (kafkalite.server.handlers.<name>) -> (api key, min version, max version): what
# ApiVersions advertises, known without importing the module (each module's API_KEY, MIN_VERSION
# and MAX_VERSION; a unit test checks they agree)
HANDLER_VERSIONS: dict[str, tuple[int, int, int]] = {
    "produce": (0, 0, 13),
    "fetch": (1, 0, 18),
    "list_offsets": (2, 0, 10),
    "metadata": (3, 0, 13),
    "leader_and_isr": (4, 0, 7),
    "stop_replica": (5, 0, 4),
    "update_metadata": (6, 0, 8),
    "controlled_shutdown": (7, 0, 3),
    "offset_commit": (8, 1, 10),
    "offset_fetch": (9, 1, 10),
    "find_coordinator": (10, 0, 6),
    "join_group": (11, 0, 9),
    "heartbeat": (12, 0, 4),
    "leave_group": (13, 0, 5),
    "sync_group": (14, 0, 5),
    "describe_groups": (15, 0, 6),
    "list_groups": (16, 0, 5),
    "api_versions": (18, 0, 4),
    "create_topics": (19, 0, 7),
    "delete_topics": (20, 0, 6),
    "delete_records": (21, 0, 2),
    "init_producer_id": (22, 0, 5),
    "offset_for_leader_epoch": (23, 0, 4),
    "add_partitions_to_txn": (24, 0, 5),
    "add_offsets_to_txn": (25, 0, 4),
    "end_txn": (26, 0, 4),
    "write_txn_markers": (27, 0, 1),
    "txn_offset_commit": (28, 0, 4),
    "describe_configs": (32, 0, 4),
    "alter_configs": (33, 0, 2),
    "describe_log_dirs": (35, 0, 5),
    "create_partitions": (37, 0, 3),
    "delete_groups": (42, 0, 2),
    "elect_leaders": (43, 0, 2),
    "incremental_alter_configs": (44, 0, 1),
    "alter_partition_reassignments": (45, 0, 0),
    "list_partition_reassignments": (46, 0, 0),
    "offset_delete": (47, 0, 0),
    "alter_partition": (56, 0, 3),
    "describe_cluster": (60, 0, 2),
    "describe_producers": (61, 0, 0),
    "describe_transactions": (65, 0, 0),
    "list_transactions": (66, 0, 1),
}


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def lazy_spec(module: str, make: Callable[[ModuleType], ApiSpec]) -> ApiSpec:
    """The spec of handler module `module` (a key of HANDLER_VERSIONS) whose module is imported,
    and whose handler `make(module)` builds, on the API's first request: a broker's start-up
    imports no handler, nor the protocol classes only handlers use. Requests are handled on the
    event loop's thread, and nothing awaits between the check and the store, so `make` runs once."""
    api_key, min_version, max_version = HANDLER_VERSIONS[module]
    made: list[HandlerFn] = []

    def handle(ctx: RequestContext, request: Any) -> Awaitable[Optional[ApiMessage]]:
        # a plain function handing back the handler's awaitable: no coroutine of its own per request
        if not made:
            spec = make(importlib.import_module(f"{HANDLERS_PACKAGE}.{module}"))
            made.append(spec.handler)
        return made[0](ctx, request)

    return ApiSpec(api_key, min_version, max_version, handle)
