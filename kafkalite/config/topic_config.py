"""Per-topic configuration: validating topic-level overrides and merging them over broker defaults."""
from __future__ import annotations

from dataclasses import fields

from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS, LogConfig


class InvalidTopicConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


_MIN: dict[str, int] = {
    "segment.bytes": 14,
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
    "retention.bytes": -1,
}
_ENUMS: dict[str, tuple[str, ...]] = {
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
}
_FIELD_TYPES = {f.name: f.type for f in fields(LogConfig)}


def _parse_value(key: str, raw: str) -> object:
    attr = TOPIC_CONFIG_ATTRS[key]
    kind = _FIELD_TYPES[attr]
    if key in _ENUMS:
        if raw not in _ENUMS[key]:
            raise InvalidTopicConfigError(key, f"Invalid value {raw} for configuration {key}: "
                                               f"String must be one of: {', '.join(_ENUMS[key])}")
        return raw
    if key == "cleanup.policy":
        parts = [p.strip() for p in raw.split(",") if p.strip()]
        if not parts or any(p not in ("delete", "compact") for p in parts):
            raise InvalidTopicConfigError(key, f"Invalid value {raw} for configuration {key}: "
                                               "must be a list of [delete, compact]")
        return ",".join(parts)
    if kind in ("bool", bool):
        if raw.lower() not in ("true", "false"):
            raise InvalidTopicConfigError(key, f"Invalid value {raw} for configuration {key}: "
                                               "Expected value to be either true or false")
        return raw.lower() == "true"
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidTopicConfigError(key, f"Invalid value {raw} for configuration {key}: "
                                           "Not a number of type LONG") from None
    lo = _MIN.get(key)
    if lo is not None and value < lo:
        raise InvalidTopicConfigError(key, f"Invalid value {raw} for configuration {key}: "
                                           f"Value must be at least {lo}")
    if key in ("segment.bytes", "segment.index.bytes", "index.interval.bytes",
               "max.message.bytes", "min.insync.replicas") and value > 2**31 - 1:
        raise InvalidTopicConfigError(key, f"Invalid value {raw} for configuration {key}: "
                                           "Not a number of type INT")
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
