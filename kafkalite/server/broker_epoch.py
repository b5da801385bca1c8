"""This broker's epoch (the czxid of its `/brokers/ids/<id>` registration) and Kafka's fencing
of controller requests by it (ZkBrokerEpochManager.isBrokerEpochStale)."""
from __future__ import annotations

import logging
from typing import Optional

from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_BROKER_EPOCH = -1    # AbstractControlRequest.UNKNOWN_BROKER_EPOCH: the sender does not check
# Errors.STALE_BROKER_EPOCH (77)
STALE_BROKER_EPOCH: int = int(getattr(ErrorCode, "STALE_BROKER_EPOCH", 77))


class BrokerEpoch:
    """Set by the broker each time it registers in ZooKeeper (-1 until then)."""

    def __init__(self, epoch: int = UNKNOWN_BROKER_EPOCH) -> None:
        self.current = epoch

    def set(self, epoch: int) -> None:
        self.current = epoch

    def is_stale(self, request_broker_epoch: int, is_kraft_controller: bool = False) -> bool:
        """A request meant for an earlier registration of this broker (it restarted quickly) is
        stale. One with a newer epoch is not: the controller may learn the new registration
        before this broker does. Requests from a KRaft controller cannot be checked by a
        ZooKeeper-mode broker: Kafka raises IllegalStateException there, so do we."""
        if request_broker_epoch == UNKNOWN_BROKER_EPOCH:
            return False
        if is_kraft_controller:
            raise RuntimeError("Expected BrokerLifecycleManager to be non-null.")
        return request_broker_epoch < self.current

    def fence(self, api: str, request_broker_epoch: int, is_kraft_controller: bool, controller_id: int,
              controller_epoch: int) -> Optional[int]:
        """KafkaApis' check before a controller request (LeaderAndIsr, StopReplica,
        UpdateMetadata) is applied: None to go on, else the error code to answer with
        (STALE_BROKER_EPOCH, or UNKNOWN_SERVER_ERROR for a KRaft controller's request)."""
        try:
            stale = self.is_stale(request_broker_epoch, is_kraft_controller)
        except RuntimeError:
            log.exception("%s from a KRaft controller %d", api, controller_id)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if stale:
            log.info("Received %s request with broker epoch %d smaller than the current broker epoch %d "
                     "from controller %d with epoch %d.", api, request_broker_epoch, self.current,
                     controller_id, controller_epoch)
            return STALE_BROKER_EPOCH
        return None
