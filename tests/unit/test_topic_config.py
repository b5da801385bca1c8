"""Topic-level config validation. Expected messages and parsed values are what Kafka's ConfigDef
(kafka-clients 4.3.0) produced for the same inputs with LogConfig's types and validators (3.x
bounds: segment.bytes at least 14)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS, LogConfig
from kafkalite.config.topic_config import (InvalidTopicConfigError, _TYPES, effective_topic_configs,
                                           topic_log_config, validate_topic_configs)


def _msg(key: str, value: str, reason: str) -> str:
    return f"Invalid value {value} for configuration {key}: {reason}"


# (key, raw value, parsed LogConfig value) accepted by Kafka
ACCEPTED = [
    ("segment.bytes", "14", 14),
    ("segment.bytes", " 100 ", 100),
    ("segment.bytes", "\t7000\n", 7000),
    ("segment.bytes", "+20", 20),
    ("segment.bytes", "\u0661\u0662\u0663", 123),       # Java's parseInt takes any Unicode digit
    ("segment.bytes", "2147483647", 2**31 - 1),
    ("segment.ms", "9223372036854775807", 2**63 - 1),
    ("segment.ms", "\uff15", 5),
    ("segment.jitter.ms", "0", 0),
    ("segment.index.bytes", "4", 4),
    ("index.interval.bytes", "0", 0),
    ("retention.ms", "-1", -1),
    ("retention.bytes", "-5", -5),                      # no validator: any negative is unlimited
    ("retention.bytes", "-9223372036854775808", -2**63),
    ("max.message.bytes", "0", 0),
    ("file.delete.delay.ms", "0", 0),
    ("min.insync.replicas", "5\u000b", 5),              # trim() strips every char <= U+0020
    ("min.insync.replicas", "\u00005", 5),
    ("flush.messages", "1", 1),
    ("flush.ms", "0", 0),
    ("preallocate", "TRUE", True),
    ("preallocate", " true ", True),
    ("preallocate", "False", False),
    ("preallocate", "fal\u017fe", False),               # equalsIgnoreCase: U+017F uppercases to S
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("message.timestamp.type", " CreateTime ", "CreateTime"),
    ("cleanup.policy", "delete", "delete"),
    ("cleanup.policy", "compact,delete", "compact,delete"),
    ("cleanup.policy", " compact , delete ", "compact,delete"),
    ("cleanup.policy", "", ""),                          # an empty list is valid
]

# (key, raw value, Kafka's message)
REJECTED = [
    ("segment.bytes", "13", _msg("segment.bytes", "13", "Value must be at least 14")),
    ("segment.bytes", "\t7\n", _msg("segment.bytes", "7", "Value must be at least 14")),  # parsed value
    ("segment.bytes", "-0", _msg("segment.bytes", "0", "Value must be at least 14")),
    ("segment.bytes", "abc", _msg("segment.bytes", "abc", "Not a number of type INT")),
    ("segment.bytes", "2147483648", _msg("segment.bytes", "2147483648", "Not a number of type INT")),
    ("segment.bytes", "1_000", _msg("segment.bytes", "1_000", "Not a number of type INT")),
    ("segment.bytes", "1.5", _msg("segment.bytes", "1.5", "Not a number of type INT")),
    ("segment.bytes", "", _msg("segment.bytes", "", "Not a number of type INT")),
    ("segment.ms", "0", _msg("segment.ms", "0", "Value must be at least 1")),
    ("segment.ms", "abc", _msg("segment.ms", "abc", "Not a number of type LONG")),
    ("segment.ms", "9223372036854775808", _msg("segment.ms", "9223372036854775808", "Not a number of type LONG")),
    ("segment.ms", "-9223372036854775809", _msg("segment.ms", "-9223372036854775809", "Not a number of type LONG")),
    ("segment.ms", "1e3", _msg("segment.ms", "1e3", "Not a number of type LONG")),
    ("segment.ms", "0x10", _msg("segment.ms", "0x10", "Not a number of type LONG")),
    ("segment.jitter.ms", "-1", _msg("segment.jitter.ms", "-1", "Value must be at least 0")),
    ("segment.index.bytes", "3", _msg("segment.index.bytes", "3", "Value must be at least 4")),
    ("index.interval.bytes", "-1", _msg("index.interval.bytes", "-1", "Value must be at least 0")),
    ("retention.ms", "-2", _msg("retention.ms", "-2", "Value must be at least -1")),
    ("max.message.bytes", "-1", _msg("max.message.bytes", "-1", "Value must be at least 0")),
    ("file.delete.delay.ms", "-1", _msg("file.delete.delay.ms", "-1", "Value must be at least 0")),
    ("min.insync.replicas", "0", _msg("min.insync.replicas", "0", "Value must be at least 1")),
    ("min.insync.replicas", "-2147483649",
     _msg("min.insync.replicas", "-2147483649", "Not a number of type INT")),  # type before range
    ("min.insync.replicas", "\u00a05", _msg("min.insync.replicas", "\u00a05", "Not a number of type INT")),
    ("flush.messages", "0", _msg("flush.messages", "0", "Value must be at least 1")),
    ("flush.ms", "-1", _msg("flush.ms", "-1", "Value must be at least 0")),
    ("preallocate", "yes", _msg("preallocate", "yes", "Expected value to be either true or false")),
    ("preallocate", "", _msg("preallocate", "", "Expected value to be either true or false")),
    ("message.timestamp.type", "createtime",
     _msg("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime")),
    ("message.timestamp.type", "",
     _msg("message.timestamp.type", "", "String must be one of: CreateTime, LogAppendTime")),
    ("cleanup.policy", "foo", _msg("cleanup.policy", "foo", "String must be one of: compact, delete")),
    ("cleanup.policy", "delete,foo", _msg("cleanup.policy", "foo", "String must be one of: compact, delete")),
    ("cleanup.policy", "Delete", _msg("cleanup.policy", "Delete", "String must be one of: compact, delete")),
    ("cleanup.policy", "delete,,compact", "Configuration 'cleanup.policy' values must not be empty."),
    ("cleanup.policy", "delete,", "Configuration 'cleanup.policy' values must not be empty."),
]


@pytest.mark.parametrize("key,raw,parsed", ACCEPTED)
def test_accepted_values(key: str, raw: str, parsed: object) -> None:
    assert validate_topic_configs({key: raw}) == {key: raw}
    cfg = topic_log_config(LogConfig(), {key: raw})
    assert getattr(cfg, TOPIC_CONFIG_ATTRS[key]) == parsed


@pytest.mark.parametrize("key,raw,message", REJECTED)
def test_rejected_values_name_the_key(key: str, raw: str, message: str) -> None:
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_configs({"retention.ms": "1000", key: raw})
    assert exc.value.key == key
    assert str(exc.value) == message


def test_unknown_and_null_configs() -> None:
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_configs({"segment.ms": "1000", "no.such.config": "1"})
    assert (exc.value.key, str(exc.value)) == ("no.such.config", "Unknown topic config name: no.such.config")
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_configs({"retention.ms": None})
    assert (exc.value.key, str(exc.value)) == ("retention.ms", "Null value not supported for topic configs: retention.ms")
    # broker-level names are not topic configs
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_configs({"log.retention.ms": "1"})
    assert exc.value.key == "log.retention.ms"


def test_validate_returns_raw_values_of_all_keys() -> None:
    given_configs = {"cleanup.policy": "compact", "retention.ms": " 5000 ", "preallocate": "TRUE"}
    assert validate_topic_configs(given_configs) == given_configs
    assert validate_topic_configs({}) == {}


def test_every_topic_config_has_a_kafka_type() -> None:
    assert set(_TYPES) == set(TOPIC_CONFIG_ATTRS)


def test_topic_log_config_merges_over_defaults() -> None:
    defaults = LogConfig(segment_bytes=1 << 20, retention_ms=1000)
    assert topic_log_config(defaults, {}) is defaults
    cfg = topic_log_config(defaults, {"retention.ms": "-1", "cleanup.policy": "compact , delete",
                                      "message.timestamp.type": "LogAppendTime", "preallocate": "true",
                                      "min.insync.replicas": "2"})
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.cleanup_policy, cfg.message_timestamp_type,
            cfg.preallocate, cfg.min_insync_replicas) == (1 << 20, -1, "compact,delete", "LogAppendTime", True, 2)
    assert defaults.retention_ms == 1000  # frozen: a new object


def test_effective_topic_configs_round_trip() -> None:
    cfg = LogConfig()
    eff = effective_topic_configs(cfg)
    assert set(eff) == set(TOPIC_CONFIG_ATTRS)
    assert eff["segment.bytes"] == "1073741824" and eff["retention.bytes"] == "-1"
    assert eff["cleanup.policy"] == "delete" and eff["preallocate"] == "false"
    assert eff["message.timestamp.type"] == "CreateTime"
    assert eff["flush.messages"] == str(2**63 - 1)
    # what DescribeConfigs shows parses back to the same config
    assert topic_log_config(LogConfig(segment_bytes=1), eff) == cfg


@given(st.text(max_size=12))
def test_any_string_either_validates_or_names_the_key(raw: str) -> None:
    for key in TOPIC_CONFIG_ATTRS:
        try:
            validate_topic_configs({key: raw})
        except InvalidTopicConfigError as e:
            assert e.key == key and key in str(e)
