"""Per-topic configuration: validating topic-level overrides and merging them over broker defaults."""
from __future__ import annotations

import re

from kafkalite.config.properties import java_trim
from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS, LogConfig


class InvalidTopicConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


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
}
_ENUMS: dict[str, tuple[str, ...]] = {
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "cleanup.policy": ("compact", "delete"),
}
_BOUNDS = {"INT": (-2**31, 2**31 - 1), "LONG": (-2**63, 2**63 - 1)}
_NUMBER = re.compile(r"[+-]?\d+")     # Java's parseInt/parseLong: Unicode digits, no '_' or spaces
_LIST_SEP = re.compile(r"\s*,\s*")   # ConfigDef's COMMA_WITH_WHITESPACE




def _equals_ignore_case(a: str, b: str) -> bool:
    """String.equalsIgnoreCase, char by char."""
    return len(a) == len(b) and all(
        x == y or x.upper() == y.upper() or x.upper().lower() == y.upper().lower() for x, y in zip(a, b))


def _invalid(key: str, value: object, reason: str) -> InvalidTopicConfigError:
    # ConfigException(name, value, message)
    return InvalidTopicConfigError(key, f"Invalid value {value} for configuration {key}: {reason}")


def _parse_value(key: str, raw: str) -> object:
    """ConfigDef.parseType followed by the key's validator, with Kafka's messages."""
    kind = _TYPES[key]
    trimmed = java_trim(raw)
    if kind == "BOOLEAN":
        if _equals_ignore_case(trimmed, "true"):
            return True
        if _equals_ignore_case(trimmed, "false"):
            return False
        raise _invalid(key, raw, "Expected value to be either true or false")
    if kind == "STRING":
        if trimmed not in _ENUMS[key]:
            raise _invalid(key, trimmed, f"String must be one of: {', '.join(_ENUMS[key])}")
        return trimmed
    if kind == "LIST":
        items = _LIST_SEP.split(trimmed) if trimmed else []
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
            raise _invalid(key, number, "Value must be no more than 1" if number > 1 else "Value must be at least 0")
        return number
    lo_type, hi_type = _BOUNDS[kind]
    if not _NUMBER.fullmatch(trimmed) or not lo_type <= int(trimmed) <= hi_type:
        raise _invalid(key, raw, f"Not a number of type {kind}")
    value = int(trimmed)
    lo = _MIN.get(key)
    if lo is not None and value < lo:
        raise _invalid(key, value, f"Value must be at least {lo}")
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


def effective_topic_configs(cfg: LogConfig) -> dict[str, str]:
    """The topic-level view of a LogConfig (property name -> string value), as DescribeConfigs shows."""
    out: dict[str, str] = {}
    for key, attr in TOPIC_CONFIG_ATTRS.items():
        v = getattr(cfg, attr)
        out[key] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out
