"""Topic configs on a running broker: every change made with IncrementalAlterConfigs/AlterConfigs
is observed taking effect without a restart (retention by time and size on small segments, roll
size and time, index sizing, message size, timestamps, compression, min ISR, cleanup policy),
survives a restart, and the kafka-python and confluent-kafka admin clients describe and alter
topic and broker configs. Real broker processes, real sockets, exact answers."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator, Optional

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, DeleteRecordsRequest, DescribeConfigsRequest,
                                  IncrementalAlterConfigsRequest)

from tests.harness import BrokerProcess
from tests.integration.util import OFFSET_OUT_OF_RANGE, RawClient, Rec, build_batch, parse_records, wait_until

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
INVALID_CONFIG, INVALID_REQUEST, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP = 40, 42, 10, 32
NOT_ENOUGH_REPLICAS, INVALID_RECORD, POLICY_VIOLATION = 19, 87, 44
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # retention checked every 100 ms so its effect shows within a test
    with BrokerProcess(overrides={"log.retention.check.interval.ms": "100", "num.partitions": "1"}) as b:
        yield b


@pytest.fixture
def c(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers) as client:
        yield client


@pytest.fixture
def name() -> str:
    return "tc-" + uuid.uuid4().hex[:10]


def describe(c: RawClient, topic: str) -> dict[str, tuple[Optional[str], int]]:
    DC = DescribeConfigsRequest
    resp = c.request(DC[4](resources=[DC.DescribeConfigsResource(resource_type=TOPIC, resource_name=topic,
                                                                 configuration_keys=None)],
                           include_synonyms=False, include_documentation=False))
    (r,) = resp.results
    assert r.error_code == 0, r
    return {e.name: (e.value, e.config_source) for e in r.configs}


def incremental(c: RawClient, topic: str, ops: list[tuple[str, int, Optional[str]]], rtype: int = TOPIC,
                validate_only: bool = False) -> tuple[int, Optional[str]]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = c.request(IncrementalAlterConfigsRequest[1](resources=[R(
        resource_type=rtype, resource_name=topic,
        configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only))
    (r,) = resp.responses
    return r.error_code, r.error_message


def set_configs(c: RawClient, topic: str, **configs: str) -> None:
    assert incremental(c, topic, [(k.replace("_", "."), SET, v) for k, v in configs.items()]) == (0, None)


def segment_bases(broker: BrokerProcess, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(p.name[:20]) for p in (broker.log_dir / f"{topic}-{partition}").glob("*.log"))


def old_batch(value: bytes, age_ms: int) -> bytes:
    return build_batch([Rec(b"k", value, timestamp=int(time.time() * 1000) - age_ms)])


# -- retention --------------------------------------------------------------------------------

def test_retention_by_time_keeps_the_active_segments_unexpired_data(broker: BrokerProcess, c: RawClient,
                                                                    name: str) -> None:
    size = len(old_batch(b"x" * 500, 0))
    # two batches per segment; retention off to begin with
    assert c.create_topic(name, 1, configs={"segment.bytes": str(2 * size + size // 2),
                                            "retention.ms": "-1"}).error_code == 0
    for i in range(6):
        assert c.produce(name, 0, old_batch(b"%d" % i + b"x" * 499, 2 * HOUR_MS)).error_code == 0
    assert c.produce(name, 0, old_batch(b"6" + b"x" * 499, 0)).error_code == 0       # fresh, active segment
    assert segment_bases(broker, name) == [0, 2, 4, 6]
    time.sleep(0.4)                                       # several retention passes: nothing expires yet
    assert c.list_offset(name, 0, -2).offset == 0

    set_configs(c, name, retention_ms=str(HOUR_MS))
    wait_until(lambda: c.list_offset(name, 0, -2).offset == 6, what="retention.ms to move the log start offset")
    assert segment_bases(broker, name) == [6]
    assert c.list_offset(name, 0, -1).offset == 7
    pd = c.fetch(name, 0, 3)
    # out of range: every offset unknown, as Kafka 3.9 answers (checked in tests/differential)
    assert (pd.error_code, pd.log_start_offset, pd.high_watermark) == (OFFSET_OUT_OF_RANGE, -1, -1)
    recs = parse_records(c.fetch(name, 0, 6).records).records
    assert [(r.offset, r.value[:1]) for r in recs] == [(6, b"6")]


def test_retention_by_time_deletes_an_expired_active_segment(broker: BrokerProcess, c: RawClient,
                                                             name: str) -> None:
    assert c.create_topic(name, 1).error_code == 0
    for i in range(3):
        assert c.produce(name, 0, old_batch(b"old", 2 * HOUR_MS)).error_code == 0
    set_configs(c, name, retention_ms=str(HOUR_MS))
    # everything expired: Kafka rolls a new (empty) active segment and deletes the old one
    wait_until(lambda: c.list_offset(name, 0, -2).offset == 3, what="the expired active segment to go")
    assert segment_bases(broker, name) == [3]
    assert c.produce(name, 0, old_batch(b"new", 0)).base_offset == 3


def test_retention_by_size(broker: BrokerProcess, c: RawClient, name: str) -> None:
    batch = old_batch(b"y" * 500, 0)
    size = len(batch)
    assert c.create_topic(name, 1, configs={"segment.bytes": str(2 * size + size // 2)}).error_code == 0
    for _ in range(10):
        assert c.produce(name, 0, batch).error_code == 0
    assert segment_bases(broker, name) == [0, 2, 4, 6, 8]
    # 10 batches, at most 5 kept: the oldest segments go while the rest still holds retention.bytes
    set_configs(c, name, retention_bytes=str(5 * size))
    wait_until(lambda: c.list_offset(name, 0, -2).offset == 4, what="retention.bytes to move the log start")
    time.sleep(0.3)
    assert segment_bases(broker, name) == [4, 6, 8]
    assert c.list_offset(name, 0, -2).offset == 4
    assert c.fetch(name, 0, 3).error_code == OFFSET_OUT_OF_RANGE


# -- each config observed on the running broker ----------------------------------------------

def test_segment_bytes_and_segment_ms(broker: BrokerProcess, c: RawClient, name: str) -> None:
    t0 = int(time.time() * 1000)
    batch = build_batch([Rec(b"k", b"z" * 300, timestamp=t0)])
    assert c.create_topic(name, 1).error_code == 0
    for _ in range(4):
        assert c.produce(name, 0, batch).error_code == 0
    assert segment_bases(broker, name) == [0]
    set_configs(c, name, segment_bytes=str(len(batch) + 1))         # one batch per segment from now on
    for _ in range(3):
        assert c.produce(name, 0, batch).error_code == 0
    assert segment_bases(broker, name) == [0, 4, 5, 6]
    set_configs(c, name, segment_bytes=str(10_000_000), segment_ms="1000")
    # a roll by time compares record timestamps with the active segment's first batch (t0)
    assert c.produce(name, 0, build_batch([Rec(b"k", b"a", timestamp=t0 + 500)])).base_offset == 7
    assert c.produce(name, 0, build_batch([Rec(b"k", b"b", timestamp=t0 + 1000)])).base_offset == 8
    assert segment_bases(broker, name) == [0, 4, 5, 6]
    assert c.produce(name, 0, build_batch([Rec(b"k", b"c", timestamp=t0 + 1001)])).base_offset == 9
    assert segment_bases(broker, name) == [0, 4, 5, 6, 9]


def test_segment_index_bytes_and_index_interval_bytes(broker: BrokerProcess, c: RawClient, name: str) -> None:
    batch = old_batch(b"i" * 100, 0)
    assert c.create_topic(name, 1).error_code == 0
    for _ in range(3):
        assert c.produce(name, 0, batch).error_code == 0
    # an index entry for every batch but a segment's first, at most 5 entries (40 bytes) per index:
    # index sizes apply from the next segment, so roll one with segment.ms=1
    set_configs(c, name, index_interval_bytes="0", segment_index_bytes="40", segment_ms="1")
    assert c.produce(name, 0, old_batch(b"r", -10)).base_offset == 3
    assert segment_bases(broker, name) == [0, 3]
    set_configs(c, name, segment_ms="604800000")
    for _ in range(5):
        assert c.produce(name, 0, batch).error_code == 0
    assert segment_bases(broker, name) == [0, 3]                          # 5 entries: offsets 4..8
    assert c.produce(name, 0, batch).base_offset == 9                    # the index is full: roll
    assert c.produce(name, 0, batch).base_offset == 10
    assert segment_bases(broker, name) == [0, 3, 9]
    d = broker.log_dir / f"{name}-0"
    assert (d / "00000000000000000003.index").stat().st_size == 40        # trimmed at roll: 5 entries
    assert (d / "00000000000000000009.index").stat().st_size == 40        # preallocated to segment.index.bytes
    assert (d / "00000000000000000009.timeindex").stat().st_size == 36    # rounded down to 12-byte entries
    # the default interval (4096 bytes) gave the first segment's three small batches no entry
    assert (d / "00000000000000000000.index").stat().st_size == 0


def test_max_message_bytes(c: RawClient, name: str) -> None:
    batch = old_batch(b"m" * 1000, 0)
    assert c.create_topic(name, 1).error_code == 0
    assert c.produce(name, 0, batch).error_code == 0
    set_configs(c, name, max_message_bytes=str(len(batch) - 1))
    r = c.produce(name, 0, batch)
    assert r.error_code == MESSAGE_TOO_LARGE
    set_configs(c, name, max_message_bytes=str(len(batch)))
    assert c.produce(name, 0, batch).base_offset == 1


def test_message_timestamp_type(c: RawClient, name: str) -> None:
    assert c.create_topic(name, 1).error_code == 0
    assert c.produce(name, 0, old_batch(b"a", HOUR_MS)).log_append_time_ms == -1
    set_configs(c, name, message_timestamp_type="LogAppendTime")
    before = int(time.time() * 1000)
    r = c.produce(name, 0, old_batch(b"b", HOUR_MS))
    assert before <= r.log_append_time_ms <= int(time.time() * 1000)
    recs = parse_records(c.fetch(name, 0, 1).records).records
    assert [(r2.offset, r2.timestamp) for r2 in recs] == [(1, r.log_append_time_ms)]


def test_message_timestamp_window(c: RawClient, name: str) -> None:
    assert c.create_topic(name, 1).error_code == 0
    assert c.produce(name, 0, old_batch(b"old", 2 * HOUR_MS)).error_code == 0
    set_configs(c, name, message_timestamp_before_max_ms=str(HOUR_MS), message_timestamp_after_max_ms="60000")
    r = c.produce(name, 0, old_batch(b"old", 2 * HOUR_MS))
    assert r.error_code == INVALID_TIMESTAMP
    assert r.error_message == "One or more records have been rejected due to invalid timestamp"
    [(index, message)] = [(e.batch_index, e.batch_index_error_message) for e in r.record_errors]
    assert index == 0 and message.startswith("Timestamp ") and "of message with offset 0 is out of range." in message
    assert c.produce(name, 0, old_batch(b"future", -120_000)).error_code == INVALID_TIMESTAMP
    assert c.produce(name, 0, old_batch(b"now", 0)).base_offset == 1
    # the deprecated difference.max.ms applies to a bound left at its default
    assert incremental(c, name, [("message.timestamp.before.max.ms", DELETE, None),
                                 ("message.timestamp.difference.max.ms", SET, str(3 * HOUR_MS))]) == (0, None)
    assert c.produce(name, 0, old_batch(b"old", 2 * HOUR_MS)).base_offset == 2


def test_compression_type(c: RawClient, name: str) -> None:
    assert c.create_topic(name, 1).error_code == 0
    assert c.produce(name, 0, build_batch([Rec(b"k", b"plain" * 20)])).error_code == 0
    set_configs(c, name, compression_type="gzip")
    assert c.produce(name, 0, build_batch([Rec(b"k", b"zipped" * 20)] * 3)).base_offset == 1
    assert c.produce(name, 0, build_batch([Rec(b"k", b"lz4")], compression="lz4")).base_offset == 4
    set_configs(c, name, compression_type="producer")
    assert c.produce(name, 0, build_batch([Rec(b"k", b"snappy" * 20)], compression="snappy")).base_offset == 5
    parsed, hw = c.fetch_all(name, 0)
    assert hw == 6
    assert [(b.base_offset, b.compression) for b in parsed.batches] == [(0, 0), (1, 1), (4, 1), (5, 2)]
    assert [r.value for r in parsed.records] == [b"plain" * 20] + [b"zipped" * 20] * 3 + [b"lz4", b"snappy" * 20]


def test_min_insync_replicas(c: RawClient, name: str) -> None:
    assert c.create_topic(name, 1).error_code == 0
    set_configs(c, name, min_insync_replicas="2")
    # Kafka 3.9 caps min.insync.replicas at the replica count (Partition.effectiveMinIsr): a
    # one-replica topic takes acks=all writes whatever the setting (checked in tests/differential)
    r = c.produce(name, 0, old_batch(b"a", 0), acks=-1)
    assert (r.error_code, r.base_offset) == (0, 0)
    assert c.produce(name, 0, old_batch(b"a", 0), acks=1).base_offset == 1
    assert incremental(c, name, [("min.insync.replicas", DELETE, None)]) == (0, None)
    assert c.produce(name, 0, old_batch(b"b", 0), acks=-1).base_offset == 2


def test_cleanup_policy_append_and_subtract(c: RawClient, name: str) -> None:
    DR = DeleteRecordsRequest
    assert c.create_topic(name, 1).error_code == 0
    assert c.produce(name, 0, build_batch([Rec(None, b"no key")])).error_code == 0

    def delete_records(offset: int) -> tuple[int, int]:
        p = c.request(DR[2](topics=[DR.DeleteRecordsTopic(name=name, partitions=[
            DR.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset)])],
            timeout_ms=1000)).topics[0].partitions[0]
        return p.error_code, p.low_watermark

    assert incremental(c, name, [("cleanup.policy", APPEND, "compact")]) == (0, None)
    assert describe(c, name)["cleanup.policy"] == ("delete,compact", DYNAMIC_TOPIC_CONFIG)
    assert c.produce(name, 0, build_batch([Rec(None, b"no key")])).error_code == INVALID_RECORD
    assert delete_records(1) == (0, 1)                    # delete is still in the policy
    assert incremental(c, name, [("cleanup.policy", SUBTRACT, "delete")]) == (0, None)
    assert describe(c, name)["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert delete_records(1) == (POLICY_VIOLATION, -1)
    assert incremental(c, name, [("cleanup.policy", DELETE, None)]) == (0, None)
    assert describe(c, name)["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
    assert c.produce(name, 0, build_batch([Rec(None, b"no key")])).base_offset == 1


# -- validation ------------------------------------------------------------------------------

def test_invalid_values_are_refused_and_change_nothing(c: RawClient, name: str) -> None:
    assert c.create_topic(name, 1, configs={"retention.ms": "5000"}).error_code == 0
    before = describe(c, name)
    # A value ConfigDef refuses names the resource, as Kafka 3.9's ZkAdminManager wraps it.
    resource = f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): "
    cases = [
        ([("retention.ms", SET, "soon")], (INVALID_CONFIG, resource + "Invalid value soon for configuration "
                                                           "retention.ms: Not a number of type LONG")),
        ([("segment.bytes", SET, "13")], (INVALID_CONFIG, resource + "Invalid value 13 for configuration "
                                                          "segment.bytes: Value must be at least 14")),
        ([("retention.ms", SET, "1"), ("compression.type", SET, "brotli")],
         (INVALID_CONFIG, resource + "Invalid value brotli for configuration compression.type: String must be "
                          "one of: uncompressed, zstd, lz4, snappy, gzip, producer")),
        ([("no.such.config", SET, "1")], (INVALID_CONFIG, "Unknown topic config name: no.such.config")),
        ([("log.retention.ms", SET, "1")], (INVALID_CONFIG, "Unknown topic config name: log.retention.ms")),
        ([("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")],
         (INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")),
        ([("remote.storage.enable", SET, "true")],
         (INVALID_CONFIG, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                          "with remote log storage.")),
        ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)],
         (INVALID_REQUEST, "Error due to duplicate config keys")),
        ([("retention.ms", 7, "1")], (INVALID_REQUEST, "Unknown operations type 7")),
    ]
    for ops, expected in cases:
        assert incremental(c, name, ops) == expected, ops
    assert incremental(c, name + "-x", [("retention.ms", SET, "1")]) == (3, f"The topic '{name}-x' does not exist.")
    assert incremental(c, name, [("retention.ms", SET, "7000")], validate_only=True) == (0, None)
    assert describe(c, name) == before
    # legacy AlterConfigs: the same validation
    R = AlterConfigsRequest.AlterConfigsResource
    resp = c.request(AlterConfigsRequest[2](resources=[R(resource_type=TOPIC, resource_name=name, configs=[
        R.AlterableConfig(name="max.message.bytes", value="-1")])], validate_only=False))
    assert (resp.responses[0].error_code, resp.responses[0].error_message) == (
        INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): "
                        "Invalid value -1 for configuration max.message.bytes: Value must be at least 0")
    assert describe(c, name) == before


def test_duplicate_resources_and_broker_resources(c: RawClient, name: str) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    assert c.create_topic(name, 1).error_code == 0
    resp = c.request(IncrementalAlterConfigsRequest[1](resources=[
        R(resource_type=TOPIC, resource_name=name, configs=[R.AlterableConfig(name="retention.ms", config_operation=SET,
                                                                             value="1000")])] * 2,
        validate_only=False))
    assert [(r.error_code, r.error_message) for r in resp.responses] == \
        [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert describe(c, name)["retention.ms"] == ("604800000", DEFAULT_CONFIG)
    # static broker configs are refused, named in Kafka's (java.util.Properties) order
    assert incremental(c, "0", [("log.retention.hours", SET, "1"), ("num.partitions", SET, "2")], rtype=BROKER) == \
        (INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.retention.hours, num.partitions)")
    assert incremental(c, "1", [("log.retention.ms", SET, "1")], rtype=BROKER) == \
        (INVALID_REQUEST, "Unexpected broker id, expected 0, but received 1")
    assert incremental(c, "x", [("log.retention.ms", SET, "1")], rtype=BROKER) == \
        (INVALID_REQUEST, "Node id must be an integer, but it is: x")
    assert incremental(c, "0", [("message.max.bytes", DELETE, None)], rtype=BROKER) == (0, None)
    assert incremental(c, "0", [("x", SET, "1")], rtype=8) == \
        (INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, but resource type is BROKER_LOGGER")


# -- persistence ------------------------------------------------------------------------------

def test_configs_survive_a_restart(tmp_path: Path) -> None:
    b = BrokerProcess(log_dir=tmp_path / "logs").start()
    try:
        with RawClient(b.bootstrap_servers) as c:
            assert c.create_topic("kept", 1, configs={"retention.ms": "86400000"}).error_code == 0
            assert incremental(c, "kept", [("max.message.bytes", SET, "300"), ("compression.type", SET, "zstd"),
                                           ("unclean.leader.election.enable", SET, "true"),
                                           ("leader.replication.throttled.replicas", SET, "0:0")]) == (0, None)
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            got = describe(c, "kept")
            assert {k: got[k] for k in ("retention.ms", "max.message.bytes", "compression.type",
                                        "unclean.leader.election.enable", "leader.replication.throttled.replicas",
                                        "segment.bytes")} == {
                "retention.ms": ("86400000", DYNAMIC_TOPIC_CONFIG), "max.message.bytes": ("300", DYNAMIC_TOPIC_CONFIG),
                "compression.type": ("zstd", DYNAMIC_TOPIC_CONFIG),
                "unclean.leader.election.enable": ("true", DYNAMIC_TOPIC_CONFIG),
                "leader.replication.throttled.replicas": ("0:0", DYNAMIC_TOPIC_CONFIG),
                "segment.bytes": ("1073741824", STATIC_BROKER_CONFIG)}
            assert c.produce("kept", 0, build_batch([Rec(b"k", b"v" * 400)])).error_code == MESSAGE_TOO_LARGE
            assert c.produce("kept", 0, build_batch([Rec(b"k", b"v" * 100)])).base_offset == 0
            parsed, _hw = c.fetch_all("kept", 0)
            assert [bt.compression for bt in parsed.batches] == [4]
    finally:
        b.close()


def test_broker_level_defaults_and_static_sources(tmp_path: Path) -> None:
    b = BrokerProcess(log_dir=tmp_path / "logs", overrides={
        "log.retention.ms": "7200000", "compression.type": "lz4", "log.message.timestamp.after.max.ms": "1000"}).start()
    try:
        with RawClient(b.bootstrap_servers) as c:
            assert c.create_topic("d", 1).error_code == 0
            DC = DescribeConfigsRequest
            resp = c.request(DC[4](resources=[DC.DescribeConfigsResource(
                resource_type=TOPIC, resource_name="d", configuration_keys=["retention.ms", "compression.type"])],
                include_synonyms=True, include_documentation=False))
            got = {e.name: (e.value, e.config_source, [(s.name, s.value, s.source) for s in e.synonyms])
                   for e in resp.results[0].configs}
            assert got == {
                "retention.ms": ("7200000", STATIC_BROKER_CONFIG,
                                 [("log.retention.ms", "7200000", STATIC_BROKER_CONFIG),
                                  ("log.retention.hours", "168", STATIC_BROKER_CONFIG),
                                  ("log.retention.hours", "168", DEFAULT_CONFIG)]),
                "compression.type": ("lz4", STATIC_BROKER_CONFIG,
                                     [("compression.type", "lz4", STATIC_BROKER_CONFIG),
                                      ("compression.type", "producer", DEFAULT_CONFIG)])}
            # the broker defaults act: an lz4 batch store, a far-future timestamp is refused
            assert c.produce("d", 0, build_batch([Rec(b"k", b"v")])).base_offset == 0
            assert c.produce("d", 0, old_batch(b"late", -60_000)).error_code == INVALID_TIMESTAMP
            parsed, _hw = c.fetch_all("d", 0)
            assert [bt.compression for bt in parsed.batches] == [3]
    finally:
        b.close()


# -- admin clients ----------------------------------------------------------------------------

def test_kafka_python_admin_describes_and_alters(broker: BrokerProcess, name: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1,
                                    "configs": {"retention.ms": "86400000"}}})
        res = ConfigResource(ConfigResourceType.TOPIC, name)
        got = admin.describe_configs([res], include_synonyms=True, config_filter="all")["topic"][name]
        assert len(got) == 36  # Kafka 3.9's topic configs
        assert (got["retention.ms"]["value"], got["retention.ms"]["config_source"]) == ("86400000", "DYNAMIC_TOPIC_CONFIG")
        assert got["cleanup.policy"]["synonyms"] == [{"name": "log.cleanup.policy", "value": "delete",
                                                      "source": "DEFAULT_CONFIG"}]
        # IncrementalAlterConfigs (kafka-python's default against this broker)
        assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={
            "segment.ms": "3600000", "cleanup.policy": (AlterConfigOp.APPEND, "compact")})]) == {"topic": {name: "OK"}}
        modified = admin.describe_configs([res])["topic"][name]
        assert {k: v["value"] for k, v in modified.items()} == {
            "retention.ms": "86400000", "segment.ms": "3600000", "cleanup.policy": "delete,compact"}
        # legacy AlterConfigs replaces the set: kafka-python re-sends the other modified keys
        assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "1000"})],
                                   incremental=False) == {"topic": {name: "OK"}}
        modified = admin.describe_configs([res])["topic"][name]
        assert {k: v["value"] for k, v in modified.items()} == {
            "retention.ms": "1000", "segment.ms": "3600000", "cleanup.policy": "delete,compact"}
        assert admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=["segment.ms"])]) == \
            {"topic": {name: "OK"}}
        assert set(admin.describe_configs([res])["topic"][name]) == {"retention.ms", "cleanup.policy"}
        bad = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "x"})])
        assert bad["topic"][name].startswith("[Error 40] InvalidConfigurationError")
        # broker configs: described; static ones read-only and refused (dynamic ones:
        # test_dynamic_broker_configs.py)
        broker_res = ConfigResource(ConfigResourceType.BROKER, "0")
        bc = admin.describe_configs([broker_res], config_filter="all")["broker"]["0"]
        assert bc["log.retention.check.interval.ms"]["value"] == "100"
        assert bc["log.retention.check.interval.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert (bc["log.retention.check.interval.ms"]["read_only"], bc["log.retention.ms"]["read_only"]) == \
            (True, False)
        refused = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0",
                                                      configs={"log.retention.hours": "1"})], raise_on_unknown=False)
        assert refused["broker"]["0"].startswith("[Error 42] InvalidRequestError")
        assert "Cannot update these configs dynamically: Set(log.retention.hours)" in refused["broker"]["0"]
    finally:
        admin.close()


def test_confluent_admin_describes_and_alters(broker: BrokerProcess, name: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       NewTopic)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1, config={"segment.bytes": "1000000"})])[name].result(15)
    res = ConfigResource("TOPIC", name)
    entries = admin.describe_configs([res])[res].result(15)
    assert len(entries) == 36  # Kafka 3.9's topic configs
    seg = entries["segment.bytes"]
    assert (seg.value, seg.source, seg.is_read_only, seg.is_default) == (
        "1000000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False)
    # confluent-kafka keys synonyms by name: the static and default log.segment.bytes collapse into one
    assert sorted(seg.synonyms) == ["log.segment.bytes", "segment.bytes"]
    assert (seg.synonyms["segment.bytes"].value, seg.synonyms["segment.bytes"].source) == (
        "1000000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert seg.synonyms["log.segment.bytes"].value == "1073741824"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    alter = ConfigResource("TOPIC", name, incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([alter])[alter].result(15)
    entries = admin.describe_configs([res])[res].result(15)
    assert {k: (e.value, e.source) for k, e in entries.items()
            if k in ("retention.ms", "segment.bytes", "cleanup.policy")} == {
        "retention.ms": ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        "segment.bytes": ("1073741824", ConfigSource.STATIC_BROKER_CONFIG.value),
        "cleanup.policy": ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)}

    bad = ConfigResource("TOPIC", name, incremental_configs=[
        ConfigEntry("segment.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([bad])[bad].result(15)
    assert exc.value.args[0].code() == INVALID_CONFIG
    assert "Invalid value 0 for configuration segment.ms: Value must be at least 1" in exc.value.args[0].str()

    broker_res = ConfigResource("BROKER", "0")
    bentries = admin.describe_configs([broker_res])[broker_res].result(15)
    assert bentries["num.partitions"].value == "1"
    assert bentries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert bentries["num.partitions"].is_read_only is True
    refused = ConfigResource("BROKER", "0", incremental_configs=[
        ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([refused])[refused].result(15)
    assert exc.value.args[0].code() == INVALID_REQUEST
