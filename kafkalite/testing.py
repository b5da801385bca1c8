"""Throw-away kafkalite brokers for test suites.

    with kafkalite.testing.Broker(num_partitions=3) as broker:
        broker.create_topic("orders", partitions=3)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

Each `Broker` is a `python -m kafkalite serve`-equivalent child process on 127.0.0.1 with a port
the OS picks and a log dir in a temporary directory of its own. A separate process, so test code
that blocks (a synchronous client, a hung event loop, the GIL) cannot stall the broker.

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
from typing import Any, Mapping, Optional, Union

__all__ = ["Broker", "BrokerError", "TopicError", "property_name", "property_value",
           "TEST_DEFAULTS"]

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
    `log_dir=None` puts the log in this broker's temp dir, deleted by `close()`.
    """

    def __init__(self, overrides: Optional[Mapping[str, PropertyValue]] = None, *,
                 port: int = 0, host: str = "127.0.0.1",
                 log_dir: Optional[Union[str, os.PathLike]] = None,
                 ready_timeout: float = 30.0, **kwargs: PropertyValue) -> None:
        self.overrides: dict[str, str] = {**TEST_DEFAULTS, **merge_overrides(overrides, **kwargs)}
        self.host = host
        self.ready_timeout = ready_timeout
        # The temp dir holds the broker's stderr and, unless log_dir is given, its log dir.
        self._tmp: Optional[str] = tempfile.mkdtemp(prefix="kafkalite-test-")
        self._owns_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir is not None else Path(self._tmp) / "logs"
        self.stderr_path = Path(self._tmp) / "broker.stderr"
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
        cmd = [sys.executable, "-c", _CHILD_CODE, _PACKAGE_DIR, str(r), cleanup, *self.command()]
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


@atexit.register
def _close_all() -> None:
    """Brokers still open when the interpreter exits (a KeyboardInterrupt, a forgotten close())."""
    for b in list(_live):
        try:
            b.close(timeout=2.0)
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
        rc = main(argv)
    finally:
        if orphaned.is_set():
            remove_temp_dir()
    sys.exit(rc)
