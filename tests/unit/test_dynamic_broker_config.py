"""kafkalite/config/dynamic_broker_config.py: Kafka's sets, its message renderings, validation
order, the merged config and its store round trip (the wire behaviour is compared with Apache
Kafka in tests/differential/test_dynamic_broker_configs.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.config.dynamic_broker_config import (ALL_DYNAMIC_CONFIGS, DEFAULT_ENTITY, DYNAMIC_PASSWORD_CONFIGS,
                                                    PER_BROKER_CONFIGS, DynamicBrokerConfig, DynamicConfigError,
                                                    PasswordConfigError, check_config_value, is_password_config,
                                                    dynamic_props_from_store, java_properties_order,
                                                    java_string_hash, scala_set, validate_configs)
from kafkalite.config.server_config import build_config
from kafkalite.server.handlers.incremental_alter_configs import (OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT,
                                                                 apply_broker_ops, java_split)
from kafkalite.protocol.errors import ErrorCode, KafkaApiError


def test_kafka_sets() -> None:
    # Kafka 3.9 lists 89 of its broker configs as not read-only (checked against a live broker by
    # the differential test); listeners are per broker, max.connections may be cluster-wide
    assert len(ALL_DYNAMIC_CONFIGS) == 89
    assert {"log.retention.ms", "log.roll.ms", "message.max.bytes", "num.io.threads"} <= ALL_DYNAMIC_CONFIGS
    assert not {"log.retention.hours", "log.roll.hours", "num.partitions", "broker.id"} & ALL_DYNAMIC_CONFIGS
    assert "listeners" in PER_BROKER_CONFIGS and "max.connections" not in PER_BROKER_CONFIGS
    assert len(DYNAMIC_PASSWORD_CONFIGS) == 7
    assert is_password_config("listener.name.plaintext.ssl.keystore.password")
    assert not is_password_config("ssl.keystore.type")


def test_java_renderings() -> None:
    assert java_string_hash("hello") == 99162322                  # "hello".hashCode()
    assert java_string_hash("polygenelubricants") == (-2147483648) & 0xFFFFFFFF
    # the order Kafka 3.9 answered for these keys, inserted in this order
    assert java_properties_order(["log.roll.ms", "log.roll.hours", "broker.id", "num.partitions"]) == \
        ["num.partitions", "broker.id", "log.roll.hours", "log.roll.ms"]
    assert scala_set(["a"]) == "Set(a)" and scala_set(["a"], mutable=True) == "HashSet(a)"
    assert scala_set(list("abcde")).startswith("HashSet(")


@pytest.mark.parametrize("name, value, message", [
    ("log.retention.ms", "abc", "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"),
    ("max.connections", "2147483648", "Invalid value 2147483648 for configuration max.connections: "
                                      "Not a number of type INT"),
    ("log.segment.bytes", " 10 ", "Invalid value 10 for configuration log.segment.bytes: Value must be at least 14"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "Invalid value 1.5 for configuration "
                                               "log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
    ("unclean.leader.election.enable", "yes",
     "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true or false"),
    ("log.cleanup.policy", "compact,bogus", "Invalid value bogus for configuration log.cleanup.policy: "
                                            "String must be one of: compact, delete"),
])
def test_check_config_value_refusals(name: str, value: str, message: str) -> None:
    with pytest.raises(DynamicConfigError) as e:
        check_config_value(name, value)
    assert str(e.value) == message


def test_check_config_value_accepts() -> None:
    for name, value in (("log.retention.ms", "-1"), ("log.cleanup.policy", "compact, delete"),
                        ("unclean.leader.election.enable", "TRUE"), ("no.such.custom.key", "anything"),
                        ("log.cleaner.io.max.bytes.per.second", "1e6")):
        check_config_value(name, value)


def test_validation_order() -> None:
    with pytest.raises(DynamicConfigError, match=r"^Cannot update these configs dynamically: Set\(num.partitions\)$"):
        validate_configs({"log.retention.ms": "abc", "num.partitions": "2"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match=r"listener prefix: HashSet\(ssl.key.password\)$"):
        validate_configs({"ssl.key.password": "x"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match=r"broker id must be specified: Set\(listeners\)$"):
        validate_configs({"listeners": "PLAINTEXT://:1"}, per_broker=False)
    # a listener-prefixed cluster-level config may be a default; other prefixed ones may not
    validate_configs({"listener.name.plaintext.max.connections": "5"}, per_broker=False)
    with pytest.raises(DynamicConfigError, match=r"Set\(listener.name.plaintext.ssl.protocol\)$"):
        validate_configs({"listener.name.plaintext.ssl.protocol": "TLSv1.2"}, per_broker=False)


def test_stored_props_drop_what_cannot_apply() -> None:
    stored = {"log.retention.ms": "1000", "num.partitions": "3", "log.segment.bytes": "x",
              "listeners": "PLAINTEXT://:1", "custom": "1"}
    assert dynamic_props_from_store(stored, per_broker=True) == {
        "log.retention.ms": "1000", "listeners": "PLAINTEXT://:1", "custom": "1"}
    assert dynamic_props_from_store(stored, per_broker=False) == {"log.retention.ms": "1000", "custom": "1"}


class DictConfigStore:
    """A BrokerConfigStore in memory (the broker's is /config/brokers/<entity>, through
    server.dynamic_config_manager)."""

    def __init__(self) -> None:
        self.entities: dict[str, dict[str, str]] = {}

    def broker_configs(self, entity: str) -> dict[str, str]:
        return dict(self.entities.get(entity, {}))

    def update_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        self.entities[entity] = dict(configs)


def test_precedence_reconfigure_and_store_round_trip(tmp_path: Path) -> None:
    static = build_config({"log.retention.hours": "10", "num.io.threads": "8"}).config
    store = DictConfigStore()
    seen: list[tuple[int, int]] = []
    dyn = DynamicBrokerConfig(static, broker_id=0)
    dyn.load(store)
    dyn.add_reconfigurable({"log.retention.ms"}, lambda old, new: seen.append(
        (old.log_retention_ms_effective, new.log_retention_ms_effective)))
    dyn.alter({"log.retention.ms": "5000"}, per_broker=False, validate_only=False)
    dyn.alter({"log.retention.ms": "7000"}, per_broker=True, validate_only=True)      # validate only
    assert dyn.current.log_retention_ms_effective == 5000
    dyn.alter({"log.retention.ms": "7000", "num.io.threads": "16"}, per_broker=True, validate_only=False)
    assert (dyn.current.log_retention_ms_effective, dyn.current.num_io_threads) == (7000, 16)
    assert seen == [(36_000_000, 5000), (5000, 7000)]
    with pytest.raises(DynamicConfigError, match="value should be at least half the current value 16"):
        dyn.validate({"num.io.threads": "7"}, per_broker=True)
    # a default-level change under a per-broker value changes nothing the broker uses
    dyn.validate({"num.io.threads": "100"}, per_broker=False)
    # another broker process reading the same store starts with both levels applied
    again = store
    assert again.broker_configs(DEFAULT_ENTITY) == {"log.retention.ms": "5000"}
    assert again.broker_configs("0") == {"log.retention.ms": "7000", "num.io.threads": "16"}
    # passwords would need password.encoder.secret: validated, never stored
    dyn.alter({"listener.name.plaintext.ssl.key.password": "s"}, per_broker=True, validate_only=True)
    with pytest.raises(PasswordConfigError, match="^Password encoder secret not configured$"):
        dyn.alter({"listener.name.plaintext.ssl.key.password": "s"}, per_broker=True, validate_only=False)
    assert dyn.dynamic_broker == {"log.retention.ms": "7000", "num.io.threads": "16"}
    restarted = DynamicBrokerConfig(static, broker_id=0)
    restarted.load(again)
    assert restarted.current.log_retention_ms_effective == 7000
    assert restarted.dynamic_default == {"log.retention.ms": "5000"}


def test_incremental_broker_ops() -> None:
    defaults = {"log.cleanup.policy": "delete"}
    assert apply_broker_ops({}, [("log.cleanup.policy", OP_APPEND, "compact,compact")], defaults) == \
        {"log.cleanup.policy": "delete,compact,compact"}      # Kafka keeps duplicates of the value
    assert apply_broker_ops({"log.cleanup.policy": "delete,compact"},
                            [("log.cleanup.policy", OP_SUBTRACT, "delete")], defaults) == \
        {"log.cleanup.policy": "compact"}
    assert apply_broker_ops({"a": "1"}, [("a", OP_DELETE, None), ("b", OP_SET, "2")], defaults) == {"b": "2"}
    with pytest.raises(KafkaApiError) as e:
        apply_broker_ops({}, [("log.retention.ms", OP_SUBTRACT, "1")], defaults)
    assert (e.value.code, e.value.message) == (ErrorCode.INVALID_CONFIG,
                                               "Config value subtract is not allowed for config key: log.retention.ms")
    with pytest.raises(KafkaApiError) as e:
        apply_broker_ops({}, [("no.such", OP_APPEND, "1")], defaults)
    assert (e.value.code, e.value.message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    assert java_split("a,b,,") == ["a", "b"] and java_split("") == [""]
