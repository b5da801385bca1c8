"""The group and transaction coordinators move with their partitions when their broker dies.

Three brokers, `__consumer_offsets` and `__transaction_state` with Kafka's replication factor 3
(the test cluster's defaults), a data topic of three partitions, RF 3, min.insync.replicas 2.

Groups (kafka-python and confluent-kafka): a consumer reads part of the topic and commits
synchronously (offsets.commit.required.acks -1: the commit is acknowledged once the ISR of the
group's `__consumer_offsets` partition has it). The coordinator's broker (not the controller) is
SIGKILLed. The new leader of that partition is the new coordinator: it loaded the partition on
becoming leader and answers OffsetFetch with exactly the committed offsets. A second member
joins, the group rebalances at the new coordinator, and consumption resumes from the committed
offsets: nothing skipped, nothing before the commit read again (after it, duplicates are allowed).

Transactions (confluent-kafka): an aborted and a committed transaction, then one left open (its
records written, EndTxn not yet sent) when the transaction coordinator's broker is SIGKILLed. The
producer finds the new coordinator, which loaded the transaction (Ongoing) from its replica of
`__transaction_state`, and commits it, as Kafka does; a later transaction works as usual. A
read_committed consumer sees the committed transactions exactly, in order, and nothing aborted."""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Optional

import pytest

from tests.cluster.test_internal_topic_rf import GROUP, TRANSACTION, find_coordinator
from tests.cluster.util import FAST_EXPIRY, controller_seen_by, unique, wait_equal, wait_until

pytestmark = pytest.mark.cluster

NUM_PARTITIONS = 3
N = 300                 # records in the group test's topic
FIRST = 150             # read and committed before the coordinator dies
SESSION_MS = 10000      # the consumers' session timeout


# -- the cluster --------------------------------------------------------------------------------------

def _data_topic(cluster: Any, prefix: str) -> str:
    topic = unique(prefix)
    cluster.create_topic(topic, partitions=NUM_PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"},
                         timeout=30)
    return topic


def _coordinated_key(cluster: Any, prefix: str, key_type: int, avoid: int) -> tuple[str, int]:
    """A key (group or transactional id) whose coordinator is not broker `avoid`, and that coordinator."""
    for _ in range(50):
        key = unique(prefix)
        found: dict[str, tuple[int, int]] = {}

        def answered() -> bool:
            found["c"] = find_coordinator(cluster.broker(avoid), key, key_type)
            return found["c"][0] == 0
        wait_until(answered, 60, f"a coordinator for {key}")
        if found["c"][1] != avoid:
            return key, found["c"][1]
    raise AssertionError(f"every {prefix} key is coordinated by broker {avoid}")


def _new_coordinator(cluster: Any, key: str, key_type: int, dead: int) -> int:
    live = [b for b in sorted(cluster.brokers) if b != dead]
    found: dict[str, tuple[int, int]] = {}

    def moved() -> bool:
        found["c"] = find_coordinator(cluster.broker(live[0]), key, key_type)
        return found["c"][0] == 0 and found["c"][1] != dead
    wait_until(moved, 60, f"the coordinator of {key} moves off broker {dead}")
    return found["c"][1]


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
    try:
        for i in range(n):
            producer.send(topic, value=f"m-{i}".encode(), partition=i % NUM_PARTITIONS)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """OffsetFetch of every partition of the group, through kafka-python's admin client."""
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets({group: None})[group].items()}
    finally:
        admin.close()


def _group_state(bootstrap: str, group: str, coordinator: int) -> tuple[str, int]:
    """(state, members) as DescribeGroups to `coordinator` answers."""
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        d = admin.describe_groups([group], group_coordinator_id=coordinator)[group]
        return d["group_state"], len(d["members"])
    finally:
        admin.close()


# -- consumers of both libraries ----------------------------------------------------------------------

class _KafkaPythonMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from kafka import KafkaConsumer
        self.c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                               auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                               heartbeat_interval_ms=1000, request_timeout_ms=30000)

    def poll(self, at_most: int) -> list[tuple[int, int, bytes]]:
        out = []
        for tp, records in self.c.poll(timeout_ms=300, max_records=at_most).items():
            out.extend((tp.partition, r.offset, r.value) for r in records)
        return out

    def commit(self) -> None:
        self.c.commit()

    def close(self) -> None:
        self.c.close(autocommit=False)


class _ConfluentMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
                           "heartbeat.interval.ms": 1000})
        self.c.subscribe([topic])

    def poll(self, at_most: int) -> list[tuple[int, int, bytes]]:
        out = []
        for m in self.c.consume(num_messages=at_most, timeout=0.3):
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.value()))
        return out

    def commit(self) -> None:
        self.c.commit(asynchronous=False)

    def close(self) -> None:
        self.c.close()


MEMBERS = {"kafka-python": _KafkaPythonMember, "confluent-kafka": _ConfluentMember}


@pytest.mark.parametrize("client", sorted(MEMBERS))
def test_group_coordinator_failover(make_cluster: Any, client: str) -> None:
    # the default 6 s session: with the 3 s one, kafka-python's first member stalled before any
    # fault in 2 of 4 runs (never seen in 3 runs with 6 s; not understood yet)
    cluster = make_cluster(brokers=3)
    controller = controller_seen_by(cluster.broker(0))
    topic = _data_topic(cluster, "fo-data")
    _produce(cluster.bootstrap_servers, topic, N)
    group, coordinator = _coordinated_key(cluster, "fo-group", GROUP, avoid=controller)
    Member = MEMBERS[client]

    first = Member(cluster.bootstrap_servers, topic, group)
    second: Optional[Any] = None
    try:
        before: list[tuple[int, int, bytes]] = []
        wait_until(lambda: len(before.__iadd__(first.poll(FIRST - len(before)))) >= FIRST, 60,
                   f"{client} reads {FIRST} records")
        assert len(before) == FIRST
        committed: dict[int, int] = {}
        by_partition: dict[int, list[int]] = defaultdict(list)
        for p, offset, value in before:
            by_partition[p].append(offset)
            assert value == f"m-{offset * NUM_PARTITIONS + p}".encode()
        for p, offsets in by_partition.items():
            assert offsets == list(range(len(offsets))), f"partition {p} read in order from 0"
            committed[p] = len(offsets)
        first.commit()
        # every partition read, at the next offset to read; a partition not read yet is either
        # left out (librdkafka) or committed at its position 0 (kafka-python)
        expected_committed = _committed(cluster.bootstrap_servers, group)
        assert set(committed) <= set(expected_committed)
        assert expected_committed == {p: committed.get(p, 0) for p in expected_committed}

        cluster.broker(coordinator).kill()
        new_coordinator = _new_coordinator(cluster, group, GROUP, coordinator)
        # the new coordinator has exactly what was acknowledged
        wait_equal(lambda: _committed(cluster.bootstrap_servers, group), expected_committed, 60,
                   f"OffsetFetch of {group} at broker {new_coordinator}")

        # a second member: the group rebalances at the new coordinator; both resume from the commit
        second = Member(cluster.bootstrap_servers, topic, group)
        after: list[tuple[int, int, bytes]] = []
        ends = {p: len(range(p, N, NUM_PARTITIONS)) for p in range(NUM_PARTITIONS)}
        remaining = {(p, o) for p in range(NUM_PARTITIONS) for o in range(committed.get(p, 0), ends[p])}

        def resumed() -> bool:
            after.extend(first.poll(100))
            after.extend(second.poll(100))   # type: ignore[union-attr]
            return remaining <= {(p, o) for p, o, _ in after}
        wait_until(resumed, 90, f"{client} reads the rest of {topic} after the failover")
        wait_equal(lambda: (first.poll(100), second.poll(100),  # type: ignore[union-attr]
                            _group_state(cluster.bootstrap_servers, group, new_coordinator))[2],
                   ("Stable", 2), 60, f"{group} stable with both members at broker {new_coordinator}")
        # nothing from before the commit again, nothing skipped; duplicates only after the commit
        assert {(p, o) for p, o, _ in after} == remaining
        for p, o, value in after:
            assert value == f"m-{o * NUM_PARTITIONS + p}".encode()
    finally:
        first.close()
        if second is not None:
            second.close()


# -- transactions -------------------------------------------------------------------------------------

def _end_transaction(producer: Any) -> str:
    """commit_transaction as an application does: retried while retriable, aborted when the
    client says the transaction must abort. 'commit' or 'abort'."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + 90
    while True:
        try:
            producer.commit_transaction(30)
            return "commit"
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                producer.abort_transaction(30)
                return "abort"
            if not err.retriable() or time.monotonic() > deadline:
                raise


def _transaction(producer: Any, topic: str, prefix: str, n: int) -> list[tuple[int, bytes]]:
    producer.begin_transaction()
    sent = [(i % NUM_PARTITIONS, f"{prefix}-{i}".encode()) for i in range(n)]
    for p, value in sent:
        producer.produce(topic, value=value, partition=p)
    assert producer.flush(30) == 0
    return sent


def _read_committed(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every partition up to its last stable offset, read_committed."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("fo-reader"),
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    out: dict[int, list[bytes]] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(NUM_PARTITIONS)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < NUM_PARTITIONS:
            assert time.monotonic() < deadline, f"read_committed read {dict(out)}, at end: {at_end}"
            for m in consumer.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == m.error()._PARTITION_EOF, m.error()
                    at_end.add(m.partition())
                else:
                    out[m.partition()].append(m.value())
    finally:
        consumer.close()
    return dict(out)


def test_transaction_coordinator_failover(make_cluster: Any) -> None:
    from confluent_kafka import Producer
    cluster = make_cluster(3, FAST_EXPIRY)
    controller = controller_seen_by(cluster.broker(0))
    topic = _data_topic(cluster, "fo-txn")
    txn_id, coordinator = _coordinated_key(cluster, "fo-txn-id", TRANSACTION, avoid=controller)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(30)

    _transaction(producer, topic, "aborted", 20)
    producer.abort_transaction(30)
    committed = _transaction(producer, topic, "committed", 30)
    producer.commit_transaction(30)
    open_txn = _transaction(producer, topic, "open", 30)     # in the logs; EndTxn not sent yet

    cluster.broker(coordinator).kill()
    new_coordinator = _new_coordinator(cluster, txn_id, TRANSACTION, coordinator)
    outcome = _end_transaction(producer)
    # Kafka's new coordinator loaded the transaction as Ongoing (its AddPartitionsToTxn was in the
    # ISR of __transaction_state) and the client's EndTxn commits it
    assert (outcome, new_coordinator != coordinator) == ("commit", True)
    later = _transaction(producer, topic, "later", 12)
    producer.commit_transaction(30)

    expected: dict[int, list[bytes]] = defaultdict(list)
    for p, value in committed + (open_txn if outcome == "commit" else []) + later:
        expected[p].append(value)
    assert _read_committed(cluster.bootstrap_servers, topic) == dict(expected)
