"""Partition and replica state transitions, LeaderAndIsr epoch bumps and the four leader
election strategies, against Kafka 3.9's PartitionStateMachine / ReplicaStateMachine /
Election / PartitionLeaderElectionAlgorithms behaviour (cases from
PartitionLeaderElectionAlgorithmsTest included), plus hypothesis properties."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.controller.election import (
    ControlledShutdownPartitionLeaderElectionStrategy, ElectionResult,
    OfflinePartitionLeaderElectionStrategy, PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy, auto_leader_rebalance_candidates,
    controlled_shutdown_partition_leader_election, elect,
    failed_election_message, initial_leader_and_isr, leader_for_controlled_shutdown, leader_for_offline,
    leader_for_preferred_replica, leader_for_reassign, offline_partition_leader_election,
    preferred_replica_partition_leader_election, reassign_partition_leader_election,
    unclean_election_enabled_for)
from kafkalite.controller.states import (
    LEADER_DURING_DELETE, NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState,
    PartitionState, ReplicaState, invalid_partition_transition_message, invalid_replica_transition_message,
    is_valid_partition_transition, is_valid_replica_transition, partition_and_replica_text,
    remove_replica_from_isr)

P = PartitionState
R = ReplicaState

# --------------------------------------------------------------------------------------------
# States
# --------------------------------------------------------------------------------------------

VALID_PARTITION = {
    (P.NonExistentPartition, P.NewPartition),
    (P.NewPartition, P.OnlinePartition), (P.OnlinePartition, P.OnlinePartition),
    (P.OfflinePartition, P.OnlinePartition),
    (P.NewPartition, P.OfflinePartition), (P.OnlinePartition, P.OfflinePartition),
    (P.OfflinePartition, P.OfflinePartition),
    (P.OfflinePartition, P.NonExistentPartition),
}

VALID_REPLICA = {
    (R.NonExistentReplica, R.NewReplica),
    *((s, R.OnlineReplica) for s in (R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible)),
    *((s, R.OfflineReplica) for s in (R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible)),
    (R.OfflineReplica, R.ReplicaDeletionStarted),
    (R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful),
    (R.OfflineReplica, R.ReplicaDeletionIneligible), (R.ReplicaDeletionStarted, R.ReplicaDeletionIneligible),
    (R.ReplicaDeletionSuccessful, R.NonExistentReplica),
}


def test_partition_transitions_are_exactly_kafkas() -> None:
    assert {(a, b) for a in P for b in P if is_valid_partition_transition(a, b)} == VALID_PARTITION
    assert [s.value for s in P] == [0, 1, 2, 3]


def test_replica_transitions_are_exactly_kafkas() -> None:
    assert {(a, b) for a in R for b in R if is_valid_replica_transition(a, b)} == VALID_REPLICA
    assert [s.value for s in R] == [1, 2, 3, 4, 5, 6, 7]


def test_invalid_transition_messages() -> None:
    assert invalid_partition_transition_message("t-0", P.NonExistentPartition, P.OnlinePartition) == (
        "Partition t-0 should be in one of NewPartition,OnlinePartition,OfflinePartition states before moving "
        "to OnlinePartition state. Instead it is in NonExistentPartition state")
    replica = partition_and_replica_text("t", 0, 3)
    assert replica == "[Topic=t,Partition=0,Replica=3]"
    assert invalid_replica_transition_message(replica, R.OnlineReplica, R.ReplicaDeletionStarted) == (
        "Replica [Topic=t,Partition=0,Replica=3] should be in the OfflineReplica states before moving to "
        "ReplicaDeletionStarted state. Instead it is in OnlineReplica state")


def test_deletion_path_of_a_replica() -> None:
    path = [R.NonExistentReplica, R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionStarted,
            R.ReplicaDeletionSuccessful, R.NonExistentReplica]
    assert all(is_valid_replica_transition(a, b) for a, b in zip(path, path[1:]))
    # a failed deletion goes ineligible and is retried from OfflineReplica
    retry = [R.ReplicaDeletionStarted, R.ReplicaDeletionIneligible, R.OfflineReplica, R.ReplicaDeletionStarted]
    assert all(is_valid_replica_transition(a, b) for a, b in zip(retry, retry[1:]))
    assert not is_valid_replica_transition(R.OnlineReplica, R.NonExistentReplica)


# --------------------------------------------------------------------------------------------
# LeaderAndIsr
# --------------------------------------------------------------------------------------------

def test_leader_and_isr_transitions() -> None:
    base = LeaderAndIsr(1, 5, [1, 2, 3], LeaderRecoveryState.RECOVERED, 7)
    assert base.isr == (1, 2, 3)
    assert base.new_leader(2) == LeaderAndIsr(2, 6, (1, 2, 3), LeaderRecoveryState.RECOVERED, 7)
    assert base.new_leader_and_isr(3, [3]) == LeaderAndIsr(3, 6, (3,), LeaderRecoveryState.RECOVERED, 7)
    assert base.new_recovering_leader_and_isr(4, [4]) == LeaderAndIsr(4, 6, (4,), LeaderRecoveryState.RECOVERING, 7)
    assert base.new_epoch() == LeaderAndIsr(1, 6, (1, 2, 3), LeaderRecoveryState.RECOVERED, 7)
    assert base.with_partition_epoch(8) == LeaderAndIsr(1, 5, (1, 2, 3), LeaderRecoveryState.RECOVERED, 8)
    recovering = base.new_recovering_leader_and_isr(4, [4])
    # a later clean election keeps the recovery state (only the partition leader clears it)
    assert recovering.new_leader_and_isr(4, [4, 1]).leader_recovery_state == LeaderRecoveryState.RECOVERING
    assert LeaderAndIsr.initial(2, [2, 3]) == LeaderAndIsr(2, 0, (2, 3), LeaderRecoveryState.RECOVERED, 0)
    assert LeaderAndIsr.during_delete([1, 2]) == LeaderAndIsr(LEADER_DURING_DELETE, 0, (1, 2))
    assert LeaderAndIsr(NO_LEADER, 3, (1,)).leader_opt is None and base.leader_opt == 1
    assert base.equals_allow_stale_partition_epoch(base.with_partition_epoch(9))
    assert not base.with_partition_epoch(9).equals_allow_stale_partition_epoch(base)
    assert not base.equals_allow_stale_partition_epoch(base.new_epoch())
    assert not base.equals_allow_stale_partition_epoch(None)
    assert LeaderIsrAndControllerEpoch(base, 3).controller_epoch == 3


def test_remove_replica_from_isr() -> None:
    state = LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=10)
    assert remove_replica_from_isr(state, 2) == LeaderAndIsr(1, 5, (1, 3), partition_epoch=10)
    assert remove_replica_from_isr(state, 1) == LeaderAndIsr(NO_LEADER, 5, (2, 3), partition_epoch=10)
    assert remove_replica_from_isr(state, 9) is None
    # the last ISR member stays in the ISR, the leader goes
    assert remove_replica_from_isr(LeaderAndIsr(1, 4, (1,)), 1) == LeaderAndIsr(NO_LEADER, 5, (1,))


# --------------------------------------------------------------------------------------------
# The choice rules (PartitionLeaderElectionAlgorithmsTest's cases)
# --------------------------------------------------------------------------------------------

def test_offline_election() -> None:
    assert offline_partition_leader_election([2, 4], [2, 4], {2, 4}, False) == 2
    assert offline_partition_leader_election([2, 4], [2, 4], {4}, False) == 4
    # ISR empty of live replicas
    assert offline_partition_leader_election([2, 4], [2], {4}, False) is None
    assert offline_partition_leader_election([2, 4], [2], {4}, True) == 4
    assert offline_partition_leader_election([2, 4], [], {4}, True) == 4
    assert offline_partition_leader_election([2, 4], [], set(), True) is None
    # assignment order, not ISR order
    assert offline_partition_leader_election([4, 2], [2, 4], {2, 4}, False) == 4


def test_reassign_election() -> None:
    assert reassign_partition_leader_election([2, 4], [2, 4], {2, 4}) == 2
    assert reassign_partition_leader_election([2, 4], [4, 2], {2, 4}) == 2
    assert reassign_partition_leader_election([2, 4], [2, 4], {4}) == 4
    assert reassign_partition_leader_election([2, 4], [], {2, 4}) is None
    assert reassign_partition_leader_election([2, 4], [2], set()) is None
    assert reassign_partition_leader_election([2, 4], [], {2}) is None


def test_preferred_election() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [2, 4], {2, 4}) == 2
    assert preferred_replica_partition_leader_election([2, 4], [4], {2, 4}) is None
    assert preferred_replica_partition_leader_election([2, 4], [2, 4], {4}) is None
    assert preferred_replica_partition_leader_election([2, 4], [2], set()) is None
    assert preferred_replica_partition_leader_election([2, 4], [], set()) is None
    assert preferred_replica_partition_leader_election([], [2], {2}) is None


def test_controlled_shutdown_election() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, set()) == 2
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2}) == 4
    assert controlled_shutdown_partition_leader_election([2, 4], [2], {2, 4}, {2}) is None
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2}, {2}) is None
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2, 4}) is None


# --------------------------------------------------------------------------------------------
# Leader and ISR per strategy
# --------------------------------------------------------------------------------------------

def test_initial_leader_and_isr() -> None:
    assert initial_leader_and_isr([3, 1, 2], {1, 2}) == LeaderAndIsr(1, 0, (1, 2))
    assert initial_leader_and_isr([3], {1}) is None


def test_leader_for_offline_clean() -> None:
    state = LeaderAndIsr(1, 7, (1, 2, 3), partition_epoch=4)
    result = leader_for_offline([1, 2, 3], state, {2, 3}, False)
    assert result == ElectionResult(LeaderAndIsr(2, 8, (2, 3), partition_epoch=4), (2, 3), False)


def test_leader_for_offline_unclean_recovering() -> None:
    state = LeaderAndIsr(1, 7, (1,), partition_epoch=4)
    assert leader_for_offline([1, 2, 3], state, {3, 2}, False) == ElectionResult(None, (2, 3))
    assert leader_for_offline([1, 2, 3], state, {3, 2}, True) == ElectionResult(
        LeaderAndIsr(2, 8, (2,), LeaderRecoveryState.RECOVERING, 4), (2, 3), True)
    # before IBP 3.2 there is no RECOVERING state
    assert leader_for_offline([1, 2, 3], state, {3, 2}, True, is_leader_recovery_supported=False) == \
        ElectionResult(LeaderAndIsr(2, 8, (2,), LeaderRecoveryState.RECOVERED, 4), (2, 3), True)
    assert leader_for_offline([1, 2, 3], None, {2}, True) == ElectionResult(None, (2,))


def test_leader_for_reassign_and_preferred_keep_isr_and_go_to_all_replicas() -> None:
    state = LeaderAndIsr(1, 2, (1, 4, 5))
    assert leader_for_reassign([4, 5], state, {1, 4, 5}) == ElectionResult(LeaderAndIsr(4, 3, (1, 4, 5)), (4, 5))
    assert leader_for_reassign([6, 5], state, {1, 5}) == ElectionResult(LeaderAndIsr(5, 3, (1, 4, 5)), (6, 5))
    assert leader_for_preferred_replica([4, 1, 5], state, {1, 4, 5}) == \
        ElectionResult(LeaderAndIsr(4, 3, (1, 4, 5)), (4, 1, 5))
    assert leader_for_preferred_replica([2, 1], state, {1, 2}) == ElectionResult(None, (2, 1))


def test_leader_for_controlled_shutdown_removes_shutting_down_from_isr() -> None:
    state = LeaderAndIsr(1, 2, (1, 2, 3))
    assert leader_for_controlled_shutdown([1, 2, 3], state, {1, 2, 3}, {1}) == \
        ElectionResult(LeaderAndIsr(2, 3, (2, 3)), (1, 2, 3))
    assert leader_for_controlled_shutdown([1, 2, 3], LeaderAndIsr(1, 2, (1,)), {1, 2, 3}, {1}) == \
        ElectionResult(None, (1, 2, 3))


def test_elect_dispatch_and_strategy_names() -> None:
    state = LeaderAndIsr(1, 0, (1, 2))
    assert elect(OfflinePartitionLeaderElectionStrategy(False), [1, 2], state, {2}).leader_and_isr == \
        LeaderAndIsr(2, 1, (2,))
    # no live ISR member: the topic config decides, unless forced
    dead_isr = LeaderAndIsr(1, 0, (1,))
    assert elect(OfflinePartitionLeaderElectionStrategy(False), [1, 2], dead_isr, {2}).leader_and_isr is None
    assert elect(OfflinePartitionLeaderElectionStrategy(False), [1, 2], dead_isr, {2},
                 topic_unclean_leader_election_enable=True).unclean
    assert elect(OfflinePartitionLeaderElectionStrategy(True), [1, 2], dead_isr, {2}).leader_and_isr == \
        LeaderAndIsr(2, 1, (2,), LeaderRecoveryState.RECOVERING)
    assert elect(ReassignPartitionLeaderElectionStrategy(), [1, 2], state, {1, 2},
                 target_replicas=[2]).leader_and_isr == LeaderAndIsr(2, 1, (1, 2))
    assert elect(PreferredReplicaPartitionLeaderElectionStrategy(), [2, 1], state, {1, 2}).leader_and_isr == \
        LeaderAndIsr(2, 1, (1, 2))
    assert elect(ControlledShutdownPartitionLeaderElectionStrategy(), [1, 2], state, {2},
                 shutting_down_broker_ids={1}) == ElectionResult(LeaderAndIsr(2, 1, (2,)), (1, 2))
    assert failed_election_message("t-0", OfflinePartitionLeaderElectionStrategy(False)) == \
        "Failed to elect leader for partition t-0 under strategy OfflinePartitionLeaderElectionStrategy(false)"
    assert str(ControlledShutdownPartitionLeaderElectionStrategy()) == \
        "ControlledShutdownPartitionLeaderElectionStrategy"


def test_unclean_flag_only_without_live_isr() -> None:
    state = LeaderAndIsr(1, 0, (1, 2))
    assert not unclean_election_enabled_for(state, {2}, True, True)
    assert unclean_election_enabled_for(state, {3}, False, True)
    assert unclean_election_enabled_for(state, {3}, True, False)
    assert not unclean_election_enabled_for(state, {3}, False, False)


def test_auto_leader_rebalance_candidates() -> None:
    assignments = {("t", p): r for p, r in enumerate([[1, 2], [1, 2], [1, 2], [1, 2], [2, 1], [2, 1], [3, 1]])}
    leaders = {("t", 0): LeaderAndIsr(2, 1, (1, 2)),      # broker 1 preferred, 2 leads
               ("t", 1): LeaderAndIsr(2, 1, (2,)),        # broker 1 not in ISR: cannot lead
               ("t", 2): LeaderAndIsr(1, 0, (1, 2)),
               # ("t", 3): no leadership info yet: counts only in the denominator
               ("t", 4): LeaderAndIsr(2, 0, (2, 1)),
               ("t", 5): LeaderAndIsr(1, 1, (2, 1)),      # 1 of 2 for broker 2
               ("t", 6): LeaderAndIsr(1, 1, (1,))}        # broker 3 is offline
    online = lambda broker, tp: broker in (1, 2)  # noqa: E731
    # broker 1: 2 of 4 not preferred (50% > 10%), only t-0 can move; broker 2: 50%;
    # broker 3: 100% but it is offline
    assert auto_leader_rebalance_candidates(assignments, leaders, online, 10) == {1: [("t", 0)], 2: [("t", 5)]}
    # at 50% the ratio must exceed the percentage
    assert auto_leader_rebalance_candidates(assignments, leaders, online, 50) == {}
    assert auto_leader_rebalance_candidates(assignments, leaders, lambda b, tp: True, 50) == {}
    assert auto_leader_rebalance_candidates(assignments, leaders, lambda b, tp: True, 99) == {}
    assert auto_leader_rebalance_candidates(assignments, leaders, lambda b, tp: True, 0) == \
        {1: [("t", 0)], 2: [("t", 5)]}


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

@st.composite
def partition_case(draw: st.DrawFn) -> tuple[list[int], LeaderAndIsr, set[int]]:
    assignment = draw(st.lists(st.integers(0, 9), min_size=1, max_size=6, unique=True))
    isr = draw(st.lists(st.sampled_from(assignment), unique=True, max_size=len(assignment)))
    leader = draw(st.sampled_from(isr)) if isr else NO_LEADER
    state = LeaderAndIsr(leader, draw(st.integers(0, 1000)), tuple(isr),
                         draw(st.sampled_from(list(LeaderRecoveryState))), draw(st.integers(0, 1000)))
    online = set(draw(st.lists(st.integers(0, 9), max_size=10)))
    return assignment, state, online


@settings(max_examples=400, deadline=None)
@given(partition_case(), st.booleans())
def test_offline_never_picks_dead_or_non_isr_unless_unclean(case: tuple[list[int], LeaderAndIsr, set[int]],
                                                           unclean: bool) -> None:
    assignment, state, online = case
    result = leader_for_offline(assignment, state, online, unclean)
    assert result.live_replicas == tuple(r for r in assignment if r in online)
    new = result.leader_and_isr
    live_isr = [r for r in assignment if r in online and r in state.isr]
    if live_isr:
        assert new is not None and new.leader == live_isr[0] and not result.unclean
        assert new.isr == tuple(r for r in state.isr if r in online)
        assert new.leader_recovery_state == state.leader_recovery_state
    elif unclean and result.live_replicas:
        assert new is not None and new.leader == result.live_replicas[0] and result.unclean
        assert new.isr == (new.leader,) and new.leader_recovery_state == LeaderRecoveryState.RECOVERING
    else:
        assert new is None
    if new is not None:
        assert new.leader in online and new.leader in assignment
        assert (new.leader_epoch, new.partition_epoch) == (state.leader_epoch + 1, state.partition_epoch)
        assert new.leader in new.isr


@settings(max_examples=400, deadline=None)
@given(partition_case())
def test_preferred_only_ever_picks_the_first_replica(case: tuple[list[int], LeaderAndIsr, set[int]]) -> None:
    assignment, state, online = case
    result = leader_for_preferred_replica(assignment, state, online)
    assert result.live_replicas == tuple(assignment)
    if assignment[0] in online and assignment[0] in state.isr:
        assert result.leader_and_isr == LeaderAndIsr(assignment[0], state.leader_epoch + 1, state.isr,
                                                     state.leader_recovery_state, state.partition_epoch)
    else:
        assert result.leader_and_isr is None


@settings(max_examples=400, deadline=None)
@given(partition_case(), st.sets(st.integers(0, 9), max_size=4))
def test_controlled_shutdown_never_picks_a_shutting_down_broker(
        case: tuple[list[int], LeaderAndIsr, set[int]], shutting_down: set[int]) -> None:
    assignment, state, online = case
    live_or_down = online | shutting_down
    result = leader_for_controlled_shutdown(assignment, state, live_or_down, shutting_down)
    assert result.live_replicas == tuple(r for r in assignment if r in live_or_down)
    new = result.leader_and_isr
    candidates = [r for r in assignment if r in live_or_down and r in state.isr and r not in shutting_down]
    if not candidates:
        assert new is None
        return
    assert new is not None
    assert new.leader == candidates[0] and new.leader not in shutting_down
    assert new.isr == tuple(r for r in state.isr if r not in shutting_down)
    assert not set(new.isr) & shutting_down and new.leader in new.isr
    assert new.leader_epoch == state.leader_epoch + 1


@settings(max_examples=300, deadline=None)
@given(partition_case(), st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True))
def test_reassign_picks_a_live_isr_target(case: tuple[list[int], LeaderAndIsr, set[int]], target: list[int]) -> None:
    _, state, online = case
    result = leader_for_reassign(target, state, online)
    assert result.live_replicas == tuple(target)
    expected = next((r for r in target if r in online and r in state.isr), None)
    if expected is None:
        assert result.leader_and_isr is None
    else:
        assert result.leader_and_isr == state.new_leader(expected)
