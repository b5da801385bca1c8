"""The broker's view of the cluster (Kafka's MetadataCache), fed by the controller's
UpdateMetadata; Metadata, DescribeCluster and friends answer from it."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerEndpoint:
    listener_name: str
    host: str
    port: int


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


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, cluster_id: str = "") -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}

    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id

    def update_topic(self, topic: TopicInfo) -> None:
        self._topics[topic.name] = topic
        self._names_by_id[topic.topic_id] = topic.name

    def remove_topic(self, name: str) -> None:
        t = self._topics.pop(name, None)
        if t is not None:
            self._names_by_id.pop(t.topic_id, None)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names_by_id.get(topic_id)

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self._topics.get(name)
        return t.topic_id if t else None

    def topic_names(self) -> list[str]:
        return list(self._topics)

    def contains(self, name: str) -> bool:
        return name in self._topics

    def alive_brokers(self) -> list[BrokerInfo]:
        return list(self.brokers.values())
