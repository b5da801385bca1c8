"""DeleteGroups (key 42): deletes Empty groups with their offsets (tombstones in
`__consumer_offsets`); NON_EMPTY_GROUP for a group with members, GROUP_ID_NOT_FOUND for one that
does not exist. Each group id is answered once."""
from __future__ import annotations

from kafka.protocol.admin.groups import DeleteGroupsRequest, DeleteGroupsResponse

from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 42
MIN_VERSION, MAX_VERSION = 0, 2


def make(services: BrokerServices) -> ApiSpec:
    coordinator = services.group_coordinator

    async def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
        v = ctx.api_version
        group_ids = list(dict.fromkeys(req.groups_names))
        errors = await coordinator.handle_delete_groups(group_ids)
        Resp = DeleteGroupsResponse[v]
        R = Resp.DeletableGroupResult
        return Resp(throttle_time_ms=0, results=[R(group_id=g, error_code=errors[g]) for g in group_ids])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
