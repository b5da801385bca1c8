"""Per-topic configuration: validating topic-level overrides and merging them over broker defaults.

Parsing follows Kafka's ConfigDef (LogConfig of a 3.x ZooKeeper-mode broker): Java trim, INT/LONG
bounds, the key's validator, Kafka's messages. `validate_topic_log_config` adds LogConfig's
cross-checks (compaction lags, tiered storage), so CreateTopics, AlterConfigs and
IncrementalAlterConfigs refuse exactly the same things.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

from kafkalite.config.properties import java_trim, parse_java_integer
from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS, LogConfig


class InvalidTopicConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


LONG_MAX = 2**63 - 1

# Kafka's ConfigDef type of each topic config (LogConfig, 3.x ZooKeeper-mode broker).
_TYPES: dict[str, str] = {
    "segment.bytes": "INT",
    "segment.ms": "LONG",
    "segment.jitter.ms": "LONG",
    "segment.index.bytes": "INT",
    "index.interval.bytes": "INT",
    "retention.ms": "LONG",
    "retention.bytes": "LONG",
    "max.message.bytes": "INT",
    "message.timestamp.type": "STRING",
    "file.delete.delay.ms": "LONG",
    "cleanup.policy": "LIST",
    "min.insync.replicas": "INT",
    "flush.messages": "LONG",
    "flush.ms": "LONG",
    "preallocate": "BOOLEAN",
    "delete.retention.ms": "LONG",
    "min.compaction.lag.ms": "LONG",
    "max.compaction.lag.ms": "LONG",
    "min.cleanable.dirty.ratio": "DOUBLE",
    "message.timestamp.before.max.ms": "LONG",
    "message.timestamp.after.max.ms": "LONG",
    "message.timestamp.difference.max.ms": "LONG",
    "compression.type": "STRING",
    "unclean.leader.election.enable": "BOOLEAN",
    "message.downconversion.enable": "BOOLEAN",
    "message.format.version": "STRING",
    "leader.replication.throttled.replicas": "LIST",
    "follower.replication.throttled.replicas": "LIST",
    "remote.storage.enable": "BOOLEAN",
    "local.retention.ms": "LONG",
    "local.retention.bytes": "LONG",
    "remote.log.copy.disable": "BOOLEAN",
    "remote.log.delete.on.disable": "BOOLEAN",
    "compression.gzip.level": "INT",
    "compression.lz4.level": "INT",
    "compression.zstd.level": "INT",
}
# Range.atLeast validators; retention.bytes has none (any negative means unlimited).
_MIN: dict[str, int] = {
    "segment.bytes": 14,  # LegacyRecord.RECORD_OVERHEAD_V0 (Kafka 4 raised it to 1 MiB)
    "segment.ms": 1,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 4,
    "index.interval.bytes": 0,
    "max.message.bytes": 0,
    "file.delete.delay.ms": 0,
    "min.insync.replicas": 1,
    "flush.messages": 1,
    "flush.ms": 0,
    "retention.ms": -1,
    "delete.retention.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0,
    "message.timestamp.difference.max.ms": 0,
    "local.retention.ms": -2,
    "local.retention.bytes": -2,
    "compression.lz4.level": 1,
    "compression.zstd.level": -131072,
}
# Range.between upper bounds (CompressionType's level validators)
_MAX: dict[str, int] = {
    "compression.lz4.level": 17,
    "compression.zstd.level": 22,
}
# CompressionType.GZIP's level validator: Deflater.BEST_SPEED..BEST_COMPRESSION, or DEFAULT_COMPRESSION
_GZIP_LEVELS = (1, 9, -1)
_ENUMS: dict[str, tuple[str, ...]] = {
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "cleanup.policy": ("compact", "delete"),
    # BrokerCompressionType names, in Kafka's order (the order shows in the message)
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
}
_THROTTLED = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
_THROTTLED_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")
_BITS = {"INT": 32, "LONG": 64}
_LIST_SEP = re.compile(r"\s*,\s*")   # ConfigDef's COMMA_WITH_WHITESPACE

# DescribeConfigs ConfigType ids (v3+).
CONFIG_TYPE_IDS = {"UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5,
                   "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9}

# What DescribeConfigs returns as documentation (v3+, IncludeDocumentation); kafkalite's own words.
TOPIC_CONFIG_DOCS: dict[str, str] = {
    "segment.bytes": "Size in bytes at which the active segment of a partition is rolled.",
    "segment.ms": "Time after which the active segment is rolled even if it is not full, so "
                  "retention and compaction can act on old data.",
    "segment.jitter.ms": "Maximum random amount subtracted from segment.ms for each segment, to "
                         "avoid all partitions rolling at the same moment.",
    "segment.index.bytes": "Maximum size of the offset and time index files of a segment; a full "
                           "index rolls the segment.",
    "index.interval.bytes": "How many bytes of records lie between two offset index entries.",
    "retention.ms": "How long a segment is kept after its newest record's timestamp before "
                    "delete retention removes it; -1 keeps data forever.",
    "retention.bytes": "Largest size a partition may reach before delete retention removes its "
                       "oldest segments; negative means no limit.",
    "max.message.bytes": "Largest record batch (after compression) accepted for this topic.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime stamps "
                              "each batch with the broker's time on append.",
    "file.delete.delay.ms": "Delay before the files of a segment deleted by retention, truncation or "
                            "compaction (renamed .deleted meanwhile) are removed from disk.",
    "cleanup.policy": "Comma-separated list of delete (time/size retention) and compact (keep "
                      "the latest record per key).",
    "min.insync.replicas": "Replicas that must be in sync for an acks=all produce to succeed "
                           "(NOT_ENOUGH_REPLICAS otherwise).",
    "flush.messages": "Number of appended records after which the log is fsynced.",
    "flush.ms": "Time after a log's last fsync after which its unflushed data is fsynced.",
    "preallocate": "Whether segment files are preallocated at their full size when created. "
                   "Accepted and ignored by kafkalite: segment files grow as they are written.",
    "delete.retention.ms": "How long tombstones are kept on a compacted topic after cleaning.",
    "min.compaction.lag.ms": "Minimum age of a record before compaction may remove it.",
    "max.compaction.lag.ms": "Maximum time a record may stay ineligible for compaction.",
    "min.cleanable.dirty.ratio": "Dirty share of a compacted log above which the cleaner cleans it.",
    "message.timestamp.before.max.ms": "How far in the past a CreateTime record timestamp may lie "
                                       "relative to the broker's clock (INVALID_TIMESTAMP beyond).",
    "message.timestamp.after.max.ms": "How far in the future a CreateTime record timestamp may lie "
                                      "relative to the broker's clock (INVALID_TIMESTAMP beyond).",
    "message.timestamp.difference.max.ms": "Deprecated: used for message.timestamp.before.max.ms and "
                                           "after.max.ms when those are left at their defaults.",
    "compression.type": "Codec the broker stores batches with: uncompressed, gzip, snappy, lz4, zstd "
                        "(batches in another codec are recompressed), or producer (kept as sent).",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become leader as a last "
                                      "resort (possible data loss).",
    "message.downconversion.enable": "Whether Fetch v0-3 (message formats 0 and 1) may read this topic: "
                                     "stored batches are down-converted for them; false answers "
                                     "UNSUPPORTED_VERSION.",
    "message.format.version": "Deprecated; ignored since inter.broker.protocol.version 3.0 (batches "
                              "are always stored in message format v2). Any valid Kafka version is "
                              "accepted and shown.",
    "leader.replication.throttled.replicas": "Replicas (partition:broker, or *) whose leader-side "
                                             "replication traffic is throttled. Stored and shown; "
                                             "ignored by kafkalite, which has no replication quotas.",
    "follower.replication.throttled.replicas": "Replicas (partition:broker, or *) whose follower-side "
                                               "replication traffic is throttled. Stored and shown; "
                                               "ignored by kafkalite, which has no replication quotas.",
    "remote.storage.enable": "Tiered storage for this topic; not available in kafkalite, only false "
                             "is accepted.",
    "local.retention.ms": "Local retention time with tiered storage; -2 means retention.ms.",
    "local.retention.bytes": "Local retention size with tiered storage; -2 means retention.bytes.",
    "remote.log.copy.disable": "Stops copying segments to tiered storage; only false is accepted, as by "
                               "a ZooKeeper-mode Kafka broker.",
    "remote.log.delete.on.disable": "Whether disabling tiered storage deletes the remote data; only false "
                                    "is accepted, as by a ZooKeeper-mode Kafka broker.",
    "compression.gzip.level": "gzip level (1-9, or -1 for the codec's default) for batches the broker "
                              "compresses for this topic. Stored and shown; ignored by kafkalite, "
                              "which compresses with the codec's default level.",
    "compression.lz4.level": "lz4 level (1-17) for batches the broker compresses for this topic. Stored "
                             "and shown; ignored by kafkalite, which compresses with the codec's "
                             "default level.",
    "compression.zstd.level": "zstd level (-131072 to 22) for batches the broker compresses for this "
                              "topic. Stored and shown; ignored by kafkalite, which compresses with "
                              "the codec's default level.",
}


# MetadataVersion of Kafka 3.9, in order: (release, sub-version). The releases up to
# LATEST_PRODUCTION (3.9-IV0) are valid on their own too, naming their newest sub-version.
_METADATA_VERSIONS: tuple[tuple[str, str], ...] = (
    ("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", ""),
    ("0.10.0", "IV0"), ("0.10.0", "IV1"), ("0.10.1", "IV0"), ("0.10.1", "IV1"), ("0.10.1", "IV2"),
    ("0.10.2", "IV0"), ("0.11.0", "IV0"), ("0.11.0", "IV1"), ("0.11.0", "IV2"), ("1.0", "IV0"),
    ("1.1", "IV0"), ("2.0", "IV0"), ("2.0", "IV1"), ("2.1", "IV0"), ("2.1", "IV1"), ("2.1", "IV2"),
    ("2.2", "IV0"), ("2.2", "IV1"), ("2.3", "IV0"), ("2.3", "IV1"), ("2.4", "IV0"), ("2.4", "IV1"),
    ("2.5", "IV0"), ("2.6", "IV0"), ("2.7", "IV0"), ("2.7", "IV1"), ("2.7", "IV2"), ("2.8", "IV0"),
    ("2.8", "IV1"), ("3.0", "IV0"), ("3.0", "IV1"), ("3.1", "IV0"), ("3.2", "IV0"), ("3.3", "IV0"),
    ("3.3", "IV1"), ("3.3", "IV2"), ("3.3", "IV3"), ("3.4", "IV0"), ("3.5", "IV0"), ("3.5", "IV1"),
    ("3.5", "IV2"), ("3.6", "IV0"), ("3.6", "IV1"), ("3.6", "IV2"), ("3.7", "IV0"), ("3.7", "IV1"),
    ("3.7", "IV2"), ("3.7", "IV3"), ("3.7", "IV4"), ("3.8", "IV0"), ("3.9", "IV0"),
    ("4.0", "IV0"), ("4.0", "IV1"))
_LATEST_PRODUCTION_INDEX = _METADATA_VERSIONS.index(("3.9", "IV0"))
_IBP_VERSIONS: frozenset[str] = frozenset(
    [f"{r}-{sub}" if sub else r for r, sub in _METADATA_VERSIONS]
    + [r for r, _sub in _METADATA_VERSIONS[:_LATEST_PRODUCTION_INDEX + 1]])


def is_valid_metadata_version(value: str) -> bool:
    """MetadataVersion.fromVersionString: the first 3 dot-separated parts of a "0." version (2
    otherwise) must name a known version, so "0.10.0.1" and "3.9.1" are accepted."""
    parts = value.split(".")
    segments = 3 if value.startswith("0.") else 2
    key = value if segments >= len(parts) else ".".join(parts[:segments])
    return key in _IBP_VERSIONS


def message_format_version_warning(topic: str, value: str) -> str | None:
    """LogConfig.MessageFormatVersion.topicWarningMessage, for a value Kafka warns about: one
    naming a format before v2 (a version before 0.11.0), which a 3.x broker ignores."""
    if not is_valid_metadata_version(value):
        return None
    parts = value.split(".")
    if value.startswith("0.") and len(parts) >= 2 and parts[1].split("-")[0].isdigit() \
            and int(parts[1].split("-")[0]) < 11:
        return (f"Topic configuration message.format.version with value `{value}` is ignored for `{topic}` "
                "because the inter-broker protocol version `3.9-IV0` is greater or equal than 3.0. This "
                "configuration is deprecated and it will be removed in Apache Kafka 4.0.")
    return None


def _equals_ignore_case(a: str, b: str) -> bool:
    """String.equalsIgnoreCase, char by char."""
    return len(a) == len(b) and all(
        x == y or x.upper() == y.upper() or x.upper().lower() == y.upper().lower() for x, y in zip(a, b))


def _invalid(key: str, value: object, reason: str) -> InvalidTopicConfigError:
    # ConfigException(name, value, message)
    return InvalidTopicConfigError(key, f"Invalid value {value} for configuration {key}: {reason}")


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _parse_value(key: str, raw: str) -> object:
    """ConfigDef.parseType followed by the key's validator, with Kafka's messages."""
    kind = _TYPES[key]
    trimmed = java_trim(raw)
    if kind == "BOOLEAN":
        if _equals_ignore_case(trimmed, "true"):
            value = True
        elif _equals_ignore_case(trimmed, "false"):
            value = False
        else:
            raise _invalid(key, raw, "Expected value to be either true or false")
        return value
    if kind == "STRING" and key == "message.format.version":
        # MetadataVersionValidator
        if not is_valid_metadata_version(trimmed):
            raise _invalid(key, trimmed, f"Version {trimmed} is not a valid version")
        return trimmed
    if kind == "STRING":
        if trimmed not in _ENUMS[key]:
            raise _invalid(key, trimmed, f"String must be one of: {', '.join(_ENUMS[key])}")
        return trimmed
    if kind == "LIST":
        items = _LIST_SEP.split(trimmed) if trimmed else []
        if key in _THROTTLED:
            # ThrottledReplicaListValidator: "*" alone, or partition:broker pairs (empty allowed)
            if not (all(_THROTTLED_ENTRY.fullmatch(java_trim(i)) for i in items) or "".join(items) == "*"):
                raise _invalid(key, _java_list(items),
                               f"{key} must be the literal '*' or a list of replicas in the following "
                               "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
            return ",".join(items)
        if any(item == "" for item in items):
            raise InvalidTopicConfigError(key, f"Configuration '{key}' values must not be empty.")
        for item in items:
            if item not in _ENUMS[key]:
                raise _invalid(key, item, f"String must be one of: {', '.join(_ENUMS[key])}")
        return ",".join(items)
    if kind == "DOUBLE":
        try:
            number = float(trimmed)
        except ValueError:
            raise _invalid(key, raw, "Not a number of type DOUBLE") from None
        if not 0.0 <= number <= 1.0:   # min.cleanable.dirty.ratio: Range.between(0, 1)
            raise _invalid(key, java_double_str(number),
                           "Value must be no more than 1" if number > 1 else "Value must be at least 0")
        return number
    value = parse_java_integer(trimmed, _BITS[kind])
    if value is None:
        raise _invalid(key, raw, f"Not a number of type {kind}")
    if key == "compression.gzip.level":
        lo, hi, default = _GZIP_LEVELS
        if value > hi or (value < lo and value != default):
            raise _invalid(key, value, f"Value must be between {lo} and {hi} or equal to {default}")
        return value
    lo = _MIN.get(key)
    if lo is not None and value < lo:
        raise _invalid(key, value, f"Value must be at least {lo}")
    hi = _MAX.get(key)
    if hi is not None and value > hi:
        raise _invalid(key, value, f"Value must be no more than {hi}")
    return value


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Check every key is a known topic config with a valid value; return the non-null ones."""
    out: dict[str, str] = {}
    for key, raw in configs.items():
        if key not in TOPIC_CONFIG_ATTRS:
            raise InvalidTopicConfigError(key, f"Unknown topic config name: {key}")
        if raw is None:
            raise InvalidTopicConfigError(key, f"Null value not supported for topic configs: {key}")
        _parse_value(key, raw)
        out[key] = raw
    return out


def topic_log_config(defaults: LogConfig, overrides: dict[str, str]) -> LogConfig:
    changes = {TOPIC_CONFIG_ATTRS[k]: _parse_value(k, v) for k, v in overrides.items()}
    return defaults.with_overrides(**changes) if changes else defaults


def check_log_config(cfg: LogConfig) -> None:
    """LogConfig.validateValues and the tiered-storage checks on the merged config."""
    if cfg.remote_log_delete_on_disable or cfg.remote_log_copy_disable:
        # LogConfig.validateNoInvalidRemoteStorageConfigsInZK: a ZooKeeper-mode broker refuses both
        raise InvalidTopicConfigError(
            "remote.log.copy.disable",
            "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under "
            "Zookeeper's mode.")
    if cfg.min_compaction_lag_ms > cfg.max_compaction_lag_ms:
        raise InvalidTopicConfigError(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({cfg.min_compaction_lag_ms}) > "
            f"max.compaction.lag.ms ({cfg.max_compaction_lag_ms})")
    if cfg.remote_storage_enable:
        # remote.log.storage.system.enable is never true here: no tiered storage
        raise InvalidTopicConfigError(
            "remote.storage.enable",
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
            "remote log storage.")


def validate_topic_log_config(defaults: LogConfig, configs: dict[str, str | None]) -> tuple[dict[str, str], LogConfig]:
    """Everything Kafka checks for a topic's override set: names, values, then the merged config's
    cross-checks. Returns (the overrides to store, the topic's LogConfig)."""
    overrides = validate_topic_configs(configs)
    cfg = topic_log_config(defaults, overrides)
    check_log_config(cfg)
    return overrides, cfg


def java_double_str(x: float) -> str:
    """Java's Double.toString: plain decimal in [1e-3, 1e7), otherwise d.dddE<n>."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        return repr(x)          # Python prints this range positionally, always with a '.'
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = len(digits) + int(exponent) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{exp10}"


def render_value(value: object) -> str:
    """ConfigDef.convertToString of a parsed value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    return str(value)


def effective_topic_configs(cfg: LogConfig) -> dict[str, str]:
    """The topic-level view of a LogConfig (property name -> string value), as DescribeConfigs shows."""
    return {key: render_value(getattr(cfg, attr)) for key, attr in TOPIC_CONFIG_ATTRS.items()}


def config_type(key: str) -> str:
    """Kafka's ConfigDef type name of a topic config ("UNKNOWN" for anything else)."""
    return _TYPES.get(key, "UNKNOWN")


def is_list_config(key: str) -> bool:
    return _TYPES.get(key) == "LIST"


def list_default(key: str) -> str:
    """The LogConfig ConfigDef default of a LIST config, as a string (what IncrementalAlterConfigs
    APPEND/SUBTRACT start from when the topic has no override): Kafka's own default, not the
    broker's synonym."""
    return render_value(getattr(LogConfig(), TOPIC_CONFIG_ATTRS[key]))
