"""DescribeConfigs' view of configuration: values, sources and synonyms as Kafka reports them.

Kafka (ConfigHelper) reports a topic config as the first of its synonyms: the topic override
(DYNAMIC_TOPIC_CONFIG), then the broker config it defaults to — looked up as dynamic per-broker,
dynamic cluster default, static (server.properties) and built-in default, each source in the
broker synonyms' order (`log.retention.ms`, `log.retention.minutes`, `log.retention.hours`) — and
finally drops every synonym before the first one named like the primary broker key. So a topic
whose retention comes from `log.retention.hours` shows `retention.ms` with source DEFAULT_CONFIG
and no synonyms, exactly as Kafka does.

Broker configs are looked up in the same order: DYNAMIC_BROKER_CONFIG (set with AlterConfigs on
this broker's id), DYNAMIC_DEFAULT_BROKER_CONFIG (on the cluster default, resource name ""),
STATIC_BROKER_CONFIG (server.properties or --override), DEFAULT_CONFIG. A broker config is
read-only unless it is among Kafka's dynamic ones (`dynamic_broker_config.ALL_DYNAMIC_CONFIGS`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from kafkalite.config.dynamic_broker_config import ALL_DYNAMIC_CONFIGS, DynamicBrokerConfig, static_properties
from kafkalite.config.kafka_config_def import KAFKA_BROKER_CONFIG_TYPES, KAFKA_DYNAMIC_DEFAULTS
from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS, LogConfig
from kafkalite.config.server_config import FIELD_TO_ALIAS, IGNORED_SETTINGS, KafkaConfig
from kafkalite.config.topic_config import (TOPIC_CONFIG_DOCS, config_type, effective_topic_configs,
                                           render_value)

# DescribeConfigsResponse.ConfigSource
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

LONG_MAX = 2**63 - 1

# Topic config -> broker configs it defaults to, highest precedence first (3.x
# ServerTopicConfigSynonyms). Topic configs absent here have no broker default.
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "message.format.version": ("log.message.format.version",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
}

# Broker-level synonyms kafkalite does not read from server.properties (the keys are accepted and
# ignored, or unknown): their built-in defaults are what every topic gets.
_UNREAD_BROKER_DEFAULTS: dict[str, str] = {
    "log.message.timestamp.difference.max.ms": str(LONG_MAX),
    "log.message.downconversion.enable": "true",
    # ignored by a 3.x broker (inter.broker.protocol.version >= 3.0), which then reports this value
    "log.message.format.version": "3.0-IV1",
    "log.local.retention.ms": "-2",
    "log.local.retention.bytes": "-2",
}

# Kafka's ConfigDef type of broker configs whose Python annotation does not say it.
_BROKER_TYPE_OVERRIDES = {"log.cleanup.policy": "LIST"}
_ANNOTATION_TYPES = {"Int": "INT", "OptInt": "INT", "Long": "LONG", "OptLong": "LONG", "Short": "SHORT",
                     "Bool": "BOOLEAN", "Double": "DOUBLE"}

# Documentation (DescribeConfigs v3+) of broker configs that are not topic-config synonyms.
BROKER_CONFIG_DOCS: dict[str, str] = {
    "broker.id": "This broker's id (kafkalite: 0 unless set).",
    "listeners": "Addresses the broker listens on, as NAME://host:port (PLAINTEXT only).",
    "advertised.listeners": "Addresses given to clients in Metadata; defaults to listeners.",
    "log.dirs": "Directories holding the partition logs; without zookeeper.connect the first also holds the cluster metadata (kafkalite-zk.json and its transaction log kafkalite-zk.log).",
    "log.dir": "Log directory used when log.dirs is not set.",
    "num.partitions": "Partition count of topics created without one.",
    "default.replication.factor": "Replication factor of topics created without one.",
    "auto.create.topics.enable": "Whether Metadata requests create unknown topics.",
    "delete.topic.enable": "Whether DeleteTopics may delete topics.",
    "log.retention.check.interval.ms": "How often retention checks every partition's log.",
    "log.flush.offset.checkpoint.interval.ms": "How often recovery points are checkpointed.",
    "log.flush.start.offset.checkpoint.interval.ms": "How often log start offsets are checkpointed.",
    "socket.request.max.bytes": "Largest request frame accepted; larger frames close the connection.",
    "socket.send.buffer.bytes": "SO_SNDBUF of client sockets (-1: the OS default).",
    "socket.receive.buffer.bytes": "SO_RCVBUF of client sockets (-1: the OS default).",
    "socket.listen.backlog.size": "Length of each listening socket's queue of connections not yet accepted (kafkalite: at least 1024).",
    "fetch.max.bytes": "Largest response a Fetch request may get; smaller max_bytes in the request win.",
    "max.incremental.fetch.session.cache.slots": "Number of incremental fetch sessions kept.",
    "offsets.topic.num.partitions": "Partition count of __consumer_offsets.",
    "offsets.retention.minutes": "How long committed offsets of an empty group are kept.",
    "group.initial.rebalance.delay.ms": "Delay of the first rebalance of a new group.",
    "group.min.session.timeout.ms": "Smallest session timeout a consumer may ask for.",
    "group.max.session.timeout.ms": "Largest session timeout a consumer may ask for.",
}


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: Optional[str]
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: Optional[str]
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]   # all of them; the handler drops them unless asked
    config_type: str                      # Kafka's ConfigDef type name
    documentation: Optional[str]


def broker_log_config(config: KafkaConfig) -> LogConfig:
    """The broker-level defaults of every topic's LogConfig, including the topic configs whose
    broker synonyms `KafkaConfig.log_config()` does not carry."""
    return config.log_config().with_overrides(
        compression_type=config.compression_type,
        unclean_leader_election_enable=config.unclean_leader_election_enable,
        message_timestamp_before_max_ms=config.log_message_timestamp_before_max_ms,
        message_timestamp_after_max_ms=config.log_message_timestamp_after_max_ms,
    )


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """DynamicBrokerConfig.brokerConfigSynonyms: the keys one broker setting may be given as."""
    if name in ("log.roll.ms", "log.roll.hours"):
        return ("log.roll.ms", "log.roll.hours")
    if name in ("log.roll.jitter.ms", "log.roll.jitter.hours"):
        return ("log.roll.jitter.ms", "log.roll.jitter.hours")
    if name == "log.flush.interval.ms":
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    if name in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
        return ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
    return (name,)


def _render(value: object) -> Optional[str]:
    return None if value is None else render_value(value)


class BrokerConfigView:
    """The broker's configuration as DescribeConfigs sees it: the static config, and the dynamic
    configs of `dynamic` (if given) as they are at each call."""

    def __init__(self, config: KafkaConfig, dynamic: Optional[DynamicBrokerConfig] = None) -> None:
        self.config = config
        self.dynamic = dynamic
        fields = type(config).model_fields
        # what server.properties / --override set (pydantic knows which fields were given)
        self.static: dict[str, str] = static_properties(config)
        # built-in defaults; a null default is absent (ConfigDef.convertToStringMapWithPasswordValues)
        self.defaults: dict[str, str] = dict(_UNREAD_BROKER_DEFAULTS)
        self.defaults.update({k: v for k, v in KAFKA_DYNAMIC_DEFAULTS.items() if v is not None})
        for name, info in fields.items():
            rendered = _render(info.default)
            if rendered is not None:
                self.defaults[FIELD_TO_ALIAS[name]] = rendered

    @property
    def dynamic_broker(self) -> dict[str, str]:
        return self.dynamic.dynamic_broker if self.dynamic is not None else {}

    @property
    def dynamic_default(self) -> dict[str, str]:
        return self.dynamic.dynamic_default if self.dynamic is not None else {}

    @property
    def current(self) -> dict[str, Optional[str]]:
        """Every broker config kafkalite lists, with its current value: its own settings, and
        Kafka's dynamic configs it has no setting for."""
        config = self.dynamic.current if self.dynamic is not None else self.config
        out: dict[str, Optional[str]] = {
            FIELD_TO_ALIAS[name]: _render(getattr(config, name)) for name in type(config).model_fields}
        for name, default in KAFKA_DYNAMIC_DEFAULTS.items():
            out[name] = self.dynamic.value_of(name) if self.dynamic is not None else self.static.get(name, default)
        return out

    def synonyms(self, name: str, names: Iterable[str]) -> list[ConfigSynonym]:
        """ConfigHelper.configSynonyms: dynamic per-broker, dynamic default, static, default,
        each in the synonyms' order; then everything before the first entry called `name` is
        dropped."""
        names = tuple(names)
        out: list[ConfigSynonym] = []
        for source, values in ((SOURCE_DYNAMIC_BROKER_CONFIG, self.dynamic_broker),
                               (SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
                               (SOURCE_STATIC_BROKER_CONFIG, self.static),
                               (SOURCE_DEFAULT_CONFIG, self.defaults)):
            sensitive = is_sensitive(name)
            out += [ConfigSynonym(n, None if sensitive else values[n], source) for n in names if n in values]
        for i, s in enumerate(out):
            if s.name == name:
                return out[i:]
        return []

    # -- topics --------------------------------------------------------------------------------
    def topic_entry(self, key: str, value: Optional[str], overrides: dict[str, str]) -> ConfigEntry:
        """One topic config (ConfigHelper.createTopicConfigEntry); `value` is the effective one."""
        primary = TOPIC_CONFIG_SYNONYMS.get(key, ())
        synonyms = self.synonyms(primary[0], broker_config_synonyms(primary[0])) if primary else []
        # a broker default kafkalite accepts but does not apply (log.local.retention.ms, ...) is
        # not this topic's: its value stays the built-in one
        ignored = self.config.unmodelled_static
        synonyms = [s for s in synonyms if not (s.source == SOURCE_STATIC_BROKER_CONFIG and s.name in ignored)]
        if key in overrides:
            synonyms.insert(0, ConfigSynonym(key, value, SOURCE_DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else SOURCE_DEFAULT_CONFIG
        return ConfigEntry(key, value, source, read_only=False, is_sensitive=False, synonyms=tuple(synonyms),
                           config_type=config_type(key), documentation=TOPIC_CONFIG_DOCS.get(key))

    def topic_entries(self, log_config: LogConfig, overrides: dict[str, str],
                      keys: Optional[Iterable[str]] = None) -> list[ConfigEntry]:
        """Every topic config of a topic (or those of `keys` that exist), sorted by name."""
        values = effective_topic_configs(log_config)
        wanted = sorted(values) if not keys else [k for k in sorted(set(keys)) if k in values]
        return [self.topic_entry(k, values[k], overrides) for k in wanted]

    # -- the broker ----------------------------------------------------------------------------
    def broker_entry(self, name: str, value: Optional[str], per_broker: bool = True) -> ConfigEntry:
        """One broker config (ConfigHelper.createBrokerConfigEntry); the cluster-default resource
        keeps only DYNAMIC_DEFAULT_BROKER_CONFIG synonyms."""
        synonyms = self.synonyms(name, broker_config_synonyms(name))
        if not per_broker:
            synonyms = [s for s in synonyms if s.source == SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0].source if synonyms else SOURCE_DEFAULT_CONFIG
        sensitive = is_sensitive(name)
        return ConfigEntry(name, None if sensitive else value, source, read_only=name not in ALL_DYNAMIC_CONFIGS,
                           is_sensitive=sensitive, synonyms=tuple(synonyms), config_type=broker_config_type(name),
                           documentation=broker_documentation(name))

    def broker_entries(self, keys: Optional[Iterable[str]] = None) -> list[ConfigEntry]:
        """Resource BROKER "<this broker's id>": every broker config."""
        current = self.current
        names = sorted(current) if not keys else [k for k in sorted(set(keys)) if k in current]
        return [self.broker_entry(n, current[n]) for n in names]

    def default_entries(self, keys: Optional[Iterable[str]] = None) -> list[ConfigEntry]:
        """Resource BROKER "": the dynamic cluster-wide defaults only."""
        values = self.dynamic_default
        names = sorted(values) if not keys else [k for k in sorted(set(keys)) if k in values]
        return [self.broker_entry(n, values[n], per_broker=False) for n in names]


def is_sensitive(name: str) -> bool:
    """KafkaConfig.maybeSensitive: PASSWORD configs (and ones of unknown type) hide their value."""
    return KAFKA_BROKER_CONFIG_TYPES.get(name) == "PASSWORD"


def broker_config_type(name: str) -> str:
    if name in _BROKER_TYPE_OVERRIDES:
        return _BROKER_TYPE_OVERRIDES[name]
    field = next((f for f, a in FIELD_TO_ALIAS.items() if a == name), None)
    if field is None:
        return KAFKA_BROKER_CONFIG_TYPES.get(name, "UNKNOWN")
    annotation = KafkaConfig.__annotations__.get(field, "")
    return _ANNOTATION_TYPES.get(str(annotation), "STRING")


_TOPIC_KEY_OF_BROKER_KEY = {b: t for t, names in TOPIC_CONFIG_SYNONYMS.items() for b in names}


def broker_documentation(name: str) -> Optional[str]:
    if name in IGNORED_SETTINGS:
        return f"Accepted and ignored by kafkalite: {IGNORED_SETTINGS[name]}."
    if name in BROKER_CONFIG_DOCS:
        return BROKER_CONFIG_DOCS[name]
    topic_key = _TOPIC_KEY_OF_BROKER_KEY.get(name)
    if topic_key is not None:
        return f"Broker default of the topic config {topic_key}: {TOPIC_CONFIG_DOCS[topic_key]}"
    return None


def is_topic_config(name: str) -> bool:
    return name in TOPIC_CONFIG_ATTRS
