"""The pure rules of partition reassignment (kafkalite/controller/reassignment.py): Kafka's
refusals with its messages, and how a target becomes RS/adding/removing (ReplicaAssignment.reassignTo,
KafkaController.maybeBuildReassignment)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.controller.reassignment import build_reassignment, validate_target_replicas
from kafkalite.controller.zk.znodes import ReplicaAssignment
from kafkalite.protocol.errors import ErrorCode

INVALID = ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_refusals_in_kafkas_order_and_words() -> None:
    current = ReplicaAssignment((0, 1))
    live = {0, 1, 2}
    assert validate_target_replicas([], current, live) == \
        (INVALID, "Empty replica list specified in partition reassignment.")
    # duplicates are reported before negative ids
    assert validate_target_replicas([-1, -1], current, live) == \
        (INVALID, "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(-1, -1)")
    assert validate_target_replicas([0, -1], current, live) == \
        (INVALID, "Invalid broker id in replica list: ArrayBuffer(0, -1)")
    # only the adding replicas must be alive, listed in target order
    assert validate_target_replicas([7, 1, 5], current, live) == \
        (INVALID, "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(7, 5), "
                  "live broker list: Set(0, 1, 2)")
    assert validate_target_replicas([1], ReplicaAssignment((1, 3)), {1}) is None   # 3 is leaving: may be dead
    assert validate_target_replicas([2, 0], current, live) is None


def test_reassign_to_puts_the_target_first() -> None:
    # Kafka's example: [1, 2, 3] -> [3, 4, 2] is stored as [3, 4, 2, 1]
    a = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4, 2])
    assert (a.replicas, a.adding_replicas, a.removing_replicas) == ((3, 4, 2, 1), (4,), (1,))
    assert (a.origin_replicas, a.target_replicas) == ((3, 2, 1), (3, 4, 2))
    grow = ReplicaAssignment((0,)).reassign_to([1])
    assert (grow.replicas, grow.adding_replicas, grow.removing_replicas) == ((1, 0), (1,), (0,))
    # a reorder is not a reassignment in progress
    reorder = ReplicaAssignment((0, 1, 2)).reassign_to([2, 0, 1])
    assert (reorder.replicas, reorder.is_being_reassigned) == ((2, 0, 1), False)


def test_build_reassignment_cancels_and_replaces() -> None:
    idle = ReplicaAssignment((0, 1))
    assert build_reassignment(idle, None) is None                    # NO_REASSIGNMENT_IN_PROGRESS
    assert build_reassignment(idle, [1, 2]) == ReplicaAssignment((1, 2, 0), (2,), (0,))
    moving = ReplicaAssignment((1, 2, 0), (2,), (0,))
    # back to the origin replicas, in RS order: Kafka cannot restore [0, 1]'s order either
    assert build_reassignment(moving, None) == ReplicaAssignment((1, 0))
    # a new target replaces the old one, from the same origin
    assert build_reassignment(moving, [3]) == ReplicaAssignment((3, 1, 0), (3,), (1, 0))


ids = st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=5, unique=True)


@given(origin=ids, first=ids, second=ids)
def test_reassignments_keep_the_origin(origin: list[int], first: list[int], second: list[int]) -> None:
    """However often a reassignment is replaced, the origin replicas are those before the first
    one, cancelling restores their set, and completing leaves exactly the target."""
    a = ReplicaAssignment(tuple(origin))
    b = build_reassignment(a, first)
    assert b is not None
    assert set(b.origin_replicas) == set(origin) and b.target_replicas == tuple(first)
    assert set(b.replicas) == set(origin) | set(first)
    c = build_reassignment(b, second)
    assert c is not None and set(c.origin_replicas) == set(origin) and c.target_replicas == tuple(second)
    assert set(c.adding_replicas) == set(second) - set(origin)
    assert set(c.removing_replicas) == set(origin) - set(second)
    cancelled = build_reassignment(c, None)
    if c.is_being_reassigned:
        assert cancelled is not None and not cancelled.is_being_reassigned and set(cancelled.replicas) == set(origin)
    else:   # the same replica set in another order: nothing in progress to cancel
        assert cancelled is None and set(second) == set(origin)
