"""Transactions across brokers: the partitions of a transaction are led by other brokers than
its coordinator (the leader of the transactional id's `__transaction_state` partition).

Three brokers, a topic of three partitions each led by a different broker (explicit replica
assignment, RF 1), `__transaction_state` of one partition (RF 1) so that one broker coordinates
every transactional id. What is checked, as Kafka 3.9 behaves:
- the coordinator writes the COMMIT/ABORT markers to the leaders over WriteTxnMarkers (its own
  partition directly): every partition holds the markers, its last stable offset reaches the
  high watermark, and read_committed consumers (confluent-kafka, kafka-python) see exactly the
  committed records, in order;
- a leader that is not the coordinator verifies a transactional producer's first batch with the
  coordinator over AddPartitionsToTxn (verify_only): a zombie (fenced epoch) gets
  INVALID_PRODUCER_EPOCH, a partition never added to the transaction INVALID_TXN_STATE (Produce
  v9), and neither opens a transaction on the partition;
- transactional offsets committed into a group whose coordinator is a third broker become
  visible once the transaction commits (the marker reaches that broker's `__consumer_offsets`).
The coordinator killed mid-transaction (RF 3, a new coordinator completes it) needs replication.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

import confluent_kafka as ck
import pytest
from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.cluster.util import FAST_EXPIRY, create_topic_with_assignment, partitions, wait_equal, wait_until
from tests.integration.test_transactions_confluent import group_offsets
from tests.integration.test_txn_coordinator import add_partitions, end_txn, init_ok, markers, produce_txn
from tests.integration.util import RawClient

pytestmark = pytest.mark.cluster

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
COMMIT, ABORT = 1, 0            # control record types
PER_PARTITION = 4

OVERRIDES = {"transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 1,
             "transaction.state.log.min.isr": 1, "offsets.topic.num.partitions": 3,
             "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0,
             "auto.create.topics.enable": "false"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Setup:
    """The started cluster, the transaction coordinator's broker, a topic whose partition p is
    led by broker p."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.clients: dict[int, RawClient] = {}
        self.coordinator = self.find_coordinator(unique("probe"), key_type=1)
        self.topic = unique("txn")
        assert create_topic_with_assignment(cluster.broker(0), self.topic, {p: [p] for p in range(3)}) == NONE
        wait_until(lambda: all({p: s[1] for p, s in partitions(cluster.broker(b), self.topic).items()}
                               == {0: 0, 1: 1, 2: 2} for b in range(3)),
                   30, "every broker knows the leaders of the topic")

    def client(self, broker_id: int) -> RawClient:
        if broker_id not in self.clients:
            self.clients[broker_id] = RawClient(self.cluster.broker(broker_id).bootstrap_servers)
        return self.clients[broker_id]

    def find_coordinator(self, key: str, key_type: int) -> int:
        """The coordinator's broker id (the internal topic is created by the first asks)."""
        found: list[int] = []

        def ask() -> bool:
            r = self.client(0).request(FindCoordinatorRequest[3](key=key, key_type=key_type))
            if r.error_code == NONE:
                found.append(r.node_id)
            return r.error_code == NONE
        wait_until(ask, 30, f"a coordinator for {key!r}")
        return found[-1]

    def offsets(self, partition: int, isolation: int) -> int:
        T = ListOffsetsRequest.ListOffsetsTopic
        r = self.client(partition).request(ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation, topics=[
            T(name=self.topic, partitions=[T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                                  timestamp=-1)])]))
        p = r.topics[0].partitions[0]
        assert p.error_code == NONE, p
        return p.offset

    def wait_stable(self) -> None:
        """Every partition's last stable offset reaches its high watermark (markers all in)."""
        wait_until(lambda: all(self.offsets(p, 1) == self.offsets(p, 0) for p in range(3)), 30,
                   "LSO == HW on every partition")

    def control_types(self, partition: int) -> list[tuple[int, int]]:
        """(producer id, control type) of the partition's markers, in log order."""
        return [(pid, ctype) for pid, _epoch, ctype, _ce in markers(self.client(partition), self.topic, partition)]

    def producer_ids(self, partition: int) -> list[int]:
        T = DescribeProducersRequest.TopicRequest
        r = self.client(partition).request(DescribeProducersRequest[0](
            topics=[T(name=self.topic, partition_indexes=[partition])]))
        (p,) = r.topics[0].partitions
        assert p.error_code == NONE, p
        return [a.producer_id for a in p.active_producers]

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@pytest.fixture
def setup(make_cluster: Callable[..., Any]) -> Iterator[Setup]:
    s = Setup(make_cluster(3, OVERRIDES))
    try:
        yield s
    finally:
        s.close()


def values(tag: str, partition: int) -> list[bytes]:
    return [f"{tag}-{partition}-{i}".encode() for i in range(PER_PARTITION)]


def read_committed_confluent(bootstrap: str, topic: str, expected: dict[int, int], timeout: float = 30.0
                             ) -> dict[int, list[bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rc"), "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    got: dict[int, list[bytes]] = {p: [] for p in expected}
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in expected])
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in expected.items()) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append(m.value())
    finally:
        c.close()
    return got


def read_committed_kafka_python(bootstrap: str, topic: str, expected: dict[int, int], timeout: float = 30.0
                                ) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      isolation_level="read_committed", consumer_timeout_ms=500)
    got: dict[int, list[bytes]] = {p: [] for p in expected}
    try:
        c.assign([KTP(topic, p) for p in expected])
        c.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in expected.items()) and time.monotonic() < deadline:
            for tp, records in c.poll(timeout_ms=500).items():
                got[tp.partition].extend(r.value for r in records)
    finally:
        c.close()
    return got


def check_committed(setup: Setup, expected: dict[int, list[bytes]],
                    control: list[int], read: Callable[..., dict[int, list[bytes]]]) -> None:
    setup.wait_stable()
    producer_id = setup.producer_ids(0)[0]
    for p in range(3):
        assert setup.producer_ids(p) == [producer_id]
        assert [t for pid, t in setup.control_types(p) if pid == producer_id] == control, p
        # control batches and records of aborted transactions take offsets too
        assert setup.offsets(p, 1) == setup.offsets(p, 0)
    got = read(setup.cluster.bootstrap_servers, setup.topic, {p: len(v) for p, v in expected.items()})
    assert got == expected


def test_confluent_commit_and_abort_across_brokers(setup: Setup) -> None:
    bootstrap = setup.cluster.bootstrap_servers
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tid"), "linger.ms": 5})
    producer.init_transactions(30)
    for tag, commit in (("c1", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        for p in range(3):
            for v in values(tag, p):
                producer.produce(setup.topic, value=v, partition=p)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    check_committed(setup, {p: values("c1", p) + values("c2", p) for p in range(3)},
                    [COMMIT, ABORT, COMMIT], read_committed_confluent)


def test_kafka_python_commit_abort_and_offsets_on_a_third_broker(setup: Setup) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition as KTP
    # a group whose coordinator is not the transaction coordinator
    group = next(g for g in (unique("grp") for _ in range(50))
                 if setup.find_coordinator(g, key_type=0) != setup.coordinator)
    bootstrap = setup.cluster.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("tid"), linger_ms=5)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for p in range(3):
            for v in values("c1", p):
                producer.send(setup.topic, value=v, partition=p)
        producer.send_offsets_to_transaction({KTP(setup.topic, p): OffsetAndMetadata(10 + p, "", -1)
                                              for p in range(3)}, group)
        producer.flush()
        # pending in the transaction: not visible
        assert group_offsets(bootstrap, group, setup.topic, 3) == {}
        producer.commit_transaction()
        wait_until(lambda: group_offsets(bootstrap, group, setup.topic, 3) == {p: 10 + p for p in range(3)}, 30,
                   "the transactional offsets visible after the commit")

        producer.begin_transaction()
        for p in range(3):
            for v in values("a1", p):
                producer.send(setup.topic, value=v, partition=p)
        producer.send_offsets_to_transaction({KTP(setup.topic, p): OffsetAndMetadata(20 + p, "", -1)
                                              for p in range(3)}, group)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        for p in range(3):
            for v in values("c2", p):
                producer.send(setup.topic, value=v, partition=p)
        producer.commit_transaction()
    finally:
        producer.close()
    check_committed(setup, {p: values("c1", p) + values("c2", p) for p in range(3)},
                    [COMMIT, ABORT, COMMIT], read_committed_kafka_python)
    assert group_offsets(bootstrap, group, setup.topic, 3) == {p: 10 + p for p in range(3)}


def test_verification_with_a_remote_coordinator(setup: Setup) -> None:
    coordinator = setup.client(setup.coordinator)
    # partitions led by the two other brokers
    first, second = [p for p in range(3) if p != setup.coordinator]
    tid = unique("tid")
    pid, zombie_epoch = init_ok(coordinator, tid)
    assert add_partitions(coordinator, tid, pid, zombie_epoch, {setup.topic: [first]}) == {(setup.topic, first): NONE}
    assert produce_txn(setup.client(first), tid, setup.topic, first, pid, zombie_epoch, 0, 2).error_code == NONE

    # a new producer instance fences the first (its open transaction is aborted)
    _, epoch = init_ok(coordinator, tid)
    assert epoch > zombie_epoch
    setup.wait_stable()
    # the zombie writes to a partition it never wrote to: without verification this would open
    # a transaction no marker ever ends
    r = produce_txn(setup.client(second), tid, setup.topic, second, pid, zombie_epoch, 2, 1)
    assert r.error_code == INVALID_PRODUCER_EPOCH
    # the current producer, on a partition not added to its transaction
    r = produce_txn(setup.client(second), tid, setup.topic, second, pid, epoch, 0, 1)
    assert (r.error_code, r.error_message) == (INVALID_TXN_STATE, "Partition was not added to the transaction")
    assert setup.offsets(second, 1) == setup.offsets(second, 0) == 0

    # added, it is accepted; the commit marker ends it
    assert add_partitions(coordinator, tid, pid, epoch, {setup.topic: [second]}) == {(setup.topic, second): NONE}
    assert produce_txn(setup.client(second), tid, setup.topic, second, pid, epoch, 0, 3).error_code == NONE
    assert setup.offsets(second, 1) == 0
    assert end_txn(coordinator, tid, pid, epoch, True) == NONE
    setup.wait_stable()
    assert setup.control_types(first) == [(pid, ABORT)]
    assert setup.control_types(second) == [(pid, COMMIT)]
    assert setup.offsets(second, 0) == 4


# -- the coordinator killed mid-transaction (needs replication: RF 3) -----------------------------

RF3_OVERRIDES = {**OVERRIDES, "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
                 "offsets.topic.replication.factor": 3}


def leader_of(broker: Any, topic: str, partition: int) -> int:
    return partitions(broker, topic)[partition][1]


def run_killing(make_cluster: Callable[..., Any], victim: Callable[[int], int], before_commit: bool) -> None:
    """A transaction over an RF 3 topic (partition p led by broker p) with `victim(coordinator)`
    SIGKILLed right before the commit or right after it was acknowledged; the transaction ends
    committed: every partition holds its records and one COMMIT marker, stable, and
    read_committed sees everything."""
    cluster = make_cluster(3, {**RF3_OVERRIDES, **FAST_EXPIRY})
    s = Setup.__new__(Setup)      # the same helpers, another topic layout
    s.cluster, s.clients = cluster, {}
    s.coordinator = s.find_coordinator(unique("probe"), key_type=1)
    s.topic = unique("txn3")
    assert create_topic_with_assignment(cluster.broker(0), s.topic,
                                        {p: [p, (p + 1) % 3, (p + 2) % 3] for p in range(3)}) == NONE
    wait_until(lambda: all(sorted(x[4]) == [0, 1, 2] for x in partitions(cluster.broker(0), s.topic).values()), 30,
               "every replica in sync")
    dead = victim(s.coordinator)
    survivor = next(b for b in range(3) if b != dead)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": unique("tid"),
                            "linger.ms": 5, "transaction.timeout.ms": 120_000})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        for p in range(3):
            for v in values("k", p):
                producer.produce(s.topic, value=v, partition=p)
        assert producer.flush(30) == 0
        if before_commit:
            cluster.broker(dead).kill()
        producer.commit_transaction(90)
        if not before_commit:
            cluster.broker(dead).kill()
    finally:
        s.close()
    survivor_broker = cluster.broker(survivor)
    wait_until(lambda: all(leader_of(survivor_broker, s.topic, p) not in (-1, dead) for p in range(3)),
               60, "new leaders for the dead broker's partitions")

    def stable() -> list[tuple[bool, list[int]]]:
        """Per partition: LSO == HW, and the control types of its markers."""
        out = []
        for p in range(3):
            with RawClient(cluster.broker(leader_of(survivor_broker, s.topic, p)).bootstrap_servers) as c:
                T = ListOffsetsRequest.ListOffsetsTopic
                hw, lso = [c.request(ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation, topics=[
                    T(name=s.topic, partitions=[T.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=-1)])])).topics[0].partitions[0].offset
                           for isolation in (0, 1)]
                # a marker retried after a timed-out request may be written twice, as in Kafka
                out.append((hw == lso, sorted(set(t for _pid, _e, t, _ce in markers(c, s.topic, p)))))
        return out
    wait_equal(stable, [(True, [COMMIT])] * 3, 90, "every partition stable past its COMMIT marker")
    alive = ",".join(cluster.broker(b).bootstrap_servers for b in range(3) if b != dead)
    got = read_committed_confluent(alive, s.topic, {p: PER_PARTITION for p in range(3)})
    assert got == {p: values("k", p) for p in range(3)}


def test_coordinator_sigkill_mid_transaction(make_cluster: Callable[..., Any]) -> None:
    """The transaction's coordinator is SIGKILLed after the records are in (acks=all, RF 3); the
    controller moves `__transaction_state` (and the dead broker's data partition) to another
    replica once the broker's ZooKeeper session expires, the new coordinator loads the ongoing
    transaction, and the producer's commit goes through it. Needs issue 12's replication
    (follower fetch, HW over the ISR)."""
    run_killing(make_cluster, lambda coordinator: coordinator, before_commit=True)


def test_partition_leader_sigkill_after_the_commit(make_cluster: Callable[..., Any]) -> None:
    """A data partition's leader (not the coordinator) is SIGKILLed once the commit is
    acknowledged, while its marker may still be on the way: the coordinator retries it until the
    controller names a new leader (Kafka re-enqueues markers of a disconnected destination with
    the partition's current leader), which takes it. Needs replication too."""
    run_killing(make_cluster, lambda coordinator: (coordinator + 1) % 3, before_commit=False)
