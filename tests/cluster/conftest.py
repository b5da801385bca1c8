"""Cluster fault tests: a real ZooKeeper (one per session, each cluster under its own chroot) and
kafkalite brokers as separate processes. Every test here is marked `cluster`."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from kafkalite.testing import Cluster
from tests.cluster.util import broker_ids, controller_seen_by, wait_until


# where a failed test's broker logs are kept (the brokers' temp dirs go with the cluster)
FAILED_LOGS_DIR = Path(os.environ.get("KAFKALITE_CLUSTER_TEST_LOGS", "/tmp/kafkalite-cluster-test-logs"))


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed


@pytest.fixture
def make_cluster(zookeeper_server: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """`make_cluster(brokers=3, overrides={...})` -> a started Cluster on the session's ZooKeeper;
    all closed at teardown."""
    made: list[Any] = []

    def make(brokers: int = 3, overrides: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        c = Cluster(brokers, overrides, zookeeper=zookeeper_server.connect_string, **kwargs)
        made.append(c)
        c.start()
        # as with Kafka, a broker's metadata lists the others only once the controller told it
        ids = sorted(c.brokers)
        wait_until(lambda: all(broker_ids(c.broker(b)) == ids and controller_seen_by(c.broker(b)) in ids
                               for b in ids), 30, "every broker knows every broker and the controller")
        return c

    yield make
    if request.node.stash.get(_CALL_FAILED, False):
        where = FAILED_LOGS_DIR / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
        where.mkdir(parents=True, exist_ok=True)
        for i, c in enumerate(made):
            for broker_id, b in c.brokers.items():
                (where / f"cluster{i}-broker{broker_id}.log").write_text(b.output())
        print(f"broker logs of the failed test kept in {where}")
    for c in made:
        # SIGKILL first: a clean stop of each broker (controlled shutdown, retried for its RF=1
        # partitions) would only cost time here
        for b in c.brokers.values():
            b.kill()
        c.close()
