"""The pytest plugin's cluster fixtures (kafkalite_cluster, its marker, kafkalite_cluster_factory,
kafkalite_zookeeper), used the way a user would: pytest in a subprocess loading the plugin through
its installed entry point, a real ZooKeeper, three kafkalite brokers in ZooKeeper mode. After the
inner session every broker and ZooKeeper pid it recorded must be gone and every temp dir deleted.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.plugin.test_plugin import alive, installed_plugin

_FIXTURES = (installed_plugin,)   # a fixture: used by name below

pytest_plugins = ["pytester"]

# Inner conftest: records each cluster's processes and dirs, and their state after the session.
CLUSTER_CONFTEST = """
import json, os, pathlib
import pytest

RECORD = pathlib.Path("clusters.jsonl")

def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

@pytest.fixture
def record_cluster():
    def record(cluster, kind):
        zk = cluster.zookeeper_server
        with RECORD.open("a") as f:
            f.write(json.dumps({
                "kind": kind, "chroot": cluster.chroot, "connect": cluster.zookeeper_connect,
                "pids": [b.pid for b in cluster.brokers.values()],
                "dirs": [str(b.stderr_path.parent) for b in cluster.brokers.values()]
                        + ([str(zk.work_dir)] if zk is not None else []),
                "zk_pid": zk.proc.pid if zk is not None else None}) + "\\n")
    return record

@pytest.fixture
def record_zookeeper(kafkalite_zookeeper):
    with RECORD.open("a") as f:
        f.write(json.dumps({"kind": "session-zookeeper", "chroot": None,
                            "connect": kafkalite_zookeeper.connect_string, "pids": [],
                            "dirs": [str(kafkalite_zookeeper.work_dir)],
                            "zk_pid": kafkalite_zookeeper.proc.pid}) + "\\n")

def pytest_unconfigure(config):
    if not RECORD.exists():
        return
    state = []
    for line in RECORD.read_text().splitlines():
        c = json.loads(line)
        pids = c["pids"] + ([c["zk_pid"]] if c["zk_pid"] else [])
        state.append({**c, "alive": [p for p in pids if _alive(p)],
                      "dirs_left": [d for d in c["dirs"] if os.path.exists(d)]})
    pathlib.Path("after_teardown.json").write_text(json.dumps(state))
"""

CLUSTER_SUITE = """
import time
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

def test_three_brokers_produce_and_consume(kafkalite_cluster, record_cluster, record_zookeeper):
    c = kafkalite_cluster
    record_cluster(c, "default")
    assert sorted(c.brokers) == [0, 1, 2] and c.zookeeper_server is None
    assert c.zookeeper_connect.endswith(c.chroot) and c.chroot.startswith("/kafkalite-")
    assert c.bootstrap_servers == ",".join("127.0.0.1:%d" % c.broker(i).port for i in (0, 1, 2))
    # One RF=1 partition on each broker, each led by its broker.
    c.create_topic("spread", assignments={0: [0], 1: [1], 2: [2]})
    controller = c.controller_id()
    assert controller in (0, 1, 2)
    for i in (0, 1, 2):
        md = c.metadata(i, ["spread"])
        assert sorted((b.node_id, b.port) for b in md.brokers) == [(j, c.broker(j).port) for j in (0, 1, 2)]
        assert md.controller_id == controller
        assert sorted((p.partition_index, p.leader_id, list(p.replica_nodes)) for p in md.topics[0].partitions) \\
            == [(0, 0, [0]), (1, 1, [1]), (2, 2, [2])]
    # kafka-python's own view of the cluster.
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert sorted(b["broker_id"] for b in described["brokers"]) == [0, 1, 2]   # DescribeCluster
    assert described["controller_id"] == controller

    producer = KafkaProducer(bootstrap_servers=c.bootstrap_servers, acks="all")
    for p in (0, 1, 2):
        for i in range(5):
            producer.send("spread", b"p%d-%d" % (p, i), partition=p).get(timeout=10)
    producer.close()

    consumer = KafkaConsumer("spread", bootstrap_servers=c.bootstrap_servers, group_id="readers",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = {}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in got.values()) < 15:
        assert time.monotonic() < deadline, got
        for tp, records in consumer.poll(timeout_ms=200).items():
            got.setdefault(tp.partition, []).extend(r.value for r in records)
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition("spread", p)) for p in (0, 1, 2)}
    consumer.close()
    assert got == {p: [b"p%d-%d" % (p, i) for i in range(5)] for p in (0, 1, 2)}
    assert committed == {0: 5, 1: 5, 2: 5}

@pytest.mark.kafkalite_cluster(brokers=2, overrides={"num.partitions": 4}, own_zookeeper=True)
def test_marker_sets_broker_count_overrides_and_own_zookeeper(kafkalite_cluster, record_cluster):
    c = kafkalite_cluster
    record_cluster(c, "marker")
    assert sorted(c.brokers) == [0, 1]
    assert c.zookeeper_server is not None and c.zookeeper_server.proc.poll() is None
    assert c.zookeeper_connect == c.zookeeper_server.connect_string + c.chroot
    assert c.broker(1).overrides["num.partitions"] == "4"
    assert c.broker(1).overrides["broker.id"] == "1"
    c.create_topic("defaults", partitions=-1)
    assert len(c.metadata(1, ["defaults"]).topics[0].partitions) == 4

def test_factory_clusters_share_the_session_zookeeper(kafkalite_cluster_factory, kafkalite_zookeeper,
                                                       record_cluster):
    one = kafkalite_cluster_factory(1)
    two = kafkalite_cluster_factory(2, broker_overrides={1: {"num.partitions": 2}})
    record_cluster(one, "factory")
    record_cluster(two, "factory")
    assert one.chroot != two.chroot
    for c in (one, two):
        assert c.zookeeper_connect == kafkalite_zookeeper.connect_string + c.chroot
    assert sorted(one.brokers) == [0] and sorted(two.brokers) == [0, 1]
    assert one.controller_id() == 0 and two.controller_id() in (0, 1)
    assert two.broker(1).overrides["num.partitions"] == "2" and "num.partitions" not in {
        k for k, v in two.broker(0).overrides.items() if v == "2"}

def test_fails_with_a_cluster(kafkalite_cluster, record_cluster):
    record_cluster(kafkalite_cluster, "failed-test")
    assert False, "failing on purpose"
"""


def _after_teardown(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return json.loads((pytester.path / "after_teardown.json").read_text())


@pytest.mark.usefixtures("installed_plugin")
def test_cluster_fixtures_in_a_user_suite(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CLUSTER_CONFTEST)
    pytester.makepyfile(test_clusters=CLUSTER_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
                                           timeout=300)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: failing on purpose*"])
    clusters = _after_teardown(pytester)
    # (record_zookeeper, a fixture, records before the first test's body)
    assert [c["kind"] for c in clusters] == ["session-zookeeper", "default", "marker", "factory", "factory",
                                             "failed-test"]
    by_kind = {c["kind"]: c for c in clusters}
    session_zk = by_kind["session-zookeeper"]["connect"]
    # Every cluster but the marker's own-ZooKeeper one used the session's ZooKeeper, each under its
    # own chroot.
    shared = [c for c in clusters if c["kind"] in ("default", "factory", "failed-test")]
    assert all(c["connect"] == session_zk + c["chroot"] for c in shared)
    assert len({c["chroot"] for c in shared}) == len(shared) == 4
    assert by_kind["marker"]["zk_pid"] is not None and not by_kind["marker"]["connect"].startswith(session_zk + "/")
    assert [len(c["pids"]) for c in clusters] == [0, 3, 2, 1, 2, 3]
    # Torn down inside that pytest process: brokers and ZooKeepers gone, temp dirs deleted.
    assert [(c["alive"], c["dirs_left"]) for c in clusters] == [([], [])] * 6
    pids = [p for c in clusters for p in c["pids"] + [c["zk_pid"]] if p]
    assert len(pids) == 13 and not any(alive(p) for p in pids)


# --------------------------------------------------------------------------------------------
# kafkalite.testing.Cluster's configuration, without starting anything
# --------------------------------------------------------------------------------------------

def test_cluster_broker_properties_and_their_precedence() -> None:
    from kafkalite.testing import CLUSTER_TEST_DEFAULTS, TEST_DEFAULTS, Cluster, cluster_size_defaults

    c = Cluster(3, {"num.partitions": 2, "offsets.topic.num.partitions": 5, "transaction.state.log.min.isr": 1},
                zookeeper="127.0.0.1:2181",
                chroot="/it", broker_overrides={2: {"num.partitions": "7", "broker.rack": "r2"}})
    try:
        assert c.zookeeper_server is None and c.zookeeper_connect == "127.0.0.1:2181/it"
        assert sorted(c.brokers) == [0, 1, 2] and c.running_broker_ids() == [] and c.bootstrap_servers == ""
        # TEST_DEFAULTS < CLUSTER_TEST_DEFAULTS < cluster_size_defaults < overrides < broker_overrides
        # < what Cluster sets
        assert c.broker(0).overrides == {**TEST_DEFAULTS, **CLUSTER_TEST_DEFAULTS, **cluster_size_defaults(3),
                                         "num.partitions": "2",
                                         "offsets.topic.num.partitions": "5", "transaction.state.log.min.isr": "1",
                                         "broker.id": "0",
                                         "zookeeper.connect": "127.0.0.1:2181/it"}
        assert c.broker(2).overrides == {**c.broker(0).overrides, "num.partitions": "7", "broker.rack": "r2",
                                         "broker.id": "2"}
        assert CLUSTER_TEST_DEFAULTS == {"zookeeper.session.timeout.ms": "6000",
                                         "controlled.shutdown.retry.backoff.ms": "500",
                                         "group.initial.rebalance.delay.ms": "0",
                                         "offsets.topic.num.partitions": "3", "auto.leader.rebalance.enable": "false"}
        # Kafka's internal-topic factors (3, min ISR 2), lowered only to what a smaller cluster holds
        assert [cluster_size_defaults(n) for n in (1, 2, 3, 5)] == [
            {"offsets.topic.replication.factor": str(rf), "transaction.state.log.replication.factor": str(rf),
             "transaction.state.log.min.isr": str(isr)} for rf, isr in ((1, 1), (2, 2), (3, 2), (3, 2))]
        with pytest.raises(KeyError, match=r"no broker 3 in this cluster \(brokers \[0, 1, 2\]\)"):
            c.broker(3)
    finally:
        c.close()
    assert [b.stderr_path.parent.exists() for b in c.brokers.values()] == [False] * 3
    # a random chroot per cluster by default; "" for none
    a, b = Cluster(1, zookeeper="h:1"), Cluster(1, zookeeper="h:1", chroot="")
    try:
        assert re.fullmatch(r"h:1/kafkalite-[0-9a-f]{8}", a.zookeeper_connect) and b.zookeeper_connect == "h:1"
        # a one-broker cluster gets its coordinators
        assert {k: a.broker(0).overrides[k] for k in cluster_size_defaults(1)} == cluster_size_defaults(1)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"brokers": 0}, "a cluster needs at least one broker, not 0"),
    ({"zookeeper": "h:1/chroot"}, "zookeeper is host:port without a chroot"),
    ({"chroot": "relative"}, "chroot must be an absolute ZooKeeper path"),
    ({"chroot": "/trailing/"}, "chroot must be an absolute ZooKeeper path"),
    ({"overrides": {"broker.id": 4}}, "'broker.id' is set by kafkalite.testing.Cluster"),
    ({"broker_overrides": {1: {"zookeeper.connect": "x:1"}}},
     "'zookeeper.connect' is set by kafkalite.testing.Cluster"),
    ({"overrides": {"listeners": "PLAINTEXT://:9092"}}, "'listeners' is set by kafkalite.testing.Broker"),
    ({"broker_overrides": {3: {"num.partitions": 2}}}, r"broker_overrides for broker ids \[3\]: the brokers are 0..2"),
])
def test_cluster_refuses_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    from kafkalite.testing import Cluster

    with pytest.raises(ValueError, match=message):
        Cluster(**{"brokers": 3, "zookeeper": "h:1", **kwargs})


def test_local_cluster_option_parsing() -> None:
    from kafkalite.tools.local_cluster import parse_overrides, split_zookeeper

    assert split_zookeeper("h:1") == ("h:1", "")
    assert split_zookeeper("h:1,g:2/a/b/") == ("h:1,g:2", "/a/b")
    assert parse_overrides([" num.partitions = 3", "log.retention.ms=1"]) == {"num.partitions": "3",
                                                                             "log.retention.ms": "1"}
    with pytest.raises(ValueError, match="--override: expected KEY=VALUE, got 'x'"):
        parse_overrides(["x"])
    with pytest.raises(ValueError, match=r"--override log.dirs: set by kafkalite cluster; broker i logs to "
                                         r"DIR/broker-i \(--dir\)"):
        parse_overrides(["log.dirs=/x"])
