"""The follower side of replication over real brokers and ZooKeeper: followers fetch the leader's
batches as they are (every replica's log byte-identical), take the leader's high watermark, catch
up after a restart, and a replica whose log forked (an acks=1 write only the old leader had)
truncates to where the new leader's epoch says it ends (Kafka's truncation on fetch: the leader
answers a diverging epoch, the follower truncates to min(its end for that epoch, the leader's))."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from kafkalite.log.record_batch import build_batch, decode_records, split_batches
from tests.cluster.util import (FAST_EXPIRY, create_topic_with_assignment, partitions, request, unique, wait_equal,
                                wait_until)

pytestmark = pytest.mark.cluster

DEBUGGING_REPLICA_ID = -2      # reads any replica, not as a replica
LIST_OFFSETS_VERSION = 7
FETCH_VERSION = 12
LATEST = -1
EARLIEST = -2


def log_bytes(broker: Any, topic: str, partition: int) -> bytes:
    """The partition's segment files on `broker`'s disk, in offset order."""
    d = Path(broker.log_dir) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log"), key=lambda p: int(p.stem)))


def values_of(data: bytes) -> list[bytes]:
    out: list[bytes] = []
    for pos, h in split_batches(data)[0]:
        out += [r.value for r in decode_records(data[pos:pos + h.size])]
    return out


def epochs_of(data: bytes) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of each batch."""
    return [(h.base_offset, h.partition_leader_epoch) for _pos, h in split_batches(data)[0]]


def list_offset(broker: Any, topic: str, partition: int, timestamp: int) -> int:
    """ListOffsets as a debugging client (replica id -2), which Kafka answers from any replica and
    not as a consumer: latest is the broker's log end offset, earliest its log start offset."""
    T = ListOffsetsRequest[LIST_OFFSETS_VERSION].ListOffsetsTopic
    resp = request(broker, ListOffsetsRequest[LIST_OFFSETS_VERSION](
        replica_id=DEBUGGING_REPLICA_ID, isolation_level=0,
        topics=[T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                                 timestamp=timestamp)])]), LIST_OFFSETS_VERSION)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)


def high_watermark(broker: Any, topic: str, partition: int) -> int:
    """The broker's HW for the partition, as a Fetch v12 of a debugging consumer (replica id -2,
    client metadata: any replica answers) at its log start tells it."""
    start = list_offset(broker, topic, partition, EARLIEST)
    T = FetchRequest[FETCH_VERSION].FetchTopic
    resp = request(broker, FetchRequest[FETCH_VERSION](
        replica_id=DEBUGGING_REPLICA_ID, max_wait_ms=0, min_bytes=0, max_bytes=0, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="",
        topics=[T(topic=topic, partitions=[T.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                            fetch_offset=start, last_fetched_epoch=-1,
                                                            log_start_offset=-1, partition_max_bytes=0)])],
        forgotten_topics_data=[]), FETCH_VERSION)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.high_watermark)


def produce(bootstrap: str, topic: str, values: list[bytes], acks: Any) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=5, linger_ms=5,
                             max_in_flight_requests_per_connection=1, request_timeout_ms=15000)
    try:
        futures = [producer.send(topic, v, partition=0) for v in values]
        producer.flush(30)
        for f in futures:
            f.get(30)
    finally:
        producer.close(5)


def produce_to(broker: Any, topic: str, values: list[bytes], acks: int) -> int:
    """One Produce v9 straight to `broker` (a client would refresh its metadata from any broker,
    paused ones too); the base offset."""
    P = ProduceRequest.TopicProduceData
    batch = build_batch([(None, v, int(time.time() * 1000)) for v in values])
    resp = request(broker, ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
    pr = resp.responses[0].partition_responses[0]
    assert pr.error_code == 0, pr
    return int(pr.base_offset)


def wait_replicas_identical(cluster: Any, brokers: list[int], topic: str, expected: list[bytes],
                            timeout: float) -> bytes:
    """Until every broker's log of partition 0 holds exactly `expected` (byte-identical logs) and
    every HW is its end; returns the log bytes."""
    n = len(expected)
    wait_equal(lambda: {b: len(values_of(log_bytes(cluster.broker(b), topic, 0))) for b in brokers},
               {b: n for b in brokers}, timeout, f"every replica of {topic}-0 has {n} records")
    wait_equal(lambda: {b: high_watermark(cluster.broker(b), topic, 0) for b in brokers},
               {b: n for b in brokers}, timeout, f"every replica's high watermark of {topic}-0 is {n}")
    logs = {b: log_bytes(cluster.broker(b), topic, 0) for b in brokers}
    first = logs[brokers[0]]
    assert values_of(first) == expected
    for b in brokers[1:]:
        assert logs[b] == first, f"broker {b}'s log differs from broker {brokers[0]}'s"
    return first


def test_followers_replicate_exactly_and_catch_up_after_restart(make_cluster: Any) -> None:
    cluster = make_cluster(3, FAST_EXPIRY)
    ids = sorted(cluster.brokers)
    topic = unique("repl")
    controller = cluster.controller_id()
    leader = next(b for b in ids if b != controller)
    replicas = [leader] + [b for b in ids if b != leader]
    assert create_topic_with_assignment(cluster.broker(controller), topic, {0: replicas}) == 0
    wait_equal(lambda: {b: partitions(cluster.broker(b), topic)[0][:5] for b in ids},
               {b: (0, leader, 0, replicas, replicas) for b in ids}, 20, "the topic on every broker")

    first = [b"m%04d" % i for i in range(300)]
    produce(cluster.broker(leader).bootstrap_servers, topic, first, "all")
    data = wait_replicas_identical(cluster, ids, topic, first, 20)
    assert {e for _o, e in epochs_of(data)} == {0}

    # a follower dies; the leader goes on with acks=1; the follower comes back and catches up
    follower = replicas[1]
    cluster.broker(follower).kill()
    wait_until(lambda: follower not in partitions(cluster.broker(leader), topic)[0][4], 20,
               f"broker {follower} out of the ISR")
    second = [b"n%04d" % i for i in range(200)]
    produce(cluster.broker(leader).bootstrap_servers, topic, second, 1)
    cluster.broker(follower).start()
    wait_replicas_identical(cluster, ids, topic, first + second, 30)
    # caught up, it is back in the ISR (the leader's expansion through AlterPartition)
    wait_until(lambda: sorted(partitions(cluster.broker(controller), topic)[0][4]) == ids, 30,
               f"broker {follower} back in the ISR")
    third = [b"o%04d" % i for i in range(50)]
    produce(cluster.broker(leader).bootstrap_servers, topic, third, "all")
    wait_replicas_identical(cluster, ids, topic, first + second + third, 20)


def test_diverging_follower_truncates_to_the_new_leaders_epoch(make_cluster: Any) -> None:
    cluster = make_cluster(3)
    ids = sorted(cluster.brokers)
    topic = unique("diverge")
    controller = cluster.controller_id()
    old_leader = next(b for b in ids if b != controller)
    followers = [b for b in ids if b != old_leader]
    replicas = [old_leader] + followers
    assert create_topic_with_assignment(cluster.broker(controller), topic, {0: replicas}) == 0
    wait_equal(lambda: {b: partitions(cluster.broker(b), topic)[0][:5] for b in ids},
               {b: (0, old_leader, 0, replicas, replicas) for b in ids}, 20, "the topic on every broker")

    committed = [b"c%04d" % i for i in range(100)]
    produce(cluster.broker(old_leader).bootstrap_servers, topic, committed, "all")
    wait_replicas_identical(cluster, ids, topic, committed, 20)

    # The followers are paused (their in-flight fetches answered empty within
    # replica.fetch.wait.max.ms while they cannot send another); an acks=1 write reaches only the
    # leader, which then dies before they resume.
    pids = [cluster.broker(b).pid for b in followers]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)
        lost = [b"lost%03d" % i for i in range(20)]
        assert produce_to(cluster.broker(old_leader), topic, lost, 1) == len(committed)
        assert values_of(log_bytes(cluster.broker(old_leader), topic, 0)) == committed + lost
        cluster.broker(old_leader).kill()
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    new_leader = followers[0]
    wait_until(lambda: partitions(cluster.broker(controller), topic)[0][1:3] == (new_leader, 1), 30,
               f"broker {new_leader} leads at epoch 1")
    after = [b"a%04d" % i for i in range(30)]
    produce(cluster.broker(new_leader).bootstrap_servers, topic, after, "all")
    wait_replicas_identical(cluster, followers, topic, committed + after, 20)

    # the old leader returns as a follower: its 20 acks=1 records at epoch 0 go, the new leader's
    # epoch-1 records come
    cluster.broker(old_leader).start()
    data = wait_replicas_identical(cluster, ids, topic, committed + after, 30)
    assert sorted({e for _o, e in epochs_of(data)}) == [0, 1]
    assert min(o for o, e in epochs_of(data) if e == 1) == len(committed)
    line = (f"Truncating partition {topic}-0 with TruncationState(offset={len(committed)}, completed=true) "
            f"due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, "
            f"endOffset={len(committed)})")
    assert line in cluster.broker(old_leader).output()


def test_follower_below_the_leaders_log_start_starts_over_there(make_cluster: Any) -> None:
    """OFFSET_OUT_OF_RANGE (Kafka's handleOutOfRangeError / fetchOffsetAndTruncate): a follower
    whose whole log is below the leader's log start (DeleteRecords while it was down) asks the
    leader's end and start (ListOffsets), truncates fully and fetches from the leader's start."""
    cluster = make_cluster(3, FAST_EXPIRY)
    ids = sorted(cluster.brokers)
    topic = unique("oor")
    controller = cluster.controller_id()
    leader, follower = [b for b in ids if b != controller]
    replicas = [leader, follower, controller]
    assert create_topic_with_assignment(cluster.broker(controller), topic, {0: replicas}) == 0
    wait_equal(lambda: {b: partitions(cluster.broker(b), topic)[0][:5] for b in ids},
               {b: (0, leader, 0, replicas, replicas) for b in ids}, 20, "the topic on every broker")
    values = [b"v%04d" % i for i in range(150)]
    produce(cluster.broker(leader).bootstrap_servers, topic, values[:50], "all")
    wait_replicas_identical(cluster, ids, topic, values[:50], 20)

    cluster.broker(follower).kill()
    wait_until(lambda: follower not in partitions(cluster.broker(leader), topic)[0][4], 20,
               f"broker {follower} out of the ISR")
    # one batch 50..149: the leader's log start (120) falls inside it
    assert produce_to(cluster.broker(leader), topic, values[50:], -1) == 50
    T = DeleteRecordsRequest.DeleteRecordsTopic
    resp = request(cluster.broker(leader), DeleteRecordsRequest[2](topics=[T(name=topic, partitions=[
        T.DeleteRecordsPartition(partition_index=0, offset=120)])], timeout_ms=10000), 2)
    dp = resp.topics[0].partitions[0]
    assert (dp.error_code, dp.low_watermark) == (0, 120), dp
    others = [leader, controller]
    wait_equal(lambda: {b: list_offset(cluster.broker(b), topic, 0, EARLIEST) for b in others},
               {b: 120 for b in others}, 20, "the log start offset followed on the in-sync follower")

    cluster.broker(follower).start()
    wait_equal(lambda: (list_offset(cluster.broker(follower), topic, 0, EARLIEST),
                        high_watermark(cluster.broker(follower), topic, 0)), (120, 150), 30,
               f"broker {follower} starts at 120 and reaches 150")
    # The leader answered the batch holding 120, based at 50: the emptied log restarted at the
    # batch's base to take it whole (Kafka's appendRecordsToFollowerOrFutureReplica), then took
    # the leader's log start again. One segment, the leader's batch byte for byte.
    d = Path(cluster.broker(follower).log_dir) / f"{topic}-0"
    assert sorted(p.name for p in d.glob("*.log")) == ["00000000000000000050.log"]
    assert values_of(log_bytes(cluster.broker(follower), topic, 0)) == values[50:]
    assert log_bytes(cluster.broker(leader), topic, 0).endswith(log_bytes(cluster.broker(follower), topic, 0))
    out = cluster.broker(follower).output()
    assert (f"Truncate fully and reset fetch offset for partition {topic}-0 from 50 to the current leader's "
            f"start offset 120 because the local replica's end offset is smaller than the current leader's "
            f"start offsets.") in out
