"""Heartbeat (key 12): keeps a member's session alive (its DelayedHeartbeat completes and a new
one is parked); REBALANCE_IN_PROGRESS tells the member to rejoin."""
from __future__ import annotations

from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 12
MIN_VERSION, MAX_VERSION = 0, 4


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
        v = ctx.api_version
        error = coordinator.handle_heartbeat(req.group_id, req.member_id,
                                             req.group_instance_id if v >= 3 else None, req.generation_id)
        return HeartbeatResponse[v](throttle_time_ms=0, error_code=error)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
