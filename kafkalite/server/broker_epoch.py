"""This broker's epoch (the czxid of its `/brokers/ids/<id>` registration) and Kafka's fencing
of controller requests by it (ZkBrokerEpochManager.isBrokerEpochStale)."""
from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode

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
