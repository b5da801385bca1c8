"""A real ZooKeeper server (Debian's `zookeeper` package) for the tests, on a free port.

    with ZooKeeperServer() as zk:
        zk.connect_string   # "127.0.0.1:<port>"

Standalone mode, data and logs in a temp dir of its own, started with the package's jar and
Java directly (no systemd, no /etc/zookeeper/conf), ready when the `ruok` four-letter word
answers `imok`, stopped with SIGTERM (SIGKILL after a grace period) and its dir removed.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class ZooKeeperServer:
    def __init__(self, port: Optional[int] = None, work_dir: Optional[Path] = None,
                 tick_time_ms: int = 500) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="kafkalite-zk-"))
        self.tick_time_ms = tick_time_ms
        self.proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "zookeeper.out"

    def _write_config(self) -> Path:
        data = self.work_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.work_dir / "zoo.cfg"
        # minSessionTimeout = 2 ticks: tests use 1-6 s broker session timeouts, as Kafka's do.
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
            "maxSessionTimeout=60000\n")
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log_path}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n")
        return cfg

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
            raise ZooKeeperError("ZooKeeper needs Debian's `zookeeper` package and Java "
                                 "(scripts/test.sh installs both)")
        cfg = self._write_config()
        command = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
                   "-Dzookeeper.admin.enableServer=false",
                   "-cp", f"{self.work_dir}:{ZOOKEEPER_JAR}", MAIN, str(cfg)]
        with open(self.work_dir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ZooKeeperError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.logs()}")
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

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except ProcessLookupError:
                pass

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
