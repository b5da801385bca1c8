"""A topic partition's name (Kafka's TopicPartition): the key every layer uses, so it lives at the
bottom (the replica manager, the metadata cache, the controller and its ZooKeeper codecs all
import it from here). A named tuple: hashable, ordered by (topic, partition), and built from a
(topic, partition) pair as ZooKeeper documents and requests carry it."""
from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
