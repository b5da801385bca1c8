"""KIP-951 over real brokers and ZooKeeper: a Produce v10+ sent to a broker that does not lead the
partition is answered NOT_LEADER_OR_FOLLOWER with the partition's current leader and epoch, and
the response lists that leader's endpoint on the request's listener (with its rack), as Kafka's
KafkaApis.handleProduceRequest does; the broker's own replica (a follower) and, when it hosts no
replica, its metadata cache give the leader. Below v10 neither field is on the wire; a partition
the cluster does not have gets no leader. Nothing is appended anywhere. Fetch v16+ does the same
for a partition the broker does not host (handleFetchRequest); v15 carries no hint.
"""
from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.cluster.test_fetch_from_follower import racks, topic_id
from tests.cluster.util import create_topic_with_assignment, partitions, request, unique, wait_equal

pytestmark = pytest.mark.cluster

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6


def one_batch() -> bytes:
    b = MemoryRecordsBuilder(2, 0, 1 << 16)
    b.append(1_700_000_000_000, b"k", b"must not be appended")
    b.close()
    return bytes(b.buffer())


def produce(broker: Any, version: int, topic: str, tid: Any, partition_indexes: list[int]) -> Any:
    R = ProduceRequest[version]
    T = R.TopicProduceData
    parts = [T.PartitionProduceData(index=i, records=one_batch()) for i in partition_indexes]
    t = T(topic_id=tid, partition_data=parts) if version >= 13 else T(name=topic, partition_data=parts)
    return request(broker, R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[t]), version)


def fetch(broker: Any, version: int, tid: Any) -> Any:
    """A consumer's Fetch (no session, by topic id) of partition 0 from offset 0."""
    T = FetchRequest.FetchTopic
    part = T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1 << 20)
    fields: dict[str, Any] = dict(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                                  session_epoch=-1, topics=[T(topic_id=tid, partitions=[part])],
                                  forgotten_topics_data=[], rack_id="")
    if version < 15:
        fields["replica_id"] = -1
    return request(broker, FetchRequest[version](**fields), version)


def test_produce_to_a_non_leader_names_the_current_leader(make_cluster: Any) -> None:
    cluster = make_cluster(2, broker_overrides=racks(2))
    leader, other = 0, 1
    replicated, single = unique("kip951-rf2"), unique("kip951-rf1")
    assert create_topic_with_assignment(cluster.broker(leader), replicated, {0: [leader, other]}) == NONE
    assert create_topic_with_assignment(cluster.broker(leader), single, {0: [leader]}) == NONE
    for topic in (replicated, single):
        wait_equal(lambda: partitions(cluster.broker(other), topic)[0][1], leader, 20, f"{topic}'s leader")
    epoch = {t: partitions(cluster.broker(leader), t)[0][2] for t in (replicated, single)}
    lb = cluster.broker(leader)
    for version in range(9, 14):
        for topic in (replicated, single):     # a follower replica here; no replica here at all
            tid = topic_id(cluster.broker(other), topic)
            resp = produce(cluster.broker(other), version, topic, tid, [0, 7])
            (t,) = resp.responses
            by_index = {p.index: p for p in t.partition_responses}
            assert sorted(by_index) == [0, 7]
            moved, missing = by_index[0], by_index[7]
            assert (moved.error_code, moved.base_offset) == (NOT_LEADER_OR_FOLLOWER, -1), (version, moved)
            assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION, (version, missing)
            assert getattr(missing, "current_leader", None) is None, (version, missing)
            if version >= 10:
                assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == \
                    (leader, epoch[topic]), (version, topic)
                assert [(e.node_id, e.host, e.port, e.rack) for e in resp.node_endpoints] == \
                    [(leader, lb.host, lb.port, f"r{leader}")], (version, topic)
            else:
                assert getattr(moved, "current_leader", None) is None, version
                assert not getattr(resp, "node_endpoints", None), version
    # Fetch from the broker with no replica of `single`
    tid = topic_id(cluster.broker(other), single)
    for version in (15, 16, 17, 18):
        resp = fetch(cluster.broker(other), version, tid)
        assert resp.error_code == NONE, resp
        (p,) = resp.responses[0].partitions
        assert (p.error_code, p.high_watermark) == (NOT_LEADER_OR_FOLLOWER, -1), (version, p)
        if version >= 16:
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, epoch[single]), version
            assert [(e.node_id, e.host, e.port, e.rack) for e in resp.node_endpoints] == \
                [(leader, lb.host, lb.port, f"r{leader}")], version
        else:
            assert getattr(p, "current_leader", None) is None, version
            assert not getattr(resp, "node_endpoints", None), version
    # nothing was appended on either broker (the rejected batches went nowhere)
    for topic in (replicated, single):
        resp = produce(lb, 9, topic, None, [0])
        assert resp.responses[0].partition_responses[0].base_offset == 0, topic
