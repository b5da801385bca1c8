"""Topic-level config validation. Expected messages and parsed values are what Kafka's ConfigDef
(kafka-clients 4.3.0) produced for the same inputs with LogConfig's types and validators (3.x
bounds: segment.bytes at least 14)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS, LogConfig
from kafkalite.config.topic_config import (TOPIC_CONFIG_DOCS, InvalidTopicConfigError, _TYPES, config_type,
                                           effective_topic_configs, is_list_config, java_double_str,
                                           list_default, topic_log_config, validate_topic_configs,
                                           validate_topic_log_config)


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


# -- the remaining Kafka 3.x topic configs --------------------------------------------------------

NEW_ACCEPTED = [
    ("message.timestamp.before.max.ms", "0", 0),
    ("message.timestamp.after.max.ms", " 3600000 ", 3600000),
    ("message.timestamp.difference.max.ms", "9223372036854775807", 2**63 - 1),
    ("compression.type", "zstd", "zstd"),
    ("compression.type", " producer ", "producer"),
    ("compression.type", "uncompressed", "uncompressed"),
    ("unclean.leader.election.enable", "TRUE", True),
    ("message.downconversion.enable", "false", False),
    ("leader.replication.throttled.replicas", "*", "*"),
    ("leader.replication.throttled.replicas", " 0:1 , 1:0 ", "0:1,1:0"),
    ("follower.replication.throttled.replicas", "", ""),
    ("follower.replication.throttled.replicas", "0:1,,2:0", "0:1,,2:0"),   # empty entries match the validator
    ("remote.storage.enable", "false", False),
    ("local.retention.ms", "-2", -2),
    ("local.retention.bytes", "1000", 1000),
]

_THROTTLE_REASON = ("must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
NEW_REJECTED = [
    ("message.timestamp.before.max.ms", "-1", _msg("message.timestamp.before.max.ms", "-1", "Value must be at least 0")),
    ("message.timestamp.after.max.ms", "x", _msg("message.timestamp.after.max.ms", "x", "Not a number of type LONG")),
    ("message.timestamp.difference.max.ms", "-5",
     _msg("message.timestamp.difference.max.ms", "-5", "Value must be at least 0")),
    ("compression.type", "zip", _msg("compression.type", "zip",
                                     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")),
    ("compression.type", "GZIP", _msg("compression.type", "GZIP",
                                      "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")),
    ("unclean.leader.election.enable", "1", _msg("unclean.leader.election.enable", "1",
                                                 "Expected value to be either true or false")),
    ("leader.replication.throttled.replicas", "0:x",
     _msg("leader.replication.throttled.replicas", "[0:x]", "leader.replication.throttled.replicas " + _THROTTLE_REASON)),
    ("follower.replication.throttled.replicas", "*,0:1",
     _msg("follower.replication.throttled.replicas", "[*, 0:1]",
          "follower.replication.throttled.replicas " + _THROTTLE_REASON)),
    ("local.retention.ms", "-3", _msg("local.retention.ms", "-3", "Value must be at least -2")),
]


@pytest.mark.parametrize("key,raw,parsed", NEW_ACCEPTED)
def test_new_topic_configs_accepted(key: str, raw: str, parsed: object) -> None:
    overrides, cfg = validate_topic_log_config(LogConfig(), {key: raw})
    assert overrides == {key: raw}
    assert getattr(cfg, TOPIC_CONFIG_ATTRS[key]) == parsed


@pytest.mark.parametrize("key,raw,message", NEW_REJECTED)
def test_new_topic_configs_rejected(key: str, raw: str, message: str) -> None:
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_log_config(LogConfig(), {key: raw})
    assert (exc.value.key, str(exc.value)) == (key, message)


def test_cross_checks_on_the_merged_config() -> None:
    # LogConfig.validateValues: against the broker default too, not only the overrides given
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_log_config(LogConfig(max_compaction_lag_ms=1000), {"min.compaction.lag.ms": "1001"})
    assert str(exc.value) == "conflict topic config setting min.compaction.lag.ms (1001) > max.compaction.lag.ms (1000)"
    assert validate_topic_log_config(LogConfig(max_compaction_lag_ms=1000), {"min.compaction.lag.ms": "1000"})[0] == \
        {"min.compaction.lag.ms": "1000"}
    with pytest.raises(InvalidTopicConfigError) as exc:
        validate_topic_log_config(LogConfig(), {"remote.storage.enable": "true"})
    assert (exc.value.key, str(exc.value)) == (
        "remote.storage.enable",
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")


def test_timestamp_bounds_fall_back_to_difference_max_ms() -> None:
    cfg = topic_log_config(LogConfig(), {"message.timestamp.difference.max.ms": "5000"})
    assert (cfg.effective_timestamp_before_max_ms, cfg.effective_timestamp_after_max_ms) == (5000, 5000)
    cfg = topic_log_config(LogConfig(), {"message.timestamp.difference.max.ms": "5000",
                                         "message.timestamp.after.max.ms": "100"})
    assert (cfg.effective_timestamp_before_max_ms, cfg.effective_timestamp_after_max_ms) == (5000, 100)


@pytest.mark.parametrize("value,java", [
    (0.5, "0.5"), (1.0, "1.0"), (0.0, "0.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1.25e-5, "1.25E-5"),
    (12345678.0, "1.2345678E7"), (1e7, "1.0E7"), (9999999.0, "9999999.0"), (0.1, "0.1")])
def test_java_double_str(value: float, java: str) -> None:
    assert java_double_str(value) == java


def test_config_types_and_list_defaults() -> None:
    assert (config_type("cleanup.policy"), config_type("retention.ms"), config_type("segment.bytes"),
            config_type("preallocate"), config_type("min.cleanable.dirty.ratio"), config_type("compression.type"),
            config_type("nope")) == ("LIST", "LONG", "INT", "BOOLEAN", "DOUBLE", "STRING", "UNKNOWN")
    assert list_default("cleanup.policy") == "delete"
    assert list_default("leader.replication.throttled.replicas") == ""
    assert is_list_config("follower.replication.throttled.replicas") and not is_list_config("retention.ms")
    assert set(TOPIC_CONFIG_DOCS) == set(TOPIC_CONFIG_ATTRS)
