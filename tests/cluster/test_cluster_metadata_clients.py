"""Three kafkalite brokers as Kafka clients and tools see them: kafka-python, confluent-kafka
(librdkafka), the Java admin client (kafka-clients 4.4.0, tests/java/ClusterCheck.java) and
`kafkalite topics --describe` all show the three brokers with their ports, the controller, and each
partition's leader, replicas and ISR exactly as explicitly assigned, whichever broker they
bootstrap from.

Two topics: replication factor 3 with every broker leading one partition (leadership of
replicated partitions) and replication factor 1 spread over the brokers (each partition on one
broker only: the others know it from UpdateMetadata alone). A fresh partition's ISR is its
replica list and its leader the first replica (Kafka's OfflinePartitionLeaderElectionStrategy on
creation).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.cluster.conftest_h8 import LocalCluster, metadata, topic_layout, wait_until
from tests.integration.test_java_client import JavaClient, compile_check_program
from tests.support.java_clients import NEWEST

pytestmark = pytest.mark.cluster

RF3 = "md-rf3"
RF1 = "md-rf1"
ASSIGNMENTS = {RF3: {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]},
               RF1: {0: [1], 1: [2], 2: [0], 3: [1]}}
CONFIGS = {RF3: {"min.insync.replicas": "2"}, RF1: {"retention.ms": "600000"}}
JAVA_SOURCE = Path(__file__).resolve().parent.parent / "java" / "ClusterCheck.java"


def expected(topic: str) -> list[tuple[int, int, list[int], list[int]]]:
    """(partition, leader, replicas, isr) as assigned."""
    return [(p, r[0], r, r) for p, r in sorted(ASSIGNMENTS[topic].items())]


@pytest.fixture(scope="module")
def cluster(zookeeper_server: Any) -> Iterator[LocalCluster]:
    from kafka.admin import KafkaAdminClient, NewTopic

    with LocalCluster(zookeeper_server.connect_string, 3) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        try:
            result = admin.create_topics(
                [NewTopic(t, replica_assignments=a, topic_configs=CONFIGS[t]) for t, a in ASSIGNMENTS.items()],
                raise_errors=False)
            assert sorted((t["name"], t["error_code"]) for t in result["topics"]) == [(RF1, 0), (RF3, 0)]
        finally:
            admin.close()
        for b in c.brokers.values():
            for t in ASSIGNMENTS:
                wait_until(lambda: topic_layout(b, t) == [tuple(x) for x in expected(t)], 30,
                           f"{t} on broker {b.port}")
        yield c


def ports(c: LocalCluster) -> dict[int, int]:
    return {i: b.port for i, b in c.brokers.items()}


def test_the_raw_metadata_of_every_broker(cluster: LocalCluster) -> None:
    """Metadata v12 from each broker: the same brokers, controller, cluster id and partitions."""
    answers = []
    for b in cluster.brokers.values():
        md = metadata(b, [RF3, RF1])
        answers.append((
            sorted((n.node_id, n.host, n.port, n.rack) for n in md.brokers), md.controller_id, md.cluster_id,
            sorted((t.name, t.error_code, t.is_internal,
                    [(p.error_code, p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes),
                      list(p.isr_nodes), list(p.offline_replicas))
                     for p in sorted(t.partitions, key=lambda p: p.partition_index)])
                   for t in md.topics)))
    cluster_id = cluster.znode_json("/cluster/id")["id"]
    assert answers == [answers[0]] * 3
    assert answers[0] == (
        [(i, "127.0.0.1", port, None) for i, port in sorted(ports(cluster).items())], 0, cluster_id,
        sorted((t, 0, False, [(0, p, leader, 0, replicas, isr, []) for p, leader, replicas, isr in expected(t)])
               for t in ASSIGNMENTS))


def test_kafka_python(cluster: LocalCluster) -> None:
    from kafka.admin import KafkaAdminClient

    for b in cluster.brokers.values():
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            described = admin.describe_cluster()
            topics = admin.describe_topics([RF3, RF1])
        finally:
            admin.close()
        # DescribeCluster, as kafka-python sends it to brokers that have it
        assert sorted((n["broker_id"], n["host"], n["port"], n["rack"], n.get("is_fenced", False))
                      for n in described["brokers"]) == \
            [(i, "127.0.0.1", p, None, False) for i, p in sorted(ports(cluster).items())]
        assert (described["controller_id"], described["cluster_id"]) == \
            (0, cluster.znode_json("/cluster/id")["id"])
        assert {t["name"]: [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                            for p in sorted(t["partitions"], key=lambda p: p["partition_index"])]
                for t in topics} == {t: expected(t) for t in ASSIGNMENTS}


def test_confluent_kafka(cluster: LocalCluster) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    for b in cluster.brokers.values():
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        md = admin.list_topics(timeout=20)
        assert sorted((m.id, m.host, m.port) for m in md.brokers.values()) == \
            [(i, "127.0.0.1", p) for i, p in sorted(ports(cluster).items())]
        assert md.controller_id == 0
        assert {t: [(p.id, p.leader, p.replicas, p.isrs) for _, p in sorted(md.topics[t].partitions.items())]
                for t in ASSIGNMENTS} == {t: expected(t) for t in ASSIGNMENTS}
        described = admin.describe_cluster(request_timeout=20).result()
        assert (sorted((n.id, n.host, n.port, n.rack) for n in described.nodes),
                (described.controller.id, described.controller.port)) == \
            ([(i, "127.0.0.1", p, None) for i, p in sorted(ports(cluster).items())], (0, ports(cluster)[0]))
        futures = admin.describe_topics(TopicCollection(list(ASSIGNMENTS)), request_timeout=20)
        got = {name: [(p.id, p.leader.id, p.leader.port, [r.id for r in p.replicas], [r.id for r in p.isr])
                      for p in f.result().partitions] for name, f in futures.items()}
        assert got == {t: [(p, leader, ports(cluster)[leader], replicas, isr)
                           for p, leader, replicas, isr in expected(t)] for t in ASSIGNMENTS}


def test_java_admin_client(cluster: LocalCluster) -> None:
    java = JavaClient(*compile_check_program(JAVA_SOURCE, NEWEST), main_class="ClusterCheck", version=NEWEST)
    for b in cluster.brokers.values():
        run = java.run(b.bootstrap_servers, "describe-cluster", f"describe-topic {RF3}", f"describe-topic {RF1}",
                       timeout=90)
        assert run.returncode == 0, run.report()
        (described,) = run.of("cluster")
        node = {i: {"id": i, "host": "127.0.0.1", "port": p, "rack": None} for i, p in ports(cluster).items()}
        assert described == {"event": "cluster", "nodes": [node[i] for i in sorted(node)],
                             "controller": node[0], "clusterId": cluster.znode_json("/cluster/id")["id"]}
        assert {t["topic"]: [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in t["partitions"]]
                for t in run.of("topic")} == \
            {t: [(p, node[leader], replicas, isr) for p, leader, replicas, isr in expected(t)] for t in ASSIGNMENTS}
        assert {t["topic"]: t["topicId"] for t in run.of("topic")} == \
            {t: cluster.znode_json(f"/brokers/topics/{t}")["topic_id"] for t in ASSIGNMENTS}


def test_kafkalite_topics_describe(cluster: LocalCluster) -> None:
    """kafka-topics.sh's --describe layout: a summary line with the non-default configs, then one
    line per partition with leader, replicas and ISR as assigned."""
    out = subprocess.run([sys.executable, "-m", "kafkalite", "topics", "--bootstrap-server",
                          cluster.broker(2).bootstrap_servers, "--describe", "--exclude-internal"],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (0, "")
    lines = []
    for t in sorted(ASSIGNMENTS):
        tid = cluster.znode_json(f"/brokers/topics/{t}")["topic_id"]
        # segment.bytes: the packaged server.properties sets log.segment.bytes (as Kafka's own
        # config/server.properties does), a STATIC_BROKER_CONFIG, so kafka-topics lists it too
        configs = ",".join(f"{k}={v}" for k, v in sorted({**CONFIGS[t], "segment.bytes": "1073741824"}.items()))
        rf = len(ASSIGNMENTS[t][0])
        lines.append(f"Topic: {t}\tTopicId: {tid}\tPartitionCount: {len(ASSIGNMENTS[t])}"
                     f"\tReplicationFactor: {rf}\tConfigs: {configs}")
        for p, leader, replicas, isr in expected(t):
            lines.append(f"\tTopic: {t}\tPartition: {p}\tLeader: {leader}"
                         f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}")
    assert out.stdout == "".join(line + "\n" for line in lines)
