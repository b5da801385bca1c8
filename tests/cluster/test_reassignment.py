"""Partition reassignment on three kafkalite brokers in ZooKeeper mode, as Kafka 3.9's controller
does it (KafkaController.onPartitionReassignment and its two ways in, AlterPartitionReassignments
and /admin/reassign_partitions).

Kafka's arithmetic, which the exact values below follow:
- RS = (TRS ++ ORS).distinct with adding = RS - ORS and removing = RS - TRS
  (ReplicaAssignment.reassignTo): [0] -> [1] is stored as replicas [1, 0], adding [1], removing [0].
- A reassignment whose targets are all in the ISR completes at once (phase B): the leader moves
  off a removed broker (ReassignPartitionLeaderElectionStrategy: one leader epoch), or stays and
  gets one leader epoch (updateLeaderEpochAndSendRequest); each removed replica then goes Offline,
  which takes it out of the ISR (removeReplicasFromIsr: one more epoch), and is deleted.
- One whose targets are not in sync (phase A) bumps the epoch once and starts the new replicas;
  once they caught up and their leader put them in the ISR (AlterPartition), phase B completes it.
  Cancelling while a new replica cannot catch up goes back to the origin replicas: the adding ones
  go Offline (they were never in the ISR: no epoch) and are deleted, the leader gets one more epoch.
- Topic deletion: Kafka 3.9 marks a reassigning topic ineligible only if it is already queued for
  deletion, so DeleteTopics during an API reassignment proceeds; a topic already queued refuses
  reassignment (UNKNOWN_TOPIC_OR_PARTITION).
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NoReassignmentInProgressError
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, ElectLeadersRequest,
                                  ListPartitionReassignmentsRequest)

from kafkalite.testing import Cluster
from tests.cluster.util import (NONE, broker_ids, consume_all, controller_seen_by, delete_topic, metadata,
                                partition_state, partitions, request, unique, wait_until, zk_json, zookeeper)

pytestmark = pytest.mark.cluster

INVALID_REPLICA_ASSIGNMENT = 39
NOT_CONTROLLER = 41
NO_REASSIGNMENT_IN_PROGRESS = 85
UNKNOWN_TOPIC_OR_PARTITION = 3
PREFERRED = 0

NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
NO_REASSIGNMENT_MESSAGE = "No partition reassignment is in progress."
NO_PARTITION_MESSAGE = "The partition does not exist."


@pytest.fixture(scope="module")
def cluster(zookeeper_server: Any) -> Iterator[Cluster]:
    # a removed replica's <topic>-<p>.<id>-delete directory goes after log.segment.delete.delay.ms
    c = Cluster(3, {"log.segment.delete.delay.ms": "1000"}, zookeeper=zookeeper_server.connect_string)
    try:
        c.start()
        ids = [0, 1, 2]
        wait_until(lambda: all(broker_ids(c.broker(b)) == ids and controller_seen_by(c.broker(b)) in ids
                               for b in ids), 30, "every broker knows every broker and the controller")
        yield c
    finally:
        for b in c.brokers.values():
            b.kill()
        c.close()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=20000)
    try:
        yield a
    finally:
        a.close()


# -- helpers --------------------------------------------------------------------------------------

def _alter_raw(broker: Any, reassignments: dict[tuple[str, int], Optional[list[int]]]) -> Any:
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), replicas in reassignments.items():
        by_topic.setdefault(topic, []).append(T.ReassignablePartition(partition_index=p, replicas=replicas))
    return request(broker, AlterPartitionReassignmentsRequest(
        timeout_ms=15000, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]), 0)


def _alter_results(response: Any) -> dict[tuple[str, int], tuple[int, Optional[str]]]:
    # Kafka's top-level message on success is the generated default "", not null
    assert (response.error_code, response.error_message) == (NONE, ""), response
    return {(t.name, p.partition_index): (p.error_code, p.error_message)
            for t in response.responses for p in t.partitions}


def _list_raw(broker: Any, topics: Optional[dict[str, list[int]]] = None) -> Any:
    T = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    return request(broker, ListPartitionReassignmentsRequest(
        timeout_ms=15000, topics=None if topics is None else
        [T(name=t, partition_indexes=ps) for t, ps in topics.items()]), 0)


def _own(listing: dict[Any, Any], topics: set[str]) -> dict[Any, Any]:
    """The listing narrowed to this test's topics (the module's cluster has the others' too)."""
    return {tp: v for tp, v in listing.items() if tp.topic in topics}


def _everywhere(cluster: Cluster, topic: str, expected: dict[int, tuple[Any, ...]], timeout: float = 15) -> None:
    wait_until(lambda: all(partitions(cluster.broker(b), topic) == expected for b in (0, 1, 2)), timeout,
               f"every broker's Metadata shows {topic} as {expected}")


def _topic_znode(zk: Any, topic: str) -> dict[str, Any]:
    data, _ = zk_json(zk, f"/brokers/topics/{topic}")
    return {k: v for k, v in data.items() if k != "topic_id"}


def _partition_dirs(cluster: Cluster, broker_id: int, topic: str, partition: int) -> list[str]:
    """The partition's directory in the broker's log dir, live or renamed for deletion."""
    log_dir = Path(cluster.broker(broker_id).log_dir)
    if not log_dir.exists():
        return []
    name = f"{topic}-{partition}"
    return sorted(e.name for e in log_dir.iterdir() if e.name == name or e.name.startswith(name + "."))


def _pausable(cluster: Cluster) -> int:
    """Broker 1 or 2, whichever is not the controller: SIGSTOPped briefly as a reassignment target."""
    controller = cluster.controller_id()
    return 2 if controller != 2 else 1


def _not_controller(cluster: Cluster) -> int:
    controller = cluster.controller_id()
    return next(b for b in (0, 1, 2) if b != controller)


# -- phase B at once: shrink and reorder ------------------------------------------------------------

def test_shrink_completes_at_once_and_moves_the_leader(cluster: Cluster, admin: KafkaAdminClient) -> None:
    topic = unique("shrink")
    cluster.create_topic(topic, assignments={0: [0, 1, 2]})
    _everywhere(cluster, topic, {0: (NONE, 0, 0, [0, 1, 2], [0, 1, 2], [])})
    assert _partition_dirs(cluster, 0, topic, 0) == [f"{topic}-0"]
    with zookeeper(cluster) as zk:
        state, version = partition_state(zk, topic, 0)

        assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [1, 2]}) == \
            {TopicPartition(topic, 0): None}
        # the targets were already in the ISR: nothing stays in progress
        assert _own(admin.list_partition_reassignments(), {topic}) == {}
        # leader 0 -> 1 (+1 epoch), then replica 0 Offline leaves the ISR (+1 epoch)
        _everywhere(cluster, topic, {0: (NONE, 1, 2, [1, 2], [1, 2], [])})
        new_state, new_version = partition_state(zk, topic, 0)
        assert (new_state["leader"], new_state["leader_epoch"], new_state["isr"],
                new_state["controller_epoch"]) == (1, 2, [1, 2], state["controller_epoch"])
        assert new_version == version + 2
        assert _topic_znode(zk, topic) == {"version": 3, "partitions": {"0": [1, 2]},
                                           "adding_replicas": {}, "removing_replicas": {}}
        # StopReplica(delete) removed broker 0's copy
        wait_until(lambda: _partition_dirs(cluster, 0, topic, 0) == [], 15,
                   f"{topic}-0's directory gone from broker 0's log dir")
        assert _partition_dirs(cluster, 1, topic, 0) == [f"{topic}-0"]
        assert _partition_dirs(cluster, 2, topic, 0) == [f"{topic}-0"]


def test_reorder_completes_at_once_then_preferred_election(cluster: Cluster, admin: KafkaAdminClient) -> None:
    topic = unique("reorder")
    cluster.create_topic(topic, assignments={0: [0, 1, 2]})
    _everywhere(cluster, topic, {0: (NONE, 0, 0, [0, 1, 2], [0, 1, 2], [])})
    with zookeeper(cluster) as zk:
        assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [2, 0, 1]}) == \
            {TopicPartition(topic, 0): None}
        assert _own(admin.list_partition_reassignments(), {topic}) == {}
        # same replica set, so never "being reassigned": the leader (0) stays, one new epoch
        _everywhere(cluster, topic, {0: (NONE, 0, 1, [2, 0, 1], [0, 1, 2], [])})
        assert _topic_znode(zk, topic) == {"version": 3, "partitions": {"0": [2, 0, 1]},
                                           "adding_replicas": {}, "removing_replicas": {}}
        for b in (0, 1, 2):
            assert _partition_dirs(cluster, b, topic, 0) == [f"{topic}-0"]

        T = ElectLeadersRequest.TopicPartitions
        resp = request(cluster.broker(cluster.controller_id()), ElectLeadersRequest(
            election_type=PREFERRED, topic_partitions=[T(topic=topic, partitions=[0])], timeout_ms=10000), 2)
        assert [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
                for t in resp.replica_election_results] == [(topic, [(0, NONE, None)])]
        _everywhere(cluster, topic, {0: (NONE, 2, 2, [2, 0, 1], [0, 1, 2], [])})
        state, _ = partition_state(zk, topic, 0)
        assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 2, [0, 1, 2])


# -- phase A: a reassignment that adds a broker ----------------------------------------------------

def test_adding_a_broker_completes_once_the_new_replica_is_in_sync(cluster: Cluster, admin: KafkaAdminClient) -> None:
    topic = unique("grow")
    cluster.create_topic(topic, assignments={0: [0]})
    _everywhere(cluster, topic, {0: (NONE, 0, 0, [0], [0], [])})
    tp = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1, linger_ms=0)
    try:
        before = [b"a", b"b", b"c"]
        for i, v in enumerate(before):
            assert producer.send(topic, value=v, partition=0).get(timeout=20).offset == i
        with zookeeper(cluster) as zk:
            _, version = partition_state(zk, topic, 0)
            assert admin.alter_partition_reassignments({tp: [1]}) == {tp: None}
            # broker 1 fetches the three records, leader 0 proposes ISR [0, 1], the controller
            # accepts it and completes the reassignment: leader 1 (epoch 2, ReassignPartitionLeader
            # election), replica 0 Offline out of the ISR (epoch 3) and deleted
            _everywhere(cluster, topic, {0: (NONE, 1, 3, [1], [1], [])})
            assert _topic_znode(zk, topic) == {"version": 3, "partitions": {"0": [1]},
                                               "adding_replicas": {}, "removing_replicas": {}}
            state, v = partition_state(zk, topic, 0)
            # A1 (epoch), the leader's AlterPartition, B3 (leader), B4 (ISR): four znode versions
            assert (state["leader"], state["leader_epoch"], state["isr"], v) == (1, 3, [1], version + 4)
            assert _own(admin.list_partition_reassignments(), {topic}) == {}
            wait_until(lambda: _partition_dirs(cluster, 0, topic, 0) == [], 15,
                       f"{topic}-0's directory gone from broker 0's log dir")
        # every record is on the new replica, under the offsets the old one gave them
        assert consume_all(cluster.bootstrap_servers, topic, 0, 3) == before
        assert producer.send(topic, value=b"d", partition=0).get(timeout=20).offset == 3
        assert consume_all(cluster.bootstrap_servers, topic, 0, 4) == before + [b"d"]
    finally:
        producer.close()


def test_adding_a_broker_that_cannot_catch_up_stays_in_progress_until_cancelled(
        cluster: Cluster, admin: KafkaAdminClient) -> None:
    """The adding replica's broker is paused (SIGSTOP, well within its ZooKeeper session): it never
    joins the ISR, so the reassignment stays in progress; cancelling goes back to the origin."""
    topic = unique("stuck")
    cluster.create_topic(topic, assignments={0: [0]})
    _everywhere(cluster, topic, {0: (NONE, 0, 0, [0], [0], [])})
    tp = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=cluster.broker(0).bootstrap_servers, acks=1, linger_ms=0)
    target = _pausable(cluster)
    paused = cluster.broker(target)
    try:
        before = [b"a", b"b", b"c"]
        for i, v in enumerate(before):
            assert producer.send(topic, value=v, partition=0).get(timeout=20).offset == i
        with zookeeper(cluster) as zk:
            _, version = partition_state(zk, topic, 0)
            os.kill(paused.pid, signal.SIGSTOP)
            try:
                assert admin.alter_partition_reassignments({tp: [target]}) == {tp: None}
                # RS = TRS ++ ORS: [target] ++ [0]
                in_progress = {"replicas": [target, 0], "adding_replicas": [target], "removing_replicas": [0]}
                assert admin.list_partition_reassignments([tp]) == {tp: in_progress}
                assert _topic_znode(zk, topic) == {"version": 3, "partitions": {"0": [target, 0]},
                                                   "adding_replicas": {"0": [target]}, "removing_replicas": {"0": [0]}}
                # A1: one new leader epoch, the leader and ISR unchanged
                state, v = partition_state(zk, topic, 0)
                assert (state["leader"], state["leader_epoch"], state["isr"], v) == (0, 1, [0], version + 1)
                time.sleep(2)
                assert admin.list_partition_reassignments([tp]) == {tp: in_progress}
                # the leader keeps serving meanwhile
                assert producer.send(topic, value=b"d", partition=0).get(timeout=20).offset == 3
                # cancel: back to ORS = [0]; the adding replica goes Offline (never in the ISR: no
                # epoch for that); the leader stays and gets one more epoch (phase B on the reverted
                # assignment)
                assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
                assert admin.list_partition_reassignments([tp]) == {}
                assert _topic_znode(zk, topic) == {"version": 3, "partitions": {"0": [0]},
                                                   "adding_replicas": {}, "removing_replicas": {}}
                state, v = partition_state(zk, topic, 0)
                assert (state["leader"], state["leader_epoch"], state["isr"], v) == (0, 2, [0], version + 2)
            finally:
                os.kill(paused.pid, signal.SIGCONT)
            # once running again, the paused broker gets the queued requests: its replica comes and goes
            _everywhere(cluster, topic, {0: (NONE, 0, 2, [0], [0], [])})
            wait_until(lambda: _partition_dirs(cluster, target, topic, 0) == [], 15,
                       f"{topic}-0's directory gone from broker {target}'s log dir")
            assert _partition_dirs(cluster, 0, topic, 0) == [f"{topic}-0"]
            assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert consume_all(cluster.bootstrap_servers, topic, 0, 4) == before + [b"d"]
    finally:
        producer.close()


def test_deleting_a_topic_being_reassigned(cluster: Cluster, admin: KafkaAdminClient) -> None:
    """Kafka 3.9's processTopicDeletion marks a reassigning topic ineligible for deletion *before*
    queueing it, and markTopicIneligibleForDeletion only halts topics already queued: so a
    DeleteTopics during an API reassignment is not held back; the topic goes, the adding replica
    with it, and nothing is left in progress."""
    topic = unique("doomed")
    cluster.create_topic(topic, assignments={0: [0]})
    tp = TopicPartition(topic, 0)
    # the target broker paused (well within its session) so its new replica cannot join the ISR and end
    # the reassignment first; it resumes while the deletion waits for its StopReplica
    target = _pausable(cluster)
    paused = cluster.broker(target)
    other = 3 - target
    os.kill(paused.pid, signal.SIGSTOP)
    resume = threading.Timer(3.0, lambda: os.kill(paused.pid, signal.SIGCONT))
    try:
        assert admin.alter_partition_reassignments({tp: [target]}) == {tp: None}
        wait_until(lambda: all(partitions(cluster.broker(b), topic) == {0: (NONE, 0, 1, [target, 0], [0], [])}
                               for b in (0, other)), 15, f"brokers 0 and {other} show {topic} reassigning")
        controller = cluster.broker(cluster.controller_id())
        resume.start()
        with zookeeper(cluster) as zk:
            assert delete_topic(controller, topic, timeout_ms=15000) == NONE
    finally:
        resume.cancel()
        os.kill(paused.pid, signal.SIGCONT)
    with zookeeper(cluster) as zk:
        wait_until(lambda: zk.exists(f"/brokers/topics/{topic}") is None
                   and zk.exists(f"/admin/delete_topics/{topic}") is None, 15, f"{topic}'s znodes deleted")
        for b in (0, target):
            wait_until(lambda: _partition_dirs(cluster, b, topic, 0) == [], 15, f"{topic}-0 gone from broker {b}")
        assert _own(admin.list_partition_reassignments(), {topic}) == {}
        assert admin.list_partition_reassignments([tp]) == {}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}


# -- refusals ---------------------------------------------------------------------------------------

def test_refusals(cluster: Cluster) -> None:
    """KafkaController.validateReplicas (before the partition is even looked up), then
    maybeBuildReassignment and maybeTriggerPartitionReassignment; messages as Kafka renders them
    (the request's replica list is a Scala ArrayBuffer, the live brokers a Set)."""
    topic = unique("refused")
    cluster.create_topic(topic, assignments={p: [0, 1] for p in range(5)})
    other = unique("refused-other")   # never created
    dead = "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(7), " \
           "live broker list: Set(0, 1, 2)"
    requested: dict[tuple[str, int], tuple[Optional[list[int]], int, Optional[str]]] = {
        (topic, 0): ([], INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."),
        (topic, 1): ([1, 1], INVALID_REPLICA_ASSIGNMENT,
                     "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)"),
        (topic, 2): ([0, -1], INVALID_REPLICA_ASSIGNMENT, "Invalid broker id in replica list: ArrayBuffer(0, -1)"),
        # 7 is not a broker of this cluster (only the adding replicas must be alive)
        (topic, 3): ([1, 7], INVALID_REPLICA_ASSIGNMENT, dead),
        (topic, 4): (None, NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT_MESSAGE),
        (topic, 9): ([1], UNKNOWN_TOPIC_OR_PARTITION, NO_PARTITION_MESSAGE),
        (topic, 10): ([7], INVALID_REPLICA_ASSIGNMENT, dead),
        (other, 0): ([1], UNKNOWN_TOPIC_OR_PARTITION, NO_PARTITION_MESSAGE),
        (other, 1): (None, NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT_MESSAGE),
    }
    controller = cluster.broker(cluster.controller_id())
    response = _alter_raw(controller, {k: r for k, (r, _, _) in requested.items()})
    assert _alter_results(response) == {k: (code, message) for k, (_, code, message) in requested.items()}
    # nothing changed, nothing in progress
    listed = _list_raw(controller, {topic: list(range(5)), other: [0, 1]})
    assert (listed.error_code, listed.error_message, listed.topics) == (NONE, "", [])
    with zookeeper(cluster) as zk:
        assert _topic_znode(zk, topic) == {"version": 3, "partitions": {str(p): [0, 1] for p in range(5)},
                                           "adding_replicas": {}, "removing_replicas": {}}
        for p in range(5):
            state, version = partition_state(zk, topic, p)
            assert (state["leader"], state["leader_epoch"], state["isr"], version) == (0, 0, [0, 1], 0)
        assert zk.exists(f"/brokers/topics/{other}") is None


def test_a_broker_that_is_not_the_controller_refuses(cluster: Cluster) -> None:
    topic = unique("not-controller")
    cluster.create_topic(topic, assignments={0: [0, 1]})
    broker = cluster.broker(_not_controller(cluster))
    resp = _alter_raw(broker, {(topic, 0): [1, 0]})
    assert (resp.error_code, resp.error_message, resp.responses) == (NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE, [])
    resp = _list_raw(broker)
    assert (resp.error_code, resp.error_message, resp.topics) == (NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE, [])
    with zookeeper(cluster) as zk:
        assert _topic_znode(zk, topic)["partitions"] == {"0": [0, 1]}


# -- the ZooKeeper way in ---------------------------------------------------------------------------

def test_reassign_partitions_znode(cluster: Cluster) -> None:
    topic = unique("zk-path")
    cluster.create_topic(topic, assignments={0: [0, 1, 2], 1: [1, 2, 0]})
    _everywhere(cluster, topic, {0: (NONE, 0, 0, [0, 1, 2], [0, 1, 2], []),
                                 1: (NONE, 1, 0, [1, 2, 0], [1, 2, 0], [])})
    with zookeeper(cluster) as zk:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [2, 1]},
            {"topic": topic, "partition": 1, "replicas": [0, 2, 1]}]}).encode(), makepath=True)
        # both complete at once, and the controller deletes the znode
        wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 15,
                   "the controller deleted /admin/reassign_partitions")
        # partition 0: leader 0 removed -> 2 (first target in the ISR); 0 leaves the ISR
        # partition 1: reordered, leader 1 stays with one new epoch
        _everywhere(cluster, topic, {0: (NONE, 2, 2, [2, 1], [1, 2], []),
                                     1: (NONE, 1, 1, [0, 2, 1], [1, 2, 0], [])})
        assert _topic_znode(zk, topic) == {"version": 3, "partitions": {"0": [2, 1], "1": [0, 2, 1]},
                                           "adding_replicas": {}, "removing_replicas": {}}
        wait_until(lambda: _partition_dirs(cluster, 0, topic, 0) == [], 15,
                   f"{topic}-0's directory gone from broker 0's log dir")
        assert _partition_dirs(cluster, 0, topic, 1) == [f"{topic}-1"]


# -- a topic queued for deletion (runs last: it stops a broker) --------------------------------------

def test_topic_queued_for_deletion_cannot_be_reassigned(cluster: Cluster, admin: KafkaAdminClient) -> None:
    """A topic whose deletion waits (one replica's broker is down) refuses reassignment as Kafka's
    maybeTriggerPartitionReassignment does: UNKNOWN_TOPIC_OR_PARTITION, "The partition does not
    exist."; the deletion completes once the broker is back."""
    down = _not_controller(cluster)
    up = next(b for b in (0, 1, 2) if b != down)
    topic = unique("queued")
    cluster.create_topic(topic, assignments={0: [down], 1: [up]})
    cluster.broker(down).stop()
    controller = cluster.broker(cluster.controller_id())
    with zookeeper(cluster) as zk:
        wait_until(lambda: zk.exists(f"/brokers/ids/{down}") is None, 15, f"broker {down} deregistered")
        wait_until(lambda: broker_ids(controller) == sorted({0, 1, 2} - {down}), 15, "the controller saw it go")
        # Kafka's onTopicDeletion takes the topic out of every broker's metadata at once (leader
        # -2 in UpdateMetadata), so DeleteTopics succeeds; the replica on the stopped broker
        # cannot be deleted, so the topic stays queued and its znodes stay
        assert delete_topic(controller, topic, timeout_ms=10000) == NONE
        assert metadata(controller, [topic]).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
        time.sleep(1)
        assert zk.exists(f"/admin/delete_topics/{topic}") is not None
        assert zk.exists(f"/brokers/topics/{topic}") is not None
        target = sorted({0, 1, 2} - {down})
        results = _alter_results(_alter_raw(controller, {(topic, 1): target, (topic, 0): None}))
        assert results == {(topic, 1): (UNKNOWN_TOPIC_OR_PARTITION, NO_PARTITION_MESSAGE),
                           # nothing in progress to cancel: refused before the deletion check
                           (topic, 0): (NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT_MESSAGE)}
        assert _own(admin.list_partition_reassignments(), {topic}) == {}
        assert _topic_znode(zk, topic)["partitions"] == {"0": [down], "1": [up]}
        assert zk.exists(f"/admin/delete_topics/{topic}") is not None
        cluster.broker(down).start()
        wait_until(lambda: zk.exists(f"/brokers/topics/{topic}") is None
                   and zk.exists(f"/admin/delete_topics/{topic}") is None, 20,
                   f"{topic} deleted once broker {down} is back")
