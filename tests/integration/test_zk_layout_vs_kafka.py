"""The znodes Apache Kafka 3.9.1 writes, read back with kazoo, decoded with our codecs and
re-encoded: the JSON must equal Kafka's field by field and key by key (Kafka's key order is its
hash maps' deterministic iteration order), byte for byte. Then KafkaZkClient reads Kafka's
cluster through KazooZNodeStore and allocates the producer-id block after Kafka's.

One Kafka broker in ZooKeeper mode, with a chroot of its own on the session's ZooKeeper; run
under the heavy-work lock (flock /tmp/kafkalite-heavy.lock)."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
from kazoo.client import KazooClient

from kafkalite.controller.zk import znodes as z
from kafkalite.controller.zk.kafka_zk_client import KafkaZkClient
from kafkalite.controller.zk.kazoo_store import KazooZNodeStore

BIG_CONFIG = {
    "cleanup.policy": "compact", "retention.ms": "86400000", "segment.bytes": "1048576",
    "min.insync.replicas": "1", "max.message.bytes": "2000000", "compression.type": "gzip",
    "segment.ms": "3600000", "delete.retention.ms": "1000", "file.delete.delay.ms": "1000",
    "flush.messages": "100", "index.interval.bytes": "8192", "min.cleanable.dirty.ratio": "0.2",
    "retention.bytes": "10000000", "message.timestamp.type": "LogAppendTime",
}


@pytest.fixture(scope="module")
def kafka_chroot(zookeeper_server) -> Iterator[tuple[str, str, dict[str, bytes]]]:
    """A Kafka broker on its own chroot after some metadata work; yields (hosts, chroot, the raw
    data of every znode under the chroot by relative path)."""
    from kafka import KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    from tests.support.kafka_oracle import KafkaOracle

    chroot = f"/kafka-layout-{uuid.uuid4().hex[:8]}"
    with KafkaOracle(zookeeper_server.connect_string, chroot=chroot,
                     overrides={"broker.rack": "rack-a"}) as kafka:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            admin.create_topics([
                NewTopic("layout-3", 3, 1, topic_configs={"retention.ms": "12345",
                                                          "cleanup.policy": "compact"}),
                NewTopic("layout-30", 30, 1),
                NewTopic("layout-configs", 1, 1, topic_configs=BIG_CONFIG),
            ])
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "layout-3",
                                                configs={"retention.ms": "54321",
                                                         "cleanup.policy": "compact"})])
            admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0",
                                                configs={"log.cleaner.threads": "2"})])
            producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True)
            producer.send("layout-30", b"v", key=b"k").get(30)
            producer.close()
        finally:
            admin.close()
        zk = KazooClient(zookeeper_server.connect_string)
        zk.start()
        try:
            raw: dict[str, bytes] = {}
            deadline = time.monotonic() + 30

            def walk(path: str) -> None:
                data, _ = zk.get(chroot + path if path != "/" else chroot)
                raw[path] = data or b""
                for child in zk.get_children(chroot + path if path != "/" else chroot):
                    walk(f"{path.rstrip('/')}/{child}")
            # the states of every partition are there once the controller has made them
            while True:
                raw.clear()
                walk("/")
                states = [p for p in raw if p.endswith("/state")]
                done = len(states) == 34 and bool(raw.get("/latest_producer_id_block"))
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()
        yield zookeeper_server.connect_string, chroot, raw


def pairs(obj: Any) -> Any:
    """The document with every object as its list of (key, value) pairs: equal only when the key
    order is equal too."""
    if isinstance(obj, dict):
        return [(k, pairs(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [pairs(v) for v in obj]
    return obj


def assert_same_json(kafka_bytes: bytes, ours: bytes, path: str) -> None:
    theirs_doc, ours_doc = json.loads(kafka_bytes), json.loads(ours)
    assert ours_doc == theirs_doc, path                   # field by field
    assert pairs(ours_doc) == pairs(theirs_doc), path     # and key by key
    assert ours == kafka_bytes, path                      # so byte for byte


def test_every_kafka_znode_reencodes_to_kafkas_json(kafka_chroot) -> None:
    _, _, raw = kafka_chroot
    codecs: list[tuple[Callable[[str], bool], Callable[[str, bytes], bytes]]] = [
        (lambda p: p == "/cluster/id",
         lambda p, b: z.encode_cluster_id(z.decode_cluster_id(b))),
        (lambda p: p.startswith("/brokers/ids/"),
         lambda p, b: z.encode_broker_registration(z.decode_broker_registration(int(p.rsplit("/", 1)[1]), b))),
        (lambda p: p.count("/") == 3 and p.startswith("/brokers/topics/"),
         lambda p, b: (lambda a: z.encode_topic_assignment(a.topic_id, a.partitions))(
             z.decode_topic_assignment(p.rsplit("/", 1)[1], b))),
        (lambda p: p.endswith("/state"),
         lambda p, b: z.encode_partition_state(z.decode_partition_state(b))),
        (lambda p: p.count("/") == 3 and p.startswith("/config/") and not p.startswith("/config/changes"),
         lambda p, b: z.encode_entity_config(z.decode_entity_config(b))),
        (lambda p: p.startswith("/config/changes/"),
         lambda p, b: z.encode_config_change(z.decode_config_change(b))),
        (lambda p: p == "/controller",
         lambda p, b: z.encode_controller(z.decode_controller(b))),
        (lambda p: p == "/controller_epoch",
         lambda p, b: z.encode_controller_epoch(z.decode_controller_epoch(b))),
        (lambda p: p == "/feature",
         lambda p, b: z.encode_feature(z.decode_feature(b))),
        (lambda p: p == "/latest_producer_id_block",
         lambda p, b: z.encode_producer_id_block(z.decode_producer_id_block(b))),
    ]
    checked: list[str] = []
    for path, data in sorted(raw.items()):
        for matches, reencode in codecs:
            if matches(path):
                assert_same_json(data, reencode(path, data), path)
                checked.append(path)
                break
        else:
            # everything else Kafka creates is a data-less container node
            assert data == b"", (path, data)
    # the layout itself: every persistent path, the topics, their partitions, the notifications
    for p in z.PERSISTENT_ZK_PATHS:
        assert p in raw, p
    for topic, n in (("layout-3", 3), ("layout-30", 30), ("layout-configs", 1)):
        assert z.topic_path(topic) in checked
        for partition in range(n):
            assert z.topic_partition_state_path(topic, partition) in checked
        assert z.config_entity_path("topics", topic) in checked
    assert {"/cluster/id", "/brokers/ids/0", "/controller", "/controller_epoch", "/feature",
            "/latest_producer_id_block", "/config/brokers/0"} <= set(checked)
    changes = sorted(p for p in raw if p.startswith("/config/changes/"))
    assert [z.decode_config_change(raw[p]) for p in changes] == ["topics/layout-3", "brokers/0"]
    assert changes[0] == "/config/changes/config_change_0000000000"
    # what Kafka wrote, in the places our docs record
    reg = z.decode_broker_registration(0, raw["/brokers/ids/0"])
    assert reg.rack == "rack-a" and reg.version == 5 and reg.endpoints[0].listener_name == "PLAINTEXT"
    assert list(json.loads(raw["/brokers/ids/0"])) == [
        "features", "listener_security_protocol_map", "endpoints", "rack", "jmx_port", "port",
        "host", "version", "timestamp"]
    assert z.decode_entity_config(raw["/config/topics/layout-configs"]) == BIG_CONFIG
    assert z.decode_entity_config(raw["/config/topics/layout-3"]) == {"retention.ms": "54321",
                                                                      "cleanup.policy": "compact"}
    assert json.loads(raw["/brokers/topics/layout-30/partitions/7/state"]) == {
        "controller_epoch": 1, "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]}


def test_kafka_zk_client_reads_kafkas_cluster(kafka_chroot) -> None:
    hosts, chroot, raw = kafka_chroot

    async def main() -> None:
        store = KazooZNodeStore(hosts + chroot, session_timeout_ms=6000)
        await store.start()
        zk = KafkaZkClient(store)
        try:
            assert await zk.get_cluster_id() == json.loads(raw["/cluster/id"])["id"]
            assert await zk.get_controller_id() == 0
            epoch = await zk.get_controller_epoch()
            assert epoch is not None and epoch[0] == int(raw["/controller_epoch"])
            brokers = await zk.get_all_brokers()
            assert list(brokers) == [0]
            reg, broker_epoch = brokers[0]
            assert broker_epoch == (await store.exists("/brokers/ids/0")).czxid
            assert reg.rack == "rack-a"
            assert {"layout-3", "layout-30", "layout-configs"} <= await zk.get_all_topics()
            assignments = await zk.get_topic_assignments(["layout-30"])
            assert assignments["layout-30"].partitions == {p: z.ReplicaAssignment((0,)) for p in range(30)}
            assert assignments["layout-30"].topic_id is not None
            states = await zk.get_partition_states([z.TopicPartition("layout-3", p) for p in range(3)])
            assert {tp: (s.leader_and_isr.leader, s.leader_and_isr.isr) for tp, s in states.items()} == \
                {z.TopicPartition("layout-3", p): (0, (0,)) for p in range(3)}
            assert await zk.get_entity_configs("topics", "layout-configs") == BIG_CONFIG
            assert await zk.get_entity_configs("brokers", "0") == {"log.cleaner.threads": "2"}
            feature = await zk.get_feature()
            assert feature is not None and feature[0].status == z.FEATURE_STATUS_ENABLED
            # the next producer-id block follows Kafka's own
            kafka_block = z.decode_producer_id_block(raw["/latest_producer_id_block"])
            ours = await zk.allocate_producer_id_block(5)
            assert ours == z.ProducerIdsBlock(5, kafka_block.next_block_first_id, 1000)
        finally:
            await store.close()
    asyncio.run(asyncio.wait_for(main(), 60))
