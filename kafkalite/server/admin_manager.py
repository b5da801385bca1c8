"""ZkAdminManager: what a broker does with CreateTopics, CreatePartitions, DeleteTopics and topic
config changes in ZooKeeper mode (Kafka's ZkAdminManager / AdminZkClient).

Any broker takes the request: it validates against the cluster as ZooKeeper and its metadata
cache see it, writes the znodes (topic config, then the assignment; a delete_topics marker; the
new assignment; a config and its change notification), and then waits — as Kafka's
DelayedCreatePartitions / DelayedDeleteTopics do — until the controller's UpdateMetadata has
reached this broker's cache: every partition with a leader, or the topic gone. What has not
happened by the request's timeout is answered REQUEST_TIMED_OUT (the change still completes).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable, Optional

from kafkalite.cluster.metadata_cache import MetadataCache, MetadataChange
from kafkalite.cluster.topic_validation import topic_name_error, unify_collision_chars
from kafkalite.config.log_config import LogConfig
from kafkalite.config.topic_config import (InvalidTopicConfigError, message_format_version_warning,
                                           topic_log_config, validate_topic_log_config)
from kafkalite.controller.replica_assignment import (BrokerMetadata, RackAwareMode, assign_replicas_to_brokers,
                                                     broker_metadatas, check_partition_increase,
                                                     explicit_new_partitions, new_partitions_assignment,
                                                     validate_topic_create_assignment)
from kafkalite.controller.zk.kafka_zk_client import KafkaZkClient
from kafkalite.controller.zk.znode_store import NodeExistsError
from kafkalite.controller.zk.znodes import ReplicaAssignment
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.cluster.topic_record import MAX_PARTITIONS, NewTopic, TopicRecord, TopicResult, new_kafka_uuid

log = logging.getLogger(__name__)


class MetadataWaiter:
    """Wakes waiting admin requests whenever the metadata cache changes."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self._changed = asyncio.Event()
        cache.add_listener(self._on_change)

    def _on_change(self, _change: MetadataChange) -> None:
        self._changed.set()

    async def wait_until(self, condition: Callable[[], bool], timeout_ms: int) -> bool:
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return condition()
        return True


class ZkAdminManager:
    def __init__(self, broker_id: int, zk: KafkaZkClient, metadata_cache: MetadataCache,
                 default_log_config: LogConfig, default_num_partitions: int, default_replication_factor: int,
                 delete_topic_enable: bool = True) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.cache = metadata_cache
        self.default_log_config = default_log_config
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self.waiter = MetadataWaiter(metadata_cache)

    @property
    def live_brokers(self) -> list[int]:
        return sorted(self.cache.brokers)

    def log_config_for(self, record: TopicRecord) -> LogConfig:
        return topic_log_config(self.default_log_config, record.configs)

    # -- reads --------------------------------------------------------------------------------
    async def topic_record(self, name: str) -> Optional[TopicRecord]:
        """The topic as ZooKeeper holds it: id, assignment, config overrides."""
        assignments = await self.zk.get_topic_assignments({name})
        ta = assignments.get(name)
        if ta is None or not ta.partitions:
            return None
        configs = await self.zk.get_entity_configs("topics", name)
        return TopicRecord(name, ta.topic_id or uuid.UUID(int=0),
                           {p: list(a.replicas) for p, a in ta.partitions.items()}, configs)

    def _has_leaders(self, topic: str, partitions: set[int]) -> bool:
        info = self.cache.topic(topic)
        if info is None:
            return False
        return all(p in info.partitions and info.partitions[p].leader >= 0 for p in partitions)

    # -- CreateTopics -------------------------------------------------------------------------
    async def create_topics(self, topics: list[NewTopic], validate_only: bool, timeout_ms: int) -> list[TopicResult]:
        results: list[TopicResult] = []
        brokers = [BrokerMetadata(b.broker_id, b.rack) for b in self.cache.alive_brokers()]
        seen: set[str] = set()
        for t in topics:
            if t.name in seen:
                results.append(TopicResult(t.name, ErrorCode.INVALID_REQUEST,
                                           f"Create topics request from client contains duplicate topic {t.name}"))
                continue
            seen.add(t.name)
            try:
                results.append(await self._create_topic(t, brokers, validate_only))
            except KafkaApiError as e:
                results.append(TopicResult(t.name, e.code, e.message))
            except Exception:
                log.exception("Error processing create topic request for topic %s", t.name)
                results.append(TopicResult(t.name, ErrorCode.UNKNOWN_SERVER_ERROR, None))
        created = [r for r in results if r.error == ErrorCode.NONE and r.record is not None]
        if validate_only or not created:
            return results
        ok = await self.waiter.wait_until(
            lambda: all(self._has_leaders(r.name, set(r.record.assignment)) for r in created  # type: ignore[union-attr]
                        ), timeout_ms)
        if not ok:
            for r in created:
                if not self._has_leaders(r.name, set(r.record.assignment)):  # type: ignore[union-attr]
                    r.error, r.message = ErrorCode.REQUEST_TIMED_OUT, None
        return results

    async def _create_topic(self, t: NewTopic, brokers: list[BrokerMetadata], validate_only: bool) -> TopicResult:
        if self.cache.contains(t.name):
            return TopicResult(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        null_configs = [k for k, v in t.configs.items() if v is None]
        if null_configs:
            return TopicResult(t.name, ErrorCode.INVALID_CONFIG,
                               f"Null value not supported for topic configs: {','.join(null_configs)}")
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            return TopicResult(t.name, ErrorCode.INVALID_REQUEST,
                               "Both numPartitions or replicationFactor and replicasAssignments were set. "
                               "Both cannot be used at the same time.")
        n = self.default_num_partitions if t.num_partitions == -1 else t.num_partitions
        rf = self.default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if t.assignments:
            assignment = {p: list(r) for p, r in t.assignments.items()}
        else:
            if n > MAX_PARTITIONS:
                return TopicResult(t.name, ErrorCode.INVALID_PARTITIONS,
                                   f"Number of partitions must be at most {MAX_PARTITIONS}.")
            # CreateTopics hands the live brokers to the assignment as they are (CreatePartitions enforces racks)
            assignment = assign_replicas_to_brokers(sorted(brokers, key=lambda b: b.id), n, rf)
        err = topic_name_error(t.name)
        if err:
            return TopicResult(t.name, ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        if await self.zk.is_topic_marked_for_deletion(t.name):
            return TopicResult(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' is marked for deletion.")
        existing = await self.zk.get_all_topics()
        if t.name in existing:
            return TopicResult(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        collision = unify_collision_chars(t.name)
        colliding = sorted(o for o in existing if o != t.name and unify_collision_chars(o) == collision)
        if colliding:
            return TopicResult(t.name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                               f"Topic '{t.name}' collides with existing topics: {', '.join(colliding)}")
        validate_topic_create_assignment(assignment)
        try:
            configs, cfg = validate_topic_log_config(self.default_log_config, t.configs)
        except InvalidTopicConfigError as e:
            return TopicResult(t.name, ErrorCode.INVALID_CONFIG, str(e))
        record = TopicRecord(t.name, new_kafka_uuid(), assignment, configs)
        if not validate_only:
            # AdminZkClient.createTopicWithAssignment: the config first, then the assignment the
            # controller watches for
            await self.zk.set_or_create_entity_configs("topics", t.name, configs)
            try:
                await self.zk.create_topic_assignment(t.name, record.topic_id, assignment)
            except NodeExistsError:
                return TopicResult(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            log.info("Creating topic %s with configuration %s and initial partition assignment %s",
                     t.name, configs, {p: r for p, r in sorted(assignment.items())})
            warning = message_format_version_warning(t.name, configs["message.format.version"]) \
                if "message.format.version" in configs else None
            if warning is not None:
                log.warning(warning)
        return TopicResult(t.name, ErrorCode.NONE, None, record, cfg)

    # -- DeleteTopics -------------------------------------------------------------------------
    async def delete_topics(self, names: list[str], timeout_ms: int) -> list[TopicResult]:
        if not self.delete_topic_enable:
            return [TopicResult(n, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.") for n in names]
        results: list[TopicResult] = []
        replica_brokers = {t: {b for a in ta.partitions.values() for b in a.replicas}
                           for t, ta in (await self.zk.get_topic_assignments(names)).items()}
        for name in names:
            topic_id = self.cache.topic_id(name)
            record = TopicRecord(name, topic_id or uuid.UUID(int=0), {})
            try:
                if not await self.zk.topic_exists(name):
                    results.append(TopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               f"Topic `{name}` to delete does not exist"))
                    continue
                try:
                    await self.zk.create_delete_topic_path(name)
                except NodeExistsError:
                    pass   # already marked: still a success, and this request waits for the deletion too
                results.append(TopicResult(name, ErrorCode.NONE, None, record))
            except KafkaApiError as e:
                results.append(TopicResult(name, e.code, e.message))
            except Exception:
                log.exception("Error processing delete topic request for topic %s", name)
                results.append(TopicResult(name, ErrorCode.UNKNOWN_SERVER_ERROR, None))
        deleting = [r for r in results if r.error == ErrorCode.NONE]
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        if deleting and not await self.waiter.wait_until(
                lambda: not any(self.cache.contains(r.name) for r in deleting), timeout_ms):
            for r in deleting:
                if self.cache.contains(r.name):
                    r.error = ErrorCode.REQUEST_TIMED_OUT
        # Kafka answers once the topic is out of the metadata; the controller finishes the deletion
        # (StopReplica answers, znodes removed) a moment later. Where every replica's broker is alive
        # that moment is waited for too, within the timeout, so the name can be reused at once.
        for r in deleting:
            if r.error == ErrorCode.NONE and replica_brokers.get(r.name, set()) <= set(self.cache.brokers):
                # done when the controller has removed the topic and then its deletion marker
                while (await self.zk.topic_exists(r.name) or await self.zk.is_topic_marked_for_deletion(r.name)) \
                        and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)
        return results

    # -- CreatePartitions ---------------------------------------------------------------------
    async def create_partitions(self, name: str, count: int, assignments: Optional[list[list[int]]],
                                validate_only: bool, timeout_ms: int) -> tuple[ErrorCode, Optional[str]]:
        try:
            all_brokers = broker_metadatas(
                [BrokerMetadata(b, reg.rack) for b, (reg, _) in (await self.zk.get_all_brokers()).items()],
                RackAwareMode.ENFORCED)
            ta = (await self.zk.get_topic_assignments({name})).get(name)
            if ta is not None and any(a.is_being_reassigned for a in ta.partitions.values()):
                return ErrorCode.REASSIGNMENT_IN_PROGRESS, \
                    f"A partition reassignment is in progress for the topic '{name}'."
            if ta is None or not ta.partitions:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            existing = {p: list(a.replicas) for p, a in ta.partitions.items()}
            increment = check_partition_increase(len(existing), count)
            if count > MAX_PARTITIONS:
                return ErrorCode.INVALID_PARTITIONS, f"Number of partitions must be at most {MAX_PARTITIONS}."
            explicit = explicit_new_partitions(len(existing), increment, assignments, [b.id for b in all_brokers]) \
                if assignments is not None else None
            new = new_partitions_assignment(name, existing, all_brokers, count, explicit)
        except KafkaApiError as e:
            return e.code, e.message
        if validate_only:
            return ErrorCode.NONE, None
        full = {p: ReplicaAssignment(tuple(r)) for p, r in {**existing, **new}.items()}
        await self.zk.set_topic_assignment(name, ta.topic_id, full)
        log.info("Creating %d partitions for '%s' with the following replica assignment: %s.",
                 increment, name, {p: r for p, r in sorted(new.items())})
        if not await self.waiter.wait_until(lambda: self._has_leaders(name, set(full)), timeout_ms):
            return ErrorCode.REQUEST_TIMED_OUT, None
        return ErrorCode.NONE, None

    # -- topic configs ------------------------------------------------------------------------
    async def alter_topic_configs(self, name: str, configs: dict[str, Optional[str]],
                                  validate_only: bool) -> tuple[ErrorCode, Optional[str]]:
        """Replace the topic's overrides (/config/topics/<t>) and notify every broker through
        /config/changes; each applies it to its logs when the notification reaches it."""
        if not await self.zk.topic_exists(name):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        try:
            overrides, _cfg = validate_topic_log_config(self.default_log_config, configs)
        except InvalidTopicConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e)
        if not validate_only:
            await self.zk.set_or_create_entity_configs("topics", name, overrides)
            await self.zk.create_config_change_notification(f"topics/{name}")
            log.info("Updated configs of topic %s: %s", name, overrides)
            warning = message_format_version_warning(name, overrides["message.format.version"]) \
                if "message.format.version" in overrides else None
            if warning is not None:
                log.warning(warning)
        return ErrorCode.NONE, None

