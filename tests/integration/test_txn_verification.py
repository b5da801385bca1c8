"""Transaction verification (KIP-890 part 1, `transaction.partition.verification.enable`) against a
real broker over the raw protocol: a transactional batch for a partition that is not in the
producer's ongoing transaction is refused with Kafka's error for the Produce version and nothing
is appended, so no transaction is left open that no marker would end (the last stable offset
stays where it was). The same for TxnOffsetCommit without AddOffsetsToTxn. Switched off, the old
behaviour holds."""
from __future__ import annotations

import time
from typing import Any, Iterator, Optional

import pytest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import AddOffsetsToTxnRequest, ProduceRequest, TxnOffsetCommitRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.harness import BrokerProcess
from tests.integration.groups_util import find_coordinator
from tests.integration.test_txn_coordinator import (add_partitions, describe, end_txn, ensure_txn_topic,
                                                    init_ok, wait_state)
from tests.integration.util import RawClient, create_topic

NONE = 0
NOT_ENOUGH_REPLICAS = 19
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
UNSTABLE_OFFSET_COMMIT = 88
TRANSACTION_ABORTABLE = 120
NOT_ADDED = "Partition was not added to the transaction"

OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
             "num.partitions": "2"}


@pytest.fixture(scope="module")
def vbroker() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides=OVERRIDES) as b:
        yield b


@pytest.fixture
def client(vbroker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(vbroker.bootstrap_servers) as c:
        ensure_txn_topic(c)
        yield c


def txn_batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, now, b"k", f"v{seq + i}".encode(), [])
    return bytes(b.build())


def produce(c: RawClient, version: int, txn_id: Optional[str], parts: dict[tuple[str, int], bytes]
            ) -> dict[tuple[str, int], tuple[int, int, Optional[str]]]:
    """(error code, base offset, error message) per partition; v13 addresses topics by id."""
    P = ProduceRequest.TopicProduceData
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), records in parts.items():
        by_topic.setdefault(topic, []).append(P.PartitionProduceData(index=partition, records=records))
    if version >= 13:
        ids = {t.name: t.topic_id for t in c.metadata(list(by_topic)).topics}
        topics = [P(topic_id=ids[n], partition_data=ps) for n, ps in by_topic.items()]
        names = {v: k for k, v in ids.items()}
    else:
        topics = [P(name=n, partition_data=ps) for n, ps in by_topic.items()]
    resp = c.request(ProduceRequest[version](transactional_id=txn_id, acks=-1, timeout_ms=10_000, topic_data=topics))
    return {((names[t.topic_id] if version >= 13 else t.name), p.index):
            (p.error_code, p.base_offset, getattr(p, "error_message", None))
            for t in resp.responses for p in t.partition_responses}


def offsets(c: RawClient, topic: str, partition: int) -> tuple[int, int]:
    """(high watermark, last stable offset)."""
    pd = c.fetch(topic, partition, 0)
    assert pd.error_code == NONE
    return pd.high_watermark, pd.last_stable_offset


def new_txn_id() -> str:
    return f"verify-{time.monotonic_ns()}"


# -- Produce ---------------------------------------------------------------------------------------

def test_unadded_partition_refused_at_each_produce_version(client: RawClient, topic_name: str,
                                                           vbroker: BrokerProcess) -> None:
    create_topic(vbroker.bootstrap_servers, topic_name, num_partitions=2)
    txn = new_txn_id()
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    assert produce(client, 9, txn, {(topic_name, 0): txn_batch(pid, epoch, 0)}) == {(topic_name, 0): (NONE, 0, None)}
    assert offsets(client, topic_name, 0) == (2, 0)       # the transaction holds partition 0 back
    batch = txn_batch(pid, epoch, 0)
    # Up to v10 the coordinator's TRANSACTION_ABORTABLE is answered as INVALID_TXN_STATE; v11 as is.
    for v in range(3, 12):
        expected = (INVALID_TXN_STATE, -1, NOT_ADDED if v >= 8 else None) if v <= 10 else \
            (TRANSACTION_ABORTABLE, -1, None)
        assert produce(client, v, txn, {(topic_name, 1): batch}) == {(topic_name, 1): expected}, v
        # nothing appended: no open transaction on partition 1, its LSO is its HW
        assert offsets(client, topic_name, 1) == (0, 0)
    # a request with an added and an un-added partition: only the un-added one is refused
    assert produce(client, 9, txn, {(topic_name, 0): txn_batch(pid, epoch, 2), (topic_name, 1): batch}) == {
        (topic_name, 0): (NONE, 2, None), (topic_name, 1): (INVALID_TXN_STATE, -1, NOT_ADDED)}
    # once added, the very same batch goes in
    assert add_partitions(client, txn, pid, epoch, {topic_name: [1]}) == {(topic_name, 1): NONE}
    assert produce(client, 9, txn, {(topic_name, 1): batch}) == {(topic_name, 1): (NONE, 0, None)}
    assert offsets(client, topic_name, 1) == (2, 0)
    assert end_txn(client, txn, pid, epoch, commit=True) == NONE
    wait_state(client, txn, "CompleteCommit")
    assert offsets(client, topic_name, 0) == (5, 5) and offsets(client, topic_name, 1) == (3, 3)


def test_late_write_after_commit_is_refused(client: RawClient, topic_name: str, vbroker: BrokerProcess) -> None:
    """The hanging transaction KIP-890 closes: a batch of the same producer and epoch arriving
    after the transaction ended would open one that no coordinator knows about."""
    create_topic(vbroker.bootstrap_servers, topic_name, num_partitions=1)
    txn = new_txn_id()
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    assert produce(client, 9, txn, {(topic_name, 0): txn_batch(pid, epoch, 0)})[(topic_name, 0)][0] == NONE
    assert end_txn(client, txn, pid, epoch, commit=True) == NONE
    wait_state(client, txn, "CompleteCommit")
    assert offsets(client, topic_name, 0) == (3, 3)
    assert produce(client, 7, txn, {(topic_name, 0): txn_batch(pid, epoch, 2)}) == {
        (topic_name, 0): (INVALID_TXN_STATE, -1, None)}
    assert offsets(client, topic_name, 0) == (3, 3)
    # the next transaction, added properly, continues the sequence
    assert add_partitions(client, txn, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    assert produce(client, 7, txn, {(topic_name, 0): txn_batch(pid, epoch, 2)}) == {(topic_name, 0): (NONE, 3, None)}
    assert end_txn(client, txn, pid, epoch, commit=False) == NONE
    wait_state(client, txn, "CompleteAbort")
    assert offsets(client, topic_name, 0) == (6, 6)


def test_fenced_zombie_writing_to_a_new_partition(client: RawClient, topic_name: str,
                                                  vbroker: BrokerProcess) -> None:
    create_topic(vbroker.bootstrap_servers, topic_name, num_partitions=2)
    txn = new_txn_id()
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
    assert produce(client, 9, txn, {(topic_name, 0): txn_batch(pid, epoch, 0)})[(topic_name, 0)][0] == NONE
    # a new instance: its InitProducerId aborts the open transaction at a bumped epoch (the
    # fence), then bumps again for itself
    assert init_ok(client, txn) == (pid, epoch + 2)
    assert describe(client, txn)[0].transaction_state == "Empty"
    assert offsets(client, topic_name, 0) == (3, 3)
    # the zombie's PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH, whatever the version
    for v in (3, 9, 11):
        assert produce(client, v, txn, {(topic_name, 1): txn_batch(pid, epoch, 0)}) == {
            (topic_name, 1): (INVALID_PRODUCER_EPOCH, -1, None)}
        assert produce(client, v, txn, {(topic_name, 0): txn_batch(pid, epoch, 2)}) == {
            (topic_name, 0): (INVALID_PRODUCER_EPOCH, -1, None)}
    assert offsets(client, topic_name, 1) == (0, 0) and offsets(client, topic_name, 0) == (3, 3)


def test_unknown_producer_and_two_producers_in_one_request(client: RawClient, topic_name: str,
                                                           vbroker: BrokerProcess) -> None:
    create_topic(vbroker.bootstrap_servers, topic_name, num_partitions=2)
    # a transactional id the coordinator never saw
    assert produce(client, 9, new_txn_id(), {(topic_name, 0): txn_batch(4242, 0, 0)}) == {
        (topic_name, 0): (INVALID_PRODUCER_ID_MAPPING, -1, None)}
    txn = new_txn_id()
    pid, epoch = init_ok(client, txn)
    assert add_partitions(client, txn, pid, epoch, {topic_name: [0, 1]}) == {(topic_name, 0): NONE,
                                                                             (topic_name, 1): NONE}
    # batches of two producers in one transactional request: Kafka refuses all of it
    assert produce(client, 9, txn, {(topic_name, 0): txn_batch(pid, epoch, 0),
                                    (topic_name, 1): txn_batch(pid + 1, epoch, 0)}) == {
        (topic_name, 0): (INVALID_PRODUCER_ID_MAPPING, -1, None),
        (topic_name, 1): (INVALID_PRODUCER_ID_MAPPING, -1, None)}
    assert offsets(client, topic_name, 0) == (0, 0) and offsets(client, topic_name, 1) == (0, 0)
    assert end_txn(client, txn, pid, epoch, commit=False) == NONE


def test_v12_adds_the_partition_itself(client: RawClient, topic_name: str, vbroker: BrokerProcess) -> None:
    """Produce v12+ is Kafka's ADD_PARTITION operation: the broker adds the partition."""
    create_topic(vbroker.bootstrap_servers, topic_name, num_partitions=2)
    txn = new_txn_id()
    pid, epoch = init_ok(client, txn)
    assert produce(client, 12, txn, {(topic_name, 0): txn_batch(pid, epoch, 0)}) == {(topic_name, 0): (NONE, 0, None)}
    assert produce(client, 13, txn, {(topic_name, 1): txn_batch(pid, epoch, 0)}) == {(topic_name, 1): (NONE, 0, None)}
    d = describe(client, txn)[0]
    assert d.transaction_state == "Ongoing"
    assert sorted((t.topic, p) for t in d.topics for p in t.partitions) == [(topic_name, 0), (topic_name, 1)]
    assert end_txn(client, txn, pid, epoch, commit=True) == NONE
    wait_state(client, txn, "CompleteCommit")
    assert offsets(client, topic_name, 0) == (3, 3) and offsets(client, topic_name, 1) == (3, 3)
    # a fenced producer is refused here too
    init_ok(client, txn)
    assert produce(client, 12, txn, {(topic_name, 0): txn_batch(pid, epoch, 2)}) == {
        (topic_name, 0): (INVALID_PRODUCER_EPOCH, -1, None)}


def test_no_coordinator_yet_is_retriable_not_enough_replicas(broker_factory: Any, topic_name: str) -> None:
    """Before `__transaction_state` exists no coordinator can verify: Kafka answers the retriable
    NOT_ENOUGH_REPLICAS that old producers retry (COORDINATOR_NOT_AVAILABLE underneath)."""
    b = broker_factory(OVERRIDES)
    create_topic(b.bootstrap_servers, topic_name, num_partitions=1)
    with RawClient(b.bootstrap_servers) as c:
        got = produce(c, 9, "no-coordinator", {(topic_name, 0): txn_batch(1, 0, 0)})
        assert got == {(topic_name, 0): (NOT_ENOUGH_REPLICAS, -1, "Unable to verify the partition has been added "
                                         "to the transaction. Underlying error: COORDINATOR_NOT_AVAILABLE")}
        assert offsets(c, topic_name, 0) == (0, 0)


# -- TxnOffsetCommit -----------------------------------------------------------------------------

def txn_offset_commit(c: RawClient, version: int, txn: str, group: str, pid: int, epoch: int,
                      offs: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), off in offs.items():
        by_topic.setdefault(topic, []).append(T.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""))
    resp = c.request(TxnOffsetCommitRequest[version](
        transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_stable(c: RawClient, group: str, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    resp = c.request(OffsetFetchRequest[7](group_id=group, require_stable=True,
                                           topics=[T(name=topic, partition_indexes=partitions)]))
    assert resp.error_code == NONE
    return {p.partition_index: (p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions}


def test_txn_offset_commit_needs_add_offsets(client: RawClient, topic_name: str, vbroker: BrokerProcess) -> None:
    create_topic(vbroker.bootstrap_servers, topic_name, num_partitions=2)
    group = "g-" + topic_name
    find_coordinator(client, group)
    txn = new_txn_id()
    pid, epoch = init_ok(client, txn)
    for v in range(5):
        # KIP-890 part 1: v4 clients get the coordinator's TRANSACTION_ABORTABLE, older ones INVALID_TXN_STATE
        refused = TRANSACTION_ABORTABLE if v >= 4 else INVALID_TXN_STATE
        assert txn_offset_commit(client, v, txn, group, pid, epoch, {(topic_name, 0): 5, (topic_name, 1): 6}) == {
            (topic_name, 0): refused, (topic_name, 1): refused}
    # nothing written: no pending (unstable) offsets
    assert fetch_stable(client, group, topic_name, [0, 1]) == {0: (-1, NONE), 1: (-1, NONE)}
    r = client.request(AddOffsetsToTxnRequest[3](transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                 group_id=group))
    assert r.error_code == NONE
    assert txn_offset_commit(client, 3, txn, group, pid, epoch, {(topic_name, 0): 5}) == {(topic_name, 0): NONE}
    assert fetch_stable(client, group, topic_name, [0]) == {0: (-1, UNSTABLE_OFFSET_COMMIT)}
    assert end_txn(client, txn, pid, epoch, commit=True) == NONE
    wait_state(client, txn, "CompleteCommit")
    assert fetch_stable(client, group, topic_name, [0, 1]) == {0: (5, NONE), 1: (-1, NONE)}
    # the transaction is over: a late commit of the same epoch is refused; a fenced one likewise
    assert txn_offset_commit(client, 2, txn, group, pid, epoch, {(topic_name, 1): 9}) == {(topic_name, 1): INVALID_TXN_STATE}
    init_ok(client, txn)
    assert txn_offset_commit(client, 3, txn, group, pid, epoch, {(topic_name, 1): 9}) == {
        (topic_name, 1): INVALID_PRODUCER_EPOCH}
    assert fetch_stable(client, group, topic_name, [1]) == {1: (-1, NONE)}


# -- switched off ----------------------------------------------------------------------------------

def test_verification_disabled_keeps_the_old_behaviour(broker_factory: Any, topic_name: str) -> None:
    b = broker_factory({**OVERRIDES, "transaction.partition.verification.enable": "false"})
    create_topic(b.bootstrap_servers, topic_name, num_partitions=2)
    with RawClient(b.bootstrap_servers) as c:
        ensure_txn_topic(c)
        txn = new_txn_id()
        pid, epoch = init_ok(c, txn)
        assert add_partitions(c, txn, pid, epoch, {topic_name: [0]}) == {(topic_name, 0): NONE}
        # an un-added partition takes the batch; its transaction is unknown to the coordinator
        assert produce(c, 9, txn, {(topic_name, 1): txn_batch(pid, epoch, 0)}) == {(topic_name, 1): (NONE, 0, None)}
        assert produce(c, 11, txn, {(topic_name, 1): txn_batch(pid, epoch, 2)}) == {(topic_name, 1): (NONE, 2, None)}
        assert offsets(c, topic_name, 1) == (4, 0)
        group = "g-" + topic_name
        find_coordinator(c, group)
        assert txn_offset_commit(c, 3, txn, group, pid, epoch, {(topic_name, 0): 5}) == {(topic_name, 0): NONE}
        assert fetch_stable(c, group, topic_name, [0]) == {0: (-1, UNSTABLE_OFFSET_COMMIT)}
        assert end_txn(c, txn, pid, epoch, commit=False) == NONE
        wait_state(c, txn, "CompleteAbort")
        # the marker went only to partition 0: partition 1's transaction stays open
        assert offsets(c, topic_name, 0) == (1, 1)
        assert offsets(c, topic_name, 1) == (4, 0)
