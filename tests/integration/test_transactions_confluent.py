"""Transactions with confluent-kafka (librdkafka) against a real kafkalite broker process.

- an aborted and a committed transaction of N records each across three partitions: a
  read_committed consumer sees exactly the committed N (contents, per-partition order, offsets),
  a read_uncommitted one all 2N data records; the log holds one ABORT and one COMMIT control
  batch per partition, with Kafka's exact attributes and EndTransactionMarker key/value;
- send_offsets_to_transaction: the group's offsets appear only after commit_transaction, never
  after abort_transaction;
- zombie fencing: init_transactions() of a second producer with the same transactional.id
  fences the first, whose commit then fails with the fatal fenced error;
- timeout: a transaction left open past transaction.timeout.ms is aborted by the broker; the
  last stable offset stays at its first record until then, read_committed consumers never see its
  records but do see records written after it.

Helpers here (consume_all, control_batches, list_offsets_isolated, ...) are shared with
test_eos_loop.py.
"""
from __future__ import annotations

import struct
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.record.default_records import DefaultRecordBatch

from tests.harness import BrokerProcess
from tests.integration.util import NONE, RawClient, create_topic, wait_until

N = 30
PARTITIONS = 3
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
ATTR_TRANSACTIONAL, ATTR_CONTROL = 0x10, 0x20
# Kafka's default for the broker; tests shorten the abort check so a timed-out transaction is
# aborted within a second of its deadline rather than up to 10 s later.
TXN_BROKER_OVERRIDES = {"num.partitions": "3",
                        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
                        "group.initial.rebalance.delay.ms": "0"}


# ---- fixtures / helpers (also imported by test_eos_loop.py) ---------------------------------------

@pytest.fixture(scope="module")
def txn_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides=TXN_BROKER_OVERRIDES) as b:
        yield b


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> ck.Producer:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                            "linger.ms": 5}
    conf.update(extra)
    return ck.Producer(conf)


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]


def consume_all(bootstrap: str, topic: str, isolation: str, expect: int, timeout: float = 20.0,
                partitions: int = PARTITIONS, settle: float = 0.6) -> list[Got]:
    """Assign every partition from the beginning and read until `expect` records arrived (or the
    timeout), then keep polling `settle` seconds more: "exactly N" means nothing else shows up."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                     "enable.auto.commit": False, "isolation.level": isolation,
                     "enable.partition.eof": False})
    out: list[Got] = []
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        settle_until: Optional[float] = None
        while True:
            now = time.monotonic()
            if settle_until is None and (len(out) >= expect or now > deadline):
                settle_until = now + settle
            if settle_until is not None and now > settle_until:
                break
            for m in c.consume(500, 0.2):
                assert m.error() is None, m.error()
                out.append(Got(m.partition(), m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def by_partition(got: list[Got]) -> dict[int, list[Got]]:
    d: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        d[g.partition].append(g)
    return dict(d)


@dataclass(frozen=True)
class RawBatch:
    base_offset: int
    last_offset: int
    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[tuple[Optional[bytes], Optional[bytes]], ...]

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)


def raw_batches(bootstrap: str, topic: str, partition: int) -> list[RawBatch]:
    """Every batch of a partition as stored (read_uncommitted Fetch), attributes included."""
    out: list[RawBatch] = []
    offset = 0
    with RawClient(bootstrap) as c:
        while True:
            pd = c.fetch(topic, partition, offset)
            assert pd.error_code == NONE, pd
            data = bytes(pd.records or b"")
            if offset >= pd.high_watermark:
                return out
            pos = 0
            progressed = False
            while len(data) - pos >= 12:
                (length,) = struct.unpack_from(">i", data, pos + 8)
                end = pos + 12 + length
                if end > len(data):
                    break
                b = DefaultRecordBatch(data[pos:end])
                assert b.validate_crc(), f"{topic}-{partition}: bad CRC at {b.base_offset}"
                recs = tuple((None if r.key is None else bytes(r.key),
                              None if r.value is None else bytes(r.value)) for r in b)
                if b.last_offset >= offset:
                    out.append(RawBatch(b.base_offset, b.last_offset, b.attributes, b.producer_id,
                                        b.producer_epoch, b.base_sequence, recs))
                    offset = b.last_offset + 1
                    progressed = True
                pos = end
            assert progressed, f"{topic}-{partition}@{offset}: no whole batch below HW"


def marker(batch: RawBatch) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch; checks Kafka's exact layout:
    key = int16 version 0 + int16 type, value = int16 version 0 + int32 coordinator epoch."""
    assert batch.is_control and batch.is_transactional, hex(batch.attributes)
    assert batch.base_sequence == -1 and batch.base_offset == batch.last_offset, batch
    ((key, value),) = batch.records
    assert key is not None and value is not None and len(key) == 4 and len(value) == 6, batch
    kver, ctype = struct.unpack(">hh", key)
    vver, coord_epoch = struct.unpack(">hi", value)
    assert (kver, vver) == (0, 0), batch
    return ctype, coord_epoch


def list_offsets_isolated(bootstrap: str, topic: str, partition: int, isolation_level: int,
                          timestamp: int = -1) -> int:
    """ListOffsets(latest) with an isolation level: the high watermark (0) or the LSO (1)."""
    with RawClient(bootstrap) as c:
        v = c.version_for(ListOffsetsRequest, at_most=7)
        T = ListOffsetsRequest.ListOffsetsTopic
        resp = c.request(ListOffsetsRequest[v](
            replica_id=-1, isolation_level=isolation_level,
            topics=[T(name=topic, partitions=[T.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])],
            timeout_ms=5000))
        p = resp.topics[0].partitions[0]
        assert p.error_code == NONE, p
        return p.offset


def group_offsets(bootstrap: str, group: str, topic: str,
                  partitions: int = PARTITIONS) -> dict[int, int]:
    """The group's committed offsets through AdminClient.list_consumer_group_offsets (no
    require_stable): partition -> offset, partitions without one left out."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = [ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, p)
                                                   for p in range(partitions)])]
    res = admin.list_consumer_group_offsets(req, request_timeout=10)[group].result(15)
    out = {}
    for tp in res.topic_partitions:
        assert tp.error is None, tp.error
        if tp.offset >= 0:
            out[tp.partition] = tp.offset
    return out


def produce_txn(p: ck.Producer, topic: str, tag: str, n: int) -> None:
    for i in range(n):
        p.produce(topic, key=f"{tag}-k{i}".encode(), value=f"{tag}-{i}".encode(),
                  partition=i % PARTITIONS)


def expected_values(tag: str, n: int, partition: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n) if i % PARTITIONS == partition]


# ---- tests --------------------------------------------------------------------------------------

def test_committed_and_aborted_transactions(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap_servers
    topic = unique("txn")
    create_topic(bs, topic, PARTITIONS)
    p = txn_producer(bs, unique("tid"))
    p.init_transactions(20)

    p.begin_transaction()
    produce_txn(p, topic, "aborted", N)
    assert p.flush(20) == 0
    p.abort_transaction(20)

    p.begin_transaction()
    produce_txn(p, topic, "committed", N)
    p.commit_transaction(20)

    per_part = N // PARTITIONS  # 10 records per partition per transaction
    # read_committed: exactly the committed N, in order per partition.
    rc = consume_all(bs, topic, "read_committed", N)
    assert len(rc) == N, [g.value for g in rc]
    rc_parts = by_partition(rc)
    assert sorted(rc_parts) == list(range(PARTITIONS))
    for part, got in rc_parts.items():
        assert [g.value for g in got] == expected_values("committed", N, part)
        # Aborted data at 0..9, ABORT marker at 10, committed data at 11..20, COMMIT marker at 21.
        assert [g.offset for g in got] == list(range(per_part + 1, 2 * per_part + 1))

    # read_uncommitted: all 2N data records, no control records.
    ru = consume_all(bs, topic, "read_uncommitted", 2 * N)
    assert len(ru) == 2 * N
    for part, got in by_partition(ru).items():
        assert [g.value for g in got] == (expected_values("aborted", N, part)
                                          + expected_values("committed", N, part))
        assert [g.offset for g in got] == (list(range(per_part))
                                           + list(range(per_part + 1, 2 * per_part + 1)))

    # The log: transactional data batches of one producer, then exactly one marker each.
    for part in range(PARTITIONS):
        batches = raw_batches(bs, topic, part)
        data = [b for b in batches if not b.is_control]
        controls = [b for b in batches if b.is_control]
        assert all(b.is_transactional for b in data), [hex(b.attributes) for b in data]
        assert len({(b.producer_id, b.producer_epoch) for b in batches}) == 1
        assert [(b.base_offset, marker(b)[0]) for b in controls] == [
            (per_part, CONTROL_ABORT), (2 * per_part + 1, CONTROL_COMMIT)]
        assert controls[0].producer_id == data[0].producer_id
        assert list_offsets_isolated(bs, topic, part, 0) == 2 * per_part + 2
        assert list_offsets_isolated(bs, topic, part, 1) == 2 * per_part + 2


def test_offsets_in_transaction_appear_only_after_commit(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap_servers
    topic, src, group = unique("txo-out"), unique("txo-in"), unique("txo-group")
    create_topic(bs, topic, PARTITIONS)
    create_topic(bs, src, PARTITIONS)
    # A consumer that never joins: its group metadata carries generation -1 and no member id,
    # which TxnOffsetCommit accepts for a group without members (as OffsetCommit does).
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    p = txn_producer(bs, unique("tid"))
    try:
        p.init_transactions(20)
        meta = c.consumer_group_metadata()

        p.begin_transaction()
        produce_txn(p, topic, "x", 3)
        p.send_offsets_to_transaction([ck.TopicPartition(src, q, 100 + q)
                                       for q in range(PARTITIONS)], meta, 20)
        p.abort_transaction(20)
        assert group_offsets(bs, group, src) == {}

        p.begin_transaction()
        produce_txn(p, topic, "y", 3)
        p.send_offsets_to_transaction([ck.TopicPartition(src, q, 200 + q)
                                       for q in range(PARTITIONS)], meta, 20)
        assert p.flush(20) == 0
        # Pending in the transaction: not yet visible.
        assert group_offsets(bs, group, src) == {}
        p.commit_transaction(20)
        assert group_offsets(bs, group, src) == {q: 200 + q for q in range(PARTITIONS)}
        committed = c.committed([ck.TopicPartition(src, q) for q in range(PARTITIONS)], timeout=15)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [
            (q, 200 + q, None) for q in range(PARTITIONS)]

        # Another aborted transaction leaves the committed offsets as they were.
        p.begin_transaction()
        p.send_offsets_to_transaction([ck.TopicPartition(src, q, 300 + q)
                                       for q in range(PARTITIONS)], meta, 20)
        p.abort_transaction(20)
        assert group_offsets(bs, group, src) == {q: 200 + q for q in range(PARTITIONS)}
    finally:
        c.close()
    rc = consume_all(bs, topic, "read_committed", 3)
    assert sorted(g.value for g in rc) == [b"y-0", b"y-1", b"y-2"]


def test_second_producer_fences_the_first(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap_servers
    topic, tid = unique("fence"), unique("tid")
    create_topic(bs, topic, PARTITIONS)
    first = txn_producer(bs, tid)
    first.init_transactions(20)
    first.begin_transaction()
    produce_txn(first, topic, "zombie", 3)
    assert first.flush(20) == 0

    second = txn_producer(bs, tid)
    second.init_transactions(30)  # aborts the first's open transaction, bumps the epoch

    errors: list[ck.KafkaError] = []
    first.produce(topic, value=b"zombie-late", partition=0,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    with pytest.raises(ck.KafkaException) as exc:
        first.commit_transaction(20)
    err = exc.value.args[0]
    assert err.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED), err
    assert err.fatal(), err

    second.begin_transaction()
    produce_txn(second, topic, "live", 3)
    second.commit_transaction(20)
    rc = consume_all(bs, topic, "read_committed", 3)
    assert sorted(g.value for g in rc) == [b"live-0", b"live-1", b"live-2"]
    ru = consume_all(bs, topic, "read_uncommitted", 6)
    assert sorted(g.value for g in ru) == sorted([b"live-0", b"live-1", b"live-2",
                                                  b"zombie-0", b"zombie-1", b"zombie-2"])
    # Per partition: zombie data, ABORT (written for the fencing), live data, COMMIT.
    for part in range(PARTITIONS):
        batches = raw_batches(bs, topic, part)
        assert [marker(b)[0] if b.is_control else "data" for b in batches] == [
            "data", CONTROL_ABORT, "data", CONTROL_COMMIT]
        zombie_epoch, live_epoch = batches[0].producer_epoch, batches[2].producer_epoch
        assert batches[0].producer_id == batches[2].producer_id
        assert live_epoch > zombie_epoch
        # The fencing abort is written with the bumped epoch.
        assert batches[1].producer_epoch > zombie_epoch


def test_timed_out_transaction_is_aborted_by_the_broker(txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap_servers
    topic = unique("txn-timeout")
    create_topic(bs, topic, PARTITIONS)
    p = txn_producer(bs, unique("tid"), **{"transaction.timeout.ms": 4000})
    p.init_transactions(20)
    # Taken before the transaction starts on the broker (its first AddPartitionsToTxn), so
    # "less than 3.5 s since `began`" means the 4 s timeout cannot have expired yet.
    began = time.monotonic()
    p.begin_transaction()
    produce_txn(p, topic, "late", 3)
    assert p.flush(20) == 0

    # Records written after the open transaction by a plain producer.
    plain = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for part in range(PARTITIONS):
        plain.produce(topic, value=f"after-{part}".encode(), partition=part)
    assert plain.flush(20) == 0
    # While the transaction is open, the LSO is held at its first record.
    for part in range(PARTITIONS):
        assert list_offsets_isolated(bs, topic, part, 0) == 2
        if time.monotonic() - began < 3.5:
            assert list_offsets_isolated(bs, topic, part, 1) == 0

    # The broker aborts it after transaction.timeout.ms: the LSO moves past the marker.
    wait_until(lambda: all(list_offsets_isolated(bs, topic, q, 1) == 3 for q in range(PARTITIONS)),
               timeout=15, what="LSO past the broker's ABORT marker")
    rc = consume_all(bs, topic, "read_committed", 3)
    assert sorted(g.value for g in rc) == [b"after-0", b"after-1", b"after-2"]
    for part in range(PARTITIONS):
        batches = raw_batches(bs, topic, part)
        assert [marker(b)[0] if b.is_control else b.records[0][1] for b in batches] == [
            f"late-{part}".encode(), f"after-{part}".encode(), CONTROL_ABORT]

    # The producer learns it when it tries to commit.
    with pytest.raises(ck.KafkaException) as exc:
        p.commit_transaction(20)
    err = exc.value.args[0]
    assert err.fatal() or err.txn_requires_abort(), err
    if err.txn_requires_abort():
        p.abort_transaction(20)
    rc = consume_all(bs, topic, "read_committed", 3)
    assert sorted(g.value for g in rc) == [b"after-0", b"after-1", b"after-2"]
