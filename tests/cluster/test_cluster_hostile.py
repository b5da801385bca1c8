"""A kafkalite cluster under bad input and a flaky ZooKeeper.

- Inter-broker requests a broker must refuse (stale controller epoch, stale broker epoch,
  unknown broker id) get the answers Apache Kafka 3.9.1 gives (recorded in
  tests/integration/test_inter_broker_vs_kafka.py, which builds the requests), and change
  nothing: the topic keeps its leaders and leader epochs.
- Malformed inter-broker frames: the broker closes that connection and keeps serving others.
- A broker whose zookeeper.connect points where nothing listens exits with code 1 after
  zookeeper.connection.timeout.ms, with one error line on stderr naming ZooKeeper after its
  ordinary log lines (kazoo's connection attempts), and no traceback.
- ZooKeeper paused (SIGSTOP) for less than the session timeout: produce, fetch and Metadata on
  replication-factor-1 topics keep working on every broker; after it resumes, CreateTopics works.
"""
from __future__ import annotations

import asyncio
import re
import socket
import struct
import subprocess
import sys
import time
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import pytest

from kafkalite.network.broker_client import BrokerConnection
from tests.cluster.conftest_h8 import LocalCluster, metadata, topic_layout, wait_until
from tests.integration.test_inter_broker_vs_kafka import (
    BROKER_NOT_AVAILABLE, NO_BROKER_EPOCH, NONE, STALE_BROKER_EPOCH, STALE_BROKER_EPOCH_VALUE,
    STALE_CONTROLLER, STALE_CONTROLLER_EPOCH, UNKNOWN_SERVER_ERROR, _alter_partition, _leader_and_isr,
    _stop_replica, _update_metadata)
from kafkalite.protocol.inter_broker import ControlledShutdownRequest

pytestmark = pytest.mark.cluster

T = TypeVar("T")
TOPIC = "hostile-h8"


class Target:
    """What the request builders of test_inter_broker_vs_kafka take of a broker."""

    def __init__(self, broker_id: int, host: str, port: int) -> None:
        self.broker_id, self.host, self.port = broker_id, host, port


def _run(target: Any, body: Callable[[BrokerConnection], Awaitable[T]]) -> T:
    async def go() -> T:
        conn = BrokerConnection(target.host, target.port, client_id="kafkalite-hostile-test")
        try:
            return await body(conn)
        finally:
            await conn.close()
    return asyncio.run(go())


@pytest.fixture(scope="module")
def cluster(zookeeper_server: Any) -> Iterator[LocalCluster]:
    from kafka.admin import KafkaAdminClient, NewTopic

    with LocalCluster(zookeeper_server.connect_string, 2) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        try:
            r = admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1], 1: [1]})], raise_errors=False)
            assert [t["error_code"] for t in r["topics"]] == [NONE]
        finally:
            admin.close()
        for b in c.brokers.values():
            wait_until(lambda: topic_layout(b, TOPIC) == [(0, 1, [1], [1]), (1, 1, [1], [1])], 30, "topic")
        yield c


def leaders(c: LocalCluster) -> list[Any]:
    out = []
    for b in c.brokers.values():
        md = metadata(b, [TOPIC])
        out.append(sorted((p.partition_index, p.error_code, p.leader_id, p.leader_epoch, list(p.isr_nodes))
                          for p in md.topics[0].partitions))
    return out


def _targets(cluster: LocalCluster) -> tuple[Target, Target, Any]:
    assert cluster.controller_id() == 0
    b0, b1 = cluster.broker(0), cluster.broker(1)
    return Target(0, b0.host, b0.port), Target(1, b1.host, b1.port), metadata(b1, [TOPIC]).topics[0].topic_id


UNCHANGED = [[(0, NONE, 1, 0, [1]), (1, NONE, 1, 0, [1])]] * 2


def test_update_metadata_with_a_stale_controller_epoch(cluster: LocalCluster) -> None:
    _, target, topic_id = _targets(cluster)

    async def body(conn: BrokerConnection) -> Any:
        r = await conn.send(_update_metadata(target, TOPIC, topic_id, STALE_CONTROLLER, NO_BROKER_EPOCH), 8)
        return r.version, r.error_code
    assert _run(target, body) == (8, STALE_CONTROLLER_EPOCH)
    assert leaders(cluster) == UNCHANGED


def test_update_metadata_with_a_stale_broker_epoch(cluster: LocalCluster) -> None:
    """The broker epoch is checked first: stale with either controller epoch."""
    _, target, topic_id = _targets(cluster)

    async def body(conn: BrokerConnection) -> Any:
        out = []
        for controller_epoch in (STALE_CONTROLLER, 1):
            r = await conn.send(_update_metadata(target, TOPIC, topic_id, controller_epoch,
                                                 STALE_BROKER_EPOCH_VALUE), 8)
            out.append((r.version, r.error_code))
        return out
    assert _run(target, body) == [(8, STALE_BROKER_EPOCH), (8, STALE_BROKER_EPOCH)]
    assert leaders(cluster) == UNCHANGED


def test_leader_and_isr_refused(cluster: LocalCluster) -> None:
    _, target, topic_id = _targets(cluster)

    async def body(conn: BrokerConnection) -> Any:
        out = []
        for broker_epoch in (NO_BROKER_EPOCH, STALE_BROKER_EPOCH_VALUE):
            r = await conn.send(_leader_and_isr(target, TOPIC, topic_id, STALE_CONTROLLER, broker_epoch), 7)
            out.append((r.error_code, [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors])
                                       for t in r.topics]))
        return out
    assert _run(target, body) == [
        (STALE_CONTROLLER_EPOCH, [(topic_id, [(0, STALE_CONTROLLER_EPOCH), (1, STALE_CONTROLLER_EPOCH)])]),
        (STALE_BROKER_EPOCH, [(topic_id, [(0, STALE_BROKER_EPOCH), (1, STALE_BROKER_EPOCH)])]),
    ]
    assert leaders(cluster) == UNCHANGED


def test_stop_replica_refused_and_nothing_deleted(cluster: LocalCluster) -> None:
    _, target, _ = _targets(cluster)

    async def body(conn: BrokerConnection) -> Any:
        out = []
        for broker_epoch in (NO_BROKER_EPOCH, STALE_BROKER_EPOCH_VALUE):
            r = await conn.send(_stop_replica(target, TOPIC, STALE_CONTROLLER, broker_epoch), 4)
            out.append((r.error_code, r.partition_errors))
        return out
    assert _run(target, body) == [(STALE_CONTROLLER_EPOCH, []), (STALE_BROKER_EPOCH, [])]
    assert leaders(cluster) == UNCHANGED
    assert sorted(d for d in cluster.broker(1).log_dir.iterdir() if d.name.startswith(TOPIC)) == \
        [cluster.broker(1).log_dir / f"{TOPIC}-0", cluster.broker(1).log_dir / f"{TOPIC}-1"]


def test_controlled_shutdown_and_alter_partition_refused_by_the_controller(cluster: LocalCluster) -> None:
    controller, _, topic_id = _targets(cluster)

    async def body(conn: BrokerConnection) -> Any:
        out: list[Any] = []
        for broker_id, broker_epoch in ((99, NO_BROKER_EPOCH), (99, 5), (1, STALE_BROKER_EPOCH_VALUE)):
            r = await conn.send(ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch), 3)
            out.append(("ControlledShutdown", r.error_code, r.remaining_partitions))
        for broker_id, broker_epoch in ((1, STALE_BROKER_EPOCH_VALUE), (1, NO_BROKER_EPOCH), (99, 5)):
            r = await conn.send(_alter_partition(topic_id, broker_id, broker_epoch), 3)
            out.append(("AlterPartition", r.error_code, r.topics))
        return out
    assert _run(controller, body) == [
        ("ControlledShutdown", BROKER_NOT_AVAILABLE, []), ("ControlledShutdown", UNKNOWN_SERVER_ERROR, []),
        ("ControlledShutdown", STALE_BROKER_EPOCH, []),
        ("AlterPartition", STALE_BROKER_EPOCH, []), ("AlterPartition", STALE_BROKER_EPOCH, []),
        ("AlterPartition", STALE_BROKER_EPOCH, []),
    ]
    # nothing moved; broker 1 is still a live broker
    assert leaders(cluster) == UNCHANGED
    assert sorted(n.node_id for n in metadata(cluster.broker(0)).brokers) == [0, 1]


def _header(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    client_id = b"hostile"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


MALFORMED = {
    # LeaderAndIsr v7 (flexible: header v2 has a tagged-field byte) cut off after the controller id
    "leader_and_isr_truncated": _header(4, 7) + b"\x00" + struct.pack(">i", 0),
    # UpdateMetadata v8 whose compact array of live brokers claims 2^28 entries
    "update_metadata_huge_array": _header(6, 8) + b"\x00" + struct.pack(">iBiq", 0, 0, 1, -1)
    + b"\x01" + b"\x80\x80\x80\x80\x01",
    # StopReplica v4 with trailing garbage where the tagged fields end
    "stop_replica_garbage": _header(5, 4) + b"\x00" + b"\xff" * 40,
    # an api key nobody has
    "unknown_api_key": _header(999, 0) + b"\x00" * 8,
}


def _send_raw(host: str, port: int, frame: bytes) -> bytes:
    """Sends the frame, returns what comes back until the broker closes (b"" if it closes at once)."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(frame)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_inter_broker_frames_close_the_connection(cluster: LocalCluster, name: str) -> None:
    b = cluster.broker(1)
    body = MALFORMED[name]
    assert _send_raw(b.host, b.port, struct.pack(">i", len(body)) + body) == b""
    assert _send_raw(b.host, b.port, struct.pack(">i", -1)) == b""
    assert leaders(cluster) == UNCHANGED


def test_unreachable_zookeeper_is_one_line_and_exit_1(tmp_path: Any) -> None:
    with socket.socket() as s:   # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    timeout_ms = 2000
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kafkalite", "serve", "--override", "broker.id=0",
         "--override", f"zookeeper.connect=127.0.0.1:{port}/kafkalite",
         "--override", f"zookeeper.connection.timeout.ms={timeout_ms}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path / 'logs'}"],
        capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    lines = proc.stderr.splitlines()
    assert (proc.returncode, proc.stdout, lines[-1]) == (
        1, "", f"kafkalite: cannot start: Timed out waiting for connection to ZooKeeper at "
               f"127.0.0.1:{port}/kafkalite after {timeout_ms} ms")
    # before it, only the broker's log (on stderr, as always): its INFO lines (the log dir
    # created, as Kafka logs it), kazoo's connection attempts, and the loop monitor's lag
    # warning when the machine is busy (another test worker beside it)
    assert [line for line in lines[:-1]
            if not re.fullmatch(r"\[[0-9-]+ [0-9:,]+\] INFO .+", line)
            and not re.fullmatch(r"\[[0-9-]+ [0-9:,]+\] WARNING kazoo\.client: .+", line)
            and not re.fullmatch(r"\[[0-9-]+ [0-9:,]+\] WARNING kafkalite\.server\.event_loop_monitor: "
                                 r"event loop blocked: a callback fired \d+ ms late", line)] == []
    assert "Traceback" not in proc.stderr
    assert timeout_ms / 1000 <= took <= timeout_ms / 1000 + 10


def test_brief_zookeeper_pause_keeps_rf1_topics_serving(tmp_path: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    from tests.support.zookeeper import ZooKeeperServer

    topic = "paused-h8"
    with ZooKeeperServer() as zk, LocalCluster(zk.connect_string, 3) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        try:
            r = admin.create_topics([NewTopic(topic, replica_assignments={0: [0], 1: [1], 2: [2]})], raise_errors=False)
            assert [t["error_code"] for t in r["topics"]] == [NONE]
            for b in c.brokers.values():
                wait_until(lambda: topic_layout(b, topic) == [(0, 0, [0], [0]), (1, 1, [1], [1]), (2, 2, [2], [2])],
                           30, "topic")
            producer = KafkaProducer(bootstrap_servers=c.bootstrap_servers, acks=1, linger_ms=0)
            for p in range(3):   # connections and metadata in place before the outage
                producer.send(topic, b"before", partition=p).get(30)
            zk.pause()
            paused_at = time.monotonic()
            try:
                offsets = [producer.send(topic, f"during-{p}".encode(), partition=p).get(10).offset for p in range(3)]
                assert offsets == [1, 1, 1]
                consumer = KafkaConsumer(bootstrap_servers=c.bootstrap_servers, enable_auto_commit=False,
                                         consumer_timeout_ms=1500)
                tps = [TopicPartition(topic, p) for p in range(3)]
                consumer.assign(tps)
                consumer.seek_to_beginning(*tps)
                got = sorted((m.partition, m.offset, m.value) for m in consumer)
                consumer.close()
                for b in c.brokers.values():
                    assert topic_layout(b, topic) == [(0, 0, [0], [0]), (1, 1, [1], [1]), (2, 2, [2], [2])]
                    assert sorted(n.node_id for n in metadata(b).brokers) == [0, 1, 2]
                assert time.monotonic() - paused_at < 5.5, "the outage outlasted the session timeout"
            finally:
                zk.resume()
            assert got == sorted([(p, 0, b"before") for p in range(3)] + [(p, 1, f"during-{p}".encode())
                                                                          for p in range(3)])
            producer.close()
            # after the outage: the same sessions (no broker re-registered) and admin works again
            r = admin.create_topics([NewTopic("after-pause-h8", replica_assignments={0: [2], 1: [0]})],
                                    raise_errors=False)
            assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("after-pause-h8", NONE)]
            for b in c.brokers.values():
                wait_until(lambda: topic_layout(b, "after-pause-h8") == [(0, 2, [2], [2]), (1, 0, [0], [0])],
                           30, "topic created after the pause")
            assert [c.zk.get(f"/brokers/ids/{i}")[1].version for i in range(3)] == [1, 1, 1]
            assert c.znode_json("/controller_epoch") == 1
        finally:
            admin.close()
