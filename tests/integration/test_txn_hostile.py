"""Hostile input to the transaction APIs over raw sockets against one real broker process:
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers,
DescribeTransactions, ListTransactions, DescribeProducers.

Expected answers are Apache Kafka's (KafkaApis handlers, TransactionCoordinator,
GroupCoordinator.handleTxnCommitOffsets, the generated request parsers): a null in a
non-nullable string and a body that does not parse close the connection; everything else gets
an exact error code. The tests share one module broker and run in file order; the last one
checks that a normal transaction still commits end to end and that nothing acknowledged before
the abuse was lost.
"""
from __future__ import annotations

import socket
import struct
import uuid
from typing import Any, Iterator, Optional

import pytest
from kafka.protocol.admin import DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                     InitProducerIdRequest, TxnOffsetCommitRequest, WriteTxnMarkersRequest)

from kafka.record.default_records import DefaultRecordBatch

from tests.harness import BrokerProcess
from tests.integration.groups_util import find_coordinator
from tests.integration.test_txn_coordinator import (OVERRIDES, add_partitions, batches, describe,
                                                    end_txn, ensure_txn_topic, init_ok, init_pid, markers,
                                                    produce_txn, tid, wait_state)
from tests.integration.util import RawClient, create_topic, split_host_port

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
INVALID_TOPIC_EXCEPTION = 17
INVALID_GROUP_ID = 24
TOPIC_AUTHORIZATION_FAILED = 29
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
TRANSACTION_COORDINATOR_FENCED = 52
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120

MAX_TIMEOUT_MS = int(OVERRIDES["transaction.max.timeout.ms"])
TOPIC = "txn-hostile"
TOPIC_PARTITIONS = 2
BASELINE = [f"baseline-{i}".encode() for i in range(20)]


@pytest.fixture(scope="module")
def hb() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides=OVERRIDES) as b:
        with RawClient(b.bootstrap_servers) as c:
            ensure_txn_topic(c)
            find_coordinator(c, "hostile-probe")     # creates __consumer_offsets
        create_topic(b.bootstrap_servers, TOPIC, TOPIC_PARTITIONS)
        yield b


@pytest.fixture
def c(hb: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(hb.bootstrap_servers) as client:
        yield client


@pytest.fixture(scope="module")
def bystander(hb: BrokerProcess) -> Iterator[RawClient]:
    """A connection opened before the abuse and used again after it."""
    client = RawClient(hb.bootstrap_servers)
    yield client
    client.close()


# -- helpers -----------------------------------------------------------------------------------------

def encoded(req: Any, corr: int = 7) -> bytes:
    req.with_header(correlation_id=corr, client_id="txn-hostile")
    return bytes(req.encode(header=True, framed=True))


def closed_after(hb: BrokerProcess, data: bytes, timeout: float = 5.0) -> bool:
    with RawClient(hb.bootstrap_servers) as client:
        try:
            client.send_bytes(data)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return client.wait_closed(timeout)


def assert_alive(hb: BrokerProcess) -> None:
    assert hb.proc is not None and hb.proc.poll() is None, "broker died:\n" + "\n".join(hb.stderr_lines[-30:])
    with RawClient(hb.bootstrap_servers) as client:
        assert client.request(ApiVersionsRequest[0]()).error_code == NONE


def add_offsets(c: RawClient, txn_id: Optional[str], pid: int, epoch: int, group: Optional[str],
                version: int = 3) -> int:
    return c.request(AddOffsetsToTxnRequest[version](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                     group_id=group)).error_code


def txn_commit(c: RawClient, txn_id: str, group: str, pid: int, epoch: int, offsets: dict[tuple[str, int], int],
               metadata: str = "", version: int = 3) -> dict[tuple[str, int], int]:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), off in offsets.items():
        by_topic.setdefault(topic, []).append(T.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=off, committed_leader_epoch=-1, committed_metadata=metadata))
    resp = c.request(TxnOffsetCommitRequest[version](
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def write_markers(c: RawClient, pid: int, epoch: int, coordinator_epoch: int, commit: bool,
                  parts: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    resp = c.request(WriteTxnMarkersRequest[1](markers=[M(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in parts.items()])]))
    (m,) = resp.markers
    assert m.producer_id == pid
    return {(t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions}


def add_partitions_v4(c: RawClient, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]],
                      verify_only: bool) -> dict[tuple[str, int], int]:
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    resp = c.request(AddPartitionsToTxnRequest[4](transactions=[Txn(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
        topics=[T(name=t, partitions=ps) for t, ps in parts.items()])]))
    assert resp.error_code == NONE
    (r,) = resp.results_by_transaction
    return {(t.name, p.partition_index): p.partition_error_code for t in r.topic_results
            for p in t.results_by_partition}


def list_txns(c: RawClient, version: int = 1, **kw: Any) -> tuple[int, list[str], dict[str, str]]:
    kw.setdefault("state_filters", [])
    kw.setdefault("producer_id_filters", [])
    r = c.request(ListTransactionsRequest[version](**kw))
    return r.error_code, list(r.unknown_state_filters), {t.transactional_id: t.transaction_state
                                                          for t in r.transaction_states}


def read_committed_values(c: RawClient, topic: str, partition: int) -> tuple[list[bytes], int]:
    """Values of the data records a read_committed fetch returns (control batches skipped), and the LSO."""
    req = c.fetch_request(topic, partition, 0)
    req.isolation_level = 1
    pd = c.request(req).responses[0].partitions[0]
    assert pd.error_code == NONE, pd
    data, values, pos = bytes(pd.records or b""), [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        batch = DefaultRecordBatch(data[pos:pos + 12 + length])
        if not batch.is_control_batch:
            values += [bytes(r.value) for r in batch]
        pos += 12 + length
    return values, pd.last_stable_offset


# -- tests -------------------------------------------------------------------------------------------

def test_baseline_acknowledged(c: RawClient, bystander: RawClient) -> None:
    """A committed transaction before any abuse; checked again at the end."""
    txn_id = "baseline-" + uuid.uuid4().hex[:6]
    pid, epoch = init_ok(c, txn_id)
    assert add_partitions(c, txn_id, pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
    assert produce_txn(c, txn_id, TOPIC, 0, pid, epoch, 0, len(BASELINE)).error_code == NONE
    assert end_txn(c, txn_id, pid, epoch, commit=True) == NONE
    wait_state(c, txn_id, "CompleteCommit")
    assert bystander.request(ApiVersionsRequest[0]()).error_code == NONE


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_init_producer_id(c: RawClient, version: int) -> None:
    # Kafka's coordinator: "" is INVALID_REQUEST, checked before the timeout
    for txn_id, timeout in (("", 30_000), ("", -1)):
        r = init_pid(c, txn_id, timeout_ms=timeout, version=version)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_REQUEST, -1, -1)
    for timeout in (0, -1, -(2 ** 31), MAX_TIMEOUT_MS + 1, 2 ** 31 - 1):
        r = init_pid(c, tid(), timeout_ms=timeout, version=version)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_TRANSACTION_TIMEOUT, -1, -1)
    # an idempotent producer's timeout is not looked at
    r = init_pid(c, None, timeout_ms=-1, version=version)
    assert r.error_code == NONE and r.producer_id >= 0 and r.producer_epoch == 0
    if version >= 3:
        # KIP-360 fields presented for an id the coordinator has never seen: a fresh producer id
        r = init_pid(c, tid(), version=version, producer_id=123_456_789, producer_epoch=3)
        assert r.error_code == NONE and r.producer_id != 123_456_789 and r.producer_epoch == 0
    # an id the coordinator stored nothing for stays unknown
    failed = tid()
    init_pid(c, failed, timeout_ms=0, version=version)
    assert describe(c, failed)[0].error_code == TRANSACTIONAL_ID_NOT_FOUND


def test_add_partitions_identity_errors(c: RawClient) -> None:
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    for version, fenced in ((0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH), (2, PRODUCER_FENCED),
                            (3, PRODUCER_FENCED)):
        assert add_partitions(c, tid(), pid, epoch, {TOPIC: [0]}, version) == {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
        assert add_partitions(c, "", pid, epoch, {TOPIC: [0]}, version) == {(TOPIC, 0): INVALID_REQUEST}
        for bad_pid in (pid + 1, -1):
            assert add_partitions(c, txn_id, bad_pid, epoch, {TOPIC: [0]}, version) == \
                {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
        for bad_epoch in (-1, epoch + 1, 32767):
            assert add_partitions(c, txn_id, pid, bad_epoch, {TOPIC: [0]}, version) == {(TOPIC, 0): fenced}
    assert describe(c, txn_id)[0].transaction_state == "Empty"
    # v4 (broker to broker) answers per transaction the same way
    assert add_partitions_v4(c, tid(), pid, epoch, {TOPIC: [0]}, False) == {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions_v4(c, "", pid, epoch, {TOPIC: [0]}, False) == {(TOPIC, 0): INVALID_REQUEST}
    assert add_partitions_v4(c, "", pid, epoch, {TOPIC: [0]}, True) == {(TOPIC, 0): INVALID_REQUEST}
    assert add_partitions_v4(c, txn_id, pid, -1, {TOPIC: [0]}, True) == {(TOPIC, 0): PRODUCER_FENCED}


def test_add_partitions_internal_topics(c: RawClient) -> None:
    """Clients (v0-3) may not add internal topics: Kafka leaves them out of the authorized topics,
    so they get TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED."""
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    for version in range(4):
        assert add_partitions(c, txn_id, pid, epoch, {"__consumer_offsets": [0], "__transaction_state": [1],
                                                      TOPIC: [0]}, version) == {
            ("__consumer_offsets", 0): TOPIC_AUTHORIZATION_FAILED,
            ("__transaction_state", 1): TOPIC_AUTHORIZATION_FAILED,
            (TOPIC, 0): OPERATION_NOT_ATTEMPTED}
        # an internal partition that does not exist is still an authorization failure
        assert add_partitions(c, txn_id, pid, epoch, {"__transaction_state": [999]}, version) == {
            ("__transaction_state", 999): TOPIC_AUTHORIZATION_FAILED}
    d = describe(c, txn_id)[0]
    assert (d.transaction_state, d.topics) == ("Empty", [])
    # brokers (v4) verify offsets partitions: not in the transaction, so abortable, not refused
    assert add_partitions_v4(c, txn_id, pid, epoch, {"__consumer_offsets": [0]}, True) == \
        {("__consumer_offsets", 0): TRANSACTION_ABORTABLE}


def test_add_partitions_odd_partition_lists(c: RawClient) -> None:
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    # no topics: nothing to answer; Kafka's coordinator still starts the transaction (no partitions)
    assert add_partitions(c, txn_id, pid, epoch, {}) == {}
    d = describe(c, txn_id)[0]
    assert (d.transaction_state, d.topics) == ("Ongoing", [])
    assert add_partitions(c, txn_id, pid, epoch, {TOPIC: []}) == {}
    # unknown partitions, negative ones, a huge list: nothing added
    big = list(range(-5, 20_000))
    errors = add_partitions(c, txn_id, pid, epoch, {TOPIC: big})
    assert len(errors) == len(big)
    assert errors == {(TOPIC, p): (OPERATION_NOT_ATTEMPTED if 0 <= p < TOPIC_PARTITIONS
                                   else UNKNOWN_TOPIC_OR_PARTITION) for p in big}
    assert describe(c, txn_id)[0].topics == []
    # duplicates are answered once and added once
    assert add_partitions(c, txn_id, pid, epoch, {TOPIC: [1, 1, 1, 0, 1]}) == {(TOPIC, 1): NONE, (TOPIC, 0): NONE}
    assert [(t.topic, sorted(t.partitions)) for t in describe(c, txn_id)[0].topics] == [(TOPIC, [0, 1])]
    # the transaction ends normally: one ABORT marker per partition
    assert end_txn(c, txn_id, pid, epoch, commit=False) == NONE
    wait_state(c, txn_id, "CompleteAbort")
    for p in (0, 1):
        assert [m[:3] for m in markers(c, TOPIC, p) if m[0] == pid] == [(pid, epoch, 0)]


def test_null_strings_close_the_connection(hb: BrokerProcess, c: RawClient) -> None:
    """Kafka's parsers refuse a null in a non-nullable string (transactional ids, group ids, topic
    names): the connection is closed, and nothing changed."""
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    TC = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    tc_topics = [TC(name=TOPIC, partitions=[TC.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])]
    requests = [
        AddPartitionsToTxnRequest[3](v3_and_below_transactional_id=None, v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch, v3_and_below_topics=[T(name=TOPIC, partitions=[0])]),
        AddPartitionsToTxnRequest[0](v3_and_below_transactional_id=None, v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch, v3_and_below_topics=[T(name=TOPIC, partitions=[0])]),
        AddPartitionsToTxnRequest[4](transactions=[Txn(transactional_id=None, producer_id=pid, producer_epoch=epoch,
                                                       verify_only=False, topics=[T(name=TOPIC, partitions=[0])])]),
        AddOffsetsToTxnRequest[3](transactional_id=None, producer_id=pid, producer_epoch=epoch, group_id="g"),
        AddOffsetsToTxnRequest[0](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=None),
        EndTxnRequest[3](transactional_id=None, producer_id=pid, producer_epoch=epoch, committed=True),
        EndTxnRequest[0](transactional_id=None, producer_id=pid, producer_epoch=epoch, committed=False),
        TxnOffsetCommitRequest[3](transactional_id=None, group_id="g", producer_id=pid, producer_epoch=epoch,
                                  generation_id=-1, member_id="", group_instance_id=None, topics=tc_topics),
        TxnOffsetCommitRequest[0](transactional_id=txn_id, group_id=None, producer_id=pid, producer_epoch=epoch,
                                  topics=tc_topics),
        DescribeTransactionsRequest[0](transactional_ids=[txn_id, None]),
        # null topic names
        AddPartitionsToTxnRequest[3](v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch, v3_and_below_topics=[T(name=None, partitions=[0])]),
        TxnOffsetCommitRequest[3](transactional_id=txn_id, group_id="g", producer_id=pid, producer_epoch=epoch,
                                  generation_id=-1, member_id="", group_instance_id=None,
                                  topics=[TC(name=None, partitions=tc_topics[0].partitions)]),
        WriteTxnMarkersRequest[1](markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=0,
            topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name=None, partition_indexes=[0])])]),
        DescribeProducersRequest[0](topics=[DescribeProducersRequest.TopicRequest(name=None, partition_indexes=[0])]),
    ]
    for req in requests:
        assert closed_after(hb, encoded(req)), req
    assert_alive(hb)
    d = describe(c, txn_id)[0]
    assert (d.transaction_state, d.producer_epoch, d.topics) == ("Empty", epoch, [])


def test_add_offsets_to_txn(c: RawClient) -> None:
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    for version, fenced in ((0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH), (2, PRODUCER_FENCED),
                            (3, PRODUCER_FENCED)):
        assert add_offsets(c, tid(), pid, epoch, "g", version) == INVALID_PRODUCER_ID_MAPPING
        assert add_offsets(c, "", pid, epoch, "g", version) == INVALID_REQUEST
        assert add_offsets(c, txn_id, pid + 1, epoch, "g", version) == INVALID_PRODUCER_ID_MAPPING
        assert add_offsets(c, txn_id, -1, epoch, "g", version) == INVALID_PRODUCER_ID_MAPPING
        assert add_offsets(c, txn_id, pid, -1, "g", version) == fenced
        assert add_offsets(c, txn_id, pid, epoch + 5, "g", version) == fenced
    assert describe(c, txn_id)[0].transaction_state == "Empty"
    # Kafka does not validate the group id here: "" and odd names map to an offsets partition too
    for group in ("", " ", "g/../x", "x" * 5000):
        assert add_offsets(c, txn_id, pid, epoch, group) == NONE
    d = describe(c, txn_id)[0]
    assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == ["__consumer_offsets"]
    assert end_txn(c, txn_id, pid, epoch, commit=False) == NONE
    wait_state(c, txn_id, "CompleteAbort")


def test_end_txn(c: RawClient) -> None:
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    # before any AddPartitions the transaction is Empty: neither commit nor abort
    for version in range(5):
        for commit in (True, False):
            assert end_txn(c, txn_id, pid, epoch, commit, version) == INVALID_TXN_STATE
    for version, fenced in ((0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH), (2, PRODUCER_FENCED),
                            (3, PRODUCER_FENCED), (4, PRODUCER_FENCED)):
        assert end_txn(c, tid(), pid, epoch, True, version) == INVALID_PRODUCER_ID_MAPPING
        assert end_txn(c, "", pid, epoch, True, version) == INVALID_REQUEST
        assert end_txn(c, txn_id, -1, epoch, True, version) == INVALID_PRODUCER_ID_MAPPING
        for bad_epoch in (-1, epoch + 1, epoch - 1):
            assert end_txn(c, txn_id, pid, bad_epoch, False, version) == fenced
    d = describe(c, txn_id)[0]
    assert (d.transaction_state, d.producer_epoch) == ("Empty", epoch)


def test_txn_offset_commit(c: RawClient) -> None:
    txn_id = tid()
    group = "hostile-g-" + uuid.uuid4().hex[:6]
    find_coordinator(c, group)
    pid, epoch = init_ok(c, txn_id)
    # not yet in the transaction (no AddOffsetsToTxn): KIP-890 verification refuses, per Kafka's
    # AddPartitionsToTxnManager (TRANSACTION_ABORTABLE -> INVALID_TXN_STATE for these versions)
    assert txn_commit(c, txn_id, group, pid, epoch, {(TOPIC, 0): 5}) == {(TOPIC, 0): INVALID_TXN_STATE}
    # the transactional id, producer id and epoch are checked by that verification
    assert txn_commit(c, tid(), group, pid, epoch, {(TOPIC, 0): 5}) == {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
    assert txn_commit(c, "", group, pid, epoch, {(TOPIC, 0): 5}) == {(TOPIC, 0): INVALID_REQUEST}
    assert txn_commit(c, txn_id, group, pid + 1, epoch, {(TOPIC, 0): 5}) == {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
    for bad_epoch in (-1, epoch + 1):
        assert txn_commit(c, txn_id, group, pid, bad_epoch, {(TOPIC, 0): 5}) == {(TOPIC, 0): INVALID_PRODUCER_EPOCH}
    # the group id is checked first
    assert txn_commit(c, txn_id, "", pid, epoch, {(TOPIC, 0): 5}) == {(TOPIC, 0): INVALID_GROUP_ID}
    # unknown topics and partitions never reach the coordinator
    assert txn_commit(c, txn_id, group, pid, epoch, {("nope", 0): 1, (TOPIC, -1): 1, (TOPIC, 9): 1}) == {
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, -1): UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, 9): UNKNOWN_TOPIC_OR_PARTITION}
    assert add_offsets(c, txn_id, pid, epoch, group) == NONE
    # metadata above offset.metadata.max.bytes (4096)
    assert txn_commit(c, txn_id, group, pid, epoch, {(TOPIC, 0): 5}, metadata="m" * 4097) == \
        {(TOPIC, 0): OFFSET_METADATA_TOO_LARGE}
    # negative offsets are stored as given (Kafka does not check them)
    assert txn_commit(c, txn_id, group, pid, epoch, {(TOPIC, 0): -5, (TOPIC, 1): 7}, metadata="m" * 4096) == \
        {(TOPIC, 0): NONE, (TOPIC, 1): NONE}
    assert end_txn(c, txn_id, pid, epoch, commit=True) == NONE
    wait_state(c, txn_id, "CompleteCommit")
    F = OffsetFetchRequest.OffsetFetchRequestTopic
    resp = c.request(OffsetFetchRequest[7](group_id=group, require_stable=True,
                                           topics=[F(name=TOPIC, partition_indexes=[0, 1])]))
    assert resp.error_code == NONE
    assert {p.partition_index: (p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions} == \
        {0: (-5, NONE), 1: (7, NONE)}


def test_write_txn_markers(c: RawClient) -> None:
    pid = init_pid(c, None).producer_id
    # nothing to write: an empty answer
    assert c.request(WriteTxnMarkersRequest[1](markers=[])).markers == []
    assert write_markers(c, pid, 5, 3, True, {TOPIC: [1, 7, -1], "no-such-topic": [0],
                                              "__transaction_state": [999]}) == {
        (TOPIC, 1): NONE, (TOPIC, 7): UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, -1): UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION, ("__transaction_state", 999): UNKNOWN_TOPIC_OR_PARTITION}
    # an older producer epoch than the log has seen; an older coordinator epoch
    assert write_markers(c, pid, 4, 3, False, {TOPIC: [1]}) == {(TOPIC, 1): INVALID_PRODUCER_EPOCH}
    assert write_markers(c, pid, 5, 2, False, {TOPIC: [1]}) == {(TOPIC, 1): TRANSACTION_COORDINATOR_FENCED}
    assert [m for m in markers(c, TOPIC, 1) if m[0] == pid] == [(pid, 5, 1, 3)]


def test_describe_transactions(c: RawClient) -> None:
    assert describe(c) == []
    txn_id = tid()
    pid, epoch = init_ok(c, txn_id)
    unknown = tid()
    states = describe(c, txn_id, txn_id, unknown, unknown, "")
    assert [(s.transactional_id, s.error_code) for s in states] == [
        (txn_id, NONE), (txn_id, NONE), (unknown, TRANSACTIONAL_ID_NOT_FOUND), (unknown, TRANSACTIONAL_ID_NOT_FOUND),
        ("", INVALID_REQUEST)]
    assert [(s.transaction_state, s.producer_id, s.producer_epoch) for s in states[:2]] == [("Empty", pid, epoch)] * 2
    # Kafka sets only the error code: the rest keeps the schema defaults (checked in tests/differential)
    assert (states[2].producer_id, states[2].producer_epoch, states[2].transaction_start_time_ms) == (0, 0, 0)
    # a long list of ids: each answered
    many = [tid() for _ in range(2000)]
    assert [s.error_code for s in describe(c, *many)] == [TRANSACTIONAL_ID_NOT_FOUND] * len(many)


def test_list_transactions(c: RawClient) -> None:
    empty_id, ongoing_id = tid(), tid()
    init_ok(c, empty_id)
    pid, epoch = init_ok(c, ongoing_id)
    assert add_partitions(c, ongoing_id, pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
    # any negative duration means no duration filter (Kafka: filterDurationMs >= 0)
    for duration in (-1, -5, -(2 ** 63)):
        err, unknown, listed = list_txns(c, duration_filter=duration)
        assert (err, unknown) == (NONE, []) and listed[empty_id] == "Empty" and listed[ongoing_id] == "Ongoing"
    # an hour: the ongoing transaction is younger; an Empty one has no start (-1), so it is listed
    # (Kafka compares now - txnStartTimestamp); a duration beyond the epoch excludes both
    err, _, listed = list_txns(c, duration_filter=3_600_000)
    assert err == NONE and ongoing_id not in listed and listed[empty_id] == "Empty"
    err, _, listed = list_txns(c, duration_filter=2 ** 62)
    assert err == NONE and ongoing_id not in listed and empty_id not in listed
    # repeated and unknown state filters; the empty string is an unknown state
    err, unknown, listed = list_txns(c, state_filters=["Ongoing", "Ongoing", "Bogus", "Bogus", ""])
    assert err == NONE and sorted(unknown) == ["", "Bogus"]
    assert ongoing_id in listed and empty_id not in listed and set(listed.values()) == {"Ongoing"}
    # producer id filters that match nothing
    assert list_txns(c, producer_id_filters=[-1, -2 ** 63, 2 ** 63 - 1]) == (NONE, [], {})
    assert end_txn(c, ongoing_id, pid, epoch, commit=False) == NONE
    wait_state(c, ongoing_id, "CompleteAbort")


def test_describe_producers(c: RawClient) -> None:
    T = DescribeProducersRequest.TopicRequest
    resp = c.request(DescribeProducersRequest[0](topics=[
        T(name="no-such-topic", partition_indexes=[0, -1]), T(name=TOPIC, partition_indexes=[-1, 99, -1]),
        T(name="", partition_indexes=[0]), T(name="bad/name", partition_indexes=[0])]))
    got = [(t.name, [(p.partition_index, p.error_code, len(p.active_producers)) for p in t.partitions])
           for t in resp.topics]
    assert got == [
        ("no-such-topic", [(0, UNKNOWN_TOPIC_OR_PARTITION, 0), (-1, UNKNOWN_TOPIC_OR_PARTITION, 0)]),
        (TOPIC, [(-1, UNKNOWN_TOPIC_OR_PARTITION, 0), (99, UNKNOWN_TOPIC_OR_PARTITION, 0),
                 (-1, UNKNOWN_TOPIC_OR_PARTITION, 0)]),
        ("", [(0, INVALID_TOPIC_EXCEPTION, 0)]), ("bad/name", [(0, INVALID_TOPIC_EXCEPTION, 0)])]
    assert c.request(DescribeProducersRequest[0](topics=[])).topics == []


GARBAGE_REQUESTS = {
    "InitProducerId": InitProducerIdRequest[4](transactional_id="t", transaction_timeout_ms=1000, producer_id=-1,
                                              producer_epoch=-1),
    "AddPartitionsToTxn": AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id="t", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0, 1])]),
    "AddOffsetsToTxn": AddOffsetsToTxnRequest[3](transactional_id="t", producer_id=1, producer_epoch=0, group_id="g"),
    "EndTxn": EndTxnRequest[3](transactional_id="t", producer_id=1, producer_epoch=0, committed=True),
    "WriteTxnMarkers": WriteTxnMarkersRequest[1](markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])]),
    "TxnOffsetCommit": TxnOffsetCommitRequest[3](
        transactional_id="t", group_id="g", producer_id=1, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
            name=TOPIC, partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])]),
    "DescribeProducers": DescribeProducersRequest[0](topics=[DescribeProducersRequest.TopicRequest(
        name=TOPIC, partition_indexes=[0])]),
    "DescribeTransactions": DescribeTransactionsRequest[0](transactional_ids=["t", "u"]),
    "ListTransactions": ListTransactionsRequest[1](state_filters=["Ongoing"], producer_id_filters=[1],
                                                   duration_filter=5),
}


def _header_len(frame: bytes) -> int:
    """Size prefix + request header v2 (every request here is flexible): api key, version,
    correlation id, client id, then the header's (empty) tagged fields."""
    (client_id_len,) = struct.unpack_from(">h", frame, 12)
    return 14 + client_id_len + 1


@pytest.mark.parametrize("name", sorted(GARBAGE_REQUESTS))
def test_truncated_or_garbage_body_closes_connection(hb: BrokerProcess, name: str) -> None:
    frame = encoded(GARBAGE_REQUESTS[name])
    head, body = frame[4:_header_len(frame)], frame[_header_len(frame):]
    for payload in (b"", body[:1], body[:len(body) // 2], body[:-1], b"\xff" * 64, b"\x7f\xff\xff\xff" * 8):
        data = head + payload
        assert closed_after(hb, struct.pack(">i", len(data)) + data), (name, payload[:16])
    # a second connection is served
    with RawClient(hb.bootstrap_servers) as client:
        assert client.request(ApiVersionsRequest[0]()).error_code == NONE
        assert client.request(DescribeTransactionsRequest[0](transactional_ids=[])).transaction_states == []


def test_half_sent_request_does_not_block_others(hb: BrokerProcess, c: RawClient) -> None:
    frame = encoded(EndTxnRequest[3](transactional_id="t", producer_id=1, producer_epoch=0, committed=True))
    s = socket.create_connection(split_host_port(hb.bootstrap_servers), timeout=5)
    try:
        s.sendall(frame[:len(frame) - 3])
        assert describe(c, "t")[0].error_code == TRANSACTIONAL_ID_NOT_FOUND
    finally:
        s.close()


def test_normal_transaction_after_the_abuse(hb: BrokerProcess, c: RawClient, bystander: RawClient) -> None:
    assert_alive(hb)
    assert bystander.request(ApiVersionsRequest[0]()).error_code == NONE
    txn_id = "final-" + uuid.uuid4().hex[:6]
    pid, epoch = init_ok(c, txn_id)
    assert add_partitions(c, txn_id, pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
    assert produce_txn(c, txn_id, TOPIC, 0, pid, epoch, 0, 3).error_code == NONE
    values, lso_before = read_committed_values(c, TOPIC, 0)
    assert end_txn(c, txn_id, pid, epoch, commit=True) == NONE
    wait_state(c, txn_id, "CompleteCommit")
    values, lso = read_committed_values(c, TOPIC, 0)
    # the baseline (20 records) and this transaction's 3, in order; the aborted empty ones added nothing
    assert values == [f"v{i}".encode() for i in range(len(BASELINE))] + [b"v0", b"v1", b"v2"]
    assert lso > lso_before
    assert [m[:3] for m in markers(c, TOPIC, 0) if m[0] == pid] == [(pid, epoch, 1)]
    assert sum(1 for b in batches(c, TOPIC, 0) if not b.is_control_batch) == 2
