"""SyncGroup (key 14): the leader hands in the assignment, every member receives its own; members
wait until the leader's assignment is stored. From v5 the protocol type and name are required and
must match the group's (INCONSISTENT_GROUP_PROTOCOL otherwise)."""
from __future__ import annotations

from kafka.protocol.consumer.group import SyncGroupRequest, SyncGroupResponse

from kafkalite.coordinator.group.group_metadata import SyncGroupResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 14
MIN_VERSION, MAX_VERSION = 0, 5


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
        v = ctx.api_version
        if v >= 5 and (req.protocol_type is None or req.protocol_name is None):
            result = SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        else:
            result = await coordinator.sync_group(
                req.group_id, req.generation_id, req.member_id,
                req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
                req.group_instance_id if v >= 3 else None,
                {a.member_id: bytes(a.assignment) for a in req.assignments})
        return SyncGroupResponse[v](throttle_time_ms=0, error_code=result.error,
                                    protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                                    assignment=result.assignment)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
