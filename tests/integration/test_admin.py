"""Topic administration end to end: kafka-python's KafkaAdminClient, confluent-kafka's AdminClient,
and metadata-driven auto-creation, against real kafkalite brokers."""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from tests.harness import BrokerProcess
from tests.integration.util import (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_TOPIC_EXCEPTION,
                                    LEADER_NOT_AVAILABLE, TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION,
                                    RawClient, Rec, build_batch, wait_for_topic, wait_until)

TIMEOUT = 15.0
INVALID_NAMES = ["", ".", "..", "a" * 250, "bad/name", "sp ace"]
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def kp_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    yield a
    a.close()


@pytest.fixture(scope="module")
def cf_admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def kp_create(admin: KafkaAdminClient, name: str, partitions: int = 1, rf: int = 1,
              validate_only: bool = False) -> tuple[int, Any]:
    r = admin.create_topics({name: {"num_partitions": partitions, "replication_factor": rf}},
                            validate_only=validate_only, raise_errors=False)
    [t] = r["topics"]
    assert t["name"] == name
    return t["error_code"], t


def as_uuid(v: Any) -> uuid.UUID:
    return v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))


def assert_single_broker_layout(topic: dict[str, Any], partitions: int) -> None:
    assert topic["error_code"] == 0
    parts = sorted(topic["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in parts] == list(range(partitions))
    for p in parts:
        assert (p["error_code"], p["leader_id"], list(p["replica_nodes"]), list(p["isr_nodes"])) == (0, 0, [0], [0])


# ---------------------------------------------------------------------------------------------
# kafka-python KafkaAdminClient
# ---------------------------------------------------------------------------------------------

def test_kp_create_describe_list(kp_admin: KafkaAdminClient, topic_name: str) -> None:
    code, t = kp_create(kp_admin, topic_name, partitions=5)
    assert code == 0, t
    kp_admin.wait_for_topics([topic_name], timeout_ms=10000)
    assert topic_name in kp_admin.list_topics()
    [d] = kp_admin.describe_topics([topic_name])
    assert d["name"] == topic_name and d["is_internal"] is False
    assert_single_broker_layout(d, 5)
    assert as_uuid(d["topic_id"]) != ZERO_UUID


def test_kp_create_errors(kp_admin: KafkaAdminClient, topic_name: str) -> None:
    assert kp_create(kp_admin, topic_name, 2)[0] == 0
    assert kp_create(kp_admin, topic_name, 2)[0] == TOPIC_ALREADY_EXISTS
    assert kp_create(kp_admin, topic_name, 7)[0] == TOPIC_ALREADY_EXISTS
    for bad in INVALID_NAMES:
        assert kp_create(kp_admin, bad)[0] == INVALID_TOPIC_EXCEPTION, repr(bad)
    for n in (0, -2):
        assert kp_create(kp_admin, topic_name + f"-p{n}", partitions=n)[0] == INVALID_PARTITIONS, n
    assert kp_create(kp_admin, topic_name + "-rf3", rf=3)[0] == INVALID_REPLICATION_FACTOR
    assert kp_create(kp_admin, topic_name + "-rf0", rf=0)[0] == INVALID_REPLICATION_FACTOR
    # None of the refused topics exists, and the existing one kept its 2 partitions.
    names = set(kp_admin.list_topics())
    assert not {topic_name + s for s in ("-p0", "-p-2", "-rf3", "-rf0")} & names
    [d] = kp_admin.describe_topics([topic_name])
    assert len(d["partitions"]) == 2


def test_kp_validate_only(kp_admin: KafkaAdminClient, topic_name: str) -> None:
    assert kp_create(kp_admin, topic_name, 3, validate_only=True)[0] == 0
    assert kp_create(kp_admin, "bad/name", validate_only=True)[0] == INVALID_TOPIC_EXCEPTION
    assert kp_create(kp_admin, topic_name, 0, validate_only=True)[0] == INVALID_PARTITIONS
    assert topic_name not in kp_admin.list_topics()
    [d] = kp_admin.describe_topics([topic_name])
    assert d["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    # A real create afterwards succeeds, and validate_only now reports it exists.
    assert kp_create(kp_admin, topic_name, 3)[0] == 0
    assert kp_create(kp_admin, topic_name, 3, validate_only=True)[0] == TOPIC_ALREADY_EXISTS


def test_kp_delete_topics(broker: BrokerProcess, kp_admin: KafkaAdminClient, topic_name: str) -> None:
    assert kp_create(kp_admin, topic_name, 2)[0] == 0
    kp_admin.wait_for_topics([topic_name], timeout_ms=10000)
    # Some data in it, so deletion has files to remove.
    with RawClient(broker.bootstrap_servers) as c:
        assert c.produce(topic_name, 1, build_batch([Rec(b"k", b"v")])).error_code == 0
    r = kp_admin.delete_topics([topic_name], raise_errors=False)
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [(topic_name, 0)]

    def gone() -> bool:
        [d] = kp_admin.describe_topics([topic_name])
        return d["error_code"] == UNKNOWN_TOPIC_OR_PARTITION and topic_name not in kp_admin.list_topics()
    wait_until(gone, TIMEOUT, what=f"{topic_name} deleted")
    r = kp_admin.delete_topics([topic_name, topic_name + "-never"], raise_errors=False)
    assert sorted((t["name"], t["error_code"]) for t in r["topics"]) == sorted(
        [(topic_name, UNKNOWN_TOPIC_OR_PARTITION), (topic_name + "-never", UNKNOWN_TOPIC_OR_PARTITION)])
    # The name can be reused; the new topic starts empty with a new id.
    assert kp_create(kp_admin, topic_name, 1)[0] == 0
    with RawClient(broker.bootstrap_servers) as c:
        wait_for_topic(c, topic_name, 1)
        assert c.list_offset(topic_name, 0, -1).offset == 0


# ---------------------------------------------------------------------------------------------
# confluent-kafka AdminClient
# ---------------------------------------------------------------------------------------------

def cf_create_error(admin: AdminClient, topic: NewTopic, validate_only: bool = False) -> int:
    fut = admin.create_topics([topic], operation_timeout=10, request_timeout=10,
                              validate_only=validate_only)[topic.topic]
    try:
        fut.result(timeout=TIMEOUT)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def test_cf_create_describe_list_delete(cf_admin: AdminClient, topic_name: str) -> None:
    assert cf_create_error(cf_admin, NewTopic(topic_name, num_partitions=4, replication_factor=1)) == 0
    wait_until(lambda: topic_name in cf_admin.list_topics(timeout=5).topics, TIMEOUT, what="listed")
    md = cf_admin.list_topics(timeout=5)
    assert [b.id for b in md.brokers.values()] == [0]
    assert md.controller_id == 0
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2, 3]
    for p in t.partitions.values():
        assert (p.leader, list(p.replicas), list(p.isrs), p.error) == (0, [0], [0], None)

    [desc] = [f.result(timeout=TIMEOUT) for f in cf_admin.describe_topics(TopicCollection([topic_name])).values()]
    assert desc.name == topic_name and not desc.is_internal
    assert str(desc.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"  # the all-zero uuid, base64
    assert [(p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr]) for p in desc.partitions] == [
        (i, 0, [0], [0]) for i in range(4)]

    assert cf_admin.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=TIMEOUT) is None
    wait_until(lambda: topic_name not in cf_admin.list_topics(timeout=5).topics, TIMEOUT, what="deleted")
    with pytest.raises(KafkaException) as ei:
        cf_admin.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_cf_create_errors(cf_admin: AdminClient, topic_name: str) -> None:
    assert cf_create_error(cf_admin, NewTopic(topic_name, num_partitions=1, replication_factor=1)) == 0
    assert cf_create_error(cf_admin, NewTopic(topic_name, num_partitions=1, replication_factor=1)) == \
        KafkaError.TOPIC_ALREADY_EXISTS
    assert cf_create_error(cf_admin, NewTopic(topic_name + "-rf3", num_partitions=1, replication_factor=3)) == \
        KafkaError.INVALID_REPLICATION_FACTOR
    for bad in ["bad/name", "sp ace", "..", "a" * 250]:
        assert cf_create_error(cf_admin, NewTopic(bad, num_partitions=1, replication_factor=1)) == \
            KafkaError.TOPIC_EXCEPTION, bad
    assert cf_create_error(cf_admin, NewTopic(topic_name + "-v", num_partitions=2, replication_factor=1),
                           validate_only=True) == 0
    assert topic_name + "-v" not in cf_admin.list_topics(timeout=5).topics
    assert topic_name + "-rf3" not in cf_admin.list_topics(timeout=5).topics


# ---------------------------------------------------------------------------------------------
# Auto-creation and topic ids across restarts (brokers of the test's own)
# ---------------------------------------------------------------------------------------------

def test_auto_create_enabled(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"auto.create.topics.enable": "true", "num.partitions": "4"})
    with RawClient(b.bootstrap_servers) as c:
        # The request flag off: no creation even though the broker allows it.
        md = c.metadata(["auto-a"], allow_auto_topic_creation=False)
        assert [(t.name, t.error_code) for t in md.topics] == [("auto-a", UNKNOWN_TOPIC_OR_PARTITION)]
        md = c.metadata(["auto-a"], allow_auto_topic_creation=True)
        # Kafka answers LEADER_NOT_AVAILABLE for a topic it has just started creating; a broker that
        # creates synchronously may answer with the topic directly.
        [t] = md.topics
        assert t.name == "auto-a" and t.error_code in (0, LEADER_NOT_AVAILABLE)
        t = wait_for_topic(c, "auto-a", 4)
        assert as_uuid(t.topic_id) != ZERO_UUID
        # Asking again does not re-create it (same id).
        [t2] = c.metadata(["auto-a"], allow_auto_topic_creation=True).topics
        assert (t2.error_code, t2.topic_id) == (0, t.topic_id)
        # Invalid names are refused by auto-creation.
        md = c.metadata(INVALID_NAMES, allow_auto_topic_creation=True)
        assert sorted((t.name, t.error_code) for t in md.topics) == sorted(
            (n, INVALID_TOPIC_EXCEPTION) for n in INVALID_NAMES)
        all_md = c.metadata(None)
        assert [t.name for t in all_md.topics] == ["auto-a"]


def test_auto_create_disabled(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"auto.create.topics.enable": "false"})
    with RawClient(b.bootstrap_servers) as c:
        for _ in range(2):
            md = c.metadata(["auto-b"], allow_auto_topic_creation=True)
            assert [(t.name, t.error_code) for t in md.topics] == [("auto-b", UNKNOWN_TOPIC_OR_PARTITION)]
        assert c.metadata(None).topics == []
        # Explicit creation still works.
        assert c.create_topic("auto-b", 2).error_code == 0
        wait_for_topic(c, "auto-b", 2)


def test_topic_ids_stable_across_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    names = ["ids-a", "ids-b"]
    with RawClient(b.bootstrap_servers) as c:
        for n in names:
            assert c.create_topic(n, 2).error_code == 0
        before = {n: wait_for_topic(c, n, 2).topic_id for n in names}
    assert len(set(before.values())) == 2 and ZERO_UUID not in {as_uuid(v) for v in before.values()}
    assert b.stop() == 0
    b.start()
    with RawClient(b.bootstrap_servers) as c:
        after = {n: wait_for_topic(c, n, 2).topic_id for n in names}
    assert after == before
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10000)
    try:
        described = {d["name"]: as_uuid(d["topic_id"]) for d in a.describe_topics(names)}
        assert described == {n: as_uuid(v) for n, v in before.items()}
    finally:
        a.close()
