from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from tests.harness import BrokerProcess


def _bytecode_cache_for_child_processes() -> None:
    """Every broker, CLI or script process a test starts imports kafkalite. Where
    PYTHONDONTWRITEBYTECODE is set (as on the CI machines, with kafkalite installed editable),
    each of them compiled it from source again: a third of a broker's start-up (1.6 s -> 1.1 s,
    docs/benchmarks.md "Test fixture start-to-ready"). Children write and reuse bytecode in a
    cache directory outside the tree instead (PYTHONPYCACHEPREFIX), which keeps the tree as clean
    as the variable meant it to stay. The test session itself too (test modules are imported after
    this conftest): pytest keeps assertion-rewritten modules only where bytecode may be written,
    and rewriting all 400 of them again was most of each collection (~20 s per xdist worker and
    per phase of scripts/test.sh)."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        prefix = os.environ.setdefault(
            "PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"kafkalite-test-pycache-{os.getuid()}"))
        sys.dont_write_bytecode = False
        sys.pycache_prefix = prefix


_bytecode_cache_for_child_processes()

# kafka-python 3.0.12 loses a group join that completes after a poll's timeout (see the module)
from tests.support import kafka_python_join_fix  # noqa: E402

kafka_python_join_fix.apply()


# ---- two phases: parallel (pytest-xdist) and serial (scripts/test.sh) -------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--phase", choices=("all", "parallel", "serial"), default="all",
        help="run only the tests not marked `serial` (parallel) or only those (serial); "
             "scripts/test.sh runs the first on pytest-xdist workers, then the second alone")


# Work units of `--dist loadgroup` that are more than one file: each unit runs on one worker, so
# an expensive session fixture is built once (the Kafka oracle JVM of the tests comparing with
# Apache Kafka, Spark's connector tests among them, and the Spark JVM), the network-namespace
# tests do not meet (test_netfaults' sweep test looks for the namespaces of a run it killed,
# which another worker's sweep would remove).
_SHARED_UNITS: dict[str, tuple[str, ...]] = {
    "jvm-fixtures": (
        "tests/spark/", "tests/differential/", "tests/cluster/test_cluster_layout.py",
        "tests/integration/test_decompression_vs_kafka.py", "tests/integration/test_go_client.py",
        "tests/integration/test_inter_broker_vs_kafka.py",
        "tests/integration/test_replica_assignment_vs_kafka.py",
        "tests/integration/test_zk_layout_vs_kafka.py"),
    "netfaults": ("tests/cluster/test_netfaults.py", "tests/cluster/test_replication_faults.py"),
}


def work_unit(nodeid: str) -> str:
    """The unit a test is scheduled in: a shared unit above, else its file (so module fixtures
    are built once)."""
    path = nodeid.split("::", 1)[0]
    for unit, prefixes in _SHARED_UNITS.items():
        if path.startswith(prefixes):
            return unit
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` by work_unit(), not by `xdist_group` marks: xdist reads those from node
    ids it rewrites on the workers, which pytest 9.2's node ids no longer allow (every test became
    a unit of its own); this scheduler needs only the ids as collected. Units are handed out
    longest first (tests/support/work_unit_seconds.py), not by test count as xdist does: by count
    the last units are single slow tests (cluster failovers, 10-30 s each), so one worker could
    sit idle for most of one while the other ran it; longest first leaves short units last."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    from tests.support.work_unit_seconds import estimated_seconds

    class WorkUnitScheduling(LoadScopeScheduling):
        _longest_first = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # the first assignment is the first moment the whole queue is known
            if not self._longest_first:
                self._longest_first = True
                self.workqueue = OrderedDict(sorted(
                    self.workqueue.items(), key=lambda unit: -estimated_seconds(unit[0], len(unit[1]))))
            super()._assign_work_unit(node)

    return WorkUnitScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = config.getoption("--phase")
    if phase != "all":
        wanted = phase == "serial"
        keep = [i for i in items if (i.get_closest_marker("serial") is not None) == wanted]
        if len(keep) < len(items):
            kept = set(keep)
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = keep


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    """One shared broker for tests that only need a running broker (use unique topic names)."""
    with BrokerProcess(overrides={"num.partitions": "3"}) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for restart/crash/config tests."""
    b = BrokerProcess(log_dir=tmp_path / "logs")
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def topic_name() -> str:
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def broker_factory(tmp_path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers of the test's own with Kafka property overrides; all closed at teardown.

    `broker_factory({"auto.create.topics.enable": "false"})` -> a started BrokerProcess.
    """
    started: list[BrokerProcess] = []

    def make(overrides: Optional[dict[str, str]] = None, log_dir: Optional[Path] = None) -> BrokerProcess:
        b = BrokerProcess(log_dir=log_dir or tmp_path / f"logs-{len(started)}", overrides=overrides)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.close()


def _session_ids_alive(sids: set[int]) -> list[str]:
    """Processes (not zombies) whose session id is one of `sids`: a broker is started as a session
    leader, so anything it left behind keeps its session id."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, sid = fields[0], int(fields[3])
        if sid in sids and state != "Z":
            alive.append(f"session {sid} pid {entry}: {stat[:120]}")
    return alive


@pytest.fixture(scope="session", autouse=True)
def _no_broker_left_behind() -> Iterator[None]:
    """After the whole session, no broker process (or anything it spawned) may still run."""
    pids: set[int] = set()
    original_start = BrokerProcess.start

    def recording_start(self: BrokerProcess, *args: object, **kwargs: object) -> BrokerProcess:
        try:
            return original_start(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            if self.proc is not None:
                pids.add(self.proc.pid)

    BrokerProcess.start = recording_start  # type: ignore[method-assign]
    yield
    BrokerProcess.start = original_start  # type: ignore[method-assign]
    deadline = time.monotonic() + 5
    leftovers = _session_ids_alive(pids)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.1)
        leftovers = _session_ids_alive(pids)
    if leftovers:
        for sid in {int(line.split()[1]) for line in leftovers}:  # clean up what we started, then report
            try:
                os.killpg(sid, signal.SIGKILL)
            except OSError:
                pass
    assert not leftovers, "broker processes left behind after the test session:\n" + "\n".join(leftovers)


# ---- Apache Kafka 3.9 as the oracle, on a real ZooKeeper --------------------------------------

@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator["ZooKeeperServer"]:
    """One real ZooKeeper (Debian's package) for the session, on a free port in a temp dir."""
    from tests.support.zookeeper import ZooKeeperServer

    with ZooKeeperServer() as zk:
        yield zk


@pytest.fixture(scope="session")
def kafka_oracle(zookeeper_server) -> Iterator["KafkaOracle"]:
    """One Apache Kafka 3.9 broker in ZooKeeper mode for the whole session (jars from Maven
    Central, resolved once into the cache): the reference every differential test compares with."""
    from tests.support.kafka_oracle import KafkaOracle

    with KafkaOracle(zookeeper_server.connect_string) as kafka:
        yield kafka
