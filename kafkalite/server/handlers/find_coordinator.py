"""FindCoordinator (key 10): the broker leading the `__consumer_offsets` partition of a group
(key type 0) or of the `__transaction_state` partition of a transactional id (key type 1), one
key (v0-3) or a batch of keys (v4+).

As Kafka (ZooKeeper mode) does, the first request finding no `__consumer_offsets` /
`__transaction_state` topic creates it and answers COORDINATOR_NOT_AVAILABLE; the client retries.
The answer is the partition's leader as the metadata cache has it; the coordinators load and
unload their partitions only as the replica manager reports leadership changes (Kafka's
onLeadershipChange), never from here, so a coordinator that moved with its partition has
loaded it from its own replica of the log.
The share key type (v6) is COORDINATOR_NOT_AVAILABLE, as in Kafka 3.9, which has no share
coordinator either; below v6 it and any other key type are INVALID_REQUEST.
"""
from __future__ import annotations

from typing import Optional

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from kafkalite.coordinator.group.types import GROUP_METADATA_TOPIC_NAME
from kafkalite.coordinator.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC_NAME
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 10
MIN_VERSION, MAX_VERSION = 0, 6
MIN_BATCHED_VERSION = 4

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2
FIRST_SHARE_VERSION = 6

NO_NODE = (-1, "", -1)

# Errors.message() of what this handler answers (the exception's default message; NONE's is "NONE")
_MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: ("This most likely occurs because of a request being malformed by the client "
                                "library or the message was sent to an incompatible broker. See the broker "
                                "logs for more details."),
}


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache
    coordinator = services.group_coordinator
    manager = services.group_metadata_manager

    def leader_of(ctx: RequestContext, topic_name: str, partition: int
                  ) -> tuple[ErrorCode, tuple[int, str, int]]:
        """The node leading the coordinator's partition, on the request's listener."""
        topic = cache.topic(topic_name)
        info = topic.partitions.get(partition) if topic is not None else None
        if info is None or info.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        broker = cache.brokers.get(info.leader)
        ep = broker.endpoint(ctx.listener_name) if broker is not None else None
        if ep is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return ErrorCode.NONE, (info.leader, ep.host, ep.port)

    def find_transaction(ctx: RequestContext, key: str) -> tuple[ErrorCode, tuple[int, str, int]]:
        txn = services.transaction_coordinator
        if key is None:
            return ErrorCode.INVALID_REQUEST, NO_NODE
        if cache.topic(TRANSACTION_STATE_TOPIC_NAME) is None:
            txn.ensure_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return leader_of(ctx, TRANSACTION_STATE_TOPIC_NAME, txn.partition_for(key))

    def find(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, tuple[int, str, int]]:
        if key_type == KEY_TYPE_TRANSACTION:
            return find_transaction(ctx, key)
        if key_type == KEY_TYPE_SHARE and ctx.api_version >= FIRST_SHARE_VERSION:
            # Kafka 3.9 knows the key type but has no share coordinator yet (KIP-932)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        if key_type != KEY_TYPE_GROUP:
            return ErrorCode.INVALID_REQUEST, NO_NODE
        if cache.topic(GROUP_METADATA_TOPIC_NAME) is None:
            manager.ensure_offsets_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return leader_of(ctx, GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(key))

    async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
        v = ctx.api_version
        Resp = FindCoordinatorResponse[v]
        key_type = req.key_type if v >= 1 else KEY_TYPE_GROUP
        if v < MIN_BATCHED_VERSION:
            error, (node_id, host, port) = find(ctx, key_type, req.key)
            message: Optional[str] = _MESSAGES.get(error, error.name)
            return Resp(throttle_time_ms=0, error_code=error, error_message=message, node_id=node_id, host=host,
                        port=port)
        C = Resp.Coordinator
        coordinators = []
        for key in req.coordinator_keys:
            error, (node_id, host, port) = find(ctx, key_type, key)
            # Kafka sets no message per coordinator: the schema's default, ""
            coordinators.append(C(key=key, node_id=node_id, host=host, port=port, error_code=error,
                                  error_message=""))
        return Resp(throttle_time_ms=0, coordinators=coordinators)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
