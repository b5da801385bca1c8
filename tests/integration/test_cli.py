"""`kafkalite serve` as a process: config errors, warnings, the ready line, port 0, clean shutdown."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, create_topic, wait_for_topic


def _serve(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("key,value", [
    ("log.segment.bytes", "abc"),
    ("log.segment.bytes", "10"),
    ("num.partitions", "0"),
    ("listeners", "PLAINTEXT://127.0.0.1:99999"),
    ("log.message.timestamp.type", "WallClock"),
    ("auto.create.topics.enable", "yes"),
])
def test_invalid_value_stops_startup_with_one_line_naming_the_key(tmp_path: Path, key: str, value: str) -> None:
    r = _serve("--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"{key}={value}")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"'{key}'" in lines[0] and value in lines[0]


def test_override_without_equals_is_an_error(tmp_path: Path) -> None:
    r = _serve("--override", "log.dirs")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "log.dirs" in r.stderr


def test_missing_config_file_is_one_clear_line(tmp_path: Path) -> None:
    r = _serve("--config", str(tmp_path / "nope.properties"))
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("kafkalite: cannot read config file")
    assert str(tmp_path / "nope.properties") in line and "No such file or directory" in line


def test_config_file_and_unknown_key_warning(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'logs'}\n"
                     "num.partitions=4\nfoo.bar.baz=1\n")
    proc = subprocess.Popen([sys.executable, "-m", "kafkalite", "serve", "--config", str(props)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline()
        assert ready.startswith("kafkalite ready: broker 0 listening on PLAINTEXT://127.0.0.1:")
        port = int(ready.split("127.0.0.1:")[1].split()[0])
        assert port > 0
        with RawClient(f"127.0.0.1:{port}") as c:
            md = c.metadata(["auto-created"], allow_auto_topic_creation=True)
            assert md.topics[0].error_code in (0, 5)
            # created by the controller a moment later, as in Kafka
            wait_for_topic(c, "auto-created", 4)         # num.partitions from the file
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "unknown config key 'foo.bar.baz' ignored" in err


def test_sigterm_and_sigint_shut_down_cleanly(tmp_path: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        b = BrokerProcess(log_dir=tmp_path / "logs")
        b.start()
        name = "clean-" + sig.name.lower()
        create_topic(b.bootstrap_servers, name, 1)
        with RawClient(b.bootstrap_servers) as c:
            r = c.produce(name, 0, build_batch([Rec(b"k", b"v")] * 3), version=12)
            assert r.error_code == 0
        assert b.proc is not None
        b.proc.send_signal(sig)
        assert b.proc.wait(20) == 0
        b.proc = None
        # the process ends without the interpreter's teardown (cli.exit_without_teardown):
        # what it logged last still reached the pipe
        deadline = time.monotonic() + 10
        while not (b.stderr_lines and b.stderr_lines[-1].endswith("INFO kafkalite: shut down cleanly")) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.stderr_lines[-1].endswith("INFO kafkalite: shut down cleanly")
        logs = tmp_path / "logs"
        assert (logs / ".kafka_cleanshutdown").exists()
        rp = (logs / "recovery-point-offset-checkpoint").read_text().splitlines()
        assert rp[0] == "0" and f"{name} 0 3" in rp[2:]
        assert (logs / "log-start-offset-checkpoint").exists()
        # restart on the same dir: data intact, marker consumed
        b.start()
        assert not (logs / ".kafka_cleanshutdown").exists()
        with RawClient(b.bootstrap_servers) as c:
            assert c.list_offset(name, 0, -1).offset == 3
        b.close()



_GC_PROBE = """
import gc, os, signal, sys, threading, time
from kafkalite.cli import main

def probe():
    deadline = time.monotonic() + 60
    while gc.isenabled() and time.monotonic() < deadline:   # `serve` turns it off first
        time.sleep(0.0005)
    while not gc.isenabled() and time.monotonic() < deadline:   # off for the whole start-up
        time.sleep(0.001)
    frozen = gc.get_freeze_count()
    time.sleep(0.2)     # the ready line is printed right after the GC is back on
    tools = sorted(m for m in sys.modules if m.startswith("kafkalite.tools.") and m != "kafkalite.tools.common")
    print(f"PROBE enabled={gc.isenabled()} frozen={frozen} tools={tools}", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

assert gc.isenabled()
threading.Thread(target=probe, daemon=True).start()
sys.exit(main(["serve", "--override", "log.dirs=" + sys.argv[1],
               "--override", "listeners=PLAINTEXT://127.0.0.1:0"]))
"""


def test_serve_collects_garbage_again_once_ready(tmp_path: Path) -> None:
    """The cyclic GC is off during the start-up and on again when the broker is ready, with
    what the start-up built frozen (moved out of the collector's generations); and `serve`
    never imports the client tools' modules (test_every_sub_command_builds_its_parser_and_prints_its_usage
    covers the other command lines)."""
    r = subprocess.run([sys.executable, "-c", _GC_PROBE, str(tmp_path / "logs")],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("kafkalite ready: broker 0 listening on PLAINTEXT://127.0.0.1:"), r.stdout
    probe = re.fullmatch(r"PROBE enabled=True frozen=(\d+) tools=\[\]", lines[1])
    assert probe is not None, r.stdout
    # modules, classes and the broker's components: far more than an empty heap's few
    assert int(probe.group(1)) > 50_000
    assert "shut down cleanly" in r.stderr
def test_in_flight_long_poll_is_answered_on_sigterm(tmp_path: Path) -> None:
    """A fetch waiting in purgatory (max_wait 30 s) is answered at shutdown, not dropped."""
    import time

    from tests.integration.test_fetch_long_poll_and_sessions import _fetch_req

    b = BrokerProcess(log_dir=tmp_path / "logs").start()
    try:
        create_topic(b.bootstrap_servers, "waiting", 1)
        with RawClient(b.bootstrap_servers) as c:
            assert c.produce("waiting", 0, build_batch([Rec(b"k", b"v")]), version=12).error_code == 0
            corr = c.send(_fetch_req({"waiting": [(0, 1)]}, 0, -1, max_wait_ms=30_000, min_bytes=1))
            time.sleep(0.3)          # the fetch is parked in the purgatory
            assert b.proc is not None
            start = time.monotonic()
            b.proc.send_signal(signal.SIGTERM)
            got, resp = c.recv(timeout=10)
            assert got == corr and time.monotonic() - start < 10
            p = resp.responses[0].partitions[0]
            assert p.error_code == 0 and p.high_watermark == 1 and not p.records
            assert b.proc.wait(20) == 0
            b.proc = None
    finally:
        b.close()


def test_every_sub_command_builds_its_parser_and_prints_its_usage() -> None:
    # the sub-parsers are built together: an option added twice to one of them (a conflicting
    # option string) would make every command, `serve` included, fail with a traceback
    from kafkalite.tools import TOOL_MODULES

    top = subprocess.run([sys.executable, "-m", "kafkalite", "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0 and top.stderr == ""
    commands = re.search(r"\{([a-z,-]+)\}", top.stdout).group(1).split(",")
    assert len(commands) == len(TOOL_MODULES) + 1 and commands[0] == "serve"
    for command in commands:
        r = subprocess.run([sys.executable, "-m", "kafkalite", command, "--help"], capture_output=True, text=True,
                           timeout=60)
        assert (r.returncode, r.stderr) == (0, ""), command
        assert r.stdout.startswith(f"usage: kafkalite {command} "), command



_MODULES_PROBE = """
import json, sys, threading
from kafkalite.cli import main

def dump():
    for _ in sys.stdin:     # a snapshot of the loaded modules for each line the test writes
        print("MODULES " + json.dumps(sorted(list(sys.modules))), flush=True)

threading.Thread(target=dump, daemon=True).start()
sys.exit(main(["serve", "--override", "log.dirs=" + sys.argv[1],
               "--override", "listeners=PLAINTEXT://127.0.0.1:0"]))
"""


def test_serve_loads_an_apis_handler_and_protocol_classes_on_its_first_request(tmp_path: Path) -> None:
    """`kafkalite serve` starts without importing the handlers and kafka-python's classes of APIs
    no one has asked for (kafkalite.server.handler.lazy_spec, kafkalite.protocol.messages);
    ApiVersions still lists every API; the first CreateTopics loads its handler and classes."""
    from kafkalite.server.handler import HANDLER_VERSIONS
    proc = subprocess.Popen([sys.executable, "-c", _MODULES_PROBE, str(tmp_path / "logs")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def loaded() -> set[str]:
        proc.stdin.write("dump\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line.startswith("MODULES "), line
        return set(json.loads(line.removeprefix("MODULES ")))

    try:
        ready = proc.stdout.readline()
        match = re.search(r"kafkalite ready: .* listening on PLAINTEXT://(127\.0\.0\.1:\d+)", ready)
        assert match is not None, ready
        bootstrap = match.group(1)
        at_ready = loaded()
        assert {"kafkalite.server.broker", "kafka.protocol.api_message", "kafkalite.protocol.inter_broker"} <= at_ready
        not_yet = {"kafkalite.server.handlers.create_topics", "kafkalite.server.handlers.describe_configs",
                   "kafkalite.server.handlers.produce", "kafkalite.server.handlers.fetch",
                   "kafkalite.server.handlers.join_group", "kafka.protocol.admin.topics", "kafka.protocol.admin.acl",
                   "kafka.protocol.admin.configs", "kafka.protocol.admin.cluster", "kafka.protocol.admin.users",
                   "kafka.protocol.admin.groups", "kafka.protocol.consumer.group", "kafka.protocol.producer.produce"}
        assert at_ready.isdisjoint(not_yet), sorted(at_ready & not_yet)

        with RawClient(bootstrap) as c:
            assert c.api_versions() == {key: (low, high) for key, low, high in HANDLER_VERSIONS.values()}
        assert loaded().isdisjoint(not_yet)

        create_topic(bootstrap, "lazy", 2)
        after = loaded()
        assert {"kafkalite.server.handlers.create_topics", "kafka.protocol.admin.topics",
                "kafkalite.server.handlers.metadata"} <= after
        assert sorted(after & not_yet) == ["kafka.protocol.admin.topics", "kafkalite.server.handlers.create_topics"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "shut down cleanly" in err
