"""DescribeCluster (key 60), v0-2: cluster id, controller and the brokers' endpoints on the
request's listener, as Kafka's AuthHelper.computeDescribeClusterResponse answers on a broker.

Endpoint type (v1+): a broker describes brokers (1); controllers (2) get MISMATCHED_ENDPOINT_TYPE,
other values UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0). Cluster authorized operations,
when asked for: with no authorizer every operation the CLUSTER resource supports. No broker is
ever fenced here (v2's IsFenced is false, IncludeFencedBrokers changes nothing)."""
from __future__ import annotations

from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.metadata import CLUSTER_AUTHORIZED_OPERATIONS
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 60
MIN_VERSION, MAX_VERSION = 0, 2

ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_NAMES = {1: "BROKER", 2: "CONTROLLER"}
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache

    async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
        v = ctx.api_version
        Resp = DescribeClusterResponse[v]
        endpoint_type = req.endpoint_type if v >= 1 else ENDPOINT_TYPE_BROKER
        if endpoint_type != ENDPOINT_TYPE_BROKER:
            if endpoint_type in ENDPOINT_TYPE_NAMES:
                code = MISMATCHED_ENDPOINT_TYPE
                message = (f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                           f"of type {ENDPOINT_TYPE_NAMES[endpoint_type]}")
            else:
                code = UNSUPPORTED_ENDPOINT_TYPE
                message = f"Unsupported endpoint type {endpoint_type}"
            # a bare answer: no cluster id, no brokers, the schema's defaults
            return Resp(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST if v == 0 else code,
                        error_message=message, endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id="",
                        controller_id=-1, brokers=[], authorized_operations=None)
        B = Resp.DescribeClusterBroker
        brokers = []
        for b in sorted(cache.alive_brokers(), key=lambda b: b.broker_id):
            ep = b.endpoint(ctx.listener_name)
            if ep is not None:
                brokers.append(B(broker_id=b.broker_id, host=ep.host, port=ep.port, rack=b.rack, is_fenced=False))
        controller_id = cache.controller_id if any(b.broker_id == cache.controller_id for b in brokers) else -1
        ops = CLUSTER_AUTHORIZED_OPERATIONS if req.include_cluster_authorized_operations else None
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                    endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id=cache.cluster_id, controller_id=controller_id,
                    brokers=brokers, authorized_operations=ops)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
