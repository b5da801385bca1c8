"""Helpers for the cluster fault tests: Metadata straight from one broker (no client caching),
ZooKeeper read with kazoo under the cluster's chroot, and process signals."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Awaitable, Callable, Iterator, Optional, TypeVar

from contextlib import contextmanager
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.metadata import MetadataRequest
from kazoo.client import KazooClient

from kafkalite.network.broker_client import BrokerConnection

T = TypeVar("T")

METADATA_VERSION = 12
NONE = 0
LEADER_NOT_AVAILABLE = 5
STALE_CONTROLLER_EPOCH = 11
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELECTION_NOT_NEEDED = 84

# Tests that wait for ZooKeeper to notice a killed or cut-off broker (its session's expiry) run
# with a 3 s session instead of kafkalite.testing.CLUSTER_TEST_DEFAULTS' 6 s: within what the test
# ZooKeeper allows (tickTime 500 ms: 1 to 10 s), and a live broker still keeps it on a busy
# machine (kazoo pings from a thread of its own every second). Tests that pause a broker and need
# its session to survive keep the longer one.
FAST_EXPIRY_MS = 3000
FAST_EXPIRY = {"zookeeper.session.timeout.ms": str(FAST_EXPIRY_MS)}


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro_fn())  # type: ignore[arg-type]


async def send(host: str, port: int, request: Any, version: int, timeout_ms: int = 10000) -> Any:
    conn = BrokerConnection(host, port, client_id="cluster-fault-test", request_timeout_ms=timeout_ms)
    try:
        return await conn.send(request, version)
    finally:
        await conn.close()


def request(broker: Any, req: Any, version: int, timeout_ms: int = 10000) -> Any:
    return run(lambda: send(broker.host, broker.port, req, version, timeout_ms))


def metadata(broker: Any, topics: Optional[list[str]] = None) -> Any:
    """MetadataResponse v12 from this one broker."""
    req = MetadataRequest(topics=None if topics is None else
                          [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                          allow_auto_topic_creation=False)
    return request(broker, req, METADATA_VERSION)


def partitions(broker: Any, topic: str) -> dict[int, tuple[int, int, int, list[int], list[int], list[int]]]:
    """partition -> (error code, leader, leader epoch, replicas, isr, offline replicas), as `broker` sees it."""
    t = metadata(broker, [topic]).topics[0]
    assert t.error_code == NONE, t
    return {p.partition_index: (p.error_code, p.leader_id, p.leader_epoch, list(p.replica_nodes),
                                list(p.isr_nodes), list(p.offline_replicas)) for p in t.partitions}


def broker_ids(broker: Any) -> list[int]:
    return sorted(b.node_id for b in metadata(broker, []).brokers)


def controller_seen_by(broker: Any) -> int:
    return int(metadata(broker, []).controller_id)


def create_topic(broker: Any, name: str, partitions_: int, replication_factor: int,
                 timeout_ms: int = 30000) -> int:
    T_ = CreateTopicsRequest.CreatableTopic
    resp = request(broker, CreateTopicsRequest(
        topics=[T_(name=name, num_partitions=partitions_, replication_factor=replication_factor,
                   assignments=[], configs=[])], timeout_ms=timeout_ms, validate_only=False), 7,
        timeout_ms + 5000)
    return int(resp.topics[0].error_code)


def delete_topic(broker: Any, name: str, timeout_ms: int = 30000) -> int:
    resp = request(broker, DeleteTopicsRequest(topic_names=[name], timeout_ms=timeout_ms), 5,
                   timeout_ms + 5000)
    return int(resp.responses[0].error_code)


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> float:
    """Seconds it took; AssertionError (with the last exception, if any) after `timeout`."""
    start = time.monotonic()
    last: Optional[BaseException] = None
    while True:
        try:
            if condition():
                return time.monotonic() - start
            last = None
        except Exception as e:  # noqa: BLE001 - a broker may be briefly unreachable
            last = e
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}" + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- ZooKeeper ------------------------------------------------------------------------------------

@contextmanager
def zookeeper(cluster: Any) -> Iterator[KazooClient]:
    """A kazoo client rooted at the cluster's chroot."""
    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    zk.start(timeout=15)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def zk_json(zk: KazooClient, path: str) -> tuple[Any, Any]:
    data, stat = zk.get(path)
    return json.loads(data), stat


def controller_epoch(zk: KazooClient) -> tuple[int, int]:
    """(/controller_epoch value, its zkVersion)."""
    data, stat = zk.get("/controller_epoch")
    return int(data), stat.version


def controller_znode(zk: KazooClient) -> Optional[int]:
    if zk.exists("/controller") is None:
        return None
    return int(zk_json(zk, "/controller")[0]["brokerid"])


def broker_czxid(zk: KazooClient, broker_id: int) -> Optional[int]:
    stat = zk.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else stat.czxid


def partition_state(zk: KazooClient, topic: str, partition: int) -> tuple[dict[str, Any], int]:
    """The partition's state znode as JSON and its version (the partition epoch)."""
    state, stat = zk_json(zk, f"/brokers/topics/{topic}/partitions/{partition}/state")
    return state, stat.version


def assignment(zk: KazooClient, topic: str) -> tuple[dict[int, list[int]], uuid.UUID]:
    data, _ = zk_json(zk, f"/brokers/topics/{topic}")
    import base64
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(data["topic_id"] + "=="))
    return {int(p): r for p, r in data["partitions"].items()}, topic_id


# -- clients ----------------------------------------------------------------------------------------

def consume_all(bootstrap: str, topic: str, partition: int, expected: int, timeout: float = 20.0) -> list[bytes]:
    """The values of `partition` from offset 0, once `expected` records arrived (or the timeout)."""
    from kafka import KafkaConsumer, TopicPartition as KTP
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=500, request_timeout_ms=10000)
    try:
        tp = KTP(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def create_topic_with_assignment(broker: Any, name: str, assignment_: dict[int, list[int]],
                                 timeout_ms: int = 30000) -> int:
    T_ = CreateTopicsRequest.CreatableTopic
    resp = request(broker, CreateTopicsRequest(
        topics=[T_(name=name, num_partitions=-1, replication_factor=-1,
                   assignments=[T_.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
                                for p, r in sorted(assignment_.items())],
                   configs=[])], timeout_ms=timeout_ms, validate_only=False), 7, timeout_ms + 5000)
    return int(resp.topics[0].error_code)


def wait_equal(observe: Callable[[], Any], expected: Any, timeout: float, what: str, interval: float = 0.1) -> float:
    """Polls `observe()` until it equals `expected`; seconds it took. AssertionError with the last
    observation after `timeout`."""
    start = time.monotonic()
    last: Any = None
    while True:
        try:
            last = observe()
            if last == expected:
                return time.monotonic() - start
        except Exception as e:  # noqa: BLE001 - a broker may be briefly unreachable
            last = e
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}\n expected: {expected!r}\n last seen: {last!r}")
        time.sleep(interval)


def wait_metadata(cluster: Any, brokers: list[int], expected: dict[str, dict[int, tuple]], timeout: float,
                  what: str) -> float:
    """Until each of `brokers` answers Metadata for each topic with exactly `expected[topic]`
    (see `partitions`); seconds it took."""
    return wait_equal(lambda: {(b, t): partitions(cluster.broker(b), t) for b in brokers for t in expected},
                      {(b, t): e for b in brokers for t, e in expected.items()}, timeout, what)
