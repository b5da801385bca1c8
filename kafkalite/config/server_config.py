"""Broker configuration: Kafka's ``KafkaConfig`` with Kafka's property names, defaults and checks.

A ``server.properties`` file plus ``--override key=value`` strings go through ``load_config``;
values are parsed the way Kafka's ``ConfigDef`` parses them (trimmed; INT/LONG/SHORT are Java
integers of that width; BOOLEAN is ``true``/``false`` in any case), then validated with the
ranges and cross-checks of Kafka's ``KafkaConfig.validateValues``. Any failure becomes one
``ConfigError`` line naming the key and the value. Unknown keys are a warning, not an error,
as they are in Kafka (which logs "... was supplied but isn't a known config").

Defaults are Apache Kafka 3.x (ZooKeeper mode), with one deliberate difference: ``broker.id``
defaults to 0 because kafkalite's embedded single node is broker 0.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, field_validator,
                      model_validator)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from kafkalite.config.kafka_config_def import KAFKA_BROKER_CONFIG_TYPES
from kafkalite.config.log_config import LogConfig
from kafkalite.config.properties import java_trim, PropertiesSyntaxError, parse_java_integer, parse_properties

__all__ = [
    "ConfigError",
    "Endpoint",
    "IGNORED_KEYS",
    "IGNORED_KEY_PREFIXES",
    "IGNORED_SETTINGS",
    "KafkaConfig",
    "LoadedConfig",
    "build_config",
    "ignored_settings_warning",
    "is_known_key",
    "load_config",
    "parse_listeners",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
MS_PER_MINUTE = 60 * 1000
MS_PER_HOUR = 60 * MS_PER_MINUTE

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT"})
CLEANUP_POLICIES = ("compact", "delete")


class ConfigError(ValueError):
    """An invalid broker configuration. ``str()`` is one line naming the key (and the value)."""

    def __init__(self, key: str, message: str, value: str | None = None) -> None:
        self.key = key
        self.message = message
        self.value = value
        if value is None:
            line = message
        else:
            line = f"invalid value '{value}' for configuration '{key}': {message}"
        super().__init__(line)


# --------------------------------------------------------------------------------------------
# Java-typed values. ``_Kind`` rides along in the Annotated metadata so that an error message
# can say what the key wants ("must be an integer >= 14") whatever way the value failed.


@dataclass(frozen=True)
class _Kind:
    text: str


_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _java_integer(bits: int, nullable: bool = False) -> Callable[[Any], int | None]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(value: Any) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool):  # bool is an int subclass; Kafka would not take it
            raise PydanticCustomError("java_type", "not an integer")
        number = value if isinstance(value, int) else (
            parse_java_integer(java_trim(value), bits=None) if isinstance(value, str) else None)
        if number is None:
            raise PydanticCustomError("java_type", "not an integer")
        if not low <= number <= high:
            raise PydanticCustomError("java_range", "out of range", {"bits": bits})
        return number

    return parse


def _java_boolean(value: Any) -> bool:
    # ConfigDef BOOLEAN: "true"/"false" ignoring case, nothing else (no yes/no/1/0).
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = java_trim(value).lower()
        if lowered in ("true", "false"):
            return lowered == "true"
    raise PydanticCustomError("java_type", "not a boolean")


def _java_double(value: Any) -> float:
    if isinstance(value, bool):
        raise PydanticCustomError("java_type", "not a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        trimmed = java_trim(value)
        if _DOUBLE_RE.fullmatch(trimmed):
            return float(trimmed)
    raise PydanticCustomError("java_type", "not a number")


def _empty_is_none(value: Any) -> Any:
    # For optional settings where "key=" in a file plainly means "not set".
    if isinstance(value, str) and not value.strip():
        return None
    return value


_INTEGER = _Kind("an integer")
Int = Annotated[int, _INTEGER, BeforeValidator(_java_integer(32))]
Long = Annotated[int, _INTEGER, BeforeValidator(_java_integer(64))]
Short = Annotated[int, _INTEGER, BeforeValidator(_java_integer(16))]
OptInt = Annotated[int | None, _INTEGER, BeforeValidator(_java_integer(32, nullable=True))]
OptLong = Annotated[int | None, _INTEGER, BeforeValidator(_java_integer(64, nullable=True))]
Bool = Annotated[bool, _Kind("true or false"), BeforeValidator(_java_boolean)]
Double = Annotated[float, _Kind("a number"), BeforeValidator(_java_double)]
OptStr = Annotated[str | None, _Kind("a string")]
OptStrEmptyNone = Annotated[str | None, _Kind("a string"), BeforeValidator(_empty_is_none)]

TimestampType = Literal["CreateTime", "LogAppendTime"]
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
BrokerCompressionType = Literal["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]


def _fail(key: str, value: object, message: str) -> PydanticCustomError:
    """A validation failure that already knows its key (for checks spanning several fields)."""
    return PydanticCustomError(
        "kafka_config", "{message}", {"key": key, "value": None if value is None else str(value), "message": message}
    )


# --------------------------------------------------------------------------------------------
# Listeners


@dataclass(frozen=True)
class Endpoint:
    """One listener: ``name`` upper-cased like Kafka's ListenerName, ``host`` "" = all interfaces."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(r"(?P<name>[^\s:/]+)://(?P<hostport>\S*)")
_HOST_RE = re.compile(r"[0-9A-Za-z\-%._]*")  # Kafka's host characters (':' only inside [...])


def parse_listeners(value: str) -> list[Endpoint]:
    """Parse a ``listeners`` / ``advertised.listeners`` value: ``NAME://host:port[,...]``.

    Raises ValueError with a message fit for ``ConfigError``. Listener names must be unique, and
    so must ports (port 0, "pick a free port", may repeat).
    """
    endpoints: list[Endpoint] = []
    items = [item.strip() for item in value.split(",")]
    items = [item for item in items if item]
    if not items:
        raise ValueError("must list at least one listener, as NAME://host:port")
    for item in items:
        endpoints.append(_parse_endpoint(item))
    names = [e.name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"each listener must have a different name, {duplicates[0]} is repeated")
    ports = [e.port for e in endpoints if e.port != 0]
    dup_ports = sorted({p for p in ports if ports.count(p) > 1})
    if dup_ports:
        raise ValueError(f"each listener must have a different port, {dup_ports[0]} is repeated")
    return endpoints


def _parse_endpoint(item: str) -> Endpoint:
    match = _LISTENER_RE.fullmatch(item)
    if match is None:
        raise ValueError(f"listener '{item}' is not of the form NAME://host:port")
    name, hostport = match["name"].upper(), match["hostport"]
    if hostport.startswith("["):  # IPv6 literal: [::1]:9092
        close = hostport.find("]")
        if close < 0 or not hostport[close + 1:].startswith(":"):
            raise ValueError(f"listener '{item}' is not of the form NAME://[ipv6]:port")
        host, port_text = hostport[1:close], hostport[close + 2:]
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"listener '{item}' has an invalid IPv6 address '{host}'") from None
    else:
        host, sep, port_text = hostport.rpartition(":")
        if not sep:
            raise ValueError(f"listener '{item}' has no port (NAME://host:port)")
        if ":" in host:
            raise ValueError(f"listener '{item}': write an IPv6 host in brackets, as [{host}]")
        if not _HOST_RE.fullmatch(host):
            raise ValueError(f"listener '{item}' has an invalid host '{host}'")
    if not port_text.isascii() or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listener '{item}' has an invalid port '{port_text}' (must be 0..65535)")
    return Endpoint(name, host, int(port_text))


def _parse_protocol_map(value: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"entry '{item}' is not LISTENER_NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in mapping:
            raise ValueError(f"listener name {name} is mapped twice")
        mapping[name] = protocol
    return mapping


# --------------------------------------------------------------------------------------------
# The model


class KafkaConfig(BaseModel):
    """Static broker configuration. Attribute names are snake_case; aliases are Kafka's keys."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")
    # Kafka's broker configs set in server.properties / --override that kafkalite has no field
    # for (accepted and ignored, e.g. background.threads), as Kafka renders them: DescribeConfigs
    # shows them with source STATIC_BROKER_CONFIG and that value, as Kafka does.
    _unmodelled_static: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def unmodelled_static(self) -> dict[str, str]:
        return dict(self._unmodelled_static)

    # ---- general
    broker_id: Int = Field(0, alias="broker.id", ge=-1)
    broker_id_generation_enable: Bool = Field(True, alias="broker.id.generation.enable")
    reserved_broker_max_id: Int = Field(1000, alias="reserved.broker.max.id", ge=0)
    broker_rack: OptStrEmptyNone = Field(None, alias="broker.rack")
    message_max_bytes: Int = Field(1024 * 1024 + 12, alias="message.max.bytes", ge=0)
    num_network_threads: Int = Field(3, alias="num.network.threads", ge=1)  # IGNORED_SETTINGS
    num_io_threads: Int = Field(8, alias="num.io.threads", ge=1)  # IGNORED_SETTINGS
    queued_max_requests: Int = Field(500, alias="queued.max.requests", ge=1)
    queued_max_request_bytes: Long = Field(-1, alias="queued.max.request.bytes")
    request_timeout_ms: Int = Field(30000, alias="request.timeout.ms")
    auto_create_topics_enable: Bool = Field(True, alias="auto.create.topics.enable")
    delete_topic_enable: Bool = Field(True, alias="delete.topic.enable")
    compression_type: BrokerCompressionType = Field("producer", alias="compression.type")

    # ---- socket server
    listeners: str = Field("PLAINTEXT://:9092", alias="listeners")
    advertised_listeners: OptStr = Field(None, alias="advertised.listeners")
    listener_security_protocol_map: str = Field(
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        alias="listener.security.protocol.map",
    )
    inter_broker_listener_name: OptStrEmptyNone = Field(None, alias="inter.broker.listener.name")
    security_inter_broker_protocol: SecurityProtocol = Field("PLAINTEXT", alias="security.inter.broker.protocol")
    socket_send_buffer_bytes: Int = Field(100 * 1024, alias="socket.send.buffer.bytes")  # -1: OS default
    socket_receive_buffer_bytes: Int = Field(100 * 1024, alias="socket.receive.buffer.bytes")
    socket_request_max_bytes: Int = Field(100 * 1024 * 1024, alias="socket.request.max.bytes", ge=1)
    socket_listen_backlog_size: Int = Field(50, alias="socket.listen.backlog.size", ge=1)
    max_connections: Int = Field(INT_MAX, alias="max.connections", ge=0)
    max_connections_per_ip: Int = Field(INT_MAX, alias="max.connections.per.ip", ge=0)
    connections_max_idle_ms: Long = Field(10 * 60 * 1000, alias="connections.max.idle.ms")

    # ---- log
    num_partitions: Int = Field(1, alias="num.partitions", ge=1)
    log_dir: str = Field("/tmp/kafka-logs", alias="log.dir")
    log_dirs: OptStr = Field(None, alias="log.dirs")
    log_segment_bytes: Int = Field(1024 * 1024 * 1024, alias="log.segment.bytes", ge=14)
    log_roll_ms: OptLong = Field(None, alias="log.roll.ms")
    log_roll_hours: Int = Field(168, alias="log.roll.hours", ge=1)
    log_roll_jitter_ms: OptLong = Field(None, alias="log.roll.jitter.ms")
    log_roll_jitter_hours: Int = Field(0, alias="log.roll.jitter.hours", ge=0)
    log_retention_ms: OptLong = Field(None, alias="log.retention.ms")
    log_retention_minutes: OptInt = Field(None, alias="log.retention.minutes")
    log_retention_hours: Int = Field(168, alias="log.retention.hours")
    log_retention_bytes: Long = Field(-1, alias="log.retention.bytes")
    log_retention_check_interval_ms: Long = Field(5 * 60 * 1000, alias="log.retention.check.interval.ms", ge=1)
    log_cleanup_policy: str = Field("delete", alias="log.cleanup.policy")
    log_index_size_max_bytes: Int = Field(10 * 1024 * 1024, alias="log.index.size.max.bytes", ge=4)
    log_index_interval_bytes: Int = Field(4096, alias="log.index.interval.bytes", ge=0)
    log_flush_interval_messages: Long = Field(LONG_MAX, alias="log.flush.interval.messages", ge=1)
    log_flush_interval_ms: OptLong = Field(None, alias="log.flush.interval.ms")
    log_flush_scheduler_interval_ms: Long = Field(LONG_MAX, alias="log.flush.scheduler.interval.ms")
    num_recovery_threads_per_data_dir: Int = Field(1, alias="num.recovery.threads.per.data.dir", ge=1)
    log_flush_offset_checkpoint_interval_ms: Int = Field(
        60000, alias="log.flush.offset.checkpoint.interval.ms", ge=0
    )
    log_flush_start_offset_checkpoint_interval_ms: Int = Field(
        60000, alias="log.flush.start.offset.checkpoint.interval.ms", ge=0
    )
    log_segment_delete_delay_ms: Long = Field(60000, alias="log.segment.delete.delay.ms", ge=0)
    log_preallocate: Bool = Field(False, alias="log.preallocate")
    log_message_timestamp_type: TimestampType = Field("CreateTime", alias="log.message.timestamp.type")
    log_message_timestamp_before_max_ms: Long = Field(LONG_MAX, alias="log.message.timestamp.before.max.ms", ge=0)
    log_message_timestamp_after_max_ms: Long = Field(LONG_MAX, alias="log.message.timestamp.after.max.ms", ge=0)
    min_insync_replicas: Int = Field(1, alias="min.insync.replicas", ge=1)

    # ---- log cleaner (compaction); the other log.cleaner.* keys are accepted and ignored
    log_cleaner_enable: Bool = Field(True, alias="log.cleaner.enable")
    log_cleaner_threads: Int = Field(1, alias="log.cleaner.threads", ge=0)
    log_cleaner_backoff_ms: Long = Field(15 * 1000, alias="log.cleaner.backoff.ms", ge=0)
    log_cleaner_delete_retention_ms: Long = Field(24 * MS_PER_HOUR, alias="log.cleaner.delete.retention.ms", ge=0)
    log_cleaner_min_compaction_lag_ms: Long = Field(0, alias="log.cleaner.min.compaction.lag.ms", ge=0)
    log_cleaner_max_compaction_lag_ms: Long = Field(LONG_MAX, alias="log.cleaner.max.compaction.lag.ms", ge=1)
    log_cleaner_min_cleanable_ratio: Double = Field(0.5, alias="log.cleaner.min.cleanable.ratio", ge=0, le=1)
    log_cleaner_dedupe_buffer_size: Long = Field(128 * 1024 * 1024, alias="log.cleaner.dedupe.buffer.size", ge=0)
    log_cleaner_io_buffer_size: Int = Field(512 * 1024, alias="log.cleaner.io.buffer.size", ge=0)
    log_cleaner_io_buffer_load_factor: Double = Field(0.9, alias="log.cleaner.io.buffer.load.factor", gt=0, le=1)

    # ---- replication and controller
    default_replication_factor: Int = Field(1, alias="default.replication.factor", ge=1)
    replica_lag_time_max_ms: Long = Field(30000, alias="replica.lag.time.max.ms")
    replica_socket_timeout_ms: Int = Field(30000, alias="replica.socket.timeout.ms")
    replica_socket_receive_buffer_bytes: Int = Field(64 * 1024, alias="replica.socket.receive.buffer.bytes")
    replica_fetch_max_bytes: Int = Field(1024 * 1024, alias="replica.fetch.max.bytes", ge=0)
    replica_fetch_wait_max_ms: Int = Field(500, alias="replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: Int = Field(1, alias="replica.fetch.min.bytes")
    replica_fetch_backoff_ms: Int = Field(1000, alias="replica.fetch.backoff.ms", ge=0)
    replica_fetch_response_max_bytes: Int = Field(10 * 1024 * 1024, alias="replica.fetch.response.max.bytes", ge=0)
    num_replica_fetchers: Int = Field(1, alias="num.replica.fetchers")
    # KIP-392; checked when the replica manager is built (replica_selector.create_replica_selector)
    replica_selector_class: OptStr = Field(None, alias="replica.selector.class")
    replica_high_watermark_checkpoint_interval_ms: Long = Field(
        5000, alias="replica.high.watermark.checkpoint.interval.ms"
    )
    controller_socket_timeout_ms: Int = Field(30000, alias="controller.socket.timeout.ms")
    auto_leader_rebalance_enable: Bool = Field(True, alias="auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage: Int = Field(10, alias="leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds: Long = Field(300, alias="leader.imbalance.check.interval.seconds", ge=1)
    unclean_leader_election_enable: Bool = Field(False, alias="unclean.leader.election.enable")
    controlled_shutdown_enable: Bool = Field(True, alias="controlled.shutdown.enable")
    controlled_shutdown_max_retries: Int = Field(3, alias="controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: Long = Field(5000, alias="controlled.shutdown.retry.backoff.ms")
    fetch_max_bytes: Int = Field(55 * 1024 * 1024, alias="fetch.max.bytes", ge=1024)
    max_incremental_fetch_session_cache_slots: Int = Field(
        1000, alias="max.incremental.fetch.session.cache.slots", ge=0
    )

    # ---- group coordinator and __consumer_offsets
    group_min_session_timeout_ms: Int = Field(6000, alias="group.min.session.timeout.ms")
    group_max_session_timeout_ms: Int = Field(30 * MS_PER_MINUTE, alias="group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: Int = Field(3000, alias="group.initial.rebalance.delay.ms")
    group_max_size: Int = Field(INT_MAX, alias="group.max.size", ge=1)
    offset_metadata_max_bytes: Int = Field(4096, alias="offset.metadata.max.bytes")
    offsets_load_buffer_size: Int = Field(5 * 1024 * 1024, alias="offsets.load.buffer.size", ge=1)
    # Kafka's 3; the single-node controller caps internal topics at the live broker count.
    offsets_topic_replication_factor: Short = Field(3, alias="offsets.topic.replication.factor", ge=1)
    offsets_topic_num_partitions: Int = Field(50, alias="offsets.topic.num.partitions", ge=1)
    offsets_topic_segment_bytes: Int = Field(100 * 1024 * 1024, alias="offsets.topic.segment.bytes", ge=1)
    # CompressionType id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    offsets_topic_compression_codec: Int = Field(0, alias="offsets.topic.compression.codec", ge=0, le=4)
    offsets_retention_minutes: Int = Field(7 * 24 * 60, alias="offsets.retention.minutes", ge=1)
    offsets_retention_check_interval_ms: Long = Field(600000, alias="offsets.retention.check.interval.ms", ge=1)
    offsets_commit_timeout_ms: Int = Field(5000, alias="offsets.commit.timeout.ms", ge=1)
    offsets_commit_required_acks: Short = Field(-1, alias="offsets.commit.required.acks")

    # ---- transactions, producer ids and __transaction_state
    transactional_id_expiration_ms: Int = Field(7 * 24 * MS_PER_HOUR, alias="transactional.id.expiration.ms", ge=1)
    transaction_max_timeout_ms: Int = Field(15 * MS_PER_MINUTE, alias="transaction.max.timeout.ms", ge=1)
    transaction_state_log_min_isr: Int = Field(2, alias="transaction.state.log.min.isr", ge=1)
    transaction_state_log_load_buffer_size: Int = Field(
        5 * 1024 * 1024, alias="transaction.state.log.load.buffer.size", ge=1
    )
    transaction_state_log_replication_factor: Short = Field(3, alias="transaction.state.log.replication.factor", ge=1)
    transaction_state_log_num_partitions: Int = Field(50, alias="transaction.state.log.num.partitions", ge=1)
    transaction_state_log_segment_bytes: Int = Field(
        100 * 1024 * 1024, alias="transaction.state.log.segment.bytes", ge=1
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: Int = Field(
        10000, alias="transaction.abort.timed.out.transaction.cleanup.interval.ms", ge=1
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: Int = Field(
        MS_PER_HOUR, alias="transaction.remove.expired.transaction.cleanup.interval.ms", ge=1
    )
    # KIP-890: a transactional produce to a partition not in the producer's transaction is refused
    transaction_partition_verification_enable: Bool = Field(True, alias="transaction.partition.verification.enable")
    producer_id_expiration_ms: Int = Field(24 * MS_PER_HOUR, alias="producer.id.expiration.ms", ge=1)
    producer_id_expiration_check_interval_ms: Int = Field(
        10 * MS_PER_MINUTE, alias="producer.id.expiration.check.interval.ms", ge=1
    )

    # ---- ZooKeeper (unset: the embedded single-node controller)
    zookeeper_connect: OptStrEmptyNone = Field(None, alias="zookeeper.connect")
    zookeeper_session_timeout_ms: Int = Field(18000, alias="zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: OptInt = Field(None, alias="zookeeper.connection.timeout.ms")
    zookeeper_max_in_flight_requests: Int = Field(10, alias="zookeeper.max.in.flight.requests", ge=1)

    # ---- kafkalite's own (no Kafka equivalent; the prefix keeps them apart from Kafka's names)
    # the Prometheus endpoint (kafkalite.metrics): unset = off; 0 = a free port, logged at start
    kafkalite_metrics_prometheus_port: OptInt = Field(None, alias="kafkalite.metrics.prometheus.port", ge=0, le=65535)
    kafkalite_metrics_prometheus_host: str = Field("", alias="kafkalite.metrics.prometheus.host")  # "": all interfaces

    # ---------------------------------------------------------------------------- field checks

    @field_validator("log_cleanup_policy")
    @classmethod
    def _check_cleanup_policy(cls, value: str) -> str:
        # A Kafka LIST: comma-separated, spaces around commas ignored; case-sensitive values.
        policies = [p.strip() for p in value.split(",")] if value.strip() else []
        if not policies or any(p not in CLEANUP_POLICIES for p in policies) or len(set(policies)) != len(policies):
            raise _fail("log.cleanup.policy", value,
                        "must be a comma-separated list of distinct values from: compact, delete")
        return ",".join(policies)

    @field_validator("log_dirs", "log_dir")
    @classmethod
    def _check_log_dirs(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return None
        key = "log.dirs" if info.field_name == "log_dirs" else "log.dir"
        dirs = _split_csv(value)
        if not dirs:
            raise _fail(key, value, "at least one log directory must be given")
        if len(set(dirs)) != len(dirs):
            raise _fail(key, value, "a log directory is listed twice")
        return value

    @field_validator("listeners")
    @classmethod
    def _check_listeners_syntax(cls, value: str) -> str:
        try:
            parse_listeners(value)
        except ValueError as exc:
            raise _fail("listeners", value, str(exc)) from None
        return value

    @field_validator("advertised_listeners")
    @classmethod
    def _check_advertised_syntax(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            endpoints = parse_listeners(value)
        except ValueError as exc:
            raise _fail("advertised.listeners", value, str(exc)) from None
        for endpoint in endpoints:
            if endpoint.host == "0.0.0.0":
                raise _fail("advertised.listeners", value, "cannot advertise the non-routable meta-address 0.0.0.0")
        return value

    @field_validator("listener_security_protocol_map")
    @classmethod
    def _check_protocol_map(cls, value: str) -> str:
        try:
            _parse_protocol_map(value)
        except ValueError as exc:
            raise _fail("listener.security.protocol.map", value, str(exc)) from None
        return value

    # ---------------------------------------------------------------------------- cross-field checks

    @model_validator(mode="after")
    def _check_cross_field(self) -> KafkaConfig:
        # KafkaConfig.validateValues, the parts that concern a ZooKeeper-mode broker.
        if self.broker_id_generation_enable:
            if not -1 <= self.broker_id <= self.reserved_broker_max_id:
                raise _fail("broker.id", self.broker_id,
                            "must be >= -1 and not greater than reserved.broker.max.id "
                            f"({self.reserved_broker_max_id})")
        elif self.broker_id < 0:
            raise _fail("broker.id", self.broker_id, "must be >= 0 when broker.id.generation.enable is false")

        roll_key = "log.roll.ms" if self.log_roll_ms is not None else "log.roll.hours"
        if self.log_roll_ms_effective < 1:
            raise _fail(roll_key, self._raw(roll_key), "the segment roll time must be at least 1 ms")
        jitter_key = "log.roll.jitter.ms" if self.log_roll_jitter_ms is not None else "log.roll.jitter.hours"
        if self.log_roll_jitter_ms_effective < 0:
            raise _fail(jitter_key, self._raw(jitter_key), "the segment roll jitter must be >= 0 ms")
        if self.log_retention_ms_effective == 0:
            key = self._retention_key()
            raise _fail(key, self._raw(key), "the retention time must be -1 (unlimited) or at least 1 ms")

        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise _fail("replica.socket.timeout.ms", self.replica_socket_timeout_ms,
                        "should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise _fail("replica.fetch.wait.max.ms", self.replica_fetch_wait_max_ms,
                        "should always be less than or equal to replica.lag.time.max.ms "
                        "to prevent frequent changes in ISR")
        if not -1 <= self.offsets_commit_required_acks <= self.offsets_topic_replication_factor:
            raise _fail("offsets.commit.required.acks", self.offsets_commit_required_acks,
                        "must be greater or equal -1 and less or equal to offsets.topic.replication.factor")

        self._check_listener_protocols()
        return self

    def _check_listener_protocols(self) -> None:
        protocols = _parse_protocol_map(self.listener_security_protocol_map)
        listeners = parse_listeners(self.listeners)
        for key, endpoints in (("listeners", listeners), ("advertised.listeners", self.advertised_endpoints())):
            raw = self.listeners if key == "listeners" else self.advertised_listeners
            for endpoint in endpoints:
                protocol = protocols.get(endpoint.name)
                if protocol is None:
                    raise _fail(key, raw, f"no security protocol defined for listener {endpoint.name} "
                                          "(add it to listener.security.protocol.map)")
                if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                    raise _fail(key, raw, f"listener {endpoint.name} uses security protocol {protocol}; "
                                          "kafkalite supports only PLAINTEXT")
        listener_names = {e.name for e in listeners}
        advertised_names = [e.name for e in self.advertised_endpoints()]
        for name in advertised_names:
            if name not in listener_names:
                raise _fail("advertised.listeners", self.advertised_listeners,
                            f"listener {name} is advertised but not defined in listeners")
        if self.inter_broker_listener_name is not None:
            if "security_inter_broker_protocol" in self.model_fields_set:
                raise _fail("inter.broker.listener.name", self.inter_broker_listener_name,
                            "only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
            name = self.inter_broker_listener_name.strip().upper()
            if name not in advertised_names:
                raise _fail("inter.broker.listener.name", self.inter_broker_listener_name,
                            "must be a listener name defined in advertised.listeners")
        else:
            protocol = self.security_inter_broker_protocol
            if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                raise _fail("security.inter.broker.protocol", protocol, "kafkalite supports only PLAINTEXT")
            # Without inter.broker.listener.name Kafka uses the listener named after the protocol.
            if protocol not in advertised_names:
                key = "listeners" if self.advertised_listeners is None else "advertised.listeners"
                raise _fail(key, self.advertised_listeners or self.listeners,
                            f"no listener named {protocol} for inter-broker traffic; add one or set "
                            "inter.broker.listener.name")

    def _retention_key(self) -> str:
        if self.log_retention_ms is not None:
            return "log.retention.ms"
        if self.log_retention_minutes is not None:
            return "log.retention.minutes"
        return "log.retention.hours"

    def _raw(self, key: str) -> object:
        return getattr(self, ALIAS_TO_FIELD[key])

    # ---------------------------------------------------------------------------- derived values

    def log_dirs_list(self) -> list[Path]:
        """The data directories: ``log.dirs`` if set, else ``log.dir`` (both comma-separated)."""
        return [Path(d) for d in _split_csv(self.log_dirs if self.log_dirs is not None else self.log_dir)]

    def listener_endpoints(self) -> list[Endpoint]:
        return parse_listeners(self.listeners)

    def advertised_endpoints(self) -> list[Endpoint]:
        """``advertised.listeners``, or ``listeners`` when unset. An empty host or port 0 is
        left as configured; the server substitutes its host name and the bound port."""
        if self.advertised_listeners is None:
            return self.listener_endpoints()
        return parse_listeners(self.advertised_listeners)

    def listener_protocols(self) -> dict[str, str]:
        """listener.security.protocol.map as a dict: listener name -> security protocol."""
        return _parse_protocol_map(self.listener_security_protocol_map)

    def inter_broker_listener(self) -> str:
        """Name of the listener brokers use to talk to each other."""
        if self.inter_broker_listener_name is not None:
            return self.inter_broker_listener_name.strip().upper()
        return self.security_inter_broker_protocol

    @property
    def log_retention_ms_effective(self) -> int:
        """ms > minutes > hours; any negative result means unlimited and is reported as -1."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * MS_PER_HOUR
        return -1 if millis < 0 else millis

    @property
    def log_roll_ms_effective(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * MS_PER_HOUR

    @property
    def log_roll_jitter_ms_effective(self) -> int:
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * MS_PER_HOUR

    @property
    def log_flush_interval_ms_effective(self) -> int:
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @property
    def zookeeper_connection_timeout_ms_effective(self) -> int:
        if self.zookeeper_connection_timeout_ms is not None:
            return self.zookeeper_connection_timeout_ms
        return self.zookeeper_session_timeout_ms

    def log_config(self) -> LogConfig:
        """The broker-level defaults for every log (topic overrides are merged on top)."""
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms_effective,
            segment_jitter_ms=self.log_roll_jitter_ms_effective,
            segment_index_bytes=self.log_index_size_max_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            retention_ms=self.log_retention_ms_effective,
            retention_bytes=self.log_retention_bytes,
            max_message_bytes=self.message_max_bytes,
            message_timestamp_type=self.log_message_timestamp_type,
            file_delete_delay_ms=self.log_segment_delete_delay_ms,
            cleanup_policy=self.log_cleanup_policy,
            min_insync_replicas=self.min_insync_replicas,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms_effective,
            preallocate=self.log_preallocate,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
        )

    def to_properties(self) -> dict[str, str | None]:
        """Every key with its value rendered as Kafka shows it (``true``/``false``; None: unset)."""
        rendered: dict[str, str | None] = {}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None:
                rendered[info.alias or name] = None
            elif isinstance(value, bool):
                rendered[info.alias or name] = "true" if value else "false"
            else:
                rendered[info.alias or name] = str(value)
        return rendered


def _split_csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


FIELD_TO_ALIAS: dict[str, str] = {name: info.alias or name for name, info in KafkaConfig.model_fields.items()}
ALIAS_TO_FIELD: dict[str, str] = {alias: name for name, alias in FIELD_TO_ALIAS.items()}

# Kafka keys accepted without a warning although kafkalite does not act on them (thread pools,
# purgatory tuning, metrics, message-format knobs that only matter to old formats).
IGNORED_KEYS: frozenset[str] = frozenset({
    "num.replica.alter.log.dirs.threads",
    "background.threads",
    "fetch.purgatory.purge.interval.requests",
    "producer.purgatory.purge.interval.requests",
    "delete.records.purgatory.purge.interval.requests",
    "inter.broker.protocol.version",
    "log.message.format.version",
    "log.message.timestamp.difference.max.ms",
    "log.message.downconversion.enable",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.sample.window.ms",
    "metrics.recording.level",
    "auto.include.jmx.reporter",
    "kafka.metrics.reporters",
    "kafka.metrics.polling.interval.secs",
    "zookeeper.set.acl",              # false is what kafkalite does; true is refused (below)
    "zookeeper.ssl.client.enable",    # likewise
    "group.coordinator.rebalance.protocols",
    "group.coordinator.threads",
})
# Whole families accepted and ignored; the compaction settings kafkalite uses are fields above.
IGNORED_KEY_PREFIXES: tuple[str, ...] = ("log.cleaner.",)


# Settings kafkalite accepts, so that a Kafka server.properties loads, but does not act on, with
# why. Those set explicitly are named in one start-up warning; docs/operations.md lists them and
# DescribeConfigs' documentation (v3+) says so; DescribeConfigs shows them with Kafka's values.
IGNORED_SETTINGS: dict[str, str] = {
    "num.network.threads": "one asyncio event loop serves every connection",
    "num.io.threads": "requests are handled on the event loop",
    "background.threads": "background work runs as tasks of the event loop",
    "queued.max.requests": "there is no request queue: a connection's next request is read once "
                           "the previous one is answered",
    "queued.max.request.bytes": "there is no request queue: a connection's next request is read "
                                "once the previous one is answered",
    "max.connections": "connections are not limited",
    "max.connections.per.ip": "connections are not limited",
    "connections.max.idle.ms": "idle connections are not closed by the broker",
    "replica.socket.receive.buffer.bytes": "follower connections use the OS default buffer",
    "offsets.topic.compression.codec": "offset commits are written uncompressed",
    "log.preallocate": "segment files grow as they are written",
    "log.message.timestamp.difference.max.ms": "the topic config message.timestamp.difference.max.ms "
                                               "is honoured, this broker default is not",
    "log.message.downconversion.enable": "the topic config message.downconversion.enable is "
                                         "honoured, this broker default is not",
    "log.message.format.version": "batches are always stored in message format v2 (as by Kafka 3.x)",
    "inter.broker.protocol.version": "brokers always speak Kafka 3.9's protocol versions",
    "log.cleaner.io.max.bytes.per.second": "the cleaner's I/O is not throttled",
    "num.replica.alter.log.dirs.threads": "replicas are never moved between log directories",
    "fetch.purgatory.purge.interval.requests": "completed delayed requests leave at once",
    "producer.purgatory.purge.interval.requests": "completed delayed requests leave at once",
    "delete.records.purgatory.purge.interval.requests": "completed delayed requests leave at once",
    "group.coordinator.rebalance.protocols": "only the classic group protocol exists",
    "group.coordinator.threads": "the group coordinator runs on the event loop",
    "metric.reporters": "metrics go to the Prometheus endpoint only",
    "metrics.num.samples": "metrics go to the Prometheus endpoint only",
    "metrics.sample.window.ms": "metrics go to the Prometheus endpoint only",
    "metrics.recording.level": "metrics go to the Prometheus endpoint only",
    "auto.include.jmx.reporter": "there is no JMX",
    "kafka.metrics.reporters": "metrics go to the Prometheus endpoint only",
    "kafka.metrics.polling.interval.secs": "metrics go to the Prometheus endpoint only",
}


def ignored_settings_warning(props: Mapping[str, str]) -> str | None:
    """The start-up warning naming the accepted-but-ignored settings among ``props`` (None if
    there are none), in one line. A setting at Kafka's default changes nothing and is not
    named: Kafka's own server.properties sets num.network.threads=3 and num.io.threads=8."""
    keys = sorted(k for k, v in props.items() if k in IGNORED_SETTINGS and not _is_kafka_default(k, v))
    if not keys:
        return None
    return ("these settings are accepted for compatibility with Kafka and ignored by kafkalite "
            f"(see docs/operations.md): {', '.join(keys)}")


def _is_kafka_default(key: str, value: str) -> bool:
    field = ALIAS_TO_FIELD.get(key)
    return field is not None and java_trim(value) == str(KafkaConfig.model_fields[field].default)


def is_known_key(key: str) -> bool:
    return key in ALIAS_TO_FIELD or key in IGNORED_KEYS or key.startswith(IGNORED_KEY_PREFIXES)


# --------------------------------------------------------------------------------------------
# Loading


@dataclass(frozen=True)
class LoadedConfig:
    config: KafkaConfig
    warnings: list[str] = field(default_factory=list)
    # The merged key/value strings as given (file, then overrides): what was set explicitly,
    # e.g. for DescribeConfigs' STATIC_BROKER_CONFIG vs DEFAULT_CONFIG.
    properties: dict[str, str] = field(default_factory=dict)


def load_config(config_file: str | Path | None, overrides: Iterable[str] = ()) -> LoadedConfig:
    """Read ``config_file`` (a Java properties file) if given, apply ``key=value`` overrides on
    top, and validate. Raises ConfigError."""
    props: dict[str, str] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(str(path), f"cannot read config file '{path}': {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # what Properties.load(InputStream) would read
        try:
            props.update(parse_properties(text))
        except PropertiesSyntaxError as exc:
            raise ConfigError(str(path), f"{path}: {exc}") from None
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(key or override, f"malformed override '{override}': expected key=value")
        props[key] = value
    return build_config(props)


# ZooKeeper settings kafkalite cannot honour when enabled: refused at start-up, never ignored
# (kafkalite's ZooKeeper client speaks plain TCP without SASL, so it can neither set ACLs nor use TLS).
UNSUPPORTED_WHEN_TRUE: dict[str, str] = {
    "zookeeper.set.acl": "ZooKeeper ACLs need a SASL-authenticated session, which kafkalite does not open",
    "zookeeper.ssl.client.enable": "kafkalite connects to ZooKeeper over plain TCP only",
}


def build_config(props: Mapping[str, str]) -> LoadedConfig:
    """Validate already-parsed properties into a KafkaConfig. Raises ConfigError."""
    for key, why in UNSUPPORTED_WHEN_TRUE.items():
        if java_trim(props.get(key, "false")).lower() == "true":
            raise ConfigError(key, f"{key}=true is not supported: {why}", "true")
    warnings = [f"unknown config key '{key}' ignored" for key in props if not is_known_key(key)]
    ignored = ignored_settings_warning(props)
    if ignored is not None:
        warnings.append(ignored)
    # Only Kafka key names reach the model: a snake_case key in a file is unknown, not a field.
    values = {key: java_trim(value) for key, value in props.items() if key in ALIAS_TO_FIELD}
    try:
        config = KafkaConfig.model_validate(values)
    except ValidationError as exc:
        raise _translate(exc, values) from None
    config._unmodelled_static = {key: _render_unmodelled(key, java_trim(value)) for key, value in props.items()
                                 if key not in ALIAS_TO_FIELD and key in KAFKA_BROKER_CONFIG_TYPES}
    return LoadedConfig(config=config, warnings=warnings, properties=dict(props))


def _render_unmodelled(key: str, value: str) -> str:
    """A value of a config kafkalite does not parse, as Kafka's ConfigDef would render it (numbers
    and booleans normalized); a value Kafka could not parse stays as given."""
    kind = KAFKA_BROKER_CONFIG_TYPES[key]
    bits = {"SHORT": 16, "INT": 32, "LONG": 64}.get(kind)
    if bits is not None:
        try:
            return str(_java_integer(bits)(value))   # as the fields of that type parse it
        except PydanticCustomError:
            return value
    if kind == "BOOLEAN" and value.lower() in ("true", "false"):
        return value.lower()
    return value




def _translate(exc: ValidationError, values: Mapping[str, str]) -> ConfigError:
    error = exc.errors()[0]
    if error["type"] == "kafka_config":
        ctx = error["ctx"]
        return ConfigError(ctx["key"], ctx["message"], value=ctx["value"])
    loc = error["loc"]
    name = str(loc[0]) if loc else ""
    alias = FIELD_TO_ALIAS.get(name, name)
    info = KafkaConfig.model_fields.get(ALIAS_TO_FIELD.get(alias, ""))
    raw = values.get(alias, error.get("input"))
    if info is None:
        return ConfigError(alias, error["msg"], value=str(raw))
    message = f"must be {_describe(info)}"
    if error["type"] == "java_range":
        message += f" that fits in a signed {error['ctx']['bits']}-bit integer"
    return ConfigError(alias, message, value=str(raw))


def _describe(info: FieldInfo) -> str:
    """What a field accepts, e.g. "an integer >= 14" or "one of CreateTime, LogAppendTime"."""
    kind = next((m for m in info.metadata if isinstance(m, _Kind)), None)
    if kind is None:
        choices = getattr(info.annotation, "__args__", ())
        if choices and all(isinstance(c, str) for c in choices):
            return "one of " + ", ".join(choices)
        return "a string"
    low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in info.metadata if hasattr(m, "le")), None)
    if low is not None and high is not None:
        return f"{kind.text} between {low} and {high}"
    if low is not None:
        return f"{kind.text} >= {low}"
    if high is not None:
        return f"{kind.text} <= {high}"
    return kind.text
