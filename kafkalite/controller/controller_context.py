"""ControllerContext: the active controller's in-memory picture of the cluster, rebuilt from
ZooKeeper on every failover and changed only by the controller's event task.

Live brokers with their epochs, every topic's id and replica assignment (with the replicas being
added and removed by a reassignment), each partition's leader/ISR as last written to its state
znode (with that znode's version, the partition epoch), and the partition and replica states of
the two state machines; plus the bookkeeping of topic deletion and controlled shutdown.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple, Optional

from kafkalite.cluster.metadata_cache import BrokerInfo
from kafkalite.controller.zk.znodes import ReplicaAssignment
from kafkalite.controller.states import LeaderIsrAndControllerEpoch, PartitionState, ReplicaState
from kafkalite.cluster.topic_partition import TopicPartition


# what a partition without an assignment has (immutable, so one value serves every call)
_NO_ASSIGNMENT = ReplicaAssignment(())


class PartitionAndReplica(NamedTuple):
    """A replica of a partition (Kafka's PartitionAndReplica): a named tuple, as it keys the
    replica states of every partition (hashed in C, built ~10x faster than a frozen dataclass)."""
    topic: str
    partition: int
    replica: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    live_broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    partition_assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    partition_leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionAndReplica, ReplicaState] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    # replicas a broker answered KAFKA_STORAGE_ERROR for (its log could not be created or
    # opened), offline until that broker registers again (Kafka's replicasOnOfflineDirs)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    # -- brokers ------------------------------------------------------------------------------
    def set_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        self.live_brokers = {b: info for b, (info, _) in brokers.items()}
        self.live_broker_epochs = {b: epoch for b, (_, epoch) in brokers.items()}

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        for b, (info, epoch) in brokers.items():
            self.live_brokers[b] = info
            self.live_broker_epochs[b] = epoch

    def remove_live_brokers(self, ids: Iterable[int]) -> None:
        for b in ids:
            self.live_brokers.pop(b, None)
            self.live_broker_epochs.pop(b, None)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        """A replica is online when its broker is alive, its log is not offline on that broker
        and, unless asked otherwise, the broker is not shutting down."""
        if tp in self.replicas_on_offline_dirs.get(broker_id, ()):
            return False
        if include_shutting_down:
            return broker_id in self.live_broker_epochs
        return broker_id in self.live_broker_epochs and broker_id not in self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_broker_epochs)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that are alive and not shutting down (Kafka's liveBrokerIds)."""
        return set(self.live_broker_epochs) - self.shutting_down_broker_ids

    # -- topics and partitions ----------------------------------------------------------------
    def add_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        self.all_topics.add(topic)
        self.topic_ids[topic] = topic_id

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {tid: t for t, tid in self.topic_ids.items()}

    def update_partition_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.partition_assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.partition_assignments.get(tp.topic, {}).get(tp.partition)
        return a.replicas if a is not None else ()

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, _NO_ASSIGNMENT)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, ps in self.partition_assignments.items() for p in sorted(ps)]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, ps in self.partition_assignments.items()
                for p, a in ps.items() if broker_id in a.replicas]

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(t, p, r) for t, ps in self.partition_assignments.items()
                for p, a in ps.items() for r in a.replicas if r in broker_ids]

    def replicas_for_partitions(self, tps: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(tp.topic, tp.partition, r) for tp in tps
                for r in self.partition_replica_assignment(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, l in self.partition_leadership.items() if l.leader_and_isr.leader == broker_id]

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """What a broker shutting down still leads and could hand over (Kafka's
        partitionLeadersOnBroker): replicated partitions of topics not queued for deletion."""
        return [tp for tp, l in self.partition_leadership.items()
                if l.leader_and_isr.leader == broker_id and not self.is_topic_queued_for_deletion(tp.topic)
                and len(self.partition_replica_assignment(tp)) > 1]

    def put_leadership(self, tp: TopicPartition, info: LeaderIsrAndControllerEpoch) -> None:
        self.partition_leadership[tp] = info

    def leadership(self, tp: TopicPartition) -> Optional[LeaderIsrAndControllerEpoch]:
        return self.partition_leadership.get(tp)

    def remove_topic(self, topic: str) -> None:
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for p in self.partition_assignments.pop(topic, {}):
            tp = TopicPartition(topic, p)
            self.partition_leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        for r in [r for r in self.replica_states if r.topic == topic]:
            del self.replica_states[r]
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def partitions_in_states(self, *states: PartitionState) -> list[TopicPartition]:
        return [tp for tp, s in self.partition_states.items() if s in states]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [r for r, s in self.replica_states.items() if r.topic == topic and s == state]

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(s == state for r, s in self.replica_states.items() if r.topic == topic)

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(s == state for r, s in self.replica_states.items() if r.topic == topic)

    def reset(self) -> None:
        """What a resigning controller forgets (Kafka's resetContext)."""
        fresh = ControllerContext()
        self.__dict__.update(fresh.__dict__)

    def iter_topic_partitions(self, topics: Optional[Iterable[str]] = None
                              ) -> Iterator[tuple[TopicPartition, ReplicaAssignment]]:
        """Every partition with its assignment, or those of `topics` (unknown ones skipped)."""
        names = self.partition_assignments if topics is None else topics
        for t in names:
            for p, a in self.partition_assignments.get(t, {}).items():
                yield TopicPartition(t, p), a
