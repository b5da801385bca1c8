"""Produce v0-2 and Fetch v0-3 (message formats v0/v1) over raw sockets against a broker process,
at every version and codec, with exact offsets, timestamps, keys and values; and old clients:
kafka-python forced to api_version (0, 10) and (0, 9), which speak these versions only.
Kafka's own answers to the same requests are compared in tests/differential/test_message_format.py.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterator, Optional

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, parse_legacy_records, parse_records

TS = (int(time.time()) - 600) * 1000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
NONE, CORRUPT_MESSAGE, UNSUPPORTED_VERSION, INVALID_RECORD = 0, 2, 35, 87


@pytest.fixture(scope="module")
def c(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers) as client:
        yield client


def new_topic(c: RawClient, configs: Optional[dict[str, str]] = None) -> str:
    name = "fmt-" + uuid.uuid4().hex[:10]
    assert c.create_topic(name, 1, configs=configs).error_code == 0
    return name


def produce(c: RawClient, version: int, topic: str, records: bytes) -> Any:
    P = ProduceRequest.TopicProduceData
    resp = c.request(ProduceRequest[version](
        acks=-1, timeout_ms=10000,
        topic_data=[P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])]))
    (t,) = resp.responses
    assert t.name == topic
    (p,) = t.partition_responses
    return p


def fetch(c: RawClient, version: int, topic: str, offset: int, max_bytes: int = 1 << 20) -> Any:
    T = FetchRequest.FetchTopic
    resp = c.request(FetchRequest[version](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
        topics=[T(topic=topic, partitions=[T.FetchPartition(partition=0, fetch_offset=offset,
                                                            partition_max_bytes=max_bytes)])]))
    (p,) = resp.responses[0].partitions
    return p


def legacy_set(magic: int, codec: str, records: list[tuple[Optional[bytes], Optional[bytes]]]) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 30)
    for i, (k, v) in enumerate(records):
        assert b.append(i, TS + i, k, v) is not None
    return bytes(b.build())


def magic_of(produce_version: int) -> int:
    """The message format a client of that Produce version writes (v0-1: 0, v2: 1)."""
    return 1 if produce_version >= 2 else 0


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_each_version_then_fetch_each_version(c: RawClient, version: int, codec: str) -> None:
    topic = new_topic(c)
    magic = magic_of(version)
    sets = [[(b"k0", b"v0"), (None, b"v1")], [(b"k2", None)], [(b"k3", b"v3" * 40), (b"k4", b"v4")]]
    base = 0
    for records in sets:
        r = produce(c, version, topic, legacy_set(magic, codec, records))
        assert (r.error_code, r.base_offset) == (NONE, base)
        if version >= 2:
            assert r.log_append_time_ms == -1
        base += len(records)
    expected = [(i, TS + j if magic else -1, k, v)
                for i, (j, (k, v)) in enumerate((j, kv) for s in sets for j, kv in enumerate(s))]
    # stored as v2 batches (one per request, the codec kept): Fetch v4+ sees them as such
    batches = parse_records(fetch(c, 4, topic, 0).records).batches
    assert [(b.base_offset, b.last_offset, b.magic, b.compression, b.producer_id) for b in batches] == [
        (0, 1, 2, CODECS[codec], -1), (2, 2, 2, CODECS[codec], -1), (3, 4, 2, CODECS[codec], -1)]
    assert [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records] == expected
    # every Fetch v0-3 reads them back in its own format, from any offset, as an old consumer
    # does: the next fetch starts after the last whole message (an answer is cut at the stored
    # size when the old format is bigger)
    for fv in (0, 1, 2, 3):
        fmagic = 1 if fv >= 2 else 0
        for start in (0, 1, 3):
            got, offset = [], start
            while offset < 5:
                p = fetch(c, fv, topic, offset)
                assert (p.error_code, p.high_watermark) == (NONE, 5)
                msgs = parse_legacy_records(p.records)
                assert msgs, (fv, offset)
                got += [(m.offset, m.magic, m.timestamp, m.log_append_time, m.key, m.value)
                        for m in msgs if m.offset >= offset]
                offset = msgs[-1].offset + 1
            # a compressed batch comes whole (its wrapper cannot be split), so one starting
            # below the fetch offset brings records the consumer skips, as above
            assert got == [(o, fmagic, (ts if fmagic else None), False, k, v)
                           for o, ts, k, v in expected if o >= start], (fv, start)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_fetch_each_version_down_converts_v2_batches(c: RawClient, version: int, codec: str) -> None:
    """Batches produced with Produce v9 (magic 2, headers) read by Fetch v0-3: headers dropped,
    timestamps kept for magic 1, zstd UNSUPPORTED_COMPRESSION_TYPE (no v0/v1 form)."""
    topic = new_topic(c)
    # values that compress (kafka-python leaves a batch uncompressed when that is smaller)
    one, two = b"1" * 100, b"2" * 100
    batch = build_batch([Rec(b"a", one, (("h", b"x"),), TS), Rec(None, two, (), TS + 5)], compression=codec)
    assert parse_records(batch).batches[0].compression == CODECS.get(codec, 4)
    assert c.produce(topic, 0, batch, version=9).error_code == NONE
    p = fetch(c, version, topic, 0)
    if codec == "zstd":
        assert (p.error_code, p.high_watermark, p.records) == (76, -1, None)
        return
    assert (p.error_code, p.high_watermark) == (NONE, 2)
    magic = 1 if version >= 2 else 0
    if codec == "lz4" and magic == 0:
        # kafka-python reads Kafka's magic-0 lz4 framing only with xxhash installed; kafkalite's
        # reader (checked against Kafka's own answers in tests/differential) stands in
        got = [(m.offset, m.magic, None, m.key, m.value) for m in _legacy_read(p.records)]
    else:
        got = [(m.offset, m.magic, m.timestamp, m.key, m.value) for m in parse_legacy_records(p.records)]
    assert got == [(0, magic, TS if magic else None, b"a", one), (1, magic, TS + 5 if magic else None, None, two)]


def _legacy_read(data: bytes) -> list:
    from kafkalite.log.legacy_records import inner_messages, parse_message, split_entries
    out = []
    for pos, size, _magic in split_entries(data):
        m = parse_message(data, pos, size)
        out += inner_messages(m) if m.codec else [m]
    return out


def test_log_append_time_topic(c: RawClient) -> None:
    topic = new_topic(c, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    r = produce(c, 2, topic, legacy_set(1, "none", [(b"k", b"v"), (b"k2", b"v2")]))
    after = int(time.time() * 1000)
    assert (r.error_code, r.base_offset) == (NONE, 0) and before <= r.log_append_time_ms <= after
    msgs = parse_legacy_records(fetch(c, 2, topic, 0).records)
    assert [(m.offset, m.timestamp, m.log_append_time) for m in msgs] == [
        (0, r.log_append_time_ms, True), (1, r.log_append_time_ms, True)]


def test_corrupt_and_invalid_message_sets(c: RawClient) -> None:
    topic = new_topic(c)
    good = legacy_set(1, "none", [(b"k", b"v")])
    bad = bytearray(good)
    bad[-1] ^= 0xFF                                   # the value: CRC-32 no longer matches
    assert produce(c, 2, topic, bytes(bad)).error_code == CORRUPT_MESSAGE
    bad0 = bytearray(legacy_set(0, "none", [(b"k", b"v")]))
    bad0[-1] ^= 0xFF
    assert produce(c, 0, topic, bytes(bad0)).error_code == CORRUPT_MESSAGE
    assert produce(c, 2, topic, legacy_set(1, "gzip", [(b"a", b"1")]) * 2).error_code == INVALID_RECORD
    assert produce(c, 2, topic, legacy_set(0, "none", [(b"a", b"1")]) + good).error_code == INVALID_RECORD
    assert fetch(c, 3, topic, 0).high_watermark == 0          # nothing appended
    r = produce(c, 1, topic, good)                              # the connection keeps working
    assert (r.error_code, r.base_offset) == (NONE, 0)


def test_down_conversion_disabled(c: RawClient) -> None:
    topic = new_topic(c, {"message.downconversion.enable": "false"})
    assert produce(c, 2, topic, legacy_set(1, "none", [(b"k", b"v")])).error_code == NONE   # produce is fine
    for version in (0, 1, 2, 3):
        p = fetch(c, version, topic, 0)
        assert (p.error_code, p.high_watermark, p.records) == (UNSUPPORTED_VERSION, -1, None)
    assert fetch(c, 4, topic, 0).error_code == NONE


# -- old clients ---------------------------------------------------------------------------------

@pytest.mark.parametrize("api_version", [(0, 10), (0, 9)])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_with_an_old_api_version(broker: BrokerProcess, c: RawClient,
                                              api_version: tuple[int, int], compression: Optional[str]) -> None:
    """kafka-python pinned to a 0.9/0.10 broker: Produce v1/v2 with magic 0/1 message sets and
    Fetch v1/v2 (no group coordinator protocol beyond what 0.9 had: the consumer is assigned)."""
    topic = new_topic(c)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                             compression_type=compression, linger_ms=5)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=0,
                                 timestamp_ms=TS + i) for i in range(20)]
        metadata = [f.get(timeout=20) for f in futures]
    finally:
        producer.close(10)
    assert sorted(m.offset for m in metadata) == list(range(20))
    stored = parse_records(fetch(c, 4, topic, 0).records)
    assert [(r.offset, r.key, r.value) for r in stored.records] == [(i, b"k%d" % i, b"value-%d" % i) for i in range(20)]
    magic = 1 if api_version >= (0, 10) else 0
    assert [r.timestamp for r in stored.records] == ([TS + i for i in range(20)] if magic else [-1] * 20)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 5)
        got = []
        for message in consumer:
            got.append((message.offset, message.timestamp, message.key, message.value))
            if len(got) == 15:
                break
    finally:
        consumer.close()
    assert got == [(i, TS + i if magic else None, b"k%d" % i, b"value-%d" % i) for i in range(5, 20)]
