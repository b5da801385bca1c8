"""Dynamic broker configs, kafkalite against Apache Kafka 3.9 (ZooKeeper mode), field by field.

The same sequence of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs requests on BROKER
resources ("0" and the cluster default "") goes to an Apache Kafka broker of this module's own
(its dynamic configs change, so never the session's `kafka_oracle`) and to a kafkalite broker
reading the same server.properties; the answers must be equal: per resource error code, error
message, type and name; per described config value, source, read-only, sensitive, type and the
synonyms in order.

Allowed differences, with reasons:
- the order of configs within one DescribeConfigs result: Kafka lists them in HashMap order, so
  they are compared as maps by name;
- documentation (v3+): kafkalite's own text, not compared;
- timing: Kafka applies a stored change when its ZooKeeper watch fires, so a describe right after
  an alter may still show the old value; the oracle is polled until it answers as kafkalite does
  (which applies at once) and the comparison is of the settled answers. Error answers are
  compared at once.
"""
from __future__ import annotations

import time
from typing import Any, Iterator, Optional

import pytest

from tests.differential.framework import broker_like
from tests.harness import BrokerProcess
from tests.integration.util import RawClient

BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# every config the scenario touches or whose synonyms it shows
KEYS = ["log.retention.ms", "log.retention.hours", "log.segment.bytes", "num.io.threads", "message.max.bytes",
        "log.cleanup.policy", "log.cleaner.backoff.ms", "compression.type", "min.insync.replicas", "log.roll.ms",
        "num.partitions", "ssl.keystore.password", "background.threads", "max.connections"]
# the static part both brokers share (besides the oracle's own single-broker defaults)
STATIC = {"num.io.threads": "8", "num.network.threads": "3", "log.retention.hours": "168",
          "log.segment.bytes": "1073741824", "num.recovery.threads.per.data.dir": "1",
          "log.cleaner.backoff.ms": "16000"}


@pytest.fixture(scope="module")
def oracle(zookeeper_server) -> Iterator[Any]:
    from tests.support.kafka_oracle import KafkaOracle
    with KafkaOracle(zookeeper_server.connect_string, overrides=STATIC) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def kafkalite(oracle, tmp_path_factory) -> Iterator[BrokerProcess]:
    b = broker_like(oracle.properties, tmp_path_factory.mktemp("dynamic-configs"))
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def clients(oracle, kafkalite) -> Iterator[tuple[RawClient, RawClient]]:
    with RawClient(oracle.bootstrap_servers) as k, RawClient(kafkalite.bootstrap_servers) as kl:
        yield k, kl


# -- requests and their comparable answers -------------------------------------------------------

def describe_req(names: list[str], keys: Optional[list[str]] = KEYS, v: int = 4) -> Any:
    from kafka.protocol.admin import DescribeConfigsRequest as DC
    kw = {"include_documentation": True} if v >= 3 else {}
    return DC[v](resources=[DC.DescribeConfigsResource(resource_type=BROKER, resource_name=n, configuration_keys=keys)
                            for n in names], include_synonyms=True, **kw)


def alter_req(resources: list[tuple[str, dict[str, str]]], v: int = 2, validate_only: bool = False) -> Any:
    from kafka.protocol.admin import AlterConfigsRequest as AC
    R = AC.AlterConfigsResource
    return AC[v](resources=[R(resource_type=BROKER, resource_name=n, configs=[
        R.AlterableConfig(name=k, value=val) for k, val in configs.items()]) for n, configs in resources],
        validate_only=validate_only)


def ialter_req(resources: list[tuple[str, list[tuple[str, int, Optional[str]]]]], v: int = 1,
               validate_only: bool = False) -> Any:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as IAC
    R = IAC.AlterConfigsResource
    return IAC[v](resources=[R(resource_type=BROKER, resource_name=n, configs=[
        R.AlterableConfig(name=k, config_operation=op, value=val) for k, op, val in ops]) for n, ops in resources],
        validate_only=validate_only)


def described(resp: Any) -> list[tuple]:
    """A DescribeConfigs answer without what may differ: configs as a map, no documentation."""
    out = []
    for r in resp.results:
        configs = {e.name: (e.value, e.read_only, e.config_source, e.is_sensitive,
                            getattr(e, "config_type", None),
                            [(s.name, s.value, s.source) for s in e.synonyms]) for e in r.configs}
        out.append((r.error_code, r.error_message, r.resource_type, r.resource_name, configs))
    return out


def altered(resp: Any) -> list[tuple]:
    return [(r.error_code, r.error_message, r.resource_type, r.resource_name) for r in resp.responses]


def same(clients: tuple[RawClient, RawClient], req: Any, view=altered) -> list[tuple]:
    """Send `req` to both brokers; their answers must be equal. Returns kafkalite's."""
    kafka, kafkalite = clients
    got_kafka, got_kafkalite = view(kafka.request(req)), view(kafkalite.request(req))
    assert got_kafkalite == got_kafka
    return got_kafkalite


def settled(clients: tuple[RawClient, RawClient], names: list[str] = ["0", ""], timeout: float = 20.0,
            req: Any = None) -> list[tuple]:
    """Describe both entities (or send `req`) on both brokers until Kafka (which applies stored
    changes when its ZooKeeper watch fires) answers what kafkalite answers; then they must be equal."""
    kafka, kafkalite = clients
    req = req if req is not None else describe_req(names)
    want = described(kafkalite.request(req))
    deadline = time.monotonic() + timeout
    while True:
        got = described(kafka.request(req))
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert want == got
    return want


def by_name(result: tuple) -> dict[str, tuple]:
    return result[4]


# -- the scenario ----------------------------------------------------------------------------------

def test_describe_before_any_change(clients) -> None:
    for v in (1, 2, 3, 4):
        same(clients, describe_req(["0", "", "7", "x"], v=v), described)
    per_broker, default, *_ = settled(clients)
    assert default[4] == {}                                  # no dynamic defaults yet
    assert by_name(per_broker)["num.io.threads"][:3] == ("8", False, 4)
    assert by_name(per_broker)["num.partitions"][1] is True  # read-only


def test_set_cluster_default_and_per_broker(clients) -> None:
    assert same(clients, alter_req([("", {"log.retention.ms": "7200000", "log.segment.bytes": "2000000"})])) == \
        [(0, None, BROKER, "")]
    settled(clients)
    assert same(clients, alter_req([("0", {"log.retention.ms": "3600000", "num.io.threads": "12"})])) == \
        [(0, None, BROKER, "0")]
    per_broker, default = settled(clients)
    # dynamic per-broker, then dynamic default, then static, then default
    assert by_name(per_broker)["log.retention.ms"][2] == 2
    assert [s[2] for s in by_name(per_broker)["log.retention.ms"][5]] == [2, 3, 4, 5]
    assert set(by_name(default)) == {"log.retention.ms", "log.segment.bytes"}
    # a topic without overrides shows the dynamic broker values and their synonyms
    from kafka.protocol.admin import DescribeConfigsRequest as DC
    topic = f"dyn-{time.monotonic_ns()}"
    for c in clients:
        assert c.create_topic(topic, 1, 1, {"cleanup.policy": "compact"}).error_code == 0
    req = DC[4](resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=[
        "retention.ms", "segment.bytes", "cleanup.policy", "max.message.bytes", "compression.type"])],
        include_synonyms=True, include_documentation=False)
    (result,) = settled(clients, req=req)
    assert by_name(result)["retention.ms"][:3] == ("3600000", False, 2)
    assert by_name(result)["segment.bytes"][:3] == ("2000000", False, 3)


def test_incremental_operations(clients) -> None:
    same(clients, ialter_req([("0", [("log.cleanup.policy", APPEND, "compact"), ("log.retention.ms", DELETE, None)])]))
    per_broker, _ = settled(clients)
    assert by_name(per_broker)["log.cleanup.policy"][0] == "delete,compact"
    same(clients, ialter_req([("0", [("log.cleanup.policy", SUBTRACT, "delete")])]))
    same(clients, ialter_req([("", [("log.cleaner.backoff.ms", SET, "17000"), ("compression.type", SET, "lz4")])]))
    per_broker, default = settled(clients)
    assert by_name(per_broker)["log.cleaner.backoff.ms"][5] == [
        ("log.cleaner.backoff.ms", "17000", 3), ("log.cleaner.backoff.ms", "16000", 4),
        ("log.cleaner.backoff.ms", "15000", 5)]
    # validate_only changes nothing
    same(clients, ialter_req([("0", [("min.insync.replicas", SET, "2")])], validate_only=True))
    same(clients, alter_req([("", {"message.max.bytes": "5000"})], validate_only=True))
    assert settled(clients) == [per_broker, default]


@pytest.mark.parametrize("v", [0, 1, 2])
def test_alter_configs_refusals_each_version(clients, v: int) -> None:
    cases: list[tuple[str, dict[str, str]]] = [
        ("0", {"num.partitions": "5"}),
        ("", {"num.partitions": "5"}),
        ("0", {"log.roll.ms": "1000", "log.roll.hours": "2", "broker.id": "5", "num.partitions": "3"}),
        ("0", {"log.retention.hours": "1"}),
        ("0", {"log.retention.ms": "abc"}),
        ("0", {"log.segment.bytes": "10"}),
        ("0", {"log.retention.ms": "0"}),
        ("0", {"log.roll.ms": "0"}),
        ("0", {"log.cleaner.threads": "0"}),
        ("0", {"log.cleaner.threads": "3"}),
        ("0", {"log.cleaner.dedupe.buffer.size": "1000"}),
        ("0", {"num.io.threads": "100"}),
        ("0", {"num.io.threads": "5"}),
        ("0", {"background.threads": "1"}),
        ("", {"listeners": "PLAINTEXT://127.0.0.1:9999"}),
        ("", {"listener.name.plaintext.ssl.keystore.type": "JKS"}),
        ("0", {"ssl.keystore.type": "JKS"}),
        ("0", {"log.cleanup.policy": "bogus"}),
        ("0", {"message.max.bytes": "-5"}),
        ("", {"unclean.leader.election.enable": "maybe"}),
        ("", {"compression.type": "brotli"}),
        ("", {"max.connections": "abc"}),
        ("", {"producer.id.expiration.ms": "-1"}),
        ("", {"log.cleaner.min.cleanable.ratio": "1.5"}),
        ("", {"follower.replication.throttled.rate": "x"}),
        ("7", {"log.retention.ms": "1"}),
        ("abc", {"log.retention.ms": "1"}),
    ]
    for name, configs in cases:
        got = same(clients, alter_req([(name, configs)], v=v))
        assert got[0][0] == 42, (name, configs, got)
    # a password cannot be stored without password.encoder.secret (INVALID_CONFIG), but validates
    for configs in ({"listener.name.plaintext.ssl.keystore.password": "secret"},
                    {"listener.name.plaintext.sasl.jaas.config": "x"}):
        assert same(clients, alter_req([("0", configs)], v=v))[0][0] == 40
        assert same(clients, alter_req([("0", configs)], v=v, validate_only=True)) == [(0, None, BROKER, "0")]
    # accepted without a change: a custom key and a quota config, validate only
    for name, configs in (("0", {"no.such.config": "1"}), ("", {"follower.replication.throttled.rate": "100"})):
        assert same(clients, alter_req([(name, configs)], v=v, validate_only=True)) == [(0, None, BROKER, name)]


@pytest.mark.parametrize("v", [0, 1])
def test_incremental_refusals_each_version(clients, v: int) -> None:
    cases: list[tuple[str, list[tuple[str, int, Optional[str]]]]] = [
        ("0", [("num.partitions", SET, "5")]),
        ("0", [("log.retention.ms", APPEND, "1")]),
        ("0", [("log.retention.ms", SUBTRACT, "1")]),
        ("0", [("no.such", APPEND, "1")]),
        ("0", [("log.cleanup.policy", SET, "bogus")]),
        ("0", [("log.retention.ms", SET, None)]),
        ("0", [("log.retention.ms", SET, "1"), ("log.retention.ms", DELETE, None)]),
        ("", [("advertised.listeners", SET, "PLAINTEXT://127.0.0.1:1")]),
        ("abc", [("x", SET, "1")]),
        ("1", [("x", SET, "1")]),
    ]
    for name, ops in cases:
        same(clients, ialter_req([(name, ops)], v=v))
    # two resources in one request, and a duplicated one
    same(clients, ialter_req([("0", [("num.partitions", SET, "5")]), ("", [("log.retention.ms", SET, "x")])], v=v))
    same(clients, ialter_req([("0", [("log.retention.ms", SET, "1")])] * 2, v=v))


def test_clear_everything(clients) -> None:
    assert same(clients, alter_req([("0", {}), ("", {})])) == [(0, None, BROKER, "0"), (0, None, BROKER, "")]
    per_broker, default = settled(clients)
    assert default[4] == {}
    assert {k: v[2] for k, v in by_name(per_broker).items() if k in ("log.retention.ms", "num.io.threads")} == \
        {"log.retention.ms": 5, "num.io.threads": 4}
