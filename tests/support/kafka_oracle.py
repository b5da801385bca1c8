"""Apache Kafka 3.9 itself, as the reference broker for differential tests and benchmarks.

    with ZooKeeperServer() as zk, KafkaOracle(zk.connect_string) as kafka:
        kafka.bootstrap_servers   # "127.0.0.1:<port>"

`kafka_2.13` and its runtime dependencies come from Maven Central through `tests.support.maven`
(resolved once into the cache directory, never into git); the broker runs as
`java -cp <jars> kafka.Kafka server.properties` in ZooKeeper mode, on a free port, with its log
dir and log4j output in a temp dir of its own. Ready when it answers ApiVersions, has
registered in ZooKeeper and its Metadata names a controller; stopped with SIGTERM (controlled shutdown), SIGKILL after a grace
period. When start-up fails the error carries the tail of Kafka's own log.

Nothing of Kafka's code is in this repository: it is only downloaded and run.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence

from tests.support import maven
from tests.support.zookeeper import free_port

KAFKA_VERSION = "3.9.1"
ARTIFACTS = [
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    # Kafka's distribution logs through reload4j; without a binding slf4j is silent and a
    # failed start would leave no explanation.
    "ch.qos.reload4j:reload4j:1.2.25",
    "org.slf4j:slf4j-reload4j:1.7.36",
]

# A JVM of modest size: several run on a shared 2-core machine.
JVM_FLAGS = ["-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true"]

# Single-broker defaults as Kafka's own config/server.properties and the test harnesses of
# Kafka's ecosystem use them (one replica of the internal topics, no rebalance delay).
DEFAULTS: dict[str, str] = {
    "broker.id": "0",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "18000",
    "controlled.shutdown.enable": "true",
    "log.flush.interval.messages": "9223372036854775807",
}


class KafkaOracleError(RuntimeError):
    pass


def kafka_jars() -> list[Path]:
    return maven.resolve(f"kafka-{KAFKA_VERSION}", ARTIFACTS)


def _request(host: str, port: int, api_key: int, api_version: int, body: bytes,
             timeout: float) -> Optional[bytes]:
    """One request with a v0 header (client id "ready"); the response after its correlation id,
    or None when the connection closed first."""
    client_id = b"ready"
    frame = struct.pack(">hhih", api_key, api_version, 1, len(client_id)) + client_id + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        data = b""
        size = None
        while size is None or len(data) < 4 + size:
            chunk = s.recv(65536)
            if not chunk:
                return None
            data += chunk
            if size is None and len(data) >= 4:
                (size,) = struct.unpack(">i", data[:4])
    return data[8:4 + size]


def _api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """One ApiVersions v0 request; True when the broker answers with error code 0."""
    answer = _request(host, port, 18, 0, b"", timeout)
    return answer is not None and len(answer) >= 2 and struct.unpack(">h", answer[:2])[0] == 0


def _controller_id(host: str, port: int, timeout: float = 2.0) -> Optional[int]:
    """The controller id in the broker's Metadata v1 answer (no topics asked), -1 while the
    broker's metadata cache has not heard from a controller; None when it did not answer."""
    answer = _request(host, port, 3, 1, struct.pack(">i", 0), timeout)
    if answer is None:
        return None
    pos = 4
    for _ in range(struct.unpack(">i", answer[:4])[0]):    # brokers: id, host, port, rack
        (host_len,) = struct.unpack_from(">h", answer, pos + 4)
        pos += 4 + 2 + host_len + 4
        (rack_len,) = struct.unpack_from(">h", answer, pos)
        pos += 2 + max(rack_len, 0)
    return int(struct.unpack_from(">i", answer, pos)[0])


class KafkaOracle:
    """One Apache Kafka broker in ZooKeeper mode."""

    def __init__(self, zookeeper_connect: str, overrides: Optional[Mapping[str, str]] = None,
                 work_dir: Optional[Path] = None, port: Optional[int] = None,
                 chroot: Optional[str] = None,
                 jvm_flags: Optional[Sequence[str]] = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="kafkalite-oracle-"))
        self.chroot = chroot if chroot is not None else f"/kafka-{os.getpid()}-{self.port}"
        self.zookeeper_connect = zookeeper_connect + self.chroot
        self.properties = dict(DEFAULTS)
        self.properties.update({
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.work_dir / "logs"),
            "zookeeper.connect": self.zookeeper_connect,
        })
        self.properties.update(overrides or {})
        # The defaults suit tests (fast start, small heap); a benchmark passes Kafka's own
        # start-script flags instead.
        self.jvm_flags = list(JVM_FLAGS if jvm_flags is None else jvm_flags)
        self.proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def broker_id(self) -> int:
        return int(self.properties["broker.id"])

    @property
    def log_path(self) -> Path:
        return self.work_dir / "server.log"

    def _write_files(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self.work_dir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        (self.work_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log_path}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.org.apache.zookeeper=WARN\n"
            "log4j.logger.kafka.request.logger=WARN\n"
            "log4j.logger.state.change.logger=INFO\n")
        return props

    def command(self) -> list[str]:
        return (["java"] + self.jvm_flags +
                [f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
                 f"-Dkafka.logs.dir={self.work_dir}",
                 "-cp", maven.classpath(kafka_jars()), "kafka.Kafka",
                 str(self.work_dir / "server.properties")])

    def start(self, timeout: float = 90.0) -> "KafkaOracle":
        if shutil.which("java") is None:
            raise KafkaOracleError("Apache Kafka needs Java (scripts/test.sh installs a JDK)")
        self._write_files()
        command = self.command()
        with open(self.work_dir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.started_at = time.monotonic()
        deadline = self.started_at + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KafkaOracleError(f"Kafka exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                if (_api_versions_ok(self.host, self.port, 1.0) and self._registered()
                        and self._controller_known()):
                    self.ready_after = time.monotonic() - self.started_at
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        logs = self.logs()
        self.stop()
        raise KafkaOracleError(f"Kafka not ready after {timeout} s:\n{logs}")

    def _registered(self) -> bool:
        # The log says so once the broker is registered in ZooKeeper and its socket server
        # accepts requests (KafkaServer's "started" line). Kafka writes that line before the
        # controller's first UpdateMetadata reaches the broker: until then its Metadata answers
        # name no controller (-1), and librdkafka 2.16's AdminClient, given -1 once, waits its
        # whole request timeout for a controller instead of asking again, so start() also
        # waits for a controller in the broker's Metadata.
        return self.log_path.exists() and "started (kafka.server.KafkaServer)" in \
            self.log_path.read_text(errors="replace")

    def _controller_known(self) -> bool:
        controller = _controller_id(self.host, self.port, 1.0)
        return controller is not None and controller >= 0

    def logs(self, tail: int = 12000) -> str:
        parts = []
        for path in (self.work_dir / "stdout.log", self.log_path):
            if path.exists():
                parts.append(f"--- {path.name} ---\n" + path.read_text(errors="replace")[-tail:])
        return "\n".join(parts)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> Optional[int]:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.terminate()
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaOracle":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
