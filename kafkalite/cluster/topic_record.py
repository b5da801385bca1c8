"""Topics as admin operations see them: a topic's id, replica assignment and config overrides
(`TopicRecord`), a topic to create (`NewTopic`, CreateTopics' request item) and one topic's
outcome (`TopicResult`), and Kafka's topic ids."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from kafkalite.protocol.errors import ErrorCode

MAX_PARTITIONS = 1_000_000  # keep a hostile CreateTopics from allocating the world


@dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]            # partition -> replica broker ids
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1                       # -1: num.partitions
    replication_factor: int = -1                   # -1: default.replication.factor
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, Optional[str]] = field(default_factory=dict)


@dataclass
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: Optional[str] = None
    record: Optional[TopicRecord] = None
    log_config: Optional[Any] = None               # the new topic's LogConfig


def kafka_uuid_b64(u: uuid.UUID) -> str:
    """Kafka prints topic/cluster ids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def new_kafka_uuid() -> uuid.UUID:
    # Kafka never hands out the zero uuid or the sentinel "one" uuid, nor ids starting with '-'
    while True:
        u = uuid.uuid4()
        if not kafka_uuid_b64(u).startswith("-") and u.int > 1:
            return u
