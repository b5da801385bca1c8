"""Per-log configuration: the topic-level settings a Log obeys.

Built from the broker defaults (``KafkaConfig.log_config()``) merged with per-topic overrides
(topic property names such as ``segment.bytes``). Frozen: a config change swaps in a new object.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
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
    # timestamps of CreateTime records must lie in [now - before, now + after] (INVALID_TIMESTAMP);
    # difference.max.ms is the deprecated 3.x form, used for a bound left at its default
    message_timestamp_before_max_ms: int = 2**63 - 1   # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 2**63 - 1    # message.timestamp.after.max.ms
    message_timestamp_difference_max_ms: int = 2**63 - 1  # message.timestamp.difference.max.ms
    # broker recompresses produced batches to this codec unless it is "producer"
    compression_type: str = "producer"                 # compression.type
    # stored for the replicating controller; a single broker never elects an out-of-sync leader
    unclean_leader_election_enable: bool = False       # unclean.leader.election.enable
    # false: Fetch v0-3 (which read message format 0/1) get UNSUPPORTED_VERSION for the topic
    message_downconversion_enable: bool = True         # message.downconversion.enable
    # stored only (replication quotas need replication)
    leader_replication_throttled_replicas: str = ""    # leader.replication.throttled.replicas
    follower_replication_throttled_replicas: str = ""  # follower.replication.throttled.replicas
    # deprecated, and ignored by a 3.x broker (inter.broker.protocol.version >= 3.0): the log
    # always holds magic v2 batches; kept so DescribeConfigs shows it (default "3.0-IV1")
    message_format_version: str = "3.0-IV1"            # message.format.version
    # tiered storage is not available: remote.storage.enable is always false, and the local
    # retention settings (-2: retention.ms/bytes) then have no effect, as in Kafka
    remote_storage_enable: bool = False                # remote.storage.enable
    local_retention_ms: int = -2                       # local.retention.ms
    local_retention_bytes: int = -2                    # local.retention.bytes
    # tiered storage switches (Kafka 3.9): stored and shown, nothing is ever copied to remote storage
    remote_log_copy_disable: bool = False              # remote.log.copy.disable
    remote_log_delete_on_disable: bool = False         # remote.log.delete.on.disable
    # codec levels (KIP-390): stored and shown with Kafka's defaults and ranges
    compression_gzip_level: int = -1                   # compression.gzip.level
    compression_lz4_level: int = 9                     # compression.lz4.level
    compression_zstd_level: int = 3                    # compression.zstd.level

    @property
    def effective_timestamp_before_max_ms(self) -> int:
        """Kafka 3.6+: before.max.ms unless left at its default, then difference.max.ms."""
        if self.message_timestamp_before_max_ms != 2**63 - 1:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def effective_timestamp_after_max_ms(self) -> int:
        if self.message_timestamp_after_max_ms != 2**63 - 1:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @cached_property
    def compact(self) -> bool:
        return "compact" in {p.strip() for p in self.cleanup_policy.split(",")}

    @cached_property
    def max_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: a compacted log also rolls by max.compaction.lag.ms,
        so records in the active segment (never cleaned) become cleanable in time."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

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
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "compression.type": "compression_type",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "message.downconversion.enable": "message_downconversion_enable",
    "message.format.version": "message_format_version",
    "leader.replication.throttled.replicas": "leader_replication_throttled_replicas",
    "follower.replication.throttled.replicas": "follower_replication_throttled_replicas",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
    "remote.log.copy.disable": "remote_log_copy_disable",
    "remote.log.delete.on.disable": "remote_log_delete_on_disable",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
}
