"""KIP-392, fetch from the closest replica, over real brokers and ZooKeeper: three brokers in racks
r0/r1/r2 with `replica.selector.class` = Kafka's RackAwareReplicaSelector and an RF3 topic.

- The leader answers a consumer's Fetch (v11+: it carries the client's rack) from a follower's rack
  with NONE, no records and preferred_read_replica = that follower; from its own rack, an unknown
  rack or no rack with the records and -1 (Kafka's RackAwareReplicaSelector picks the leader).
- The follower answers the same Fetch with the records up to its high watermark; below v11 (no
  client metadata, so Kafka's fetchOnlyLeader) with NOT_LEADER_OR_FOLLOWER.
- confluent-kafka with `client.rack` = a follower's rack reads everything in order from that
  follower (librdkafka's statistics name the broker it fetches from).
- Without `replica.selector.class` the leader always serves and never names another replica.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Optional

import pytest
from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from kafkalite.log.record_batch import decode_records, split_batches
from tests.cluster.util import create_topic_with_assignment, partitions, request, unique, wait_equal

pytestmark = pytest.mark.cluster

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
N = 40


def racks(n: int) -> dict[int, dict[str, str]]:
    return {i: {"broker.rack": f"r{i}"} for i in range(n)}


def topic_id(broker: Any, topic: str) -> uuid.UUID:
    resp = request(broker, MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                               allow_auto_topic_creation=False), 12)
    tid = resp.topics[0].topic_id
    return tid if isinstance(tid, uuid.UUID) else uuid.UUID(str(tid))


def fetch(broker: Any, topic: str, version: int, rack: Optional[str], offset: int = 0,
          tid: Optional[uuid.UUID] = None, isolation_level: int = 0) -> Any:
    """One consumer Fetch (no session) of partition 0 from `offset`; the partition's response."""
    T = FetchRequest.FetchTopic
    part = T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1 << 20)
    t = T(topic_id=tid, partitions=[part]) if version >= 13 else T(topic=topic, partitions=[part])
    fields: dict[str, Any] = dict(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation_level,
                                  session_id=0, session_epoch=-1, topics=[t], forgotten_topics_data=[])
    if version < 15:
        fields["replica_id"] = -1
    if version >= 11:
        fields["rack_id"] = rack if rack is not None else ""
    resp = request(broker, FetchRequest[version](**fields), version)
    assert resp.error_code == NONE, resp
    (topic_resp,) = resp.responses
    (p,) = topic_resp.partitions
    return p


def offsets_and_values(records: Optional[bytes]) -> list[tuple[int, bytes]]:
    data = records or b""
    out: list[tuple[int, bytes]] = []
    for pos, h in split_batches(data)[0]:
        out += [(r.offset, r.value) for r in decode_records(memoryview(data)[pos:pos + h.size], h)]
    return out


def produce_all(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5, linger_ms=5,
                             max_in_flight_requests_per_connection=1, request_timeout_ms=15000)
    try:
        futures = [producer.send(topic, v, partition=0) for v in values]
        producer.flush(30)
        assert [f.get(30).offset for f in futures] == list(range(len(values)))
    finally:
        producer.close(5)


def rf_topic(cluster: Any, replicas: list[int]) -> str:
    """A topic with partition 0 on `replicas` (the first leads), fully in sync everywhere."""
    topic = unique("kip392")
    controller = cluster.controller_id()
    assert create_topic_with_assignment(cluster.broker(controller), topic, {0: replicas}) == 0
    wait_equal(lambda: {b: partitions(cluster.broker(b), topic)[0][:5] for b in replicas},
               {b: (NONE, replicas[0], 0, replicas, replicas) for b in replicas}, 30, "the topic on every broker")
    return topic


def consume_confluent(bootstrap: str, topic: str, rack: str, n: int, timeout: float = 40.0
                      ) -> tuple[list[tuple[int, bytes]], set[int]]:
    """(offset, value) of every message of partition 0 with confluent-kafka (client.rack = `rack`),
    and the brokers librdkafka's statistics say it fetched the partition from."""
    from confluent_kafka import Consumer, TopicPartition
    fetched_from: set[int] = set()

    def on_stats(raw: str) -> None:
        stats = json.loads(raw)
        p = stats.get("topics", {}).get(topic, {}).get("partitions", {}).get("0")
        if p is not None and p.get("broker", -1) >= 0 and p.get("fetch_state") == "active":
            fetched_from.add(int(p["broker"]))

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "client.rack": rack,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "statistics.interval.ms": 200, "stats_cb": on_stats, "topic.metadata.refresh.interval.ms": 1000})
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
        # a few more stats rounds while fetching (nothing more to read)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            assert c.poll(0.2) is None
    finally:
        c.close()
    return got, fetched_from


def test_leader_names_the_follower_in_the_consumers_rack_and_the_follower_serves(make_cluster: Any) -> None:
    cluster = make_cluster(3, {"replica.selector.class": RACK_AWARE}, broker_overrides=racks(3))
    leader, f1, f2 = 0, 1, 2
    topic = rf_topic(cluster, [leader, f1, f2])
    tid = topic_id(cluster.broker(leader), topic)
    values = [b"v%03d" % i for i in range(N)]
    produce_all(cluster.broker(leader).bootstrap_servers, topic, values)
    expected = list(enumerate(values))

    # the followers learn the high watermark on their next fetch
    for f in (f1, f2):
        wait_equal(lambda: fetch(cluster.broker(f), topic, 12, f"r{f}").high_watermark, N, 20,
                   f"broker {f}'s high watermark of {topic}-0")

    for version in (11, 12, 17):
        kw = {"tid": tid} if version >= 13 else {}
        for f in (f1, f2):
            # the consumer sits in a follower's rack: no data, go to that follower
            p = fetch(cluster.broker(leader), topic, version, f"r{f}", **kw)
            assert (p.error_code, p.preferred_read_replica, p.high_watermark) == (NONE, f, N), (version, p)
            assert offsets_and_values(p.records) == [], (version, p)
            # that follower serves it, up to its high watermark
            p = fetch(cluster.broker(f), topic, version, f"r{f}", **kw)
            assert (p.error_code, p.preferred_read_replica, p.high_watermark) == (NONE, -1, N), (version, p)
            assert offsets_and_values(p.records) == expected, version
            # and from the middle: whole batches, the one holding the offset first (as Kafka)
            p = fetch(cluster.broker(f), topic, version, f"r{f}", offset=N - 5, **kw)
            got = offsets_and_values(p.records)
            assert got[0][0] <= N - 5 and [r for r in got if r[0] >= N - 5] == expected[N - 5:], version
        # read_committed: the redirect carries no aborted-transaction list (null: Kafka's FetchDataInfo
        # without one), the follower's read an empty one
        p = fetch(cluster.broker(leader), topic, version, f"r{f1}", isolation_level=1, **kw)
        assert (p.error_code, p.preferred_read_replica, p.last_stable_offset) == (NONE, f1, N), (version, p)
        assert p.aborted_transactions is None and offsets_and_values(p.records) == [], (version, p)
        p = fetch(cluster.broker(f1), topic, version, f"r{f1}", isolation_level=1, **kw)
        assert (p.error_code, p.preferred_read_replica, p.last_stable_offset) == (NONE, -1, N), (version, p)
        assert p.aborted_transactions == [] and offsets_and_values(p.records) == expected, (version, p)
        # the leader's own rack, a rack with no replica, no rack: the leader serves
        for rack in ("r0", "r9", ""):
            p = fetch(cluster.broker(leader), topic, version, rack, **kw)
            assert (p.error_code, p.preferred_read_replica, p.high_watermark) == (NONE, -1, N), (version, rack, p)
            assert offsets_and_values(p.records) == expected, (version, rack)

    # below v11 there is no client metadata: only the leader may answer (Kafka's fetchOnlyLeader)
    for f in (f1, f2):
        p = fetch(cluster.broker(f), topic, 10, None)
        assert (p.error_code, p.high_watermark) == (NOT_LEADER_OR_FOLLOWER, -1), p
        assert offsets_and_values(p.records) == []
    p = fetch(cluster.broker(leader), topic, 10, None)
    assert (p.error_code, p.high_watermark) == (NONE, N)
    assert offsets_and_values(p.records) == expected

    # a real client follows the preferred replica: everything, in order, read from broker 1
    got, fetched_from = consume_confluent(cluster.bootstrap_servers, topic, f"r{f1}", N)
    assert got == expected
    assert fetched_from == {f1}, fetched_from
    got, fetched_from = consume_confluent(cluster.bootstrap_servers, topic, "r0", N)
    assert got == expected
    assert fetched_from == {leader}, fetched_from


def test_without_a_replica_selector_the_leader_always_serves(make_cluster: Any) -> None:
    cluster = make_cluster(2, broker_overrides=racks(2))
    leader, follower = 0, 1
    topic = rf_topic(cluster, [leader, follower])
    tid = topic_id(cluster.broker(leader), topic)
    values = [b"w%03d" % i for i in range(N)]
    produce_all(cluster.broker(leader).bootstrap_servers, topic, values)
    expected = list(enumerate(values))
    wait_equal(lambda: fetch(cluster.broker(follower), topic, 12, "r1").high_watermark, N, 20,
               "the follower's high watermark")
    for version in (11, 12, 17):
        kw = {"tid": tid} if version >= 13 else {}
        for rack in ("r1", "r0", "r9", ""):
            p = fetch(cluster.broker(leader), topic, version, rack, **kw)
            assert (p.error_code, p.preferred_read_replica, p.high_watermark) == (NONE, -1, N), (version, rack, p)
            assert offsets_and_values(p.records) == expected
    got, fetched_from = consume_confluent(cluster.bootstrap_servers, topic, "r1", N)
    assert got == expected
    assert fetched_from == {leader}, fetched_from
