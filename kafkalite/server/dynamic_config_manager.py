"""DynamicConfigManager: topic and broker config overrides in ZooKeeper mode, kept in step on every
broker (Kafka's DynamicConfigManager / ZkConfigRepository).

The overrides live in /config/topics/<t> and /config/brokers/<id|<default>>; a change is announced
by a sequential /config/changes/config_change_<n> naming the entity. Every broker watches that
directory and, for each notification newer than the last it processed, re-reads the entity and
applies it: new LogConfigs for the topic's logs, or the dynamic broker configs reloaded. Reads
that must be synchronous (a LogConfig for a log being created, the stored dynamic configs an
AlterConfigs starts from) come from the cache this class keeps; writes go to ZooKeeper first and
are awaited (`flush`) before the request that made them is answered.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from kafkalite.config.dynamic_broker_config import DEFAULT_ENTITY, DynamicBrokerConfig, dynamic_props_from_store
from kafkalite.config.log_config import LogConfig
from kafkalite.config.topic_config import topic_log_config
from kafkalite.controller.zk import znodes
from kafkalite.controller.zk.kafka_zk_client import KafkaZkClient
from kafkalite.controller.zk.znode_store import ZNodeStore

log = logging.getLogger(__name__)


class DynamicConfigManager:
    def __init__(self, broker_id: int, store: ZNodeStore, zk: KafkaZkClient, dynamic_config: DynamicBrokerConfig,
                 default_log_config: Callable[[], LogConfig],
                 apply_topic_config: Callable[[str, LogConfig], None]) -> None:
        self.broker_id = broker_id
        self.store = store
        self.zk = zk
        self.dynamic_config = dynamic_config
        self.default_log_config = default_log_config
        self.apply_topic_config = apply_topic_config
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.broker_configs_cache: dict[str, dict[str, str]] = {}
        self._last_processed = -1
        self._pending: list[asyncio.Task[None]] = []
        self._processing = asyncio.Lock()

    # -- start-up ------------------------------------------------------------------------------
    async def load(self) -> None:
        """Every topic's overrides and this broker's two levels of dynamic configs, before the
        broker starts (Kafka reads them in KafkaServer.startup)."""
        topics = await self.zk.get_all_entities_with_config(znodes.CONFIG_TYPE_TOPIC)
        self.topic_configs = await self.zk.get_entities_configs(znodes.CONFIG_TYPE_TOPIC, topics)
        for entity in (DEFAULT_ENTITY, str(self.broker_id)):
            self.broker_configs_cache[entity] = await self.zk.get_entity_configs(znodes.CONFIG_TYPE_BROKER, entity)
        # notifications older than now are reflected in what was just read
        self._last_processed = max((self._sequence(n) for n in await self.zk.get_config_change_notifications()),
                                   default=-1)

    def start(self) -> None:
        self.store.watch_children(znodes.CONFIG_CHANGES_PATH, self._on_notifications)

    def stop(self) -> None:
        self.store.unwatch(znodes.CONFIG_CHANGES_PATH)

    # -- reads ---------------------------------------------------------------------------------
    def topic_log_config(self, topic: str) -> LogConfig:
        return topic_log_config(self.default_log_config(), self.topic_configs.get(topic, {}))

    async def prefetch_topic_configs(self, topics: Iterable[str]) -> None:
        """Read the overrides of topics not seen yet (a topic created through another broker has
        no change notification: its config is read when its logs are created, as Kafka does)."""
        missing = [t for t in dict.fromkeys(topics) if t not in self.topic_configs]
        if missing:
            self.topic_configs.update(await self.zk.get_entities_configs(znodes.CONFIG_TYPE_TOPIC, missing))

    def forget_topic(self, topic: str) -> None:
        self.topic_configs.pop(topic, None)

    # -- the BrokerConfigStore of DynamicBrokerConfig -----------------------------------------
    def broker_configs(self, entity: str) -> dict[str, str]:
        return dict(self.broker_configs_cache.get(entity, {}))

    def update_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        self.broker_configs_cache[entity] = dict(configs)
        self._pending.append(asyncio.get_running_loop().create_task(
            self._write(znodes.CONFIG_TYPE_BROKER, entity, dict(configs))))

    async def _write(self, entity_type: str, entity: str, configs: dict[str, str]) -> None:
        await self.zk.set_or_create_entity_configs(entity_type, entity, configs)
        await self.zk.create_config_change_notification(f"{entity_type}/{entity}")

    async def flush(self) -> None:
        """Wait for the writes made by `update_broker_configs` (errors raise here)."""
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)

    # -- notifications -------------------------------------------------------------------------
    @staticmethod
    def _sequence(name: str) -> int:
        try:
            return int(znodes.sequence_number(name, znodes.CONFIG_CHANGE_PREFIX))
        except (ValueError, TypeError):
            return -1

    def _on_notifications(self) -> None:
        asyncio.get_running_loop().create_task(self._process_notifications())

    async def _process_notifications(self) -> None:
        async with self._processing:
            try:
                names = sorted(await self.zk.get_config_change_notifications(), key=self._sequence)
            except Exception as e:
                log.warning("could not read config change notifications: %s", e)
                return
            for name in names:
                seq = self._sequence(name)
                if seq <= self._last_processed:
                    continue
                try:
                    found = await self.zk.get_config_change_notification(name)
                    if found is not None:
                        await self._process_entity(found[0])
                except Exception:
                    log.exception("Error processing config change notification %s", name)
                self._last_processed = seq

    async def _process_entity(self, entity_path: str) -> None:
        entity_type, _, entity = entity_path.partition("/")
        if entity_type == znodes.CONFIG_TYPE_TOPIC:
            configs = await self.zk.get_entity_configs(entity_type, entity)
            self.topic_configs[entity] = configs
            log.info("Processing override for entityPath: %s with config: %s", entity_path, configs)
            self.apply_topic_config(entity, self.topic_log_config(entity))
        elif entity_type == znodes.CONFIG_TYPE_BROKER and entity in (DEFAULT_ENTITY, str(self.broker_id)):
            configs = await self.zk.get_entity_configs(entity_type, entity)
            if configs == self.broker_configs_cache.get(entity):
                return   # this broker's own change, already applied
            self.broker_configs_cache[entity] = configs
            per_broker = entity != DEFAULT_ENTITY
            log.info("Processing override for entityPath: %s", entity_path)
            self.dynamic_config.update(dynamic_props_from_store(configs, per_broker=per_broker), per_broker)
        else:
            log.debug("Ignoring config change for %s (not modelled by kafkalite)", entity_path)
