"""Dynamic broker configuration, as Kafka 3.9's DynamicBrokerConfig implements it.

Broker configs may be changed at run time at two levels, stored in the metadata store as Kafka
stores them in ZooKeeper (`/config/brokers/<id>` and `/config/brokers/<default>`, each a map of
strings): per broker (AlterConfigs on resource BROKER "<id>") and as cluster-wide defaults
(resource BROKER ""). A config's value is the first of: DYNAMIC_BROKER_CONFIG, then
DYNAMIC_DEFAULT_BROKER_CONFIG, then STATIC_BROKER_CONFIG (server.properties / --override), then
DEFAULT_CONFIG.

Only Kafka's reconfigurable configs may be set (`ALL_DYNAMIC_CONFIGS`); any other key Kafka's
KafkaConfig defines is refused ("Cannot update these configs dynamically"), and a key Kafka does
not know is accepted as a custom config, as Kafka does. Validation runs in Kafka's order with
Kafka's messages: non-dynamic keys, SSL keystore/truststore keys without a listener prefix,
ConfigDef types and validators, per-broker-only keys at the cluster-default level, KafkaConfig's
own requirements on the merged config, and finally each reconfigurable's check (thread counts
may at most double or halve, the log cleaner's threads likewise).

`DynamicBrokerConfig` keeps the static config, both dynamic maps and the current effective
`KafkaConfig`; after every change it calls the registered reconfigure callbacks with the old and
the new config, which is how the broker applies a change without a restart.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from kafkalite.config.kafka_config_def import KAFKA_BROKER_CONFIG_TYPES, KAFKA_DYNAMIC_DEFAULTS
from kafkalite.config.properties import java_trim
from kafkalite.config.server_config import (ALIAS_TO_FIELD, FIELD_TO_ALIAS, ConfigError, KafkaConfig,
                                            build_config)

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"      # ZooKeeperInternals.DEFAULT_STRING

# -- Kafka's sets of reconfigurable configs -----------------------------------------------------

# SslConfigs.RECONFIGURABLE_CONFIGS: updatable only with a listener prefix
DYNAMIC_SECURITY_CONFIGS: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
# LogCleaner.ReconfigurableConfigs
LOG_CLEANER_CONFIGS: frozenset[str] = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms"})
# DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of every topic config
# (ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS) but message.format.version's
LOG_CONFIGS: frozenset[str] = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "message.max.bytes", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.downconversion.enable", "log.local.retention.ms",
    "log.local.retention.bytes"})
# DynamicThreadPool.ReconfigurableConfigs
THREAD_POOL_CONFIGS: tuple[str, ...] = (
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads")
# DynamicListenerConfig.ReconfigurableConfigs
LISTENER_CONFIGS: frozenset[str] = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
# SocketServer.ReconfigurableConfigs
SOCKET_SERVER_CONFIGS: frozenset[str] = frozenset({
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections", "max.connection.creation.rate"})
PRODUCER_STATE_CONFIGS: frozenset[str] = frozenset({
    "producer.id.expiration.ms", "transaction.partition.verification.enable"})
REMOTE_LOG_CONFIGS: frozenset[str] = frozenset({
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second"})

ALL_DYNAMIC_CONFIGS: frozenset[str] = (DYNAMIC_SECURITY_CONFIGS | LOG_CLEANER_CONFIGS | LOG_CONFIGS
                                       | frozenset(THREAD_POOL_CONFIGS) | {"metric.reporters"} | LISTENER_CONFIGS
                                       | SOCKET_SERVER_CONFIGS | PRODUCER_STATE_CONFIGS | REMOTE_LOG_CONFIGS)
CLUSTER_LEVEL_LISTENER_CONFIGS: frozenset[str] = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
# settable only on a broker id, never as a cluster-wide default
PER_BROKER_CONFIGS: frozenset[str] = (DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
# QuotaConfigs.brokerQuotaConfigs: dynamic too (not KafkaConfig keys; LONG, at least 0)
BROKER_QUOTA_CONFIGS: frozenset[str] = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second"})
NON_DYNAMIC_CONFIGS: frozenset[str] = frozenset(KAFKA_BROKER_CONFIG_TYPES) - ALL_DYNAMIC_CONFIGS - BROKER_QUOTA_CONFIGS

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
# `listener.name.<l>.<mechanism>.<config>` keys of SASL configs (DynamicBrokerConfig.ListenerMechanismConfigs)
_LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                               "sasl.server.callback.handler.class", "connections.max.reauth.ms")

# ConfigDef validators of the dynamic configs (Range.atLeast / between, ValidString, ValidList)
_AT_LEAST: dict[str, int] = {
    "message.max.bytes": 0, "num.io.threads": 1, "background.threads": 1, "num.network.threads": 1,
    "num.recovery.threads.per.data.dir": 1, "max.connections.per.ip": 0, "max.connections": 0,
    "max.connection.creation.rate": 0, "log.cleaner.threads": 0, "log.cleaner.io.buffer.size": 0,
    "log.cleaner.backoff.ms": 0, "log.cleaner.delete.retention.ms": 0, "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": 1, "log.segment.bytes": 14, "log.index.size.max.bytes": 4,
    "log.index.interval.bytes": 0, "log.flush.interval.messages": 1, "log.segment.delete.delay.ms": 0,
    "min.insync.replicas": 1, "log.message.timestamp.difference.max.ms": 0,
    "log.message.timestamp.before.max.ms": 0, "log.message.timestamp.after.max.ms": 0,
    "producer.id.expiration.ms": 1, "log.local.retention.ms": -2, "log.local.retention.bytes": -2,
    "leader.replication.throttled.rate": 0, "follower.replication.throttled.rate": 0,
    "replica.alter.log.dirs.io.max.bytes.per.second": 0}
_BETWEEN: dict[str, tuple[int, int]] = {"log.cleaner.min.cleanable.ratio": (0, 1)}
_ONE_OF: dict[str, tuple[str, ...]] = {
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "log.message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "log.cleanup.policy": ("compact", "delete"),
}
_BOUNDS = {"INT": (-2**31, 2**31 - 1), "SHORT": (-2**15, 2**15 - 1), "LONG": (-2**63, 2**63 - 1)}
_INTEGER = re.compile(r"[+-]?\d+")
_DOUBLE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?")



class DynamicConfigError(ValueError):
    """A refused dynamic config update; `str()` is Kafka's message (ConfigException or
    IllegalArgumentException text), which Kafka sends as INVALID_REQUEST."""


class PasswordConfigError(ValueError):
    """A password config that cannot be stored: Kafka encrypts dynamic passwords with
    `password.encoder.secret`, which kafkalite does not have. Raised only when storing (after
    validation), where Kafka answers INVALID_CONFIG "Invalid config value for resource ...: ..."."""


# DynamicBrokerConfig.DynamicPasswordConfigs: the dynamic configs of type PASSWORD
DYNAMIC_PASSWORD_CONFIGS: frozenset[str] = frozenset(
    k for k in ALL_DYNAMIC_CONFIGS if KAFKA_BROKER_CONFIG_TYPES.get(k) == "PASSWORD")


def is_password_config(name: str) -> bool:
    """DynamicBrokerConfig.isPasswordConfig (listener-prefixed names included)."""
    return any(name.endswith(p) for p in DYNAMIC_PASSWORD_CONFIGS)


# -- Java/Scala renderings the messages depend on -----------------------------------------------

def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a java.util.Properties holding `keys` (inserted in this order):
    a ConcurrentHashMap of initial capacity 8, so bins by spread hash, insertion order within
    a bin. Kafka lists offending config names in this order."""
    ks = list(dict.fromkeys(keys))
    n = 16
    while len(ks) > n - (n >> 2):
        n *= 2

    def bin_of(k: str) -> int:
        h = java_string_hash(k)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (n - 1)
    return sorted(ks, key=lambda k: (bin_of(k), ks.index(k)))


def scala_set(names: list[str], mutable: bool = False) -> str:
    """How Scala prints a Set: Set(a, b) up to four elements, HashSet(...) beyond (or always
    for a mutable set)."""
    kind = "HashSet" if mutable or len(names) > 4 else "Set"
    return f"{kind}({', '.join(names)})"


# -- ConfigDef parsing of one dynamic config ----------------------------------------------------

def base_config_name(name: str) -> str:
    """`listener.name.<l>.<config>` is validated as `<config>`."""
    m = _LISTENER_CONFIG.fullmatch(name)
    return m.group(1) if m else name


def config_type(name: str) -> Optional[str]:
    if name in BROKER_QUOTA_CONFIGS:
        return "LONG"
    return KAFKA_BROKER_CONFIG_TYPES.get(name)


def _number_text(value: float | int) -> str:
    return str(value)


def check_config_value(name: str, raw: str) -> None:
    """ConfigDef.parseType + the key's validator; raises DynamicConfigError with Kafka's message."""
    ctype = config_type(name)
    if ctype is None:
        return                                  # a custom config: anything goes
    value = java_trim(raw)

    def fail(why: str, shown: object = raw) -> DynamicConfigError:
        return DynamicConfigError(f"Invalid value {shown} for configuration {name}: {why}")

    number: Optional[float | int] = None
    if ctype in _BOUNDS:
        low, high = _BOUNDS[ctype]
        if not _INTEGER.fullmatch(value) or not low <= int(value) <= high:
            raise fail(f"Not a number of type {ctype}")
        number = int(value)
    elif ctype == "DOUBLE":
        if not _DOUBLE.fullmatch(value):
            raise fail("Not a number of type DOUBLE")
        number = float(value.rstrip("dDfF"))
    elif ctype == "BOOLEAN":
        if value.lower() not in ("true", "false"):
            raise fail("Expected value to be either true or false")
    if name in _AT_LEAST and number is not None and number < _AT_LEAST[name]:
        raise fail(f"Value must be at least {_AT_LEAST[name]}", _number_text(number))
    if name in _BETWEEN and number is not None:
        low, high = _BETWEEN[name]
        if number < low:
            raise fail(f"Value must be at least {low}", _number_text(number))
        if number > high:
            raise fail(f"Value must be no more than {high}", _number_text(number))
    if name in _ONE_OF:
        allowed = _ONE_OF[name]
        items = [p.strip() for p in value.split(",")] if ctype == "LIST" and value else [value]
        for item in items:
            if item not in allowed:
                raise fail(f"String must be one of: {', '.join(allowed)}", item)


def validate_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """DynamicBrokerConfig.validateConfigs: what may be set at this level, and value types."""
    ordered = java_properties_order(props)
    non_dynamic = [k for k in ordered if k in NON_DYNAMIC_CONFIGS]
    if non_dynamic:
        raise DynamicConfigError(f"Cannot update these configs dynamically: {scala_set(non_dynamic)}")
    unprefixed = [k for k in sorted(DYNAMIC_SECURITY_CONFIGS) if k in props]
    if unprefixed:
        raise DynamicConfigError("These security configs can be dynamically updated only per-listener using "
                                 f"the listener prefix: {scala_set(unprefixed, mutable=True)}")
    for k in ordered:
        check_config_value(base_config_name(k), props[k])
    if not per_broker:
        per_broker_only = [k for k in ordered if k in PER_BROKER_CONFIGS]
        per_broker_only += [k for k in ordered if _LISTENER_CONFIG.fullmatch(k)
                            and base_config_name(k) not in CLUSTER_LEVEL_LISTENER_CONFIGS]
        if per_broker_only:
            raise DynamicConfigError("Cannot update these configs at default cluster level, broker id must be "
                                     f"specified: {scala_set(list(dict.fromkeys(per_broker_only)))}")


def dynamic_props_from_store(stored: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    """DynamicBrokerConfig.fromPersistentProps: what a stored entity contributes; invalid,
    non-dynamic and (at the default level) per-broker keys are ignored with an error logged."""
    props = dict(stored)
    for k, v in list(props.items()):
        try:
            check_config_value(base_config_name(k), v)
        except DynamicConfigError as e:
            log.error("Dynamic %s config contains an invalid value, ignored: %s", "broker" if per_broker
                      else "default cluster", e)
            del props[k]
    for k in [k for k in props if k in NON_DYNAMIC_CONFIGS or k in DYNAMIC_SECURITY_CONFIGS]:
        log.error("Non-dynamic config %s stored as a dynamic config is ignored", k)
        del props[k]
    if not per_broker:
        for k in [k for k in props if k in PER_BROKER_CONFIGS or (
                _LISTENER_CONFIG.fullmatch(k) and base_config_name(k) not in CLUSTER_LEVEL_LISTENER_CONFIGS)]:
            log.error("Per-broker config %s defined at default cluster level is ignored", k)
            del props[k]
    return props


# -- the merged config and its requirements -----------------------------------------------------

def static_properties(config: KafkaConfig) -> dict[str, str]:
    """The keys server.properties / --override set, rendered as Kafka shows them."""
    from kafkalite.config.topic_config import render_value
    out: dict[str, str] = config.unmodelled_static
    for name in config.model_fields_set:
        value = getattr(config, name)
        if value is not None:
            out[FIELD_TO_ALIAS[name]] = render_value(value)
    return out


def _int_of(props: Mapping[str, str], key: str) -> Optional[int]:
    v = props.get(key)
    return None if v is None else int(java_trim(v))


def _effective_ms(props: Mapping[str, str], keys: tuple[tuple[str, int], ...], default: int) -> int:
    """KafkaConfig's ms/minutes/hours precedence: the first key set, times its unit."""
    for key, unit in keys:
        value = _int_of(props, key)
        if value is not None:
            return value * unit
    return default


def check_kafka_config_requirements(props: Mapping[str, str]) -> None:
    """The requirements of Kafka's KafkaConfig.validateValues a dynamic update can break, in its
    order and words (IllegalArgumentException "requirement failed: ...", or the ArithmeticException
    of dividing by zero log cleaner threads). `props` are type-checked already."""
    hour, minute = 3_600_000, 60_000
    roll = _effective_ms(props, (("log.roll.ms", 1), ("log.roll.hours", hour)), 168 * hour)
    if roll < 1:
        raise DynamicConfigError("requirement failed: log.roll.ms must be greater than or equal to 1")
    jitter = _effective_ms(props, (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", hour)), 0)
    if jitter < 0:
        raise DynamicConfigError("requirement failed: log.roll.jitter.ms must be greater than or equal to 0")
    retention = _effective_ms(props, (("log.retention.ms", 1), ("log.retention.minutes", minute),
                                      ("log.retention.hours", hour)), 168 * hour)
    if retention == 0:
        raise DynamicConfigError("requirement failed: log.retention.ms must be unlimited (-1) or, greater than "
                                 "or equal to 1")
    threads = _int_of(props, "log.cleaner.threads")
    threads = 1 if threads is None else threads
    if threads == 0:
        raise DynamicConfigError("/ by zero")
    dedupe = _int_of(props, "log.cleaner.dedupe.buffer.size")
    dedupe = 128 * 1024 * 1024 if dedupe is None else dedupe
    if int(dedupe / threads) <= 1024 * 1024:      # Java's long division truncates towards zero
        raise DynamicConfigError("requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per "
                                 "cleaner thread.")


def thread_count(config_props: Mapping[str, str], config: KafkaConfig, name: str) -> int:
    if name in ALIAS_TO_FIELD:
        return int(getattr(config, ALIAS_TO_FIELD[name]))
    value = _int_of(config_props, name)
    return value if value is not None else int(KAFKA_DYNAMIC_DEFAULTS[name] or 0)


def _reconfiguration_error(inner: str) -> DynamicConfigError:
    """processReconfiguration wraps a reconfigurable's refusal as
    ConfigException("Invalid dynamic configuration", e), i.e. ConfigException(name, value)."""
    return DynamicConfigError("Invalid value org.apache.kafka.common.config.ConfigException: "
                              f"{inner} for configuration Invalid dynamic configuration")


@dataclass(frozen=True)
class EffectiveConfig:
    props: dict[str, str]       # static, then dynamic default, then dynamic per-broker
    config: KafkaConfig


Reconfigure = Callable[[KafkaConfig, KafkaConfig], None]


class BrokerConfigStore(Protocol):
    """Where the dynamic configs live (the metadata store: Kafka's /config/brokers/<entity>)."""

    def broker_configs(self, entity: str) -> dict[str, str]: ...

    def update_broker_configs(self, entity: str, configs: dict[str, str]) -> None: ...


class DynamicBrokerConfig:
    """The broker's configuration as it changes at run time (Kafka's DynamicBrokerConfig)."""

    def __init__(self, static_config: KafkaConfig, broker_id: int, log_cleaner_enabled: bool = True) -> None:
        self.static_config = static_config
        self.broker_id = broker_id
        self.static_props = static_properties(static_config)
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}
        self.current = static_config
        self.current_props = dict(self.static_props)
        self.log_cleaner_enabled = log_cleaner_enabled
        self._reconfigurables: list[tuple[frozenset[str], Reconfigure]] = []
        self.store: Any = None

    # -- wiring ------------------------------------------------------------------------------
    def entity(self, per_broker: bool) -> str:
        return str(self.broker_id) if per_broker else DEFAULT_ENTITY

    def load(self, store: BrokerConfigStore) -> None:
        """Start-up: read both levels from the store and apply them before anything reads the
        config (Kafka's DynamicBrokerConfig.initialize)."""
        self.store = store
        self.initialize(store.broker_configs(DEFAULT_ENTITY), store.broker_configs(str(self.broker_id)))

    def add_reconfigurable(self, configs: Iterable[str], reconfigure: Reconfigure) -> None:
        """`reconfigure(old, new)` runs after any of `configs` changed (BrokerReconfigurable)."""
        self._reconfigurables.append((frozenset(configs), reconfigure))

    def initialize(self, stored_default: Mapping[str, str], stored_broker: Mapping[str, str]) -> None:
        """Start-up: the stored dynamic configs apply before anything reads the config."""
        self.dynamic_default = dynamic_props_from_store(stored_default, per_broker=False)
        self.dynamic_broker = dynamic_props_from_store(stored_broker, per_broker=True)
        try:
            effective = self._effective(self.dynamic_default, self.dynamic_broker)
        except DynamicConfigError as e:
            log.error("Stored dynamic broker configs could not be applied: %s", e)
            self.dynamic_default, self.dynamic_broker = {}, {}
            return
        self.current, self.current_props = effective.config, effective.props

    # -- the merged view -----------------------------------------------------------------------
    def _effective(self, default: Mapping[str, str], broker: Mapping[str, str]) -> EffectiveConfig:
        props = dict(self.static_props)
        props.update(default)
        props.update(broker)
        check_kafka_config_requirements(props)
        try:
            config = build_config(props).config
        except ConfigError as e:
            raise DynamicConfigError(str(e)) from None
        return EffectiveConfig(props, config)

    def _check_reconfigurables(self, new: EffectiveConfig) -> None:
        """Each changed reconfigurable's validateReconfiguration, against the current config."""
        changed = {k for k in set(new.props) | set(self.current_props) if new.props.get(k) != self.current_props.get(k)}
        if not changed:
            return
        for name in THREAD_POOL_CONFIGS:
            old_n = thread_count(self.current_props, self.current, name)
            new_n = thread_count(new.props, new.config, name)
            if new_n != old_n:
                prefix = f"Dynamic thread count update validation failed for {name}={new_n}"
                if new_n <= 0:
                    raise _reconfiguration_error(f"{prefix}, value should be at least 1")
                if new_n < old_n // 2:
                    raise _reconfiguration_error(f"{prefix}, value should be at least half the current value {old_n}")
                if new_n > old_n * 2:
                    raise _reconfiguration_error(
                        f"{prefix}, value should not be greater than double the current value {old_n}")
        if self.log_cleaner_enabled and changed & LOG_CLEANER_CONFIGS:
            threads, current = new.config.log_cleaner_threads, self.current.log_cleaner_threads
            if threads < 1:
                raise _reconfiguration_error("Log cleaner threads should be at least 1")
            if threads < current // 2:
                raise _reconfiguration_error(
                    f"Log cleaner threads cannot be reduced to less than half the current value {current}")
            if threads > current * 2:
                raise _reconfiguration_error(
                    f"Log cleaner threads cannot be increased to more than double the current value {current}")

    def _merged_for(self, props: Mapping[str, str], per_broker: bool) -> EffectiveConfig:
        if per_broker:
            return self._effective(self.dynamic_default, props)
        return self._effective(props, self.dynamic_broker)

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """DynamicBrokerConfig.validate: `props` would replace the entity's dynamic configs."""
        validate_configs(props, per_broker)
        self._check_reconfigurables(self._merged_for(props, per_broker))

    def update(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Replace one level's dynamic configs (already validated and stored) and apply them."""
        if per_broker:
            new_broker, new_default = dict(props), self.dynamic_default
        else:
            new_broker, new_default = self.dynamic_broker, dict(props)
        effective = self._effective(new_default, new_broker)
        old, old_props = self.current, self.current_props
        self.dynamic_broker, self.dynamic_default = new_broker, new_default
        self.current, self.current_props = effective.config, effective.props
        changed = {k for k in set(old_props) | set(effective.props) if old_props.get(k) != effective.props.get(k)}
        for names, reconfigure in self._reconfigurables:
            if changed & names or any(base_config_name(k) in names for k in changed):
                reconfigure(old, effective.config)
        log.info("dynamic broker configs updated (%s): %s", "broker" if per_broker else "cluster default",
                 sorted(changed))

    def stored_props(self, per_broker: bool) -> dict[str, str]:
        """The entity's stored configs as an update starts from them (fromPersistentProps)."""
        return dynamic_props_from_store(self.store.broker_configs(self.entity(per_broker)), per_broker)

    def alter(self, props: Mapping[str, str], per_broker: bool, validate_only: bool) -> None:
        """Validate `props` as the entity's new set of dynamic configs; unless `validate_only`,
        store them and apply them at once. Raises DynamicConfigError."""
        self.validate(props, per_broker)
        if validate_only:
            return
        # toPersistentProps: passwords are stored encrypted with password.encoder.secret
        if any(is_password_config(k) for k in props):
            raise PasswordConfigError("Password encoder secret not configured")
        self.store.update_broker_configs(self.entity(per_broker), dict(props))
        self.update(props, per_broker)

    def live(self) -> "LiveConfig":
        return LiveConfig(self)

    def value_of(self, name: str) -> Optional[str]:
        """The current value of a dynamic key kafkalite does not model (dynamic, static or Kafka's
        default)."""
        return self.current_props.get(name, KAFKA_DYNAMIC_DEFAULTS.get(name))


class LiveConfig:
    """The current KafkaConfig's attributes, read at each access: for components that read a
    dynamic setting per request (transaction.partition.verification.enable)."""

    def __init__(self, dynamic: DynamicBrokerConfig) -> None:
        self._dynamic = dynamic

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamic.current, name)
