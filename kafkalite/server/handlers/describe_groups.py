"""DescribeGroups (key 15): state, protocol and members of groups. Member metadata and
assignments are given only for a Stable group (Kafka's GroupSummary). A group that does not exist
is described as Dead with no error before v6 and with GROUP_ID_NOT_FOUND from v6 (KIP-1043).
v3 adds authorized operations (with no authorizer: every operation a group supports: READ,
DELETE, DESCRIBE), v4 the members' group instance ids."""
from __future__ import annotations

from kafka.protocol.admin.groups import DescribeGroupsRequest, DescribeGroupsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 15
MIN_VERSION, MAX_VERSION = 0, 6

# AclOperation codes READ (3), DELETE (6), DESCRIBE (8); the codec takes a bitfield as bit positions
GROUP_AUTHORIZED_OPERATIONS = frozenset({3, 6, 8})
AUTHORIZED_OPERATIONS_OMITTED = None  # encoded as INT32_MIN


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
        v = ctx.api_version
        Resp = DescribeGroupsResponse[v]
        G = Resp.DescribedGroup
        M = G.DescribedGroupMember
        include_ops = v >= 3 and bool(req.include_authorized_operations)
        groups = []
        for group_id in req.groups:
            error, message, summary = coordinator.handle_describe_group(group_id, v)
            ops = GROUP_AUTHORIZED_OPERATIONS if include_ops and error == ErrorCode.NONE else AUTHORIZED_OPERATIONS_OMITTED
            groups.append(G(
                error_code=error, error_message=message, group_id=group_id, group_state=summary.state,
                protocol_type=summary.protocol_type, protocol_data=summary.protocol,
                members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                           client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                         for m in summary.members],
                authorized_operations=ops))
        return Resp(throttle_time_ms=0, groups=groups)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
