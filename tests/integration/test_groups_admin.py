"""Group administration through kafka-python's and confluent-kafka's admin clients (list,
describe with members/assignments, committed offsets, delete), and __consumer_offsets as
clients see it: an internal topic nobody may produce to, holding each group in partition
abs(javaHashCode(group)) % 50 in Kafka's record layout."""
from __future__ import annotations

import gc
import re
from typing import Callable

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata, TopicPartition

from tests.harness import BrokerProcess
from tests.integration.groups_util import (GROUP_BROKER_OVERRIDES, GROUP_ID_NOT_FOUND,
                                           INVALID_TOPIC_EXCEPTION, NONE, OFFSETS_TOPIC, Fleet,
                                           committed_metadata, describe_group_raw, last_commit_metadata,
                                           find_coordinator, java_string_hash, make_topic,
                                           offset_commit_simple, offset_fetch, offsets_partition_for,
                                           produce_phase, read_offsets_topic, wait_committed, wait_consumed,
                                           wait_stable)
from tests.integration.groups_util import fleet  # noqa: F401 - the pytest fixture
from tests.integration.util import RawClient, Rec, build_batch, wait_until

UUID_RE = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
CLIENT_HOST = "/127.0.0.1"  # Kafka reports InetAddress.toString()


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_OVERRIDES)


def _start_group(fleet: Fleet, bs: str, topic: str, group: str, client: str, **kw):
    """Three members of `client` in `group`, stable, everything of one phase consumed and committed."""
    make_topic(bs, topic, 6)
    expected = produce_phase(bs, topic, range(6), 10)
    members = [fleet.spawn(client, bs, topic, group, f"{client}-admin-{i}", commit_metadata=f"m{i}", **kw)
               for i in range(3)]
    owners = wait_stable(members, range(6))
    wait_consumed(members, expected)
    for m in members:
        wait_committed(m)
    return members, owners


def _assert_dead_after_delete(bs: str, group: str, topic: str) -> None:
    """Kafka answers DescribeGroups for an unknown group with state Dead and no error up to v5;
    v6 (KIP-1043) answers GROUP_ID_NOT_FOUND."""
    v, g = describe_group_raw(bs, group)
    if v >= 6:
        assert g.error_code == GROUP_ID_NOT_FOUND, g
    else:
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data, list(g.members)) == \
            (NONE, "Dead", "", "", []), g
    assert offset_fetch(bs, group, topic, range(6)) == {p: (-1, "") for p in range(6)}


def test_kafka_python_admin_list_describe_offsets_delete(group_broker: BrokerProcess, fleet: Fleet,
                                                         topic_name: str) -> None:
    bs = group_broker.bootstrap_servers
    group = "admin-kp-" + topic_name
    members, owners = _start_group(fleet, bs, topic_name, group, "kafka-python")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    try:
        listed = [g for g in admin.list_groups() if g["group_id"] == group]
        assert len(listed) == 1 and listed[0]["protocol_type"] == "consumer", listed
        if "group_state" in listed[0]:
            assert listed[0]["group_state"] == "Stable"

        d = admin.describe_groups([group])[group]
        assert (d["error"], d["group_state"], d["protocol_type"], d["protocol_data"]) == \
            (None, "Stable", "consumer", "range"), d
        by_client = {m["client_id"]: m for m in d["members"]}
        assert set(by_client) == {m.client_id for m in members}
        for cid, m in by_client.items():
            assert re.fullmatch(re.escape(cid) + "-" + UUID_RE, m["member_id"]), m["member_id"]
            assert m["client_host"] == CLIENT_HOST and m["group_instance_id"] is None
            assert m["member_metadata"]["topics"] == [topic_name]
            parts = {p for a in m["member_assignment"]["assigned_partitions"] if a["topic"] == topic_name
                     for p in a["partitions"]}
            assert parts == owners[cid], (cid, m["member_assignment"], owners)
        assert len({m["member_id"] for m in d["members"]}) == 3

        meta_of = last_commit_metadata(members)
        assert sorted(meta_of) == list(range(6))
        offs = admin.list_group_offsets(group)[group]
        assert offs == {TopicPartition(topic_name, p): OffsetAndMetadata(10, meta_of[p], -1) for p in range(6)}, offs

        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        for m in members:
            m.close()
        wait_until(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", 10,
                   what="the group to be Empty after its members left")
        d = admin.describe_groups([group])[group]
        assert (d["group_state"], d["protocol_type"], d["members"]) == ("Empty", "consumer", []), d
        assert [g for g in admin.list_groups() if g["group_id"] == group][0]["protocol_type"] == "consumer"
        assert admin.list_group_offsets(group)[group] == offs  # an empty group keeps its offsets

        assert admin.delete_groups([group]) == {group: "OK"}
        assert [g for g in admin.list_groups() if g["group_id"] == group] == []
        assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
        assert admin.list_group_offsets(group)[group] == {}
    finally:
        admin.close()
    _assert_dead_after_delete(bs, group, topic_name)


def test_confluent_admin_list_describe_offsets_delete(group_broker: BrokerProcess, fleet: Fleet,
                                                      topic_name: str) -> None:
    bs = group_broker.bootstrap_servers
    group = "admin-ck-" + topic_name
    members, owners = _start_group(fleet, bs, topic_name, group, "confluent", assignor="range")
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        _check_confluent_admin(admin, group_broker, bs, group, topic_name, members, owners)
    finally:
        del admin
        gc.collect()  # destroy the librdkafka handle before its broker goes away


def _check_confluent_admin(admin: AdminClient, group_broker: BrokerProcess, bs: str, group: str, topic_name: str,
                           members: list, owners: dict) -> None:

    listed = [g for g in admin.list_consumer_groups(request_timeout=10).result(timeout=15).valid
              if g.group_id == group]
    assert len(listed) == 1, listed
    assert (listed[0].is_simple_consumer_group, listed[0].state) == (False, ConsumerGroupState.STABLE)

    d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert (d.group_id, d.is_simple_consumer_group, d.state, d.partition_assignor) == \
        (group, False, ConsumerGroupState.STABLE, "range"), d
    assert d.coordinator.id == 0 and d.coordinator.port == group_broker.port
    by_client = {m.client_id: m for m in d.members}
    assert set(by_client) == {m.client_id for m in members}
    for cid, m in by_client.items():
        assert re.fullmatch(re.escape(cid) + "-" + UUID_RE, m.member_id), m.member_id
        assert m.host == CLIENT_HOST and m.group_instance_id is None
        assert {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} == \
            {(topic_name, p) for p in owners[cid]}, (cid, m.assignment.topic_partitions)

    meta_of = last_commit_metadata(members)
    assert sorted(meta_of) == list(range(6))
    # On the wire the binding's commits carry a trailing NUL; its admin client reads the
    # metadata back as a C string, without it.
    assert offset_fetch(bs, group, topic_name, range(6)) == \
        {p: (10, committed_metadata("confluent", meta_of[p])) for p in range(6)}

    def offsets() -> dict[int, tuple[int, str]]:
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=10)[group].result(timeout=15)
        assert res.group_id == group
        for tp in res.topic_partitions:
            assert tp.error is None and tp.topic == topic_name, tp
        return {tp.partition: (tp.offset, tp.metadata) for tp in res.topic_partitions}
    assert offsets() == {p: (10, meta_of[p]) for p in range(6)}

    with pytest.raises(KafkaException) as ei:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert ei.value.args[0].code() == KafkaError.NON_EMPTY_GROUP, ei.value
    for m in members:
        m.close()
    wait_until(lambda: admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15).state
               == ConsumerGroupState.EMPTY, 10, what="the group to be Empty")
    d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert (d.state, d.members) == (ConsumerGroupState.EMPTY, []), d
    assert offsets() == {p: (10, meta_of[p]) for p in range(6)}

    assert admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15) is None
    assert [g for g in admin.list_consumer_groups(request_timeout=10).result(timeout=15).valid
            if g.group_id == group] == []
    with pytest.raises(KafkaException) as ei:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert ei.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND, ei.value
    _assert_dead_after_delete(bs, group, topic_name)


def test_offsets_topic_is_internal_and_refuses_produce(group_broker: BrokerProcess, topic_name: str) -> None:
    bs = group_broker.bootstrap_servers
    make_topic(bs, topic_name, 1)
    assert offset_commit_simple(bs, "internal-check", topic_name, {0: (3, "x")}) == {0: NONE}
    with RawClient(bs) as c:
        md = c.metadata(None)
        topics = {t.name: t for t in md.topics}
        assert OFFSETS_TOPIC in topics, sorted(topics)
        t = topics[OFFSETS_TOPIC]
        assert (t.error_code, t.is_internal, len(t.partitions)) == (NONE, True, 50)
        assert sorted(p.partition_index for p in t.partitions) == list(range(50))
        assert all((p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (NONE, 0, [0], [0])
                   for p in t.partitions)
        assert topics[topic_name].is_internal is False
        # Asked for by name it is the same; clients may read it...
        by_name = c.metadata([OFFSETS_TOPIC]).topics[0]
        assert (by_name.name, by_name.error_code, by_name.is_internal) == (OFFSETS_TOPIC, NONE, True)
        # ...but never write to it.
        for p in (0, offsets_partition_for("internal-check")):
            r = c.produce(OFFSETS_TOPIC, p, build_batch([Rec(key=b"k", value=b"v")]))
            assert r.error_code == INVALID_TOPIC_EXCEPTION, r
    # the refused produce left nothing behind, and the commit is still the group's
    recs = [r for r in read_offsets_topic(bs) if r.group == "internal-check"]
    assert [(r.partition, r.key_version, r.topic, r.topic_partition, r.committed_offset, r.metadata)
            for r in recs] == [(offsets_partition_for("internal-check"), 1, topic_name, 0, 3, "x")]
    assert offset_fetch(bs, "internal-check", topic_name, [0]) == {0: (3, "x")}


def test_group_lives_in_partition_abs_java_hashcode_mod_50(group_broker: BrokerProcess, topic_name: str) -> None:
    """Offset commits land in partition Utils.abs(group.hashCode()) % 50 with Kafka's key layout
    (int16 1, group, topic, int32 partition); a managed group's metadata record (key version 2)
    lands in the same partition."""
    bs = group_broker.bootstrap_servers
    make_topic(bs, topic_name, 2)
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Utils.abs maps it to 0 (Math.abs
    # would stay negative, a plain abs would give partition 48). Others: negative and positive hashes.
    groups = ["polygenelubricants", "orders-service", "g\u00e9n\u00e9ral-\U0001F600", "consumer-17", "hello"]
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert any(java_string_hash(g) < 0 for g in groups[1:]) and any(java_string_hash(g) > 0 for g in groups[1:])
    for i, g in enumerate(groups):
        res = offset_commit_simple(bs, g, topic_name, {0: (100 + i, f"meta-{i}"), 1: (200 + i, "")})
        assert res == {0: NONE, 1: NONE}, (g, res)

    managed = "managed-" + topic_name
    c = KafkaConsumer(bootstrap_servers=bs, group_id=managed, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                      request_timeout_ms=20000)
    try:
        assert c.partitions_for_topic(topic_name) == {0, 1}  # see groups_util: metadata before joining
        c.subscribe([topic_name])
        wait_until(lambda: c.poll(timeout_ms=100) is not None and len(c.assignment()) == 2, 20, interval=0,
                   what="the managed group's assignment")
        c.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(0, "managed", -1)})
    finally:
        c.close(autocommit=False)

    records = read_offsets_topic(bs)
    for i, g in enumerate(groups):
        mine = [r for r in records if r.group == g]
        assert {r.partition for r in mine} == {offsets_partition_for(g)}, (g, java_string_hash(g), mine)
        assert sorted((r.key_version, r.topic, r.topic_partition, r.committed_offset, r.metadata, r.leader_epoch)
                      for r in mine) == [(1, topic_name, 0, 100 + i, f"meta-{i}", -1),
                                         (1, topic_name, 1, 200 + i, "", -1)]
    mine = [r for r in records if r.group == managed]
    assert {r.partition for r in mine} == {offsets_partition_for(managed)}, mine
    assert {r.key_version for r in mine} == {1, 2}, mine
    assert [(r.topic, r.topic_partition, r.committed_offset, r.metadata) for r in mine if r.key_version == 1] == \
        [(topic_name, 0, 0, "managed")]
    with RawClient(bs) as rc:
        for g in groups + [managed]:
            find_coordinator(rc, g)  # the single broker coordinates every partition
