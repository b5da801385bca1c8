"""franz-go (kgo v1.22, kadm v1.19), the Go client, against kafkalite and Apache Kafka 3.9.1.

tests/go/ is a small Go program (module pinned by its go.mod and go.sum) built once per source
digest by tests/support/gocheck.py and run as a subprocess; it prints one JSON object per line,
which these tests check exactly. The record data (keys, values with nulls, headers with a repeated
key and a null value, explicit timestamps) is the Java client tests' own, so the expectations
(murmur2 partitions, offsets contiguous per partition) come from the same independent helpers.

Every test also runs against Apache Kafka 3.9.1 (the `kafka_oracle` session fixture: ZooKeeper
mode, one broker) with the same exact expectations, so what is asserted here is Kafka's
behaviour as franz-go sees it, not kafkalite's idea of it. The produce/consume round trip runs
every codec against kafkalite and four of its cases against Kafka (a Kafka round trip costs
little, but the codecs' batches are already compared byte-for-byte by other tests).

Missing Go FAILS these tests on purpose: they must run, not skip.
"""
from __future__ import annotations

import base64
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.test_java_client import (BASE_TS, N, NUM_PARTITIONS, assert_records_as_sent,
                                                expected_headers, expected_layout, expected_value,
                                                java_partition)
from tests.support.gocheck import GoBuildError, GoCheck, GoRun, build

ZERO_TOPIC_ID = base64.b64encode(bytes(16)).decode()  # kadm's TopicID.String() of Uuid.ZERO
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="session")
def gocheck() -> GoCheck:
    try:
        return GoCheck(build())
    except GoBuildError as exc:
        pytest.fail(str(exc))


@dataclass(frozen=True)
class Target:
    """A broker the Go client runs against: kafkalite or Apache Kafka."""
    name: str
    bootstrap_servers: str
    broker_id: int


TARGETS = ["kafkalite", "kafka-3.9.1"]


def make_target(request: pytest.FixtureRequest, name: str) -> Target:
    if name == "kafkalite":
        b = request.getfixturevalue("broker")
        return Target(name, b.bootstrap_servers, 0)
    kafka = request.getfixturevalue("kafka_oracle")
    return Target(name, kafka.bootstrap_servers, kafka.broker_id)


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    return make_target(request, request.param)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def ok(run: GoRun) -> GoRun:
    assert run.returncode == 0 and not run.errors(), run.report()
    return run


def records_by_partition(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    d: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        d[r["partition"]].append(r)
    return dict(d)


# ---- admin (kadm) --------------------------------------------------------------------------------

def test_admin_topic_lifecycle_configs_and_partitions(gocheck: GoCheck, target: Target) -> None:
    t = unique("go-admin")
    keys = "cleanup.policy,retention.ms,max.message.bytes"
    run = ok(gocheck.run(
        target.bootstrap_servers,
        f"create-topic {t} 3",
        f"expect-error TOPIC_ALREADY_EXISTS create-topic {t} 3",
        f"describe-topic {t}",
        "list-topics",
        f"describe-configs {t} {keys}",
        f"alter-configs {t} set:retention.ms=3600000 append:cleanup.policy=compact",
        f"describe-configs {t} {keys}",
        f"alter-configs {t} delete:retention.ms subtract:cleanup.policy=delete",
        f"describe-configs {t} {keys}",
        f"expect-error INVALID_CONFIG alter-configs {t} set:retention.ms=soon",
        f"expect-error INVALID_CONFIG alter-configs {t} append:retention.ms=5",
        f"expect-error UNKNOWN_SERVER_ERROR alter-configs {t} subtract:no.such.config=1",
        f"create-partitions {t} 5",
        f"expect-error INVALID_PARTITIONS create-partitions {t} 4",
        f"describe-topic {t}",
        f"delete-topic {t}",
        "list-topics",
        f"expect-error UNKNOWN_TOPIC_OR_PARTITION describe-topic {t}",
    ))
    (created,) = run.of("created")
    # Replication factor -1 (CreateTopics v4+) is the broker's default.replication.factor, 1.
    assert (created["topic"], created["numPartitions"], created["replicationFactor"]) == (t, 3, 1)
    assert created["topicId"] != ZERO_TOPIC_ID

    first, grown = run.of("described")
    for d, count in ((first, 3), (grown, 5)):
        assert d["topic"] == t and d["internal"] is False and d["topicId"] == created["topicId"]
        assert d["partitions"] == [
            {"partition": p, "leader": target.broker_id, "leaderEpoch": 0, "replicas": [target.broker_id],
             "isr": [target.broker_id]} for p in range(count)]

    before, after = run.of("topics")
    assert t in before["topics"] and t not in after["topics"]
    assert not [n for n in before["topics"] if n.startswith("__")], "kadm ListTopics hides internal"

    defaults, altered, reverted = (e["configs"] for e in run.of("configs"))
    view = [{k: (c["value"], c["source"]) for k, c in cfgs.items()}
            for cfgs in (defaults, altered, reverted)]
    assert view[0] == {"cleanup.policy": ("delete", "DEFAULT_CONFIG"),
                       "retention.ms": ("604800000", "DEFAULT_CONFIG"),
                       "max.message.bytes": ("1048588", "DEFAULT_CONFIG")}
    # APPEND to a LIST config starts from its default, as Kafka's IncrementalAlterConfigs does.
    assert view[1] == {"cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
                       "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
                       "max.message.bytes": ("1048588", "DEFAULT_CONFIG")}
    assert view[2] == {"cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG"),
                       "retention.ms": ("604800000", "DEFAULT_CONFIG"),
                       "max.message.bytes": ("1048588", "DEFAULT_CONFIG")}

    assert [e["error"] for e in run.of("expected_error")] == [
        "TOPIC_ALREADY_EXISTS", "INVALID_CONFIG", "INVALID_CONFIG", "UNKNOWN_SERVER_ERROR",
        "INVALID_PARTITIONS", "UNKNOWN_TOPIC_OR_PARTITION"]
    # IncrementalAlterConfigs' refusals word for word (kadm: "<code>: <description>: <message>"),
    # as Kafka 3.9's ZkAdminManager words them; an unknown key to APPEND/SUBTRACT to fails a Scala
    # Map lookup there, answered UNKNOWN_SERVER_ERROR without a message.
    invalid = "INVALID_CONFIG: Configuration is invalid.: "
    assert [e["message"] for e in run.of("expected_error")][1:4] == [
        invalid + f"Invalid config value for resource ConfigResource(type=TOPIC, name='{t}'): "
                  "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        invalid + "Config value append is not allowed for config key: retention.ms",
        "UNKNOWN_SERVER_ERROR: The server experienced an unexpected error when processing the "
        "request.: ",
    ]


# ---- produce and consume (kgo) -------------------------------------------------------------------

ROUNDTRIP_CASES = [(c, "all") for c in CODECS] + [("none", "0"), ("lz4", "1")]
KAFKA_ROUNDTRIP_CASES = [("none", "all"), ("zstd", "all"), ("none", "0"), ("lz4", "1")]


@pytest.fixture
def roundtrip_target(request: pytest.FixtureRequest) -> Target:
    return make_target(request, request.param)


@pytest.mark.parametrize("roundtrip_target,compression,acks", [
    pytest.param(name, c, a, id=f"{name}-{c}-acks{a}")
    for name in TARGETS
    for c, a in (ROUNDTRIP_CASES if name == "kafkalite" else KAFKA_ROUNDTRIP_CASES)
], indirect=["roundtrip_target"])
def test_produce_consume_roundtrip(gocheck: GoCheck, roundtrip_target: Target, compression: str,
                                   acks: str) -> None:
    target = roundtrip_target
    t = unique("go-rt")
    layout = expected_layout()
    ts_of = {i: BASE_TS + i for i in range(N)}
    query = BASE_TS + 13
    run = ok(gocheck.run(target.bootstrap_servers,
                         f"create-topic {t} {NUM_PARTITIONS}",
                         f"produce {t} {N} {compression} {acks} {BASE_TS}",
                         f"consume {t} {N} 20000 read_uncommitted",
                         f"list-offsets {t} {query}"))

    # -- producer's view: kgo is idempotent by default, and must not be with acks 0 or 1 --
    sent = run.of("sent")
    assert [e["i"] for e in sent] == list(range(N))
    for e in sent:
        assert e["topic"] == t and e["partition"] == java_partition(e["key"]), e
        assert e["timestamp"] == ts_of[e["i"]], e
    idempotent = acks == "all"
    producer_ids = {(e["producerId"], e["producerEpoch"]) for e in sent}
    if idempotent:
        ((pid, epoch),) = producer_ids
        assert pid >= 0 and epoch == 0
    else:
        assert producer_ids == {(-1, -1)}
    if acks != "0":
        for p, idxs in layout.items():
            assert [sent[i]["offset"] for i in idxs] == list(range(len(idxs))), f"partition {p}"

    # -- consumer's view: exact records, batches compressed with the producer's codec --
    by_partition = records_by_partition(run.of("record"))
    assert sorted(by_partition) == sorted(layout)
    assert_records_as_sent(by_partition, layout, ts_of)
    for p in layout:
        for r in by_partition[p]:
            assert r["transactional"] is False, r
            assert r["compression"] == compression, r
            if idempotent:
                assert (r["producerId"], r["producerEpoch"]) == (pid, 0), r
            else:
                assert (r["producerId"], r["producerEpoch"]) == (-1, -1), r

    # -- ListOffsets: earliest, latest, latest committed (LSO) and by time --
    (offs,) = run.of("list_offsets")
    ends = {str(p): len(layout[p]) for p in range(NUM_PARTITIONS)}
    assert offs["start"] == {str(p): [0, -1, 0] for p in range(NUM_PARTITIONS)}
    assert offs["end"] == {p: [end, -1, 0] for p, end in ends.items()}
    assert offs["committed"] == offs["end"]
    after = {}
    for p in range(NUM_PARTITIONS):
        hits = [(off, ts_of[i]) for off, i in enumerate(layout[p]) if ts_of[i] >= query]
        # kadm answers "none at or after" with the end offset (it asks again for LATEST).
        after[str(p)] = [hits[0][0], hits[0][1], 0] if hits else [ends[str(p)], -1, 0]
    assert offs["after"] == after


def test_delete_records_moves_the_log_start(gocheck: GoCheck, target: Target) -> None:
    t = unique("go-del")
    layout = expected_layout()
    cut = {0: 3, 1: len(layout[1]), 2: 0}  # part of p0, all of p1 (the high watermark), none of p2
    remaining = N - sum(cut.values())
    run = ok(gocheck.run(target.bootstrap_servers,
                         f"create-topic {t} {NUM_PARTITIONS}",
                         f"produce {t} {N} zstd all {BASE_TS}",
                         f"delete-records {t} " + ",".join(f"{p}={o}" for p, o in cut.items()),
                         f"list-offsets {t} 0",
                         f"consume {t} {remaining} 20000 read_uncommitted",
                         f"expect-error OFFSET_OUT_OF_RANGE delete-records {t} 0={len(layout[0]) + 1}"))
    (deleted,) = run.of("records_deleted")
    assert deleted["lowWatermarks"] == {str(p): o for p, o in cut.items()}
    (offs,) = run.of("list_offsets")
    assert {p: v[0] for p, v in offs["start"].items()} == {str(p): o for p, o in cut.items()}
    assert {p: v[0] for p, v in offs["end"].items()} == {str(p): len(layout[p]) for p in layout}
    by_partition = records_by_partition(run.of("record"))
    for p, idxs in layout.items():
        got = by_partition.get(p, [])
        assert [r["offset"] for r in got] == list(range(cut[p], len(idxs))), f"partition {p}"
        assert [r["key"] for r in got] == [f"k-{i}" for i in idxs[cut[p]:]], f"partition {p}"


# ---- consumer groups -----------------------------------------------------------------------------

def test_consumer_group_two_members_rebalance_and_commit(gocheck: GoCheck,
                                                        target: Target) -> None:
    t, group = unique("go-grp"), unique("go-group")
    second = 24
    run = ok(gocheck.run(target.bootstrap_servers,
                         f"create-topic {t} {NUM_PARTITIONS}",
                         f"produce {t} {N} none all {BASE_TS}",
                         f"group {t} {group} {N} {second}",
                         f"group-offsets {group}",
                         f"describe-group {group}",
                         "list-groups",
                         timeout=120))
    everything = list(range(NUM_PARTITIONS))
    alone, joined, left = run.of("assignment")
    assert alone["members"] == {"a": everything}
    a_owns, b_owns = joined["members"]["a"], joined["members"]["b"]
    assert a_owns and b_owns and sorted(a_owns + b_owns) == everything, joined
    assert left["members"] == {"a": everything}

    consumed = [(e["phase"], e["member"], e["count"]) for e in run.of("member_consumed")]
    records = run.of("record")
    first_records = [r for r in records if r["consumer"] == "a"][:N]
    assert {r["key"] for r in first_records} == {f"k-{i}" for i in range(N)}
    later = records[N:]
    # Each member read only its own partitions, from the offsets a committed: no record twice.
    for r in later:
        assert r["partition"] in joined["members"][r["consumer"]], r
    assert sorted(r["key"] for r in later) == sorted(f"k-{i}" for i in range(N, N + second))
    per_member = Counter(r["consumer"] for r in later)
    assert consumed == [("alone", "a", N), ("joined", "a", per_member["a"]),
                        ("joined", "b", per_member["b"])]
    assert len(records) == N + second

    # Described while both were members, after b left, and once a closed too.
    (d_joined,) = [e["description"] for e in run.of("group_described") if e.get("phase") == "joined"]
    (d_left,) = [e["description"] for e in run.of("group_described") if e.get("phase") == "left"]
    (d_closed,) = [e["description"] for e in run.of("group_described") if "phase" not in e]
    for d, members in ((d_joined, {"gocheck-a", "gocheck-b"}), (d_left, {"gocheck-a"})):
        assert (d["state"], d["protocolType"], d["protocol"], d["error"]) == (
            "Stable", "consumer", "cooperative-sticky", None), d
        assert d["coordinator"] == target.broker_id
        assert {m["clientId"] for m in d["members"]} == members
        for m in d["members"]:
            assert m["subscribed"] == [t] and m["clientHost"].startswith("/127.0.0.1"), m
    assigned = {m["clientId"]: m["assigned"] for m in d_joined["members"]}
    assert assigned == {"gocheck-a": {t: a_owns}, "gocheck-b": {t: b_owns}}
    assert d_closed["state"] == "Empty" and d_closed["members"] == [], d_closed

    # Committed offsets: every partition at its end (N + second records in all).
    (offsets,) = run.of("group_offsets")
    total = Counter(java_partition(f"k-{i}") for i in range(N + second))
    assert offsets["offsets"] == {f"{t}-{p}": total[p] for p in everything}
    (listed,) = run.of("groups")
    assert [g for g in listed["groups"] if g["group"] == group] == [
        {"group": group, "protocolType": "consumer", "state": "Empty", "coordinator": target.broker_id}]


# ---- transactions --------------------------------------------------------------------------------

def test_transactions_commit_and_abort_read_committed(gocheck: GoCheck, target: Target) -> None:
    t, tid = unique("go-txn"), unique("go-tid")
    n = 12
    run = ok(gocheck.run(target.bootstrap_servers,
                         f"create-topic {t} {NUM_PARTITIONS}",
                         f"txn {t} {tid} {n} aborted abort",
                         f"txn {t} {tid} {n} committed commit",
                         f"consume {t} {n} 20000 read_committed",
                         f"consume {t} {2 * n} 20000 read_uncommitted",
                         f"list-offsets {t} 0"))
    sent = run.of("txn_sent")
    aborted = [e for e in sent if e["tag"] == "aborted"]
    committed = [e for e in sent if e["tag"] == "committed"]
    ((pid, epoch_a),) = {(e["producerId"], e["producerEpoch"]) for e in aborted}
    ((pid_c, epoch_c),) = {(e["producerId"], e["producerEpoch"]) for e in committed}
    # A second client with the same transactional id: same producer id, epoch bumped.
    assert pid >= 0 and pid_c == pid and epoch_c == epoch_a + 1
    per_partition = Counter(java_partition(f"k-{i}") for i in range(n))
    for p in range(NUM_PARTITIONS):
        # Aborted data at 0..c-1, its ABORT marker at c; committed data from c+1, COMMIT after it.
        c = per_partition[p]
        assert sorted(e["offset"] for e in aborted if e["partition"] == p) == list(range(c))
        assert sorted(e["offset"] for e in committed if e["partition"] == p) == list(
            range(c + 1, 2 * c + 1))

    rc = [r for r in run.of("record") if r["consumer"] == "read_committed"]
    ru = [r for r in run.of("record") if r["consumer"] == "read_uncommitted"]
    assert sorted(r["value"] for r in rc) == sorted(f"committed-{i}" for i in range(n))
    assert sorted(r["value"] for r in ru) == sorted(
        [f"committed-{i}" for i in range(n)] + [f"aborted-{i}" for i in range(n)])
    for r in ru:
        assert r["transactional"] is True and r["producerId"] == pid, r
        assert r["partition"] == java_partition(r["key"]), r
    (offs,) = run.of("list_offsets")
    ends = {str(p): [2 * per_partition[p] + 2, -1, 0] for p in range(NUM_PARTITIONS)}
    assert offs["end"] == ends and offs["committed"] == ends  # both markers written: LSO = HW


def test_group_transact_session_exactly_once(gocheck: GoCheck, target: Target) -> None:
    src, dst = unique("go-src"), unique("go-dst")
    group, tid = unique("go-eos"), unique("go-eos-tid")
    run = ok(gocheck.run(target.bootstrap_servers,
                         f"create-topic {src} {NUM_PARTITIONS}",
                         f"create-topic {dst} {NUM_PARTITIONS}",
                         f"produce {src} {N} lz4 all {BASE_TS}",
                         f"eos {src} {dst} {group} {tid} {N}",
                         f"consume {dst} {N} 20000 read_committed",
                         f"group-offsets {group}",
                         f"describe-group {group}",
                         timeout=120))
    (done,) = run.of("eos_done")
    transactions = run.of("eos_transaction")
    assert done["records"] == N and all(e["committed"] for e in transactions), transactions
    assert sum(e["records"] for e in transactions) == N
    out = [r for r in run.of("record") if r["consumer"] == "read_committed"]
    assert sorted((r["key"], r["value"]) for r in out) == sorted(
        (f"k-{i}", None if expected_value(i) is None else expected_value(i).upper())
        for i in range(N))
    for r in out:
        assert r["transactional"] is True and r["partition"] == java_partition(r["key"]), r
        assert r["headers"] == expected_headers(int(r["key"][2:])), r
    (offsets,) = run.of("group_offsets")
    layout = expected_layout()
    assert offsets["offsets"] == {f"{src}-{p}": len(layout[p]) for p in range(NUM_PARTITIONS)}
    (described,) = run.of("group_described")
    assert described["description"]["state"] == "Empty"


def test_admin_transactions_producers_and_group_offsets(gocheck: GoCheck, target: Target) -> None:
    """kadm's DescribeTransactions, ListTransactions, DescribeProducers, OffsetCommit by an admin
    (no member), OffsetDelete and DeleteGroups."""
    t, tid, group = unique("go-adm2"), unique("go-adm2-tid"), unique("go-adm2-group")
    n = 6
    per_partition = Counter(java_partition(f"k-{i}") for i in range(n))
    run = ok(gocheck.run(
        target.bootstrap_servers,
        f"create-topic {t} {NUM_PARTITIONS}",
        f"txn {t} {tid} {n} x commit",
        # read_committed sees the records once the COMMIT markers are written: the coordinator
        # has then completed the transaction (Kafka answers EndTxn before writing markers).
        f"consume {t} {n} 20000 read_committed",
        f"describe-txn {tid}",
        "list-txns",
        f"describe-producers {t}",
        f"expect-error TRANSACTIONAL_ID_NOT_FOUND describe-txn {tid}-missing",
        f"commit-offsets {group} {t} 0=1,1=2,2=3",
        f"group-offsets {group}",
        f"describe-group {group}",
        "list-groups",
        f"delete-offsets {group} {t}",
        f"group-offsets {group}",
        f"commit-offsets {group} {t} 0=4",
        f"delete-group {group}",
        f"expect-error GROUP_ID_NOT_FOUND delete-group {group}",
        "list-groups",
        f"group-offsets {group}",
    ))
    ((pid, epoch),) = {(e["producerId"], e["producerEpoch"]) for e in run.of("txn_sent")}
    (described,) = run.of("txn_described")
    assert described == {
        "event": "txn_described", "transactionalId": tid, "state": "CompleteCommit",
        "producerId": pid, "producerEpoch": epoch, "timeoutMs": 40000,  # kgo's default timeout
        "started": True, "coordinator": target.broker_id, "topics": {}}
    (listed,) = run.of("txns")
    assert [x for x in listed["transactions"] if x["transactionalId"] == tid] == [
        {"transactionalId": tid, "producerId": pid, "state": "CompleteCommit",
         "coordinator": target.broker_id}]
    (producers,) = run.of("producers")
    # One producer per partition it wrote to: sequences 0..c-1, the transaction complete.
    assert producers["partitions"] == {
        str(p): ([{"producerId": pid, "producerEpoch": epoch, "lastSequence": per_partition[p] - 1,
                   "coordinatorEpoch": 0, "currentTxnStartOffset": -1}] if per_partition[p] else [])
        for p in range(NUM_PARTITIONS)}

    committed, after_delete, after_group_delete = run.of("group_offsets")
    assert committed["offsets"] == {f"{t}-0": 1, f"{t}-1": 2, f"{t}-2": 3}
    assert after_delete["offsets"] == {} and after_group_delete["offsets"] == {}
    (deleted,) = run.of("offsets_deleted")
    assert deleted["errors"] == {str(p): None for p in range(NUM_PARTITIONS)}
    (d,) = run.of("group_described")
    # A group known only from admin commits: Empty, no protocol type.
    assert d["description"] == {"state": "Empty", "protocolType": "", "protocol": "", "members": [],
                                "coordinator": target.broker_id, "error": None}
    before, after = run.of("groups")
    assert [x for x in before["groups"] if x["group"] == group] == [
        {"group": group, "protocolType": "", "state": "Empty", "coordinator": target.broker_id}]
    assert [x for x in after["groups"] if x["group"] == group] == []
    assert [e["error"] for e in run.of("expected_error")] == ["TRANSACTIONAL_ID_NOT_FOUND",
                                                             "GROUP_ID_NOT_FOUND"]
