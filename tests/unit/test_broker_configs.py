"""DescribeConfigs' values, sources and synonyms (ConfigHelper's rules) and IncrementalAlterConfigs'
operations, without a broker."""
from __future__ import annotations

import pytest

from kafkalite.config.kafka_config_def import KAFKA_DYNAMIC_DEFAULTS
from kafkalite.config.broker_configs import (SOURCE_DEFAULT_CONFIG, SOURCE_DYNAMIC_TOPIC_CONFIG,
                                             SOURCE_STATIC_BROKER_CONFIG, BrokerConfigView, ConfigSynonym,
                                             broker_config_type, broker_log_config)
from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS
from kafkalite.config.server_config import KafkaConfig, build_config
from kafkalite.config.topic_config import topic_log_config
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.server.handlers.incremental_alter_configs import (OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT,
                                                                 apply_ops)

S, D, T = SOURCE_STATIC_BROKER_CONFIG, SOURCE_DEFAULT_CONFIG, SOURCE_DYNAMIC_TOPIC_CONFIG


def view(props: dict[str, str]) -> tuple[BrokerConfigView, KafkaConfig]:
    cfg = build_config(props).config
    return BrokerConfigView(cfg), cfg


def topic(v: BrokerConfigView, cfg: KafkaConfig, key: str, overrides: dict[str, str] | None = None):
    overrides = overrides or {}
    entries = v.topic_entries(topic_log_config(broker_log_config(cfg), overrides), overrides, [key])
    assert len(entries) == 1
    return entries[0]


def test_retention_ms_from_log_retention_hours_has_no_synonyms() -> None:
    # log.retention.ms has no default: the synonyms list starts with it or is empty (dropWhile)
    v, cfg = view({"log.retention.hours": "24"})
    e = topic(v, cfg, "retention.ms")
    assert (e.value, e.source, e.synonyms, e.read_only, e.config_type) == ("86400000", D, (), False, "LONG")


def test_retention_ms_from_log_retention_ms() -> None:
    v, cfg = view({"log.retention.ms": "5000", "log.retention.hours": "24"})
    e = topic(v, cfg, "retention.ms")
    assert (e.value, e.source) == ("5000", S)
    assert e.synonyms == (ConfigSynonym("log.retention.ms", "5000", S), ConfigSynonym("log.retention.hours", "24", S),
                          ConfigSynonym("log.retention.hours", "168", D))


def test_topic_override_comes_first() -> None:
    v, cfg = view({"log.retention.minutes": "10"})
    e = topic(v, cfg, "retention.ms", {"retention.ms": " 7000 "})
    assert (e.value, e.source) == ("7000", T)
    # the broker side is looked up under log.retention.ms, which is unset: Kafka drops every synonym
    # before it (log.retention.minutes, log.retention.hours), so only the override remains
    assert e.synonyms == (ConfigSynonym("retention.ms", "7000", T),)


def test_static_and_default_synonyms() -> None:
    v, cfg = view({"log.segment.bytes": "2048"})
    e = topic(v, cfg, "segment.bytes")
    assert (e.value, e.source, e.config_type) == ("2048", S, "INT")
    assert e.synonyms == (ConfigSynonym("log.segment.bytes", "2048", S),
                          ConfigSynonym("log.segment.bytes", "1073741824", D))
    e = topic(v, cfg, "cleanup.policy", {"cleanup.policy": "compact"})
    assert (e.value, e.source) == ("compact", T)
    assert e.synonyms == (ConfigSynonym("cleanup.policy", "compact", T),
                          ConfigSynonym("log.cleanup.policy", "delete", D))
    e = topic(v, cfg, "max.message.bytes")
    assert (e.value, e.source, e.synonyms) == ("1048588", D, (ConfigSynonym("message.max.bytes", "1048588", D),))


def test_configs_without_a_broker_synonym() -> None:
    v, cfg = view({})
    for key in ("leader.replication.throttled.replicas", "remote.storage.enable"):
        e = topic(v, cfg, key)
        assert (e.source, e.synonyms) == (D, ())
    e = topic(v, cfg, "segment.ms")   # log.roll.ms unset: dropped like log.retention.ms
    assert (e.value, e.source, e.synonyms) == ("604800000", D, ())


def test_broker_level_synonyms_reach_the_topic() -> None:
    v, cfg = view({"compression.type": "gzip", "log.message.timestamp.after.max.ms": "60000",
                   "unclean.leader.election.enable": "true"})
    assert topic(v, cfg, "compression.type").value == "gzip"
    assert topic(v, cfg, "compression.type").source == S
    assert topic(v, cfg, "message.timestamp.after.max.ms").value == "60000"
    assert topic(v, cfg, "unclean.leader.election.enable").value == "true"


def test_topic_entries_cover_every_topic_config_sorted() -> None:
    v, cfg = view({})
    entries = v.topic_entries(broker_log_config(cfg), {}, None)
    assert [e.name for e in entries] == sorted(TOPIC_CONFIG_ATTRS)
    assert v.topic_entries(broker_log_config(cfg), {}, ["retention.ms", "no.such", "retention.ms"])[0].name == \
        "retention.ms"
    assert len(v.topic_entries(broker_log_config(cfg), {}, ["no.such"])) == 0


def test_broker_entries() -> None:
    v, cfg = view({"log.retention.hours": "24", "num.partitions": "3"})
    by_name = {e.name: e for e in v.broker_entries()}
    # kafkalite's own settings, and Kafka's dynamic configs it has no setting for (SSL, SASL, ...)
    assert len(by_name) == len(KafkaConfig.model_fields) + len(KAFKA_DYNAMIC_DEFAULTS)
    assert (by_name["background.threads"].value, by_name["background.threads"].read_only) == ("10", False)
    assert (by_name["ssl.keystore.password"].is_sensitive, by_name["ssl.keystore.password"].config_type) == \
        (True, "PASSWORD")
    e = by_name["log.retention.hours"]
    assert (e.value, e.source, e.read_only, e.config_type) == ("24", S, True, "INT")
    assert e.synonyms == (ConfigSynonym("log.retention.hours", "24", S), ConfigSynonym("log.retention.hours", "168", D))
    e = by_name["log.retention.ms"]
    assert (e.value, e.source, e.synonyms, e.config_type) == (None, D, (), "LONG")
    e = by_name["num.partitions"]
    assert (e.value, e.source) == ("3", S)
    e = by_name["delete.topic.enable"]
    assert (e.value, e.source, e.config_type) == ("true", D, "BOOLEAN")
    assert e.synonyms == (ConfigSynonym("delete.topic.enable", "true", D),)
    assert by_name["log.cleanup.policy"].config_type == "LIST"
    assert (broker_config_type("offsets.topic.replication.factor"), broker_config_type("log.cleaner.min.cleanable.ratio"),
            broker_config_type("listeners"), broker_config_type("log.flush.interval.ms")) == \
        ("SHORT", "DOUBLE", "STRING", "LONG")
    assert [e.name for e in v.broker_entries(["num.partitions", "nope"])] == ["num.partitions"]


def test_set_configs_kafkalite_ignores_are_static_with_their_value() -> None:
    """A Kafka config without a kafkalite setting (accepted and ignored) given in server.properties
    is STATIC_BROKER_CONFIG with the value given, rendered as Kafka's ConfigDef would, as a Kafka
    broker shows it; through the dynamic config (what the handlers use) as without it."""
    from kafkalite.config.dynamic_broker_config import DynamicBrokerConfig

    cfg = build_config({"background.threads": " 07 ", "auto.include.jmx.reporter": "TRUE"}).config
    for v in (BrokerConfigView(cfg), BrokerConfigView(cfg, DynamicBrokerConfig(cfg, 0))):
        by_name = {e.name: e for e in v.broker_entries(["background.threads", "num.network.threads"])}
        e = by_name["background.threads"]
        assert (e.value, e.source, e.read_only) == ("7", S, False)
        assert e.synonyms == (ConfigSynonym("background.threads", "7", S), ConfigSynonym("background.threads", "10", D))
        e = by_name["num.network.threads"]
        assert (e.value, e.source, e.synonyms) == ("3", D, (ConfigSynonym("num.network.threads", "3", D),))
    assert cfg.unmodelled_static == {"background.threads": "7", "auto.include.jmx.reporter": "true"}


def test_ignored_settings_keep_java_parsing_and_do_not_reach_the_topics() -> None:
    """A value Java's parseInt refuses (or out of the type's range) is shown as given; an ignored
    broker default of a topic config (log.local.retention.ms, compression.gzip.level) stays out of
    the topic's synonyms: kafkalite does not apply it, so the topic shows the built-in value."""
    cfg = build_config({"background.threads": "1_0", "metrics.num.samples": "+2147483648",
                        "log.local.retention.ms": "1000", "compression.gzip.level": "+5"}).config
    assert cfg.unmodelled_static == {"background.threads": "1_0", "metrics.num.samples": "+2147483648",
                                     "log.local.retention.ms": "1000", "compression.gzip.level": "5"}
    v = BrokerConfigView(cfg)
    e = topic(v, cfg, "local.retention.ms")
    assert (e.value, e.source, e.synonyms) == ("-2", D, (ConfigSynonym("log.local.retention.ms", "-2", D),))
    e = topic(v, cfg, "compression.gzip.level")
    assert (e.value, e.source, e.synonyms) == ("-1", D, (ConfigSynonym("compression.gzip.level", "-1", D),))
    (e,) = v.broker_entries(["background.threads"])
    assert (e.value, e.source) == ("1_0", S)


# -- IncrementalAlterConfigs operations -----------------------------------------------------------

def test_apply_ops() -> None:
    assert apply_ops({"retention.ms": "1"}, [("retention.ms", OP_SET, "2"), ("segment.ms", OP_SET, "9")]) == \
        {"retention.ms": "2", "segment.ms": "9"}
    assert apply_ops({"retention.ms": "1"}, [("retention.ms", OP_DELETE, None), ("nope", OP_DELETE, None)]) == {}
    # APPEND starts from Kafka's default ("delete") when there is no override
    assert apply_ops({}, [("cleanup.policy", OP_APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}
    assert apply_ops({"cleanup.policy": "compact"}, [("cleanup.policy", OP_APPEND, "compact,delete")]) == \
        {"cleanup.policy": "compact,delete"}
    assert apply_ops({"cleanup.policy": "compact,delete"}, [("cleanup.policy", OP_SUBTRACT, "compact")]) == \
        {"cleanup.policy": "delete"}
    assert apply_ops({}, [("cleanup.policy", OP_SUBTRACT, "delete")]) == {"cleanup.policy": ""}
    assert apply_ops({}, [("leader.replication.throttled.replicas", OP_APPEND, "0:0,1:0")]) == \
        {"leader.replication.throttled.replicas": "0:0,1:0"}


@pytest.mark.parametrize("key,op,code,message", [
    # Kafka 3.9.1's answers (ZooKeeper mode), seen through franz-go's kadm
    ("retention.ms", OP_APPEND, ErrorCode.INVALID_CONFIG,
     "Config value append is not allowed for config key: retention.ms"),
    ("segment.bytes", OP_SUBTRACT, ErrorCode.INVALID_CONFIG,
     "Config value subtract is not allowed for config key: segment.bytes"),
    ("no.such", OP_APPEND, ErrorCode.UNKNOWN_SERVER_ERROR, None),
    ("no.such", OP_SUBTRACT, ErrorCode.UNKNOWN_SERVER_ERROR, None),
])
def test_apply_ops_errors(key: str, op: int, code: ErrorCode, message: str | None) -> None:
    with pytest.raises(KafkaApiError) as exc:
        apply_ops({}, [(key, op, "x")])
    assert (exc.value.code, exc.value.message) == (code, message)
