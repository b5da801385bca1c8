"""A small kafkalite cluster for the H8 cluster tests (membership, layout, hostile input):
brokers as `kafkalite.testing.Broker` processes with `broker.id` and `zookeeper.connect` on a
chroot of their own, on a ZooKeeper the caller gives (the session's, or one of the test's own when
the test pauses it). Not a conftest (pytest does not load it by that name): the test modules
import it. `kafkalite.testing.Cluster` does the same for users; this one stays as small as the
tests need and adds the kazoo and Metadata helpers they share.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Iterator, Mapping, Optional

from kazoo.client import KazooClient

from kafkalite.testing import Broker

# Kafka's test-friendly settings for a cluster (as kafkalite.testing.Cluster sets them): a session
# timeout the test ZooKeeper (tickTime 500 ms) allows, no rebalance delay, few internal partitions.
CLUSTER_DEFAULTS: dict[str, str] = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "auto.leader.rebalance.enable": "false",
}


def wait_until(condition: Callable[[], Any], timeout: float = 30.0, what: str = "",
               interval: float = 0.05) -> Any:
    """Polls `condition` until it returns something truthy (returned); AssertionError after
    `timeout` seconds naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what} (last: {last!r})")
        time.sleep(interval)


class LocalCluster:
    """`n` kafkalite brokers (ids 0..n-1) on `zookeeper_hosts` + a fresh chroot."""

    def __init__(self, zookeeper_hosts: str, n: int = 3,
                 overrides: Optional[Mapping[str, str]] = None,
                 chroot: Optional[str] = None) -> None:
        self.zookeeper_hosts = zookeeper_hosts
        self.chroot = chroot or f"/kafkalite-h8-{uuid.uuid4().hex[:8]}"
        self.zookeeper_connect = zookeeper_hosts + self.chroot
        self.brokers: dict[int, Broker] = {}
        for broker_id in range(n):
            props = {**CLUSTER_DEFAULTS, **(overrides or {}),
                     "broker.id": str(broker_id), "zookeeper.connect": self.zookeeper_connect}
            self.brokers[broker_id] = Broker(props, ready_timeout=60.0)
        self._zk: Optional[KazooClient] = None

    def start(self) -> "LocalCluster":
        try:
            for b in self.brokers.values():
                b.start()
            # every broker sees every other one before a test relies on the cluster
            wait_until(lambda: all(sorted(n.node_id for n in metadata(b).brokers) == sorted(self.brokers)
                                   for b in self.brokers.values()),
                       60, "all brokers in every broker's metadata")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            b.kill()
        for b in self.brokers.values():
            b.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    def broker(self, broker_id: int) -> Broker:
        return self.brokers[broker_id]

    @property
    def zk(self) -> KazooClient:
        """A kazoo client on the cluster's chroot (paths as Kafka names them)."""
        if self._zk is None:
            self._zk = KazooClient(self.zookeeper_connect)
            self._zk.start(30)
        return self._zk

    def znode_json(self, path: str) -> Any:
        data, _ = self.zk.get(path)
        return json.loads(data)

    def controller_id(self, timeout: float = 30.0) -> int:
        (cid,) = wait_until(lambda: _controller(self), timeout, "a controller")
        return int(cid)


def _controller(cluster: LocalCluster) -> Optional[tuple[int]]:
    """(controller id,) as the first live broker answers it (a tuple: id 0 is falsy)."""
    for b in cluster.brokers.values():
        if b.running:
            try:
                cid = metadata(b).controller_id
            except (OSError, RuntimeError):
                continue
            if cid is not None and cid >= 0:
                return (cid,)
    return None


def _kafka_protocol() -> Any:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol import admin, metadata as md
    return admin, md


def send(broker: Broker, request: Any, timeout: float = 30.0) -> Any:
    """One request over a fresh connection (kafka-python's codec), the decoded response."""
    from kafkalite.testing import _Connection

    with _Connection(broker.host, broker.port, timeout) as c:
        return c.request(request)


def metadata(broker: Broker, topics: Optional[list[str]] = None, version: int = 12) -> Any:
    _, md = _kafka_protocol()
    req = md.MetadataRequest[version](
        topics=None if topics is None else [md.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False)
    return send(broker, req)


def topic_layout(broker: Broker, topic: str) -> Optional[list[tuple[int, int, list[int], list[int]]]]:
    """(partition, leader, replicas, isr) of each partition as `broker` serves it; None while
    the topic is unknown or a partition has an error."""
    md = metadata(broker, [topic])
    (t,) = md.topics
    if t.error_code != 0:
        return None
    if any(p.error_code != 0 for p in t.partitions):
        return None
    return sorted((p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                  for p in t.partitions)


def iter_znodes(zk: KazooClient, root: str = "/") -> Iterator[str]:
    yield root
    for child in sorted(zk.get_children(root)):
        yield from iter_znodes(zk, f"{root.rstrip('/')}/{child}")
