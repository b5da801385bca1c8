"""Kafka 3.9's znode JSON codecs: the exact bytes a Kafka 3.9.1 broker wrote (recorded from a live
run, see kafkalite/controller/zk/znodes.py) decode and re-encode to themselves; older versions
Kafka still reads decode; round trips hold for generated values (hypothesis)."""
from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.controller.zk import znodes as z

KAFKA_BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                b'"endpoints":["PLAINTEXT://127.0.0.1:58751"],"jmx_port":-1,"port":58751,'
                b'"host":"127.0.0.1","version":5,"timestamp":"1795614306449"}')
KAFKA_TOPIC = (b'{"partitions":{"0":[0],"1":[0],"2":[0]},"topic_id":"LgEDxExRTPGleSB9IPLLJQ",'
               b'"adding_replicas":{},"removing_replicas":{},"version":3}')
KAFKA_STATE = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
KAFKA_CLUSTER_ID = b'{"version":"1","id":"OEBsaw_4QtuA6vAbugbXgg"}'
KAFKA_TOPIC_CONFIG = b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"54321"}}'
KAFKA_CONFIG_CHANGE = b'{"version":2,"entity_path":"topics/dump-topic"}'
KAFKA_CONTROLLER = b'{"version":2,"brokerid":0,"timestamp":"1795614306510","kraftControllerEpoch":-1}'
KAFKA_FEATURE = b'{"features":{},"version":2,"status":1}'
KAFKA_PID_BLOCK = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'


def test_kafka_broker_registration_round_trips_byte_for_byte() -> None:
    reg = z.decode_broker_registration(0, KAFKA_BROKER)
    assert reg == z.BrokerRegistration(
        0, (z.EndPoint("127.0.0.1", 58751, "PLAINTEXT", "PLAINTEXT"),), rack=None, features={},
        jmx_port=-1, timestamp=1795614306449, version=5)
    assert z.encode_broker_registration(reg) == KAFKA_BROKER


def test_broker_registration_with_rack_listeners_and_features() -> None:
    reg = z.BrokerRegistration(
        3, (z.EndPoint("h1", 9093, "INTERNAL", "SSL"), z.EndPoint("h1", 9092, "CLIENT", "PLAINTEXT"),
            z.EndPoint("::1", 9094, "V6", "SASL_PLAINTEXT")),
        rack="dc1", features={"metadata.version": z.SupportedVersionRange(1, 21)},
        jmx_port=9999, timestamp=42)
    raw = z.encode_broker_registration(reg)
    assert raw == (b'{"features":{"metadata.version":{"min_version":1,"max_version":21}},'
                   b'"listener_security_protocol_map":{"INTERNAL":"SSL","CLIENT":"PLAINTEXT",'
                   b'"V6":"SASL_PLAINTEXT"},"endpoints":["INTERNAL://h1:9093","CLIENT://h1:9092",'
                   b'"V6://[::1]:9094"],"rack":"dc1","jmx_port":9999,"port":9092,"host":"h1",'
                   b'"version":5,"timestamp":"42"}')
    assert z.decode_broker_registration(3, raw) == reg
    assert reg.endpoint("CLIENT") == z.EndPoint("h1", 9092, "CLIENT", "PLAINTEXT")


def test_broker_registration_without_plaintext_listener_has_null_host() -> None:
    reg = z.BrokerRegistration(1, (z.EndPoint("h", 1, "SSL", "SSL"),))
    doc = json.loads(z.encode_broker_registration(reg))
    assert doc["host"] is None and doc["port"] == -1


def test_older_broker_registration_versions_decode() -> None:
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert z.decode_broker_registration(1, v1).endpoints == (
        z.EndPoint("localhost", 9092, "PLAINTEXT", "PLAINTEXT"),)
    v2 = (b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}')
    assert z.decode_broker_registration(1, v2).endpoints == (
        z.EndPoint("host1", 9092, "PLAINTEXT", "PLAINTEXT"), z.EndPoint("host1", 9093, "SSL", "SSL"))
    v4 = (b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1",'
          b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"}}')
    reg = z.decode_broker_registration(1, v4)
    assert reg.rack == "dc1" and reg.version == 4 and reg.features == {}
    assert reg.endpoints[0] == z.EndPoint("host1", 9092, "CLIENT", "SSL")
    with pytest.raises(z.ZNodeDecodeError):
        z.decode_broker_registration(1, b'{"version":0,"jmx_port":1}')
    with pytest.raises(z.ZNodeDecodeError):   # a listener without a security protocol
        z.decode_broker_registration(1, b'{"version":2,"jmx_port":1,"endpoints":["FOO://h:1"]}')
    with pytest.raises(z.ZNodeDecodeError):
        z.decode_broker_registration(1, b'not json')


def test_kafka_topic_assignment_round_trips() -> None:
    a = z.decode_topic_assignment("dump-topic", KAFKA_TOPIC)
    assert a.topic_id == z.uuid_from_kafka_string("LgEDxExRTPGleSB9IPLLJQ")
    assert a.partitions == {p: z.ReplicaAssignment((0,)) for p in range(3)}
    assert z.encode_topic_assignment(a.topic_id, a.partitions) == KAFKA_TOPIC


def test_topic_assignment_key_order_follows_scalas_hash_map() -> None:
    parts = {p: z.ReplicaAssignment((1, 2), (2,) if p == 1 else (), (3,) if p == 2 else ())
             for p in range(30)}
    doc = json.loads(z.encode_topic_assignment(None, parts))
    # no topic id: four keys; 30 partitions: a 64-bucket table
    assert list(doc) == ["partitions", "adding_replicas", "removing_replicas", "version"]
    assert list(doc["partitions"]) == ["22", "23", "24", "25", "26", "27", "28", "29", "10", "11",
                                       "12", "13", "14", "15", "16", "17", "18", "19", "0", "1",
                                       "2", "3", "4", "5", "6", "7", "8", "9", "20", "21"]
    assert doc["adding_replicas"] == {"1": [2]} and doc["removing_replicas"] == {"2": [3]}
    back = z.decode_topic_assignment("t", z.encode_topic_assignment(None, parts))
    assert back.partitions == parts and back.topic_id is None
    assert back.partitions[2].target_replicas == (1, 2) and back.partitions[1].is_being_reassigned


def test_older_topic_assignments_decode() -> None:
    v1 = b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
    a = z.decode_topic_assignment("t", v1)
    assert a.topic_id is None and a.partitions == {0: z.ReplicaAssignment((1, 2)),
                                                   1: z.ReplicaAssignment((2, 3))}
    assert z.decode_topic_assignment("t", b"").partitions == {}


def test_kafka_partition_state_round_trips() -> None:
    s = z.decode_partition_state(KAFKA_STATE, zk_version=4)
    assert s == z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(0, 0, (0,), 0, 4), 1)
    assert z.encode_partition_state(s) == KAFKA_STATE


@settings(max_examples=300, deadline=None)
@given(leader=st.integers(-2**31, 2**31 - 1), leader_epoch=st.integers(-2**31, 2**31 - 1),
       controller_epoch=st.integers(-2**31, 2**31 - 1), isr=st.lists(st.integers(-1, 2**31 - 1), max_size=6),
       recovering=st.booleans())
def test_partition_state_fast_path_writes_the_json_writers_bytes(leader: int, leader_epoch: int,
                                                                  controller_epoch: int, isr: list[int],
                                                                  recovering: bool) -> None:
    recovery = z.LEADER_RECOVERY_RECOVERING if recovering else z.LEADER_RECOVERY_RECOVERED
    s = z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(leader, leader_epoch, tuple(isr), recovery), controller_epoch)
    raw = z.encode_partition_state(s)
    assert raw == z.encode_partition_state_json(s)
    assert z.decode_partition_state(raw) == s


def test_recovering_partition_state_writes_leader_recovery_state() -> None:
    s = z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(2, 5, (2,), z.LEADER_RECOVERY_RECOVERING), 3)
    raw = z.encode_partition_state(s)
    assert raw == (b'{"controller_epoch":3,"leader":2,"version":1,"leader_recovery_state":1,'
                   b'"leader_epoch":5,"isr":[2]}')
    assert z.decode_partition_state(raw) == s


def test_leader_and_isr_transitions() -> None:
    lai = z.LeaderAndIsr(1, 3, (1, 2), partition_epoch=7)
    assert lai.new_leader_and_isr(2, [2]) == z.LeaderAndIsr(2, 4, (2,), 0, 7)
    assert lai.new_epoch() == z.LeaderAndIsr(1, 4, (1, 2), 0, 7)
    assert lai.with_partition_epoch(8).partition_epoch == 8
    assert lai.new_recovering_leader_and_isr(3, [3]).leader_recovery_state == 1
    assert z.LeaderAndIsr(-1, 0, ()).leader_opt is None and lai.leader_opt == 1


def test_small_documents_round_trip_byte_for_byte() -> None:
    assert z.encode_cluster_id(z.decode_cluster_id(KAFKA_CLUSTER_ID)) == KAFKA_CLUSTER_ID
    assert z.encode_entity_config(z.decode_entity_config(KAFKA_TOPIC_CONFIG)) == KAFKA_TOPIC_CONFIG
    assert z.decode_config_change(KAFKA_CONFIG_CHANGE) == "topics/dump-topic"
    assert z.encode_config_change("topics/dump-topic") == KAFKA_CONFIG_CHANGE
    c = z.decode_controller(KAFKA_CONTROLLER)
    assert c == z.ControllerRegistration(0, 1795614306510, -1, 2)
    assert z.encode_controller(c) == KAFKA_CONTROLLER
    assert z.decode_controller_epoch(b"17") == 17 and z.encode_controller_epoch(17) == b"17"
    f = z.decode_feature(KAFKA_FEATURE)
    assert f == z.FeatureZNode(2, z.FEATURE_STATUS_ENABLED, {})
    assert z.encode_feature(f) == KAFKA_FEATURE
    b = z.decode_producer_id_block(KAFKA_PID_BLOCK)
    assert (b.assigned_broker_id, b.first_producer_id, b.last_producer_id, b.next_block_first_id) == \
        (0, 0, 999, 1000)
    assert z.encode_producer_id_block(b) == KAFKA_PID_BLOCK


def test_older_and_odd_documents_decode() -> None:
    assert z.decode_controller(b'{"version":1,"brokerid":3,"timestamp":"12"}') == \
        z.ControllerRegistration(3, 12, -1, 1)
    assert z.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"x"}') == "topics/x"
    with pytest.raises(z.ZNodeDecodeError):
        z.decode_config_change(b'{"version":3,"entity_path":"topics/x"}')
    assert z.decode_entity_config(b"") == {}
    assert z.decode_entity_config(b'{"version":1}') == {}
    with pytest.raises(z.ZNodeDecodeError):
        z.decode_entity_config(b'{"version":1,"config":{"a":1}}')
    v1 = b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":3}}}'
    assert z.decode_feature(v1) == z.FeatureZNode(1, 1, {"f": 3})
    assert z.encode_feature(z.FeatureZNode(1, 1, {"f": 3})) == \
        b'{"features":{"f":{"max_version_level":3,"min_version_level":3}},"version":1,"status":1}'
    for bad in (b'{"version":3,"status":1,"features":{}}', b'{"version":2,"status":5,"features":{}}',
                b'{"version":2,"status":1}', b'{"version":1,"status":1,"features":{"f":{"max_version_level":3}}}'):
        with pytest.raises(z.ZNodeDecodeError):
            z.decode_feature(bad)
    with pytest.raises(z.ZNodeDecodeError):
        z.decode_controller_epoch(b"x")


def test_admin_and_notification_documents() -> None:
    tp = z.TopicPartition("t", 0)
    raw = z.encode_reassignment({tp: [1, 2]})
    assert raw == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    assert z.decode_reassignment(raw) == {tp: (1, 2)}
    raw = z.encode_preferred_replica_election([tp])
    assert raw == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert z.decode_preferred_replica_election(raw) == {tp}
    assert z.decode_isr_change_notification(z.encode_isr_change_notification([tp])) == {tp}
    assert z.encode_log_dir_event(4) == b'{"version":1,"broker":4,"event":1}'
    assert z.decode_log_dir_event(z.encode_log_dir_event(4)) == 4
    assert z.sequence_number("isr_change_0000000012", z.ISR_CHANGE_PREFIX) == "0000000012"
    with pytest.raises(z.ZNodeDecodeError):
        z.decode_reassignment(b'{"version":1,"partitions":[{"topic":"t"}]}')


def test_paths() -> None:
    assert z.broker_id_path(3) == "/brokers/ids/3"
    assert z.topic_partition_state_path("a.b", 2) == "/brokers/topics/a.b/partitions/2/state"
    assert z.config_entity_path(z.CONFIG_TYPE_BROKER, "<default>") == "/config/brokers/<default>"
    assert z.delete_topic_path("x") == "/admin/delete_topics/x"
    assert "/config/ips" in z.PERSISTENT_ZK_PATHS and "/latest_producer_id_block" in z.PERSISTENT_ZK_PATHS


def test_kafka_uuid_strings() -> None:
    u = uuid.UUID(bytes=bytes(range(16)))
    assert z.uuid_to_kafka_string(u) == "AAECAwQFBgcICQoLDA0ODw"
    assert z.uuid_from_kafka_string("AAECAwQFBgcICQoLDA0ODw") == u
    for bad in ("short", "AAECAwQFBgcICQoLDA0ODwAA", "!!ECAwQFBgcICQoLDA0ODw"):
        with pytest.raises(z.ZNodeDecodeError):
            z.uuid_from_kafka_string(bad)


def test_hash_orders() -> None:
    assert z.java_string_hash("") == 0
    assert z.java_string_hash("a") == 97
    assert z.java_string_hash("version") == (351608024 & 0xFFFFFFFF)
    assert z.scala_immutable_map_order(["b", "a", "c"]) == ["b", "a", "c"]     # Map3: insertion
    assert z.scala_immutable_map_order(["version", "leader", "leader_epoch", "controller_epoch", "isr"]) == \
        ["controller_epoch", "leader", "version", "leader_epoch", "isr"]


# ---- property tests ------------------------------------------------------------------------

names = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FFF,
                                       blacklist_characters='/"\\'), min_size=1, max_size=20)
broker_ids = st.integers(min_value=0, max_value=2**31 - 1)
replica_lists = st.lists(broker_ids, max_size=5).map(tuple)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.integers(0, 5000), st.tuples(replica_lists, replica_lists, replica_lists),
                       max_size=60),
       st.one_of(st.none(), st.uuids()))
def test_topic_assignment_round_trip(parts, topic_id) -> None:
    assignment = {p: z.ReplicaAssignment(*r) for p, r in parts.items()}
    raw = z.encode_topic_assignment(topic_id, assignment)
    back = z.decode_topic_assignment("t", raw)
    assert back.topic_id == topic_id
    assert back.partitions == dict(sorted(assignment.items()))
    assert z.encode_topic_assignment(back.topic_id, back.partitions) == raw   # order is canonical


@settings(max_examples=150, deadline=None)
@given(st.integers(-2, 2**31 - 1), st.integers(0, 2**31 - 1), replica_lists,
       st.sampled_from([0, 1]), st.integers(0, 2**31 - 1), st.integers(0, 1000))
def test_partition_state_round_trip(leader, leader_epoch, isr, recovery, controller_epoch, zk_version) -> None:
    s = z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(leader, leader_epoch, isr, recovery, zk_version),
                                      controller_epoch)
    assert z.decode_partition_state(z.encode_partition_state(s), zk_version) == s


hosts = st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True),
                  st.just("::1"), st.just("fe80::1"))
endpoints = st.builds(z.EndPoint, hosts, st.integers(0, 65535),
                      st.from_regex(r"[A-Z][A-Z_]{0,10}", fullmatch=True),
                      st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]))


@settings(max_examples=150, deadline=None)
@given(broker_ids, st.lists(endpoints, min_size=1, max_size=4, unique_by=lambda e: e.listener_name),
       st.one_of(st.none(), names),
       st.dictionaries(names, st.tuples(st.integers(0, 100), st.integers(0, 100)), max_size=15),
       st.integers(-1, 65535), st.integers(0, 2**62))
def test_broker_registration_round_trip(broker_id, eps, rack, features, jmx, ts) -> None:
    reg = z.BrokerRegistration(broker_id, tuple(eps), rack,
                               {k: z.SupportedVersionRange(*v) for k, v in features.items()}, jmx, ts)
    raw = z.encode_broker_registration(reg)
    assert z.decode_broker_registration(broker_id, raw) == reg
    assert json.loads(raw)["endpoints"] == [e.connection_string for e in eps]


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(names, st.text(max_size=30), max_size=40))
def test_entity_config_round_trip(config) -> None:
    raw = z.encode_entity_config(config)
    assert z.decode_entity_config(raw) == config
    assert json.loads(raw)["version"] == 1


@settings(max_examples=100, deadline=None)
@given(broker_ids, st.integers(0, 2**62), st.integers(1, 10**6))
def test_producer_id_block_round_trip(broker, first, size) -> None:
    b = z.ProducerIdsBlock(broker, first, size)
    assert z.decode_producer_id_block(z.encode_producer_id_block(b)) == b


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.tuples(names, st.integers(0, 10000)), replica_lists, max_size=20))
def test_reassignment_round_trip(reassignment) -> None:
    r = {z.TopicPartition(*k): v for k, v in reassignment.items()}
    assert z.decode_reassignment(z.encode_reassignment(r)) == r


@given(st.text())
def test_java_string_hash_is_javas_over_utf16_units(s: str) -> None:
    units = s.encode("utf-16-be", "surrogatepass")
    expected = 0
    for i in range(0, len(units), 2):
        expected = (31 * expected + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    assert z.java_string_hash(s) == expected
