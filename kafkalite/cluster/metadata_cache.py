"""The broker's view of the cluster (Kafka's ZkMetadataCache), fed by the controller's
UpdateMetadata; Metadata, DescribeCluster, FindCoordinator and friends answer from it.

Semantics kept from Kafka 3.9's ZkMetadataCache.updateMetadata:
- the live brokers and the controller id are replaced by every update;
- partition states accumulate: an update carries only the partitions that changed, and a
  partition whose leader is -2 (LeaderDuringDelete) is removed (a topic goes with its last
  partition, its id with it);
- a topic id in the update replaces the cached one; a zero id forgets it.
The controller epoch check (a stale UpdateMetadata is refused) is the replica manager's, as in
Kafka: one highest-seen controller epoch guards LeaderAndIsr, StopReplica and UpdateMetadata.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NamedTuple, Optional

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.cluster.topic_validation import is_internal
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
NO_LEADER = -1                 # LeaderAndIsr.NoLeader / MetadataResponse.NO_LEADER_ID
LEADER_DURING_DELETE = -2      # LeaderAndIsr.LeaderDuringDelete: the partition is being deleted

# Kafka's SecurityProtocol ids, as UpdateMetadata carries them
SECURITY_PROTOCOL_NAMES: dict[int, str] = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS: dict[str, int] = {name: i for i, name in SECURITY_PROTOCOL_NAMES.items()}


@dataclass(frozen=True)
class BrokerEndpoint:
    listener_name: str
    host: str
    port: int
    security_protocol: int = 0          # SecurityProtocol id (PLAINTEXT)


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


class PartitionInfo(NamedTuple):
    # named tuples, this and UpdateMetadataPartitionState: an UpdateMetadata of a restart makes
    # 10,000 of each (a frozen dataclass is built ~5x slower)
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    controller_epoch: int = -1
    zk_version: int = -1               # the state znode's version (the partition epoch)


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class UpdateMetadataPartitionState(NamedTuple):
    """One partition of an UpdateMetadata request (Kafka's UpdateMetadataPartitionState)."""
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    def info(self) -> PartitionInfo:
        return PartitionInfo(self.partition, self.leader, self.leader_epoch, tuple(self.replicas), tuple(self.isr),
                             tuple(self.offline_replicas), self.controller_epoch, self.zk_version)


@dataclass(frozen=True)
class PartitionMetadata:
    """A partition as Metadata answers it on one listener (ZkMetadataCache.getPartitionMetadata)."""
    error: ErrorCode
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True)
class MetadataChange:
    """What one cache update changed, for listeners (e.g. the admin manager completing
    CreateTopics/DeleteTopics that wait for the metadata, the group coordinator dropping the
    offsets of deleted partitions)."""
    updated_topics: frozenset[str]
    deleted_partitions: tuple[TopicPartition, ...]
    brokers_changed: bool


MetadataListener = Callable[[MetadataChange], None]


class MetadataCache:
    def __init__(self, cluster_id: str = "", broker_id: int = -1) -> None:
        self.cluster_id = cluster_id
        self.broker_id = broker_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicInfo] = {}
        # topic ids live apart from partition states, as in Kafka: an update may name a topic id
        # without partitions, and a zero id forgets the topic's id but not its partitions
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}
        self._listeners: list[MetadataListener] = []
        # bumped by every change: what is derived from the whole cache (the encoded Metadata
        # response for all topics) is valid while it stays the same
        self.generation = 0

    # -- listeners -----------------------------------------------------------------------------
    def add_listener(self, callback: MetadataListener) -> None:
        """`callback(change)` runs after every update, once the cache holds the new state."""
        self._listeners.append(callback)

    def remove_listener(self, callback: MetadataListener) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _notify(self, change: MetadataChange) -> None:
        self.generation += 1
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:   # one faulty listener must not stop the others nor the update
                log.exception("metadata cache listener failed")

    # -- updates -------------------------------------------------------------------------------
    def update_metadata(self, controller_id: int, controller_epoch: int, live_brokers: Iterable[BrokerInfo],
                        partition_states: Iterable[UpdateMetadataPartitionState],
                        topic_ids: Mapping[str, uuid.UUID] | None = None) -> list[TopicPartition]:
        """Apply one UpdateMetadata (ZkMetadataCache.updateMetadata); returns the partitions it
        deleted, in request order. `topic_ids`: the request's topic states' ids (zero: forget)."""
        brokers = {b.broker_id: b for b in live_brokers}
        own = brokers.get(self.broker_id)
        if own is not None:
            listeners = {ep.listener_name for ep in own.endpoints}
            if any({ep.listener_name for ep in b.endpoints} != listeners for b in brokers.values()):
                log.error("Listeners are not identical across brokers: %s", brokers)
        brokers_changed = brokers != self.brokers or controller_id != self.controller_id
        self.brokers = brokers
        self.controller_id = controller_id if controller_id >= 0 else -1

        touched: set[str] = set()
        for name, tid in (topic_ids or {}).items():
            old = self._topic_ids.pop(name, None)
            if tid != ZERO_UUID:
                self._topic_ids[name] = tid
            if old != self._topic_ids.get(name):
                touched.add(name)

        deleted: dict[TopicPartition, None] = {}     # ordered set, as Kafka's LinkedHashSet
        # copy-on-write per topic: a reader holding a TopicInfo never sees it change; None: the
        # topic lost its last partition in this update
        changed: dict[str, Optional[dict[int, PartitionInfo]]] = {}

        def partitions_of(topic: str) -> Optional[dict[int, PartitionInfo]]:
            if topic not in changed:
                current = self._topics.get(topic)
                changed[topic] = dict(current.partitions) if current is not None else None
            return changed[topic]

        added = 0
        for state in partition_states:
            parts = partitions_of(state.topic)
            touched.add(state.topic)
            if state.leader == LEADER_DURING_DELETE:
                if parts is not None:
                    parts.pop(state.partition, None)
                    if not parts:
                        # a topic lives as long as one of its partitions does; its id goes with it
                        changed[state.topic] = None
                        self._topic_ids.pop(state.topic, None)
                deleted[TopicPartition(state.topic, state.partition)] = None
            else:
                if parts is None:
                    parts = changed[state.topic] = {}
                parts[state.partition] = state.info()
                if deleted:
                    deleted.pop(TopicPartition(state.topic, state.partition), None)
                added += 1

        for name in touched:
            if name in changed:
                parts = changed[name]
            else:
                current = self._topics.get(name)
                parts = current.partitions if current is not None else None
            if parts:
                self._topics[name] = TopicInfo(name, self._topic_ids.get(name, ZERO_UUID), is_internal(name), parts)
            else:
                self._topics.pop(name, None)
        self._rebuild_names_by_id()
        log.info("Add %d partitions and deleted %d partitions from metadata cache in response to UpdateMetadata "
                 "request sent by controller %d epoch %d",
                 added, len(deleted), controller_id,
                 controller_epoch)
        deleted_list = list(deleted)
        self._notify(MetadataChange(frozenset(touched), tuple(deleted_list), brokers_changed))
        return deleted_list

    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id
        self._notify(MetadataChange(frozenset(), (), True))

    def update_topic(self, topic: TopicInfo) -> None:
        """Replace one topic whole (the embedded single-node controller's way of publishing)."""
        self._topics[topic.name] = topic
        if topic.topic_id != ZERO_UUID:
            self._topic_ids[topic.name] = topic.topic_id
        else:
            self._topic_ids.pop(topic.name, None)
        self._rebuild_names_by_id()
        self._notify(MetadataChange(frozenset({topic.name}), (), False))

    def remove_topic(self, name: str) -> None:
        t = self._topics.pop(name, None)
        self._topic_ids.pop(name, None)
        self._rebuild_names_by_id()
        if t is not None:
            self._notify(MetadataChange(frozenset({name}),
                                        tuple(TopicPartition(name, p) for p in sorted(t.partitions)), False))

    def _rebuild_names_by_id(self) -> None:
        # Kafka derives the id -> name map from the name -> id map of each snapshot
        self._names_by_id = {tid: name for name, tid in self._topic_ids.items()}

    # -- reads ---------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names_by_id.get(topic_id)

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self._topics.get(name)
        return t.topic_id if t else None

    def topic_names(self) -> list[str]:
        return list(self._topics)

    def topic_count(self) -> int:
        return len(self._topics)

    def contains(self, name: str) -> bool:
        return name in self._topics

    def contains_partition(self, tp: TopicPartition) -> bool:
        t = self._topics.get(tp.topic)
        return t is not None and tp.partition in t.partitions

    def partition_info(self, tp: TopicPartition) -> PartitionInfo | None:
        t = self._topics.get(tp.topic)
        return t.partitions.get(tp.partition) if t is not None else None

    def alive_brokers(self) -> list[BrokerInfo]:
        return list(self.brokers.values())

    def has_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def alive_endpoint(self, broker_id: int, listener_name: str) -> BrokerEndpoint | None:
        """The broker's endpoint on the listener, if the broker is alive and has that listener."""
        b = self.brokers.get(broker_id)
        return b.endpoint(listener_name) if b is not None else None

    def partition_metadata(self, topic: str, listener_name: str, error_unavailable_endpoints: bool = False,
                           error_unavailable_listeners: bool = False) -> list[PartitionMetadata] | None:
        """The topic's partitions as Metadata answers them on `listener_name`, by partition
        index (None: unknown topic). Kafka's rules: a leader not alive is LEADER_NOT_AVAILABLE
        with leader -1; a live leader without that listener is LISTENER_NOT_FOUND when
        `error_unavailable_listeners` (Metadata v6+), else LEADER_NOT_AVAILABLE; with
        `error_unavailable_endpoints` (Metadata v0) replicas and ISR list only brokers alive on
        the listener and a shortened list is REPLICA_NOT_AVAILABLE."""
        t = self._topics.get(topic)
        if t is None:
            return None
        out: list[PartitionMetadata] = []
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            replicas, isr = p.replicas, p.isr
            if error_unavailable_endpoints:
                replicas = tuple(b for b in p.replicas if self.alive_endpoint(b, listener_name) is not None)
                isr = tuple(b for b in p.isr if self.alive_endpoint(b, listener_name) is not None)
            if self.alive_endpoint(p.leader, listener_name) is None:
                if p.leader not in self.brokers or not error_unavailable_listeners:
                    error = ErrorCode.LEADER_NOT_AVAILABLE
                else:
                    error = ErrorCode.LISTENER_NOT_FOUND
                out.append(PartitionMetadata(error, p.partition, NO_LEADER, p.leader_epoch, replicas, isr,
                                             p.offline_replicas))
                continue
            if len(replicas) < len(p.replicas) or len(isr) < len(p.isr):
                error = ErrorCode.REPLICA_NOT_AVAILABLE
            else:
                error = ErrorCode.NONE
            out.append(PartitionMetadata(error, p.partition, p.leader, p.leader_epoch, replicas, isr,
                                         p.offline_replicas))
        return out
