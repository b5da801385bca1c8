"""Per-log configuration: the topic-level settings a Log obeys.

Built from the broker defaults (``KafkaConfig.log_config()``) merged with per-topic overrides
(topic property names such as ``segment.bytes``). Frozen: a config change swaps in a new object.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

TimestampType = Literal["CreateTime", "LogAppendTime"]


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024           # segment.bytes
    segment_ms: int = 7 * 24 * 60 * 60 * 1000          # segment.ms
    segment_jitter_ms: int = 0                         # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024        # segment.index.bytes (max index file size)
    index_interval_bytes: int = 4096                   # index.interval.bytes
    retention_ms: int = 7 * 24 * 60 * 60 * 1000        # retention.ms (-1: unlimited)
    retention_bytes: int = -1                          # retention.bytes (-1: unlimited)
    max_message_bytes: int = 1024 * 1024 + 12          # max.message.bytes (batch size limit)
    message_timestamp_type: TimestampType = "CreateTime"  # message.timestamp.type
    file_delete_delay_ms: int = 60_000                 # file.delete.delay.ms
    cleanup_policy: str = "delete"                     # cleanup.policy
    min_insync_replicas: int = 1                       # min.insync.replicas
    flush_messages: int = 2**63 - 1                    # flush.messages
    flush_ms: int = 2**63 - 1                          # flush.ms
    preallocate: bool = False                          # preallocate
    # compaction (cleanup.policy=compact)
    delete_retention_ms: int = 24 * 60 * 60 * 1000     # delete.retention.ms (tombstones kept)
    min_compaction_lag_ms: int = 0                     # min.compaction.lag.ms
    max_compaction_lag_ms: int = 2**63 - 1             # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5             # min.cleanable.dirty.ratio

    def with_overrides(self, **changes: object) -> "LogConfig":
        return replace(self, **changes)  # type: ignore[arg-type]


# Topic-level property name -> LogConfig attribute.
TOPIC_CONFIG_ATTRS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "cleanup.policy": "cleanup_policy",
    "min.insync.replicas": "min_insync_replicas",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "preallocate": "preallocate",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}
