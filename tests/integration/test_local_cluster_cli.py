"""`kafkalite cluster` as a process: ZooKeeper and three brokers behind its ready lines, Metadata
from kafka-python listing them, data flowing, a clean stop on SIGTERM and SIGINT with exit code 0
and every process gone (checked by pid), the dir kept across runs, a broker killed meanwhile
reported in one line, nothing left behind when the command itself is SIGKILLed, and one-line
failures with exit code 1 (a broker that cannot start, a dir in use, a port in use).

Starts JVMs: run under `flock /tmp/kafkalite-heavy.lock`.
"""
from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.child_lines import read_line

# Debian's zookeeper package is installed by scripts/test.sh: a missing jar fails these tests
# (ZooKeeperError naming the package) rather than skipping them.

REPO = Path(__file__).resolve().parents[2]
ZK_READY = re.compile(r"^kafkalite cluster: zookeeper ready on 127\.0\.0\.1:(\d+) \(pid (\d+), data in (.+)\)\n$")
BROKER_READY = re.compile(r"^kafkalite cluster: broker (\d+) ready on 127\.0\.0\.1:(\d+) "
                          r"\(pid (\d+), log dir (.+)\)\n$")
CLUSTER_READY = re.compile(r"^kafkalite cluster ready: bootstrap servers (\S+) \(controller: broker (\d+), "
                           r"zookeeper\.connect (\S+)\)\n$")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafkalite", "cluster", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KAFKALITE_ZOOKEEPER_JAR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _read_line(stream: object, timeout: float) -> str:
    return read_line(stream, timeout, "`kafkalite cluster`")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@dataclass
class Running:
    proc: subprocess.Popen[str]
    zookeeper_port: int
    zookeeper_pid: int
    brokers: dict[int, tuple[int, int]]   # id -> (port, pid)
    bootstrap: str
    controller: int

    @property
    def pids(self) -> list[int]:
        return [self.zookeeper_pid] + [pid for _, pid in self.brokers.values()]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _start(processes: list[subprocess.Popen[str]], work_dir: Path, brokers: int = 3) -> Running:
    proc = subprocess.Popen(_command("--dir", str(work_dir), "--brokers", str(brokers)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    processes.append(proc)
    assert proc.stdout is not None and proc.stderr is not None

    def line() -> str:
        text = _read_line(proc.stdout, 120)
        if not text:
            assert proc.stderr is not None
            raise AssertionError(f"`kafkalite cluster` exited {proc.wait(10)}: {proc.stderr.read()}")
        return text
    zk = ZK_READY.match(line())
    assert zk, "first line names ZooKeeper"
    assert zk.group(3) == str(work_dir.resolve() / "zookeeper")
    found: dict[int, tuple[int, int]] = {}
    for _ in range(brokers):
        m = BROKER_READY.match(line())
        assert m
        assert m.group(4) == str(work_dir.resolve() / f"broker-{m.group(1)}")
        found[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    ready = CLUSTER_READY.match(line())
    assert ready
    assert sorted(found) == list(range(brokers))
    assert ready.group(1) == ",".join(f"127.0.0.1:{found[i][0]}" for i in range(brokers))
    assert ready.group(3) == f"127.0.0.1:{zk.group(1)}"
    return Running(proc, int(zk.group(1)), int(zk.group(2)), found, ready.group(1), int(ready.group(2)))


def _metadata(bootstrap: str) -> tuple[list[tuple[int, int]], int]:
    """(node id, port) of every broker and the controller id, from kafka-python's Metadata request."""
    from kafka.protocol.metadata import MetadataRequest

    from kafkalite.testing import _Connection

    host, port = bootstrap.split(",")[0].split(":")
    with _Connection(host, int(port), 10.0) as c:
        md = c.request(MetadataRequest[c.version(MetadataRequest)](topics=[], allow_auto_topic_creation=False))
    return sorted((b.node_id, b.port) for b in md.brokers), md.controller_id


def test_cluster_serves_stops_cleanly_and_keeps_its_data(tmp_path: Path,
                                                         processes: list[subprocess.Popen[str]]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    work_dir = tmp_path / "cluster"
    run = _start(processes, work_dir)
    assert all(alive(p) for p in run.pids)
    # Every broker's Metadata lists the three brokers and the controller the ready line names.
    expected = [(i, run.brokers[i][0]) for i in (0, 1, 2)]
    for i in (0, 1, 2):
        assert _metadata(f"127.0.0.1:{run.brokers[i][0]}") == (expected, run.controller)

    admin = KafkaAdminClient(bootstrap_servers=run.bootstrap)
    try:
        admin.create_topics([NewTopic("spread", num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=run.bootstrap, acks="all")
    for p in (0, 1, 2):
        producer.send("spread", b"v%d" % p, partition=p).get(timeout=30)
    producer.close()

    # a second cluster on the same dir is refused before it starts anything
    second = subprocess.run(_command("--dir", str(work_dir)), capture_output=True, text=True, timeout=30, env=_env())
    assert (second.returncode, second.stdout) == (1, "")
    assert second.stderr == f"kafkalite cluster: {work_dir.resolve()} is in use by another kafkalite cluster\n"

    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(90) == 0
    assert run.proc.stdout is not None and run.proc.stderr is not None
    assert (run.proc.stdout.read(), run.proc.stderr.read()) == ("", "")
    assert wait_dead(run.pids, 5) == []
    for i in (0, 1, 2):
        assert "shut down cleanly" in (work_dir / f"broker-{i}.log").read_text()
        assert (work_dir / f"broker-{i}" / ".kafka_cleanshutdown").exists()
    assert sorted(p.name for p in work_dir.glob("broker-*/spread-*")) == ["spread-0", "spread-1", "spread-2"]

    # The next run finds the topic and its records; a broker killed meanwhile is one line on
    # stderr and the others keep serving; SIGINT (Ctrl-C) stops it as cleanly.
    run2 = _start(processes, work_dir)
    consumer = KafkaConsumer(bootstrap_servers=run2.bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition("spread", p) for p in (0, 1, 2)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 3:
            assert time.monotonic() < deadline, got
            for tp, records in consumer.poll(timeout_ms=200).items():
                got.setdefault(tp.partition, []).extend(r.value for r in records)
    finally:
        consumer.close()
    assert got == {0: [b"v0"], 1: [b"v1"], 2: [b"v2"]}
    victim = next(i for i in (0, 1, 2) if i != run2.controller)
    os.kill(run2.brokers[victim][1], signal.SIGKILL)
    assert run2.proc.stderr is not None
    assert _read_line(run2.proc.stderr, 30) == (f"kafkalite cluster: broker {victim} exited with code -9 "
                                                f"(log: {work_dir.resolve() / f'broker-{victim}.log'})\n")
    others = [i for i in (0, 1, 2) if i != victim]
    deadline = time.monotonic() + 30
    while [b for b, _ in _metadata(f"127.0.0.1:{run2.brokers[run2.controller][0]}")[0]] != others:
        assert time.monotonic() < deadline, "the controller still lists the killed broker"
        time.sleep(0.2)
    run2.proc.send_signal(signal.SIGINT)
    assert run2.proc.wait(90) == 0
    assert run2.proc.stderr.read() == ""
    assert wait_dead(run2.pids, 5) == []


def test_killing_the_command_takes_zookeeper_and_brokers_with_it(tmp_path: Path,
                                                                  processes: list[subprocess.Popen[str]]) -> None:
    run = _start(processes, tmp_path / "cluster", brokers=2)
    run.proc.kill()
    run.proc.wait(10)
    # ZooKeeper by its parent-death signal, the brokers by their death pipe (a shutdown of their own)
    assert wait_dead(run.pids, 30) == []


def _one_line_failure(args: list[str]) -> str:
    started = time.monotonic()
    r = subprocess.run(_command(*args), capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 1, r
    assert time.monotonic() - started < 60
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_a_broker_that_cannot_start_stops_the_others(tmp_path: Path) -> None:
    work_dir = tmp_path / "cluster"
    work_dir.mkdir()
    (work_dir / "broker-1").write_text("a file where broker 1's log dir should be\n")
    before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    err = _one_line_failure(["--dir", str(work_dir)])
    assert err.startswith("kafkalite cluster: broker 1 did not start: ")
    assert err.endswith(f" (log: {work_dir.resolve() / 'broker-1.log'})\n")
    # nothing it started is left: no java, no kafkalite child
    left = []
    for pid in {int(p) for p in os.listdir("/proc") if p.isdigit()} - before:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(work_dir) in cmdline and alive(pid):
            left.append(cmdline)
    assert left == []


def test_dir_in_use_and_port_in_use_are_one_line(tmp_path: Path) -> None:
    work_dir = tmp_path / "cluster"
    work_dir.mkdir()
    fd = os.open(work_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert _one_line_failure(["--dir", str(work_dir)]) == \
            f"kafkalite cluster: {work_dir.resolve()} is in use by another kafkalite cluster\n"
    finally:
        os.close(fd)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert _one_line_failure(["--dir", str(work_dir), "--brokers", "1", "--base-port", str(port)]) == \
            f"kafkalite cluster: port {port} on 127.0.0.1 is already in use\n"
    assert _one_line_failure(["--dir", str(work_dir), "--override", "broker.id=7"]) == \
        "kafkalite cluster: --override broker.id: set by kafkalite cluster; the brokers are 0..N-1 (--brokers N)\n"
    assert _one_line_failure(["--dir", str(work_dir), "--override", "no-equals"]) == \
        "kafkalite cluster: --override: expected KEY=VALUE, got 'no-equals'\n"
