"""`kafkalite zookeeper` as a process: the ready line, a real ZooKeeper behind it (kazoo), clean
stop on SIGTERM and SIGINT with exit code 0, the data dir kept across runs, no ZooKeeper left
behind when the command is killed, and one-line errors (missing jar, missing Java, port in use,
dir in use) with exit code 1."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.child_lines import read_line

# Debian's zookeeper package is installed by scripts/test.sh: a missing jar fails these tests
# (ZooKeeperError naming the package) rather than skipping them.

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"^kafkalite zookeeper ready: 127\.0\.0\.1:(\d+) \(data in (.+)\)\n$")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafkalite", "zookeeper", *args]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KAFKALITE_ZOOKEEPER_JAR", None)
    # the package from this checkout, whatever the working directory
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    return read_line(proc.stdout, timeout, "`kafkalite zookeeper`")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _start(processes: list[subprocess.Popen[str]], *args: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    processes.append(proc)
    line = _read_line(proc, 90)
    m = READY.match(line)
    assert m, f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    return proc, int(m.group(1))


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_foreground_zookeeper_serves_stops_cleanly_and_keeps_its_data(
        tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    from kazoo.client import KazooClient

    data_dir = tmp_path / "zk"
    proc, port = _start(processes, "--dir", str(data_dir), "--port", "0")
    assert port != 2181 and _port_open(port)

    zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
    zk.start(timeout=20)
    try:
        zk.create("/kafkalite-cli-test/child", b"kept", makepath=True)
        assert zk.get("/kafkalite-cli-test/child")[0] == b"kept"
    finally:
        zk.stop()
        zk.close()

    # a second instance on the same dir is refused before it starts anything
    second = subprocess.run(_command("--dir", str(data_dir), "--port", "0"), capture_output=True, text=True,
                            timeout=30, env=_env())
    assert (second.returncode, second.stdout) == (1, "")
    assert second.stderr == f"kafkalite zookeeper: {data_dir.resolve()} is in use by another kafkalite zookeeper\n"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read() == "" and proc.stderr.read() == ""
    assert not _port_open(port)
    snapshots = list((data_dir / "data" / "version-2").iterdir())
    assert snapshots, "ZooKeeper's data dir is kept"

    # the next run finds the znode again; SIGINT (Ctrl-C) stops it as cleanly
    proc2, port2 = _start(processes, "--dir", str(data_dir), "--port", "0")
    zk = KazooClient(hosts=f"127.0.0.1:{port2}", timeout=10)
    zk.start(timeout=20)
    try:
        assert zk.get("/kafkalite-cli-test/child")[0] == b"kept"
    finally:
        zk.stop()
        zk.close()
    proc2.send_signal(signal.SIGINT)
    assert proc2.wait(30) == 0
    assert proc2.stderr is not None and proc2.stderr.read() == ""
    assert not _port_open(port2)


def test_ready_line_shows_the_absolute_dir(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    proc = subprocess.Popen(_command("--dir", "relative-zk", "--port", "0"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
    processes.append(proc)
    m = READY.match(_read_line(proc, 90))
    assert m and m.group(2) == str((tmp_path / "relative-zk").resolve())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_zookeeper_goes_when_the_command_is_killed(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    # SIGKILL leaves no chance to stop ZooKeeper: the parent-death signal does it
    proc, port = _start(processes, "--dir", str(tmp_path / "zk"), "--port", "0")
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 20
    while _port_open(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _port_open(port)


def _one_line_failure(args: list[str], env: dict[str, str]) -> str:
    started = time.monotonic()
    r = subprocess.run(_command(*args), capture_output=True, text=True, timeout=60, env=env)
    assert (r.returncode, r.stdout) == (1, ""), r
    assert time.monotonic() - started < 30
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_missing_jar_is_one_line_with_the_install_hint(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "zookeeper.jar"
    expected = (f"kafkalite zookeeper: ZooKeeper is not installed ({missing} not found); "
                "install it with: apt-get install zookeeper\n")
    assert _one_line_failure(["--dir", str(tmp_path / "zk")], _env(KAFKALITE_ZOOKEEPER_JAR=str(missing))) == expected
    assert _one_line_failure(["--dir", str(tmp_path / "zk"), "--zookeeper-jar", str(missing)], _env()) == expected
    assert not (tmp_path / "zk").exists()


def test_missing_java_is_one_line_with_the_install_hint(tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    assert _one_line_failure(["--dir", str(tmp_path / "zk")], _env(PATH=str(empty_bin))) == (
        "kafkalite zookeeper: Java is not installed (no `java` on PATH); install it with: "
        "apt-get install zookeeper (it brings a Java runtime)\n")


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert _one_line_failure(["--dir", str(tmp_path / "zk"), "--port", str(port)], _env()) == (
            f"kafkalite zookeeper: port {port} on 127.0.0.1 is already in use\n")


def test_bad_port_is_a_usage_error(tmp_path: Path) -> None:
    r = subprocess.run(_command("--dir", str(tmp_path), "--port", "70000"), capture_output=True, text=True,
                       timeout=30, env=_env())
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1].endswith("argument --port: port must be 0..65535, got 70000")
