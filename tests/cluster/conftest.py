"""Cluster fault tests: a real ZooKeeper (one per session, each cluster under its own chroot) and
kafkalite brokers as separate processes. Every test here is marked `cluster`."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from kafkalite.testing import Cluster
from tests.cluster.util import broker_ids, controller_seen_by, wait_until


@pytest.fixture
def make_cluster(zookeeper_server: Any) -> Iterator[Callable[..., Any]]:
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
    for c in made:
        # SIGKILL first: a clean stop of each broker (controlled shutdown, retried for its RF=1
        # partitions) would only cost time here
        for b in c.brokers.values():
            b.kill()
        c.close()
