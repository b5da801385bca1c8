"""kafkalite.testing and the pytest plugin, used the way a user would.

The plugin tests run pytest in a subprocess (pytester.runpytest_subprocess) on test files of a
user's kind, so the plugin is loaded through its installed `pytest11` entry point and the
fixtures are torn down by a real pytest session. Broker processes are checked by pid: after a
teardown the recorded pid must be gone (or a zombie), and the broker's temp dir deleted.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalite.controller.zk.local_store import read_znodes
from kafkalite.testing import TEST_DEFAULTS, Broker, BrokerError, TopicError

pytest_plugins = ["pytester"]

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0
# Kafka error codes asserted below.
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def repo_env() -> dict[str, str]:
    """The environment for Python subprocesses: this repository's kafkalite first on the path, so
    they run the code under test even if the installed kafkalite is another checkout."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie has exited: it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def produce_acked(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_block_ms=10000)
    try:
        for v in values:
            producer.send(topic, v, partition=0).get(timeout=10)
    finally:
        producer.close()


def read_partition(bootstrap: str, topic: str, partition: int = 0) -> list[bytes]:
    """Every value of one partition, from the start to its end offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             request_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read {len(values)} of {end} records"
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value for r in records]
        return values
    finally:
        consumer.close()


def partition_count(bootstrap: str, topic: str) -> int:
    """Partitions of `topic` per Metadata, asking as a producer would (auto-creation allowed)."""
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    deadline = time.monotonic() + TIMEOUT
    while True:
        t = p.list_topics(topic, timeout=10).topics[topic]
        if t.error is None and t.partitions:
            return len(t.partitions)
        if t.error is not None and t.error.code() == UNKNOWN_TOPIC_OR_PARTITION:
            return 0
        assert time.monotonic() < deadline, f"metadata of {topic}: {t.error}"
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# kafkalite.testing.Broker, directly
# --------------------------------------------------------------------------------------------

def test_overrides_from_dict_and_keyword_arguments() -> None:
    b = Broker({"num.partitions": "3", "log.retention.ms": 1000}, auto_create_topics_enable=False,
               log_retention_ms=2000, message_max_bytes=2048)
    try:
        assert b.overrides == {**TEST_DEFAULTS, "num.partitions": "3", "log.retention.ms": "2000",
                               "auto.create.topics.enable": "false", "message.max.bytes": "2048"}
        cmd = b.command()
        assert cmd[:5] == ["serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={b.log_dir}"]
        assert "auto.create.topics.enable=false" in cmd and "log.retention.ms=2000" in cmd
        # TEST_DEFAULTS are overridable like any property.
        assert Broker(group_initial_rebalance_delay_ms=3000).overrides[
            "group.initial.rebalance.delay.ms"] == "3000"
        with pytest.raises(BrokerError, match="not started"):
            b.bootstrap_servers
    finally:
        b.close()
    assert not b.stderr_path.parent.exists()
    for reserved in ({"listeners": "PLAINTEXT://:9092"}, {"log.dirs": "/tmp/x"}):
        with pytest.raises(ValueError, match="is set by kafkalite.testing.Broker"):
            Broker(reserved)
    with pytest.raises(TypeError, match="property value"):
        Broker(num_partitions=[3])  # type: ignore[arg-type]


def test_context_manager_create_topic_and_round_trip() -> None:
    with Broker(num_partitions=2) as b:
        assert b.running and alive(b.pid)
        assert b.bootstrap_servers == f"127.0.0.1:{b.port}" and b.port > 0
        assert b.log_dir.is_dir() and (b.log_dir / "kafkalite-zk.json").exists()
        assert b.startup_seconds is not None and 0 < b.startup_seconds < TIMEOUT
        assert b.create_topic("orders", partitions=3, config={"retention.ms": 3_600_000}) == "orders"
        # create_topic returns only once Metadata shows every partition with a leader.
        assert partition_count(b.bootstrap_servers, "orders") == 3
        # the embedded broker keeps Kafka's znodes in its log dir: /brokers/topics/orders, /config/topics/orders
        nodes = read_znodes(b.log_dir)    # kafkalite-zk.json and the log of the writes since
        assert "/brokers/topics/orders" in nodes
        assert json.loads(nodes["/config/topics/orders"]) == {"version": 1, "config": {"retention.ms": "3600000"}}
        produce_acked(b.bootstrap_servers, "orders", [b"a", b"b", b"c"])
        assert read_partition(b.bootstrap_servers, "orders") == [b"a", b"b", b"c"]
        # num.partitions=2 reached the broker: an auto-created topic has 2 partitions.
        assert partition_count(b.bootstrap_servers, "auto-created") == 2
        with pytest.raises(TopicError) as e:
            b.create_topic("orders")
        assert (e.value.error_code, e.value.error_name) == (TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS")
        with pytest.raises(TopicError) as e:
            b.create_topic("no-partitions", partitions=0)
        assert e.value.error_code == INVALID_PARTITIONS
        pid, tmp = b.pid, b.stderr_path.parent
        assert "Creating topic orders with configuration {'retention.ms': '3600000'} and initial partition assignment" in b.output()
    assert not b.running and b.pid is None
    assert not alive(pid) and not tmp.exists()


def test_restart_keeps_port_and_data_stop_is_clean(tmp_path: Path) -> None:
    with Broker(log_dir=tmp_path / "kept") as b:
        b.create_topic("t")
        produce_acked(b.bootstrap_servers, "t", [b"1", b"2"])
        port, pid = b.port, b.pid
        b.restart()
        assert (b.port, b.bootstrap_servers) == (port, f"127.0.0.1:{port}")
        assert b.pid != pid and not alive(pid)
        assert read_partition(b.bootstrap_servers, "t") == [b"1", b"2"]
        assert b.stop() == 0   # SIGTERM: a clean shutdown
        assert (tmp_path / "kept" / ".kafka_cleanshutdown").exists()
        assert b.stop() is None and not b.running
        b.start()                                          # a stopped broker starts again
        assert b.port == port and b.starts == 3
        assert read_partition(b.bootstrap_servers, "t") == [b"1", b"2"]
        assert b.output().count("shut down cleanly") == 2
    # A log dir of the caller's survives close(); the broker's own temp dir does not.
    assert (tmp_path / "kept" / "t-0").is_dir() and not b.stderr_path.parent.exists()


def test_kill_then_restart_keeps_acknowledged_data() -> None:
    with Broker() as b:
        b.create_topic("crash")
        values = [b"v%d" % i for i in range(20)]
        produce_acked(b.bootstrap_servers, "crash", values)
        pid = b.pid
        b.kill()
        assert not alive(pid) and not b.running
        assert not (b.log_dir / ".kafka_cleanshutdown").exists()
        b.restart()
        assert read_partition(b.bootstrap_servers, "crash") == values
        produce_acked(b.bootstrap_servers, "crash", [b"after"])
        assert read_partition(b.bootstrap_servers, "crash") == values + [b"after"]


def test_invalid_property_fails_start_with_the_brokers_message() -> None:
    b = Broker(log_segment_bytes="abc")
    try:
        with pytest.raises(BrokerError) as e:
            b.start()
        assert "exited with code 2 before it was ready" in str(e.value)
        assert "log.segment.bytes" in str(e.value)
        assert not b.running and b.pid is None
    finally:
        b.close()


def test_unreferenced_broker_is_killed_by_its_finalizer() -> None:
    b = Broker().start()
    pid, tmp = b.pid, b.stderr_path.parent
    assert alive(pid)
    del b
    assert not alive(pid) and not tmp.exists()


def test_broker_started_from_a_thread_outlives_the_thread() -> None:
    # The reason for a pipe instead of PR_SET_PDEATHSIG, which fires when the starting thread ends.
    started: list[Broker] = []
    t = threading.Thread(target=lambda: started.append(Broker().start()))
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive() and len(started) == 1
    with started[0] as b:
        time.sleep(0.3)
        assert b.running
        assert b.create_topic("from-thread") == "from-thread"


CHILD_SCRIPT = """
import sys, time
from kafkalite.testing import Broker
b = Broker().start()
print(b.pid, b.stderr_path.parent, flush=True)
if sys.argv[1] == "interrupt":
    raise KeyboardInterrupt   # no close(): the atexit hook must stop the broker
time.sleep(60)
"""


def _run_child(mode: str) -> tuple[subprocess.Popen[str], int, Path]:
    p = subprocess.Popen([sys.executable, "-c", CHILD_SCRIPT, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=repo_env())
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line:
        p.kill()
        raise AssertionError("child failed: " + p.communicate(timeout=10)[1])
    pid, tmp = line.split()
    return p, int(pid), Path(tmp)


def test_parent_killed_broker_exits_and_removes_its_temp_dir() -> None:
    p, pid, tmp = _run_child("sleep")
    assert alive(pid) and tmp.is_dir()
    p.kill()
    p.wait(TIMEOUT)
    assert wait_dead(pid, 10.0), f"broker {pid} still running after its parent was SIGKILLed"
    deadline = time.monotonic() + 5
    while tmp.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not tmp.exists()


def test_keyboard_interrupt_without_close_stops_broker_at_exit() -> None:
    p, pid, tmp = _run_child("interrupt")
    _, err = p.communicate(timeout=TIMEOUT)
    # Python ends an uncaught KeyboardInterrupt by re-raising SIGINT on itself.
    assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err
    # The atexit hook stopped and reaped it before the interpreter exited: no waiting here.
    assert not alive(pid) and not tmp.exists()


# --------------------------------------------------------------------------------------------
# The pytest plugin, in a pytest of its own (subprocess: the installed entry point is used)
# --------------------------------------------------------------------------------------------

def plugin_entry_points() -> list[str]:
    return [ep.value for ep in importlib.metadata.entry_points(group="pytest11")
            if ep.name == "kafkalite"]


NOT_INSTALLED = ("kafkalite's pytest11 entry point is not installed in this environment "
                 "(`pip install -e .` from this checkout registers it)")


def test_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    assert plugin_entry_points() == ["kafkalite.pytest_plugin"], NOT_INSTALLED


@pytest.fixture
def installed_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """For pytest runs that load the plugin through its installed entry point, as a user's pytest
    does: the entry point must be there, and they import this repository's kafkalite."""
    if plugin_entry_points() != ["kafkalite.pytest_plugin"]:
        pytest.fail(NOT_INSTALLED)
    monkeypatch.setenv("PYTHONPATH", repo_env()["PYTHONPATH"])


# Inner conftest: a fixture to record brokers, and a check after the session's teardown.
INNER_CONFTEST = """
import json, os, pathlib
import pytest

RECORD = pathlib.Path("brokers.jsonl")

def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

@pytest.fixture
def record_broker():
    def record(broker, kind):
        with RECORD.open("a") as f:
            f.write(json.dumps({"kind": kind, "pid": broker.pid,
                                "tmp": str(broker.stderr_path.parent)}) + "\\n")
    return record

def recorded():
    if not RECORD.exists():
        return []
    return [json.loads(line) for line in RECORD.read_text().splitlines()]

def pytest_unconfigure(config):
    # After every fixture was torn down, still inside this pytest process.
    state = [{**b, "alive": _alive(b["pid"]), "tmp_exists": os.path.exists(b["tmp"])}
             for b in recorded()]
    pathlib.Path("after_teardown.json").write_text(json.dumps(state))
"""

USER_SUITE = """
import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from conftest import recorded, _alive

def produce(bootstrap, topic, values):
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        p.send(topic, v, partition=0).get(timeout=10)
    p.close()

def read(bootstrap, topic):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp]); c.seek_to_beginning(tp)
    end, out = c.end_offsets([tp])[tp], []
    for _ in range(100):
        if c.position(tp) >= end:
            break
        for recs in c.poll(timeout_ms=200).values():
            out += [r.value for r in recs]
    c.close()
    return out

def partitions(bootstrap, topic):
    p = Producer({"bootstrap.servers": bootstrap})
    for _ in range(100):
        t = p.list_topics(topic, timeout=10).topics[topic]
        if t.error is not None and t.error.code() == 3:
            return 0
        if t.error is None and t.partitions:
            return len(t.partitions)
    raise AssertionError(t.error)

def test_session_broker(kafkalite_broker, kafkalite_bootstrap, record_broker):
    record_broker(kafkalite_broker, "session")
    assert kafkalite_bootstrap == "127.0.0.1:%d" % kafkalite_broker.port
    assert kafkalite_broker.create_topic("orders", partitions=2) == "orders"
    produce(kafkalite_bootstrap, "orders", [b"o1", b"o2", b"o3"])
    assert read(kafkalite_bootstrap, "orders") == [b"o1", b"o2", b"o3"]

def test_fails_on_purpose(kafkalite_broker, kafkalite_broker_factory, record_broker):
    record_broker(kafkalite_broker, "session")
    record_broker(kafkalite_broker_factory(), "factory-of-failed-test")
    assert False, "failing on purpose"

def test_factory_brokers_of_the_failed_test_were_closed():
    mine = [b for b in recorded() if b["kind"] == "factory-of-failed-test"]
    assert len(mine) == 1
    assert not _alive(mine[0]["pid"])
    import os
    assert not os.path.exists(mine[0]["tmp"])

def test_session_broker_restart_keeps_data(kafkalite_broker, kafkalite_bootstrap):
    port, pid = kafkalite_broker.port, kafkalite_broker.pid
    kafkalite_broker.restart()
    assert kafkalite_broker.bootstrap_servers == kafkalite_bootstrap
    assert kafkalite_broker.pid != pid and not _alive(pid)
    assert read(kafkalite_bootstrap, "orders") == [b"o1", b"o2", b"o3"]

def test_factory_overrides(kafkalite_broker, kafkalite_broker_factory, record_broker):
    four = kafkalite_broker_factory(num_partitions=4)
    closed = kafkalite_broker_factory(overrides={"auto.create.topics.enable": "false"})
    for b in (four, closed):
        record_broker(b, "factory")
    ports = {kafkalite_broker.port, four.port, closed.port}
    assert len(ports) == 3
    assert partitions(four.bootstrap_servers, "auto") == 4
    assert partitions(closed.bootstrap_servers, "auto") == 0
    assert partitions(kafkalite_broker.bootstrap_servers, "auto") == 1

def test_factory_broker_crash_and_restart(kafkalite_broker_factory, record_broker):
    b = kafkalite_broker_factory()
    record_broker(b, "factory")
    b.create_topic("acked")
    produce(b.bootstrap_servers, "acked", [b"a%d" % i for i in range(10)])
    port = b.port
    b.kill()
    assert not b.running
    assert not (b.log_dir / ".kafka_cleanshutdown").exists()
    b.restart()
    assert b.port == port
    assert read(b.bootstrap_servers, "acked") == [b"a%d" % i for i in range(10)]
"""


def _after_teardown(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return json.loads((pytester.path / "after_teardown.json").read_text())


@pytest.mark.usefixtures("installed_plugin")
def test_fixtures_in_a_user_suite_and_teardown_after_failure(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_user_suite=USER_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
                                           timeout=120)
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: failing on purpose*",
                                 "FAILED test_user_suite.py::test_fails_on_purpose*"])
    brokers = _after_teardown(pytester)
    kinds = [b["kind"] for b in brokers]
    assert kinds == ["session", "session", "factory-of-failed-test", "factory", "factory", "factory"]
    # The same session broker both times (one per session), then three factory brokers.
    assert brokers[0]["pid"] == brokers[1]["pid"] and brokers[0]["tmp"] == brokers[1]["tmp"]
    assert len({b["pid"] for b in brokers}) == 5
    # Torn down by the fixtures inside that pytest process: nothing running, temp dirs gone.
    assert [(b["alive"], b["tmp_exists"]) for b in brokers] == [(False, False)] * 6
    assert not any(alive(b["pid"]) for b in brokers)


@pytest.mark.usefixtures("installed_plugin")
def test_default_overrides_from_ini_and_command_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("""
        [pytest]
        kafkalite_overrides =
            num.partitions=2
            log.retention.ms=3600000
    """)
    pytester.makepyfile(test_options="""
        import time

        from confluent_kafka import Producer

        def count(bootstrap, topic):
            # the first Metadata naming it creates the topic; its leader follows (LEADER_NOT_AVAILABLE
            # meanwhile): ask again, for up to 30 s on a busy machine
            p = Producer({"bootstrap.servers": bootstrap})
            deadline = time.monotonic() + 30
            while True:
                t = p.list_topics(topic, timeout=10).topics[topic]
                if t.error is None and t.partitions:
                    return len(t.partitions)
                if time.monotonic() > deadline:
                    raise AssertionError(t.error)
                time.sleep(0.05)

        def test_session_broker(kafkalite_broker, kafkalite_bootstrap):
            assert kafkalite_broker.overrides["num.partitions"] == "5"   # command line wins
            assert kafkalite_broker.overrides["log.retention.ms"] == "3600000"
            assert count(kafkalite_bootstrap, "auto") == 5

        def test_factory(kafkalite_broker_factory):
            b = kafkalite_broker_factory(num_partitions=7)
            assert b.overrides["num.partitions"] == "7"                  # factory argument wins
            assert b.overrides["log.retention.ms"] == "3600000"
            assert count(b.bootstrap_servers, "auto") == 7
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafkalite-override",
                                           "num.partitions=5", timeout=120)
    result.assert_outcomes(passed=2)


@pytest.mark.usefixtures("installed_plugin")
def test_bad_override_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(kafkalite_broker):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafkalite-override",
                                           "no-equals-sign", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kafkalite-override: expected key=value, got 'no-equals-sign'*"])


@pytest.mark.usefixtures("installed_plugin")
def test_broker_that_cannot_start_is_a_setup_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="""
        def test_a(kafkalite_broker):
            pass

        def test_b(kafkalite_bootstrap):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafkalite-override",
                                           "log.segment.bytes=abc", timeout=120)
    # pytest caches a session fixture's setup error: both tests error, the broker started once.
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*BrokerError: kafkalite broker exited with code 2 before it was ready*",
                                 "*log.segment.bytes*"])


def doc_test_files() -> dict[str, str]:
    """The complete test files of docs/testing.md and README.md: ```python blocks whose first
    line names one."""
    text = (REPO_ROOT / "docs" / "testing.md").read_text() + (REPO_ROOT / "README.md").read_text()
    files = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        m = re.match(r"# (test_\w+)\.py\n", block)
        if m:
            files[m.group(1)] = block
    return files


@pytest.mark.usefixtures("installed_plugin")
def test_docs_example_tests_run_as_written(pytester: pytest.Pytester) -> None:
    files = doc_test_files()
    assert sorted(files) == ["test_aiokafka_example", "test_confluent_kafka_example",
                             "test_crash_example", "test_kafka_python_example",
                             "test_readme_example"]
    pytester.makepyfile(**files)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", timeout=120)
    tests = sum(len(re.findall(r"^def test_", src, re.M)) for src in files.values())
    result.assert_outcomes(passed=tests)
    assert tests == 6


@pytest.mark.usefixtures("installed_plugin")
def test_ctrl_c_during_a_test_tears_the_broker_down(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_blocking="""
        import pathlib, time

        def test_blocks(kafkalite_broker, kafkalite_broker_factory, record_broker):
            record_broker(kafkalite_broker, "session")
            record_broker(kafkalite_broker_factory(), "factory")
            pathlib.Path("running").touch()
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (pytester.path / "running").exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "inner test did not start"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)   # what a terminal's Ctrl-C delivers to pytest
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out
    brokers = _after_teardown(pytester)
    assert [b["kind"] for b in brokers] == ["session", "factory"]
    assert [(b["alive"], b["tmp_exists"]) for b in brokers] == [(False, False)] * 2

