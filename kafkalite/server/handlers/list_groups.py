"""ListGroups (key 16): the groups this coordinator holds, with their protocol type; v4 adds the
state and a state filter (case-insensitive), v5 the group type ("classic" for every group here)
and a type filter. While a `__consumer_offsets` partition is loading the groups loaded so far are
listed with COORDINATOR_LOAD_IN_PROGRESS, as in Kafka."""
from __future__ import annotations

from kafka.protocol.admin.groups import ListGroupsRequest, ListGroupsResponse

from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 16
MIN_VERSION, MAX_VERSION = 0, 5


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
        v = ctx.api_version
        states = (req.states_filter or []) if v >= 4 else []
        types = (req.types_filter or []) if v >= 5 else []
        error, groups = coordinator.handle_list_groups(states, types)
        Resp = ListGroupsResponse[v]
        L = Resp.ListedGroup
        return Resp(throttle_time_ms=0, error_code=error,
                    groups=[L(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                              group_type=g.group_type) for g in groups])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
