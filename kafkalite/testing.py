"""Throw-away kafkalite brokers and clusters for test suites.

    with kafkalite.testing.Broker(num_partitions=3) as broker:
        broker.create_topic("orders", partitions=3)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

    with kafkalite.testing.Cluster(brokers=3) as cluster:     # ZooKeeper mode, brokers 0, 1, 2
        cluster.create_topic("orders", partitions=3)          # a partition led by each broker
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        cluster.broker(cluster.controller_id()).kill()        # a controller failover

Each `Broker` is a `python -m kafkalite serve`-equivalent child process on 127.0.0.1 with a port
the OS picks and a log dir in a temporary directory of its own. A separate process, so test code
that blocks (a synchronous client, a hung event loop, the GIL) cannot stall the broker.

A `Cluster` is N such brokers with `broker.id` 0..N-1 and `zookeeper.connect` set, sharing a
ZooKeeper (one it starts, Debian's, through `kafkalite.tools.local_zookeeper`, or one given) under
a chroot of their own; they start in parallel and `start()` returns once a controller is elected
and every broker's Metadata lists every broker. `stop()` stops the brokers one at a time with
controlled shutdown, the controller last, then the ZooKeeper it started.

No broker outlives its test run: `close()` / the context manager / the pytest fixtures stop it;
an `atexit` hook and `__del__` catch brokers nobody closed (e.g. after a KeyboardInterrupt); and
the child watches a pipe whose only write end is held by the parent process, so when the parent
dies in any way (SIGKILL included) the child sees EOF, shuts down and removes its temp dir.

Only the standard library is imported here at module level: the pytest plugin imports this
module in every pytest run of an environment where kafkalite is installed.
"""
from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    from kafkalite.tools.local_zookeeper import ZooKeeperServer

__all__ = ["Broker", "BrokerError", "Cluster", "ClusterError", "TopicError", "property_name",
           "property_value", "TEST_DEFAULTS", "CLUSTER_TEST_DEFAULTS", "cluster_size_defaults"]

READY_RE = re.compile(r"kafkalite ready: broker (\d+) listening on PLAINTEXT://(\S+):(\d+)")
STARTED_IN_RE = re.compile(r"started in ([0-9.]+) s")

# Broker defaults that differ from Kafka's for test runs (Testcontainers' Kafka module makes the
# same choices): no 3 s wait before the first rebalance of a new group, and a one-partition
# __consumer_offsets instead of 50 (created on the first FindCoordinator; 50 partitions cost
# start-up time for nothing on a one-broker test cluster). Overridable like any property.
TEST_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}

# Set by Broker itself: the listener carries the port, log.dirs the temp dir.
_RESERVED = {"listeners": "port=/host=", "log.dirs": "log_dir=", "log.dir": "log_dir="}

PropertyValue = Union[str, int, float, bool, os.PathLike]


class BrokerError(RuntimeError):
    """The broker did not start, stop or answer as expected; the message says why."""


class TopicError(BrokerError):
    """CreateTopics answered with an error (Kafka's error code and name are attributes)."""

    def __init__(self, message: str, error_code: int, error_name: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.error_name = error_name


def property_name(kwarg: str) -> str:
    """`num_partitions` -> `num.partitions`: Kafka property names have dots, kwargs cannot."""
    return kwarg.replace("_", ".")


def property_value(value: PropertyValue) -> str:
    """A Python value as a .properties value: booleans are `true`/`false`, as Kafka spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"property value must be str, int, float, bool or a path, not {type(value).__name__}")


def merge_overrides(overrides: Optional[Mapping[str, PropertyValue]] = None,
                    **kwargs: PropertyValue) -> dict[str, str]:
    """Kafka-named `overrides` plus underscore-named `kwargs` (which win) as property strings."""
    merged = {str(k): property_value(v) for k, v in (overrides or {}).items()}
    merged.update({property_name(k): property_value(v) for k, v in kwargs.items()})
    for key, use in _RESERVED.items():
        if key in merged:
            raise ValueError(f"{key!r} is set by kafkalite.testing.Broker; use {use} instead")
    return merged


class Broker:
    """One kafkalite broker process for tests.

    `overrides` takes Kafka property names (`{"num.partitions": "3"}`); keyword arguments are the
    same with underscores for dots (`num_partitions=3`) and win over `overrides`. `TEST_DEFAULTS`
    apply unless overridden. `port=0` lets the OS choose a free port (kept across `restart()`);
    `log_dir=None` puts the log in this broker's temp dir, deleted by `close()`; likewise
    `stderr_path=None` for the file the broker's stderr (its log lines) is appended to.
    """

    def __init__(self, overrides: Optional[Mapping[str, PropertyValue]] = None, *,
                 port: int = 0, host: str = "127.0.0.1",
                 log_dir: Optional[Union[str, os.PathLike]] = None,
                 stderr_path: Optional[Union[str, os.PathLike]] = None,
                 ready_timeout: float = 30.0, command_prefix: Sequence[str] = (),
                 **kwargs: PropertyValue) -> None:
        self.overrides: dict[str, str] = {**TEST_DEFAULTS, **merge_overrides(overrides, **kwargs)}
        self.host = host
        # e.g. ["ip", "netns", "exec", "ns0"] (with host= an address there): a broker in a network
        # namespace of its own, for partition tests; the prefix must exec the command, keeping the pid
        self.command_prefix: list[str] = list(command_prefix)
        self.ready_timeout = ready_timeout
        # The temp dir holds the broker's stderr and, unless log_dir is given, its log dir.
        self._tmp: Optional[str] = tempfile.mkdtemp(prefix="kafkalite-test-")
        self._owns_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir is not None else Path(self._tmp) / "logs"
        self.stderr_path = Path(stderr_path) if stderr_path is not None else Path(self._tmp) / "broker.stderr"
        self._port: Optional[int] = port or None
        self._proc: Optional[subprocess.Popen[str]] = None
        self._death_pipe_w: Optional[int] = None
        self._reader: Optional[threading.Thread] = None
        self.stdout_lines: list[str] = []
        self.startup_seconds: Optional[float] = None   # spawn to ready line, of the last start
        self.reported_startup_seconds: Optional[float] = None   # the broker's own "started in"
        self.starts = 0
        _live.add(self)

    # -- addresses ----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise BrokerError("broker not started yet: its port is chosen at the first start()")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        """The broker process's pid while it runs (or until it is reaped)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> Optional[int]:
        """The exit code of a broker process that ended on its own (a crash, a kill from outside)
        and was not restarted or stopped since; None while it runs or after stop()."""
        return self._proc.poll() if self._proc is not None else None

    def output(self) -> str:
        """Everything the broker wrote to stderr (its log) so far, over all its starts."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    # -- life cycle ---------------------------------------------------------------------------
    def command(self) -> list[str]:
        """The child's command line (the death-pipe fd and cleanup dir are filled in at start)."""
        args = ["serve", "--override", f"listeners=PLAINTEXT://{self.host}:{self._port or 0}",
                "--override", f"log.dirs={self.log_dir}"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        return args

    def start(self, timeout: Optional[float] = None) -> "Broker":
        """Spawn the broker and wait for its ready line. Returns self."""
        if self._tmp is None:
            raise BrokerError("broker was closed")
        if self.running:
            raise BrokerError(f"broker already running (pid {self.pid})")
        self._reap()
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._spawn(deadline)
                return self
            except _AddressInUse:
                # Restarting on the port we had: something grabbed it meanwhile (rarely, a
                # client's ephemeral port on loopback). Retry until the deadline.
                if time.monotonic() >= deadline:
                    raise BrokerError(f"port {self._port} stayed in use for {timeout:.0f} s:\n"
                                      + self._stderr_tail()) from None
                time.sleep(0.1)

    def _spawn(self, deadline: float) -> None:
        r, w = os.pipe()   # both ends non-inheritable; r is passed explicitly below
        cleanup = self._tmp or ""
        cmd = [*self.command_prefix, sys.executable, "-c", _CHILD_CODE, _PACKAGE_DIR, str(r), cleanup,
               *self.command()]
        try:
            with open(self.stderr_path, "ab") as err:
                spawned = time.perf_counter()
                # Own session: a terminal's Ctrl-C (SIGINT to the foreground group) reaches the
                # test runner, which then stops the broker in order; kill() takes the group.
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=err, text=True, bufsize=1, pass_fds=(r,),
                                        start_new_session=True)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self._proc, self._death_pipe_w = proc, w
        self.starts += 1
        ready = threading.Event()
        found: list[tuple[float, re.Match[str]]] = []
        lines = self.stdout_lines

        # Holds no reference to self: a running thread keeping the Broker alive would keep
        # __del__ from ever closing a forgotten broker.
        def read_stdout() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:   # drained to EOF: the child never blocks on a full pipe
                lines.append(line.rstrip("\n"))
                if not ready.is_set():
                    m = READY_RE.search(line)
                    if m:
                        found.append((time.perf_counter(), m))
                        ready.set()

        self._reader = threading.Thread(target=read_stdout, name=f"kafkalite-broker-{proc.pid}",
                                        daemon=True)
        self._reader.start()
        while not ready.wait(0.01):
            if proc.poll() is not None:
                self._reap()
                tail = self._stderr_tail()
                if self._port and "Address already in use" in tail:
                    raise _AddressInUse()
                raise BrokerError(f"kafkalite broker exited with code {proc.returncode} before "
                                  f"it was ready:\n{tail}")
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerError("kafkalite broker not ready in time; stderr:\n" + self._stderr_tail())
        at, m = found[0]
        self._port = int(m.group(3))
        self.startup_seconds = at - spawned
        s = STARTED_IN_RE.search(m.string)
        self.reported_startup_seconds = float(s.group(1)) if s else None

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """SIGTERM and wait: a clean shutdown (logs flushed, checkpoints written). Returns the
        exit code (0: clean), None if it was not running. Past `timeout` the process group is
        SIGKILLed and BrokerError raised."""
        proc = self._proc
        if proc is None:
            return None
        if proc.returncode is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BrokerError(f"kafkalite broker did not stop within {timeout} s of SIGTERM; "
                                  "killed") from None
        self._reap()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL the broker's process group: a crash (nothing flushed, no clean-shutdown marker)."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:   # not reaped yet, so the group id cannot have been reused
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        self._reap()

    def restart(self, timeout: Optional[float] = None) -> "Broker":
        """Stop cleanly if running, then start again on the same port and log dir."""
        self.stop()
        return self.start(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stop (SIGKILL if SIGTERM takes longer than `timeout`) and delete the temp dir."""
        try:
            self.stop(timeout)
        except BrokerError:
            pass
        finally:
            self.kill()
            tmp, self._tmp = self._tmp, None
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            _live.discard(self)

    def _reap(self) -> None:
        """Forget an exited process: close our end of its death pipe, finish its stdout reader."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return
        if self._death_pipe_w is not None:
            os.close(self._death_pipe_w)
            self._death_pipe_w = None
        if self._reader is not None:
            self._reader.join(5)
            self._reader = None
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        self._proc = None

    def _stderr_tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def __enter__(self) -> "Broker":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Last resort for a Broker nobody closed; never raise from a finalizer.
        try:
            if self._tmp is not None or self._proc is not None:
                self.close(timeout=2.0)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "not running"
        where = f"{self.host}:{self._port}" if self._port else "no port yet"
        return f"<kafkalite.testing.Broker {where} {state} log_dir={self.log_dir}>"

    # -- admin --------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Optional[Mapping[str, PropertyValue]] = None,
                     timeout: float = 10.0) -> str:
        """Create a topic through the Kafka protocol (CreateTopics) and wait until Metadata shows
        it with a leader for every partition. Returns `name`. `partitions=-1` takes the broker's
        `num.partitions`. Raises TopicError with Kafka's error name (TOPIC_ALREADY_EXISTS, ...)."""
        CreateTopicsRequest, MetadataRequest, _ = _protocol_classes()
        deadline = time.monotonic() + timeout
        with _Connection(self.host, self.port, timeout) as c:
            T = CreateTopicsRequest.CreatableTopic
            configs = [T.CreatableTopicConfig(name=k, value=property_value(v))
                       for k, v in (config or {}).items()]
            resp = c.request(CreateTopicsRequest[c.version(CreateTopicsRequest)](
                topics=[T(name=name, num_partitions=partitions,
                          replication_factor=replication_factor, assignments=[], configs=configs)],
                timeout_ms=int(timeout * 1000), validate_only=False))
            t = resp.topics[0]
            if t.error_code != 0:
                err = _error_name(t.error_code)
                msg = getattr(t, "error_message", None)
                raise TopicError(f"CreateTopics {name!r}: {err} ({t.error_code})"
                                 + (f": {msg}" if msg else ""), t.error_code, err)
            md_version = c.version(MetadataRequest)
            while True:
                md = c.request(MetadataRequest[md_version](
                    topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                    allow_auto_topic_creation=False))
                mt = md.topics[0]
                if (mt.error_code == 0 and mt.partitions
                        and (partitions == -1 or len(mt.partitions) == partitions)
                        and all(p.error_code == 0 and p.leader_id >= 0 for p in mt.partitions)):
                    return name
                if time.monotonic() > deadline:
                    raise BrokerError(f"topic {name!r} created but its metadata not complete "
                                      f"after {timeout} s: {mt}")
                time.sleep(0.01)


# -- clusters ---------------------------------------------------------------------------------

# Cluster-mode defaults for test runs, on top of TEST_DEFAULTS; overridable like any property.
# The test ZooKeeper ticks every 500 ms, so a 6 s session (Kafka's tests use 6-10 s) notices a
# killed broker within seconds; controlled shutdown retries after 0.5 s, not 5 s; three
# __consumer_offsets partitions so group coordinators spread over the brokers; no automatic
# leader rebalance moving leaders behind a test's back (its tests set it with a short
# leader.imbalance.check.interval.seconds).
CLUSTER_TEST_DEFAULTS: dict[str, str] = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "auto.leader.rebalance.enable": "false",
}


def cluster_size_defaults(brokers: int) -> dict[str, str]:
    """Internal-topic defaults a test cluster of `brokers` brokers gets on top of
    CLUSTER_TEST_DEFAULTS (overridable): Kafka's replication factor 3 for `__consumer_offsets`
    and `__transaction_state` (and min ISR 2 for the latter) lowered to what the cluster can
    hold, so a one- or two-broker cluster still gets its coordinators. A broker never lowers
    them itself in ZooKeeper mode: with fewer brokers alive than the factor, FindCoordinator
    answers COORDINATOR_NOT_AVAILABLE, as Kafka does."""
    return {"offsets.topic.replication.factor": str(min(3, brokers)),
            "transaction.state.log.replication.factor": str(min(3, brokers)),
            "transaction.state.log.min.isr": str(min(2, brokers))}


# Set by Cluster for each broker.
_CLUSTER_RESERVED = {"broker.id": "the ids are 0..brokers-1; use broker_overrides for per-broker properties",
                     "zookeeper.connect": "use zookeeper= and chroot="}

# Seconds a broker gets for its SIGTERM shutdown (controlled shutdown included) in Cluster.stop().
_CLUSTER_STOP_TIMEOUT = 30.0


class ClusterError(BrokerError):
    """A cluster did not start or answer as expected. `broker_id` names the broker at fault, if
    one is; `summary` is the reason in one line (the full message carries the broker's log)."""

    def __init__(self, message: str, broker_id: Optional[int] = None, summary: Optional[str] = None) -> None:
        super().__init__(message)
        self.broker_id = broker_id
        self.summary = summary or message.splitlines()[0]


def _one_line(error: BaseException) -> str:
    """The line of a broker's start failure that says why: kafkalite's own `kafkalite: ...` line
    from its stderr when there is one, else the error's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("kafkalite: "):
            return line
    return lines[0] if lines else type(error).__name__


def _validate_chroot(chroot: str) -> str:
    if chroot and (not chroot.startswith("/") or chroot.endswith("/") or "//" in chroot):
        raise ValueError(f"chroot must be an absolute ZooKeeper path like /kafkalite, got {chroot!r}")
    return chroot


class Cluster:
    """N kafkalite brokers in ZooKeeper mode (broker ids 0..N-1) for tests.

    `overrides` (Kafka property names) apply to every broker, on top of TEST_DEFAULTS,
    CLUSTER_TEST_DEFAULTS and cluster_size_defaults(brokers); `broker_overrides[id]` to one broker,
    on top of those. `zookeeper` ("host:port", no chroot) uses a running ZooKeeper; None starts one
    of its own (Debian's, see `kafkalite zookeeper`), stopped by `stop()` and removed by `close()`.
    The brokers live under `chroot` (default "/kafkalite-<random hex>", so clusters can share a
    ZooKeeper; "" for none).

    `broker_hosts[id]` and `broker_command_prefixes[id]` (see Broker's `host` and
    `command_prefix`) run a broker elsewhere than `host`, e.g. in a network namespace.

    `base_dir` keeps everything in one directory that `close()` leaves in place (`kafkalite
    cluster` uses it): broker logs in base_dir/broker-<id>, their stderr in
    base_dir/broker-<id>.log, the ZooKeeper it starts in base_dir/zookeeper. `base_port` puts
    broker i on base_port + i (0: ports the OS picks, kept across restarts).
    """

    def __init__(self, brokers: int = 3, overrides: Optional[Mapping[str, PropertyValue]] = None, *,
                 zookeeper: Optional[str] = None, chroot: Optional[str] = None,
                 broker_overrides: Optional[Mapping[int, Mapping[str, PropertyValue]]] = None,
                 start_timeout: float = 60.0, base_dir: Optional[Union[str, os.PathLike]] = None,
                 base_port: int = 0, zookeeper_port: int = 0, host: str = "127.0.0.1",
                 broker_hosts: Optional[Mapping[int, str]] = None,
                 broker_command_prefixes: Optional[Mapping[int, Sequence[str]]] = None) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        if zookeeper is not None and "/" in zookeeper:
            raise ValueError(f"zookeeper is host:port without a chroot (give chroot= instead), got {zookeeper!r}")
        common = merge_overrides(overrides)
        per_broker = {int(i): merge_overrides(o) for i, o in (broker_overrides or {}).items()}
        unknown = sorted(set(per_broker) - set(range(brokers)))
        if unknown:
            raise ValueError(f"broker_overrides for broker ids {unknown}: the brokers are 0..{brokers - 1}")
        for props in (common, *per_broker.values()):
            for key, use in _CLUSTER_RESERVED.items():
                if key in props:
                    raise ValueError(f"{key!r} is set by kafkalite.testing.Cluster; {use}")
        self.chroot = _validate_chroot("/kafkalite-" + secrets.token_hex(4) if chroot is None else chroot)
        self.start_timeout = start_timeout
        self.host = host
        self.base_dir = Path(base_dir).resolve() if base_dir is not None else None
        self.zookeeper_server: Optional["ZooKeeperServer"] = None
        if zookeeper is None:
            from kafkalite.tools.local_zookeeper import ZooKeeperServer as Server  # standard library only
            zk_dir = self.base_dir / "zookeeper" if self.base_dir is not None else None
            self.zookeeper_server = Server(port=zookeeper_port or None, work_dir=zk_dir)
            zookeeper = self.zookeeper_server.connect_string
        self.zookeeper_connect = f"{zookeeper}{self.chroot}"
        self.brokers: dict[int, Broker] = {}
        self._closed = False
        try:
            for broker_id in range(brokers):
                props = {**CLUSTER_TEST_DEFAULTS, **cluster_size_defaults(brokers), **common,
                         **per_broker.get(broker_id, {}),
                         "broker.id": str(broker_id), "zookeeper.connect": self.zookeeper_connect}
                where: dict[str, Any] = {}
                if self.base_dir is not None:
                    where = {"log_dir": self.base_dir / f"broker-{broker_id}",
                             "stderr_path": self.base_dir / f"broker-{broker_id}.log"}
                self.brokers[broker_id] = Broker(props, host=(broker_hosts or {}).get(broker_id, host),
                                                 port=base_port + broker_id if base_port else 0,
                                                 ready_timeout=start_timeout,
                                                 command_prefix=(broker_command_prefixes or {}).get(broker_id, ()),
                                                 **where)
        except BaseException:
            self.close()
            raise
        _live_clusters.add(self)

    # -- addresses ----------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """host:port of every running broker, comma-separated."""
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    def broker(self, broker_id: int) -> Broker:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id} in this cluster (brokers {sorted(self.brokers)})") from None

    def running_broker_ids(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running]

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> "Cluster":
        """Start ZooKeeper (if it is ours and not running) and every broker not running, in
        parallel; return once a controller is elected and every broker's Metadata lists every
        running broker. On failure everything started is stopped and ClusterError raised."""
        if self._closed:
            raise ClusterError("cluster was closed")
        deadline = time.monotonic() + self.start_timeout
        try:
            zk = self.zookeeper_server
            if zk is not None and zk.proc is None:
                from kafkalite.tools.local_zookeeper import ZooKeeperError
                # Started from the main thread, ZooKeeper dies with this process even on SIGKILL
                # (PR_SET_PDEATHSIG); from another thread it would die when that thread ends.
                zk.die_with_parent = threading.current_thread() is threading.main_thread()
                try:
                    zk.start(timeout=self.start_timeout)
                except ZooKeeperError as e:
                    first_line = str(e).splitlines()[0].rstrip(":")
                    raise ClusterError(f"ZooKeeper did not start: {e}",
                                       summary=f"ZooKeeper did not start: {first_line}") from None
            self._start_brokers([i for i, b in self.brokers.items() if not b.running], deadline)
            self.wait_for_brokers(max(0.0, deadline - time.monotonic()))
        except BaseException:
            try:
                self.stop(timeout=5.0)
            except ClusterError:
                pass   # the start failure is the error to report
            raise
        return self

    def _start_brokers(self, broker_ids: list[int], deadline: float) -> None:
        failures: dict[int, BaseException] = {}

        def start(broker_id: int) -> None:
            try:
                self.brokers[broker_id].start(timeout=max(0.1, deadline - time.monotonic()))
            except BaseException as e:  # noqa: BLE001 - reported below, for the first failed broker
                failures[broker_id] = e

        threads = [threading.Thread(target=start, args=(i,), name=f"kafkalite-cluster-start-{i}", daemon=True)
                   for i in broker_ids]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:
            # interrupted (Ctrl-C): let each start finish or fail first, so that the stop() that
            # follows sees every broker process there is
            for t in threads:
                t.join()
            raise
        if failures:
            broker_id = min(failures)
            error = failures[broker_id]
            summary = _one_line(error)
            raise ClusterError(f"broker {broker_id} did not start: {error}", broker_id,
                               f"broker {broker_id} did not start: {summary}") from error

    def stop(self, timeout: float = _CLUSTER_STOP_TIMEOUT) -> None:
        """Stop every running broker with SIGTERM (controlled shutdown), one at a time, the
        controller last so that the others' leaderships move while it is there to move them;
        then the ZooKeeper this cluster started. `start()` brings it all back (same ports, same
        logs). A broker that does not stop within `timeout` is killed."""
        running = self.running_broker_ids()
        controller: Optional[int] = None
        if len(running) > 1:
            try:
                controller = self.controller_id(timeout=min(2.0, timeout))
            except BrokerError:
                controller = None
        order = [i for i in running if i != controller] + ([controller] if controller in running else [])
        errors: list[str] = []
        for broker_id in order:
            try:
                self.brokers[broker_id].stop(timeout)
            except BrokerError as e:
                errors.append(f"broker {broker_id}: {e}")
        if self.zookeeper_server is not None:
            self.zookeeper_server.stop()
        if errors:
            raise ClusterError("; ".join(errors))

    def close(self) -> None:
        """Stop everything (killing what does not stop) and delete the temp dirs."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stop()
        except BrokerError:
            pass
        finally:
            for b in self.brokers.values():
                b.close()
            if self.zookeeper_server is not None:
                self.zookeeper_server.close()   # removes its dir only if it made it (no base_dir)
            _live_clusters.discard(self)

    def __enter__(self) -> "Cluster":
        if self.running_broker_ids() != list(self.brokers):
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __repr__(self) -> str:
        return (f"<kafkalite.testing.Cluster {len(self.brokers)} brokers, running {self.running_broker_ids()}, "
                f"zookeeper.connect={self.zookeeper_connect}>")

    # -- observing ----------------------------------------------------------------------------
    def wait_until(self, condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
        """Poll `condition` every 50 ms until it is true; ClusterError after `timeout` seconds.
        Exceptions from `condition` propagate."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                what = what or getattr(condition, "__name__", "a condition")
                raise ClusterError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.05)

    def metadata(self, broker_id: int, topics: Optional[Sequence[str]] = (), timeout: float = 10.0) -> Any:
        """One Metadata response (kafka-python's class) from broker `broker_id`: `topics=()`
        asks for none, None for all. Its `brokers`, `controller_id` and `topics` are Kafka's."""
        b = self.broker(broker_id)
        return _metadata(b.host, b.port, None if topics is None else list(topics), timeout)

    def controller_id(self, timeout: float = 30.0) -> int:
        """The controller's broker id, as a running broker's Metadata names it (a running
        broker's id: a stale answer naming a dead controller is waited out)."""
        found: list[int] = []

        def known() -> bool:
            running = self.running_broker_ids()
            for broker_id in running:
                try:
                    controller = self.metadata(broker_id, timeout=min(timeout, 5.0)).controller_id
                except (BrokerError, OSError):
                    continue
                if controller in running:
                    found.append(controller)
                    return True
            return False
        self.wait_until(known, timeout, "a controller to be elected")
        return found[-1]

    def wait_for_brokers(self, timeout: float = 30.0) -> None:
        """Until every running broker's Metadata lists exactly the running brokers and names a
        running controller (what start() waits for; useful after a broker's restart or kill)."""
        last: dict[int, str] = {}

        def agreed() -> bool:
            running = self.running_broker_ids()
            if not running:
                raise ClusterError("no broker is running")
            for broker_id in running:
                try:
                    md = self.metadata(broker_id, timeout=min(timeout, 5.0))
                except (BrokerError, OSError) as e:
                    last[broker_id] = str(e)
                    return False
                listed = sorted(b.node_id for b in md.brokers)
                last[broker_id] = f"lists brokers {listed}, controller {md.controller_id}"
                if listed != running or md.controller_id not in running:
                    return False
            return True
        try:
            self.wait_until(agreed, timeout, "the brokers' metadata")
        except ClusterError:
            raise ClusterError("the brokers' metadata did not agree within "
                               f"{timeout:.0f} s: running {self.running_broker_ids()}; "
                               + "; ".join(f"broker {i} {s}" for i, s in sorted(last.items()))) from None

    # -- admin --------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Optional[Mapping[str, PropertyValue]] = None,
                     assignments: Optional[Mapping[int, Sequence[int]]] = None,
                     timeout: float = 30.0) -> None:
        """Create a topic through CreateTopics (to the controller) and wait until every running
        broker's Metadata shows all its partitions with a leader. `assignments` maps partition ->
        replica broker ids (the first is the preferred leader); then `partitions` and
        `replication_factor` are ignored, as Kafka requires. Raises TopicError with Kafka's
        error name (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...)."""
        CreateTopicsRequest = _protocol_classes()[0]
        deadline = time.monotonic() + timeout
        target = self.broker(self.controller_id(timeout))
        T = CreateTopicsRequest.CreatableTopic
        configs = [T.CreatableTopicConfig(name=k, value=property_value(v)) for k, v in (config or {}).items()]
        replica_assignments = [T.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
                               for p, ids in sorted((assignments or {}).items())]
        expected = len(replica_assignments) if assignments else partitions
        with _Connection(target.host, target.port, timeout) as c:
            resp = c.request(CreateTopicsRequest[c.version(CreateTopicsRequest)](
                topics=[T(name=name, num_partitions=-1 if assignments else partitions,
                          replication_factor=-1 if assignments else replication_factor,
                          assignments=replica_assignments, configs=configs)],
                timeout_ms=int(timeout * 1000), validate_only=False))
        t = resp.topics[0]
        if t.error_code != 0:
            err = _error_name(t.error_code)
            msg = getattr(t, "error_message", None)
            raise TopicError(f"CreateTopics {name!r}: {err} ({t.error_code})" + (f": {msg}" if msg else ""),
                             t.error_code, err)
        seen: dict[int, Any] = {}

        def everywhere() -> bool:
            for broker_id in self.running_broker_ids():
                mt = self.metadata(broker_id, [name], timeout=max(1.0, deadline - time.monotonic())).topics[0]
                seen[broker_id] = mt
                if not (mt.error_code == 0 and mt.partitions
                        and (expected == -1 or len(mt.partitions) == expected)
                        and all(p.error_code == 0 and p.leader_id >= 0 for p in mt.partitions)):
                    return False
            return True
        try:
            self.wait_until(everywhere, max(0.0, deadline - time.monotonic()), f"the metadata of topic {name!r}")
        except ClusterError:
            raise ClusterError(f"topic {name!r} created but its metadata not complete on every broker after "
                               f"{timeout} s: {seen}") from None


def _metadata(host: str, port: int, topics: Optional[list[str]], timeout: float) -> Any:
    MetadataRequest = _protocol_classes()[1]
    with _Connection(host, port, timeout) as c:
        version = c.version(MetadataRequest)
        if version < 1:
            raise BrokerError("the broker answers only Metadata v0, which names no controller")
        wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        return c.request(MetadataRequest[version](topics=wanted, allow_auto_topic_creation=False))


def _protocol_classes() -> tuple[Any, Any, Any]:
    """kafka-python's request classes, imported on first use (~80 ms) and without the
    DeprecationWarnings its JSON schema loading emits, which would land in the user's report."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.admin import CreateTopicsRequest
        from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    return CreateTopicsRequest, MetadataRequest, ApiVersionsRequest


class _AddressInUse(Exception):
    pass


def _error_name(code: int) -> str:
    try:
        from kafka.errors import for_code
        name = getattr(for_code(code), "message", None)
        return str(name) if name else f"error {code}"
    except Exception:  # noqa: BLE001 - only a name for a message
        return f"error {code}"


class _Connection:
    """One blocking connection speaking the Kafka protocol with kafka-python's codec: just enough
    for create_topic (ApiVersions, CreateTopics, Metadata)."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise BrokerError(f"cannot connect to the broker at {host}:{port}: {e}") from e
        self._correlation_id = 0
        self._versions: Optional[dict[int, tuple[int, int]]] = None

    def __enter__(self) -> "_Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def request(self, req: Any) -> Any:
        self._correlation_id += 1
        req.with_header(correlation_id=self._correlation_id, client_id="kafkalite.testing")
        response_class = req.header.get_response_class()
        self.sock.sendall(req.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        if correlation_id != self._correlation_id:
            raise BrokerError(f"response to correlation id {correlation_id}, "
                              f"expected {self._correlation_id}")
        return response_class.decode(frame, header=True)

    def version(self, request_class: Any) -> int:
        """The highest version of a request both the broker and kafka-python speak."""
        if self._versions is None:
            ApiVersionsRequest = _protocol_classes()[2]
            resp = self.request(ApiVersionsRequest[0]())
            self._versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        lo, hi = self._versions.get(request_class.API_KEY, (0, -1))
        v = min(hi, request_class.max_version)
        if v < max(lo, request_class.min_version):
            raise BrokerError(f"no common version of {request_class.__name__} (broker {lo}-{hi})")
        return v

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except socket.timeout:
                raise BrokerError(f"no response from the broker within {self.timeout} s") from None
            if not chunk:
                raise BrokerError("the broker closed the connection")
            buf += chunk
        return bytes(buf)


# -- safety nets ------------------------------------------------------------------------------

_live: "weakref.WeakSet[Broker]" = weakref.WeakSet()


_live_clusters: "weakref.WeakSet[Cluster]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Brokers still open when the interpreter exits (a KeyboardInterrupt, a forgotten close())."""
    for b in list(_live):
        try:
            b.close(timeout=2.0)
        except Exception:  # noqa: BLE001 - keep closing the others
            pass


@atexit.register   # registered after _close_all, so it runs first: brokers in order, then ZooKeeper
def _close_all_clusters() -> None:
    for c in list(_live_clusters):
        try:
            c.close()
        except Exception:  # noqa: BLE001 - keep closing the others
            pass


# Seconds the child gives its clean shutdown after its parent died, before it exits regardless.
_ORPHAN_GRACE_S = 10.0

# The child runs the kafkalite package the parent imported, wherever that came from (a source
# checkout on sys.path, an install): `python -c` would otherwise resolve `kafkalite` from the
# child's own cwd and site-packages, which can be another copy. Nothing is added to sys.path.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_CHILD_CODE = """\
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location(
    "kafkalite", os.path.join(sys.argv[1], "__init__.py"), submodule_search_locations=[sys.argv[1]])
module = importlib.util.module_from_spec(spec)
sys.modules["kafkalite"] = module
spec.loader.exec_module(module)
from kafkalite.testing import _child_main
_child_main()
"""


def _child_main() -> None:
    """Entry of the broker child: `python -c ... <package dir> <death-pipe fd> <cleanup dir>
    serve ...`.

    Watches the death pipe in a thread: EOF means the parent process is gone (the parent never
    writes; the kernel closes its end however it dies), so shut down with SIGTERM, as `kafkalite
    serve` does on that signal, and delete the parent's temp dir, which nobody else will.
    A pipe rather than prctl(PR_SET_PDEATHSIG): that signal fires when the parent *thread* exits,
    which would kill a broker started from a worker thread; and it is Linux-only.
    """
    fd, cleanup_dir, argv = int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    orphaned = threading.Event()

    def remove_temp_dir() -> None:
        if cleanup_dir:
            shutil.rmtree(cleanup_dir, ignore_errors=True)

    def watch_parent() -> None:
        try:
            while os.read(fd, 1024):
                pass
        except OSError:
            pass
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(_ORPHAN_GRACE_S)
        remove_temp_dir()
        os._exit(1)

    # Until the broker installs its own handlers, SIGTERM unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    threading.Thread(target=watch_parent, name="kafkalite-parent-watch", daemon=True).start()
    rc = 1
    try:
        from kafkalite.cli import main
        rc = main(argv, exit_after_serve=False)
    finally:
        if orphaned.is_set():
            remove_temp_dir()
    from kafkalite.cli import exit_without_teardown
    exit_without_teardown(rc)
