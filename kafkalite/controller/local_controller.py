"""The embedded single-node controller: the same duties as Kafka's ZooKeeper controller
(topic creation and deletion, replica assignment, leader election, LeaderAndIsr and
UpdateMetadata to the brokers), over a local metadata store and with this broker as the only
member of the cluster."""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional

from kafkalite.config.log_config import LogConfig
from kafkalite.config.topic_config import (InvalidTopicConfigError, message_format_version_warning,
                                           topic_log_config, validate_topic_log_config)
from kafkalite.controller.metadata_store import MetadataStore, PartitionState, TopicRecord, new_kafka_uuid
from kafkalite.protocol.errors import ErrorCode
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.cluster.metadata_cache import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from kafkalite.cluster.topic_validation import is_internal, topic_name_error, unify_collision_chars

log = logging.getLogger(__name__)

MAX_PARTITIONS = 1_000_000  # keep a hostile CreateTopics from allocating the world


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
    log_config: Optional[LogConfig] = None


class LocalController:
    controller_epoch = 1

    def __init__(self, broker_id: int, store: MetadataStore, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, default_log_config: LogConfig,
                 default_num_partitions: int, default_replication_factor: int,
                 broker_info: BrokerInfo, delete_topic_enable: bool = True) -> None:
        self.broker_id = broker_id
        self.store = store
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.default_log_config = default_log_config
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.broker_info = broker_info
        self.delete_topic_enable = delete_topic_enable

    @property
    def live_brokers(self) -> list[int]:
        return [self.broker_id]

    def startup(self) -> None:
        """Elect this broker leader of every partition (bumping leader epochs, as a controller
        does when partitions come back online) and publish the metadata."""
        self.metadata_cache.cluster_id = self.store.cluster_id()
        self.metadata_cache.update_brokers([self.broker_info], controller_id=self.broker_id)
        for record in list(self.store.topics().values()):
            states = {p: PartitionState(leader=self.broker_id,
                                        leader_epoch=(record.states[p].leader_epoch + 1) if p in record.states else 0,
                                        isr=[self.broker_id], controller_epoch=self.controller_epoch)
                      for p in record.assignment}
            self.store.update_partition_states(record.name, states)
            self._publish(record)

    def log_config_for(self, record: TopicRecord) -> LogConfig:
        return topic_log_config(self.default_log_config, record.configs)

    def _publish(self, record: TopicRecord, only: Optional[set[int]] = None) -> None:
        """LeaderAndIsr to the replica manager (for the partitions in `only`, default all), then
        UpdateMetadata to the cache."""
        cfg = self.log_config_for(record)
        partitions: dict[int, PartitionInfo] = {}
        for p, replicas in sorted(record.assignment.items()):
            st = record.states[p]
            if only is None or p in only:
                self.replica_manager.become_leader(TopicPartition(record.name, p), record.topic_id,
                                                   st.leader_epoch, replicas, st.isr, cfg)
            partitions[p] = PartitionInfo(p, st.leader, st.leader_epoch, tuple(replicas), tuple(st.isr))
        self.metadata_cache.update_topic(TopicInfo(record.name, record.topic_id, is_internal(record.name),
                                                   partitions))

    # -- CreateTopics --------------------------------------------------------------------------
    def create_topics(self, topics: list[NewTopic], validate_only: bool) -> list[TopicResult]:
        results: list[TopicResult] = []
        seen: set[str] = set()
        for t in topics:
            if t.name in seen:
                results.append(TopicResult(t.name, ErrorCode.INVALID_REQUEST,
                                           f"Create topics request from client contains duplicate topic {t.name}"))
                continue
            seen.add(t.name)
            result = self._validate_new_topic(t)
            if result.error == ErrorCode.NONE and not validate_only:
                assert result.record is not None
                self.store.create_topic(result.record)
                self._publish(result.record)
                log.info("created topic %s with %d partitions", t.name, result.record.num_partitions)
                _warn_ignored_configs(t.name, result.record.configs)
            results.append(result)
        return results

    def _validate_new_topic(self, t: NewTopic) -> TopicResult:
        err = topic_name_error(t.name)
        if err:
            return TopicResult(t.name, ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        existing = self.store.topics()
        if t.name in existing:
            return TopicResult(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        collision = unify_collision_chars(t.name)
        for other in existing:
            if unify_collision_chars(other) == collision:
                return TopicResult(t.name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                   f"Topic '{t.name}' collides with existing topic: {other}")
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return TopicResult(t.name, ErrorCode.INVALID_REQUEST,
                                   "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                   "Both cannot be used at the same time.")
            assignment = {p: list(r) for p, r in t.assignments.items()}
            if sorted(assignment) != list(range(len(assignment))):
                return TopicResult(t.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   "Partitions should be a consecutive 0-based integer sequence")
            for p, replicas in assignment.items():
                if not replicas or len(set(replicas)) != len(replicas):
                    return TopicResult(t.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       f"Duplicate or empty replica assignment for partition {p}")
                unknown = [b for b in replicas if b not in self.live_brokers]
                if unknown:
                    return TopicResult(t.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       f"Unknown broker(s) {unknown} in replica assignment")
        else:
            n = self.default_num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = self.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            if n <= 0 or n > MAX_PARTITIONS:
                return TopicResult(t.name, ErrorCode.INVALID_PARTITIONS,
                                   "Number of partitions must be larger than 0.")
            if rf <= 0:
                return TopicResult(t.name, ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "Replication factor must be larger than 0.")
            if rf > len(self.live_brokers):
                return TopicResult(t.name, ErrorCode.INVALID_REPLICATION_FACTOR,
                                   f"Replication factor: {rf} larger than available brokers: "
                                   f"{len(self.live_brokers)}.")
            assignment = {p: self.live_brokers[:rf] for p in range(n)}
        try:
            configs, cfg = validate_topic_log_config(self.default_log_config, t.configs)
        except InvalidTopicConfigError as e:
            return TopicResult(t.name, ErrorCode.INVALID_CONFIG, str(e))
        states = {p: PartitionState(self.broker_id, 0, [b for b in r if b in self.live_brokers],
                                    self.controller_epoch) for p, r in assignment.items()}
        record = TopicRecord(t.name, new_kafka_uuid(), assignment, configs, states)
        return TopicResult(t.name, ErrorCode.NONE, None, record, cfg)

    # -- DeleteTopics --------------------------------------------------------------------------
    def delete_topics(self, names: list[str]) -> list[TopicResult]:
        results = []
        for name in names:
            record = self.store.topics().get(name)
            if record is None:
                results.append(TopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                           "This server does not host this topic-partition."))
                continue
            if not self.delete_topic_enable:
                results.append(TopicResult(name, ErrorCode.TOPIC_DELETION_DISABLED,
                                           "Topic deletion is disabled."))
                continue
            self.metadata_cache.remove_topic(name)
            for p in record.assignment:
                self.replica_manager.stop_replica(TopicPartition(name, p), delete=True)
            self.store.delete_topic(name)
            log.info("deleted topic %s", name)
            results.append(TopicResult(name, ErrorCode.NONE, None, record))
        return results

    def topic_record(self, name: str) -> Optional[TopicRecord]:
        return self.store.topics().get(name)

    def topic_record_by_id(self, topic_id: uuid.UUID) -> Optional[TopicRecord]:
        for r in self.store.topics().values():
            if r.topic_id == topic_id:
                return r
        return None

    # -- AlterConfigs / IncrementalAlterConfigs ------------------------------------------------
    def alter_topic_configs(self, name: str, configs: dict[str, Optional[str]],
                            validate_only: bool) -> tuple[ErrorCode, Optional[str]]:
        """Replace the topic's overrides with `configs` (the complete new set), validated as at
        creation; the live logs take the new LogConfig at once."""
        record = self.store.topics().get(name)
        if record is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        try:
            overrides, cfg = validate_topic_log_config(self.default_log_config, configs)
        except InvalidTopicConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e)
        if not validate_only:
            self.store.update_topic_configs(name, overrides)
            self.replica_manager.update_log_config(name, cfg)
            log.info("updated configs of topic %s: %s", name, overrides)
            _warn_ignored_configs(name, overrides)
        return ErrorCode.NONE, None

    # -- CreatePartitions ----------------------------------------------------------------------
    def create_partitions(self, name: str, count: int, assignments: Optional[list[list[int]]],
                          validate_only: bool) -> tuple[ErrorCode, Optional[str]]:
        """Add partitions up to `count` (Kafka's ZooKeeper-mode checks and messages); existing
        partitions and their data are untouched."""
        record = self.store.topics().get(name)
        if record is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        old = record.num_partitions
        increment = count - old
        if increment < 0:
            return ErrorCode.INVALID_PARTITIONS, (f"Topic currently has {old} partitions, which is higher than "
                                                  f"the requested {count}.")
        if increment == 0:
            return ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions."
        if count > MAX_PARTITIONS:
            return ErrorCode.INVALID_PARTITIONS, f"Number of partitions must be at most {MAX_PARTITIONS}."
        rf = len(record.assignment[0])
        if assignments is not None:
            unknown = sorted({b for r in assignments for b in r} - set(self.live_brokers))
            if unknown:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
            if len(assignments) != increment:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Increasing the number of partitions by {increment} but {len(assignments)} "
                    "assignments provided.")
            new_assignment = {old + i: list(r) for i, r in enumerate(assignments)}
            for p, replicas in new_assignment.items():
                if not replicas:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Cannot have replication factor of 0 for partition id {p}."
                if len(set(replicas)) != len(replicas):
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                        f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} "
                        f"for partition id {p}.")
            bad = sorted((p, len(r)) for p, r in new_assignment.items() if len(r) != rf)
            if bad:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                    f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
                    f"[{', '.join(str(n) for _, n in bad)}], respectively.")
        else:
            if rf > len(self.live_brokers):
                return ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"Replication factor: {rf} larger than available brokers: {len(self.live_brokers)}.")
            new_assignment = {p: self.live_brokers[:rf] for p in range(old, count)}
        if validate_only:
            return ErrorCode.NONE, None
        states = {p: PartitionState(self.broker_id, 0, [b for b in r if b in self.live_brokers],
                                    self.controller_epoch) for p, r in new_assignment.items()}
        self.store.add_partitions(name, new_assignment, states)
        self._publish(record, only=set(new_assignment))
        log.info("added partitions %d..%d to topic %s", old, count - 1, name)
        return ErrorCode.NONE, None


def _warn_ignored_configs(topic: str, overrides: dict[str, str]) -> None:
    """Kafka 3.x logs a warning for a message.format.version before 0.11, which it ignores."""
    value = overrides.get("message.format.version")
    warning = message_format_version_warning(topic, value) if value is not None else None
    if warning is not None:
        log.warning(warning)
