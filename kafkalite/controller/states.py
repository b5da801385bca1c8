"""The controller's state vocabulary, as Kafka 3.9's ZooKeeper controller defines it: partition
and replica states with their valid previous states (PartitionStateMachine.scala,
ReplicaStateMachine.scala), and the leader-and-ISR value with its epoch-bumping transitions
(kafka.api.LeaderAndIsr). Pure values, no I/O.

State members carry Kafka's names (NewPartition, OnlineReplica, ...) because the controller's
state-change log prints them, as Kafka's does.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Iterable, Optional

# --------------------------------------------------------------------------------------------
# Partition and replica states
# --------------------------------------------------------------------------------------------


class PartitionState(enum.Enum):
    # values are Kafka's state bytes
    NewPartition = 0
    OnlinePartition = 1
    OfflinePartition = 2
    NonExistentPartition = 3

    @property
    def valid_previous_states(self) -> frozenset["PartitionState"]:
        return _PARTITION_PREVIOUS[self]

    def __str__(self) -> str:
        return self.name


_PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NewPartition: frozenset({PartitionState.NonExistentPartition}),
    PartitionState.OnlinePartition: frozenset({PartitionState.NewPartition, PartitionState.OnlinePartition,
                                               PartitionState.OfflinePartition}),
    PartitionState.OfflinePartition: frozenset({PartitionState.NewPartition, PartitionState.OnlinePartition,
                                                PartitionState.OfflinePartition}),
    PartitionState.NonExistentPartition: frozenset({PartitionState.OfflinePartition}),
}


class ReplicaState(enum.Enum):
    NewReplica = 1
    OnlineReplica = 2
    OfflineReplica = 3
    ReplicaDeletionStarted = 4
    ReplicaDeletionSuccessful = 5
    ReplicaDeletionIneligible = 6
    NonExistentReplica = 7

    @property
    def valid_previous_states(self) -> frozenset["ReplicaState"]:
        return _REPLICA_PREVIOUS[self]

    def __str__(self) -> str:
        return self.name


_REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.NewReplica: frozenset({ReplicaState.NonExistentReplica}),
    ReplicaState.OnlineReplica: frozenset({ReplicaState.NewReplica, ReplicaState.OnlineReplica,
                                           ReplicaState.OfflineReplica, ReplicaState.ReplicaDeletionIneligible}),
    ReplicaState.OfflineReplica: frozenset({ReplicaState.NewReplica, ReplicaState.OnlineReplica,
                                            ReplicaState.OfflineReplica, ReplicaState.ReplicaDeletionIneligible}),
    ReplicaState.ReplicaDeletionStarted: frozenset({ReplicaState.OfflineReplica}),
    ReplicaState.ReplicaDeletionSuccessful: frozenset({ReplicaState.ReplicaDeletionStarted}),
    ReplicaState.ReplicaDeletionIneligible: frozenset({ReplicaState.OfflineReplica,
                                                       ReplicaState.ReplicaDeletionStarted}),
    ReplicaState.NonExistentReplica: frozenset({ReplicaState.ReplicaDeletionSuccessful}),
}


def is_valid_partition_transition(current: PartitionState, target: PartitionState) -> bool:
    return current in target.valid_previous_states


def is_valid_replica_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in target.valid_previous_states


def _states_text(states: Iterable[enum.Enum]) -> str:
    # Kafka prints a Scala Set; a stable order (by state byte) keeps our logs comparable
    return ",".join(s.name for s in sorted(states, key=lambda s: s.value))


def invalid_partition_transition_message(partition: str, current: PartitionState,
                                         target: PartitionState) -> str:
    """PartitionStateMachine.logInvalidTransition's text (`partition` printed as topic-N)."""
    return (f"Partition {partition} should be in one of {_states_text(target.valid_previous_states)} states "
            f"before moving to {target} state. Instead it is in {current} state")


def invalid_replica_transition_message(replica: str, current: ReplicaState, target: ReplicaState) -> str:
    """ReplicaStateMachine.logInvalidTransition's text (`replica` printed as Kafka's
    PartitionAndReplica: `[Topic=t,Partition=0,Replica=1]`)."""
    return (f"Replica {replica} should be in the {_states_text(target.valid_previous_states)} states "
            f"before moving to {target} state. Instead it is in {current} state")


def partition_and_replica_text(topic: str, partition: int, replica: int) -> str:
    return f"[Topic={topic},Partition={partition},Replica={replica}]"


# --------------------------------------------------------------------------------------------
# Leader and ISR
# --------------------------------------------------------------------------------------------

class LeaderRecoveryState(enum.IntEnum):
    """org.apache.kafka.metadata.LeaderRecoveryState: RECOVERING after an unclean election until
    the new leader has recovered its log."""
    RECOVERED = 0
    RECOVERING = 1


NO_LEADER = -1
NO_EPOCH = -1
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch, ISR and leader recovery state. `partition_epoch` is
    the zkVersion of the partition's state znode in ZooKeeper mode (Kafka's "partition epoch"),
    the condition for the next conditional update."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def __post_init__(self) -> None:
        # accept any sequence for the ISR, store a tuple so the value stays hashable and frozen
        if not isinstance(self.isr, tuple):
            object.__setattr__(self, "isr", tuple(self.isr))

    @classmethod
    def initial(cls, leader: int, isr: Iterable[int]) -> "LeaderAndIsr":
        """A new partition's first state: leader epoch 0, partition epoch 0, RECOVERED."""
        return cls(leader, INITIAL_LEADER_EPOCH, tuple(isr))

    @classmethod
    def during_delete(cls, isr: Iterable[int]) -> "LeaderAndIsr":
        """What the controller sends for a partition being deleted (leader -2)."""
        return cls(LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, tuple(isr))

    @property
    def leader_opt(self) -> Optional[int]:
        return None if self.leader == NO_LEADER else self.leader

    def with_partition_epoch(self, partition_epoch: int) -> "LeaderAndIsr":
        return replace(self, partition_epoch=partition_epoch)

    def new_leader(self, leader: int) -> "LeaderAndIsr":
        """Another leader, same ISR, leader epoch + 1 (reassignment and preferred elections)."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> "LeaderAndIsr":
        """Leader and ISR replaced, leader epoch + 1, leader recovery state kept."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: Iterable[int]) -> "LeaderAndIsr":
        """An unclean election's result: leader epoch + 1 and RECOVERING."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr),
                       leader_recovery_state=LeaderRecoveryState.RECOVERING)

    def new_epoch(self) -> "LeaderAndIsr":
        """Same leader and ISR with leader epoch + 1 (reassignment fences old followers)."""
        return replace(self, leader_epoch=self.leader_epoch + 1)

    def equals_allow_stale_partition_epoch(self, other: Optional["LeaderAndIsr"]) -> bool:
        """Equal except that this one's partition epoch may be older (an AlterPartition that was
        already applied)."""
        if other is None:
            return False
        return (self.leader == other.leader and self.leader_epoch == other.leader_epoch
                and self.isr == other.isr and self.leader_recovery_state == other.leader_recovery_state
                and self.partition_epoch <= other.partition_epoch)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition state znode's content: the leader and ISR plus the epoch of the controller
    that wrote it."""
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


def remove_replica_from_isr(leader_and_isr: LeaderAndIsr, replica_id: int) -> Optional[LeaderAndIsr]:
    """ReplicaStateMachine's ISR shrink when a replica goes offline: the leader becomes
    NO_LEADER if it was that replica; the ISR loses it unless it is the ISR's only member (Kafka
    keeps a last ISR member so an unclean-free recovery can pick it again); leader epoch + 1.
    None when the replica is not in the ISR (nothing to write)."""
    if replica_id not in leader_and_isr.isr:
        return None
    new_leader = NO_LEADER if replica_id == leader_and_isr.leader else leader_and_isr.leader
    isr = leader_and_isr.isr if len(leader_and_isr.isr) == 1 else tuple(r for r in leader_and_isr.isr
                                                                        if r != replica_id)
    return leader_and_isr.new_leader_and_isr(new_leader, isr)
