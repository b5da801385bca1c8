"""acks=all into a replicated topic, from every client the project tests: kafka-python,
confluent-kafka (librdkafka), aiokafka and the Java client (kafka-clients, tests/java/ClientCheck).

Three brokers, a topic of three partitions with replication factor 3 and min.insync.replicas 2,
every partition led by the same broker. Each client sends half of its records with acks=all
(idempotent), then a follower (neither the leader nor the controller) is SIGKILLed, then the other
half is sent: the leader waits for the dead follower to leave the ISR (the controller drops it
when its ZooKeeper session expires) and acknowledges with the two replicas left, as Kafka does.
Reading back from the start gives exactly what was sent, per partition in send order at offsets
0, 1, 2, ... with nothing lost or doubled: the follower's death makes no difference."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.cluster.util import FAST_EXPIRY, controller_seen_by, create_topic_with_assignment, partitions, unique, wait_until
from tests.integration.test_java_client import (JavaClient, compile_check_program, expected_headers,
                                                expected_value, java_partition)
from tests.support.java_clients import NEWEST

pytestmark = pytest.mark.cluster

NUM_PARTITIONS = 3
HALF = 60                      # records per half; each client sends 2 * HALF
MIN_ISR = "2"
JAVA_SOURCE = Path(__file__).resolve().parent.parent / "java" / "ClientCheck.java"
BASE_TS = 1_700_000_000_000

# sends one half ([i0, i1) of the record indexes) with acks=all and returns once all are acknowledged
Sender = Callable[[str, str, range], None]


def _value(client: str, i: int) -> bytes:
    return f"{client}-{i}".encode()


def _partition_of(i: int) -> int:
    return i % NUM_PARTITIONS


# -- the cluster --------------------------------------------------------------------------------------

def _replicated_topic(cluster: Any, prefix: str) -> tuple[str, int, int]:
    """A new RF3 topic whose every partition is led by one broker that is not the controller;
    (topic, leader, victim): the victim is the third broker, a follower of every partition."""
    controller = controller_seen_by(cluster.broker(0))
    leader, victim = [b for b in sorted(cluster.brokers) if b != controller][:2]
    topic = unique(prefix)
    replicas = [leader, victim, controller]
    assert create_topic_with_assignment(cluster.broker(controller), topic,
                                        {p: replicas for p in range(NUM_PARTITIONS)}) == 0
    # Every broker knows the topic first: kafka-python's alter_configs checks the keys against a
    # DescribeConfigs sent to any broker and takes the UNKNOWN_TOPIC_OR_PARTITION of one whose
    # metadata has not caught up yet (as a Kafka broker's would be) for "Unrecognized configs".
    for b in cluster.brokers:
        wait_until(lambda: {p: (s[0], s[1], s[3], s[4]) for p, s in partitions(cluster.broker(b), topic).items()}
                   == {p: (0, leader, replicas, replicas) for p in range(NUM_PARTITIONS)}, 30,
                   f"broker {b} sees {topic} led by {leader} with the full ISR")
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=20000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"min.insync.replicas": MIN_ISR})])
    finally:
        admin.close()
    return topic, leader, victim


def _kill_follower(cluster: Any, topic: str, leader: int, victim: int) -> None:
    cluster.broker(victim).kill()
    # nothing to wait for: the second half's acks=all is what waits for the ISR to shrink
    assert all(s[1] == leader for s in partitions(cluster.broker(leader), topic).values())


def _run_python_client(cluster: Any, client: str, send: Sender, consume: Callable[[str, str], dict[int, list]]
                       ) -> None:
    topic, leader, victim = _replicated_topic(cluster, f"rc-{client}")
    send(cluster.bootstrap_servers, topic, range(0, HALF))
    _kill_follower(cluster, topic, leader, victim)
    send(cluster.bootstrap_servers, topic, range(HALF, 2 * HALF))
    got = consume(cluster.bootstrap_servers, topic)
    expected: dict[int, list] = defaultdict(list)
    for i in range(2 * HALF):
        p = _partition_of(i)
        expected[p].append((len(expected[p]), _value(client, i)))
    assert got == dict(expected)
    _assert_isr_without(cluster, topic, leader, victim)


def _assert_isr_without(cluster: Any, topic: str, leader: int, victim: int) -> None:
    """The dead follower left every ISR; the leader stayed."""
    others = [b for b in sorted(cluster.brokers) if b not in (leader, victim)]
    wait_until(lambda: {p: (s[1], s[4]) for p, s in partitions(cluster.broker(leader), topic).items()}
               == {p: (leader, [leader, *others]) for p in range(NUM_PARTITIONS)}, 30,
               f"{topic}'s ISR without broker {victim}")


# -- kafka-python -------------------------------------------------------------------------------------

def _kafka_python_send(bootstrap: str, topic: str, indexes: range) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                             request_timeout_ms=30000, retries=2147483647, linger_ms=5)
    try:
        futures = [producer.send(topic, value=_value("kafka-python", i), partition=_partition_of(i)) for i in indexes]
        producer.flush(timeout=90)
        for f in futures:
            f.get(timeout=1)
    finally:
        producer.close(timeout=10)


def _kafka_python_consume(bootstrap: str, topic: str) -> dict[int, list]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             request_timeout_ms=30000)
    out: dict[int, list] = defaultdict(list)
    try:
        tps = [TopicPartition(topic, p) for p in range(NUM_PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        wait_until(lambda: _poll_into(consumer, out) >= 2 * HALF, 60, "kafka-python reads every record")
        _poll_into(consumer, out)   # and nothing more
    finally:
        consumer.close()
    return dict(out)


def _poll_into(consumer: Any, out: dict[int, list]) -> int:
    for tp, records in consumer.poll(timeout_ms=500).items():
        out[tp.partition].extend((r.offset, r.value) for r in records)
    return sum(len(v) for v in out.values())


def test_kafka_python(make_cluster: Any) -> None:
    _run_python_client(make_cluster(3, FAST_EXPIRY), "kafka-python", _kafka_python_send, _kafka_python_consume)


# -- confluent-kafka ----------------------------------------------------------------------------------

def _confluent_send(bootstrap: str, topic: str, indexes: range) -> None:
    from confluent_kafka import Producer
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "request.timeout.ms": 30000, "message.timeout.ms": 90000})
    for i in indexes:
        producer.produce(topic, value=_value("confluent-kafka", i), partition=_partition_of(i),
                         on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
        producer.poll(0)
    assert producer.flush(100) == 0
    assert errors == []


def _confluent_consume(bootstrap: str, topic: str) -> dict[int, list]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rc-unused"),
                         "enable.auto.commit": False, "enable.partition.eof": False})
    out: dict[int, list] = defaultdict(list)

    def poll() -> int:
        for m in consumer.consume(num_messages=500, timeout=0.5):
            assert m.error() is None, m.error()
            out[m.partition()].append((m.offset(), m.value()))
        return sum(len(v) for v in out.values())
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(NUM_PARTITIONS)])
        wait_until(lambda: poll() >= 2 * HALF, 60, "confluent-kafka reads every record")
        poll()
    finally:
        consumer.close()
    return dict(out)


def test_confluent_kafka(make_cluster: Any) -> None:
    _run_python_client(make_cluster(3, FAST_EXPIRY), "confluent-kafka", _confluent_send, _confluent_consume)


# -- aiokafka -----------------------------------------------------------------------------------------

def _aiokafka_send(bootstrap: str, topic: str, indexes: range) -> None:
    from aiokafka import AIOKafkaProducer

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                    request_timeout_ms=30000, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=_value("aiokafka", i), partition=_partition_of(i))
                       for i in indexes]
            await asyncio.wait_for(asyncio.gather(*futures), 90)
        finally:
            await producer.stop()
    asyncio.run(send())


def _aiokafka_consume(bootstrap: str, topic: str) -> dict[int, list]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def consume() -> dict[int, list]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                    request_timeout_ms=30000)
        await consumer.start()
        out: dict[int, list] = defaultdict(list)
        try:
            tps = [TopicPartition(topic, p) for p in range(NUM_PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            extra = False
            while True:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, records in batches.items():
                    out[tp.partition].extend((r.offset, r.value) for r in records)
                if sum(len(v) for v in out.values()) >= 2 * HALF:
                    if extra:
                        break
                    extra = True      # one more poll: nothing more
                assert loop.time() < deadline, f"aiokafka read {dict(out)}"
        finally:
            await consumer.stop()
        return dict(out)
    return asyncio.run(consume())


def test_aiokafka(make_cluster: Any) -> None:
    _run_python_client(make_cluster(3, FAST_EXPIRY), "aiokafka", _aiokafka_send, _aiokafka_consume)


# -- the Java client ----------------------------------------------------------------------------------

def test_java_client(make_cluster: Any) -> None:
    java = JavaClient(*compile_check_program(JAVA_SOURCE, NEWEST), version=NEWEST)
    cluster = make_cluster(3, FAST_EXPIRY)
    topic, leader, victim = _replicated_topic(cluster, "rc-java")
    # ClientCheck's records: key k-i (the built-in partitioner places it), its value and headers,
    # timestamp BASE + i; idempotent, as acks=all makes it by default
    first = java.run(cluster.bootstrap_servers, f"produce {topic} {HALF} none all {BASE_TS}", timeout=120)
    assert first.returncode == 0 and not first.errors(), first.report()
    _kill_follower(cluster, topic, leader, victim)
    second_ts = BASE_TS + 10_000
    second = java.run(cluster.bootstrap_servers, f"produce {topic} {HALF} none all {second_ts}", timeout=120)
    assert second.returncode == 0 and not second.errors(), second.report()
    read = java.run(cluster.bootstrap_servers, f"consume {topic} {2 * HALF} 30000", timeout=120)
    assert read.returncode == 0 and not read.errors(), read.report()

    # per partition, in send order: the first run's records, then the second's
    expected: dict[int, list[tuple[int, str, Any, int]]] = defaultdict(list)
    for base in (BASE_TS, second_ts):
        for i in range(HALF):
            p = java_partition(f"k-{i}", NUM_PARTITIONS)
            expected[p].append((len(expected[p]), f"k-{i}", expected_value(i), base + i))
    got: dict[int, list[tuple[int, str, Any, int]]] = defaultdict(list)
    for r in read.of("record"):
        assert r["topic"] == topic and r["headers"] == expected_headers(int(r["key"][2:])), r
        got[r["partition"]].append((r["offset"], r["key"], r["value"], r["timestamp"]))
    assert dict(got) == dict(expected)
    # what the producer was told matches where the records are
    sent = {(e["partition"], e["offset"]) for run in (first, second) for e in run.of("sent")}
    assert sent == {(p, o) for p, recs in expected.items() for o, *_ in recs}
    _assert_isr_without(cluster, topic, leader, victim)
