"""Topic operations across three kafkalite brokers, as Kafka 3.9 does them in ZooKeeper mode.

- CreatePartitions: the new partitions are assigned as Kafka's AdminZkClient.createPartitions
  assigns them (AdminUtils' rack-unaware round robin, made deterministic by starting at the first
  replica of partition 0 and at the existing partition count; computed here independently), and
  each gets its first replica as leader with the replica list as ISR, in ZooKeeper and in every
  broker's metadata.
- AlterConfigs of a topic sent to one broker (not the controller) is seen by DescribeConfigs on
  another broker (the /config/changes notification), replacing the topic's configs as a whole.
- DeleteTopics while one replica's broker is dead (SIGKILL, its session expired): Kafka's
  controller starts the deletion at once (UpdateMetadata with leader -2 makes the live brokers
  forget the topic, so the request completes with NONE within its timeout), deletes the live
  replicas (StopReplica with delete) and keeps /admin/delete_topics/<t> and the topic's znodes
  until the dead broker comes back; then that broker's replicas are deleted and the znodes go.
The tests share one cluster and run in file order (the deletion test kills a broker last).
"""
from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from tests.cluster.conftest_h8 import LocalCluster, metadata, send, topic_layout, wait_until
from tests.cluster.util import FAST_EXPIRY

pytestmark = pytest.mark.cluster

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_RESOURCE = 2
TOPIC_CONFIG_SOURCE = 1      # DescribeConfigs v1+: DYNAMIC_TOPIC_CONFIG
DEFAULT_CONFIG_SOURCE = 5


def _protocol() -> Any:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol import admin
    return admin


@pytest.fixture(scope="module")
def cluster(zookeeper_server: Any) -> Iterator[LocalCluster]:
    # the deletion test waits for the killed broker's session expiry, and for the deleted
    # replicas' <topic>-<p>.<id>-delete directories, removed after log.segment.delete.delay.ms
    with LocalCluster(zookeeper_server.connect_string, 3,
                      {**FAST_EXPIRY, "log.segment.delete.delay.ms": "1000"}) as c:
        yield c


def create(c: LocalCluster, topic: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
    try:
        result = admin.create_topics([NewTopic(topic, replica_assignments=assignment, topic_configs=configs)],
                                     raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, NONE)]
    finally:
        admin.close()
    layout = sorted((p, r[0], r, r) for p, r in assignment.items())
    for b in c.brokers.values():
        wait_until(lambda: topic_layout(b, topic) == layout, 30, f"{topic} on broker {b.port}")


def kafka_new_partition_assignment(broker_ids: list[int], existing: dict[int, list[int]],
                                   total: int) -> dict[int, list[int]]:
    """Kafka 3.9's AdminZkClient.createPartitions without racks: AdminUtils' round robin with
    the start index of the first broker id >= partition 0's first replica, the replica shift
    starting there too, and partition ids continuing from the existing count."""
    brokers = sorted(broker_ids)
    n = len(brokers)
    rf = len(existing[0])
    start = max(0, next((i for i, b in enumerate(brokers) if b >= existing[0][0]), -1))
    shift = start
    out: dict[int, list[int]] = {}
    for pid in range(len(existing), total):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [brokers[first]]
        for j in range(rf - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[pid] = replicas
    return out


def test_create_partitions_across_brokers(cluster: LocalCluster) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions

    topic = "grow-h8"
    existing = {0: [1, 2], 1: [2, 0]}
    create(cluster, topic, existing, {})
    added = kafka_new_partition_assignment([0, 1, 2], existing, 5)
    assert added == {2: [0, 2], 3: [1, 2], 4: [2, 0]}   # worked by hand from AdminUtils
    admin = KafkaAdminClient(bootstrap_servers=cluster.broker(1).bootstrap_servers)
    try:
        resp = admin.create_partitions({topic: NewPartitions(5)}, raise_errors=False)
    finally:
        admin.close()
    assert [(r.name, r.error_code) for r in resp.results] == [(topic, NONE)]
    everything = {**existing, **added}
    layout = sorted((p, r[0], r, r) for p, r in everything.items())
    for b in cluster.brokers.values():
        wait_until(lambda: topic_layout(b, topic) == layout, 30, f"5 partitions on broker {b.port}")
    doc = cluster.znode_json(f"/brokers/topics/{topic}")
    assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"], doc["version"]) == \
        ({str(p): r for p, r in everything.items()}, {}, {}, 3)
    for p, r in everything.items():
        assert cluster.znode_json(f"/brokers/topics/{topic}/partitions/{p}/state") == \
            {"controller_epoch": 1, "leader": r[0], "version": 1, "leader_epoch": 0, "isr": r}


def test_alter_configs_through_one_broker_seen_on_another(cluster: LocalCluster) -> None:
    admin = _protocol()
    topic = "configs-h8"
    create(cluster, topic, {0: [0, 1, 2]}, {"cleanup.policy": "compact"})
    changes_before = set(cluster.zk.get_children("/config/changes"))
    R = admin.AlterConfigsRequest
    resp = send(cluster.broker(1), R[1](resources=[R.AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configs=[R.AlterConfigsResource.AlterableConfig(name="retention.ms", value="54321")])],
        validate_only=False))
    assert [(r.error_code, r.error_message, r.resource_type, r.resource_name) for r in resp.responses] == \
        [(NONE, None, TOPIC_RESOURCE, topic)]
    # AlterConfigs replaces the topic's whole config: cleanup.policy is back to the default
    assert cluster.znode_json(f"/config/topics/{topic}") == {"version": 1, "config": {"retention.ms": "54321"}}
    new_changes = sorted(set(cluster.zk.get_children("/config/changes")) - changes_before)
    assert len(new_changes) == 1 and new_changes[0].startswith("config_change_")
    assert cluster.znode_json(f"/config/changes/{new_changes[0]}") == {"version": 2, "entity_path": f"topics/{topic}"}
    D = admin.DescribeConfigsRequest

    def described(broker_id: int) -> Any:
        r = send(cluster.broker(broker_id), D[1](resources=[D.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=["retention.ms", "cleanup.policy"])],
            include_synonyms=False))
        (res,) = r.results
        return res.error_code, sorted((c.name, c.value, c.config_source) for c in res.configs)
    want = (NONE, [("cleanup.policy", "delete", DEFAULT_CONFIG_SOURCE), ("retention.ms", "54321", TOPIC_CONFIG_SOURCE)])
    for broker_id in (2, 0, 1):
        wait_until(lambda: described(broker_id) == want, 15, f"DescribeConfigs on broker {broker_id}")


def topic_dirs(broker: Any, topic: str) -> list[str]:
    if not broker.log_dir.exists():
        return []
    return sorted(d for d in os.listdir(broker.log_dir) if d.startswith(f"{topic}-"))


def test_delete_topic_with_a_broker_down_completes_when_it_returns(cluster: LocalCluster) -> None:
    admin = _protocol()
    topic = "doomed-h8"
    assignment = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}
    create(cluster, topic, assignment, {"retention.ms": "3600000"})
    for b in cluster.brokers.values():
        assert topic_dirs(b, topic) == [f"{topic}-0", f"{topic}-1", f"{topic}-2"]
    assert cluster.controller_id() == 0
    down = cluster.broker(2)
    down.kill()
    live = [cluster.broker(0), cluster.broker(1)]
    for b in live:   # the controller has seen the session expire and told everyone
        wait_until(lambda: sorted(n.node_id for n in metadata(b).brokers) == [0, 1], 30,
                   f"broker 2 gone from broker {b.port}'s metadata")
    resp = send(cluster.broker(1), admin.DeleteTopicsRequest[4](topic_names=[topic], timeout_ms=15000))
    assert [(r.name, r.error_code) for r in resp.responses] == [(topic, NONE)]
    for b in live:   # the broker that answered knows already; the other one follows at once
        wait_until(lambda: [(t.name, t.error_code, t.partitions) for t in metadata(b, [topic]).topics]
                   == [(topic, UNKNOWN_TOPIC_OR_PARTITION, [])], 5, f"{topic} gone from broker {b.port}")
        wait_until(lambda: topic_dirs(b, topic) == [], 15, f"{topic}'s logs gone from broker {b.port}")
    # the dead broker's replicas are not deleted: the deletion waits for it, znodes and all
    assert topic_dirs(down, topic) == [f"{topic}-0", f"{topic}-1", f"{topic}-2"]
    for path in (f"/admin/delete_topics/{topic}", f"/brokers/topics/{topic}", f"/config/topics/{topic}"):
        assert cluster.zk.exists(path) is not None, path
    assert cluster.zk.get_children("/admin/delete_topics") == [topic]

    down.start()
    wait_until(lambda: all(cluster.zk.exists(p) is None for p in (
        f"/admin/delete_topics/{topic}", f"/brokers/topics/{topic}", f"/config/topics/{topic}")), 30,
        "the topic's znodes removed once broker 2 is back")
    assert cluster.zk.get_children("/admin/delete_topics") == []
    wait_until(lambda: topic_dirs(down, topic) == [], 15, "broker 2's replicas deleted")
    for b in cluster.brokers.values():
        wait_until(lambda: sorted(n.node_id for n in metadata(b).brokers) == [0, 1, 2], 30, "broker 2 back")
        md = metadata(b, [topic])
        assert [(t.name, t.error_code) for t in md.topics] == [(topic, UNKNOWN_TOPIC_OR_PARTITION)]
