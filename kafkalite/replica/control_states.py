"""The per-partition input of the controller's requests as the replica manager takes it, decoded
from LeaderAndIsr / StopReplica by their handlers (Kafka's LeaderAndIsrPartitionState and
StopReplicaPartitionState)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from kafkalite.cluster.topic_partition import TopicPartition

# LeaderAndIsr's leader-epoch sentinels as StopReplica uses them (Kafka's LeaderAndIsr object)
EPOCH_DURING_DELETE = -2     # the topic is being deleted: its leader epoch was not bumped
NO_EPOCH = -1                # StopReplica v0-2 carries no leader epoch: no check


@dataclass(frozen=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int          # the state znode's zkVersion
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0

    @cached_property
    def tp(self) -> TopicPartition:
        # built once: the replica manager looks a request's partitions up several times each
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class StopReplicaPartitionState:
    leader_epoch: int = NO_EPOCH
    delete_partition: bool = False
