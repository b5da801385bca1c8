"""`kafkalite zookeeper`: a local standalone ZooKeeper for a kafkalite cluster, in the foreground.

    kafkalite zookeeper [--dir DIR] [--port PORT] [--tick-time-ms MS] [--zookeeper-jar JAR]

Runs Debian's ZooKeeper (`apt-get install zookeeper`: /usr/share/java/zookeeper.jar and a Java
runtime) directly with Java, no systemd and no /etc/zookeeper/conf: its config, logs and data live
in DIR (default ./zookeeper-data; data in DIR/data, log in DIR/zookeeper.out), which is kept, so
the next run finds the cluster's metadata again. When ZooKeeper answers `ruok` with `imok` it
prints one line,

    kafkalite zookeeper ready: 127.0.0.1:2181 (data in /abs/DIR)

and runs until SIGTERM or SIGINT (Ctrl-C), then stops ZooKeeper and exits 0. Port 0 picks a free
port. Failures are one line on stderr and exit code 1.

The launcher (`ZooKeeperServer`) is also what the tests use (tests/support/zookeeper.py). Only
the standard library is imported: the `kafkalite` parser imports every tool module.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Callable, Optional

from kafkalite.tools.common import add_version_arg, port_number, positive_int   # standard library at import

TOOL = "zookeeper"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
JAR_ENV = "KAFKALITE_ZOOKEEPER_JAR"   # another jar (tests point it at a missing one)
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = "install it with: apt-get install zookeeper"
# Debian's zookeeper.jar names its dependencies in its manifest but no slf4j binding: without one
# ZooKeeper logs nothing. These make it log to DIR/zookeeper.out when they are installed.
LOG_BINDING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
DEFAULT_DIR = "zookeeper-data"
DEFAULT_PORT = 2181
DEFAULT_TICK_TIME_MS = 2000   # ZooKeeper's own default; sessions may be 2..20 ticks


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be started; the message is one line unless it carries the log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0,
                     expect: Optional[str] = None) -> str:
    """The answer to a four-letter word: read until the server closes, or until `expect` has
    arrived (a ZooKeeper that is still starting answers `ruok` at once but closes the
    connection only seconds later)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        received = b""
        while expect is None or expect.encode() not in received:
            data = s.recv(4096)
            if not data:
                break
            received += data
    return received.decode(errors="replace")


def zookeeper_jar() -> Path:
    return Path(os.environ.get(JAR_ENV) or ZOOKEEPER_JAR)


def check_installed(jar: Path) -> str:
    """The java executable; ZooKeeperError with a one-line install hint when Java or the jar
    is missing."""
    if not jar.is_file():
        raise ZooKeeperError(f"ZooKeeper is not installed ({jar} not found); {INSTALL_HINT}")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(f"Java is not installed (no `java` on PATH); {INSTALL_HINT} (it brings a Java runtime)")
    return java


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux: SIGTERM to ZooKeeper if the `kafkalite zookeeper` process dies without stopping it
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ZooKeeperServer:
    """A standalone ZooKeeper on 127.0.0.1:`port` (None or 0: a free port), configured in
    `work_dir` (default: a temp dir of its own, removed by close()); data in work_dir/data.

        with ZooKeeperServer() as zk:
            zk.connect_string   # "127.0.0.1:<port>"
    """

    def __init__(self, port: Optional[int] = None, work_dir: Optional[Path] = None,
                 tick_time_ms: int = 500, jar: Optional[Path] = None,
                 die_with_parent: bool = False) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="kafkalite-zk-")).resolve()
        self.tick_time_ms = tick_time_ms
        self.jar = jar or zookeeper_jar()
        self.die_with_parent = die_with_parent
        self.proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "zookeeper.out"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.work_dir / "zoo.cfg"
        # minSessionTimeout = 2 ticks: tests use 1-6 s broker session timeouts, as Kafka's do.
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
            f"maxSessionTimeout={max(60000, 20 * self.tick_time_ms)}\n")
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log_path}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n")
        return cfg

    def start(self, timeout: float = 30.0, cancelled: Optional[Callable[[], bool]] = None) -> "ZooKeeperServer":
        """Start and wait until ZooKeeper answers `ruok` with `imok` in standalone mode.
        `cancelled` is polled while waiting (a signal arrived): the server is stopped and
        ZooKeeperError raised."""
        java = check_installed(self.jar)
        if port_in_use(self.host, self.port):
            # another server there would answer our readiness check
            raise ZooKeeperError(f"port {self.port} on {self.host} is already in use")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        cfg = self._write_config()
        classpath = [str(self.work_dir), str(self.jar)] + [str(j) for j in LOG_BINDING_JARS if j.is_file()]
        command = [java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
                   "-Dzookeeper.admin.enableServer=false",
                   "-cp", ":".join(classpath), MAIN, str(cfg)]
        with open(self.work_dir / "stdout.log", "wb") as out:
            # own session: a Ctrl-C in the terminal reaches us, and we stop ZooKeeper in order
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=_die_with_parent if self.die_with_parent else None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cancelled is not None and cancelled():
                self.stop()
                raise ZooKeeperError("stopped before ZooKeeper was ready")
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise ZooKeeperError(f"ZooKeeper exited with {code} while starting:\n{self.logs()}")
            try:
                if four_letter_word(self.host, self.port, "ruok", 1.0, expect="imok") == "imok" and \
                        "Mode: standalone" in four_letter_word(self.host, self.port, "srvr", 1.0):
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper not ready after {timeout} s:\n{self.logs()}")

    def logs(self, tail: int = 8000) -> str:
        parts = []
        for path in (self.work_dir / "stdout.log", self.log_path):
            if path.exists():
                parts.append(path.read_text(errors="replace")[-tail:])
        return "\n".join(parts)

    def pause(self) -> None:
        """SIGSTOP: ZooKeeper briefly unavailable, sessions kept (for brokers' outage tests)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """SIGTERM (SIGKILL after `timeout`); the exit code, None if it was not running."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except ProcessLookupError:
                pass
        return proc.poll()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------



def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="run a local ZooKeeper for a kafkalite cluster (foreground)",
                       description="Run Debian's ZooKeeper standalone on 127.0.0.1 in the foreground, "
                                   "its config, logs and data in --dir; stop with SIGTERM or Ctrl-C.")
    p.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                   help=f"directory for config, logs and data, kept after exit (default ./{DEFAULT_DIR})")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT,
                   help=f"client port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free port)")
    p.add_argument("--tick-time-ms", type=positive_int, default=DEFAULT_TICK_TIME_MS, metavar="MS",
                   help="ZooKeeper's tickTime; the shortest session timeout is 2 ticks "
                        f"(default {DEFAULT_TICK_TIME_MS})")
    p.add_argument("--zookeeper-jar", default=None, metavar="JAR",
                   help=f"ZooKeeper's jar (default ${JAR_ENV} or {ZOOKEEPER_JAR})")
    p.add_argument("--start-timeout-s", type=positive_int, default=60, metavar="S",
                   help="how long to wait for ZooKeeper to answer (default 60)")
    add_version_arg(p)
    p.set_defaults(func=run, parser=p)


def _fail(message: str) -> int:
    sys.stdout.flush()
    print(f"kafkalite {TOOL}: {message}", file=sys.stderr, flush=True)
    return 1


def lock_dir(work_dir: Path) -> Optional[int]:
    """An exclusive lock on DIR/.lock (two ZooKeepers on one data dir, or two local clusters on one
    set of log dirs, would corrupt them). The fd, or None when another process holds it."""
    import fcntl

    fd = os.open(work_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def run(args: argparse.Namespace) -> int:
    stop_signal: list[int] = []

    def on_signal(signum: int, _frame: Optional[FrameType]) -> None:
        stop_signal.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run(args, stop_signal)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, stop_signal: list[int]) -> int:
    jar = Path(args.zookeeper_jar) if args.zookeeper_jar else zookeeper_jar()
    try:
        check_installed(jar)
    except ZooKeeperError as e:
        return _fail(str(e))
    work_dir = Path(args.dir).expanduser().resolve()
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _fail(f"cannot create {work_dir}: {e.strerror}")
    lock = lock_dir(work_dir)
    if lock is None:
        return _fail(f"{work_dir} is in use by another kafkalite zookeeper")
    server = ZooKeeperServer(port=args.port or None, work_dir=work_dir, tick_time_ms=args.tick_time_ms,
                             jar=jar, die_with_parent=True)
    try:
        try:
            server.start(timeout=float(args.start_timeout_s), cancelled=lambda: bool(stop_signal))
        except ZooKeeperError as e:
            if stop_signal:
                return 0
            first_line = str(e).splitlines()[0]
            return _fail(f"{first_line} (log: {server.log_path})" if "\n" in str(e) else first_line)
        print(f"kafkalite zookeeper ready: {server.connect_string} (data in {work_dir})", flush=True)
        assert server.proc is not None
        while not stop_signal:
            try:
                code = server.proc.wait(0.2)
            except subprocess.TimeoutExpired:
                continue
            server.proc = None
            return _fail(f"ZooKeeper exited unexpectedly with {code} (log: {server.log_path})")
        return 0
    finally:
        server.stop()
        os.close(lock)
