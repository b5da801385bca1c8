"""read_committed against real consumers: transactions written over a raw socket (InitProducerId,
AddPartitionsToTxn, transactional Produce, EndTxn: the broker writes the markers), interleaved on
the same partitions, committed, aborted and one left open; then confluent-kafka and kafka-python
consumers with isolation.level read_committed see exactly the committed records below the last
stable offset — never an aborted record, never a control record — and read_uncommitted ones see
every data record. Ending the open transaction releases what it held back."""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator, Optional

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, TopicPartition as KTopicPartition
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                                     ProduceRequest)

from kafkalite.log.record_batch import build_batch
from tests.harness import BrokerProcess
from tests.integration.util import RawClient, create_topic, wait_until

NONE = 0
RETRIABLE = {14, 15, 16, 51}   # COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
NOW = int(time.time() * 1000)


@pytest.fixture(scope="module")
def rc_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides={"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
                                  "transaction.state.log.replication.factor": "1",
                                  "transaction.state.log.min.isr": "1",
                                  "group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def retry(call: Callable[[], tuple[int, Any]], what: str) -> Any:
    out: list[Any] = []

    def attempt() -> bool:
        err, value = call()
        if err in RETRIABLE:
            return False
        assert err == NONE, f"{what}: error {err}"
        out.append(value)
        return True
    wait_until(attempt, 20, interval=0.05, what=what)
    return out[0]


class RawTxnProducer:
    """A transactional producer spoken over the protocol by hand."""

    def __init__(self, c: RawClient, transactional_id: str) -> None:
        self.c = c
        self.tid = transactional_id
        retry(lambda: (lambda r: (r.error_code, r))(c.request(FindCoordinatorRequest[3](key=transactional_id, key_type=1))),
              "FindCoordinator(TRANSACTION)")
        r = retry(lambda: (lambda r: (r.error_code, r))(c.request(InitProducerIdRequest[2](
            transactional_id=transactional_id, transaction_timeout_ms=60_000))), "InitProducerId")
        self.pid, self.epoch = r.producer_id, r.producer_epoch
        self.seq: dict[tuple[str, int], int] = {}
        self.added: set[tuple[str, int]] = set()

    def send(self, topic: str, partition: int, values: list[bytes]) -> int:
        tp = (topic, partition)
        if tp not in self.added:
            T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

            def add() -> tuple[int, Any]:
                r = self.c.request(AddPartitionsToTxnRequest[3](
                    v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
                    v3_and_below_producer_epoch=self.epoch, v3_and_below_topics=[T(name=topic, partitions=[partition])]))
                return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code, r
            retry(add, "AddPartitionsToTxn")
            self.added.add(tp)
        seq = self.seq.get(tp, 0)
        batch = build_batch([(None, v, NOW) for v in values], producer_id=self.pid, producer_epoch=self.epoch,
                            base_sequence=seq, transactional=True)
        self.seq[tp] = seq + len(values)
        P = ProduceRequest.TopicProduceData
        r = self.c.request(ProduceRequest[9](transactional_id=self.tid, acks=-1, timeout_ms=10_000, topic_data=[
            P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=batch)])]))
        pr = r.responses[0].partition_responses[0]
        assert pr.error_code == NONE, pr
        return pr.base_offset

    def end(self, commit: bool) -> None:
        retry(lambda: (lambda r: (r.error_code, r))(self.c.request(EndTxnRequest[2](
            transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch, committed=commit))),
            "EndTxn")
        self.added.clear()


def produce_plain(c: RawClient, topic: str, partition: int, values: list[bytes]) -> None:
    r = c.produce(topic, partition, build_batch([(None, v, NOW) for v in values]))
    assert r.error_code == NONE, r


def latest(c: RawClient, topic: str, partition: int, isolation: int) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    r = c.request(ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation, topics=[T(
        name=topic, partitions=[T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                        timestamp=-1)])]))
    p = r.topics[0].partitions[0]
    assert p.error_code == NONE
    return p.offset


def vals(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


class ConfluentReader:
    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        self.c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + uuid.uuid4().hex[:8],
                              "enable.auto.commit": False, "isolation.level": isolation,
                              "auto.offset.reset": "earliest"})
        self.c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in (0, 1)])
        self.got: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}

    def read_until(self, counts: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
        def enough() -> bool:
            m = self.c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                self.got[m.partition()].append((m.offset(), m.value()))
            return all(len(self.got[p]) >= n for p, n in counts.items())
        wait_until(enough, 30, interval=0, what=f"confluent consumer to read {counts}")
        for _ in range(5):     # nothing more arrives
            m = self.c.poll(0.2)
            assert m is None or m.error() is not None, (m.partition(), m.offset(), m.value())
        return self.got


class KafkaPythonReader:
    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        self.c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                               group_id=None, auto_offset_reset="earliest")
        self.c.assign([KTopicPartition(topic, 0), KTopicPartition(topic, 1)])
        self.c.seek_to_beginning()
        self.got: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}

    def read_until(self, counts: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
        def enough() -> bool:
            for tp, msgs in self.c.poll(timeout_ms=200).items():
                self.got[tp.partition] += [(m.offset, m.value) for m in msgs]
            return all(len(self.got[p]) >= n for p, n in counts.items())
        wait_until(enough, 30, interval=0, what=f"kafka-python consumer to read {counts}")
        for _ in range(5):
            extra = self.c.poll(timeout_ms=200)
            assert not extra, extra
        return self.got


def values_of(got: dict[int, list[tuple[int, bytes]]]) -> dict[int, list[bytes]]:
    return {p: [v for _o, v in recs] for p, recs in got.items()}


def test_read_committed_and_uncommitted_consumers(rc_broker: BrokerProcess) -> None:
    bootstrap = rc_broker.bootstrap_servers
    topic = "rc-" + uuid.uuid4().hex[:10]
    create_topic(bootstrap, topic, num_partitions=2)
    with RawClient(bootstrap) as c:
        produce_plain(c, topic, 0, vals("plain", 3))                       # p0: 0-2
        a = RawTxnProducer(c, "rc-a-" + topic)
        a.send(topic, 0, vals("A0", 2))                                    # p0: 3-4
        a.send(topic, 1, vals("A1", 3))                                    # p1: 0-2
        a.end(commit=True)                                                 # markers p0: 5, p1: 3
        b = RawTxnProducer(c, "rc-b-" + topic)
        cc = RawTxnProducer(c, "rc-c-" + topic)
        b.send(topic, 0, vals("B0", 3))                                    # p0: 6-8
        cc.send(topic, 0, vals("C0", 2))                                   # p0: 9-10
        b.send(topic, 1, vals("B1", 2))                                    # p1: 4-5
        b.end(commit=False)                                                # p0: 11, p1: 6
        cc.end(commit=True)                                                # p0: 12
        a.send(topic, 1, vals("A1b", 2))                                   # p1: 7-8
        a.end(commit=False)                                                # p1: 9
        e = RawTxnProducer(c, "rc-e-" + topic)
        assert e.send(topic, 0, vals("E0", 2)) == 13                       # p0: 13-14, left open
        f = RawTxnProducer(c, "rc-f-" + topic)
        f.send(topic, 0, vals("F0", 1))                                    # p0: 15
        f.send(topic, 1, vals("F1", 1))                                    # p1: 10
        f.end(commit=True)                                                 # p0: 16, p1: 11
        # p0's LSO is the open transaction's first offset; p1 is all decided
        assert (latest(c, topic, 0, 0), latest(c, topic, 0, 1)) == (17, 13)
        assert (latest(c, topic, 1, 0), latest(c, topic, 1, 1)) == (12, 12)

        committed = {0: vals("plain", 3) + vals("A0", 2) + vals("C0", 2), 1: vals("A1", 3) + vals("F1", 1)}
        everything = {0: vals("plain", 3) + vals("A0", 2) + vals("B0", 3) + vals("C0", 2) + vals("E0", 2)
                      + vals("F0", 1),
                      1: vals("A1", 3) + vals("B1", 2) + vals("A1b", 2) + vals("F1", 1)}
        readers = [ConfluentReader(bootstrap, topic, "read_committed"),
                   KafkaPythonReader(bootstrap, topic, "read_committed")]
        uncommitted = [ConfluentReader(bootstrap, topic, "read_uncommitted"),
                       KafkaPythonReader(bootstrap, topic, "read_uncommitted")]
        try:
            for r in readers:
                got = r.read_until({0: 7, 1: 4})
                assert values_of(got) == committed, type(r).__name__
                assert [o for o, _v in got[0]] == [0, 1, 2, 3, 4, 9, 10]
                assert [o for o, _v in got[1]] == [0, 1, 2, 10]
            for r in uncommitted:
                got = r.read_until({0: 13, 1: 8})
                assert values_of(got) == everything, type(r).__name__
                assert [o for o, _v in got[0]] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 13, 14, 15]

            # the open transaction commits: its records and what it held back become visible
            e.end(commit=True)                                             # p0: 17
            assert latest(c, topic, 0, 1) == 18
            for r in readers:
                got = r.read_until({0: 10, 1: 4})
                assert values_of(got) == {0: committed[0] + vals("E0", 2) + vals("F0", 1), 1: committed[1]}
                assert [o for o, _v in got[0]][7:] == [13, 14, 15]
        finally:
            for r in readers + uncommitted:
                r.c.close()


def test_read_committed_incremental_fetch_session(rc_broker: BrokerProcess) -> None:
    """KIP-227 sessions with isolation_level=1: a partition is sent again when its data, HW or LSO
    moves, with the aborted transactions of what it returns."""
    from kafka.protocol.consumer import FetchRequest

    from kafkalite.log.record_batch import split_batches

    bootstrap = rc_broker.bootstrap_servers
    topic = "rcs-" + uuid.uuid4().hex[:10]
    create_topic(bootstrap, topic, num_partitions=1)
    T = FetchRequest.FetchTopic

    def fetch(c: RawClient, session_id: int, epoch: int, offset: Optional[int]) -> Any:
        topics = [] if offset is None else [T(topic=topic, partitions=[T.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20)])]
        r = c.request(FetchRequest[12](cluster_id=None, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                       isolation_level=1, session_id=session_id, session_epoch=epoch, topics=topics,
                                       forgotten_topics_data=[], rack_id=""))
        assert r.error_code == NONE, r
        return r

    def part(r: Any) -> Optional[tuple[int, int, Optional[list[tuple[int, int]]], list[tuple[int, int, bool]]]]:
        """(HW, LSO, aborted, [(base offset, last offset, control)]) or None if not in the response."""
        if not r.responses:
            return None
        p = r.responses[0].partitions[0]
        found, _ = split_batches(p.records or b"")
        batches = [(h.base_offset, h.last_offset, h.is_control) for _pos, h in found]
        aborted = None if p.aborted_transactions is None else [(a.producer_id, a.first_offset)
                                                                 for a in p.aborted_transactions]
        return p.high_watermark, p.last_stable_offset, aborted, batches

    with RawClient(bootstrap) as c:
        first = fetch(c, 0, 0, 0)
        sid = first.session_id
        assert sid != 0 and part(first) == (0, 0, [], [])
        producer = RawTxnProducer(c, "rcs-" + topic)
        producer.send(topic, 0, vals("x", 2))                       # 0-1, open: HW 2, LSO 0
        assert part(fetch(c, sid, 1, None)) == (2, 0, [], [])
        assert part(fetch(c, sid, 2, None)) is None                 # nothing moved
        producer.end(commit=True)                                   # marker 2
        assert part(fetch(c, sid, 3, None)) == (3, 3, [], [(0, 1, False), (2, 2, True)])
        producer.send(topic, 0, vals("y", 1))                       # 3
        producer.end(commit=False)                                  # marker 4
        assert part(fetch(c, sid, 4, 3)) == (5, 5, [(producer.pid, 3)], [(3, 3, False), (4, 4, True)])
        assert part(fetch(c, sid, 5, 5)) is None
