"""KIP-392, fetch from the closest replica: which replica a consumer should read a partition from
(Kafka's org.apache.kafka.common.replica ReplicaSelector / RackAwareReplicaSelector /
ClientMetadata / PartitionView / ReplicaView, and ReplicaManager.findPreferredReadReplica).

`replica.selector.class` is unset by default: consumers read from the leader only. The one
selector Kafka ships, org.apache.kafka.common.replica.RackAwareReplicaSelector, is accepted by
that exact name; any other name refuses start-up as Kafka's class loading does
(java.lang.ClassNotFoundException), since there is no classpath to load a custom one from.

The leader answers a consumer's Fetch (v11+, which carries the client's rack) with the chosen
replica instead of records when the selector picks a replica other than itself; the consumer
then fetches from that follower, which serves up to its high watermark.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Optional, Protocol

from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.cluster.topic_partition import TopicPartition

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# how Kafka's KafkaServer logs any start-up failure, this one included
STARTUP_FAILURE = "Fatal error during KafkaServer startup. Prepare to shutdown"


class ClassNotFoundException(Exception):
    """Kafka's start-up failure for a replica.selector.class it cannot load; str() is the line
    Kafka logs under STARTUP_FAILURE (java.lang.Throwable.toString)."""

    def __init__(self, class_name: str) -> None:
        super().__init__(class_name)
        self.class_name = class_name

    def __str__(self) -> str:
        return f"java.lang.ClassNotFoundException: {self.class_name}"


@dataclass(frozen=True)
class Node:
    """Kafka's Node as a replica selector sees it: a broker's endpoint on the client's listener."""
    id: int
    host: str
    port: int
    rack: Optional[str] = None

    @property
    def is_empty(self) -> bool:
        return not self.host or self.port < 0


NO_NODE = Node(-1, "", -1)  # Node.noNode(): a replica whose broker has no endpoint on the listener


@dataclass(frozen=True)
class ClientMetadata:
    """What a Fetch request tells about the consumer (DefaultClientMetadata)."""
    rack_id: str
    client_id: str
    client_address: str
    principal: str
    listener_name: str


@dataclass(frozen=True)
class ReplicaView:
    endpoint: Node
    log_end_offset: int
    time_since_last_caught_up_ms: int  # 0 for the leader


def most_caught_up_key(replica: ReplicaView) -> tuple[int, int, int]:
    """ReplicaView.comparator(): the larger key is the more caught-up replica (higher log end
    offset, then more recently caught up, then the higher broker id, for a deterministic pick)."""
    return replica.log_end_offset, -replica.time_since_last_caught_up_ms, replica.endpoint.id


@dataclass(frozen=True)
class PartitionView:
    replicas: frozenset[ReplicaView]  # the leader among them
    leader: ReplicaView


class ReplicaSelector(Protocol):
    def select(self, tp: TopicPartition, client_metadata: ClientMetadata,
               partition_view: PartitionView) -> Optional[ReplicaView]: ...

    def configure(self, configs: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class RackAwareReplicaSelector:
    """The leader when the client has no rack, when no replica shares it, or when the leader does;
    else the most caught-up replica in the client's rack."""

    def select(self, tp: TopicPartition, client_metadata: ClientMetadata,
               partition_view: PartitionView) -> Optional[ReplicaView]:
        rack = client_metadata.rack_id
        if not rack:
            return partition_view.leader
        same_rack = [r for r in partition_view.replicas if r.endpoint.rack == rack]
        if not same_rack or partition_view.leader in same_rack:
            return partition_view.leader
        return max(same_rack, key=most_caught_up_key)

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def create_replica_selector(class_name: Optional[str]) -> Optional[ReplicaSelector]:
    """The selector `replica.selector.class` names (None: leader only). Raises
    ClassNotFoundException for any name but RACK_AWARE_REPLICA_SELECTOR."""
    if class_name is None:
        return None
    if class_name != RACK_AWARE_REPLICA_SELECTOR:
        raise ClassNotFoundException(class_name)
    return RackAwareReplicaSelector()


class RemoteReplica(Protocol):
    """What the leader knows of a follower (partition.ReplicaState)."""
    log_end_offset: int
    log_start_offset: int
    last_caught_up_time_ms: int


def partition_replica_endpoints(cache: MetadataCache, tp: TopicPartition, listener_name: str) -> dict[int, Node]:
    """Broker id -> endpoint on `listener_name` of each replica of `tp` that is alive and has that
    listener (Kafka's MetadataCache.getPartitionReplicaEndpoints)."""
    info = cache.partition_info(tp)
    if info is None:
        return {}
    out: dict[int, Node] = {}
    for broker_id in info.replicas:
        broker = cache.brokers.get(broker_id)
        ep = broker.endpoint(listener_name) if broker is not None else None
        if ep is not None:
            out[broker_id] = Node(broker_id, ep.host, ep.port, broker.rack)  # type: ignore[union-attr]
    return out


def find_preferred_read_replica(selector: Optional[ReplicaSelector], tp: TopicPartition,
                                client_metadata: ClientMetadata, replica_id: int, fetch_offset: int,
                                now_ms: int, leader_id_if_local: Optional[int], leader_log_end_offset: int,
                                isr: Collection[int], remote_replicas: Mapping[int, RemoteReplica],
                                replica_endpoints: Mapping[int, Node]) -> Optional[int]:
    """The broker a consumer should fetch `tp` from instead of this leader, or None (read here).

    None unless this broker leads `tp` (`leader_id_if_local`), the fetch is a consumer's
    (`replica_id` < 0) and a selector is configured. Candidates are the leader and each follower in
    the committed ISR whose log holds `fetch_offset` (log start <= offset <= log end): a lagging
    follower would keep the consumer behind. The leader, or a replica without an endpoint on the
    client's listener, gives None."""
    if leader_id_if_local is None or replica_id >= 0 or selector is None:
        return None
    candidates: set[ReplicaView] = set()
    for broker_id, replica in remote_replicas.items():
        if broker_id in isr and replica.log_end_offset >= fetch_offset and replica.log_start_offset <= fetch_offset:
            candidates.add(ReplicaView(replica_endpoints.get(broker_id, NO_NODE), replica.log_end_offset,
                                       now_ms - replica.last_caught_up_time_ms))
    leader = ReplicaView(replica_endpoints.get(leader_id_if_local, NO_NODE), leader_log_end_offset, 0)
    candidates.add(leader)
    selected = selector.select(tp, client_metadata, PartitionView(frozenset(candidates), leader))
    if selected is None or selected.endpoint.is_empty or selected == leader:
        return None
    return selected.endpoint.id


def preferred_read_replica_of(partition: Any, selector: Optional[ReplicaSelector],
                              client_metadata: Optional[ClientMetadata], replica_id: int, fetch_offset: int,
                              now_ms: int, cache: MetadataCache) -> Optional[int]:
    """find_preferred_read_replica for a replica.partition.Partition (the call the Fetch path
    makes per partition, before reading; `client_metadata` None below Fetch v11)."""
    if client_metadata is None or selector is None or not partition.is_leader:
        return None
    return find_preferred_read_replica(
        selector, partition.tp, client_metadata, replica_id, fetch_offset, now_ms, partition.local_broker_id,
        partition.log_end_offset, partition.isr, partition.remote_replicas,
        partition_replica_endpoints(cache, partition.tp, client_metadata.listener_name))
