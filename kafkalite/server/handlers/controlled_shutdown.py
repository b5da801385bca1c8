"""ControlledShutdown (key 7), v0-3: a broker about to stop asks the controller to move its
leaderships away; the answer lists the partitions it still leads (those with no other replica to
take over). Only the active controller does the work; any other broker answers NOT_CONTROLLER
(Kafka's KafkaApis.handleControlledShutdownRequest and KafkaController.doControlledShutdown)."""
from __future__ import annotations

from typing import Any

from kafkalite.protocol.inter_broker import ControlledShutdownRequest, ControlledShutdownResponse
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

API_KEY = 7
MIN_VERSION, MAX_VERSION = 0, 3
UNKNOWN_BROKER_EPOCH = -1   # v0-1 carry no broker epoch


def make(services: Any) -> ApiSpec:
    """Needs `services.kafka_controller` (controller.kafka_controller.KafkaController)."""

    async def handle(ctx: RequestContext, req: ControlledShutdownRequest) -> ControlledShutdownResponse:
        v = ctx.api_version
        Resp = ControlledShutdownResponse[v]
        epoch = req.broker_epoch if v >= 2 else UNKNOWN_BROKER_EPOCH
        error, remaining = await services.kafka_controller.controlled_shutdown(req.broker_id, epoch)
        R = Resp.RemainingPartition
        return Resp(error_code=error, remaining_partitions=[
            R(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
