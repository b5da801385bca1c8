"""What the cluster benchmarks share (scripts/bench_cluster.py, scripts/bench_replication.py): a
3-broker kafkalite cluster (kafkalite.testing.Cluster) and a 3-broker Apache Kafka 3.9.1 cluster
in ZooKeeper mode (three KafkaOracle brokers of tests/support/kafka_oracle.py, jars from Maven
Central) behind one interface, a blocking Kafka-protocol client (kafka-python's codec) for
Metadata and CreateTopics, a ZooKeeper znode watch, the results store and the run's environment.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

with warnings.catch_warnings():
    # kafka-python's JSON schema loading warns; the bench's output should not carry that.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import CreateTopicsRequest
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kazoo.client import KazooClient  # noqa: E402

from kafkalite.testing import Cluster  # noqa: E402

from tests.support.kafka_oracle import KAFKA_VERSION, KafkaOracle  # noqa: E402

KAFKALITE = "kafkalite"
KAFKA = "kafka"
TARGETS = (KAFKALITE, KAFKA)
LABELS = {KAFKALITE: "kafkalite", KAFKA: f"Apache Kafka {KAFKA_VERSION}"}
BROKER_IDS = (0, 1, 2)
# Kafka's own start-script JVM flags (kafka-server-start.sh / kafka-run-class.sh), as bench.py.
KAFKA_JVM_FLAGS = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")


class BenchError(RuntimeError):
    """A measurement could not be completed; the message says why (reported, not hidden)."""


def common_overrides(session_timeout_ms: int) -> dict[str, str]:
    """The settings both brokers get, so that the figures compare like with like: the same
    session timeout (it dominates failure detection), the same controlled-shutdown backoff, no
    automatic rebalance moving leaders behind the measurement's back."""
    return {
        "zookeeper.session.timeout.ms": str(session_timeout_ms),
        "controlled.shutdown.enable": "true",
        "controlled.shutdown.max.retries": "3",
        "controlled.shutdown.retry.backoff.ms": "500",
        "auto.leader.rebalance.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "1",
        "num.partitions": "1",
    }


# --------------------------------------------------------------------------------------------
# A blocking Kafka-protocol client: Metadata, CreateTopics, ElectLeaders
# --------------------------------------------------------------------------------------------

class Connection:
    """One socket to one broker, kafka-python's codec, the highest common version of each API."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._correlation_id = 0
        self._versions: Optional[dict[int, tuple[int, int]]] = None

    def close(self) -> None:
        self.sock.close()

    def request(self, req: Any, timeout: Optional[float] = None) -> Any:
        self._correlation_id += 1
        req.with_header(correlation_id=self._correlation_id, client_id="bench-cluster")
        response_class = req.header.get_response_class()
        self.sock.settimeout(timeout or self.timeout)
        self.sock.sendall(req.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        if correlation_id != self._correlation_id:
            raise ConnectionError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        return response_class.decode(frame, header=True)

    def version(self, request_class: Any) -> int:
        if self._versions is None:
            resp = self.request(ApiVersionsRequest[0]())
            self._versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        lo, hi = self._versions.get(request_class.API_KEY, (0, -1))
        v = min(hi, request_class.max_version)
        if v < max(lo, request_class.min_version):
            raise BenchError(f"no common version of {request_class.__name__}")
        return v

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class MetadataView:
    """What one broker's Metadata says: the controller, live brokers, and the partitions of the
    asked topics (topic -> partition -> view); topics with an error are absent."""
    controller_id: int
    brokers: frozenset[int]
    partitions: dict[str, dict[int, PartitionView]]

    def leaders(self) -> Iterable[tuple[str, int, int]]:
        for topic, parts in self.partitions.items():
            for p, view in parts.items():
                yield topic, p, view.leader


class Client:
    """Connections to the brokers of one cluster, reopened after a failure."""

    def __init__(self, addresses: Callable[[int], tuple[str, int]], timeout: float = 10.0) -> None:
        self._addresses = addresses
        self._timeout = timeout
        self._conns: dict[int, Connection] = {}

    def _conn(self, broker_id: int) -> Connection:
        c = self._conns.get(broker_id)
        if c is None:
            host, port = self._addresses(broker_id)
            c = self._conns[broker_id] = Connection(host, port, self._timeout)
        return c

    def drop(self, broker_id: int) -> None:
        c = self._conns.pop(broker_id, None)
        if c is not None:
            c.close()

    def close(self) -> None:
        for b in list(self._conns):
            self.drop(b)

    def call(self, broker_id: int, make: Callable[[Connection], Any],
             timeout: Optional[float] = None) -> Any:
        try:
            c = self._conn(broker_id)
            return c.request(make(c), timeout)
        except (OSError, ConnectionError, struct.error):
            self.drop(broker_id)
            raise

    def metadata(self, broker_id: int, topics: Optional[list[str]]) -> MetadataView:
        def make(c: Connection) -> Any:
            v = c.version(MetadataRequest)
            asked = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                  for t in topics]
            return MetadataRequest[v](topics=asked, allow_auto_topic_creation=False)

        md = self.call(broker_id, make)
        parts: dict[str, dict[int, PartitionView]] = {}
        for t in md.topics:
            if t.error_code == 0:
                parts[t.name] = {p.partition_index: PartitionView(p.leader_id, tuple(p.replica_nodes),
                                                                  tuple(p.isr_nodes))
                                 for p in t.partitions}
        return MetadataView(md.controller_id, frozenset(b.node_id for b in md.brokers), parts)

    def create_topic(self, broker_id: int, name: str, partitions: int, replication_factor: int,
                     timeout_ms: int, assignment: Optional[dict[int, list[int]]] = None,
                     configs: Optional[dict[str, str]] = None) -> int:
        """CreateTopics to one broker; the topic's error code (0: created and its metadata out)."""
        T = CreateTopicsRequest.CreatableTopic
        topic_configs = [T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()]

        def make(c: Connection) -> Any:
            if assignment:
                topic = T(name=name, num_partitions=-1, replication_factor=-1, configs=topic_configs,
                          assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                                       for p, b in sorted(assignment.items())])
            else:
                topic = T(name=name, num_partitions=partitions,
                          replication_factor=replication_factor, assignments=[],
                          configs=topic_configs)
            return CreateTopicsRequest[c.version(CreateTopicsRequest)](
                topics=[topic], timeout_ms=timeout_ms, validate_only=False)

        resp = self.call(broker_id, make, timeout=timeout_ms / 1000 + 10)
        return int(resp.topics[0].error_code)


# --------------------------------------------------------------------------------------------
# The clusters under test
# --------------------------------------------------------------------------------------------

class ClusterUnderTest(ABC):
    """Three brokers (ids 0-2) on one ZooKeeper chroot, started together; each can be killed
    (SIGKILL) or stopped (SIGTERM, waiting for the exit)."""

    name: str

    def __init__(self, zk_connect: str, chroot: str, overrides: dict[str, str]) -> None:
        self.zk_connect = zk_connect
        self.chroot = chroot
        self.overrides = overrides

    @abstractmethod
    def start(self, timeout: float) -> None:
        """Spawn all three at once (as a start script would); return once each is serving."""

    @abstractmethod
    def address(self, broker_id: int) -> tuple[str, int]: ...

    @abstractmethod
    def running(self) -> list[int]: ...

    @abstractmethod
    def kill(self, broker_id: int) -> None:
        """SIGKILL, as a crash; reaped before returning."""

    @abstractmethod
    def stop(self, broker_id: int, timeout: float) -> int:
        """SIGTERM (a controlled shutdown) and wait for the exit; the exit code."""

    @abstractmethod
    def restart(self, broker_id: int, timeout: float) -> None:
        """Start a stopped or killed broker again (same id, port and log dir); return once it
        serves."""

    @abstractmethod
    def close(self) -> None: ...

    def bootstrap_servers(self) -> str:
        return ",".join("%s:%d" % self.address(b) for b in BROKER_IDS)


class KafkaliteCluster(ClusterUnderTest):
    """kafkalite.testing.Cluster on the bench's ZooKeeper, with the common overrides."""

    name = KAFKALITE

    def __init__(self, zk_connect: str, chroot: str, overrides: dict[str, str]) -> None:
        super().__init__(zk_connect, chroot, overrides)
        self.cluster = Cluster(len(BROKER_IDS), overrides, zookeeper=zk_connect, chroot=chroot)

    def start(self, timeout: float) -> None:
        self.cluster.start_timeout = timeout
        self.cluster.start()

    def address(self, broker_id: int) -> tuple[str, int]:
        b = self.cluster.broker(broker_id)
        return b.host, b.port

    def running(self) -> list[int]:
        return self.cluster.running_broker_ids()

    def kill(self, broker_id: int) -> None:
        self.cluster.broker(broker_id).kill()

    def stop(self, broker_id: int, timeout: float) -> int:
        code = self.cluster.broker(broker_id).stop(timeout)
        assert code is not None
        return code

    def restart(self, broker_id: int, timeout: float) -> None:
        self.cluster.broker(broker_id).start(timeout)

    def close(self) -> None:
        for b in self.cluster.brokers.values():
            b.kill()   # the measurement is over: no controlled shutdowns to wait for
        self.cluster.close()


class KafkaCluster(ClusterUnderTest):
    """Three KafkaOracle brokers (Apache Kafka 3.9.1, ZooKeeper mode) on one chroot."""

    name = KAFKA

    def __init__(self, zk_connect: str, chroot: str, overrides: dict[str, str],
                 jvm_flags: tuple[str, ...]) -> None:
        super().__init__(zk_connect, chroot, overrides)
        self.brokers = {b: KafkaOracle(zk_connect, overrides={**overrides, "broker.id": str(b)},
                                       chroot=chroot, jvm_flags=jvm_flags)
                        for b in BROKER_IDS}

    def start(self, timeout: float) -> None:
        errors: list[BaseException] = []

        def start_one(b: KafkaOracle) -> None:
            try:
                b.start(timeout)
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        threads = [threading.Thread(target=start_one, args=(b,)) for b in self.brokers.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise BenchError(f"a Kafka broker did not start: {str(errors[0])[:2000]}")

    def address(self, broker_id: int) -> tuple[str, int]:
        b = self.brokers[broker_id]
        return b.host, b.port

    def running(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None]

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int, timeout: float) -> int:
        code = self.brokers[broker_id].stop(timeout)
        assert code is not None
        return code

    def restart(self, broker_id: int, timeout: float) -> None:
        b = self.brokers[broker_id]
        # KafkaOracle is ready once its log has KafkaServer's "started" line: the previous run's
        # log is set aside so that only the new run's line counts.
        if b.log_path.exists():
            b.log_path.rename(b.log_path.with_name(f"server.log.{time.monotonic_ns()}"))
        b.start(timeout)

    def close(self) -> None:
        for b in self.brokers.values():
            b.kill()
            b.close()


# --------------------------------------------------------------------------------------------
# ZooKeeper watch, results, environment
# --------------------------------------------------------------------------------------------

class ZnodeGone:
    """The time (perf_counter) a znode stops existing, from a kazoo watch (no polling)."""

    def __init__(self, zk: KazooClient, path: str) -> None:
        self.at: Optional[float] = None
        self._zk = zk
        self._path = path
        self._event = threading.Event()
        if zk.exists(path, watch=self._watch) is None:
            raise BenchError(f"{path} does not exist")

    def _watch(self, event: Any) -> None:
        if event.type == "DELETED":
            self.at = time.perf_counter()
            self._event.set()
        elif self._zk.exists(self._path, watch=self._watch) is None and self.at is None:
            self.at = time.perf_counter()
            self._event.set()

    def wait(self, timeout: float) -> Optional[float]:
        self._event.wait(timeout)
        return self.at


@dataclass
class Results:
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    exit_codes: dict[str, list[int]] = field(default_factory=dict)

    def add(self, metric: str, target: str, value: float) -> None:
        self.values.setdefault(metric, {}).setdefault(target, []).append(value)

    def median(self, metric: str, target: str) -> Optional[float]:
        v = self.values.get(metric, {}).get(target)
        return statistics.median(v) if v else None


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)




def environment(script: str, argv: list[str]) -> dict[str, Any]:
    """Date, command line, commit (and whether kafkalite/ has uncommitted changes), versions, load."""
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--",
                                "kafkalite"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        commit, dirty = "", ""
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java_line = (java.stderr or java.stdout).splitlines()[0].strip()
    except (OSError, subprocess.TimeoutExpired, IndexError):
        java_line = "java not runnable"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"python scripts/{script} " + " ".join(shlex.quote(a) for a in argv),
        "git_commit": commit,
        "kafkalite_tree_modified": bool(dirty.strip()),
        "python": platform.python_version(),
        "java": java_line,
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
    }


