"""End-to-end: confluent-kafka (librdkafka) against a real kafkalite broker.

Consumer groups are not implemented, so the consumer uses assign() with explicit offsets and never
commits or subscribes (librdkafka still insists on a group.id in the config).
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Iterator

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition,
                             TIMESTAMP_CREATE_TIME)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness import BrokerProcess
from tests.integration.util import (CODECS, RawClient, java_partition, librdkafka_consistent_partition,
                                    wait_until)

TIMEOUT = 15.0


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create(admin: AdminClient, name: str, partitions: int) -> None:
    futs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                               operation_timeout=10, request_timeout=10)
    assert futs[name].result(timeout=TIMEOUT) is None
    wait_until(lambda: len(admin.list_topics(name, timeout=5).topics[name].partitions) == partitions
               and admin.list_topics(name, timeout=5).topics[name].error is None,
               TIMEOUT, what=f"{name} in metadata")


class Delivery:
    """Collects delivery reports: (key, value, partition, offset) in report order; errors fail."""

    def __init__(self) -> None:
        self.reports: list[tuple[Any, Any, int, int]] = []
        self.errors: list[Any] = []

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.reports.append((msg.key(), msg.value(), msg.partition(), msg.offset()))


def producer(broker: BrokerProcess, **conf: Any) -> Producer:
    base = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "message.timeout.ms": 10000}
    base.update(conf)
    return Producer(base)


def flush(p: Producer) -> None:
    assert p.flush(TIMEOUT) == 0, "messages still in the producer queue after flush"


def consume(broker: BrokerProcess, topic: str, partitions: list[int], expected: int,
            timeout: float = TIMEOUT) -> dict[int, list[Any]]:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kafkalite-it-unused",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: dict[int, list[Any]] = defaultdict(list)
        n = 0
        deadline = time.monotonic() + timeout
        while n < expected:
            assert time.monotonic() < deadline, f"consumed {n}/{expected} in {timeout}s"
            for m in c.consume(num_messages=1000, timeout=0.2):
                assert m.error() is None, m.error()
                out[m.partition()].append(m)
                n += 1
        extra = [m for m in c.consume(num_messages=1000, timeout=0.5) if m.error() is None]
        assert n == expected and not extra, f"expected {expected} messages, got {n} + {len(extra)}"
        return out
    finally:
        c.close()


def offsets_of(msgs: list[Any]) -> list[int]:
    return [m.offset() for m in msgs]


@pytest.mark.parametrize("partitioner", ["consistent_random", "murmur2_random"])
def test_keyed_produce_partitioner_and_roundtrip(broker: BrokerProcess, admin: AdminClient, topic_name: str,
                                                 partitioner: str) -> None:
    create(admin, topic_name, 5)
    d = Delivery()
    conf: dict[str, Any] = {"on_delivery": d, "enable.idempotence": True}
    if partitioner != "consistent_random":  # consistent_random is librdkafka's default
        conf["partitioner"] = partitioner
    p = producer(broker, **conf)
    for i in range(300):
        p.produce(topic_name, value=f"value-{i}".encode(), key=f"key-{i % 41}".encode())
    flush(p)
    assert not d.errors and len(d.reports) == 300
    ref = librdkafka_consistent_partition if partitioner == "consistent_random" else java_partition
    expected: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for key, value, part, off in d.reports:
        assert part == ref(key, 5), (key, part)
        expected[part].append((key, value))
        assert off == len(expected[part]) - 1
    assert len(expected) == 5
    # Per-partition order is the produce order.
    for part, kvs in expected.items():
        idx = [int(v.decode().split("-")[1]) for _, v in kvs]
        assert idx == sorted(idx)

    got = consume(broker, topic_name, list(range(5)), 300)
    for part in range(5):
        assert offsets_of(got[part]) == list(range(len(got[part])))
        assert [(m.key(), m.value()) for m in got[part]] == expected[part]
        assert {m.topic() for m in got[part]} == {topic_name}


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(broker: BrokerProcess, admin: AdminClient, topic_name: str, codec: str) -> None:
    create(admin, topic_name, 1)
    d = Delivery()
    p = producer(broker, **{"compression.type": codec, "linger.ms": 20, "batch.size": 4096,
                            "on_delivery": d})
    values = [f"{codec}-{i:05d}-".encode() + b"0123456789" * 25 for i in range(400)]
    for i, v in enumerate(values):
        p.produce(topic_name, value=v, key=str(i).encode(), partition=0)
    flush(p)
    assert not d.errors
    assert [r[3] for r in d.reports] == list(range(400))
    got = consume(broker, topic_name, [0], 400)
    assert offsets_of(got[0]) == list(range(400))
    assert [m.value() for m in got[0]] == values
    assert [m.key() for m in got[0]] == [str(i).encode() for i in range(400)]
    with RawClient(broker.bootstrap_servers) as c:
        parsed, hw = c.fetch_all(topic_name, 0)
    assert hw == 400 and len(parsed.batches) > 1
    assert {b.compression for b in parsed.batches} == {CODECS[codec]}


def test_headers_roundtrip(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create(admin, topic_name, 1)
    p = producer(broker)
    cases = [[("a", b"1")], [("dup", b"x"), ("dup", b"y"), ("empty", b"")], [("bin", bytes(range(256)))]]
    for i, h in enumerate(cases):
        p.produce(topic_name, value=f"v{i}".encode(), headers=h, partition=0)
    p.produce(topic_name, value=b"no-headers", partition=0)
    flush(p)
    got = consume(broker, topic_name, [0], 4)
    assert [m.headers() for m in got[0][:3]] == cases
    assert got[0][3].headers() is None
    assert [m.value() for m in got[0]] == [b"v0", b"v1", b"v2", b"no-headers"]


def test_timestamps_offsets_for_times_and_watermarks(broker: BrokerProcess, admin: AdminClient,
                                                     topic_name: str) -> None:
    create(admin, topic_name, 2)
    base = 1_690_000_000_000
    ts = [base + 100 * i for i in range(40)]
    ts[10] = base + 3000  # out of order: offset 10 is the first with ts >= base+1001..3000
    p = producer(broker, **{"linger.ms": 0})
    for i, t in enumerate(ts):
        p.produce(topic_name, value=f"m{i}".encode(), partition=0, timestamp=t)
        if i % 6 == 0:
            flush(p)
    flush(p)
    got = consume(broker, topic_name, [0], len(ts))
    assert [m.timestamp() for m in got[0]] == [(TIMESTAMP_CREATE_TIME, t) for t in ts]

    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kafkalite-it-unused",
                  "enable.auto.commit": False})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, len(ts))
        assert c.get_watermark_offsets(TopicPartition(topic_name, 1), timeout=10) == (0, 0)
        for target in [base - 5, base, base + 1, base + 950, base + 1001, base + 2999, base + 3000,
                       base + 3001, base + 3900, base + 3901]:
            exp = next((off for off, t in enumerate(ts) if t >= target), -1)  # -1: no such record
            [res] = c.offsets_for_times([TopicPartition(topic_name, 0, target)], timeout=10)
            assert res.error is None and res.offset == exp, (target - base, res, exp)
        [empty] = c.offsets_for_times([TopicPartition(topic_name, 1, base)], timeout=10)
        assert empty.offset == -1
    finally:
        c.close()


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(broker: BrokerProcess, admin: AdminClient, topic_name: str, acks: int) -> None:
    create(admin, topic_name, 2)
    d = Delivery()
    p = producer(broker, acks=acks, on_delivery=d)
    for i in range(100):
        p.produce(topic_name, value=f"a{acks}-{i}".encode(), partition=i % 2)
    flush(p)
    assert not d.errors and len(d.reports) == 100
    if acks == 0:
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kafkalite-it-unused"})
        try:
            wait_until(lambda: all(c.get_watermark_offsets(TopicPartition(topic_name, part), timeout=5)
                                   == (0, 50) for part in (0, 1)), TIMEOUT, what="acks=0 appends")
        finally:
            c.close()
    else:
        for part in (0, 1):
            assert [r[3] for r in d.reports if r[2] == part] == list(range(50))
    got = consume(broker, topic_name, [0, 1], 100)
    for part in (0, 1):
        assert offsets_of(got[part]) == list(range(50))
        assert [m.value() for m in got[part]] == [f"a{acks}-{i}".encode() for i in range(part, 100, 2)]


def test_idempotent_producer_exactly_n(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create(admin, topic_name, 3)
    n = 2000
    d = Delivery()
    p = producer(broker, **{"enable.idempotence": True, "batch.size": 1024, "linger.ms": 2,
                            "on_delivery": d})
    for i in range(n):
        p.produce(topic_name, value=f"idem-{i}".encode(), key=f"k{i}".encode())
        if i % 500 == 0:
            p.poll(0)
    flush(p)
    assert not d.errors and len(d.reports) == n
    per_part: dict[int, list[int]] = defaultdict(list)
    for _, _, part, off in d.reports:
        per_part[part].append(off)
    for part, offs in per_part.items():
        assert sorted(offs) == list(range(len(offs))), part
    got = consume(broker, topic_name, [0, 1, 2], n)
    values = [m.value() for msgs in got.values() for m in msgs]
    assert len(values) == n and set(values) == {f"idem-{i}".encode() for i in range(n)}
    with RawClient(broker.bootstrap_servers) as c:
        producers = set()
        for part in range(3):
            parsed, hw = c.fetch_all(topic_name, part)
            assert hw == len(per_part[part])
            for b in parsed.batches:
                producers.add((b.producer_id, b.producer_epoch))
                assert b.base_sequence == b.base_offset
        assert len(producers) == 1 and next(iter(producers))[0] >= 0


def test_unknown_topic_partition_produce_fails_cleanly(broker: BrokerProcess, admin: AdminClient,
                                                       topic_name: str) -> None:
    """Producing to a partition the topic does not have is refused by librdkafka from metadata."""
    create(admin, topic_name, 2)
    d = Delivery()
    p = producer(broker, on_delivery=d)
    p.produce(topic_name, value=b"x", partition=7)
    p.flush(TIMEOUT)
    assert len(d.errors) == 1 and d.errors[0].code() == KafkaError._UNKNOWN_PARTITION
