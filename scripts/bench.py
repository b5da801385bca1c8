#!/usr/bin/env python3
"""Benchmark kafkalite against Apache Kafka 3.9 and librdkafka's in-process mock cluster, in one run.

Every target is driven by the same client (confluent-kafka / librdkafka) with the same settings,
rotating the target order every round, because the machine is small and noisy: only numbers taken
side by side in one invocation are comparable. Apache Kafka runs in ZooKeeper mode from
tests/support (KafkaOracle, ZooKeeperServer: jars from Maven Central, Debian's ZooKeeper) with
its own start scripts' JVM flags; the mock is the ceiling of the client on this machine.

Measurements (see docs/benchmarks.md for the method):
  produce  -- 1 KiB values, linger.ms=5, acks=1, 3-partition topic, N messages; first produce to
              final flush.
  consume  -- the same data, all 3 partitions assigned from the beginning, fetch.* defaults, until
              everything the target still holds is read.
  latency  -- single-message sends, flush after each, acks=1; p50 / p99 of the first 2,000 and
              of 2,000 after 20,000 more (a JVM keeps getting faster over those).
  startup  -- process spawn to the first ApiVersions answered, for kafkalite and for Kafka (with
              ZooKeeper already up; ZooKeeper's own spawn-to-`ruok` separately); kafkalite's
              ready line and "started in" too.
  rebalance -- consumer groups: a 12-partition topic with a steady trickle of messages, three
              consumers stable in one group; a fourth subscribes: time until all four hold their
              final 3-partition share and each has received a message since it got it. Once with
              the default `range` assignor (eager protocol), once with `cooperative-sticky`.
  commit   -- consumer groups: one member of a group commits offsets of its 3 partitions,
              synchronously in a loop (commits/s, one OffsetCommit round trip each), then
              asynchronously (pipelined; commits/s until the last is acknowledged).
  The consumer-group phases and the stall-* phases run at the end of each round, on its brokers.
  Scale (issue 13; scripts/bench_scale.py says how each is measured):
  produce-N, restart-N  -- produce over N partitions; VmRSS and descriptors per partition;
              restart after SIGTERM and after SIGKILL (spawn to all led / to a record in each).
  stall-fetch, stall-flush, stall-create -- another client's ApiVersions p99 / max while a
              50 MiB fetch, produce with forced flushes, a 1,000-partition CreateTopics run.

Usage:
  python scripts/bench.py [--messages N] [--repeat R] [--targets kafkalite,kafka,mock]
                          [--only produce,consume,latency,startup,rebalance,commit,
                                  produce-1000,restart-10000,stall-fetch,...]
                          [--scale] [--json out.json] [--quick] [--keep-logs DIR]
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import ctypes.util
import datetime as _dt
import glob
import json
import os
import platform
import re
import shutil
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

import bench_scale as scale

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_RE = re.compile(r"kafkalite ready: broker (\d+) listening on PLAINTEXT://(\S+):(\d+)")
STARTED_IN_RE = re.compile(r"started in ([0-9.]+) s")
MIB = 1024 * 1024
PARTITIONS = 3
PHASES = ("produce", "consume", "latency", "startup", "rebalance", "commit")
GROUP_PHASES = ("rebalance", "commit")
GROUP_PARTITIONS = 12
ASSIGNORS = ("range", "cooperative-sticky")
# Fast group dynamics on kafkalite (Kafka's defaults: 3000 ms initial delay, 6000 ms minimum
# session timeout, which would refuse the benchmark's short session.timeout.ms).
GROUP_BROKER_OVERRIDES = ("group.initial.rebalance.delay.ms=0",
                          "group.min.session.timeout.ms=1000")
KAFKALITE = "kafkalite"
KAFKA = "kafka"
MOCK = "mock"
TARGETS = (KAFKALITE, KAFKA, MOCK)  # also the order of the table's columns
LABELS = {KAFKALITE: "kafkalite", KAFKA: "Apache Kafka 3.9.1", MOCK: "librdkafka mock"}
# What Kafka's own scripts run the broker with: kafka-server-start.sh sets the heap
# (KAFKA_HEAP_OPTS), kafka-run-class.sh the rest (KAFKA_JVM_PERFORMANCE_OPTS: G1 with a 20 ms pause
# goal). The oracle's defaults are for tests (serial GC, C1 only, 512 MiB): they start sooner but
# never reach C2-compiled code, which would handicap Kafka's throughput here.
KAFKA_JVM_FLAGS = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
# --quick: every phase and every figure, in about a minute per JVM target (a smoke test, not
# figures). Options given explicitly still win.
QUICK = {"messages": 3000, "warmup_messages": 300, "repeat": 1, "starts": 1,
         "latency_sends": 100, "latency_warmup": 200, "commit_seconds": 0.5,
         "async_commits": 200, "scale_messages": 600, "stall_fetch_mib": 1,
         "stall_flush_mib": 1, "stall_flush_messages": 100, "stall_create_partitions": 20,
         "stall_fetches": 1, "stall_idle_seconds": 0.2}
# Kafka's brokers of the scale rounds: a killed broker's ZooKeeper session expires after this
# (its default 18 s would only lengthen the untimed wait before the restart after SIGKILL).
SCALE_KAFKA_OVERRIDES = ("zookeeper.session.timeout.ms=6000",)
# --scale: the measurements of issue 13 added to --only.
SCALE = ("produce-1000", "produce-10000", "restart-10000", "stall-fetch", "stall-flush",
         "stall-create")


class BenchError(RuntimeError):
    """A measurement could not be completed; the message says why (reported, not hidden)."""


def _support() -> tuple[Any, Any]:
    """tests/support's kafka_oracle and zookeeper modules. They live in the repository's test
    tree, not in the kafkalite package, so they are imported only when needed."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from tests.support import kafka_oracle, zookeeper
    return kafka_oracle, zookeeper


def api_versions_answered(host: str, port: int, timeout: float) -> bool:
    """One ApiVersions request (the oracle's own probe); True once answered without error."""
    return bool(_support()[0]._api_versions_ok(host, port, timeout))


def zookeeper_answered(host: str, port: int, timeout: float) -> bool:
    """`ruok` answered `imok`. Read up to those 4 bytes, not to EOF (as the tests' helper
    four_letter_word does): a connection that arrives while ZooKeeper is starting gets its `imok`
    at once but is closed only seconds later, which would be timed as start-up."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"ruok")
        answer = b""
        while len(answer) < 4:
            chunk = s.recv(4 - len(answer))
            if not chunk:
                break
            answer += chunk
    return answer == b"imok"


def free_port() -> int:
    return int(_support()[1].free_port())


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (from /proc; all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------

# Stopped brokers' directories, removed when the run ends, not between measurements: after tens
# of thousands of files are removed (a 10,000-partition broker's), ext4 skips their inodes when
# it allocates new ones for the next minutes (its recently_deleted check), and every file the
# next broker created cost 0.3-0.7 ms of kernel CPU (10,000 producer snapshots at a shutdown:
# seconds); measured, docs/benchmarks.md.
_REMOVED_AT_EXIT: list[Path] = []


def remove_at_exit(path: Path) -> None:
    _REMOVED_AT_EXIT.append(path)


@atexit.register
def _remove_stopped_brokers_dirs() -> None:
    for path in _REMOVED_AT_EXIT:
        shutil.rmtree(path, ignore_errors=True)
    _REMOVED_AT_EXIT.clear()


class KafkaliteBroker:
    """A fresh `python -m kafkalite serve` subprocess on a temp log dir and an ephemeral port."""

    name = KAFKALITE

    # --keep-logs: each broker process's stderr (its log) is written to a file there as well
    keep_logs: Optional[Path] = None
    _started = 0

    def __init__(self, ready_timeout: float = 60.0, extra_overrides: Optional[list[str]] = None,
                 port: int = 0) -> None:
        self.ready_timeout = ready_timeout
        self.listen_port = port  # 0: a free port, learned from the ready line
        self.extra_overrides = list(extra_overrides or [])
        self._tmp: Optional[str] = None     # the broker's directory (removed at exit)
        self.proc: Optional[subprocess.Popen[str]] = None
        self.port: Optional[int] = None
        self.spawn_to_ready_s: Optional[float] = None
        self.reported_start_s: Optional[float] = None
        self.stdout_tail: list[str] = []
        self.stderr_tail: list[str] = []
        self.partition_count_note = ""
        self.exit_codes: list[int] = []  # of every SIGTERM stop: 0 is a clean shutdown

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker not started"
        return f"127.0.0.1:{self.port}"

    def start(self) -> "KafkaliteBroker":
        self._tmp = tempfile.mkdtemp(prefix="kafkalite-bench-")
        return self._spawn()

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker not started"
        return self.proc.pid

    def halt(self, sig: int, timeout: float = 120.0) -> float:
        """Sends `sig`; seconds until the process exited. The log dir stays for respawn()."""
        proc, self.proc = self.proc, None
        assert proc is not None, "broker not started"
        t0 = time.perf_counter()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise BenchError(f"kafkalite did not exit within {timeout:.0f} s of signal {sig}")
        if sig == signal.SIGTERM:
            self.exit_codes.append(code)
            self._report_unclean(code)
        return time.perf_counter() - t0

    def _report_unclean(self, code: int) -> None:
        """A SIGTERM that did not end in exit 0 is shown with the broker's last words."""
        if code != 0:
            time.sleep(0.2)  # the stderr reader drains what the process wrote last
            print(f"[bench] kafkalite exited {code} on SIGTERM; stderr tail:\n  "
                  + "\n  ".join(self.stderr_tail[-15:]), file=sys.stderr)

    def respawn(self) -> "KafkaliteBroker":
        """The broker again on the same log dir and port (after halt())."""
        assert self._tmp is not None and self.port is not None, "broker never started"
        self.listen_port = self.port
        return self._spawn()

    def _spawn(self) -> "KafkaliteBroker":
        assert self._tmp is not None
        log_dir = Path(self._tmp) / "logs"
        cmd = [sys.executable, "-m", "kafkalite", "serve",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.listen_port}",
               "--override", f"log.dirs={log_dir}"]
        for ov in self.extra_overrides:
            cmd += ["--override", ov]
        ready = threading.Event()
        ready_at: list[float] = []

        def read_stdout(p: subprocess.Popen[str]) -> None:
            assert p.stdout is not None
            for line in p.stdout:
                line = line.rstrip("\n")
                self.stdout_tail = (self.stdout_tail + [line])[-40:]
                if not ready.is_set():
                    m = READY_RE.search(line)
                    if m:
                        ready_at.append(time.perf_counter())
                        self.port = int(m.group(3))
                        s = STARTED_IN_RE.search(line)
                        self.reported_start_s = float(s.group(1)) if s else None
                        ready.set()

        KafkaliteBroker._started += 1
        keep = (KafkaliteBroker.keep_logs / f"kafkalite-{KafkaliteBroker._started:03d}.log"
                if KafkaliteBroker.keep_logs is not None else None)

        def read_stderr(p: subprocess.Popen[str]) -> None:
            # Drained continuously so a chatty broker can never block on a full pipe.
            assert p.stderr is not None
            with open(keep, "w") if keep is not None else contextlib.nullcontext() as kept:
                for line in p.stderr:
                    self.stderr_tail = (self.stderr_tail + [line.rstrip("\n")])[-40:]
                    if kept is not None:
                        kept.write(line)

        spawned_at = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1,
                                     start_new_session=True)
        threading.Thread(target=read_stdout, args=(self.proc,), daemon=True).start()
        threading.Thread(target=read_stderr, args=(self.proc,), daemon=True).start()
        deadline = spawned_at + self.ready_timeout
        while not ready.wait(0.005):
            if self.proc.poll() is not None or time.perf_counter() > deadline:
                why = ("exited with code %s" % self.proc.returncode if self.proc.poll() is not None
                       else "not ready after %.0f s" % self.ready_timeout)
                self.stop()
                raise BenchError(f"kafkalite serve {why}; stderr tail:\n  "
                                 + "\n  ".join(self.stderr_tail[-15:]))
        self.spawn_to_ready_s = ready_at[0] - spawned_at
        return self

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        create_topic_by_admin(self.bootstrap, topic, partitions, timeout)

    def cpu_seconds(self) -> float:
        """User + system CPU time the broker process has used so far (from /proc)."""
        assert self.proc is not None, "broker not started"
        return process_cpu_seconds(self.proc.pid)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (clean shutdown), SIGKILL the process group if it does not exit in time."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                    self.exit_codes.append(proc.wait(timeout))
                    self._report_unclean(self.exit_codes[-1])
                except subprocess.TimeoutExpired:
                    self.exit_codes.append(-int(signal.SIGKILL))
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        finally:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self._tmp is not None:
                remove_at_exit(Path(self._tmp))
                self._tmp = None


class KafkaBroker:
    """Apache Kafka 3.9 in ZooKeeper mode (tests/support/kafka_oracle.py) with a fresh ZooKeeper of
    its own (tests/support/zookeeper.py), each on a free port and a temp dir removed at stop."""

    name = KAFKA

    def __init__(self, ready_timeout: float = 60.0, extra_overrides: Optional[list[str]] = None,
                 jvm_flags: tuple[str, ...] = KAFKA_JVM_FLAGS) -> None:
        self.ready_timeout = ready_timeout
        # The same `key=value` overrides kafkalite gets, as Kafka properties.
        self.overrides = dict(ov.split("=", 1) for ov in extra_overrides or [])
        self.jvm_flags = list(jvm_flags)
        self.zookeeper: Any = None
        self.oracle: Any = None
        self.partition_count_note = ""
        self.exit_codes: list[int] = []  # of every SIGTERM stop (the JVM's 143 is a clean one)

    @property
    def bootstrap(self) -> str:
        assert self.oracle is not None, "broker not started"
        return str(self.oracle.bootstrap_servers)

    def new_zookeeper(self) -> Any:
        """The ZooKeeperServer, created (port chosen) but not started."""
        self.zookeeper = _support()[1].ZooKeeperServer()
        return self.zookeeper

    def new_kafka(self) -> Any:
        """The KafkaOracle on the running ZooKeeper, created (port chosen) but not started."""
        assert self.zookeeper is not None, "ZooKeeper first"
        work_dir = Path(tempfile.mkdtemp(prefix="kafkalite-oracle-"))
        remove_at_exit(work_dir)   # not by the oracle's close (see remove_at_exit)
        self.oracle = _support()[0].KafkaOracle(self.zookeeper.connect_string,
                                                overrides=self.overrides, work_dir=work_dir,
                                                jvm_flags=self.jvm_flags)
        return self.oracle

    def start(self) -> "KafkaBroker":
        try:
            self.new_zookeeper().start(timeout=self.ready_timeout)
            self.new_kafka().start(timeout=self.ready_timeout)
        except RuntimeError as e:  # ZooKeeperError, KafkaOracleError: they carry the logs' tail
            self.stop()
            raise BenchError(f"Apache Kafka / ZooKeeper did not start: {str(e)[-1500:]}") from e
        return self

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        create_topic_by_admin(self.bootstrap, topic, partitions, timeout)

    @property
    def pid(self) -> int:
        assert self.oracle is not None and self.oracle.proc is not None, "broker not started"
        return int(self.oracle.proc.pid)

    def halt(self, sig: int, timeout: float = 120.0) -> float:
        """Sends `sig` to the JVM; seconds until it exited. Log dir and ZooKeeper stay."""
        assert self.oracle is not None and self.oracle.proc is not None, "broker not started"
        proc = self.oracle.proc
        t0 = time.perf_counter()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise BenchError(f"Kafka did not exit within {timeout:.0f} s of signal {sig}")
        finally:
            self.oracle.proc = None
        if sig == signal.SIGTERM:
            self.exit_codes.append(code)
        return time.perf_counter() - t0

    def respawn(self) -> "KafkaBroker":
        """The same broker (log dir, port, ZooKeeper) again after halt()."""
        assert self.oracle is not None, "broker never started"
        self.oracle.start(timeout=self.ready_timeout)
        return self

    def wait_session_expired(self, timeout: float) -> float:
        """After a SIGKILL, until ZooKeeper has expired the dead broker's session: its
        ephemeral /brokers/ids/<id> (and /controller) must be gone, or the new process exits
        with NodeExists at registration. Seconds waited (not part of the restart figure: it is
        zookeeper.session.timeout.ms, a ZooKeeper-mode cost kafkalite does not have)."""
        from kazoo.client import KazooClient
        assert self.oracle is not None and self.zookeeper is not None
        zk = KazooClient(hosts=self.zookeeper.connect_string + self.oracle.chroot,
                         timeout=10.0)
        zk.start(timeout=10.0)
        t0 = time.monotonic()
        try:
            while zk.exists(f"/brokers/ids/{self.oracle.broker_id}") or zk.exists("/controller"):
                if time.monotonic() - t0 > timeout:
                    raise BenchError("the killed Kafka's ZooKeeper session never expired")
                time.sleep(0.05)
        finally:
            zk.stop()
            zk.close()
        return time.monotonic() - t0

    def cpu_seconds(self) -> float:
        """CPU time of the broker's JVM so far (every thread: GC and JIT compilers too)."""
        assert self.oracle is not None and self.oracle.proc is not None, "broker not started"
        return process_cpu_seconds(self.oracle.proc.pid)

    def stop(self) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after 30 s; then ZooKeeper; dirs removed."""
        oracle, self.oracle = self.oracle, None
        zookeeper, self.zookeeper = self.zookeeper, None
        try:
            if oracle is not None:
                code = oracle.stop()
                if code is not None:
                    self.exit_codes.append(code)
                oracle.close()
        finally:
            if zookeeper is not None:
                zookeeper.close()


class _RdKafkaLib:
    """ctypes view of the librdkafka the client itself loads, for its mock-cluster C API."""

    def __init__(self) -> None:
        path = self._find()
        lib = ctypes.CDLL(path)
        vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        lib.rd_kafka_conf_new.restype = vp
        lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
        lib.rd_kafka_conf_set.restype = ci
        lib.rd_kafka_new.argtypes = [ci, vp, cp, ctypes.c_size_t]
        lib.rd_kafka_new.restype = vp
        lib.rd_kafka_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_new.argtypes = [vp, ci]
        lib.rd_kafka_mock_cluster_new.restype = vp
        lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
        lib.rd_kafka_mock_cluster_bootstraps.restype = cp
        lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ci, ci]
        lib.rd_kafka_mock_topic_create.restype = ci
        lib.rd_kafka_version_str.restype = cp
        # Optional in older builds: without it the mock's first join waits its 3000 ms default.
        self.has_initial_delay = hasattr(lib, "rd_kafka_mock_group_initial_rebalance_delay_ms")
        if self.has_initial_delay:
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [vp, ctypes.c_int32]
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms.restype = None
        self.lib = lib
        self.path = path

    @staticmethod
    def _find() -> str:
        # confluent-kafka wheels ship librdkafka next to the package; prefer that exact copy.
        libs = Path(ck.__file__).resolve().parent.parent / "confluent_kafka.libs"
        found = sorted(glob.glob(str(libs / "librdkafka*.so*")))
        if found:
            return found[0]
        name = ctypes.util.find_library("rdkafka")
        if not name:
            raise BenchError("librdkafka shared library not found for the mock-cluster C API")
        return name


class MockCluster:
    """librdkafka's mock cluster (one broker), hosted in this process.

    Preferred: the mock C API through ctypes (rd_kafka_mock_cluster_new + topic_create), because
    the mock answers no CreateTopics request and reports a controller id that matches no broker,
    so an AdminClient cannot create the 3-partition topic. Fallback: a Producer configured with
    `test.mock.num.brokers=1`, whose auto-created topics have the mock's default partition count
    (4) -- the benchmark then uses only partitions 0..2 of it.
    """

    name = MOCK

    def __init__(self) -> None:
        self._lib: Optional[_RdKafkaLib] = None
        self._rk: Optional[int] = None
        self._mcluster: Optional[int] = None
        self._host_producer: Optional[ck.Producer] = None
        self.bootstrap = ""
        self.method = ""
        self.partition_count_note = ""

    def start(self, prefer_ctypes: bool = True) -> "MockCluster":
        if prefer_ctypes:
            try:
                self._start_ctypes()
                return self
            except (OSError, AttributeError, BenchError) as e:
                print(f"[bench] mock via C API unavailable ({e}); using test.mock.num.brokers",
                      file=sys.stderr)
        self._start_client_hosted()
        return self

    def _start_ctypes(self) -> None:
        lib = _RdKafkaLib()
        conf = lib.lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(512)
        # The hosting handle never connects anywhere; keep it from logging "no bootstrap.servers".
        lib.lib.rd_kafka_conf_set(conf, b"log_level", b"3", err, len(err))
        rk = lib.lib.rd_kafka_new(0, conf, err, len(err))  # 0 = RD_KAFKA_PRODUCER
        if not rk:
            raise BenchError("rd_kafka_new failed: " + err.value.decode(errors="replace"))
        mc = lib.lib.rd_kafka_mock_cluster_new(rk, 1)
        if not mc:
            lib.lib.rd_kafka_destroy(rk)
            raise BenchError("rd_kafka_mock_cluster_new failed")
        self._lib, self._rk, self._mcluster = lib, rk, mc
        self.bootstrap = lib.lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
        self.method = "rd_kafka_mock_cluster_new via ctypes (%s)" % os.path.basename(lib.path)

    def _start_client_hosted(self) -> None:
        p = ck.Producer({"test.mock.num.brokers": 1, "log_level": 3})
        md = p.list_topics(timeout=10)
        brokers = list(md.brokers.values())
        if len(brokers) != 1:
            raise BenchError(f"mock cluster reported brokers {md.brokers}")
        self._host_producer = p
        self.bootstrap = f"{brokers[0].host}:{brokers[0].port}"
        self.method = "Producer(test.mock.num.brokers=1), bootstrap from list_topics().brokers"

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        if self._mcluster is not None:
            assert self._lib is not None
            rc = self._lib.lib.rd_kafka_mock_topic_create(self._mcluster, topic.encode(),
                                                          partitions, 1)
            if rc != 0:
                raise BenchError(f"rd_kafka_mock_topic_create({topic}) returned error {rc}")
            wait_for_partitions(self.bootstrap, topic, partitions, timeout)
        else:
            # Metadata for an unknown topic auto-creates it with the mock's default count.
            got = wait_for_partitions(self.bootstrap, topic, partitions, timeout, at_least=True)
            if got != partitions:
                self.partition_count_note = (f"mock auto-created {got} partitions; "
                                             f"only {partitions} used")

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """The mock's `group.initial.rebalance.delay.ms` (its default is 3000, like Kafka's)."""
        if self._mcluster is None or self._lib is None:
            raise BenchError("consumer-group rows need the mock C API (rd_kafka_mock_cluster_new "
                             "via ctypes): the test.mock.num.brokers fallback cannot create a "
                             f"{GROUP_PARTITIONS}-partition topic or set the rebalance delay")
        if not self._lib.has_initial_delay:
            raise BenchError("this librdkafka lacks rd_kafka_mock_group_initial_rebalance_delay_ms")
        self._lib.lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mcluster, delay_ms)

    def stop(self) -> None:
        if self._mcluster is not None and self._lib is not None:
            self._lib.lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk is not None and self._lib is not None:
            self._lib.lib.rd_kafka_destroy(self._rk)
            self._rk = None
        if self._host_producer is not None:
            self._host_producer.flush(5)
            self._host_producer = None


Target = Any  # KafkaliteBroker | KafkaBroker | MockCluster: name, bootstrap, create_topic(), stop()


def create_topic_by_admin(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    """CreateTopics through an AdminClient (a real broker's way), then wait for the leaders."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)],
                              operation_timeout=timeout, request_timeout=timeout)[topic]
    fut.result(timeout)
    wait_for_partitions(bootstrap, topic, partitions, timeout)


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout: float,
                        at_least: bool = False) -> int:
    """Poll metadata until `topic` shows its partitions with leaders; returns the count seen."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    last = "no metadata"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            t = md.topics.get(topic)
            if t is not None and t.error is None:
                led = [p for p in t.partitions.values() if p.leader >= 0]
                n = len(t.partitions)
                if len(led) == n and (n == partitions or (at_least and n >= partitions)):
                    return n
                last = f"{n} partitions, {len(led)} with a leader"
            elif t is not None:
                last = str(t.error)
        except ck.KafkaException as e:
            last = str(e)
        time.sleep(0.05)
    raise BenchError(f"topic {topic} not ready with {partitions} partitions: {last}")


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------

@dataclass
class ProduceResult:
    seconds: float
    messages: int
    bytes: int

    @property
    def mb_s(self) -> float:
        return self.bytes / MIB / self.seconds

    @property
    def msgs_s(self) -> float:
        return self.messages / self.seconds


def measure_produce(bootstrap: str, topic: str, messages: int, value: bytes,
                    timeout: float, acks: str = "1") -> ProduceResult:
    errors: list[str] = []

    def on_error_report(err: Optional[ck.KafkaError], _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = ck.Producer({
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "acks": acks,
        # Only failed deliveries call back into Python: per-message callbacks would measure the
        # GIL, not the broker. Success is verified from the high watermarks afterwards.
        "delivery.report.only.error": True,
        "on_delivery": on_error_report,
    })
    # Warm the metadata/connection outside the timed window, as a perf tool's producer would be.
    producer.list_topics(topic, timeout=10)
    deadline = time.monotonic() + timeout
    produce = producer.produce
    t0 = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.001)
                if time.monotonic() > deadline:
                    raise BenchError(f"produce timed out after {timeout:.0f} s at message {i}")
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    t1 = time.perf_counter()
    producer.poll(0)
    if remaining:
        raise BenchError(f"produce: {remaining} messages undelivered at the {timeout:.0f} s limit")
    if errors:
        raise BenchError("produce delivery errors: " + "; ".join(errors))
    return ProduceResult(t1 - t0, messages, messages * len(value))


def high_watermarks(bootstrap: str, topic: str, timeout: float = 10.0
                    ) -> list[tuple[int, int]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalite-bench-wm",
                     "enable.auto.commit": False})
    try:
        return [c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=timeout)
                for p in range(PARTITIONS)]
    finally:
        c.close()


@dataclass
class ConsumeResult:
    seconds: float
    messages: int
    bytes: int
    produced: int  # messages produced into the topic; more than `messages` if the target dropped

    @property
    def mb_s(self) -> float:
        return self.bytes / MIB / self.seconds

    @property
    def msgs_s(self) -> float:
        return self.messages / self.seconds


def measure_consume(bootstrap: str, topic: str, produced: int, value: bytes,
                    timeout: float) -> ConsumeResult:
    wms = high_watermarks(bootstrap, topic)
    # What the target still holds. kafkalite must hold everything; the mock keeps only the most
    # recent few MB per partition, so it is read from its log start to its high watermark.
    expected = sum(hi - lo for lo, hi in wms)
    if sum(hi for _lo, hi in wms) != produced:
        raise BenchError(f"high watermarks {wms} sum to {sum(hi for _, hi in wms)}, "
                         f"expected {produced} produced")
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalite-bench",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        # Warm the topic metadata first: assigned before the leaders are known, librdkafka parks
        # the offset lookup behind a ~500 ms retry timer -- a client artifact, not the broker.
        consumer.list_topics(topic, timeout=10)
        n = nbytes = 0
        deadline = time.monotonic() + timeout
        t0 = time.perf_counter()
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING)
                         for p in range(PARTITIONS)])
        while n < expected:
            if time.monotonic() > deadline:
                raise BenchError(f"consume timed out after {timeout:.0f} s: {n}/{expected} read")
            for m in consumer.consume(num_messages=10000, timeout=0.2):
                if m.error():
                    raise BenchError(f"consume error: {m.error()}")
                v = m.value()
                # Every value is checked byte for byte (a memcmp, same cost on every target):
                # a throughput of wrong data would be no throughput.
                if v != value:
                    raise BenchError(f"consume: message at {m.partition()}/{m.offset()} has "
                                     f"a different value ({len(v or b'')} bytes)")
                n += 1
                nbytes += len(v)
        t1 = time.perf_counter()
    finally:
        consumer.close()
    if n != expected:
        raise BenchError(f"consume read {n} messages, expected {expected}")
    return ConsumeResult(t1 - t0, n, nbytes, produced)


@dataclass
class LatencyResult:
    samples_ms: list[float] = field(repr=False)

    @property
    def p50(self) -> float:
        return percentile(self.samples_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(round(pct / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def measure_latency(bootstrap: str, topic: str, sends: int, value_size: int, timeout: float,
                    warmup: int = 50, acks: str = "1") -> LatencyResult:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    value = os.urandom(value_size)
    deadline = time.monotonic() + timeout
    samples: list[float] = []
    for i in range(warmup + sends):
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError(f"latency timed out after {timeout:.0f} s at send {i}")
        t0 = time.perf_counter()
        producer.produce(topic, value, partition=0)
        if producer.flush(min(left, 10.0)):
            raise BenchError(f"latency: send {i} not acknowledged within 10 s")
        t1 = time.perf_counter()
        if i >= warmup:
            samples.append((t1 - t0) * 1000.0)
    return LatencyResult(samples)


# How often the start-up probe knocks: often enough for a ~10 ms resolution, rarely enough that
# a refused connect() every 5 ms costs the starting broker nothing measurable.
PROBE_INTERVAL_S = 0.005


def time_until_answered(start: Callable[[], Any], probe: Callable[[float], bool],
                        timeout: float) -> float:
    """Seconds from calling `start` (which spawns a process and returns once that process
    considers itself ready) until `probe` first succeeds, polled from this thread every
    PROBE_INTERVAL_S. The same clock and probe for every broker, whatever each one's own idea of
    ready: a probe that connects while the broker is not yet serving waits for its answer (up to
    the time left), so the answer's arrival is what is timed, not the next poll."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            start()
        except BaseException as e:  # noqa: BLE001 -- reported by the polling thread
            failure.append(e)

    starter = threading.Thread(target=run, name="bench-start", daemon=True)
    t0 = time.perf_counter()
    starter.start()
    try:
        while True:
            left = timeout - (time.perf_counter() - t0)
            if left <= 0:
                raise BenchError(f"no answer within {timeout:.0f} s of the spawn")
            try:
                if probe(left):
                    return time.perf_counter() - t0
            except OSError:
                pass  # not listening yet, or closed on us: knock again
            if failure:
                raise BenchError(f"start failed: {str(failure[0])[-1500:]}")
            time.sleep(PROBE_INTERVAL_S)
    finally:
        starter.join(timeout)
        if failure and not isinstance(failure[0], Exception):
            raise failure[0]


@dataclass
class StartResult:
    to_api_versions_s: float                  # spawn -> first ApiVersions answered
    ready_line_s: Optional[float] = None      # kafkalite: spawn -> its ready line
    reported_start_s: Optional[float] = None  # kafkalite: its own "started in"
    zookeeper_s: Optional[float] = None       # Kafka: ZooKeeper's spawn -> `ruok` answered


def measure_kafkalite_start(ready_timeout: float, exit_codes: list[int]) -> StartResult:
    """A fresh `kafkalite serve` on a fresh temp dir; appends the stop's exit code."""
    port = free_port()
    b = KafkaliteBroker(ready_timeout=ready_timeout, port=port)
    try:
        to_api = time_until_answered(
            b.start, lambda left: api_versions_answered("127.0.0.1", port, left), ready_timeout)
        return StartResult(to_api, b.spawn_to_ready_s, b.reported_start_s)
    finally:
        b.stop()
        exit_codes.extend(b.exit_codes)


def measure_kafka_start(ready_timeout: float, jvm_flags: tuple[str, ...],
                        exit_codes: list[int]) -> StartResult:
    """A fresh ZooKeeper, then a fresh Kafka on it, each timed from its spawn to its first
    answer (`ruok`, ApiVersions); Kafka's start begins once ZooKeeperServer.start() returned."""
    k = KafkaBroker(ready_timeout=ready_timeout, jvm_flags=jvm_flags)
    try:
        zk = k.new_zookeeper()
        zk_s = time_until_answered(lambda: zk.start(timeout=ready_timeout),
                                   lambda left: zookeeper_answered(zk.host, zk.port,
                                                                   min(left, 5.0)),
                                   ready_timeout)
        kafka = k.new_kafka()
        kafka_s = time_until_answered(lambda: kafka.start(timeout=ready_timeout),
                                      lambda left: api_versions_answered(kafka.host, kafka.port,
                                                                         left),
                                      ready_timeout)
        return StartResult(kafka_s, zookeeper_s=zk_s)
    finally:
        k.stop()
        exit_codes.extend(k.exit_codes)


def measure_mock_start() -> float:
    """Mock cluster creation until it answers a metadata request (in-process; no spawn)."""
    t0 = time.perf_counter()
    m = MockCluster().start()
    try:
        p = ck.Producer({"bootstrap.servers": m.bootstrap})
        p.list_topics(timeout=10)
        return time.perf_counter() - t0
    finally:
        m.stop()


# --------------------------------------------------------------------------------------------
# Consumer-group measurements
# --------------------------------------------------------------------------------------------

@dataclass
class GroupSettings:
    """Client settings shared by every group member of every target."""
    session_timeout_ms: int
    heartbeat_interval_ms: int
    trickle_ms: float  # one message into every partition this often
    fetch_wait_max_ms: int = 10

    def consumer_conf(self, bootstrap: str, group: str, assignor: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": assignor,
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_interval_ms,
            # New members start at the end: the trickle gives them a message within trickle_ms.
            "auto.offset.reset": "latest",
            # The mock answers a Fetch that finds no data only after fetch.wait.max.ms, even when
            # a message arrives meanwhile (rdkafka_mock_handlers.c); with the default 500 ms a
            # member at the end of its partitions would see the trickle in 500 ms steps there.
            # kafkalite completes the long poll on the produce, so this costs it only requests.
            "fetch.wait.max.ms": self.fetch_wait_max_ms,
            # Everything else is librdkafka's default (auto commit every 5 s, ...): the
            # rebalance a real consumer group goes through.
            "log_level": 3,
        }


class Trickle:
    """A producer thread writing one small message to every partition each `interval_s`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval_s: float) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 1,
                                     "log_level": 3})
        self.topic, self.partitions, self.interval_s = topic, partitions, interval_s
        self.sent = 0
        self.error: Optional[str] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-trickle", daemon=True)

    def start(self) -> "Trickle":
        self.producer.list_topics(self.topic, timeout=10)
        self._thread.start()
        return self

    def _run(self) -> None:
        value = b"t" * 64
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                for p in range(self.partitions):
                    self.producer.produce(self.topic, value, partition=p)
                self.sent += self.partitions
                self.producer.poll(0)
                next_at += self.interval_s
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        except (BufferError, ck.KafkaException) as e:
            self.error = f"trickle producer: {e}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(5)


class GroupBoard:
    """What every member of one group holds and has consumed, under one lock, so that the
    measuring thread sees a consistent snapshot of all members at once."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.members: list["GroupMember"] = []

    def snapshot(self) -> list[tuple[frozenset[int], Optional[float], float, int]]:
        """(assignment, first message since it last changed, when it changed, changes) per
        member. Callers hold self.cond."""
        return [(frozenset(m.assignment), m.first_msg_at, m.changed_at, m.changes)
                for m in self.members]


class GroupMember:
    """One confluent-kafka Consumer in the group, subscribed and polling on its own thread.

    Threads, not subprocesses: a member's Python work here is a few callbacks and a handful of
    small messages; heartbeats, joins, syncs and fetches run on librdkafka's own C threads either
    way, and `consume()` releases the GIL while it waits. Threads keep one clock for every event
    (and the mock cluster lives in this process anyway), and no interpreter start stands between
    the fourth member's `subscribe()` and its first request.
    """

    def __init__(self, board: GroupBoard, name: str, conf: dict[str, Any], topic: str,
                 cooperative: bool) -> None:
        self.board, self.name, self.topic, self.cooperative = board, name, topic, cooperative
        self.assignment: set[int] = set()
        self.changed_at = 0.0              # perf_counter of the last assignment change
        self.first_msg_at: Optional[float] = None  # first message since that change
        self.changes = 0
        self.subscribed_at: Optional[float] = None
        self.messages = 0
        self.errors: list[str] = []
        self.closed_ok = False
        conf = dict(conf)
        conf["error_cb"] = self._on_error
        self.consumer = ck.Consumer(conf)
        self.go = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"bench-{name}", daemon=True)
        with board.cond:
            board.members.append(self)

    def _on_error(self, err: ck.KafkaError) -> None:
        # Transport hiccups are retried by the client; only fatal ones are a failed run.
        if err.fatal() and len(self.errors) < 5:
            self.errors.append(f"{self.name}: {err}")

    def _changed(self, add: list[ck.TopicPartition], remove: list[ck.TopicPartition],
                 replace: bool) -> None:
        now = time.perf_counter()
        with self.board.cond:
            if replace:
                self.assignment = {tp.partition for tp in add}
            else:
                self.assignment |= {tp.partition for tp in add}
                self.assignment -= {tp.partition for tp in remove}
            self.changed_at = now
            self.first_msg_at = None
            self.changes += 1
            self.board.cond.notify_all()

    def _on_assign(self, _c: ck.Consumer, parts: list[ck.TopicPartition]) -> None:
        # Eager: the full new assignment. Cooperative: only the partitions added. Either way
        # confluent-kafka (incremental_)assigns them after this callback returns.
        self._changed(parts, [], replace=not self.cooperative)

    def _on_revoke(self, _c: ck.Consumer, parts: list[ck.TopicPartition]) -> None:
        self._changed([], parts, replace=False)

    def _run(self) -> None:
        c = self.consumer
        try:
            self.go.wait()
            if self.stop.is_set():
                return
            self.subscribed_at = time.perf_counter()
            c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                        on_lost=self._on_revoke)
            while not self.stop.is_set():
                msgs = c.consume(num_messages=500, timeout=0.02)
                if not msgs:
                    continue
                now = time.perf_counter()
                with self.board.cond:
                    for m in msgs:
                        if m.error():
                            if m.error().code() != ck.KafkaError._PARTITION_EOF \
                                    and len(self.errors) < 5:
                                self.errors.append(f"{self.name}: consume: {m.error()}")
                            continue
                        self.messages += 1
                        if self.first_msg_at is None and m.partition() in self.assignment:
                            self.first_msg_at = now
                    self.board.cond.notify_all()
        except (ck.KafkaException, RuntimeError) as e:
            self.errors.append(f"{self.name}: {e}")
        finally:
            try:
                c.close()  # LeaveGroup (and the final auto commit), as an application would
                self.closed_ok = True
            except (ck.KafkaException, RuntimeError) as e:
                self.errors.append(f"{self.name}: close: {e}")

    def start(self, go: bool = True) -> "GroupMember":
        self.thread.start()
        if go:
            self.go.set()
        return self


def _share_reached(snap: list[tuple[frozenset[int], Optional[float], float, int]],
                   partitions: int) -> bool:
    """Every member holds an equal, disjoint share covering all partitions and has received a
    message from it since its assignment last changed."""
    n = len(snap)
    share = partitions // n
    union: set[int] = set()
    for assignment, first_msg_at, _changed_at, _changes in snap:
        if len(assignment) != share or first_msg_at is None:
            return False
        union |= assignment
    return len(union) == partitions


@dataclass
class RebalanceResult:
    to_consuming_ms: float   # fourth subscribe() -> every member consuming its final share
    to_assigned_ms: float    # fourth subscribe() -> last assignment callback of the rebalance
    setup_s: float           # three members from subscribe to stable (not measured, shown)


def _wait_board(board: GroupBoard, pred: Callable[[], bool], deadline: float,
                what: str, detail: Callable[[], str]) -> None:
    with board.cond:
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{what}: not reached in time; {detail()}")
            board.cond.wait(min(left, 0.05))


def measure_rebalance(bootstrap: str, topic: str, group: str, assignor: str,
                      settings: GroupSettings, timeout: float,
                      settle_s: float = 0.5) -> RebalanceResult:
    board = GroupBoard()
    cooperative = assignor == "cooperative-sticky"
    members: list[GroupMember] = []
    trickle = Trickle(bootstrap, topic, GROUP_PARTITIONS, settings.trickle_ms / 1000.0)

    def detail() -> str:
        with board.cond:  # an RLock: callers may already hold it
            snap = board.snapshot()
        return "; ".join(f"{m.name}: {sorted(a)} msg={'y' if f else 'n'} changes={ch}"
                         for m, (a, f, _t, ch) in zip(board.members, snap)) or "no members"

    try:
        trickle.start()
        deadline = time.monotonic() + timeout
        t_setup = time.perf_counter()
        for i in range(3):
            members.append(GroupMember(board, f"member{i}",
                                       settings.consumer_conf(bootstrap, group, assignor),
                                       topic, cooperative).start())
        _wait_board(board, lambda: _share_reached(board.snapshot(), GROUP_PARTITIONS), deadline,
                    f"{assignor}: three members stable", detail)
        # Stable means no further change for settle_s (a late rebalance would spoil the clock).
        while True:
            with board.cond:
                changes = sum(s[3] for s in board.snapshot())
            time.sleep(settle_s)
            with board.cond:
                snap = board.snapshot()
                if sum(s[3] for s in snap) == changes and _share_reached(snap, GROUP_PARTITIONS):
                    break
            if time.monotonic() > deadline:
                raise BenchError(f"{assignor}: three members never settled; {detail()}")
        setup_s = time.perf_counter() - t_setup

        fourth = GroupMember(board, "member3", settings.consumer_conf(bootstrap, group, assignor),
                             topic, cooperative)
        members.append(fourth)
        fourth.start(go=False)
        before = {id(m): m.changes for m in members}
        fourth.go.set()  # the member's thread takes the clock just before subscribe()
        _wait_board(board, lambda: (_share_reached(board.snapshot(), GROUP_PARTITIONS)
                                    and all(m.changes > before[id(m)] for m in members[:3])
                                    and fourth.changes > 0),
                    deadline, f"{assignor}: four members consuming", detail)
        with board.cond:
            snap = board.snapshot()
        assert fourth.subscribed_at is not None
        end_consuming = max(s[1] for s in snap if s[1] is not None)
        end_assigned = max(s[2] for s in snap)
        errors = [e for m in members for e in m.errors] + ([trickle.error] if trickle.error
                                                           else [])
        if errors:
            raise BenchError("; ".join(errors[:5]))
        result = RebalanceResult((end_consuming - fourth.subscribed_at) * 1000.0,
                                 (end_assigned - fourth.subscribed_at) * 1000.0, setup_s)
    finally:
        # All at once: closing one by one would make the rest rebalance after each close.
        for m in members:
            m.stop.set()
            m.go.set()
        close_by = time.monotonic() + 15.0
        for m in members:
            m.thread.join(max(0.0, close_by - time.monotonic()))
        trickle.stop()
    stuck = [m.name for m in members if m.thread.is_alive()]
    if stuck:  # reported only when the measurement itself succeeded (else that error wins)
        raise BenchError(f"{assignor}: consumers {stuck} did not close within 15 s")
    return result


@dataclass
class CommitResult:
    sync_per_s: float
    sync_commits: int
    async_per_s: float
    async_commits: int
    partitions: int
    total_commits: int                      # warm-up + sync + async
    broker_cpu_s: Optional[float] = None    # brokers in a process of their own: its CPU over all


def measure_commits(bootstrap: str, topic: str, group: str, settings: GroupSettings,
                    sync_seconds: float, async_count: int, timeout: float,
                    cpu_probe: Optional[Callable[[], float]] = None) -> CommitResult:
    acked = [0]
    errors: list[str] = []

    def on_commit(err: Optional[ck.KafkaError], parts: list[ck.TopicPartition]) -> None:
        acked[0] += 1
        bad = [str(tp.error) for tp in parts if tp.error is not None]
        if (err is not None or bad) and len(errors) < 5:
            errors.append(f"async commit: {err} {bad}")

    conf = settings.consumer_conf(bootstrap, group, "range")
    conf.update({"enable.auto.commit": False, "on_commit": on_commit})
    c = ck.Consumer(conf)
    assigned: list[list[ck.TopicPartition]] = []
    try:
        deadline = time.monotonic() + timeout
        c.subscribe([topic], on_assign=lambda _c, parts: assigned.append(parts))
        while not assigned or not c.assignment():
            c.poll(0.05)
            if time.monotonic() > deadline:
                raise BenchError("commit: the consumer was never assigned its partitions")
        parts = sorted(tp.partition for tp in c.assignment())
        offset = 0
        cpu0 = cpu_probe() if cpu_probe else None

        def offsets() -> list[ck.TopicPartition]:
            return [ck.TopicPartition(topic, p, offset) for p in parts]

        def check(res: Optional[list[ck.TopicPartition]]) -> None:
            bad = [f"{tp.partition}: {tp.error}" for tp in (res or []) if tp.error is not None]
            if bad:
                raise BenchError(f"sync commit of offset {offset} failed: {bad}")

        for _ in range(50):  # warm-up: connection to the coordinator, first append
            offset += 1
            check(c.commit(offsets=offsets(), asynchronous=False))
        n = 0
        t0 = time.perf_counter()
        stop_at = t0 + sync_seconds
        while True:
            offset += 1
            check(c.commit(offsets=offsets(), asynchronous=False))
            n += 1
            now = time.perf_counter()
            if now >= stop_at:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"commit: sync loop timed out after {n} commits")
        sync_s = now - t0

        acked[0] = 0
        t0 = time.perf_counter()
        for _ in range(async_count):
            offset += 1
            c.commit(offsets=offsets(), asynchronous=True)
        while acked[0] < async_count:
            c.poll(0.001)  # serves the on_commit callbacks
            if time.monotonic() > deadline:
                raise BenchError(f"commit: {acked[0]}/{async_count} async commits acknowledged "
                                 "before the time limit")
        async_s = time.perf_counter() - t0
        cpu_s = cpu_probe() - cpu0 if cpu_probe and cpu0 is not None else None
        if errors:
            raise BenchError("; ".join(errors))
        # What the coordinator now holds must be the last offset committed.
        got = c.committed([ck.TopicPartition(topic, p) for p in parts], timeout=10)
        wrong = [(tp.partition, tp.offset) for tp in got if tp.offset != offset]
        if wrong:
            raise BenchError(f"commit: committed offsets read back {wrong}, expected {offset}")
        return CommitResult(n / sync_s, n, async_count / async_s, async_count, len(parts),
                            offset, cpu_s)
    finally:
        c.close()


# --------------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------------

class Results:
    """metric -> target -> list of per-round values, plus the errors met on the way."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = {}
        self.errors: dict[str, dict[str, list[str]]] = {}
        self.notes: list[str] = []
        self.exit_codes: list[int] = []  # kafkalite's, on each SIGTERM stop
        self.kafka_exit_codes: list[int] = []  # Apache Kafka's, likewise

    def record_stops(self, target: Target) -> None:
        codes = getattr(target, "exit_codes", [])
        (self.kafka_exit_codes if target.name == KAFKA else self.exit_codes).extend(codes)

    def add(self, metric: str, target: str, value: Optional[float]) -> None:
        if value is not None:
            self.values.setdefault(metric, {}).setdefault(target, []).append(value)

    def fail(self, phase: str, target: str, msg: str) -> None:
        self.errors.setdefault(phase, {}).setdefault(target, []).append(msg)
        print(f"[bench] {target} {phase} FAILED: {msg}", file=sys.stderr)

    def median(self, metric: str, target: str) -> Optional[float]:
        vals = self.values.get(metric, {}).get(target)
        return statistics.median(vals) if vals else None


def run_phase(results: Results, phase: str, target: Target, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (BenchError, ck.KafkaException, RuntimeError, OSError) as e:
        results.fail(phase, target.name, str(e).strip() or type(e).__name__)
        return None


def new_target(name: str, args: argparse.Namespace, overrides: tuple[str, ...] = ()) -> Target:
    if name == KAFKALITE:
        return KafkaliteBroker(ready_timeout=args.ready_timeout, extra_overrides=list(overrides))
    if name == KAFKA:
        return KafkaBroker(ready_timeout=args.ready_timeout, extra_overrides=list(overrides),
                           jvm_flags=args.kafka_jvm_flags)
    return MockCluster()


def start_target(results: Results, name: str, args: argparse.Namespace,
                 overrides: tuple[str, ...] = ()) -> Optional[Target]:
    try:
        t = new_target(name, args, overrides)
        t.start()
        if name == MOCK and t.method not in results.notes:
            results.notes.append(t.method)
        return t
    except (BenchError, ck.KafkaException, OSError) as e:
        results.fail("start", name, str(e))
        return None


def run_round(results: Results, rnd: int, args: argparse.Namespace, order: list[str]) -> None:
    """One round on one start of each target: produce, consume, latency, the stall loads, then
    the consumer-group phases (the brokers get the fast group settings only when those run)."""
    targets: dict[str, Target] = {}
    groups = any(p in args.only for p in GROUP_PHASES)
    try:
        for name in order:
            t = start_target(results, name, args, GROUP_BROKER_OVERRIDES if groups else ())
            if t is not None:
                targets[name] = t
        live = [n for n in order if n in targets]
        topic = f"bench-r{rnd}"
        value = os.urandom(args.value_size)  # incompressible; compression is off anyway
        lat_topic = f"bench-lat-r{rnd}"
        warm_topic = f"bench-warm-r{rnd}"
        warm = args.warmup_messages > 0 and ("produce" in args.only or "consume" in args.only)
        produced: dict[str, int] = {}
        for name in live:
            t = targets[name]
            ok = run_phase(results, "setup", t, lambda: (
                t.create_topic(topic, PARTITIONS), t.create_topic(lat_topic, 1),
                t.create_topic(warm_topic, PARTITIONS) if warm else None))
            if ok is None:
                stopping = targets.pop(name)
                stopping.stop()
                results.record_stops(stopping)
        live = [n for n in order if n in targets]

        if warm:
            # Unmeasured: the same produce and consume on a topic of its own, so that the JVM
            # has compiled its hot paths before the clock runs (a broker in service is warm).
            # Every target gets it; for kafkalite and the mock it only touches their caches.
            for name in live:
                t = targets[name]
                print(f"[bench] round {rnd + 1}: warm-up {args.warmup_messages} msgs <-> {name}",
                      file=sys.stderr)
                run_phase(results, "warm-up", t, lambda: measure_consume(
                    t.bootstrap, warm_topic, measure_produce(
                        t.bootstrap, warm_topic, args.warmup_messages, value,
                        args.timeout).messages, value, args.timeout))

        if "produce" in args.only or "consume" in args.only:
            for name in live:
                t = targets[name]
                print(f"[bench] round {rnd + 1}: produce {args.messages} msgs -> {name}",
                      file=sys.stderr)
                r = run_phase(results, "produce", t, lambda: measure_produce(
                    t.bootstrap, topic, args.messages, value, args.timeout))
                if r is not None:
                    produced[name] = r.messages
                    results.add("produce_mb_s", name, r.mb_s)
                    results.add("produce_msgs_s", name, r.msgs_s)
                    print(f"[bench]   {r.mb_s:.1f} MB/s, {r.msgs_s:.0f} msgs/s "
                          f"({r.seconds:.2f} s)", file=sys.stderr)

        if "consume" in args.only:
            for name in live:
                if name not in produced:
                    continue
                t = targets[name]
                print(f"[bench] round {rnd + 1}: consume <- {name}", file=sys.stderr)
                c = run_phase(results, "consume", t, lambda: measure_consume(
                    t.bootstrap, topic, produced[name], value, args.timeout))
                if c is not None:
                    if name != MOCK and c.messages != c.produced:
                        results.fail("consume", name, f"read {c.messages} of {c.produced} "
                                     "produced messages: the broker lost data")
                        continue
                    results.add("consume_mb_s", name, c.mb_s)
                    results.add("consume_msgs_s", name, c.msgs_s)
                    results.add("consume_messages_read", name, float(c.messages))
                    print(f"[bench]   {c.mb_s:.1f} MB/s, {c.msgs_s:.0f} msgs/s, "
                          f"{c.messages}/{c.produced} msgs ({c.seconds:.2f} s)", file=sys.stderr)

        if "latency" in args.only:
            for name in live:
                t = targets[name]
                print(f"[bench] round {rnd + 1}: latency x{args.latency_sends} "
                      f"+{args.latency_warmup} -> {name}", file=sys.stderr)
                # One run of sends: the first `latency_sends` samples are the broker's first
                # single sends, the last `latency_sends` those after `latency_warmup` more (the
                # JVM's figure keeps improving over ~20,000 single sends; kafkalite's is flat).
                lr = run_phase(results, "latency", t, lambda: measure_latency(
                    t.bootstrap, lat_topic, args.latency_warmup + args.latency_sends,
                    args.value_size, args.timeout))
                if lr is not None:
                    first = LatencyResult(lr.samples_ms[:args.latency_sends])
                    last = LatencyResult(lr.samples_ms[-args.latency_sends:])
                    results.add("latency_p50_ms", name, first.p50)
                    results.add("latency_p99_ms", name, first.p99)
                    if args.latency_warmup:
                        results.add("latency_warm_p50_ms", name, last.p50)
                        results.add("latency_warm_p99_ms", name, last.p99)
                    print(f"[bench]   first p50 {first.p50:.3f} ms, p99 {first.p99:.3f} ms; "
                          f"last p50 {last.p50:.3f} ms, p99 {last.p99:.3f} ms", file=sys.stderr)
        stall_targets = [n for n in live if n != MOCK]
        for phase in scale.STALL_PHASES:
            if phase not in args.only:
                continue
            for name in stall_targets:
                run_stall(results, rnd, args, targets[name], phase, value)
        if groups:
            run_group_phases(results, rnd, args, targets, [n for n in order if n in targets])
        for name in [n for n in order if n in targets]:
            note = getattr(targets[name], "partition_count_note", "")
            if note and note not in results.notes:
                results.notes.append(note)
    finally:
        for t in targets.values():
            try:
                t.stop()
            except Exception as e:  # noqa: BLE001 -- stopping must never hide the results
                print(f"[bench] stopping {t.name}: {e}", file=sys.stderr)
            results.record_stops(t)


def run_stall(results: Results, rnd: int, args: argparse.Namespace, t: Target, phase: str,
              value: bytes) -> None:
    """One stall measurement on a running broker (the idle probe first, once per round)."""
    load_name = phase.split("-", 1)[1]
    if "stall_idle_max_ms" not in results.values or \
            len(results.values["stall_idle_max_ms"].get(t.name, [])) <= rnd:
        print(f"[bench] round {rnd + 1}: stall probe, idle {args.stall_idle_seconds:g} s "
              f"-> {t.name}", file=sys.stderr)
        r = run_phase(results, phase, t, lambda: scale.measure_stall(
            t.bootstrap, lambda: time.sleep(args.stall_idle_seconds), args.probe_interval_ms,
            args.timeout))
        if r is not None:
            results.add("stall_idle_p99_ms", t.name, r.p99)
            results.add("stall_idle_max_ms", t.name, r.max)
    topic = f"bench-{phase}-r{rnd}"
    if load_name == "fetch":
        messages = args.stall_fetch_mib * MIB // len(value)

        def load() -> None:
            scale.fetch_big(t.bootstrap, topic, messages, args.stall_fetch_mib * MIB,
                            args.stall_fetches, args.timeout)

        def prepare() -> None:
            scale.create_topic(t.bootstrap, topic, 1, args.timeout)
            scale.produce_spread(t.bootstrap, topic, 1, messages, value, args.timeout)
        what = (f"{args.stall_fetches} x fetch of {args.stall_fetch_mib} MiB "
                f"(max.partition.fetch.bytes = {args.stall_fetch_mib} MiB)")
    elif load_name == "flush":
        messages = args.stall_flush_mib * MIB // len(value)

        def load() -> None:
            scale.produce_spread(t.bootstrap, topic, 1, messages, value, args.timeout)

        def prepare() -> None:
            scale.create_topic(t.bootstrap, topic, 1, args.timeout,
                               {"flush.messages": str(args.stall_flush_messages)})
        what = (f"produce {args.stall_flush_mib} MiB into a topic with flush.messages="
                f"{args.stall_flush_messages}")
    else:
        created: list[float] = []

        def load() -> None:
            created.append(scale.create_topic(t.bootstrap, topic, args.stall_create_partitions,
                                              args.timeout))

        def prepare() -> None:
            pass
        what = f"CreateTopics of {args.stall_create_partitions} partitions until all led"
    if run_phase(results, phase, t, lambda: (prepare(), True)[1]) is None:
        return
    print(f"[bench] round {rnd + 1}: stall probe during {what} -> {t.name}", file=sys.stderr)
    r = run_phase(results, phase, t, lambda: scale.measure_stall(
        t.bootstrap, load, args.probe_interval_ms, args.timeout))
    if r is not None:
        results.add(f"stall_{load_name}_p99_ms", t.name, r.p99)
        results.add(f"stall_{load_name}_max_ms", t.name, r.max)
        if load_name == "create" and created:
            results.add("stall_create_ms", t.name, created[0] * 1000.0)
        print(f"[bench]   probe p99 {r.p99:.2f} ms, max {r.max:.1f} ms over "
              f"{len(r.samples_ms)} answers; load {r.load_s:.2f} s", file=sys.stderr)


def run_scale_round(results: Results, rnd: int, args: argparse.Namespace, order: list[str],
                    partitions: int) -> None:
    """produce-N and restart-N: each target alone, fresh, with one N-partition topic."""
    do_produce = f"produce-{partitions}" in args.only
    do_restart = f"restart-{partitions}" in args.only
    value = os.urandom(args.value_size)
    topic = f"bench-scale-{partitions}-r{rnd}"
    for name in order:
        if name == MOCK and not do_produce:
            continue
        phase = f"produce-{partitions}" if do_produce else f"restart-{partitions}"
        t = start_target(results, name, args,
                         SCALE_KAFKA_OVERRIDES if name == KAFKA else ())
        if t is None:
            continue
        print(f"[bench] round {rnd + 1}: {partitions} partitions -> {name}", file=sys.stderr)
        try:
            if args.warmup_messages:
                # As in the rounds: the JVM compiles its produce path before the clock runs
                # (on a 3-partition topic of its own: the N partitions stay untouched).
                warm = f"bench-scale-warm-r{rnd}"
                run_phase(results, "warm-up", t, lambda: (
                    t.create_topic(warm, PARTITIONS),
                    measure_consume(t.bootstrap, warm, measure_produce(
                        t.bootstrap, warm, args.warmup_messages, value, args.timeout).messages,
                        value, args.timeout)))
            pid = getattr(t, "pid", None)
            before = scale.process_resources(pid) if pid else None
            created = run_phase(results, phase, t, lambda: scale.create_topic(
                t.bootstrap, topic, partitions, args.timeout) if name != MOCK
                else (t.create_topic(topic, partitions, args.timeout), 0.0)[1])
            if created is None:
                continue
            if name != MOCK:
                results.add(f"create_p{partitions}_ms", name, created * 1000.0)
            produced, broker_up = False, True
            if do_produce:
                r = run_phase(results, phase, t, lambda: scale.produce_spread(
                    t.bootstrap, topic, partitions, args.scale_messages, value, args.timeout))
                produced = r is not None
                if r is not None:
                    results.add(f"produce_p{partitions}_mb_s", name, r.mb_s)
                    print(f"[bench]   {r.mb_s:.1f} MB/s over {partitions} partitions "
                          f"({r.seconds:.2f} s)", file=sys.stderr)
            if pid and before is not None:
                after = scale.process_resources(pid)
                results.add(f"rss_p{partitions}_mib", name, after.rss_kib / 1024.0)
                results.add(f"fds_p{partitions}", name, float(after.fds))
                results.add(f"rss_per_partition_p{partitions}_kib", name,
                            (after.rss_kib - before.rss_kib) / partitions)
                results.add(f"fds_per_partition_p{partitions}", name,
                            (after.fds - before.fds) / partitions)
                print(f"[bench]   VmRSS {before.rss_kib / 1024:.0f} -> "
                      f"{after.rss_kib / 1024:.0f} MiB, descriptors {before.fds} -> "
                      f"{after.fds}", file=sys.stderr)
            if do_restart and name != MOCK:
                t.ready_timeout = args.timeout
                for sig, label in ((signal.SIGTERM, "sigterm"), (signal.SIGKILL, "sigkill")):
                    rr = run_phase(results, f"restart-{partitions}", t,
                                   lambda: scale.measure_restart(t, topic, partitions, sig,
                                                                 args.timeout))
                    if rr is None:
                        broker_up = False
                        break
                    if rr.stop_s is not None:
                        results.add(f"shutdown_p{partitions}_ms", name, rr.stop_s * 1000.0)
                    results.add(f"restart_{label}_p{partitions}_leaders_ms", name,
                                rr.leaders_s * 1000.0)
                    results.add(f"restart_{label}_p{partitions}_ms", name, rr.produce_s * 1000.0)
                    print(f"[bench]   after {label.upper()}: all led {rr.leaders_s:.2f} s, a "
                          f"record in each {rr.produce_s:.2f} s"
                          + (f" (exit took {rr.stop_s:.2f} s)" if rr.stop_s is not None else ""),
                          file=sys.stderr)
            if produced and broker_up:
                measure_same_broker_ratio(results, rnd, args, t, topic, partitions, value)
        finally:
            try:
                t.stop()
            except Exception as e:  # noqa: BLE001 -- stopping must never hide the results
                print(f"[bench] stopping {t.name}: {e}", file=sys.stderr)
            results.record_stops(t)


def measure_same_broker_ratio(results: Results, rnd: int, args: argparse.Namespace, t: Target,
                              topic: str, partitions: int, value: bytes) -> None:
    """The issue's produce-N ratio under equal conditions: the same broker and volume, the N
    partitions written once already, against 3 partitions (produce_p{N} also pays each
    partition's first writes; produce_mb_s comes from another broker, phase and volume). Run
    last on the target, after the resource snapshot and the restarts, so that those measure
    what they did before this existed."""
    three = f"bench-scale-3-r{rnd}"
    same = run_phase(results, f"produce-{partitions}-same", t, lambda: (
        t.create_topic(three, PARTITIONS, args.timeout),
        scale.produce_spread(t.bootstrap, topic, partitions, args.scale_messages, value, args.timeout),
        scale.produce_spread(t.bootstrap, three, PARTITIONS, args.scale_messages, value,
                             args.timeout))[1:])
    if same is None:
        return
    again, over3 = same
    results.add(f"produce_p{partitions}_again_mb_s", t.name, again.mb_s)
    results.add(f"produce_p{partitions}_3same_mb_s", t.name, over3.mb_s)
    # per round (the median of the quotients): both figures of a round come from one broker
    results.add(f"produce_p{partitions}_again_of_3same", t.name, again.mb_s / over3.mb_s)
    print(f"[bench]   same broker and volume: {again.mb_s:.1f} MB/s over {partitions} partitions "
          f"again, {over3.mb_s:.1f} MB/s over {PARTITIONS}", file=sys.stderr)


def run_group_phases(results: Results, rnd: int, args: argparse.Namespace,
                     targets: dict[str, Target], order: list[str]) -> None:
    """Rebalance and commit measurements on the round's targets (started with the fast group
    settings); a target whose group topics cannot be created is stopped and dropped."""
    settings = GroupSettings(args.session_timeout_ms, args.heartbeat_ms, args.trickle_ms)
    topic, ctopic = f"bench-grp-r{rnd}", f"bench-commit-r{rnd}"
    for name in list(targets):
        t = targets[name]

        def setup() -> bool:
            if name == MOCK:
                t.set_group_initial_rebalance_delay_ms(0)
            t.create_topic(topic, GROUP_PARTITIONS)
            t.create_topic(ctopic, PARTITIONS)
            return True
        if run_phase(results, "setup", t, setup) is None:
            stopping = targets.pop(name)
            stopping.stop()
            results.record_stops(stopping)
    live = [n for n in order if n in targets]

    if "rebalance" in args.only:
        for assignor in ASSIGNORS:
            for name in live:
                t = targets[name]
                print(f"[bench] round {rnd + 1}: rebalance 3 -> 4 members, {assignor} "
                      f"<- {name}", file=sys.stderr)
                r = run_phase(results, "rebalance", t, lambda: measure_rebalance(
                    t.bootstrap, topic, f"bench-{assignor}-r{rnd}", assignor, settings,
                    args.timeout))
                if r is not None:
                    results.add(f"rebalance_{assignor}_ms", name, r.to_consuming_ms)
                    results.add(f"rebalance_{assignor}_assigned_ms", name, r.to_assigned_ms)
                    print(f"[bench]   all four consuming after {r.to_consuming_ms:.0f} ms "
                          f"(last assignment callback {r.to_assigned_ms:.0f} ms; three "
                          f"stable after {r.setup_s:.1f} s)", file=sys.stderr)

    if "commit" in args.only:
        for name in live:
            t = targets[name]
            print(f"[bench] round {rnd + 1}: OffsetCommit <- {name}", file=sys.stderr)
            c = run_phase(results, "commit", t, lambda: measure_commits(
                t.bootstrap, ctopic, f"bench-commit-r{rnd}", settings, args.commit_seconds,
                args.async_commits, args.timeout,
                getattr(t, "cpu_seconds", None)))
            if c is not None:
                results.add("commit_sync_per_s", name, c.sync_per_s)
                results.add("commit_async_per_s", name, c.async_per_s)
                if c.broker_cpu_s is not None:
                    results.add("commit_broker_cpu_us", name,
                                c.broker_cpu_s / c.total_commits * 1e6)
                print(f"[bench]   sync {c.sync_per_s:,.0f}/s ({c.sync_commits} commits of "
                      f"{c.partitions} partitions), async {c.async_per_s:,.0f}/s "
                      f"({c.async_commits})", file=sys.stderr)


def rotated(order: list[str], k: int) -> list[str]:
    """`order` started at its k-th element: each target goes first in turn, round by round."""
    k %= max(1, len(order))
    return order[k:] + order[:k]


def run_startup(results: Results, args: argparse.Namespace) -> None:
    for i in range(args.starts):
        for name in rotated([t for t in TARGETS if t in args.targets], i):
            print(f"[bench] start {i + 1}/{args.starts}: {name}", file=sys.stderr)
            if name == KAFKALITE:
                r = run_phase(results, "startup", KafkaliteBroker,
                              lambda: measure_kafkalite_start(args.ready_timeout,
                                                             results.exit_codes))
                if r is not None:
                    results.add("start_to_api_versions_ms", KAFKALITE, r.to_api_versions_s * 1e3)
                    if r.ready_line_s is not None:
                        results.add("ready_line_ms", KAFKALITE, r.ready_line_s * 1000.0)
                    if r.reported_start_s is not None:
                        results.add("reported_start_ms", KAFKALITE, r.reported_start_s * 1e3)
            elif name == KAFKA:
                r = run_phase(results, "startup", KafkaBroker,
                              lambda: measure_kafka_start(args.ready_timeout,
                                                          args.kafka_jvm_flags,
                                                          results.kafka_exit_codes))
                if r is not None and r.zookeeper_s is not None:
                    results.add("start_to_api_versions_ms", KAFKA, r.to_api_versions_s * 1e3)
                    results.add("zookeeper_start_ms", KAFKA, r.zookeeper_s * 1e3)
                    results.add("kafka_with_zookeeper_start_ms", KAFKA,
                                (r.zookeeper_s + r.to_api_versions_s) * 1e3)
            else:
                s = run_phase(results, "startup", MockCluster, measure_mock_start)
                if s is not None:
                    results.add("start_to_api_versions_ms", MOCK, s * 1000.0)
    for name in args.targets:
        print(f"[bench] startup x{args.starts}: {name} median spawn->first answer "
              f"{results.median('start_to_api_versions_ms', name)} ms", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

# The mock ends a join phase only on a timer: session.timeout.ms - 1000 ms after a member joins
# a stable group (rdkafka_mock_cgrp.c), however soon every member has rejoined.
MOCK_JOIN_CAVEAT = "mock's join phase is a fixed timer, see docs"

@dataclass(frozen=True)
class Row:
    metric: str
    label: str
    fmt: str
    phase: str
    mock_caveat: str = ""  # the mock's figure is shown with this and gets no ratio
    targets: tuple[str, ...] = TARGETS  # who has this figure; the others show "—"
    ratio: bool = True
    # kafkalite's figure to divide, when it sits in another row (Kafka incl. ZooKeeper)
    kafkalite_metric: str = ""
    # the phase whose failures the row's cells count, when not `phase` (which selects the row)
    failures_of: str = ""


NOT_REF = "not a reference (mock keeps only recent data in memory)"
ROWS = [
    Row("produce_mb_s", "produce throughput (MB/s)", "{:.1f}", "produce"),
    Row("produce_msgs_s", "produce throughput (msgs/s)", "{:,.0f}", "produce"),
    Row("consume_mb_s", "consume throughput (MB/s)", "{:.1f}", "consume", NOT_REF),
    Row("consume_msgs_s", "consume throughput (msgs/s)", "{:,.0f}", "consume", NOT_REF),
    Row("consume_messages_read", "consume: messages read", "{:,.0f}", "consume",
        "what the mock still held", ratio=False),
    Row("latency_p50_ms", "produce latency p50, first sends (ms)", "{:.3f}", "latency"),
    Row("latency_p99_ms", "produce latency p99, first sends (ms)", "{:.3f}", "latency"),
    Row("latency_warm_p50_ms", "produce latency p50, after the latency warm-up (ms)", "{:.3f}",
        "latency"),
    Row("latency_warm_p99_ms", "produce latency p99, after the latency warm-up (ms)", "{:.3f}",
        "latency"),
    Row("start_to_api_versions_ms", "start-to-ready: spawn to first ApiVersions answered (ms)",
        "{:.0f}", "startup",
        "in-process cluster creation to first metadata answer: not comparable"),
    Row("kafka_with_zookeeper_start_ms",
        "start-to-ready incl. ZooKeeper: its spawn to `ruok` + Kafka's spawn to ApiVersions (ms)",
        "{:.0f}", "startup", targets=(KAFKA,), kafkalite_metric="start_to_api_versions_ms"),
    Row("zookeeper_start_ms", "ZooKeeper alone: spawn to `ruok` answered (ms)", "{:.0f}",
        "startup", targets=(KAFKA,), ratio=False),
    Row("ready_line_ms", "kafkalite: spawn to its ready line (ms)", "{:.0f}", "startup",
        targets=(KAFKALITE,)),
    Row("reported_start_ms", "kafkalite: broker's own \"started in\" (ms)", "{:.0f}", "startup",
        targets=(KAFKALITE,)),
    Row("rebalance_range_ms", "rebalance 3 -> 4, range (eager): until all four consume (ms)",
        "{:.0f}", "rebalance", MOCK_JOIN_CAVEAT),
    Row("rebalance_range_assigned_ms",
        "rebalance 3 -> 4, range (eager): until last assignment (ms)", "{:.0f}", "rebalance",
        MOCK_JOIN_CAVEAT),
    Row("rebalance_cooperative-sticky_ms",
        "rebalance 3 -> 4, cooperative-sticky: until all four consume (ms)", "{:.0f}",
        "rebalance", MOCK_JOIN_CAVEAT),
    Row("rebalance_cooperative-sticky_assigned_ms",
        "rebalance 3 -> 4, cooperative-sticky: until last assignment (ms)", "{:.0f}",
        "rebalance", MOCK_JOIN_CAVEAT),
    Row("commit_sync_per_s", "OffsetCommit, sync (commits/s)", "{:,.0f}", "commit"),
    Row("commit_async_per_s", "OffsetCommit, async pipelined (commits/s)", "{:,.0f}", "commit"),
    Row("commit_broker_cpu_us", "OffsetCommit: broker CPU per commit (µs)", "{:.0f}", "commit",
        targets=(KAFKALITE, KAFKA)),
]


BROKER_TARGETS = (KAFKALITE, KAFKA)


def stall_label(load: str, args: argparse.Namespace) -> str:
    return {"idle": "no load",
            "fetch": f"during {args.stall_fetch_mib} MiB fetches",
            "flush": f"during produce with flush.messages={args.stall_flush_messages}",
            "create": f"during CreateTopics of {args.stall_create_partitions:,} partitions",
            }[load]


def scale_rows(args: argparse.Namespace) -> list[Row]:
    """The rows of the scale measurements selected, in the order of --only."""
    rows: list[Row] = []
    sizes = sorted({n for p in args.only if (sp := scale.scale_phase(p)) for n in [sp[1]]})
    for n in sizes:
        ph = f"produce-{n}" if f"produce-{n}" in args.only else f"restart-{n}"
        if f"produce-{n}" in args.only:
            rows += [
                Row(f"produce_p{n}_mb_s", f"produce over {n:,} partitions (MB/s)", "{:.1f}", ph),
                Row(f"produce_p{n}_of_3", f"produce over {n:,} partitions / over 3, same target",
                    "{:.2f}", ph, ratio=False),
                Row(f"produce_p{n}_again_mb_s",
                    f"produce over {n:,} partitions again, same broker (MB/s)", "{:.1f}", ph,
                    failures_of=f"produce-{n}-same"),
                Row(f"produce_p{n}_3same_mb_s",
                    f"produce over 3 partitions, same broker and volume as over {n:,} (MB/s)",
                    "{:.1f}", ph, failures_of=f"produce-{n}-same"),
                Row(f"produce_p{n}_again_of_3same",
                    f"produce over {n:,} partitions again / over 3, same broker and volume",
                    "{:.2f}", ph, ratio=False, failures_of=f"produce-{n}-same"),
            ]
        rows += [
            Row(f"create_p{n}_ms", f"CreateTopics of {n:,} partitions until all led (ms)",
                "{:,.0f}", ph, targets=BROKER_TARGETS),
            Row(f"rss_p{n}_mib", f"VmRSS with {n:,} partitions (MiB)", "{:,.0f}", ph,
                targets=BROKER_TARGETS),
            Row(f"rss_per_partition_p{n}_kib", f"VmRSS per partition, {n:,} partitions (KiB)",
                "{:.1f}", ph, targets=BROKER_TARGETS),
            Row(f"fds_p{n}", f"open descriptors with {n:,} partitions", "{:,.0f}", ph,
                targets=BROKER_TARGETS),
            Row(f"fds_per_partition_p{n}", f"descriptors per partition, {n:,} partitions",
                "{:.2f}", ph, targets=BROKER_TARGETS),
        ]
        if f"restart-{n}" in args.only:
            rp = f"restart-{n}"
            rows += [
                Row(f"shutdown_p{n}_ms", f"SIGTERM to exit, {n:,} partitions (ms)", "{:,.0f}",
                    rp, targets=BROKER_TARGETS),
                Row(f"restart_sigterm_p{n}_leaders_ms",
                    f"restart after SIGTERM, {n:,} partitions: spawn to all led (ms)",
                    "{:,.0f}", rp, targets=BROKER_TARGETS),
                Row(f"restart_sigterm_p{n}_ms",
                    f"restart after SIGTERM, {n:,} partitions: spawn to a record in each (ms)",
                    "{:,.0f}", rp, targets=BROKER_TARGETS),
                Row(f"restart_sigkill_p{n}_leaders_ms",
                    f"restart after SIGKILL, {n:,} partitions: spawn to all led (ms)",
                    "{:,.0f}", rp, targets=BROKER_TARGETS),
                Row(f"restart_sigkill_p{n}_ms",
                    f"restart after SIGKILL, {n:,} partitions: spawn to a record in each (ms)",
                    "{:,.0f}", rp, targets=BROKER_TARGETS),
            ]
    stalls = [p for p in scale.STALL_PHASES if p in args.only]
    for load in (["idle"] if stalls else []) + [p.split("-", 1)[1] for p in stalls]:
        ph = stalls[0] if load == "idle" else f"stall-{load}"
        for stat in ("p99", "max"):
            rows.append(Row(f"stall_{load}_{stat}_ms",
                            f"other client's ApiVersions {stat}, {stall_label(load, args)} (ms)",
                            "{:.2f}" if stat == "p99" else "{:.1f}", ph,
                            targets=BROKER_TARGETS))
        if load == "create":
            rows.append(Row("stall_create_ms", f"CreateTopics of {args.stall_create_partitions:,}"
                            " partitions under the probe, until all led (ms)", "{:,.0f}", ph,
                            targets=BROKER_TARGETS))
    return rows


def add_derived(results: Results, args: argparse.Namespace) -> None:
    """produce over N partitions as a share of the same target's 3-partition figure."""
    for p in args.only:
        sp = scale.scale_phase(p)
        if sp is None or sp[0] != "produce":
            continue
        for t in TARGETS:
            many = results.median(f"produce_p{sp[1]}_mb_s", t)
            three = results.median("produce_mb_s", t)
            if many is not None and three:
                results.add(f"produce_p{sp[1]}_of_3", t, many / three)


def cell(results: Results, metric: str, target: str, fmt: str, phase: str) -> str:
    med = results.median(metric, target)
    n = len(results.values.get(metric, {}).get(target, []))
    # A target that never started, or whose topics could not be created, failed every phase.
    fails = sum(len(results.errors.get(ph, {}).get(target, []))
                for ph in (phase, "start", "setup"))
    if med is None:
        return "FAILED" if fails else "n/a"
    txt = fmt.format(med)
    return txt + (f" ({n} ok, {fails} failed)" if fails else "")


def ratio_cell(results: Results, row: Row, reference: str) -> str:
    """kafkalite's median over `reference`'s, where the two figures measure the same thing."""
    if not row.ratio or reference not in row.targets or (reference == MOCK and row.mock_caveat):
        return "—"
    km = results.median(row.kafkalite_metric or row.metric, KAFKALITE)
    rm = results.median(row.metric, reference)
    return f"{km / rm:.2f}" if km is not None and rm else "—"


def markdown_table(results: Results, args: argparse.Namespace) -> str:
    shown = [t for t in TARGETS if t in args.targets]
    refs = [t for t in (KAFKA, MOCK) if t in shown and KAFKALITE in shown]
    head = ["measurement"] + [LABELS[t] for t in shown] + \
        [f"kafkalite/{'Kafka' if r == KAFKA else 'mock'}" for r in refs]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for row in ROWS + scale_rows(args):
        if row.phase not in args.only:
            continue
        failures = row.failures_of or row.phase
        if row.metric not in results.values and failures not in results.errors:
            continue
        cells = [row.label]
        for t in shown:
            if t not in row.targets:
                cells.append("—")
                continue
            c = cell(results, row.metric, t, row.fmt, failures)
            if t == MOCK and row.mock_caveat and c != "n/a":
                c = f"{c} — {row.mock_caveat}"
            cells.append(c)
        cells += [ratio_cell(results, row, r) for r in refs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _version_str(v: Any) -> str:
    # confluent_kafka.version() is a plain string in some releases, (str, int) in others.
    return v[0] if isinstance(v, tuple) else str(v)


def environment(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python scripts/bench.py " + " ".join(shlex.quote(a) for a in argv),
        "git_commit": commit,
        "python": platform.python_version(),
        "confluent_kafka": _version_str(ck.version()),
        "librdkafka": _version_str(ck.libversion()),
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "messages": args.messages,
        "value_size": args.value_size,
        "repeat": args.repeat,
        "starts": args.starts,
        "latency_sends": args.latency_sends,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "trickle_ms": args.trickle_ms,
        "commit_seconds": args.commit_seconds,
        "async_commits": args.async_commits,
    }


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"java not runnable ({e})"
    lines = (out.stderr or out.stdout).splitlines()
    return lines[0].strip() if lines else "java (no version line)"


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.quick:
        # Quick presets replace the defaults only, so explicit options still win.
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    return _checked(ap, args)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200 * MIB // 1024,
                    help="messages to produce per round (default 204800 = 200 MiB of 1 KiB values)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    ap.add_argument("--only", default=",".join(PHASES),
                    help="comma list of: " + ",".join(PHASES))
    ap.add_argument("--json", metavar="OUT", help="also write all runs and medians as JSON")
    ap.add_argument("--keep-logs", metavar="DIR", type=Path,
                    help="write each kafkalite broker's log (stderr) to DIR/kafkalite-NNN.log, "
                         "numbered by start")
    ap.add_argument("--starts", type=int, default=10, help="starts of each target to time (K)")
    ap.add_argument("--warmup-messages", type=int, default=20 * MIB // 1024,
                    help="unmeasured produce + consume on each target before the timed ones, "
                         "every round (default 20480; 0 = none)")
    ap.add_argument("--latency-sends", type=int, default=2000,
                    help="measured single sends, the first ones and again after the warm-up")
    ap.add_argument("--latency-warmup", type=int, default=20000,
                    help="single sends between the first and the last --latency-sends ones "
                         "(default 20000; 0: the first ones only)")
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help="comma list of: " + ",".join(TARGETS) + " (default all; kafka needs "
                         "Java, Debian's zookeeper and Maven Central or the jar cache)")
    ap.add_argument("--kafka-jvm-flags", default=" ".join(KAFKA_JVM_FLAGS),
                    help="JVM flags of the Apache Kafka broker (default: those of Kafka's own "
                         "kafka-server-start.sh / kafka-run-class.sh)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke-test sizes: " + ", ".join(f"--{k.replace('_', '-')} {v}"
                                                         for k, v in QUICK.items()))
    ap.add_argument("--timeout", type=float, default=300.0, help="limit per measurement (s)")
    ap.add_argument("--session-timeout-ms", type=int, default=2000,
                    help="group members' session.timeout.ms (default 2000)")
    ap.add_argument("--heartbeat-ms", type=int, default=100,
                    help="group members' heartbeat.interval.ms (default 100)")
    ap.add_argument("--trickle-ms", type=float, default=10.0,
                    help="rebalance: one message into each of the 12 partitions this often")
    ap.add_argument("--commit-seconds", type=float, default=3.0,
                    help="commit: duration of the synchronous commit loop (default 3 s)")
    ap.add_argument("--async-commits", type=int, default=5000,
                    help="commit: asynchronous commits issued back to back (default 5000)")
    ap.add_argument("--scale", action="store_true",
                    help="add the scale measurements to --only: " + ",".join(SCALE))
    ap.add_argument("--scale-messages", type=int, default=50 * MIB // 1024,
                    help="produce-N: messages spread over the N partitions (default 51200)")
    ap.add_argument("--stall-fetch-mib", type=int, default=50,
                    help="stall-fetch: MiB in the partition and max.partition.fetch.bytes")
    ap.add_argument("--stall-fetches", type=int, default=3,
                    help="stall-fetch: consumers reading it all, one after the other")
    ap.add_argument("--stall-flush-mib", type=int, default=50,
                    help="stall-flush: MiB produced into the flush.messages topic")
    ap.add_argument("--stall-flush-messages", type=int, default=5000,
                    help="stall-flush: the topic's flush.messages (an fsync every K messages)")
    ap.add_argument("--stall-create-partitions", type=int, default=1000,
                    help="stall-create: partitions of the topic created under the probe")
    ap.add_argument("--stall-idle-seconds", type=float, default=2.0,
                    help="the probe with no load, for reference (s)")
    ap.add_argument("--probe-interval-ms", type=float, default=1.0,
                    help="stall probe: pause after each ApiVersions answer (ms)")
    ap.add_argument("--ready-timeout", type=float, default=60.0,
                    help="limit for `kafkalite serve` to print its ready line (s)")
    return ap


def _checked(ap: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    args.kafka_jvm_flags = tuple(shlex.split(args.kafka_jvm_flags))
    args.only = [p.strip() for p in args.only.split(",") if p.strip()]
    if args.scale:
        args.only += [p for p in SCALE if p not in args.only]
    bad = [p for p in args.only if p not in PHASES and not scale.is_scale_phase(p)]
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad += [t for t in args.targets if t not in TARGETS]
    if bad:
        ap.error(f"unknown phase/target: {', '.join(bad)}")
    if args.messages < PARTITIONS or args.repeat < 1 or args.starts < 1 or args.latency_sends < 1:
        ap.error("--messages >= 3, --repeat/--starts/--latency-sends >= 1")
    if args.warmup_messages < 0 or 0 < args.warmup_messages < PARTITIONS:
        ap.error("--warmup-messages 0 or >= 3")
    if args.latency_warmup < 0:
        ap.error("--latency-warmup >= 0")
    if not 0 < args.heartbeat_ms < args.session_timeout_ms:
        ap.error("need 0 < --heartbeat-ms < --session-timeout-ms")
    if args.session_timeout_ms < 1000:
        ap.error("--session-timeout-ms >= 1000 (kafkalite runs with group.min.session.timeout.ms"
                 "=1000)")
    if min(args.scale_messages, args.stall_fetch_mib, args.stall_fetches, args.stall_flush_mib,
           args.stall_flush_messages, args.stall_create_partitions) < 1 \
            or args.stall_idle_seconds <= 0 or args.probe_interval_ms < 0:
        ap.error("scale and stall sizes >= 1, --stall-idle-seconds > 0")
    if args.commit_seconds <= 0 or args.async_commits < 1 or args.trickle_ms <= 0:
        ap.error("--commit-seconds, --trickle-ms > 0 and --async-commits >= 1")
    return args


def raise_nofile_limit() -> list[int]:
    """RLIMIT_NOFILE's soft limit raised to the hard one, for this process and so for every
    broker it starts (many partitions need many descriptors); [soft, hard] as they are now."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return list(resource.getrlimit(resource.RLIMIT_NOFILE))


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.keep_logs is not None:
        args.keep_logs.mkdir(parents=True, exist_ok=True)
        KafkaliteBroker.keep_logs = args.keep_logs
    env = environment(args, argv)
    env["targets"] = list(args.targets)
    env["warmup_messages"] = args.warmup_messages
    env["latency_warmup"] = args.latency_warmup
    env["only"] = list(args.only)
    env["nofile_limit"] = raise_nofile_limit()
    if any(scale.is_scale_phase(p) for p in args.only):
        env.update({k: getattr(args, k) for k in (
            "scale_messages", "stall_fetch_mib", "stall_fetches", "stall_flush_mib",
            "stall_flush_messages", "stall_create_partitions", "stall_idle_seconds",
            "probe_interval_ms")})
    if KAFKA in args.targets:
        env["kafka_version"] = LABELS[KAFKA]
        env["kafka_jvm_flags"] = list(args.kafka_jvm_flags)
        env["java"] = java_version()
    results = Results()
    t0 = time.monotonic()
    order = [t for t in TARGETS if t in args.targets]
    if any(p in args.only for p in PHASES[:3] + GROUP_PHASES + scale.STALL_PHASES):
        for rnd in range(args.repeat):
            run_round(results, rnd, args, rotated(order, rnd))
    sizes = sorted({sp[1] for p in args.only if (sp := scale.scale_phase(p))})
    for n in sizes:
        for rnd in range(args.repeat):
            run_scale_round(results, rnd, args, rotated(order, rnd), n)
    add_derived(results, args)
    if "startup" in args.only:
        run_startup(results, args)
    env["wall_seconds"] = round(time.monotonic() - t0, 1)
    env["loadavg_at_end"] = os.getloadavg()

    table = markdown_table(results, args)
    print("\n" + " vs ".join(LABELS[t] for t in order)
          + f" — {env['date']}, commit {env['git_commit']}, "
          f"{env['cpus']} CPUs, confluent-kafka {env['confluent_kafka']} / librdkafka "
          f"{env['librdkafka']}; load average %.2f at start, %.2f at end"
          % (env["loadavg_at_start"][0], env["loadavg_at_end"][0]))
    print(f"command: {env['command']}")
    print(f"medians of {args.repeat} rounds (startup: of {args.starts} starts), target order "
          f"rotated each round; {args.messages} x {args.value_size} B messages after "
          f"{args.warmup_messages} unmeasured; latency: {args.latency_sends} first sends and "
          f"{args.latency_sends} after {args.latency_warmup} more; MB = 2^20 bytes of values")
    if KAFKA in args.targets:
        print(f"Apache Kafka: {env['java']}, ZooKeeper mode, JVM flags "
              + " ".join(args.kafka_jvm_flags))
    if any(scale.is_scale_phase(p) for p in args.only):
        print(f"scale: produce-N {args.scale_messages} x {args.value_size} B round-robin over N "
              f"partitions, each target alone on a fresh broker; restart ready = Metadata shows "
              f"every partition led / a record acknowledged by each, from the spawn; stall probe: "
              f"ApiVersions v0 every {args.probe_interval_ms:g} ms after the answer, from a "
              f"process of its own; stall-fetch {args.stall_fetches} x {args.stall_fetch_mib} "
              f"MiB, stall-flush {args.stall_flush_mib} MiB with flush.messages="
              f"{args.stall_flush_messages}, stall-create {args.stall_create_partitions} "
              f"partitions; RLIMIT_NOFILE {env['nofile_limit'][0]}")
    if any(p in args.only for p in GROUP_PHASES):
        print(f"groups: session.timeout.ms {args.session_timeout_ms}, heartbeat.interval.ms "
              f"{args.heartbeat_ms}, {GROUP_PARTITIONS} partitions, one message per partition "
              f"every {args.trickle_ms:g} ms; sync commits for {args.commit_seconds:g} s, "
              f"{args.async_commits} async commits; brokers with "
              + ", ".join(GROUP_BROKER_OVERRIDES))
    print()
    print(table)
    for note in results.notes:
        print(f"\nnote: {note}")
    if results.exit_codes:
        bad = [c for c in results.exit_codes if c != 0]
        print(f"\nkafkalite on SIGTERM: {len(results.exit_codes)} stops, "
              + (f"non-zero exit codes {bad} (-9 = needed SIGKILL)" if bad else "all exited 0"))
    if results.kafka_exit_codes:
        codes = sorted(set(results.kafka_exit_codes))
        print(f"Apache Kafka on SIGTERM: {len(results.kafka_exit_codes)} stops, exit codes "
              f"{codes} (143: the JVM's exit after its shutdown hook; -9: needed SIGKILL)")
    if results.errors:
        print("\nfailures:")
        for phase, by_target in results.errors.items():
            for target, msgs in by_target.items():
                for msg in dict.fromkeys(msgs):
                    one_line = " | ".join(x.strip() for x in msg.splitlines() if x.strip())
                    print(f"- {target} {phase}: {one_line[:400]}")
    if args.json:
        out = {
            "environment": env,
            "notes": results.notes,
            "runs": results.values,
            "medians": {m: {t: results.median(m, t) for t in v}
                        for m, v in results.values.items()},
            "errors": results.errors,
            "kafkalite_exit_codes": results.exit_codes,
            "kafka_exit_codes": results.kafka_exit_codes,
            "table_markdown": table,
        }
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
