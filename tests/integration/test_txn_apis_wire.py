"""TxnOffsetCommit (v0-3), OffsetFetch require_stable, DescribeProducers and the Produce
transactional-id rule over a raw socket against a broker process."""
from __future__ import annotations

import time
from typing import Any, Optional

from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import ProduceRequest, TxnOffsetCommitRequest

from kafkalite.log.record_batch import build_batch
from tests.integration.groups_util import find_coordinator
from tests.integration.util import RawClient, create_topic

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_PRODUCER_EPOCH = 47
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNSTABLE_OFFSET_COMMIT = 88


def txn_offset_commit(c: RawClient, version: int, group: str, pid: int, epoch: int,
                      offsets: dict[tuple[str, int], int], *, member: str = "", generation: int = -1,
                      instance: Optional[str] = None, transactional_id: str = "tx") -> dict[tuple[str, int], int]:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), off in offsets.items():
        by_topic.setdefault(topic, []).append(T.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=off, committed_leader_epoch=-1, committed_metadata="md"))
    resp = c.request(TxnOffsetCommitRequest[version](
        transactional_id=transactional_id, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
        member_id=member, group_instance_id=instance, topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def offset_fetch(c: RawClient, group: str, topic: str, partitions: list[int], version: int,
                 require_stable: bool) -> dict[int, tuple[int, int]]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    resp = c.request(OffsetFetchRequest[version](group_id=group, require_stable=require_stable,
                                                 topics=[T(name=topic, partition_indexes=partitions)]))
    assert resp.error_code == NONE, resp
    return {p.partition_index: (p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions}


# These two drive the log and the group coordinator with made-up producer ids, outside any
# transaction the coordinator knows: with KIP-890 verification on, Kafka refuses such writes
# (tests/integration/test_txn_verification.py), so they run on a broker with it switched off.
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


def test_txn_offset_commit_versions_and_require_stable(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory(UNVERIFIED)
    create_topic(broker.bootstrap_servers, topic_name, num_partitions=2)
    with RawClient(broker.bootstrap_servers) as c:
        assert c.api_versions()[28] == (0, 4)
        for v in range(5):
            group = f"txg-{v}-{topic_name}"
            find_coordinator(c, group)
            pid = 9000 + v
            assert txn_offset_commit(c, v, group, pid, 0, {(topic_name, 0): 10 + v, (topic_name, 1): 20 + v,
                                                           (topic_name, 7): 1, ("no-such-" + topic_name, 0): 1}) == {
                (topic_name, 0): NONE, (topic_name, 1): NONE, (topic_name, 7): UNKNOWN_TOPIC_OR_PARTITION,
                ("no-such-" + topic_name, 0): UNKNOWN_TOPIC_OR_PARTITION}
            # pending until the transaction's marker: not visible; require_stable says so
            assert offset_fetch(c, group, topic_name, [0, 1], 6, False) == {0: (-1, NONE), 1: (-1, NONE)}
            assert offset_fetch(c, group, topic_name, [0, 1], 7, False) == {0: (-1, NONE), 1: (-1, NONE)}
            assert offset_fetch(c, group, topic_name, [0, 1], 7, True) == {
                0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (-1, UNSTABLE_OFFSET_COMMIT)}
            # more offsets in the same transaction
            assert txn_offset_commit(c, v, group, pid, 0, {(topic_name, 0): 1}) == {(topic_name, 0): NONE}
        group = f"txg-checks-{topic_name}"
        find_coordinator(c, group)
        assert txn_offset_commit(c, 3, group, 9100, 2, {(topic_name, 0): 1}) == {(topic_name, 0): NONE}
        # a stale epoch of the same producer is fenced by the __consumer_offsets log
        assert txn_offset_commit(c, 3, group, 9100, 1, {(topic_name, 0): 1}) == {(topic_name, 0): INVALID_PRODUCER_EPOCH}
        # v3: a member of a group that has none
        assert txn_offset_commit(c, 3, group, 9100, 2, {(topic_name, 1): 1}, member="m-1", generation=1) == \
            {(topic_name, 1): UNKNOWN_MEMBER_ID}
        assert txn_offset_commit(c, 3, "", 9100, 2, {(topic_name, 1): 1}) == {(topic_name, 1): INVALID_GROUP_ID}


def describe_producers(c: RawClient, topics: dict[str, list[int]]) -> dict[tuple[str, int], tuple[int, Optional[str], list]]:
    T = DescribeProducersRequest.TopicRequest
    resp = c.request(DescribeProducersRequest[0](topics=[T(name=n, partition_indexes=ps) for n, ps in topics.items()]))
    return {(t.name, p.partition_index): (p.error_code, p.error_message,
                                          [(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                            s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers])
            for t in resp.topics for p in t.partitions}


def produce_raw(c: RawClient, transactional_id: Optional[str], parts: dict[tuple[str, int], bytes]) -> dict[tuple[str, int], int]:
    P = ProduceRequest.TopicProduceData
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), records in parts.items():
        by_topic.setdefault(topic, []).append(P.PartitionProduceData(index=partition, records=records))
    resp = c.request(ProduceRequest[9](transactional_id=transactional_id, acks=-1, timeout_ms=10000,
                                       topic_data=[P(name=n, partition_data=ps) for n, ps in by_topic.items()]))
    return {(t.name, p.index): p.error_code for t in resp.responses for p in t.partition_responses}


def test_describe_producers_and_transactional_produce(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory(UNVERIFIED)
    create_topic(broker.bootstrap_servers, topic_name, num_partitions=2)
    now = int(time.time() * 1000)
    idem = build_batch([(b"k", b"v%d" % i, now + i) for i in range(3)], producer_id=7001, producer_epoch=2,
                       base_sequence=0)
    txn = build_batch([(b"k", b"t", now + 10)], producer_id=7002, producer_epoch=0, base_sequence=0,
                      transactional=True)
    plain = build_batch([(b"k", b"p", now)])
    with RawClient(broker.bootstrap_servers) as c:
        assert c.api_versions()[61] == (0, 0)
        assert produce_raw(c, None, {(topic_name, 0): idem}) == {(topic_name, 0): NONE}
        # transactional records without a transactional id: every partition of the request refused
        assert produce_raw(c, None, {(topic_name, 1): txn, (topic_name, 0): plain}) == {
            (topic_name, 1): TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (topic_name, 0): TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        assert produce_raw(c, "tx-1", {(topic_name, 0): plain}) == {(topic_name, 0): NONE}   # offset 3
        assert produce_raw(c, "tx-1", {(topic_name, 1): txn}) == {(topic_name, 1): NONE}     # offset 0
        got = describe_producers(c, {topic_name: [0, 1, 5], "no-such-" + topic_name: [0], "bad name!": [0]})
        assert got[(topic_name, 0)] == (NONE, None, [(7001, 2, 2, now + 2, -1, -1)])
        assert got[(topic_name, 1)] == (NONE, None, [(7002, 0, 0, now + 10, -1, 0)])
        assert got[(topic_name, 5)] == (UNKNOWN_TOPIC_OR_PARTITION, None, [])
        # a topic-level error carries Kafka's default message (checked against Kafka 3.9 in tests/differential)
        assert got[("no-such-" + topic_name, 0)] == (UNKNOWN_TOPIC_OR_PARTITION,
                                                     "This server does not host this topic-partition.", [])
        code, message, producers = got[("bad name!", 0)]
        assert (code, producers) == (INVALID_TOPIC_EXCEPTION, []) and message is not None and "bad name!" in message
