"""Every advertised version of the transaction APIs, over a real socket, with exact answers
(the companion of test_version_sweep.py, which checks the advertised set itself).

Each version runs a whole transaction at that version: InitProducerId, AddPartitionsToTxn,
transactional Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn — then the log, the last
stable offset, the markers, the aborted-transaction list and the committed offsets are checked."""
from __future__ import annotations

import struct
import time
import uuid
from typing import Any, Iterator

import pytest
from kafka.protocol.admin import (DescribeProducersRequest, DescribeTransactionsRequest,
                                  ListTransactionsRequest)
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                     WriteTxnMarkersRequest)
from kafka.record.default_records import DefaultRecordBatch

from tests.harness import BrokerProcess
from tests.integration.groups_util import find_coordinator
from tests.integration.test_txn_apis_wire import offset_fetch, txn_offset_commit
from tests.integration.test_txn_coordinator import (add_partitions, batches, end_txn, ensure_txn_topic,
                                                    init_ok, init_pid, markers, produce_txn, wait_state)
from tests.integration.test_version_sweep import versions
from tests.integration.util import RawClient, create_topic

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TRANSACTION_TIMEOUT = 50
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
MAX_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def txn_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides={"transaction.state.log.num.partitions": "3",
                                  "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS)}) as b:
        yield b


@pytest.fixture
def client(txn_broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(txn_broker.bootstrap_servers) as c:
        ensure_txn_topic(c)
        yield c


def _tid(tag: str) -> str:
    return f"sweep-{tag}-{uuid.uuid4().hex[:8]}"


def _topic(broker: BrokerProcess, tag: str, partitions: int = 2) -> str:
    name = f"sweep-txn-{tag}-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap_servers, name, num_partitions=partitions)
    return name


def _fetch(c: RawClient, topic: str, partition: int, isolation_level: int) -> Any:
    T = FetchRequest.FetchTopic
    resp = c.request(FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation_level,
        session_id=0, session_epoch=-1,
        topics=[T(topic=topic, partitions=[T.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id=""))
    assert resp.error_code == NONE
    (p,) = resp.responses[0].partitions
    assert p.error_code == NONE
    return p


def _data_values(p: Any) -> list[bytes]:
    """Values of the data records served (control batches left out, as clients do)."""
    data, pos, out = bytes(p.records or b""), 0, []
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        batch = DefaultRecordBatch(data[pos:pos + 12 + length])
        if not batch.is_control_batch:
            out.extend(bytes(r.value) for r in batch)
        pos += 12 + length
    return out


@pytest.mark.parametrize("v", versions(10)[1:])
def test_find_coordinator_transaction_key_each_version(txn_broker: BrokerProcess, client: RawClient,
                                                       v: int) -> None:
    key = _tid("fc")
    if v >= 4:
        resp = client.request(FindCoordinatorRequest[v](key_type=1, coordinator_keys=[key, key + "-b"]))
        assert [(c.key, c.error_code, c.node_id, c.port) for c in resp.coordinators] == \
            [(key, NONE, 0, txn_broker.port), (key + "-b", NONE, 0, txn_broker.port)]
    else:
        resp = client.request(FindCoordinatorRequest[v](key=key, key_type=1))
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (NONE, 0, "127.0.0.1", txn_broker.port)


@pytest.mark.parametrize("v", versions(22))
def test_init_producer_id_transactional_each_version(client: RawClient, v: int) -> None:
    txn = _tid(f"init{v}")
    first = init_pid(client, txn, version=v)
    assert (first.error_code, first.producer_epoch) == (NONE, 0) and first.producer_id >= 0
    again = init_pid(client, txn, version=v)
    # re-initialising bumps the epoch of the same producer id
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, first.producer_id, 1)
    too_long = init_pid(client, _tid("long"), timeout_ms=MAX_TIMEOUT_MS + 1, version=v)
    assert too_long.error_code == INVALID_TRANSACTION_TIMEOUT
    if v >= 3:
        # KIP-360: the producer names its current id and epoch and gets the next epoch
        bumped = init_pid(client, txn, version=v, producer_id=first.producer_id, producer_epoch=1)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (NONE, first.producer_id, 2)
        # an epoch older than the current one is a fenced zombie (INVALID_PRODUCER_EPOCH before v4)
        stale = init_pid(client, txn, version=v, producer_id=first.producer_id, producer_epoch=0)
        assert stale.error_code == (PRODUCER_FENCED if v >= 4 else INVALID_PRODUCER_EPOCH)


@pytest.mark.parametrize("v", versions(26))
def test_transaction_each_version(txn_broker: BrokerProcess, client: RawClient, v: int) -> None:
    """AddOffsetsToTxn, TxnOffsetCommit and EndTxn at version v (0-4 each), AddPartitionsToTxn at
    v (0-3; at 4, a client's newest version, 3: v4-5 are the brokers' batched form, swept below)."""
    assert versions(25) == versions(28) == versions(26) == [0, 1, 2, 3, 4]
    add_version = min(v, 3)
    topic = _topic(txn_broker, f"flow{v}")
    group = f"sweep-group-{v}-{uuid.uuid4().hex[:6]}"
    txn = _tid(f"flow{v}")
    pid, epoch = init_ok(client, txn)

    # a committed transaction over both partitions, with the group's offsets in it
    assert add_partitions(client, txn, pid, epoch, {topic: [0, 1]}, version=add_version) == \
        {(topic, 0): NONE, (topic, 1): NONE}
    for partition in (0, 1):
        assert produce_txn(client, txn, topic, partition, pid, epoch, 0, 3).error_code == NONE
    find_coordinator(client, group)
    # before AddOffsetsToTxn the group's partition is not in the transaction: verification refuses
    # the offsets (TRANSACTION_ABORTABLE from v4, KIP-890; INVALID_TXN_STATE before) and writes nothing
    refused = TRANSACTION_ABORTABLE if v >= 4 else INVALID_TXN_STATE
    assert txn_offset_commit(client, v, group, pid, epoch, {(topic, 0): 1}, transactional_id=txn) == \
        {(topic, 0): refused}
    assert offset_fetch(client, group, topic, [0], 7, require_stable=True) == {0: (-1, NONE)}
    add_offsets = client.request(AddOffsetsToTxnRequest[v](transactional_id=txn, producer_id=pid,
                                                           producer_epoch=epoch, group_id=group))
    assert add_offsets.error_code == NONE
    assert txn_offset_commit(client, v, group, pid, epoch, {(topic, 0): 3, (topic, 1): 3}, transactional_id=txn) == \
        {(topic, 0): NONE, (topic, 1): NONE}
    assert offset_fetch(client, group, topic, [0, 1], 7, require_stable=True) == \
        {0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (-1, UNSTABLE_OFFSET_COMMIT)}
    open_ = _fetch(client, topic, 0, isolation_level=1)
    assert (open_.high_watermark, open_.last_stable_offset, _data_values(open_)) == (3, 0, [])
    assert end_txn(client, txn, pid, epoch, commit=True, version=v) == NONE
    wait_state(client, txn, "CompleteCommit")
    for partition in (0, 1):
        committed = _fetch(client, topic, partition, isolation_level=1)
        # three records and the COMMIT marker: stable up to the end
        assert (committed.high_watermark, committed.last_stable_offset) == (4, 4)
        assert _data_values(committed) == [b"v0", b"v1", b"v2"]
        assert committed.aborted_transactions == []
    coordinator_epoch = markers(client, topic, 0)[0][3]
    assert markers(client, topic, 0) == [(pid, epoch, CONTROL_COMMIT, coordinator_epoch)]
    assert offset_fetch(client, group, topic, [0, 1], 7, require_stable=True) == {0: (3, NONE), 1: (3, NONE)}

    # an aborted one: its records stay in the log, listed as aborted for read_committed fetches
    assert add_partitions(client, txn, pid, epoch, {topic: [0]}, version=add_version) == {(topic, 0): NONE}
    assert produce_txn(client, txn, topic, 0, pid, epoch, 3, 2).error_code == NONE
    assert end_txn(client, txn, pid, epoch, commit=False, version=v) == NONE
    wait_state(client, txn, "CompleteAbort")
    aborted = _fetch(client, topic, 0, isolation_level=1)
    assert (aborted.high_watermark, aborted.last_stable_offset) == (7, 7)
    assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(pid, 4)]
    assert _data_values(aborted) == [b"v0", b"v1", b"v2", b"v3", b"v4"]   # the client drops 4-5
    assert _fetch(client, topic, 0, isolation_level=0).aborted_transactions is None
    assert [m[2] for m in markers(client, topic, 0)] == [CONTROL_COMMIT, CONTROL_ABORT]
    assert offset_fetch(client, group, topic, [0], 7, require_stable=True) == {0: (3, NONE)}


@pytest.mark.parametrize("v", versions(24)[4:])
def test_add_partitions_to_txn_batched_each_version(txn_broker: BrokerProcess, client: RawClient, v: int) -> None:
    """v4-5, the brokers' batched form; v5 (KIP-890 part 1) only says the sender understands
    TRANSACTION_ABORTABLE, which Kafka 3.9's coordinator answers at v4 too."""
    assert versions(24) == [0, 1, 2, 3, 4, 5]
    topic = _topic(txn_broker, f"apv{v}")
    txn = _tid(f"apv{v}")
    pid, epoch = init_ok(client, txn)
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

    def call(verify_only: bool) -> list[tuple[str, str, int, int]]:
        resp = client.request(AddPartitionsToTxnRequest[v](transactions=[T(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
            topics=[Topic(name=topic, partitions=[0, 1])])]))
        assert resp.error_code == NONE
        return [(r.transactional_id, t.name, p.partition_index, p.partition_error_code)
                for r in resp.results_by_transaction for t in r.topic_results for p in t.results_by_partition]

    # verification before the partitions were added: they are not part of the transaction
    assert {e[3] for e in call(verify_only=True)} == {TRANSACTION_ABORTABLE}   # Kafka 3.8+
    assert call(verify_only=False) == [(txn, topic, 0, NONE), (txn, topic, 1, NONE)]
    assert call(verify_only=True) == [(txn, topic, 0, NONE), (txn, topic, 1, NONE)]
    assert end_txn(client, txn, pid, epoch, commit=False) == NONE


@pytest.mark.parametrize("v", versions(27))
def test_write_txn_markers_each_version(txn_broker: BrokerProcess, client: RawClient, v: int) -> None:
    """A marker written by (another broker's) coordinator ends the producer's transaction here."""
    topic = _topic(txn_broker, f"wtm{v}", partitions=1)
    txn = _tid(f"wtm{v}")
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
    assert produce_txn(client, txn, topic, 0, pid, epoch, 0, 2).error_code == NONE
    assert _fetch(client, topic, 0, isolation_level=1).last_stable_offset == 0
    M = WriteTxnMarkersRequest.WritableTxnMarker
    resp = client.request(WriteTxnMarkersRequest[v](markers=[M(
        producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=1_000_000,
        topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]))
    assert [(m.producer_id, t.name, p.partition_index, p.error_code)
            for m in resp.markers for t in m.topics for p in t.partitions] == [(pid, topic, 0, NONE)]
    after = _fetch(client, topic, 0, isolation_level=1)
    assert (after.last_stable_offset, _data_values(after)) == (3, [b"v0", b"v1"])
    assert markers(client, topic, 0) == [(pid, epoch, CONTROL_COMMIT, 1_000_000)]
    # the coordinator's own markers now carry a lower coordinator epoch: the partition refuses them
    # (TRANSACTION_COORDINATOR_FENCED), and the stale one is not written
    stale = client.request(WriteTxnMarkersRequest[v](markers=[M(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]))
    assert [p.error_code for m in stale.markers for t in m.topics for p in t.partitions] == [52]
    assert len(markers(client, topic, 0)) == 1


def test_describe_transactions_v0(txn_broker: BrokerProcess, client: RawClient) -> None:
    assert versions(65) == [0]
    topic = _topic(txn_broker, "dt")
    txn = _tid("dt")
    pid, epoch = init_ok(client, txn, timeout_ms=45_000)
    assert add_partitions(client, txn, pid, epoch, {topic: [1, 0]}) == {(topic, 0): NONE, (topic, 1): NONE}
    resp = client.request(DescribeTransactionsRequest[0](transactional_ids=[txn, "sweep-never-used"]))
    ongoing, unknown = resp.transaction_states
    assert (ongoing.error_code, ongoing.transactional_id, ongoing.transaction_state, ongoing.producer_id,
            ongoing.producer_epoch, ongoing.transaction_timeout_ms) == (NONE, txn, "Ongoing", pid, epoch, 45_000)
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [(topic, [0, 1])]
    assert ongoing.transaction_start_time_ms > int(time.time() * 1000) - 60_000
    assert (unknown.transactional_id, unknown.error_code) == ("sweep-never-used", TRANSACTIONAL_ID_NOT_FOUND)
    assert end_txn(client, txn, pid, epoch, commit=True) == NONE
    wait_state(client, txn, "CompleteCommit")


@pytest.mark.parametrize("v", versions(66))
def test_list_transactions_each_version(txn_broker: BrokerProcess, client: RawClient, v: int) -> None:
    topic = _topic(txn_broker, f"lt{v}")
    txn = _tid(f"lt{v}")
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
    time.sleep(0.05)
    kw: dict[str, Any] = {"duration_filter": -1} if v >= 1 else {}
    resp = client.request(ListTransactionsRequest[v](state_filters=["Ongoing"], producer_id_filters=[pid], **kw))
    assert resp.error_code == NONE and list(resp.unknown_state_filters) == []
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in resp.transaction_states] == \
        [(txn, pid, "Ongoing")]
    unknown = client.request(ListTransactionsRequest[v](state_filters=["Bogus"], producer_id_filters=[], **kw))
    assert list(unknown.unknown_state_filters) == ["Bogus"]
    if v >= 1:
        # only transactions running longer than the filter: none has run for an hour
        long_ = client.request(ListTransactionsRequest[v](state_filters=[], producer_id_filters=[pid],
                                                          duration_filter=3_600_000))
        assert list(long_.transaction_states) == []
    assert end_txn(client, txn, pid, epoch, commit=False) == NONE
    wait_state(client, txn, "CompleteAbort")


def test_describe_producers_v0(txn_broker: BrokerProcess, client: RawClient) -> None:
    assert versions(61) == [0]
    topic = _topic(txn_broker, "dp", partitions=1)
    txn = _tid("dp")
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
    assert produce_txn(client, txn, topic, 0, pid, epoch, 0, 4).error_code == NONE
    T = DescribeProducersRequest.TopicRequest
    resp = client.request(DescribeProducersRequest[0](topics=[T(name=topic, partition_indexes=[0, 5])]))
    (t,) = resp.topics
    by_partition = {p.partition_index: p for p in t.partitions}
    assert by_partition[5].error_code == 3     # UNKNOWN_TOPIC_OR_PARTITION
    (state,) = by_partition[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence, state.current_txn_start_offset) == \
        (pid, epoch, 3, 0)
    assert end_txn(client, txn, pid, epoch, commit=True) == NONE
    wait_state(client, txn, "CompleteCommit")
    resp = client.request(DescribeProducersRequest[0](topics=[T(name=topic, partition_indexes=[0])]))
    (state,) = resp.topics[0].partitions[0].active_producers
    assert state.current_txn_start_offset == -1 and state.coordinator_epoch >= 0
    assert len(batches(client, topic, 0)) == 2
