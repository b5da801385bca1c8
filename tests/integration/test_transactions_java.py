"""Transactions with the official Java client (kafka-clients 3.9.1 and 4.4.0) against kafkalite.

tests/java/TxnCheck.java is compiled once per session and client version (cached in the temp dir
like ClientCheck) and run as a subprocess printing one JSON object per line. The jars, JVM flags,
logging config and the run report are those of test_java_client.py, imported from there.

Checked exactly: an aborted and a committed transaction of N records across three partitions
with sendOffsetsToTransaction; read_committed vs read_uncommitted records and end offsets (LSO vs
high watermark) while a transaction is open and after; the group's offsets only after commit;
Admin describeTransactions / listTransactions / describeProducers during and after the
transaction; zombie fencing (ProducerFencedException). Both tests run at both client versions:
the transactional producer's request sequence is what differs most between client releases.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

import pytest

from tests.harness import BrokerProcess
from tests.integration.test_java_client import (JAVA_DIR, JavaClient, compile_check_program,
                                                java_version_params)
from tests.integration.test_transactions_confluent import (CONTROL_ABORT, CONTROL_COMMIT, marker,
                                                           raw_batches)

pytestmark = pytest.mark.java

SOURCE = JAVA_DIR / "TxnCheck.java"
N = 30
PARTITIONS = 3
PER_PART = N // PARTITIONS
OFFSETS_TOPIC_PARTITIONS = 50  # offsets.topic.num.partitions default
BROKER_ID = 0


@pytest.fixture(scope="session", params=java_version_params())
def txn_java(request: pytest.FixtureRequest) -> JavaClient:
    version: str = request.param
    return JavaClient(*compile_check_program(SOURCE, version), main_class="TxnCheck",
                      default_timeout=120.0, version=version)


@pytest.fixture(scope="module")
def txn_broker() -> Any:
    with BrokerProcess(overrides={"num.partitions": "3"}) as b:
        yield b


def java_string_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition(group: str) -> int:
    """Kafka's GroupCoordinator.partitionFor: Utils.abs(groupId.hashCode) % partitions."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_TOPIC_PARTITIONS


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def values_by_partition(records: list[dict[str, Any]]) -> dict[int, list[tuple[int, str]]]:
    d: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for r in records:
        d[r["partition"]].append((r["offset"], r["value"]))
    return dict(d)


def expected(tag: str, partition: int, first_offset: int) -> list[tuple[int, str]]:
    vals = [f"{tag}-{i}" for i in range(N) if i % PARTITIONS == partition]
    return list(zip(range(first_offset, first_offset + len(vals)), vals))


def test_java_committed_and_aborted_with_offsets_and_admin(txn_java: JavaClient,
                                                           txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap_servers
    topic, src, group, tid = unique("jtxn"), unique("jsrc"), unique("jgroup"), unique("jtid")
    run = txn_java.run(
        bs,
        f"create-topic {topic} {PARTITIONS}", f"create-topic {src} {PARTITIONS}",
        f"init p {tid}",
        f"txn p {topic} aborted {N} abort {group} {src} 100",
        f"group-offsets {group}",
        f"open p {topic} committed {N} {group} {src} 200",
        f"group-offsets {group}",
        f"describe-txns {tid}",
        "list-txns",
        f"describe-producers {topic} {PARTITIONS}",
        f"end-offsets {topic} read_committed",
        f"end-offsets {topic} read_uncommitted",
        "end p commit",
        f"group-offsets {group}",
        f"describe-txns {tid}",
        "list-txns",
        f"describe-producers {topic} {PARTITIONS}",
        f"end-offsets {topic} read_committed",
        f"consume {topic} read_committed {N} 20000",
        f"consume {topic} read_uncommitted {2 * N} 20000",
    )
    assert run.returncode == 0 and not run.errors(), run.report()

    # Offsets sent in the transactions: nothing after the abort, nothing while pending, then 200+p.
    g_abort, g_pending, g_commit = run.of("group_offsets")
    assert g_abort["offsets"] == {} and g_pending["offsets"] == {}
    assert g_commit["offsets"] == {f"{src}-{q}": 200 + q for q in range(PARTITIONS)}

    # Admin views while the committed transaction was open, and after it completed.
    d_open, d_done = run.of("txn_description")
    offsets_tp = f"__consumer_offsets-{offsets_partition(group)}"
    assert d_open["transactionalId"] == tid and d_open["state"] == "Ongoing", d_open
    assert d_open["coordinatorId"] == BROKER_ID
    assert d_open["producerEpoch"] == 0 and d_open["producerId"] >= 0
    assert d_open["transactionTimeoutMs"] == 60000
    assert d_open["transactionStartTimeMs"] is not None and d_open["transactionStartTimeMs"] > 0
    assert d_open["topicPartitions"] == sorted([f"{topic}-{q}" for q in range(PARTITIONS)]
                                               + [offsets_tp])
    pid = d_open["producerId"]
    assert d_done["state"] == "CompleteCommit", d_done
    assert (d_done["producerId"], d_done["producerEpoch"]) == (pid, 0)
    # Kafka's prepareComplete clears the partitions but keeps the last transaction's start time.
    assert d_done["topicPartitions"] == []
    assert d_done["transactionStartTimeMs"] == d_open["transactionStartTimeMs"]

    l_open, l_done = run.of("txn_listing")
    assert [t for t in l_open["transactions"] if t["transactionalId"] == tid] == [
        {"transactionalId": tid, "producerId": pid, "state": "Ongoing"}]
    assert [t for t in l_done["transactions"] if t["transactionalId"] == tid] == [
        {"transactionalId": tid, "producerId": pid, "state": "CompleteCommit"}]

    producers = run.of("producers")
    assert [e["partition"] for e in producers] == [0, 1, 2, 0, 1, 2]
    for e in producers[:3]:
        (st,) = e["active"]
        # Aborted data at 0..9 and its marker at 10: the open transaction starts at 11.
        assert (st["producerId"], st["producerEpoch"]) == (pid, 0), st
        assert st["currentTransactionStartOffset"] == PER_PART + 1, st
        assert st["lastSequence"] == 2 * PER_PART - 1, st  # 20 records, sequences 0..19
    for e in producers[3:]:
        (st,) = e["active"]
        assert (st["producerId"], st["producerEpoch"]) == (pid, 0), st
        assert st["currentTransactionStartOffset"] is None, st
        assert st["coordinatorEpoch"] is not None and st["coordinatorEpoch"] >= 0, st

    rc_open, ru_open, rc_done = run.of("end_offsets")
    assert rc_open["end"] == {str(q): PER_PART + 1 for q in range(PARTITIONS)}  # the LSO
    assert ru_open["end"] == {str(q): 2 * PER_PART + 1 for q in range(PARTITIONS)}  # the HW
    assert rc_done["end"] == {str(q): 2 * PER_PART + 2 for q in range(PARTITIONS)}

    rc = [r for r in run.of("record") if r["isolation"] == "read_committed"]
    ru = [r for r in run.of("record") if r["isolation"] == "read_uncommitted"]
    assert len(rc) == N and len(ru) == 2 * N, run.report()
    for q in range(PARTITIONS):
        assert values_by_partition(rc)[q] == expected("committed", q, PER_PART + 1)
        assert values_by_partition(ru)[q] == (expected("aborted", q, 0)
                                              + expected("committed", q, PER_PART + 1))
    for c in run.of("consumed"):
        assert c["positions"] == {str(q): 2 * PER_PART + 2 for q in range(PARTITIONS)}, c

    for q in range(PARTITIONS):
        controls = [(b.base_offset, marker(b)[0], b.producer_id)
                    for b in raw_batches(bs, topic, q) if b.is_control]
        assert controls == [(PER_PART, CONTROL_ABORT, pid), (2 * PER_PART + 1, CONTROL_COMMIT, pid)]


def test_java_zombie_is_fenced(txn_java: JavaClient, txn_broker: BrokerProcess) -> None:
    bs = txn_broker.bootstrap_servers
    topic, tid = unique("jfence"), unique("jtid")
    run = txn_java.run(
        bs,
        f"create-topic {topic} {PARTITIONS}",
        f"init a {tid}",
        f"open a {topic} zombie 3",
        f"init b {tid}",
        "expect-error ProducerFencedException end a commit",
        f"describe-txns {tid}",
        f"txn b {topic} live 3 commit",
        f"consume {topic} read_committed 3 20000",
        f"consume {topic} read_uncommitted 6 20000",
    )
    assert run.returncode == 0 and not run.errors(), run.report()
    (d,) = run.of("txn_description")
    # b's InitProducerId aborted a's transaction and bumped the epoch twice, as Kafka does:
    # PrepareEpochFence to 1 (the abort is written with it), then b's own bump to 2 -> Empty.
    assert d["state"] == "Empty" and d["producerEpoch"] == 2 and d["topicPartitions"] == [], d
    rc = [r["value"] for r in run.of("record") if r["isolation"] == "read_committed"]
    ru = [r["value"] for r in run.of("record") if r["isolation"] == "read_uncommitted"]
    assert sorted(rc) == ["live-0", "live-1", "live-2"]
    assert sorted(ru) == sorted(["live-0", "live-1", "live-2", "zombie-0", "zombie-1", "zombie-2"])
