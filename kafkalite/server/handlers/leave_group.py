"""LeaveGroup (key 13): members leave (one member id before v3; a batch of member identities
from v3, where an empty member id with a group instance id removes that static member, as admin
tools do). Before v3 the single member's error is the response's error."""
from __future__ import annotations

from kafka.protocol.consumer.group import LeaveGroupRequest, LeaveGroupResponse

from kafkalite.coordinator.group.group_coordinator import MemberIdentity
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 13
MIN_VERSION, MAX_VERSION = 0, 5
MIN_BATCHED_VERSION = 3


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
        v = ctx.api_version
        Resp = LeaveGroupResponse[v]
        if v < MIN_BATCHED_VERSION:
            members = [MemberIdentity(req.member_id)]
        else:
            members = [MemberIdentity(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                       for m in req.members]
        result = coordinator.handle_leave_group(req.group_id, members)
        if v < MIN_BATCHED_VERSION:
            # Kafka's LeaveGroupResponse for old versions: the top-level error, else the first
            # member error
            error = result.error
            if error == ErrorCode.NONE:
                error = next((m.error for m in result.members if m.error != ErrorCode.NONE), ErrorCode.NONE)
            return Resp(throttle_time_ms=0, error_code=error)
        M = Resp.MemberResponse
        return Resp(throttle_time_ms=0, error_code=result.error,
                    members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
                             for m in result.members])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
