"""meta.properties with real broker processes, as Kafka 3.9 in ZooKeeper mode: brokers started with
broker.id=-1 get generated ids (1001, 1002, ... from /brokers/seqid) that they keep across restarts
(read back from meta.properties); a log dir of another cluster or of another broker id refuses to
start in one line; every log dir gets Kafka's file (version 0, broker.id, cluster.id)."""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from kazoo.client import KazooClient

from kafkalite.testing import CLUSTER_TEST_DEFAULTS, Broker, cluster_size_defaults
from tests.cluster.util import consume_all, wait_until
from tests.integration import test_startup_failures as startup_failures


def _kafka_text(broker_id: int, cluster_id: str) -> list[str]:
    """The lines Kafka 3.9.1 (Java 17) writes, but the date comment (the second line)."""
    return ["#", f"broker.id={broker_id}", "version=0", f"cluster.id={cluster_id}"]


def _file_lines(log_dir: Path) -> list[str]:
    lines = (log_dir / "meta.properties").read_text().split("\n")
    assert lines[-1] == "" and lines[1].startswith("#"), lines   # ends in a newline; the date
    return [lines[0], *lines[2:-1]]


def _ready_id(broker: Broker) -> int:
    return int(next(line for line in reversed(broker.stdout_lines) if "kafkalite ready" in line).split()[3])


@pytest.fixture
def chroot(zookeeper_server: Any) -> Iterator[tuple[str, KazooClient]]:
    """A fresh chroot of the session's ZooKeeper (its own /brokers/seqid and /cluster/id) and a
    kazoo client on it."""
    chroot_path = f"/metaprops-{uuid.uuid4().hex[:10]}"
    root = KazooClient(hosts=zookeeper_server.connect_string, timeout=10.0)
    root.start(timeout=15)
    try:
        root.ensure_path(chroot_path)   # a client rooted at a missing chroot warns
    finally:
        root.stop()
        root.close()
    connect = zookeeper_server.connect_string + chroot_path
    zk = KazooClient(hosts=connect, timeout=10.0)
    zk.start(timeout=15)
    try:
        yield connect, zk
    finally:
        zk.stop()
        zk.close()


def _serve(*overrides: str) -> subprocess.CompletedProcess[str]:
    return startup_failures._serve(*(arg for o in overrides for arg in ("--override", o)))


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    return startup_failures._one_line(r, 1)


def test_generated_broker_ids_are_registered_serve_and_survive_a_restart(
        chroot: tuple[str, KazooClient], tmp_path: Path) -> None:
    connect, zk = chroot
    props = {**CLUSTER_TEST_DEFAULTS, **cluster_size_defaults(2), "broker.id": "-1", "zookeeper.connect": connect}
    brokers = [Broker(props, log_dir=tmp_path / f"b{i}") for i in range(2)]
    try:
        for b in brokers:   # one after the other: the ids follow the start order
            b.start()
        assert [_ready_id(b) for b in brokers] == [1001, 1002]
        assert sorted(zk.get_children("/brokers/ids")) == ["1001", "1002"]
        assert zk.exists("/brokers/seqid").version == 2
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        for b, broker_id in zip(brokers, (1001, 1002)):
            assert _file_lines(b.log_dir) == _kafka_text(broker_id, cluster_id)
            assert f"Rewriting {b.log_dir}/meta.properties" in b.output()

        topic = brokers[0].create_topic("rf2", 1, replication_factor=2)
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=brokers[0].bootstrap_servers, acks="all")
        for i in range(10):
            producer.send(topic, f"v{i}".encode()).get(timeout=20)
        producer.close()
        expected = [f"v{i}".encode() for i in range(10)]
        assert consume_all(brokers[1].bootstrap_servers, topic, 0, 10) == expected

        for b in brokers:
            b.stop()
        files = [(b.log_dir / "meta.properties").read_bytes() for b in brokers]
        for b in reversed(brokers):   # the other order: ids come from the files, not ZooKeeper
            b.start()
        assert [_ready_id(b) for b in brokers] == [1001, 1002]
        assert sorted(zk.get_children("/brokers/ids")) == ["1001", "1002"]
        assert zk.exists("/brokers/seqid").version == 2          # nothing generated again
        assert [(b.log_dir / "meta.properties").read_bytes() for b in brokers] == files   # not rewritten
        # both replicas back: the records are served by either broker
        wait_until(lambda: consume_all(brokers[0].bootstrap_servers, topic, 0, 10, timeout=5) == expected,
                   30, "the records after the restart")
    finally:
        for b in brokers:
            b.close()


def test_log_dir_of_another_cluster_or_broker_id_refuses_to_start(
        chroot: tuple[str, KazooClient], zookeeper_server: Any, tmp_path: Path) -> None:
    connect, zk = chroot
    log_dir = tmp_path / "logs"
    with Broker({"broker.id": "-1", "zookeeper.connect": connect}, log_dir=log_dir) as b:
        assert _ready_id(b) == 1001
    first_cluster = json.loads(zk.get("/cluster/id")[0])["id"]
    before = (log_dir / "meta.properties").read_bytes()

    # the same log dir, pointed at another chroot: another cluster
    other = f"{zookeeper_server.connect_string}/metaprops-other-{uuid.uuid4().hex[:10]}"
    r = _serve(f"log.dirs={log_dir}", "broker.id=-1", f"zookeeper.connect={other}")
    other_zk = KazooClient(hosts=other, timeout=10.0)
    other_zk.start(timeout=15)
    try:
        other_cluster = json.loads(other_zk.get("/cluster/id")[0])["id"]
        assert other_zk.get_children("/brokers/ids") == []   # never registered
    finally:
        other_zk.stop()
        other_zk.close()
    assert _one_line(r) == (f"kafkalite: cannot start: Invalid cluster.id in: {log_dir}/meta.properties. "
                            f"Expected {other_cluster}, but read {first_cluster}")

    # the right cluster, but a configured broker.id other than the stored one
    r = _serve(f"log.dirs={log_dir}", "broker.id=5", f"zookeeper.connect={connect}")
    assert _one_line(r) == (
        f"kafkalite: cannot start: Stored node id 1001 doesn't match previous node id 5 in {log_dir}/meta.properties. "
        "If you moved your data, make sure your configured node id matches. If you intend to create a new "
        "node, you should remove all data in your data directories.")
    assert (log_dir / "meta.properties").read_bytes() == before
    assert zk.exists("/brokers/seqid").version == 1


def test_single_node_mode_writes_the_local_cluster_id_and_rewrites_a_dir_without_the_file(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with Broker(log_dir=log_dir) as b:
        assert _ready_id(b) == 0
    store = json.loads((log_dir / "kafkalite-zk.json").read_text())
    cluster_id = json.loads(store["nodes"]["/cluster/id"]["data"])["id"]
    assert _file_lines(log_dir) == _kafka_text(0, cluster_id)

    # a log dir written before kafkalite wrote meta.properties: the fresh case, as for Kafka
    (log_dir / "meta.properties").unlink()
    with Broker(log_dir=log_dir) as b:
        assert _ready_id(b) == 0
        assert f"Rewriting {log_dir}/meta.properties" in b.output()
    assert _file_lines(log_dir) == _kafka_text(0, cluster_id)

    # hostile: a file that is not a version-0 meta.properties
    (log_dir / "meta.properties").write_text("version=1\nnode.id=0\ncluster.id=x\n")
    r = _serve(f"log.dirs={log_dir}")
    assert _one_line(r) == (f"kafkalite: cannot start: Found unexpected version in {log_dir}/meta.properties. "
                            "ZK-based brokers that are not migrating only support version 0 (which is implicit "
                            "when the `version` field is missing).")
    (log_dir / "meta.properties").write_text("broker.id=zero\n")
    r = _serve(f"log.dirs={log_dir}")
    assert _one_line(r) == (f"kafkalite: cannot start: Error while reading meta.properties file "
                            f"{log_dir}/meta.properties: Unable to read broker.id as a base-10 number.")


def test_single_node_dir_from_before_meta_properties_keeps_broker_id_0_with_broker_id_minus_1(tmp_path: Path) -> None:
    """kafkalite ran broker.id=-1 as broker 0 before it wrote meta.properties: such a single-node
    log dir (topics in its store, no meta.properties) keeps 0, the id its replicas name, rather
    than a generated 1001 that would leave every partition without its leader; an empty dir gets
    the generated id, as in Kafka."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    log_dir = tmp_path / "logs"
    with Broker(log_dir=log_dir) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            admin.create_topics([NewTopic("kept", 1, 1)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all")
        producer.send("kept", b"v", partition=0).get(timeout=30)
        producer.close()
    (log_dir / "meta.properties").unlink()
    with Broker({"broker.id": "-1"}, log_dir=log_dir) as b:
        assert _ready_id(b) == 0
        assert consume_all(b.bootstrap_servers, "kept", 0, 1) == [b"v"]
    assert [line for line in _file_lines(log_dir) if line.startswith("broker.id=")] == ["broker.id=0"]
    with Broker({"broker.id": "-1"}, log_dir=tmp_path / "empty") as b:
        assert _ready_id(b) == 1001
