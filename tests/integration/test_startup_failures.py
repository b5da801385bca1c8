"""`kafkalite serve` start-up failures an operator can cause: each ends with exactly one line on
stderr naming the cause (Kafka's wording where Kafka has one), a non-zero exit code and no
traceback; the traceback is in the log at DEBUG only. Also: a log dir holding a directory that is
not a partition's is refused untouched, as Kafka 3.9 refuses it."""
from __future__ import annotations

import hashlib
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalite.testing import Broker
from tests.support.zookeeper import free_port

LOCK_HELD = ("kafkalite: cannot start: Failed to acquire lock on file .lock in {dir}. A Kafka instance in "
             "another process or thread is using this directory.")


def _serve_command(*args: str, log_level: str = "WARN") -> list[str]:
    return [sys.executable, "-m", "kafkalite", "serve", "--log-level", log_level,
            "--override", "listeners=PLAINTEXT://127.0.0.1:0", *args]


def _serve(*args: str, log_level: str = "WARN", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_serve_command(*args, log_level=log_level), capture_output=True, text=True,
                          timeout=timeout)


def _one_line(r: subprocess.CompletedProcess[str], code: int) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == code, r.stderr
    assert r.stdout == ""
    # The event-loop monitor's warning can come before the failure on a loaded machine (a callback
    # 50 ms late while ZooKeeper is awaited): a log line, not part of the failure's report.
    lines = [line for line in r.stderr.splitlines()
             if " WARNING kafkalite.server.event_loop_monitor: event loop blocked: " not in line]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _tree_digest(root: Path) -> dict[str, str]:
    """Every file under root (relative path -> sha1 of its bytes) and every directory."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(Path(dirpath) / name, root) + "/"] = "dir"
        for name in filenames:
            p = Path(dirpath) / name
            out[os.path.relpath(p, root)] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def _settled_digest(root: Path) -> dict[str, str]:
    """The digest once two reads 0.5 s apart agree (a new topic's state settles)."""
    last = _tree_digest(root)
    for _ in range(20):
        time.sleep(0.5)
        now = _tree_digest(root)
        if now == last:
            return now
        last = now
    raise AssertionError("the log dir kept changing")


def test_log_dir_locked_by_another_broker_is_one_line_and_nothing_is_touched(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    quiet = {"replica.high.watermark.checkpoint.interval.ms": 3_600_000,   # the first broker writes
             "log.flush.offset.checkpoint.interval.ms": 3_600_000,          # nothing meanwhile
             "log.flush.start.offset.checkpoint.interval.ms": 3_600_000}
    with Broker(quiet, log_dir=log_dir) as first:
        first.create_topic("held", 2)
        before = _settled_digest(log_dir)
        r = _serve("--override", f"log.dirs={log_dir}")
        assert _one_line(r, 1) == LOCK_HELD.format(dir=log_dir)
        # the second broker wrote nothing there: no checkpoint, no clean-shutdown marker, no metadata
        assert _tree_digest(log_dir) == before
        # at the default level the cause is still the last line, with no traceback
        r = _serve("--override", f"log.dirs={log_dir}", log_level="INFO")
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert r.stderr.splitlines()[-1] == LOCK_HELD.format(dir=log_dir)
        # at DEBUG the traceback is in the log, and the cause still ends it
        r = _serve("--override", f"log.dirs={log_dir}", log_level="DEBUG")
        assert r.returncode == 1
        assert "Fatal error during KafkaServer startup. Prepare to shutdown" in r.stderr
        assert "Traceback (most recent call last)" in r.stderr
        assert r.stderr.splitlines()[-1] == LOCK_HELD.format(dir=log_dir)
        assert first.running


def test_log_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "data"
    f.write_text("not a directory")
    r = _serve("--override", f"log.dirs={f}")
    assert _one_line(r, 1) == f"kafkalite: cannot start: {f} is not a readable log directory."
    r = _serve("--override", f"log.dirs={f / 'logs'}")
    assert _one_line(r, 1) == f"kafkalite: cannot start: Failed to create data directory {f / 'logs'}: Not a directory"


def _in_own_mount(tmp_path: Path, mount: str, prepare: str, *serve_args: str) -> subprocess.CompletedProcess[str]:
    """`kafkalite serve` in a mount namespace of its own (unshare: root is not needed) where
    `mount` is mounted on tmp_path/mnt and `prepare` ran."""
    target = tmp_path / "mnt"
    target.mkdir()
    script = (f"mount {mount} {shlex.quote(str(target))} && {prepare} exec "
              + " ".join(shlex.quote(a) for a in _serve_command(*serve_args)))
    # root (CI) needs only a mount namespace; otherwise a user namespace makes us root in it
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    r = subprocess.run(["unshare", *userns, "--mount", "true"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.fail(f"cannot make a mount namespace for this test (unshare {' '.join(userns)} --mount: "
                    f"{r.stderr.strip()}): run it as root or enable user namespaces")
    return subprocess.run(["unshare", *userns, "--mount", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_read_only_log_dir(tmp_path: Path) -> None:
    target = tmp_path / "mnt"
    r = _in_own_mount(tmp_path, "-t tmpfs -o size=1m,ro tmpfs", "", "--override", f"log.dirs={target}")
    assert _one_line(r, 1) == f"kafkalite: cannot start: {target} is not a writable log directory."


def test_full_log_dir(tmp_path: Path) -> None:
    target = tmp_path / "mnt"
    fill = f"(dd if=/dev/zero of={shlex.quote(str(target / 'fill'))} bs=4096 2>/dev/null; true) &&"
    r = _in_own_mount(tmp_path, "-t tmpfs -o size=64k tmpfs", fill, "--override", f"log.dirs={target}")
    assert _one_line(r, 1) == (f"kafkalite: cannot start: Cannot write {target / 'kafkalite-zk.json'}: "
                               f"[Errno 28] No space left on device")


def test_listener_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _serve("--override", f"log.dirs={tmp_path}", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}")
        expected = f"kafkalite: cannot start: Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
        assert _one_line(r, 1) == expected
        # at INFO the logs were loaded and the half-started broker shut down: the cause is still last
        r = _serve("--override", f"log.dirs={tmp_path}", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   log_level="INFO")
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert "Loaded 0 logs in " in r.stderr and r.stderr.splitlines()[-1] == expected


def test_listener_host_that_does_not_resolve(tmp_path: Path) -> None:
    r = _serve("--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT://no-such-host.invalid:0")
    line = _one_line(r, 1)
    # the resolver's own words follow (offline: "Temporary failure in name resolution")
    assert line.startswith("kafkalite: cannot start: Socket server failed to bind to no-such-host.invalid:0: ")
    assert line.endswith(".") and len(line) > len("kafkalite: cannot start: Socket server failed to bind to "
                                                  "no-such-host.invalid:0: .")


def test_listener_syntax_is_a_config_error(tmp_path: Path) -> None:
    r = _serve("--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT//127.0.0.1:9092")
    assert _one_line(r, 2) == ("kafkalite: invalid value 'PLAINTEXT//127.0.0.1:9092' for configuration "
                               "'listeners': listener 'PLAINTEXT//127.0.0.1:9092' is not of the form "
                               "NAME://host:port")


def test_unreachable_zookeeper_honours_the_connection_timeout(tmp_path: Path) -> None:
    port = free_port()   # nothing listens there
    started = time.monotonic()
    r = _serve("--override", f"log.dirs={tmp_path}", "--override", f"zookeeper.connect=127.0.0.1:{port}",
               "--override", "zookeeper.connection.timeout.ms=1500")
    elapsed = time.monotonic() - started
    assert _one_line(r, 1) == (f"kafkalite: cannot start: Timed out waiting for connection to ZooKeeper at "
                               f"127.0.0.1:{port} after 1500 ms")
    assert elapsed < 20, elapsed    # generous: the default timeout (18 s) was not waited for on top


def test_invalid_log_level_is_refused_in_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkalite", "serve", "--log-level", "LOUD",
                        "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert _one_line(r, 2) == ("kafkalite serve: error: argument --log-level: invalid choice: 'LOUD' "
                               "(choose from DEBUG, INFO, WARN, WARNING, ERROR, FATAL, CRITICAL)")
    assert list(tmp_path.iterdir()) == []   # refused before anything was created


def test_directory_that_is_not_a_partition_is_refused_untouched(tmp_path: Path) -> None:
    """Kafka 3.9's LogManager.loadLogs parses every directory name in a log dir
    (LocalLog.parseTopicPartitionName) and stops the broker at one that is not
    `topic-partition` (or `topic-partition.id-delete|-future|-stray`): checked against Kafka
    3.9.1, which exits with "Found directory .../notapartition, 'notapartition' is not in the
    form of topic-partition ...". Files are ignored."""
    log_dir = tmp_path / "logs"
    with Broker(log_dir=log_dir) as b:
        b.create_topic("kept", 1)
    for name in ("notapartition", "lost+found", ".snapshot", "backup-delete"):
        stray = log_dir / name
        (stray / "inner").mkdir(parents=True)
        (stray / "00000000000000000000.log").write_bytes(b"\x00" * 100 + b"not a record batch" * 20)
        (stray / "inner" / "note.txt").write_text("keep me")
        before = _tree_digest(log_dir)
        r = _serve("--override", f"log.dirs={log_dir}")
        assert _one_line(r, 1) == (
            f"kafkalite: cannot start: Found directory {stray}, '{name}' is not in the form of topic-partition "
            f"or topic-partition.uniqueId-delete (if marked for deletion). Kafka's log directories (and "
            f"children) should only contain Kafka topic data.")
        assert _tree_digest(log_dir) == before
        assert (log_dir / ".kafka_cleanshutdown").exists()   # the next start still knows it was clean
        os.rename(stray, tmp_path / name)   # moved out by the operator
    (log_dir / "README.txt").write_text("files are not partitions: ignored, as in Kafka")
    with Broker(log_dir=log_dir) as b:
        assert b.running
    assert (log_dir / "README.txt").read_text() == "files are not partitions: ignored, as in Kafka"


def test_partition_named_directory_is_loaded_as_kafka_loads_it(tmp_path: Path) -> None:
    """`ghost-0` IS a partition directory name: Kafka 3.9 in ZooKeeper mode loads it as a log
    (no stray detection outside KRaft) and leaves it to the controller; so does kafkalite, and
    files that are not segments stay as they were."""
    log_dir = tmp_path / "logs"
    ghost = log_dir / "ghost-0"
    ghost.mkdir(parents=True)
    (ghost / "notes.txt").write_text("operator's file")
    with Broker(log_dir=log_dir, stderr_path=tmp_path / "broker.stderr") as b:
        assert b.running
    assert (ghost / "notes.txt").read_text() == "operator's file"
    assert (ghost / "00000000000000000000.log").stat().st_size == 0
    assert ("Completed load of Log(dir=" + str(ghost) + ", topic=ghost, partition=0, recoveryPoint=0) with 1 "
            "segments, local-log-start-offset 0 and log-end-offset 0 in ") in (tmp_path / "broker.stderr").read_text()
