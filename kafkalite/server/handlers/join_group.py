"""JoinGroup (key 11): a member joins (or rejoins) a classic group; the answer is delayed until
the group's join phase completes (DelayedJoin / InitialDelayedJoin in the rebalance purgatory).

Version notes: v0 has no rebalance timeout (the session timeout stands in, as in Kafka); from v4 a
member without id gets MEMBER_ID_REQUIRED and an id to rejoin with (KIP-394), unless static; v5
adds static membership (group.instance.id); v7 makes the protocol name nullable and adds the
protocol type; v8 a reason; v9 SkipAssignment for a static leader rejoining a stable group.
"""
from __future__ import annotations

from kafka.protocol.consumer.group import JoinGroupRequest, JoinGroupResponse

from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 11
MIN_VERSION, MAX_VERSION = 0, 9


def client_host(ctx: RequestContext) -> str:
    """How Kafka shows a client's address (InetAddress.toString without a resolved name)."""
    return "/" + ctx.connection.client_host


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
        v = ctx.api_version
        group_instance_id = req.group_instance_id if v >= 5 else None
        result = await coordinator.join_group(
            req.group_id, req.member_id, group_instance_id,
            require_known_member_id=v >= 4 and group_instance_id is None,
            support_skipping_assignment=v >= 9,
            client_id=ctx.client_id or "", client_host=client_host(ctx),
            rebalance_timeout_ms=req.session_timeout_ms if v == 0 else req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            reason=req.reason if v >= 8 else None)
        Resp = JoinGroupResponse[v]
        M = Resp.JoinGroupResponseMember
        return Resp(
            throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            # not nullable before v7
            protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
            leader=result.leader_id, skip_assignment=result.skip_assignment, member_id=result.member_id,
            members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
                     for m in result.members])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
