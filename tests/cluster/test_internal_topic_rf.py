"""The coordinators' internal topics get their configured replication factor, as in Kafka 3.9
(AutoTopicCreationManager.creatableTopic asks for offsets.topic.replication.factor /
transaction.state.log.replication.factor as they are; ZkAdminManager refuses a factor above the
live brokers with INVALID_REPLICATION_FACTOR).

Two brokers of a cluster sized for three (factor 3): every FindCoordinator, group or
transaction, answers COORDINATOR_NOT_AVAILABLE with no node, and neither topic exists in
ZooKeeper or in Metadata; the broker logs the refused creation. The third broker starts: the next
FindCoordinator creates `__consumer_offsets` and `__transaction_state` with three replicas per
partition (`__transaction_state` with min.insync.replicas 2) and the coordinator is found.
A two-broker test cluster, whose defaults are sized to it (kafkalite.testing.cluster_size_defaults),
gets its coordinators with two replicas."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from kafkalite.testing import Cluster
from tests.cluster.util import (broker_ids, controller_seen_by, metadata, request, unique, wait_until, zk_json,
                                zookeeper)

pytestmark = pytest.mark.cluster

FIND_COORDINATOR_VERSION = 3
COORDINATOR_NOT_AVAILABLE = 15
GROUP, TRANSACTION = 0, 1
OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
OFFSETS_PARTITIONS = 3          # CLUSTER_TEST_DEFAULTS
TXN_PARTITIONS = 50             # Kafka's transaction.state.log.num.partitions


def find_coordinator(broker: Any, key: str, key_type: int) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator v3 sent to `broker`."""
    r = request(broker, FindCoordinatorRequest(key=key, key_type=key_type), FIND_COORDINATOR_VERSION)
    return int(r.error_code), int(r.node_id)


def internal_topics_in_metadata(broker: Any) -> list[str]:
    return sorted(t.name for t in metadata(broker).topics if t.name in (OFFSETS, TXN_STATE))


def replica_counts(zk: Any, topic: str) -> dict[int, int]:
    data, _ = zk_json(zk, f"/brokers/topics/{topic}")
    return {int(p): len(r) for p, r in data["partitions"].items()}


@pytest.fixture
def unstarted_cluster(zookeeper_server: Any) -> Iterator[Cluster]:
    """Three brokers on the session's ZooKeeper, none started: the test starts them."""
    c = Cluster(3, zookeeper=zookeeper_server.connect_string)
    try:
        yield c
    finally:
        for b in c.brokers.values():
            b.kill()
        c.close()


def test_internal_topics_wait_for_as_many_brokers_as_their_replication_factor(unstarted_cluster: Cluster) -> None:
    c = unstarted_cluster
    for b in c.brokers.values():
        assert (b.overrides["offsets.topic.replication.factor"], b.overrides["transaction.state.log.replication.factor"],
                b.overrides["transaction.state.log.min.isr"]) == ("3", "3", "2")
    c.broker(0).start()
    c.broker(1).start()
    wait_until(lambda: all(broker_ids(c.broker(b)) == [0, 1] and controller_seen_by(c.broker(b)) in (0, 1)
                           for b in (0, 1)), 30, "brokers 0 and 1 know each other and the controller")
    group, txn_id = unique("rf-group"), unique("rf-txn")

    # the clients retry for as long as it takes: every answer meanwhile is the same
    answers: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        for b in (0, 1):
            answers.add(find_coordinator(c.broker(b), group, GROUP))
            answers.add(find_coordinator(c.broker(b), txn_id, TRANSACTION))
        time.sleep(0.25)
    assert answers == {(COORDINATOR_NOT_AVAILABLE, -1)}
    with zookeeper(c) as zk:
        assert (zk.exists(f"/brokers/topics/{OFFSETS}"), zk.exists(f"/brokers/topics/{TXN_STATE}")) == (None, None)
    assert [internal_topics_in_metadata(c.broker(b)) for b in (0, 1)] == [[], []]
    refusals = [line for b in (0, 1) for line in c.broker(b).output().splitlines()
                if "Error processing create topic request for topic" in line]
    assert any(f"topic {OFFSETS}: INVALID_REPLICATION_FACTOR: Replication factor: 3 larger than available "
               "brokers: 2." in line for line in refusals), refusals
    assert any(f"topic {TXN_STATE}: INVALID_REPLICATION_FACTOR: Replication factor: 3 larger than available "
               "brokers: 2." in line for line in refusals), refusals

    c.broker(2).start()
    wait_until(lambda: all(broker_ids(c.broker(b)) == [0, 1, 2] for b in (0, 1, 2)), 30, "every broker knows three")
    found: dict[str, tuple[int, int]] = {}

    def coordinators_found() -> bool:
        found["group"] = find_coordinator(c.broker(0), group, GROUP)
        found["txn"] = find_coordinator(c.broker(1), txn_id, TRANSACTION)
        return found["group"][0] == 0 and found["txn"][0] == 0
    wait_until(coordinators_found, 60, "the group and transaction coordinators found")
    assert found["group"][1] in (0, 1, 2) and found["txn"][1] in (0, 1, 2), found
    with zookeeper(c) as zk:
        assert replica_counts(zk, OFFSETS) == {p: 3 for p in range(OFFSETS_PARTITIONS)}
        assert replica_counts(zk, TXN_STATE) == {p: 3 for p in range(TXN_PARTITIONS)}
        assert zk_json(zk, f"/config/topics/{TXN_STATE}")[0]["config"]["min.insync.replicas"] == "2"
        assert "min.insync.replicas" not in zk_json(zk, f"/config/topics/{OFFSETS}")[0]["config"]
    wait_until(lambda: all(internal_topics_in_metadata(c.broker(b)) == [OFFSETS, TXN_STATE] for b in (0, 1, 2)),
               30, "every broker's Metadata lists both internal topics")
    for t in metadata(c.broker(2)).topics:
        if t.name in (OFFSETS, TXN_STATE):
            assert t.is_internal and {len(p.replica_nodes) for p in t.partitions} == {3}, t


def test_a_two_broker_test_cluster_gets_its_coordinators(make_cluster: Any) -> None:
    c = make_cluster(brokers=2)
    group, txn_id = unique("rf2-group"), unique("rf2-txn")
    found: dict[str, tuple[int, int]] = {}

    def coordinators_found() -> bool:
        found["group"] = find_coordinator(c.broker(0), group, GROUP)
        found["txn"] = find_coordinator(c.broker(1), txn_id, TRANSACTION)
        return found["group"][0] == 0 and found["txn"][0] == 0
    wait_until(coordinators_found, 60, "the group and transaction coordinators found")
    with zookeeper(c) as zk:
        assert replica_counts(zk, OFFSETS) == {p: 2 for p in range(OFFSETS_PARTITIONS)}
        assert replica_counts(zk, TXN_STATE) == {p: 2 for p in range(TXN_PARTITIONS)}
        assert zk_json(zk, f"/config/topics/{TXN_STATE}")[0]["config"]["min.insync.replicas"] == "2"
