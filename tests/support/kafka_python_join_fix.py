"""A work-around for a consumer-group bug of kafka-python 3.0.12 (the test client), applied to the
test session by tests/conftest.py. It changes nothing in kafkalite; it keeps a client-side race
from failing tests that use kafka-python group consumers with short polls.

The bug: `KafkaConsumer.poll(timeout_ms=T)` drives JoinGroup + SyncGroup as one task and waits
for it at most T. When the wait times out, the task is left in flight for the next poll to await
(`BaseCoordinator.join_group_async`). But the next poll only enters the join loop while
`need_rejoin()` is true, and for the group leader that rejoined because its metadata changed
(the usual case right after subscribing: the first assignment is made before the topic's
metadata arrives, "No partition metadata for topic ..."), `need_rejoin()` turned false the moment
the leader computed the new assignment (`_assignment_snapshot` = `_metadata_snapshot`). The
finished task is then never awaited: no heartbeat is enabled again, no partition is assigned, and
the coordinator removes the member after its session timeout; the consumer returns nothing for
ever. Seen in CI (tests/cluster/test_coordinator_failover.py, a 300 ms poll on a loaded machine)
and reproduced with kafka-python's DEBUG log: "Received SyncGroup response ... coordinator.poll:
timeout in ensure_active_group; returning early", then nothing. It does not depend on the
broker: the same happens against Apache Kafka.

The fix is the rule of the Java client (`AbstractCoordinator.rejoinNeededOrPending`: a pending
join future counts as a needed rejoin): a join task still held by the coordinator makes
`need_rejoin()` true, so the next poll runs the join loop again, which sends a fresh JoinGroup
for the same member and completes it (one more generation than without the race)."""
from __future__ import annotations

from typing import Any


def apply() -> bool:
    """Patches kafka-python's ConsumerCoordinator.need_rejoin when this kafka-python has the
    join-task design described above; False (nothing done) for a version that has not."""
    try:
        from kafka.coordinator.base import BaseCoordinator
        from kafka.coordinator.consumer import ConsumerCoordinator
    except ImportError:
        return False
    if getattr(ConsumerCoordinator.need_rejoin, "_kafkalite_join_fix", False):
        return True
    if "_join_task" not in BaseCoordinator.__init__.__code__.co_names:
        return False
    original = ConsumerCoordinator.need_rejoin

    def need_rejoin(self: Any) -> bool:
        return bool(original(self)) or getattr(self, "_join_task", None) is not None

    need_rejoin._kafkalite_join_fix = True  # type: ignore[attr-defined]
    need_rejoin.__doc__ = original.__doc__
    ConsumerCoordinator.need_rejoin = need_rejoin  # type: ignore[method-assign]
    return True
