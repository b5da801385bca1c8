"""Group consumers of kafka-python polling with a timeout shorter than a JoinGroup + SyncGroup
round trip, as many tests here do on a loaded machine: every one is assigned all partitions and
reads every record. Without tests/support/kafka_python_join_fix.py (applied by tests/conftest.py)
kafka-python 3.0.12 lost the join of a leader that rejoined for new metadata and never consumed
(4 of 5 consumers here read nothing for 15 s); the module says why."""
from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.coordinator.consumer import ConsumerCoordinator

from tests.harness import BrokerProcess
from tests.integration.util import wait_until

PARTITIONS = 3
RECORDS = 30


def test_fix_is_applied_to_this_kafka_python() -> None:
    assert getattr(ConsumerCoordinator.need_rejoin, "_kafkalite_join_fix", False) is True


def test_consumers_polling_for_one_millisecond_join_and_read_everything(broker: BrokerProcess,
                                                                        topic_name: str) -> None:
    bs = broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bs)
    for i in range(RECORDS):
        producer.send(topic_name, value=f"v{i}".encode(), partition=i % PARTITIONS)
    producer.flush(10)
    producer.close()
    expected = {p: [f"v{i}".encode() for i in range(p, RECORDS, PARTITIONS)] for p in range(PARTITIONS)}
    for trial in range(5):
        # subscribed before the topic's metadata is known: the first assignment is empty and the
        # leader rejoins once the metadata arrives, the case kafka-python 3.0.12 lost
        consumer = KafkaConsumer(topic_name, bootstrap_servers=bs, group_id=f"{topic_name}-g{trial}",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=6000, heartbeat_interval_ms=500)
        try:
            got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}

            def read_all() -> bool:
                for tp, records in consumer.poll(timeout_ms=1).items():
                    got[tp.partition].extend(r.value for r in records)
                return sum(map(len, got.values())) >= RECORDS
            wait_until(read_all, 30, interval=0, what=f"consumer {trial} reads {RECORDS} records")
            assert got == expected
            assert consumer.assignment() == {TopicPartition(topic_name, p) for p in range(PARTITIONS)}
        finally:
            consumer.close(autocommit=False)
