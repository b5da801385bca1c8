"""Where cluster metadata lives: topics, their partition assignment and state, topic configs,
dynamic broker configs, producer-id blocks, the cluster id.

`MetadataStore` is the interface the controller writes through. The embedded single-node broker
uses `LocalMetadataStore` (one JSON document, rewritten atomically); a ZooKeeper implementation
with the same interface stores the same things under Kafka's znode paths.
"""
from __future__ import annotations

import base64
import json
import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class PartitionState:
    """Kafka's LeaderAndIsr as stored in /brokers/topics/<t>/partitions/<p>/state."""
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int = 1
    version: int = 0


@dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]            # partition -> replica broker ids
    configs: dict[str, str] = field(default_factory=dict)
    states: dict[int, PartitionState] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)


def kafka_uuid_b64(u: uuid.UUID) -> str:
    """Kafka prints topic/cluster ids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def new_kafka_uuid() -> uuid.UUID:
    # Kafka never hands out the zero uuid or the sentinel "one" uuid, nor ids starting with '-'
    while True:
        u = uuid.uuid4()
        if not kafka_uuid_b64(u).startswith("-") and u.int > 1:
            return u


class MetadataStore(ABC):
    @abstractmethod
    def load(self) -> None: ...

    @abstractmethod
    def cluster_id(self) -> str: ...

    @abstractmethod
    def topics(self) -> dict[str, TopicRecord]: ...

    @abstractmethod
    def create_topic(self, record: TopicRecord) -> None: ...

    @abstractmethod
    def update_partition_states(self, topic: str, states: dict[int, PartitionState]) -> None: ...

    @abstractmethod
    def delete_topic(self, name: str) -> None: ...

    @abstractmethod
    def update_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        """Replace the topic's config overrides (Kafka's /config/topics/<t>)."""

    @abstractmethod
    def add_partitions(self, topic: str, assignment: dict[int, list[int]],
                       states: dict[int, PartitionState]) -> None:
        """Add new partitions (their replica assignment and first state) to a topic."""

    @abstractmethod
    def broker_configs(self, entity: str) -> dict[str, str]:
        """The dynamic configs of a broker entity: a broker id, or "<default>" for the cluster-wide
        defaults (Kafka's /config/brokers/<entity>); empty when none were set."""

    @abstractmethod
    def update_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the entity's dynamic broker configs."""

    @abstractmethod
    def allocate_producer_id_block(self, broker_id: int, block_size: int) -> int:
        """Reserve [start, start + block_size) for this broker; ids never repeat across restarts."""

    @abstractmethod
    def close(self) -> None: ...


class LocalMetadataStore(MetadataStore):
    """A single JSON file beside the logs: the embedded controller's source of truth."""

    FILE_NAME = "kafkalite-metadata.json"

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / self.FILE_NAME
        self._cluster_id = ""
        self._topics: dict[str, TopicRecord] = {}
        self._next_producer_id = 0
        # entity -> Kafka's config znode document {"version": 1, "config": {...}}
        self._broker_configs: dict[str, dict] = {}

    def load(self) -> None:
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            self._cluster_id = doc["cluster_id"]
            self._next_producer_id = int(doc.get("next_producer_id", 0))
            self._topics = {t["name"]: self._topic_from_json(t) for t in doc.get("topics", [])}
            self._broker_configs = dict(doc.get("config", {}).get("brokers", {}))
        else:
            self._cluster_id = kafka_uuid_b64(new_kafka_uuid())
            self._persist()

    @staticmethod
    def _topic_from_json(t: dict) -> TopicRecord:
        return TopicRecord(
            name=t["name"], topic_id=uuid.UUID(t["topic_id"]),
            assignment={int(p): list(r) for p, r in t["assignment"].items()},
            configs=dict(t.get("configs", {})),
            states={int(p): PartitionState(**s) for p, s in t.get("states", {}).items()})

    def _persist(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self._cluster_id,
            "next_producer_id": self._next_producer_id,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id),
                 "assignment": {str(p): r for p, r in sorted(t.assignment.items())},
                 "configs": t.configs,
                 "states": {str(p): asdict(s) for p, s in sorted(t.states.items())}}
                for t in self._topics.values()],
            # the layout of ZooKeeper's /config/brokers/<entity> znodes
            "config": {"brokers": self._broker_configs},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def cluster_id(self) -> str:
        return self._cluster_id

    def topics(self) -> dict[str, TopicRecord]:
        return self._topics

    def create_topic(self, record: TopicRecord) -> None:
        self._topics[record.name] = record
        self._persist()

    def update_partition_states(self, topic: str, states: dict[int, PartitionState]) -> None:
        self._topics[topic].states.update(states)
        self._persist()

    def delete_topic(self, name: str) -> None:
        self._topics.pop(name, None)
        self._persist()

    def update_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self._topics[topic].configs = dict(configs)
        self._persist()

    def add_partitions(self, topic: str, assignment: dict[int, list[int]],
                       states: dict[int, PartitionState]) -> None:
        record = self._topics[topic]
        record.assignment.update({p: list(r) for p, r in assignment.items()})
        record.states.update(states)
        self._persist()

    def broker_configs(self, entity: str) -> dict[str, str]:
        return dict(self._broker_configs.get(entity, {}).get("config", {}))

    def update_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        self._broker_configs[entity] = {"version": 1, "config": dict(configs)}
        self._persist()

    def allocate_producer_id_block(self, broker_id: int, block_size: int) -> int:
        start = self._next_producer_id
        self._next_producer_id += block_size
        self._persist()
        return start

    def close(self) -> None:
        pass
