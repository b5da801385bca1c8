"""The per-partition input of the controller's requests as the replica manager takes it, decoded
from LeaderAndIsr / StopReplica by their handlers (Kafka's LeaderAndIsrPartitionState and
StopReplicaPartitionState)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kafkalite.cluster.topic_partition import TopicPartition

# LeaderAndIsr's leader-epoch sentinels as StopReplica uses them (Kafka's LeaderAndIsr object)
EPOCH_DURING_DELETE = -2     # the topic is being deleted: its leader epoch was not bumped
NO_EPOCH = -1                # StopReplica v0-2 carries no leader epoch: no check


class LeaderAndIsrPartitionState(NamedTuple):
    # a named tuple: a restart's LeaderAndIsr makes 10,000 (a frozen dataclass is built ~5x slower)
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

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class StopReplicaPartitionState:
    leader_epoch: int = NO_EPOCH
    delete_partition: bool = False
