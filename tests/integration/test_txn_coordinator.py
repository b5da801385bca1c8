"""The transaction coordinator over the raw protocol against a real broker process:
FindCoordinator(TRANSACTION), InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, DescribeTransactions, ListTransactions; fencing, timeouts, restart."""
from __future__ import annotations

import struct
import time
import uuid
from typing import Any, Iterator, Optional

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                     InitProducerIdRequest, ProduceRequest, WriteTxnMarkersRequest)
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, create_topic, wait_for_topic, wait_until

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_AVAILABLE = 15
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120

NUM_TXN_PARTITIONS = 5
MAX_TIMEOUT_MS = 60_000
OVERRIDES = {"transaction.state.log.num.partitions": str(NUM_TXN_PARTITIONS),
             "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
             "num.partitions": "2"}


@pytest.fixture(scope="module")
def txn_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides=OVERRIDES) as b:
        yield b


@pytest.fixture
def client(txn_broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(txn_broker.bootstrap_servers) as c:
        ensure_txn_topic(c)
        yield c


def tid() -> str:
    return "txn-" + uuid.uuid4().hex[:10]


# -- requests ----------------------------------------------------------------------------------------

def find_txn_coordinator(c: RawClient, key: str, version: int = 3) -> Any:
    return c.request(FindCoordinatorRequest[version](key=key, key_type=1))


def ensure_txn_topic(c: RawClient) -> None:
    def ready() -> bool:
        return find_txn_coordinator(c, "probe").error_code == NONE
    wait_until(ready, what="__transaction_state coordinator")


def init_pid(c: RawClient, txn_id: Optional[str], timeout_ms: int = 30_000, version: int = 4,
             producer_id: int = -1, producer_epoch: int = -1) -> Any:
    kw: dict[str, Any] = dict(transactional_id=txn_id, transaction_timeout_ms=timeout_ms)
    if version >= 3:
        kw.update(producer_id=producer_id, producer_epoch=producer_epoch)
    return c.request(InitProducerIdRequest[version](**kw))


def init_ok(c: RawClient, txn_id: str, timeout_ms: int = 30_000) -> tuple[int, int]:
    """InitProducerId, retrying CONCURRENT_TRANSACTIONS / LOAD_IN_PROGRESS as clients do."""
    def attempt() -> Optional[Any]:
        r = init_pid(c, txn_id, timeout_ms)
        if r.error_code in (CONCURRENT_TRANSACTIONS, 14):
            return None
        return r
    r = wait_until(attempt, what=f"InitProducerId {txn_id}")
    assert r.error_code == NONE, r
    return r.producer_id, r.producer_epoch


def add_partitions(c: RawClient, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]],
                   version: int = 3) -> dict[tuple[str, int], int]:
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    resp = c.request(AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in parts.items()]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(c: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return c.request(EndTxnRequest[version](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                            committed=commit)).error_code


def describe(c: RawClient, *txn_ids: str) -> list[Any]:
    return c.request(DescribeTransactionsRequest[0](transactional_ids=list(txn_ids))).transaction_states


def wait_state(c: RawClient, txn_id: str, state: str, timeout: float = 10.0) -> Any:
    def ok() -> Optional[Any]:
        d = describe(c, txn_id)[0]
        return d if d.error_code == NONE and d.transaction_state == state else None
    return wait_until(ok, timeout, what=f"{txn_id} in state {state}")


def produce_txn(c: RawClient, txn_id: str, topic: str, partition: int, pid: int, epoch: int, seq: int,
                n: int) -> Any:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, now, f"k{i}".encode(), f"v{seq + i}".encode(), [])
    P = ProduceRequest.TopicProduceData
    resp = c.request(ProduceRequest[9](
        transactional_id=txn_id, acks=-1, timeout_ms=10_000,
        topic_data=[P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=bytes(b.build()))])]))
    return resp.responses[0].partition_responses[0]


def batches(c: RawClient, topic: str, partition: int) -> list[DefaultRecordBatch]:
    """Every batch of the partition (read_uncommitted, up to the high watermark)."""
    pd = c.fetch(topic, partition, 0)
    assert pd.error_code == NONE, pd
    data, out, pos = bytes(pd.records or b""), [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(DefaultRecordBatch(data[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def markers(c: RawClient, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
    """(producer id, producer epoch, control type, coordinator epoch) of each control batch."""
    out = []
    for b in batches(c, topic, partition):
        if b.is_control_batch:
            assert b.is_transactional
            (rec,) = list(b)
            version, ctype = struct.unpack(">hh", bytes(rec.key))
            vversion, coordinator_epoch = struct.unpack(">hi", bytes(rec.value))
            assert (version, vversion) == (0, 0)
            out.append((b.producer_id, b.producer_epoch, ctype, coordinator_epoch))
    return out


# -- tests -------------------------------------------------------------------------------------------

def test_find_coordinator_creates_transaction_state_topic(tmp_path) -> None:
    with BrokerProcess(log_dir=tmp_path / "logs", overrides=OVERRIDES) as b, \
            RawClient(b.bootstrap_servers) as c:
        first = find_txn_coordinator(c, "some-txn")
        assert (first.error_code, first.node_id) == (COORDINATOR_NOT_AVAILABLE, -1)
        # the controller creates it a moment later, as in Kafka
        md = wait_for_topic(c, "__transaction_state", NUM_TXN_PARTITIONS)
        assert md.error_code == NONE and md.is_internal and len(md.partitions) == NUM_TXN_PARTITIONS
        ensure_txn_topic(c)
        r = find_txn_coordinator(c, "some-txn")
        assert (r.error_code, r.node_id, r.port) == (NONE, 0, b.port)
        # batched form (v4+)
        r4 = c.request(FindCoordinatorRequest[4](key_type=1, coordinator_keys=["a", "b"]))
        assert [(x.key, x.error_code, x.node_id) for x in r4.coordinators] == [("a", NONE, 0), ("b", NONE, 0)]


def test_init_producer_id_new_and_bumped(client: RawClient) -> None:
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id)
    assert pid >= 0 and epoch == 0
    assert init_ok(client, txn_id) == (pid, 1)
    assert init_ok(client, txn_id) == (pid, 2)
    d = describe(client, txn_id)[0]
    assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms,
            d.transaction_start_time_ms, d.topics) == (NONE, "Empty", pid, 2, 30_000, -1, [])
    # idempotent producers (no transactional id) still get a fresh id at epoch 0
    r = init_pid(client, None)
    assert r.error_code == NONE and r.producer_id not in (-1, pid) and r.producer_epoch == 0


def test_init_producer_id_kip360(client: RawClient) -> None:
    txn_id = tid()
    pid, _ = init_ok(client, txn_id)
    r = init_pid(client, txn_id, producer_id=pid, producer_epoch=0)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, 1)
    # a retry of that bump (its answer lost) gets the same epoch
    r = init_pid(client, txn_id, producer_id=pid, producer_epoch=0)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, 1)
    # a stale epoch or another producer id is fenced (INVALID_PRODUCER_EPOCH before v4)
    assert init_pid(client, txn_id, producer_id=pid, producer_epoch=5).error_code == PRODUCER_FENCED
    assert init_pid(client, txn_id, producer_id=pid + 1000, producer_epoch=0).error_code == PRODUCER_FENCED
    assert init_pid(client, txn_id, version=3, producer_id=pid, producer_epoch=5).error_code == \
        INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("version", [0, 2, 4, 5])
def test_init_producer_id_hostile(client: RawClient, version: int) -> None:
    for timeout in (0, -1, MAX_TIMEOUT_MS + 1):
        r = init_pid(client, tid(), timeout_ms=timeout, version=version)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_TRANSACTION_TIMEOUT, -1, -1)
    r = init_pid(client, "", version=version)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_REQUEST, -1, -1)
    if version >= 3:
        for pid, epoch in ((-1, 3), (17, -1)):
            r = init_pid(client, tid(), version=version, producer_id=pid, producer_epoch=epoch)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_REQUEST, -1, -1)
    r = init_pid(client, tid(), timeout_ms=MAX_TIMEOUT_MS, version=version)
    assert (r.error_code, r.producer_epoch) == (NONE, 0)


def test_commit_writes_markers_and_completes(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 3)
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id)
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [0, 2]}) == \
        {(topic_name, 0): NONE, (topic_name, 2): NONE}
    d = describe(client, txn_id)[0]
    assert d.transaction_state == "Ongoing" and d.transaction_start_time_ms > 0
    assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(topic_name, [0, 2])]
    # adding a partition already in the transaction is a no-op
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    for p in (0, 2):
        assert produce_txn(client, txn_id, topic_name, p, pid, epoch, 0, 3).error_code == NONE
    assert end_txn(client, txn_id, pid, epoch, commit=True) == NONE
    done = wait_state(client, txn_id, "CompleteCommit")
    assert (done.producer_id, done.producer_epoch, done.topics) == (pid, epoch, [])
    for p in (0, 2):
        ms = markers(client, topic_name, p)
        assert len(ms) == 1 and ms[0][:3] == (pid, epoch, 1)       # one COMMIT marker
        assert [b.is_control_batch for b in batches(client, topic_name, p)] == [False, True]
    assert markers(client, topic_name, 1) == []
    # a retried EndTxn(commit) of the completed transaction is fine; abort is not
    assert end_txn(client, txn_id, pid, epoch, commit=True) == NONE
    assert end_txn(client, txn_id, pid, epoch, commit=False) == INVALID_TXN_STATE
    # the next transaction of the same producer starts afresh
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [1]}) == {(topic_name, 1): NONE}
    assert end_txn(client, txn_id, pid, epoch, commit=False) == NONE
    wait_state(client, txn_id, "CompleteAbort")
    assert [m[:3] for m in markers(client, topic_name, 1)] == [(pid, epoch, 0)]   # ABORT


def test_add_partitions_errors(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 2)
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id)
    # one unknown partition: nothing is added
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [0, 7], "no-such-topic": [0]}) == {
        (topic_name, 0): OPERATION_NOT_ATTEMPTED, (topic_name, 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(client, txn_id)[0].transaction_state == "Empty"
    assert add_partitions(client, txn_id, pid + 1, epoch, {topic_name: [0]}) == \
        {(topic_name, 0): INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(client, tid(), pid, epoch, {topic_name: [0]}) == \
        {(topic_name, 0): INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(client, txn_id, pid, epoch + 1, {topic_name: [0]}) == {(topic_name, 0): PRODUCER_FENCED}
    assert add_partitions(client, txn_id, pid, epoch + 1, {topic_name: [0]}, version=1) == \
        {(topic_name, 0): INVALID_PRODUCER_EPOCH}
    assert add_partitions(client, "", pid, epoch, {topic_name: [0]}) == {(topic_name, 0): INVALID_REQUEST}
    # EndTxn errors
    assert end_txn(client, txn_id, pid, epoch, commit=True) == INVALID_TXN_STATE        # Empty
    assert end_txn(client, tid(), pid, epoch, commit=True) == INVALID_PRODUCER_ID_MAPPING
    assert end_txn(client, txn_id, pid + 1, epoch, commit=True) == INVALID_PRODUCER_ID_MAPPING
    assert end_txn(client, txn_id, pid, epoch + 1, commit=True) == PRODUCER_FENCED
    assert end_txn(client, txn_id, pid, epoch + 1, commit=True, version=1) == INVALID_PRODUCER_EPOCH
    assert end_txn(client, "", pid, epoch, commit=True) == INVALID_REQUEST


def test_add_partitions_v4_batched_and_verify_only(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 2)
    a, b = tid(), tid()
    pa, ea = init_ok(client, a)
    pb, eb = init_ok(client, b)
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

    def send(*txns: Any) -> dict[str, dict[tuple[str, int], int]]:
        resp = client.request(AddPartitionsToTxnRequest[4](transactions=list(txns)))
        assert resp.error_code == NONE
        return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                     for t in r.topic_results for p in t.results_by_partition}
                for r in resp.results_by_transaction}

    assert send(Txn(transactional_id=a, producer_id=pa, producer_epoch=ea, verify_only=False,
                    topics=[T(name=topic_name, partitions=[0])]),
                Txn(transactional_id=b, producer_id=pb, producer_epoch=eb + 1, verify_only=False,
                    topics=[T(name=topic_name, partitions=[1])])) == {
        a: {(topic_name, 0): NONE}, b: {(topic_name, 1): PRODUCER_FENCED}}
    assert send(Txn(transactional_id=a, producer_id=pa, producer_epoch=ea, verify_only=True,
                    topics=[T(name=topic_name, partitions=[0, 1])])) == {
        a: {(topic_name, 0): NONE, (topic_name, 1): TRANSACTION_ABORTABLE}}
    assert send(Txn(transactional_id=b, producer_id=pb + 1, producer_epoch=eb, verify_only=True,
                    topics=[T(name=topic_name, partitions=[0])])) == {b: {(topic_name, 0): INVALID_PRODUCER_ID_MAPPING}}
    # verification adds nothing
    assert [sorted(t.partitions) for t in describe(client, a)[0].topics] == [[0]]


def test_add_offsets_to_txn(client: RawClient) -> None:
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id)
    group = "g-" + uuid.uuid4().hex[:8]
    r = client.request(AddOffsetsToTxnRequest[3](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                 group_id=group))
    assert r.error_code == NONE
    (topic,) = describe(client, txn_id)[0].topics
    assert topic.topic == "__consumer_offsets" and len(topic.partitions) == 1
    r = client.request(AddOffsetsToTxnRequest[1](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch + 1,
                                                 group_id=group))
    assert r.error_code == INVALID_PRODUCER_EPOCH
    r = client.request(AddOffsetsToTxnRequest[2](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch + 1,
                                                 group_id=group))
    assert r.error_code == PRODUCER_FENCED


def test_zombie_is_fenced(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 1)
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id)
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    assert produce_txn(client, txn_id, topic_name, 0, pid, epoch, 0, 2).error_code == NONE
    # a new instance: the ongoing transaction is aborted at a bumped epoch, the caller retries
    r = init_pid(client, txn_id)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (CONCURRENT_TRANSACTIONS, -1, -1)
    new_pid, new_epoch = init_ok(client, txn_id)
    assert (new_pid, new_epoch) == (pid, epoch + 2)
    assert [m[:3] for m in markers(client, topic_name, 0)] == [(pid, epoch + 1, 0)]   # ABORT at the fence epoch
    # the zombie's commit and adds are fenced
    assert end_txn(client, txn_id, pid, epoch, commit=True) == PRODUCER_FENCED
    assert end_txn(client, txn_id, pid, epoch, commit=True, version=0) == INVALID_PRODUCER_EPOCH
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): PRODUCER_FENCED}


def test_concurrent_end_txn_while_completing(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 1)
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id)
    add_partitions(client, txn_id, pid, epoch, {topic_name: [0]})
    # pipelined: a retried EndTxn while the first one's markers may still be in flight
    client.send(EndTxnRequest[3](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True))
    client.send(EndTxnRequest[3](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True))
    (_, r1), (_, r2) = client.recv(), client.recv()
    assert r1.error_code == NONE
    assert r2.error_code in (NONE, CONCURRENT_TRANSACTIONS)
    wait_state(client, txn_id, "CompleteCommit")
    assert len(markers(client, topic_name, 0)) == 1


def test_timeout_aborts_with_epoch_bump(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 1)
    txn_id = tid()
    pid, epoch = init_ok(client, txn_id, timeout_ms=1000)
    assert add_partitions(client, txn_id, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    assert produce_txn(client, txn_id, topic_name, 0, pid, epoch, 0, 4).error_code == NONE
    d = wait_state(client, txn_id, "CompleteAbort", timeout=15)
    assert (d.producer_id, d.producer_epoch) == (pid, epoch + 1)
    assert [m[:3] for m in markers(client, topic_name, 0)] == [(pid, epoch + 1, 0)]
    assert end_txn(client, txn_id, pid, epoch, commit=True) == PRODUCER_FENCED
    # the producer re-initializes and continues at a later epoch
    assert init_ok(client, txn_id, timeout_ms=1000) == (pid, epoch + 2)


def test_write_txn_markers_inbound(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 1)
    pid = init_pid(client, None).producer_id
    M = WriteTxnMarkersRequest.WritableTxnMarker
    resp = client.request(WriteTxnMarkersRequest[1](markers=[M(
        producer_id=pid, producer_epoch=3, transaction_result=True, coordinator_epoch=7,
        topics=[M.WritableTxnMarkerTopic(name=topic_name, partition_indexes=[0, 5]),
                M.WritableTxnMarkerTopic(name="nope", partition_indexes=[0])])]))
    (m,) = resp.markers
    assert m.producer_id == pid
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in m.topics] == [
        (topic_name, [(0, NONE), (5, UNKNOWN_TOPIC_OR_PARTITION)]), ("nope", [(0, UNKNOWN_TOPIC_OR_PARTITION)])]
    assert markers(client, topic_name, 0) == [(pid, 3, 1, 7)]


def test_describe_and_list_transactions(client: RawClient, topic_name: str, txn_broker) -> None:
    create_topic(txn_broker.bootstrap_servers, topic_name, 1)
    a, b = tid(), tid()
    pa, ea = init_ok(client, a)
    pb, _ = init_ok(client, b)
    add_partitions(client, a, pa, ea, {topic_name: [0]})
    unknown = tid()
    da, db, du, de = describe(client, a, b, unknown, "")
    assert (da.error_code, da.transaction_state, da.producer_id) == (NONE, "Ongoing", pa)
    assert (db.error_code, db.transaction_state) == (NONE, "Empty")
    assert (du.transactional_id, du.error_code) == (unknown, TRANSACTIONAL_ID_NOT_FOUND)
    assert de.error_code == INVALID_REQUEST

    def listed(version: int = 0, **kw: Any) -> tuple[int, list[str], dict[str, tuple[int, str]]]:
        kw.setdefault("state_filters", [])
        kw.setdefault("producer_id_filters", [])
        r = client.request(ListTransactionsRequest[version](**kw))
        return r.error_code, list(r.unknown_state_filters), \
            {t.transactional_id: (t.producer_id, t.transaction_state) for t in r.transaction_states}

    err, unk, all_ = listed()
    assert err == NONE and unk == [] and all_[a] == (pa, "Ongoing") and all_[b] == (pb, "Empty")
    err, unk, ongoing = listed(state_filters=["Ongoing", "Bogus"])
    assert unk == ["Bogus"] and a in ongoing and b not in ongoing
    assert set(s for _, s in ongoing.values()) == {"Ongoing"}
    assert listed(producer_id_filters=[pb])[2] == {b: (pb, "Empty")}
    # v1: only transactions running longer than the duration
    assert a not in listed(1, duration_filter=3_600_000)[2]
    assert a in listed(1, duration_filter=-1)[2]
    end_txn(client, a, pa, ea, commit=False)
    wait_state(client, a, "CompleteAbort")


def test_state_survives_restart(tmp_path) -> None:
    with BrokerProcess(log_dir=tmp_path / "logs", overrides=OVERRIDES) as b:
        topic = "restart-" + uuid.uuid4().hex[:8]
        with RawClient(b.bootstrap_servers) as c:
            ensure_txn_topic(c)
            create_topic(b.bootstrap_servers, topic, 1)
            done, ongoing, empty = tid(), tid(), tid()
            pd, ed = init_ok(c, done)
            add_partitions(c, done, pd, ed, {topic: [0]})
            assert end_txn(c, done, pd, ed, commit=True) == NONE
            wait_state(c, done, "CompleteCommit")
            po, eo = init_ok(c, ongoing, timeout_ms=MAX_TIMEOUT_MS)
            add_partitions(c, ongoing, po, eo, {topic: [0]})
            pe, ee = init_ok(c, empty)
            init_ok(c, empty)
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            ensure_txn_topic(c)

            def loaded() -> Optional[list[Any]]:
                ds = describe(c, done, ongoing, empty)
                return ds if all(d.error_code == NONE for d in ds) else None
            dd, do, de = wait_until(loaded, what="transactions reloaded")
            assert (dd.transaction_state, dd.producer_id, dd.producer_epoch) == ("CompleteCommit", pd, ed)
            assert (do.transaction_state, do.producer_id, do.producer_epoch) == ("Ongoing", po, eo)
            assert [(t.topic, list(t.partitions)) for t in do.topics] == [(topic, [0])]
            assert (de.transaction_state, de.producer_id, de.producer_epoch) == ("Empty", pe, ee + 1)
            # the reloaded ongoing transaction can still be committed by its producer
            assert end_txn(c, ongoing, po, eo, commit=True) == NONE
            wait_state(c, ongoing, "CompleteCommit")
            assert init_ok(c, done) == (pd, ed + 1)


def test_idle_transactional_id_expires(tmp_path) -> None:
    overrides = dict(OVERRIDES, **{"transactional.id.expiration.ms": "1000",
                                   "transaction.remove.expired.transaction.cleanup.interval.ms": "300"})
    with BrokerProcess(log_dir=tmp_path / "logs", overrides=overrides) as b, RawClient(b.bootstrap_servers) as c:
        ensure_txn_topic(c)
        txn_id = tid()
        pid, _ = init_ok(c, txn_id)
        assert describe(c, txn_id)[0].error_code == NONE
        wait_until(lambda: describe(c, txn_id)[0].error_code == TRANSACTIONAL_ID_NOT_FOUND, 10,
                   what=f"{txn_id} expired")
        assert txn_id not in {t.transactional_id for t in
                              c.request(ListTransactionsRequest[0](state_filters=[], producer_id_filters=[]))
                              .transaction_states}
        # the tombstone keeps it gone after a restart; a new InitProducerId starts a new producer id
        b.restart()
        with RawClient(b.bootstrap_servers) as c2:
            ensure_txn_topic(c2)
            wait_until(lambda: describe(c2, txn_id)[0].error_code == TRANSACTIONAL_ID_NOT_FOUND, 10,
                       what="reloaded without the expired id")
            new_pid, epoch = init_ok(c2, txn_id)
            assert new_pid != pid and epoch == 0
