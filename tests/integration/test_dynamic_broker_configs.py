"""Dynamic broker configs against a broker process, through kafka-python's and confluent-kafka's
admin clients: what DescribeConfigs reports (sources, synonyms, read-only), the effect on the
running broker (message.max.bytes on the next produce, log.segment.bytes on the next roll,
log.retention.ms at the next retention check), persistence across a restart, and Kafka's errors.

Each test has a broker of its own: dynamic configs are broker-wide.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.harness import BrokerProcess
from tests.integration.util import wait_until

DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


def _kp_admin(broker: BrokerProcess):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)


def incremental_raw(broker: BrokerProcess, name: str, key: str, value: str) -> tuple[int, object]:
    """IncrementalAlterConfigs SET on a BROKER resource over a raw socket (the clients cannot
    name the cluster-default resource "")."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as IAC
    from tests.integration.util import RawClient
    R = IAC.AlterConfigsResource
    with RawClient(broker.bootstrap_servers) as c:
        resp = c.request(IAC[1](resources=[R(resource_type=4, resource_name=name, configs=[
            R.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False))
    (r,) = resp.responses
    return r.error_code, r.error_message


def test_message_max_bytes_default_enforced_on_next_produce(broker_factory) -> None:
    """kafka-python (which addresses brokers by id only): a per-broker message.max.bytes refuses
    the next larger batch; a topic override still wins; deleting it restores the old limit."""
    from kafka import KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.errors import MessageSizeTooLargeError

    broker = broker_factory()
    admin = _kp_admin(broker)
    plain, overridden = "plain-" + uuid.uuid4().hex[:6], "big-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(plain, 1, 1),
                         NewTopic(overridden, 1, 1, topic_configs={"max.message.bytes": "200000"})])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=1_000_000, retries=0,
                             linger_ms=0)
    value = b"x" * 50_000
    try:
        assert producer.send(plain, value).get(10).offset == 0
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={"message.max.bytes": "10000"})])
        got = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], include_synonyms=True,
                                     config_filter="all")
        entry = got["broker"]["0"]["message.max.bytes"]
        assert (entry["value"], entry["config_source"], entry["read_only"]) == \
            ("10000", "DYNAMIC_BROKER_CONFIG", False)
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(plain, value).get(10)
        assert producer.send(plain, b"small").get(10).offset == 1
        assert producer.send(overridden, value).get(10).offset == 0        # the topic override wins
        # the topic's describe shows the broker default it now falls back to
        topic = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, plain)],
                                       include_synonyms=True)["topic"][plain]["max.message.bytes"]
        assert (topic["value"], topic["config_source"]) == ("10000", "DYNAMIC_BROKER_CONFIG")
        # AlterConfigs replaces the entity's whole set: an empty set deletes the dynamic config
        # (raw: kafka-python sends nothing for an empty set)
        from kafka.protocol.admin import AlterConfigsRequest as AC
        from tests.integration.util import RawClient
        with RawClient(broker.bootstrap_servers) as c:
            resp = c.request(AC[2](resources=[AC.AlterConfigsResource(resource_type=4, resource_name="0", configs=[])],
                                   validate_only=False))
            assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, None)]
        entry = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                       config_filter="all")["broker"]["0"]
        assert (entry["message.max.bytes"]["value"], entry["message.max.bytes"]["config_source"]) == \
            ("1048588", "DEFAULT_CONFIG")
        assert producer.send(plain, value).get(10).offset == 2
    finally:
        producer.close()
        admin.close()


def test_segment_bytes_and_retention_applied_then_persisted(broker_factory) -> None:
    """confluent-kafka: log.segment.bytes per broker rolls the next segments small; a cluster-wide
    log.retention.ms deletes them at the next retention check; both survive a restart, stored as
    Kafka's /config/brokers/<entity> documents."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    broker = broker_factory({"log.retention.check.interval.ms": "300"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = "ret-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)

    res = ConfigResource("BROKER", "0", incremental_configs=[
        ConfigEntry("log.segment.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    old = int(time.time() * 1000) - 2 * 3600 * 1000           # two hours ago
    for i in range(30):
        producer.produce(topic, value=b"v" * 200, key=str(i).encode(), timestamp=old)
        producer.flush(10)
    segments = sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 5, segments                       # rolled at the new 2000 bytes

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-" + topic})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 30)
        # one hour, cluster-wide (raw: librdkafka refuses an empty resource name): every closed
        # segment is older
        assert incremental_raw(broker, "", "log.retention.ms", "3600000") == (0, None)
        low = wait_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0] or None,
                         what="retention to delete the old segments")
        # every record is two hours old: all segments go, the active one rolled first, as in Kafka
        assert low == 30
    finally:
        consumer.close()

    def describe() -> dict:
        res = ConfigResource("BROKER", "0")
        return admin.describe_configs([res])[res].result(15)

    def sources(entries: dict) -> dict:
        return {k: (entries[k].value, entries[k].source, entries[k].is_read_only,
                    [(s.name, s.value, s.source) for s in entries[k].synonyms.values()])
                for k in ("log.segment.bytes", "log.retention.ms")}

    expected = {
        "log.segment.bytes": ("2000", DYNAMIC_BROKER, False,
                              [("log.segment.bytes", "2000", DYNAMIC_BROKER),
                               ("log.segment.bytes", "1073741824", STATIC)]),
        "log.retention.ms": ("3600000", DYNAMIC_DEFAULT, False,
                             [("log.retention.ms", "3600000", DYNAMIC_DEFAULT),
                              ("log.retention.hours", "168", STATIC)]),
    }
    # confluent keys synonyms by name: the DEFAULT_CONFIG entries of the same names are folded
    got = sources(describe())
    assert {k: v[:3] for k, v in got.items()} == {k: v[:3] for k, v in expected.items()}
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    got = sources(describe())
    assert {k: v[:3] for k, v in got.items()} == {k: v[:3] for k, v in expected.items()}
    # stored as Kafka stores them: /config/brokers/<id> and /config/brokers/<default> znodes (here
    # in the embedded mode's znode file)
    nodes = json.loads((broker.log_dir / "kafkalite-zk.json").read_text())["nodes"]
    stored = {path.rsplit("/", 1)[1]: json.loads(node["data"]) for path, node in nodes.items()
              if path.startswith("/config/brokers/")}
    assert stored == {"0": {"version": 1, "config": {"log.segment.bytes": "2000"}},
                      "<default>": {"version": 1, "config": {"log.retention.ms": "3600000"}}}


def test_exact_sources_and_synonyms_raw(broker_factory) -> None:
    """All four sources of one config in Kafka's synonym order (raw DescribeConfigs v4)."""
    from kafka.protocol.admin import AlterConfigsRequest as AC, DescribeConfigsRequest as DC
    from tests.integration.util import RawClient

    broker = broker_factory({"log.cleaner.backoff.ms": "16000"})
    with RawClient(broker.bootstrap_servers) as c:
        R = AC.AlterConfigsResource
        for name, value in (("", "17000"), ("0", "18000")):
            resp = c.request(AC[2](resources=[R(resource_type=4, resource_name=name, configs=[
                R.AlterableConfig(name="log.cleaner.backoff.ms", value=value)])], validate_only=False))
            assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, None)]
        resp = c.request(DC[4](resources=[
            DC.DescribeConfigsResource(resource_type=4, resource_name=n, configuration_keys=["log.cleaner.backoff.ms"])
            for n in ("0", "")], include_synonyms=True, include_documentation=False))
        per_broker, default = resp.results
        (e,) = per_broker.configs
        assert (e.value, e.config_source, e.read_only, e.config_type) == ("18000", DYNAMIC_BROKER, False, 5)
        assert [(s.name, s.value, s.source) for s in e.synonyms] == [
            ("log.cleaner.backoff.ms", "18000", DYNAMIC_BROKER), ("log.cleaner.backoff.ms", "17000", DYNAMIC_DEFAULT),
            ("log.cleaner.backoff.ms", "16000", STATIC), ("log.cleaner.backoff.ms", "15000", DEFAULT)]
        (d,) = default.configs
        assert (d.value, d.config_source, [(s.name, s.value, s.source) for s in d.synonyms]) == \
            ("17000", DYNAMIC_DEFAULT, [("log.cleaner.backoff.ms", "17000", DYNAMIC_DEFAULT)])


def test_refusals_kafka_python_and_confluent(broker_factory) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource as CR
    from kafka.admin import ConfigResource, ConfigResourceType

    broker = broker_factory()
    admin = _kp_admin(broker)
    try:
        def refused(name: str, configs: dict[str, str]) -> str:
            out = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, name, configs=configs)],
                                      raise_on_unknown=False)
            return out["broker"][name]

        assert "Cannot update these configs dynamically: Set(num.partitions)" in refused("0", {"num.partitions": "4"})
        assert refused("0", {"num.partitions": "4"}).startswith("[Error 42] InvalidRequestError")
        assert "Invalid value abc for configuration log.retention.ms: Not a number of type LONG" in \
            refused("0", {"log.retention.ms": "abc"})
        assert "value should not be greater than double the current value 8" in refused("0", {"num.io.threads": "17"})
        entry = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                       config_filter="all")["broker"]["0"]
        assert entry["num.io.threads"]["config_source"] == "STATIC_BROKER_CONFIG"     # nothing stored
    finally:
        admin.close()

    cadmin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert incremental_raw(broker, "", "advertised.listeners", "PLAINTEXT://127.0.0.1:1") == (
        42, "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(advertised.listeners)")
    res = CR("BROKER", "0", incremental_configs=[
        ConfigEntry("log.retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException) as exc:
        cadmin.incremental_alter_configs([res])[res].result(15)
    assert exc.value.args[0].code() == 40              # INVALID_CONFIG
    assert "Config value append is not allowed for config key: log.retention.ms" in exc.value.args[0].str()
    ok = CR("BROKER", "0", incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    cadmin.incremental_alter_configs([ok])[ok].result(15)
    got = cadmin.describe_configs([CR("BROKER", "0")])[CR("BROKER", "0")].result(15)["log.cleanup.policy"]
    assert (got.value, got.source, got.is_read_only) == ("delete,compact", DYNAMIC_BROKER, False)


def test_transaction_verification_switched_off_without_restart(broker_factory, topic_name: str) -> None:
    """transaction.partition.verification.enable is read per request: refused before the dynamic
    change, appended after it (Kafka's DynamicProducerStateManagerConfig)."""
    from tests.integration.test_txn_coordinator import add_partitions, ensure_txn_topic, init_ok
    from tests.integration.test_txn_verification import (INVALID_TXN_STATE, NOT_ADDED, OVERRIDES, new_txn_id,
                                                         produce, txn_batch)
    from tests.integration.util import RawClient, create_topic

    b = broker_factory(OVERRIDES)
    create_topic(b.bootstrap_servers, topic_name, num_partitions=2)
    with RawClient(b.bootstrap_servers) as c:
        ensure_txn_topic(c)
        txn = new_txn_id()
        pid, epoch = init_ok(c, txn)
        assert add_partitions(c, txn, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): 0}
        batch = txn_batch(pid, epoch, 0)
        assert produce(c, 9, txn, {(topic_name, 1): batch}) == {(topic_name, 1): (INVALID_TXN_STATE, -1, NOT_ADDED)}
        assert incremental_raw(b, "0", "transaction.partition.verification.enable", "false") == (0, None)
        assert produce(c, 9, txn, {(topic_name, 1): batch}) == {(topic_name, 1): (0, 0, None)}


def test_log_cleaner_backoff_takes_effect(broker_factory, topic_name: str) -> None:
    """A cleaner idling on a 10-minute log.cleaner.backoff.ms compacts at once after a dynamic
    change to 100 ms (Kafka restarts its cleaner threads with the new CleanerConfig)."""
    from tests.integration.test_compaction import cleaner_checkpoint, fetch_everything, topic_configs
    from tests.integration.util import RawClient, Rec, build_batch, create_topic

    b = broker_factory({"log.cleaner.backoff.ms": "600000", "log.cleaner.dedupe.buffer.size": str(4 << 20)})
    create_topic(b.bootstrap_servers, topic_name, configs=topic_configs(segment_bytes=1000))
    with RawClient(b.bootstrap_servers) as c:
        for i in range(60):          # 10 keys, 6 versions each, over many small segments
            assert c.produce(topic_name, 0, build_batch([Rec(f"k{i % 10}".encode(), f"v{i}".encode())])).error_code == 0
    time.sleep(1.0)
    assert cleaner_checkpoint(b.log_dir, topic_name) is None             # asleep: nothing cleaned
    assert len(fetch_everything(b.bootstrap_servers, topic_name)) == 60
    assert incremental_raw(b, "0", "log.cleaner.backoff.ms", "100") == (0, None)
    wait_until(lambda: cleaner_checkpoint(b.log_dir, topic_name), what="the cleaner to run")
    records = fetch_everything(b.bootstrap_servers, topic_name)
    assert len(records) < 60
    # the latest value of every key survives
    latest = {k: v for _o, k, v in records}
    assert latest == {f"k{i}".encode(): f"v{50 + i}".encode() for i in range(10)}
