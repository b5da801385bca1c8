"""CreatePartitions, DeleteRecords, DescribeCluster and DescribeLogDirs end to end: raw requests
with exact answers, the kafka-python and confluent-kafka admin clients, and the effects on the
logs (segments on disk, log start offsets, fetches) including across a restart."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, DeleteRecordsRequest

from tests.harness import BrokerProcess
from tests.integration.util import (INVALID_PARTITIONS, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION,
                                    RawClient, Rec, build_batch, java_partition, parse_records, wait_for_topic)

INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT, INVALID_TOPIC_EXCEPTION = 42, 39, 17


@pytest.fixture
def name() -> str:
    return "adm-" + uuid.uuid4().hex[:10]


@pytest.fixture
def c(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers) as client:
        yield client


def segment_bases(log_dir: Path, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(p.name[:20]) for p in (log_dir / f"{topic}-{partition}").glob("*.log"))


def create_partitions(c: RawClient, topics: list[tuple[str, int, list[list[int]] | None]],
                      validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    T = CreatePartitionsRequest.CreatePartitionsTopic
    resp = c.request(CreatePartitionsRequest[3](topics=[
        T(name=n, count=count, assignments=None if a is None else [T.CreatePartitionsAssignment(broker_ids=b) for b in a])
        for n, count, a in topics], timeout_ms=5000, validate_only=validate_only))
    return [(r.name, r.error_code, r.error_message) for r in resp.results]


def delete_records(c: RawClient, topic: str, offsets: dict[int, int]) -> dict[int, tuple[int, int]]:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    resp = c.request(DeleteRecordsRequest[2](topics=[T(name=topic, partitions=[
        T.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items()])], timeout_ms=5000))
    (t,) = resp.topics
    return {p.partition_index: (p.error_code, p.low_watermark) for p in t.partitions}


# -- CreatePartitions -------------------------------------------------------------------------

def test_create_partitions_keeps_keyed_data_where_it_was(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewPartitions

    b = BrokerProcess(log_dir=tmp_path / "logs").start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10000)
        admin.create_topics({"keyed": {"num_partitions": 2, "replication_factor": 1}})
        keys = [b"key-%d" % i for i in range(20)]
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all")
        for k in keys:
            producer.send("keyed", key=k, value=b"before-" + k)
        producer.flush(10)
        producer.close()
        before = {k: java_partition(k, 2) for k in keys}
        r = admin.create_partitions({"keyed": NewPartitions(5)})
        assert [(t.name, t.error_code) for t in r.results] == [("keyed", 0)]
        admin.close()
        with RawClient(b.bootstrap_servers) as c:
            md = wait_for_topic(c, "keyed", 5)
            assert sorted((p.partition_index, p.leader_id, list(p.replica_nodes)) for p in md.partitions) == \
                [(i, 0, [0]) for i in range(5)]

            def contents() -> dict[int, list[tuple[int, bytes]]]:
                return {p: [(r.offset, r.key) for r in c.fetch_all("keyed", p)[0].records] for p in range(5)}

            got = contents()
            # the records stay in the partitions they were hashed to over 2 partitions, at the same offsets
            for p in (0, 1):
                assert got[p] == [(i, k) for i, k in enumerate(k for k in keys if before[k] == p)]
            assert got[2] == got[3] == got[4] == []
            assert c.produce("keyed", 4, build_batch([Rec(b"new", b"x")])).base_offset == 0
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            md = wait_for_topic(c, "keyed", 5)
            assert len(md.partitions) == 5
            assert [r.key for r in c.fetch_all("keyed", 4)[0].records] == [b"new"]
            assert c.list_offset("keyed", 0, -1).offset == sum(1 for k in keys if before[k] == 0)
    finally:
        b.close()


def test_create_partitions_errors(c: RawClient, name: str) -> None:
    assert c.create_topic(name, 2).error_code == 0
    assert create_partitions(c, [(name, 1, None)]) == [
        (name, INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1.")]
    assert create_partitions(c, [(name, 2, None)]) == [(name, INVALID_PARTITIONS, "Topic already has 2 partitions.")]
    assert create_partitions(c, [(name + "-no", 4, None)]) == [
        (name + "-no", UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}-no' does not exist.")]
    assert create_partitions(c, [(name, 4, [[0], [5]])]) == [
        (name, INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 5.")]
    assert create_partitions(c, [(name, 4, [[0]])]) == [
        (name, INVALID_REPLICA_ASSIGNMENT, "Increasing the number of partitions by 2 but 1 assignments provided.")]
    assert create_partitions(c, [(name, 3, [[0, 0]])]) == [
        (name, INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers not allowed in replica assignment: 0, 0 for partition id 2.")]
    assert create_partitions(c, [(name, 3, [[]])]) == [
        (name, INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0 for partition id 2.")]
    assert create_partitions(c, [(name, 3, None), (name, 4, None)]) == [
        (name, INVALID_REQUEST, "Duplicate topic in request.")]
    assert create_partitions(c, [(name, 6, None)], validate_only=True) == [(name, 0, None)]
    assert len(c.metadata([name]).topics[0].partitions) == 2           # nothing changed so far
    assert create_partitions(c, [(name, 3, [[0]])]) == [(name, 0, None)]
    assert len(c.metadata([name]).topics[0].partitions) == 3


def test_confluent_create_partitions(broker: BrokerProcess, name: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    admin.create_partitions([NewPartitions(name, 4)])[name].result(15)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 4
    with pytest.raises(KafkaException) as exc:
        admin.create_partitions([NewPartitions(name, 3)])[name].result(15)
    assert exc.value.args[0].code() == INVALID_PARTITIONS


# -- DeleteRecords ----------------------------------------------------------------------------

def test_delete_records_moves_the_log_start_and_drops_segments(tmp_path: Path) -> None:
    b = BrokerProcess(log_dir=tmp_path / "logs").start()
    try:
        batch = build_batch([Rec(b"k", b"d" * 200)] * 2)               # two records per batch
        with RawClient(b.bootstrap_servers) as c:
            assert c.create_topic("dr", 2, configs={"segment.bytes": str(len(batch) + 1)}).error_code == 0
            for _ in range(5):
                assert c.produce("dr", 0, batch).error_code == 0        # one batch per segment: 0, 2, 4, 6, 8
            assert segment_bases(b.log_dir, "dr") == [0, 2, 4, 6, 8]
            # offset 5 lies inside the batch at 4: segments wholly below it go, the batch stays
            assert delete_records(c, "dr", {0: 5, 1: 0}) == {0: (0, 5), 1: (0, 0)}
            assert segment_bases(b.log_dir, "dr") == [4, 6, 8]
            assert c.list_offset("dr", 0, -2).offset == 5
            pd = c.fetch("dr", 0, 4)
            # out of range: every offset unknown, as Kafka 3.9 answers (checked in tests/differential)
            assert (pd.error_code, pd.log_start_offset, pd.high_watermark) == (OFFSET_OUT_OF_RANGE, -1, -1)
            pd = c.fetch("dr", 0, 5)
            assert (pd.error_code, pd.log_start_offset) == (0, 5)
            assert [r.offset for r in parse_records(pd.records).records][:2] == [4, 5]   # whole batches served
            assert delete_records(c, "dr", {0: 11}) == {0: (OFFSET_OUT_OF_RANGE, -1)}
            assert delete_records(c, "dr", {0: -7}) == {0: (OFFSET_OUT_OF_RANGE, -1)}
            assert delete_records(c, "dr", {7: 0}) == {7: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
            assert delete_records(c, "no-such-topic", {0: 0}) == {0: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            assert c.list_offset("dr", 0, -2).offset == 5                 # log-start-offset-checkpoint
            assert c.fetch("dr", 0, 4).error_code == OFFSET_OUT_OF_RANGE
            assert delete_records(c, "dr", {0: -1}) == {0: (0, 10)}       # -1: up to the high watermark
            # the active segment stays even though it lies wholly below the log start (as in Kafka)
            assert segment_bases(b.log_dir, "dr") == [8]
            assert c.fetch("dr", 0, 9).error_code == OFFSET_OUT_OF_RANGE
            assert c.produce("dr", 0, batch).base_offset == 10
            assert segment_bases(b.log_dir, "dr") == [8, 10]
    finally:
        b.close()


def test_delete_records_refuses_internal_topics(c: RawClient) -> None:
    c.metadata(["__consumer_offsets"], allow_auto_topic_creation=True)   # naming it creates it (auto-creation on)
    from tests.integration.util import wait_until
    wait_until(lambda: c.metadata(["__consumer_offsets"]).topics[0].error_code == 0, what="offsets topic")
    assert delete_records(c, "__consumer_offsets", {0: 0}) == {0: (INVALID_TOPIC_EXCEPTION, -1)}


def test_admin_clients_delete_records(broker: BrokerProcess, c: RawClient, name: str) -> None:
    from confluent_kafka import TopicPartition as CfTopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, TopicPartition

    assert c.create_topic(name, 1).error_code == 0
    assert c.produce(name, 0, build_batch([Rec(b"k", b"%d" % i) for i in range(10)])).error_code == 0
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        r = admin.delete_records({TopicPartition(name, 0): 4})
        assert r == {TopicPartition(name, 0): {"partition_index": 0, "low_watermark": 4, "error_code": 0}}
    finally:
        admin.close()
    assert c.list_offset(name, 0, -2).offset == 4
    cf = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    (fut,) = cf.delete_records([CfTopicPartition(name, 0, 7)]).values()
    deleted = fut.result(15)
    assert deleted.low_watermark == 7
    assert c.list_offset(name, 0, -2).offset == 7


# -- DescribeCluster / DescribeLogDirs --------------------------------------------------------

def test_admin_clients_describe_cluster(broker: BrokerProcess, c: RawClient) -> None:
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    cluster_id = c.metadata([]).cluster_id
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        d = admin.describe_cluster()
    finally:
        admin.close()
    assert (d["cluster_id"], d["controller_id"]) == (cluster_id, 0)
    assert d["brokers"] == [{"broker_id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None,
                             "is_fenced": False}]
    cf = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    desc = cf.describe_cluster(include_authorized_operations=True).result(15)
    assert desc.cluster_id == cluster_id
    assert desc.controller.id == 0
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(0, "127.0.0.1", broker.port)]
    assert sorted(op.name for op in desc.authorized_operations) == sorted(
        ["CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"])


def test_describe_log_dirs_reports_sizes_on_disk(broker: BrokerProcess, c: RawClient, name: str) -> None:
    from kafka import KafkaAdminClient

    batch = build_batch([Rec(b"k", b"s" * 300)])
    assert c.create_topic(name, 2, configs={"segment.bytes": str(2 * len(batch) + 1)}).error_code == 0
    for _ in range(5):
        assert c.produce(name, 1, batch).error_code == 0                # three segments
    on_disk = sum(p.stat().st_size for p in (broker.log_dir / f"{name}-1").glob("*.log"))
    assert on_disk == 5 * len(batch)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        (entry,) = admin.describe_log_dirs(topic_partitions={name: [0, 1, 9]})
    finally:
        admin.close()
    assert entry["broker"] == 0
    (d,) = entry["log_dirs"]
    assert (d["error_code"], d["log_dir"]) == (0, str(broker.log_dir.absolute()))
    (t,) = d["topics"]
    assert t["name"] == name
    assert [(p["partition_index"], p["partition_size"], p["offset_lag"], p["is_future_key"])
            for p in t["partitions"]] == [(0, 0, 0, False), (1, on_disk, 0, False)]
    assert d["total_bytes"] > 0 and 0 <= d["usable_bytes"] <= d["total_bytes"]
