"""End-to-end: kafka-python 3 against a real kafkalite broker (no consumer groups: assign + seek)."""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.partitioner.default import murmur2 as kp_murmur2

from tests.harness import BrokerProcess
from tests.integration.util import CODECS, RawClient, java_partition, murmur2, wait_until

TIMEOUT = 15.0


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    yield a
    a.close()


def create(admin: KafkaAdminClient, name: str, partitions: int) -> None:
    r = admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}},
                            wait_for_metadata=True)
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [(name, 0)]


def producer(broker: BrokerProcess, **kw) -> KafkaProducer:
    kw.setdefault("linger_ms", 5)
    return KafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000,
                         max_block_ms=10000, **kw)


def consume(broker: BrokerProcess, topic: str, partitions: list[int], expected: int,
            timeout: float = TIMEOUT) -> dict[int, list]:
    """Read `expected` records from the beginning of `partitions`; fails on timeout or on extra records."""
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=10000)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: dict[int, list] = defaultdict(list)
        n = 0
        deadline = time.monotonic() + timeout
        while n < expected:
            assert time.monotonic() < deadline, f"consumed {n}/{expected} records in {timeout}s"
            for tp, recs in c.poll(timeout_ms=200).items():
                out[tp.partition].extend(recs)
                n += len(recs)
        # Nothing beyond what we expect may be there.
        extra = sum(len(r) for r in c.poll(timeout_ms=300).values())
        assert n == expected and extra == 0, f"expected {expected} records, got {n} + {extra}"
        return out
    finally:
        c.close()


def assert_contiguous(records_by_partition: dict[int, list]) -> None:
    for p, recs in records_by_partition.items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"partition {p} offsets not 0..n-1"


def test_reference_murmur2_matches_java_and_kafka_python() -> None:
    # Values from org.apache.kafka.common.utils.Utils.murmur2 (kafka-clients 4.3.0).
    java = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107,
            b"a-little-bit-long-string": -985981536, b"": 275646681, b"key-17": 956945460}
    for k, v in java.items():
        assert murmur2(k) == v
        assert kp_murmur2(k) & 0xFFFFFFFF == v & 0xFFFFFFFF


def test_keyed_produce_partitioner_and_roundtrip(broker: BrokerProcess, admin: KafkaAdminClient,
                                                 topic_name: str) -> None:
    create(admin, topic_name, 4)
    p = producer(broker)
    sent = []
    for i in range(200):
        key, value = f"key-{i % 37}".encode(), f"value-{i}".encode()
        sent.append((key, value, p.send(topic_name, value=value, key=key)))
    p.flush(timeout=TIMEOUT)
    expected: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for key, value, fut in sent:
        md = fut.get(timeout=TIMEOUT)
        assert md.partition == java_partition(key, 4), (key, md.partition)
        # Idempotent producer keeps per-partition order: the offset is the send order within the partition.
        assert md.offset == len(expected[md.partition]), (key, md)
        expected[md.partition].append((key, value))
    p.close()
    assert len(expected) == 4  # 37 keys over 4 partitions: every partition is used

    got = consume(broker, topic_name, [0, 1, 2, 3], 200)
    assert_contiguous(got)
    for part in range(4):
        assert [(r.key, r.value) for r in got[part]] == expected[part]
        assert all(r.topic == topic_name and r.partition == part for r in got[part])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str,
                               codec: str) -> None:
    create(admin, topic_name, 1)
    p = producer(broker, compression_type=codec, linger_ms=20, batch_size=4096)
    values = [(f"{codec}-{i:05d}-".encode() + b"abcdefgh" * 30) for i in range(300)]
    futs = [p.send(topic_name, value=v, key=str(i).encode(), partition=0) for i, v in enumerate(values)]
    p.flush(timeout=TIMEOUT)
    assert [f.get(timeout=TIMEOUT).offset for f in futs] == list(range(300))
    p.close()

    got = consume(broker, topic_name, [0], 300)
    assert_contiguous(got)
    assert [r.value for r in got[0]] == values
    assert [r.key for r in got[0]] == [str(i).encode() for i in range(300)]
    # The broker stores and serves the client's compressed batches (codec bits intact).
    with RawClient(broker.bootstrap_servers) as c:
        parsed, hw = c.fetch_all(topic_name, 0)
    assert hw == 300
    assert len(parsed.batches) > 1
    assert {b.compression for b in parsed.batches} == {CODECS[codec]}
    assert [r.value for r in parsed.records] == values


def test_headers_roundtrip(broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str) -> None:
    create(admin, topic_name, 1)
    p = producer(broker)
    cases = [
        [("a", b"1")],
        [("dup", b"x"), ("dup", b"y"), ("empty", b"")],
        [],
        [("unicode-é", "värde".encode()), ("bin", bytes(range(256)))],
    ]
    for i, h in enumerate(cases):
        p.send(topic_name, value=f"v{i}".encode(), headers=h, partition=0)
    p.flush(timeout=TIMEOUT)
    p.close()
    got = consume(broker, topic_name, [0], len(cases))
    assert [list(r.headers) for r in got[0]] == cases
    assert [r.value for r in got[0]] == [f"v{i}".encode() for i in range(len(cases))]


def first_offset_at_or_after(timestamps: list[int], target: int):
    for off, ts in enumerate(timestamps):
        if ts >= target:
            return off, ts
    return None


def test_explicit_timestamps_and_offsets_for_times(broker: BrokerProcess, admin: KafkaAdminClient,
                                                   topic_name: str) -> None:
    create(admin, topic_name, 2)
    base = (int(time.time()) - 3600) * 1000  # recent: within retention.ms, or retention deletes it
    # Mostly increasing, with some out-of-order timestamps: the answer is the first offset (in
    # offset order) whose timestamp is >= the target.
    ts = [base + 10 * i for i in range(60)]
    ts[20], ts[21] = base + 500, base + 150
    p = producer(broker, linger_ms=0)
    for i, t in enumerate(ts):
        p.send(topic_name, value=f"m{i}".encode(), partition=0, timestamp_ms=t)
        if i % 7 == 0:
            p.flush(timeout=TIMEOUT)  # several batches, so lookups cross batch boundaries
    p.flush(timeout=TIMEOUT)
    p.close()

    got = consume(broker, topic_name, [0], len(ts))
    assert [r.timestamp for r in got[0]] == ts
    assert {r.timestamp_type for r in got[0]} == {0}  # CreateTime

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        for target in [base - 1000, base, base + 1, base + 145, base + 150, base + 151, base + 205,
                       base + 499, base + 500, base + 590, base + 591, base + 10_000]:
            res = c.offsets_for_times({tp0: target})[tp0]
            exp = first_offset_at_or_after(ts, target)
            if exp is None:
                assert res is None, (target, res)
            else:
                assert (res.offset, res.timestamp) == exp, (target - base, res, exp)
        # An empty partition has no offset for any timestamp.
        assert c.offsets_for_times({tp1: base})[tp1] is None
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: len(ts), tp1: 0}
    finally:
        c.close()


def test_beginning_and_end_offsets(broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str) -> None:
    create(admin, topic_name, 3)
    p = producer(broker)
    counts = {0: 5, 1: 0, 2: 17}
    for part, n in counts.items():
        for i in range(n):
            p.send(topic_name, value=f"{part}-{i}".encode(), partition=part)
    p.flush(timeout=TIMEOUT)
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic_name, i) for i in range(3)]
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
    finally:
        c.close()


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str, acks: int) -> None:
    create(admin, topic_name, 2)
    p = producer(broker, acks=acks, enable_idempotence=(acks == -1))
    futs = [p.send(topic_name, value=f"a{acks}-{i}".encode(), partition=i % 2) for i in range(100)]
    p.flush(timeout=TIMEOUT)
    mds = [f.get(timeout=TIMEOUT) for f in futs]
    p.close()
    if acks == 0:
        # No response, so the client cannot know offsets (kafka-python 3.0.12 reports a synthetic
        # base offset 0 + batch index here); the log end offsets are what count.
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
        try:
            tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
            wait_until(lambda: c.end_offsets(tps) == {tps[0]: 50, tps[1]: 50}, TIMEOUT,
                       what="acks=0 records to be appended")
        finally:
            c.close()
    else:
        assert [md.offset for md in mds] == [i // 2 for i in range(100)]
    got = consume(broker, topic_name, [0, 1], 100)
    assert_contiguous(got)
    for part in (0, 1):
        assert [r.value for r in got[part]] == [f"a{acks}-{i}".encode() for i in range(part, 100, 2)]


def test_idempotent_producer_exactly_n(broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str) -> None:
    create(admin, topic_name, 3)
    n = 1500
    # kafka-python 3 enables idempotence by default; small batches keep 5 requests in flight.
    p = producer(broker, batch_size=512, linger_ms=2)
    assert p.config["enable_idempotence"] is True
    futs = [p.send(topic_name, value=f"idem-{i}".encode(), key=f"k{i}".encode()) for i in range(n)]
    p.flush(timeout=TIMEOUT)
    mds = [f.get(timeout=TIMEOUT) for f in futs]
    p.close()
    per_part: dict[int, list[int]] = defaultdict(list)
    for md in mds:
        per_part[md.partition].append(md.offset)
    for part, offs in per_part.items():
        assert offs == list(range(len(offs))), f"partition {part}: acknowledged offsets not 0..n-1"

    got = consume(broker, topic_name, [0, 1, 2], n)
    assert_contiguous(got)
    values = [r.value for recs in got.values() for r in recs]
    assert len(values) == n and len(set(values)) == n
    assert set(values) == {f"idem-{i}".encode() for i in range(n)}
    # The stored batches carry the producer id and per-partition sequences starting at 0.
    with RawClient(broker.bootstrap_servers) as c:
        pids = set()
        for part in range(3):
            parsed, hw = c.fetch_all(topic_name, part)
            assert hw == len(per_part[part])
            assert len(parsed.batches) > 1
            for b in parsed.batches:
                pids.add((b.producer_id, b.producer_epoch))
                assert b.base_sequence == b.base_offset, (part, b.base_offset, b.base_sequence)
        assert len(pids) == 1 and next(iter(pids))[0] >= 0
