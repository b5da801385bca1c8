"""Run a real kafkalite broker process for tests: start, stop (SIGTERM), kill (SIGKILL), restart.

The broker prints one ready line on stdout naming the bound address; that is how a test learns a
port-0 listener's real port.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

READY_RE = re.compile(r"kafkalite ready: broker (\d+) listening on PLAINTEXT://(\S+):(\d+)")


class BrokerProcess:
    """A `python -m kafkalite serve` subprocess on 127.0.0.1 with port 0 and its own log dir."""

    def __init__(self, log_dir: Optional[Path] = None, overrides: Optional[dict[str, str]] = None,
                 port: int = 0) -> None:
        self._tmp = None
        if log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kafkalite-test-")
            log_dir = Path(self._tmp.name) / "logs"
        self.log_dir = Path(log_dir)
        self.overrides = dict(overrides or {})
        self.requested_port = port
        self.port: Optional[int] = None
        self.proc: Optional[subprocess.Popen[str]] = None
        self.stderr_lines: list[str] = []
        self.stdout_lines: list[str] = []

    @property
    def bootstrap_servers(self) -> str:
        assert self.port is not None, "broker not started"
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        port = self.port if self.port is not None else self.requested_port
        args = [sys.executable, "-m", "kafkalite", "serve",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override", f"log.dirs={self.log_dir}"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        return args

    def environment(self) -> Optional[dict[str, str]]:
        """The broker's environment: this process's (None) unless a subclass says otherwise."""
        return None

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, start_new_session=True, env=self.environment())
        ready = threading.Event()

        def read_stdout(p: subprocess.Popen[str]) -> None:
            assert p.stdout is not None
            for line in p.stdout:
                self.stdout_lines.append(line.rstrip("\n"))
                m = READY_RE.search(line)
                if m and not ready.is_set():
                    self.port = int(m.group(3))
                    ready.set()

        def read_stderr(p: subprocess.Popen[str]) -> None:
            assert p.stderr is not None
            for line in p.stderr:
                self.stderr_lines.append(line.rstrip("\n"))

        threading.Thread(target=read_stdout, args=(self.proc,), daemon=True).start()
        threading.Thread(target=read_stderr, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.01):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("broker did not become ready:\n" + "\n".join(self.stderr_lines[-40:]))
        return self

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("broker did not stop on SIGTERM")
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self, timeout: float = 20.0) -> "BrokerProcess":
        """Stop cleanly and start again on the same log dir and port."""
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        self.kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
