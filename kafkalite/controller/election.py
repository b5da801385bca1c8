"""Leader election, as Kafka 3.9's ZooKeeper controller does it: the four choice rules
(PartitionLeaderElectionAlgorithms) and, per strategy, the new leader-and-ISR the controller
writes (kafka.controller.Election). Pure functions: the controller supplies the assignment, the
current LeaderAndIsr and which replicas are online; it writes the result conditionally on the
partition epoch (zkVersion) and the controller epoch.

"Online" for a replica means, as in ControllerContext.isReplicaOnline, that its broker is live
(for controlled shutdown: live or shutting down) and the partition's log dir on it is not
offline. Callers pass the set of broker ids whose replica of this partition is online.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, Hashable, Iterable, Mapping, Optional, Sequence, TypeVar, Union

from kafkalite.controller.states import LeaderAndIsr

# --------------------------------------------------------------------------------------------
# Strategies (PartitionLeaderElectionStrategy)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OfflinePartitionLeaderElectionStrategy:
    """New or offline partitions; `allow_unclean` forces unclean election (ElectLeaders with
    UNCLEAN) without reading the topic's unclean.leader.election.enable."""
    allow_unclean: bool

    def __str__(self) -> str:
        return f"OfflinePartitionLeaderElectionStrategy({str(self.allow_unclean).lower()})"


@dataclass(frozen=True)
class ReassignPartitionLeaderElectionStrategy:
    def __str__(self) -> str:
        return "ReassignPartitionLeaderElectionStrategy"


@dataclass(frozen=True)
class PreferredReplicaPartitionLeaderElectionStrategy:
    def __str__(self) -> str:
        return "PreferredReplicaPartitionLeaderElectionStrategy"


@dataclass(frozen=True)
class ControlledShutdownPartitionLeaderElectionStrategy:
    def __str__(self) -> str:
        return "ControlledShutdownPartitionLeaderElectionStrategy"


PartitionLeaderElectionStrategy = Union[OfflinePartitionLeaderElectionStrategy,
                                        ReassignPartitionLeaderElectionStrategy,
                                        PreferredReplicaPartitionLeaderElectionStrategy,
                                        ControlledShutdownPartitionLeaderElectionStrategy]


def failed_election_message(partition: str, strategy: PartitionLeaderElectionStrategy) -> str:
    """The StateChangeFailedException text when a strategy finds no leader."""
    return f"Failed to elect leader for partition {partition} under strategy {strategy}"


# --------------------------------------------------------------------------------------------
# The choice rules (PartitionLeaderElectionAlgorithms)
# --------------------------------------------------------------------------------------------

def offline_partition_leader_election(assignment: Sequence[int], isr: Sequence[int],
                                      live_replicas: AbstractSet[int],
                                      unclean_leader_election_enabled: bool) -> Optional[int]:
    """First live ISR member in assignment order; failing that, with unclean election enabled,
    the first live replica in assignment order (which may have lost data)."""
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def reassign_partition_leader_election(reassignment: Sequence[int], isr: Sequence[int],
                                       live_replicas: AbstractSet[int]) -> Optional[int]:
    """First live ISR member of the target replicas, in their order."""
    return next((r for r in reassignment if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader_election(assignment: Sequence[int], isr: Sequence[int],
                                                live_replicas: AbstractSet[int]) -> Optional[int]:
    """The first assigned replica if it is live and in the ISR, else no election."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(assignment: Sequence[int], isr: Sequence[int],
                                                  live_replicas: AbstractSet[int],
                                                  shutting_down_brokers: AbstractSet[int]) -> Optional[int]:
    """First live ISR member, in assignment order, that is not shutting down."""
    return next((r for r in assignment
                 if r in live_replicas and r in isr and r not in shutting_down_brokers), None)


# --------------------------------------------------------------------------------------------
# New leader and ISR per strategy (kafka.controller.Election)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ElectionResult:
    """`leader_and_isr` is None when no leader could be chosen. `live_replicas` are the
    replicas the controller sends LeaderAndIsr to. `unclean` is True when the new leader was
    not in the ISR (the controller counts it as an unclean election)."""
    leader_and_isr: Optional[LeaderAndIsr]
    live_replicas: tuple[int, ...]
    unclean: bool = False


def _live_in_order(replicas: Iterable[int], online: AbstractSet[int]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r in online)


def initial_leader_and_isr(assignment: Sequence[int], online: AbstractSet[int]) -> Optional[LeaderAndIsr]:
    """NewPartition -> OnlinePartition: the first online assigned replica leads, every online
    assigned replica is in the ISR, epochs 0. None when no assigned replica is online."""
    live = _live_in_order(assignment, online)
    if not live:
        return None
    return LeaderAndIsr.initial(live[0], live)


def unclean_election_enabled_for(leader_and_isr: LeaderAndIsr, online: AbstractSet[int], allow_unclean: bool,
                                 topic_unclean_leader_election_enable: bool) -> bool:
    """PartitionStateMachine.collectUncleanLeaderElectionState for one partition: unclean
    election is considered only when no ISR member is online, and then if forced (ElectLeaders
    UNCLEAN) or the topic's unclean.leader.election.enable is true."""
    if any(r in online for r in leader_and_isr.isr):
        return False
    return allow_unclean or topic_unclean_leader_election_enable


def leader_for_offline(assignment: Sequence[int], leader_and_isr: Optional[LeaderAndIsr],
                       online: AbstractSet[int], unclean_leader_election_enabled: bool,
                       is_leader_recovery_supported: bool = True) -> ElectionResult:
    """Offline (or new, with a state already written) partition. A leader from the ISR keeps
    the online ISR members; an unclean leader gets an ISR of itself alone and, with leader
    recovery supported (IBP >= 3.2), the RECOVERING state. Leader epoch + 1 either way."""
    live = _live_in_order(assignment, online)
    if leader_and_isr is None:
        return ElectionResult(None, live)
    isr = leader_and_isr.isr
    leader = offline_partition_leader_election(assignment, isr, online, unclean_leader_election_enabled)
    if leader is None:
        return ElectionResult(None, live)
    if leader in isr:
        new_isr = tuple(r for r in isr if r in online)
        return ElectionResult(leader_and_isr.new_leader_and_isr(leader, new_isr), live)
    if is_leader_recovery_supported:
        return ElectionResult(leader_and_isr.new_recovering_leader_and_isr(leader, (leader,)), live, True)
    return ElectionResult(leader_and_isr.new_leader_and_isr(leader, (leader,)), live, True)


def leader_for_reassign(target_replicas: Sequence[int], leader_and_isr: LeaderAndIsr,
                        online: AbstractSet[int]) -> ElectionResult:
    """Reassignment: a leader among the target replicas, ISR unchanged, leader epoch + 1. The
    LeaderAndIsr goes to every target replica (online or not)."""
    leader = reassign_partition_leader_election(target_replicas, leader_and_isr.isr, online)
    new_state = leader_and_isr.new_leader(leader) if leader is not None else None
    return ElectionResult(new_state, tuple(target_replicas))


def leader_for_preferred_replica(assignment: Sequence[int], leader_and_isr: LeaderAndIsr,
                                 online: AbstractSet[int]) -> ElectionResult:
    """Preferred election: only the first assigned replica, ISR unchanged, leader epoch + 1. The
    LeaderAndIsr goes to every assigned replica."""
    leader = preferred_replica_partition_leader_election(assignment, leader_and_isr.isr, online)
    new_state = leader_and_isr.new_leader(leader) if leader is not None else None
    return ElectionResult(new_state, tuple(assignment))


def leader_for_controlled_shutdown(assignment: Sequence[int], leader_and_isr: LeaderAndIsr,
                                   live_or_shutting_down: AbstractSet[int],
                                   shutting_down_broker_ids: AbstractSet[int]) -> ElectionResult:
    """Controlled shutdown: a leader that is not shutting down; the shutting-down brokers leave
    the ISR; leader epoch + 1. `live_or_shutting_down` counts shutting-down brokers as online."""
    live = _live_in_order(assignment, live_or_shutting_down)
    leader = controlled_shutdown_partition_leader_election(assignment, leader_and_isr.isr,
                                                           live_or_shutting_down, shutting_down_broker_ids)
    if leader is None:
        return ElectionResult(None, live)
    new_isr = tuple(r for r in leader_and_isr.isr if r not in shutting_down_broker_ids)
    return ElectionResult(leader_and_isr.new_leader_and_isr(leader, new_isr), live)


def elect(strategy: PartitionLeaderElectionStrategy, assignment: Sequence[int],
          leader_and_isr: LeaderAndIsr, online: AbstractSet[int], *,
          topic_unclean_leader_election_enable: bool = False,
          target_replicas: Optional[Sequence[int]] = None,
          shutting_down_broker_ids: AbstractSet[int] = frozenset(),
          live_or_shutting_down: Optional[AbstractSet[int]] = None,
          is_leader_recovery_supported: bool = True) -> ElectionResult:
    """One partition's election under `strategy` (PartitionStateMachine.doElectLeaderForPartitions
    after the state read): `online` excludes shutting-down brokers; controlled shutdown uses
    `live_or_shutting_down` (default: online plus the shutting-down brokers); reassignment uses
    `target_replicas` (default: the assignment)."""
    if isinstance(strategy, OfflinePartitionLeaderElectionStrategy):
        unclean = unclean_election_enabled_for(leader_and_isr, online, strategy.allow_unclean,
                                               topic_unclean_leader_election_enable)
        return leader_for_offline(assignment, leader_and_isr, online, unclean, is_leader_recovery_supported)
    if isinstance(strategy, ReassignPartitionLeaderElectionStrategy):
        return leader_for_reassign(assignment if target_replicas is None else target_replicas,
                                   leader_and_isr, online)
    if isinstance(strategy, PreferredReplicaPartitionLeaderElectionStrategy):
        return leader_for_preferred_replica(assignment, leader_and_isr, online)
    if isinstance(strategy, ControlledShutdownPartitionLeaderElectionStrategy):
        live_or_down = (set(online) | set(shutting_down_broker_ids)) if live_or_shutting_down is None \
            else live_or_shutting_down
        return leader_for_controlled_shutdown(assignment, leader_and_isr, live_or_down, shutting_down_broker_ids)
    raise TypeError(f"unknown election strategy {strategy!r}")


# --------------------------------------------------------------------------------------------
# Automatic preferred leader rebalance (KafkaController.checkAndTriggerAutoLeaderRebalance)
# --------------------------------------------------------------------------------------------

PartitionKey = TypeVar("PartitionKey", bound=Hashable)


def auto_leader_rebalance_candidates(
        assignments: Mapping[PartitionKey, Sequence[int]], leaders: Mapping[PartitionKey, LeaderAndIsr],
        is_replica_online: Callable[[int, PartitionKey], bool],
        leader_imbalance_per_broker_percentage: int) -> dict[int, list[PartitionKey]]:
    """Per preferred broker whose share of partitions led by someone else exceeds
    leader.imbalance.per.broker.percentage: those partitions whose preferred replica can lead
    now (online and in the ISR), to elect with the preferred strategy. Partitions without a
    known leader count in the denominator only. The caller leaves out topics queued for
    deletion (Kafka filters them before grouping)."""
    by_preferred: dict[int, list[PartitionKey]] = {}
    for tp, replicas in assignments.items():
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    result: dict[int, list[PartitionKey]] = {}
    for broker, partitions in by_preferred.items():
        not_preferred = [tp for tp in partitions if tp in leaders and leaders[tp].leader != broker]
        if len(not_preferred) / len(partitions) <= leader_imbalance_per_broker_percentage / 100:
            continue
        candidates = [tp for tp in not_preferred
                      if preferred_replica_partition_leader_election(
                          assignments[tp], leaders[tp].isr,
                          {r for r in assignments[tp] if is_replica_online(r, tp)}) is not None]
        if candidates:
            result[broker] = candidates
    return result
