"""Unclean leader election over real brokers and ZooKeeper (Kafka 3.9, ZooKeeper mode).

Two topics, each one partition on brokers A (leader) and B (follower), a third broker C is the
controller. B is SIGSTOPped; the acks=all write of m0..m9 makes A shrink the ISR to itself
(replica.lag.time.max.ms, AlterPartition) and is acknowledged by A alone (min.insync.replicas=1);
A is SIGKILLed and B resumed. Then:

- with unclean.leader.election.enable false (Kafka's default) neither partition has a leader:
  Metadata says LEADER_NOT_AVAILABLE with leader -1, B takes no writes and serves nothing beyond
  the high watermark it had;
- the topic config set to true (IncrementalAlterConfigs, as Kafka's docs say) makes the controller
  elect B for that topic only (Kafka's TopicConfigHandler -> enableTopicUncleanLeaderElection),
  leader epoch + 1, ISR [B]; ElectLeaders UNCLEAN (election_type 1) elects B for the other topic
  although its config is still false (Kafka: an admin-triggered unclean election is allowed);
- what B never got (exactly the offsets from its log end on: m0..m9) is gone, new writes go to B;
- A restarts, truncates to B's log by leader epoch, rejoins the ISR, and both replicas' logs are
  identical batch by batch (base/last offset, partition leader epoch, CRC) after a clean stop.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from kafka.protocol.admin import ElectLeadersRequest, IncrementalAlterConfigsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from kafkalite.log.record_batch import build_batch, decode_records, split_batches
from tests.cluster.util import (FAST_EXPIRY, broker_ids, controller_seen_by, create_topic_with_assignment,
                                partition_state, partitions, request, unique, wait_equal, wait_until, zookeeper)

pytestmark = pytest.mark.cluster

NONE = 0
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
ELECTION_NOT_NEEDED = 84
UNCLEAN = 1
TOPIC_RESOURCE = 2
SET = 0


def produce_to(broker: Any, topic: str, values: list[bytes], acks: int = -1) -> tuple[int, int]:
    """(error code, base offset) of one Produce v9 of one batch straight to `broker`."""
    P = ProduceRequest.TopicProduceData
    batch = build_batch([(None, v, int(time.time() * 1000)) for v in values])
    resp = request(broker, ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9, 20000)
    pr = resp.responses[0].partition_responses[0]
    return int(pr.error_code), int(pr.base_offset)


def fetch(broker: Any, topic: str, offset: int = 0, version: int = 12) -> Any:
    """A consumer's Fetch (v11+ may read a follower up to its HW) of partition 0."""
    T = FetchRequest.FetchTopic
    fields: dict[str, Any] = dict(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                  session_id=0, session_epoch=-1, forgotten_topics_data=[],
                                  topics=[T(topic=topic, partitions=[T.FetchPartition(
                                      partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                      last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])])
    if version >= 11:
        fields["rack_id"] = ""
    resp = request(broker, FetchRequest[version](**fields), version)
    assert resp.error_code == NONE, resp
    return resp.responses[0].partitions[0]


def values_of(records: Optional[bytes], from_offset: int = 0) -> list[tuple[int, bytes]]:
    data = records or b""
    out: list[tuple[int, bytes]] = []
    for pos, h in split_batches(data)[0]:
        out += [(r.offset, r.value) for r in decode_records(memoryview(data)[pos:pos + h.size], h)
                if r.offset >= from_offset]
    return out


def segment_batches(log_dir: Path, topic: str) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, partition leader epoch, CRC) of each batch on disk."""
    out: list[tuple[int, int, int, int]] = []
    for seg in sorted((Path(log_dir) / f"{topic}-0").glob("*.log")):
        data = seg.read_bytes()
        found, valid = split_batches(data)
        assert valid == len(data), f"{seg}: {len(data) - valid} trailing bytes"
        out += [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc) for _pos, h in found]
    return out


def set_topic_config(broker: Any, topic: str, name: str, value: str) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = request(broker, IncrementalAlterConfigsRequest[1](resources=[R(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configs=[R.AlterableConfig(name=name, config_operation=SET, value=value)])], validate_only=False), 1)
    (r,) = resp.responses
    assert (r.error_code, r.error_message) == (NONE, None), r


def elect_unclean(broker: Any, topic: str) -> tuple[int, Optional[str]]:
    T = ElectLeadersRequest.TopicPartitions
    resp = request(broker, ElectLeadersRequest[2](election_type=UNCLEAN, topic_partitions=[T(topic=topic, partitions=[0])],
                                                  timeout_ms=20000), 2, 30000)
    assert resp.error_code == NONE, resp
    (topic_result,) = resp.replica_election_results
    assert topic_result.topic == topic
    (p,) = topic_result.partition_result
    assert p.partition_id == 0
    return p.error_code, p.error_message


def test_unclean_election_by_topic_config_and_by_elect_leaders(make_cluster: Any) -> None:
    # a 10 s ZooKeeper session: B, stopped for ~5 s, keeps its registration (the leader, not the
    # controller, takes it out of the ISR)
    cluster = make_cluster(3, {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "1",
                               "zookeeper.session.timeout.ms": "10000", "replica.fetch.wait.max.ms": "500"})
    controller = cluster.controller_id()
    a, b = [i for i in sorted(cluster.brokers) if i != controller]
    every = sorted(cluster.brokers)
    # A's death is noticed when its session expires: A alone gets a short one, restarted with it
    # before any topic exists, and is back once the controller told it about every broker
    cluster.broker(a).overrides.update(FAST_EXPIRY)
    cluster.broker(a).restart()
    wait_until(lambda: broker_ids(cluster.broker(a)) == every and controller_seen_by(cluster.broker(a)) == controller,
               30, f"broker {a} back with a short session")
    by_config, by_admin = unique("unclean-cfg"), unique("unclean-admin")
    topics = (by_config, by_admin)
    for t in topics:
        assert create_topic_with_assignment(cluster.broker(controller), t, {0: [a, b]}) == 0
    wait_equal(lambda: {(x, t): partitions(cluster.broker(x), t)[0][:5] for x in every for t in topics},
               {(x, t): (NONE, a, 0, [a, b], [a, b]) for x in every for t in topics}, 30, "both topics everywhere")

    base = [b"b%d" % i for i in range(5)]
    lost = [b"m%d" % i for i in range(10)]
    for t in topics:
        assert produce_to(cluster.broker(a), t, base) == (NONE, 0)
        # B learns the high watermark 5 on its next fetch
        wait_equal(lambda: fetch(cluster.broker(b), t).high_watermark, len(base), 20, f"B's HW of {t}")

    # B stops. A follower at the leader's log end stays in sync however long it is silent (Kafka's
    # isCaughtUp), so the acks=all write of m0..m9 is what makes A drop it: the write waits until A
    # shrinks the ISR to itself (replica.lag.time.max.ms) and is then acknowledged by A alone.
    os.kill(cluster.broker(b).pid, signal.SIGSTOP)
    try:
        # B's fetch waiting at A (replica.fetch.wait.max.ms) is answered empty first: answered by the
        # write instead, it would carry m0..m9 into B's socket, appended once B resumes
        time.sleep(1.5)
        for t in topics:
            assert produce_to(cluster.broker(a), t, lost) == (NONE, len(base))
        with zookeeper(cluster) as zk:
            # the leader's AlterPartition (leader epoch kept), not the controller (which would bump it)
            states = {t: partition_state(zk, t, 0)[0] for t in topics}
            assert {t: (st["leader"], st["leader_epoch"], st["isr"]) for t, st in states.items()} == {
                t: (a, 0, [a]) for t in topics}, states
        cluster.broker(a).kill()
    finally:
        os.kill(cluster.broker(b).pid, signal.SIGCONT)

    with zookeeper(cluster) as zk:
        # A's session ends: no ISR member is alive, the partitions go offline (Kafka keeps the last ISR member)
        wait_equal(lambda: {t: (partition_state(zk, t, 0)[0]["leader"], partition_state(zk, t, 0)[0]["isr"])
                            for t in topics}, {t: (-1, [a]) for t in topics}, 30, "both partitions offline")
        offline_epoch = {t: partition_state(zk, t, 0)[0]["leader_epoch"] for t in topics}
    wait_equal(lambda: {(x, t): partitions(cluster.broker(x), t)[0][:2] for x in (controller, b) for t in topics},
               {(x, t): (LEADER_NOT_AVAILABLE, -1) for x in (controller, b) for t in topics}, 30,
               "Metadata: LEADER_NOT_AVAILABLE, leader -1")

    # unclean election disabled: it stays so, B takes no writes, serves only up to its old HW
    time.sleep(3)
    for t in topics:
        assert partitions(cluster.broker(controller), t)[0][:2] == (LEADER_NOT_AVAILABLE, -1)
        assert produce_to(cluster.broker(b), t, [b"x"])[0] == NOT_LEADER_OR_FOLLOWER
        p = fetch(cluster.broker(b), t, 0)
        assert values_of(p.records) == list(enumerate(base))
        p = fetch(cluster.broker(b), t, len(base))
        assert values_of(p.records) == []
        assert fetch(cluster.broker(b), t, 0, version=10).error_code == NOT_LEADER_OR_FOLLOWER
        assert fetch(cluster.broker(controller), t, 0).error_code == NOT_LEADER_OR_FOLLOWER

    # the topic config turned on: B is elected for that topic only
    set_topic_config(cluster.broker(controller), by_config, "unclean.leader.election.enable", "true")
    wait_equal(lambda: {x: partitions(cluster.broker(x), by_config)[0][:5] for x in (controller, b)},
               {x: (NONE, b, offline_epoch[by_config] + 1, [a, b], [b]) for x in (controller, b)}, 30,
               "B elected uncleanly for the topic whose config allows it")
    time.sleep(1)
    assert partitions(cluster.broker(controller), by_admin)[0][:2] == (LEADER_NOT_AVAILABLE, -1)
    assert elect_unclean(cluster.broker(controller), by_config) == (
        ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")

    # ElectLeaders UNCLEAN elects B although the topic's config is false (Kafka: admin-triggered)
    assert elect_unclean(cluster.broker(controller), by_admin) == (NONE, None)
    wait_equal(lambda: {x: partitions(cluster.broker(x), by_admin)[0][:5] for x in (controller, b)},
               {x: (NONE, b, offline_epoch[by_admin] + 1, [a, b], [b]) for x in (controller, b)}, 30,
               "B elected uncleanly by ElectLeaders")

    new = [b"n%d" % i for i in range(5)]
    for t in topics:
        # m0..m9 (offsets 5..14, beyond B's log end) are gone; new writes go to B from offset 5
        p = fetch(cluster.broker(b), t, 0)
        assert (p.error_code, p.high_watermark) == (NONE, len(base))
        assert values_of(p.records) == list(enumerate(base))
        assert produce_to(cluster.broker(b), t, new) == (NONE, len(base))
        wait_equal(lambda: values_of(fetch(cluster.broker(b), t, 0).records), list(enumerate(base + new)), 10,
                   f"{t} on B")

    # A comes back: it truncates to B's log by leader epoch and rejoins the ISR
    cluster.broker(a).start()
    wait_equal(lambda: {(x, t): partitions(cluster.broker(x), t)[0][:5] for x in every for t in topics},
               # the leader's AlterPartition adds A after itself, as Kafka's expandIsr (isr + replica)
               {(x, t): (NONE, b, offline_epoch[t] + 1, [a, b], [b, a]) for x in every for t in topics}, 40,
               "A back in the ISR of both topics")
    for t in topics:
        wait_equal(lambda: fetch(cluster.broker(a), t, 0).high_watermark, len(base + new), 20, f"A's HW of {t}")
        assert values_of(fetch(cluster.broker(a), t, 0).records) == list(enumerate(base + new))
    for x in (a, b, controller):
        assert cluster.broker(x).stop(30) == 0
    for t in topics:
        on_a = segment_batches(cluster.broker(a).log_dir, t)
        on_b = segment_batches(cluster.broker(b).log_dir, t)
        assert on_a == on_b, (t, on_a, on_b)
        assert [(base_offset, last, epoch) for base_offset, last, epoch, _crc in on_b] == [
            (0, 4, 0), (5, 9, offline_epoch[t] + 1)]
