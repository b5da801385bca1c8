"""pytest plugin (entry point `pytest11`): real kafkalite brokers as fixtures.

- `kafkalite_broker` (session): one `kafkalite.testing.Broker` for the whole run.
- `kafkalite_bootstrap` (session): its `bootstrap_servers`, e.g. "127.0.0.1:40181".
- `kafkalite_broker_factory` (function): `factory(overrides=None, **kwargs) -> Broker`, started;
  every broker it made is closed when the test ends.
- `kafkalite_cluster` (function): a started `kafkalite.testing.Cluster` of 3 brokers in
  ZooKeeper mode (ids 0, 1, 2), closed when the test ends. The marker
  `@pytest.mark.kafkalite_cluster(brokers=5, overrides={...}, own_zookeeper=True, ...)` changes
  it for one test (keyword arguments as `Cluster`'s).
- `kafkalite_cluster_factory` (function): `factory(brokers=3, overrides=None, *,
  own_zookeeper=False, **kwargs) -> Cluster`, started; every cluster it made is closed when the
  test ends.
- `kafkalite_zookeeper` (session): the ZooKeeper those clusters share, each under a chroot of its
  own (started on first use; one JVM per run, not per test). A cluster with `own_zookeeper=True`
  starts one of its own instead, as `cluster.zookeeper_server`, for tests that pause or stop it.

Default overrides for all of them: the ini option `kafkalite_overrides` (one `key=value` per
line) and the command-line option `--kafkalite-override key=value` (repeatable, wins).

Only fixtures and options are defined here (nothing autouse), so loading the plugin costs a test
run nothing unless a test asks for a broker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

import pytest

from kafkalite.testing import Broker, Cluster

if TYPE_CHECKING:
    from kafkalite.tools.local_zookeeper import ZooKeeperServer


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkalite", "kafkalite test brokers")
    group.addoption("--kafkalite-override", action="append", default=[], metavar="KEY=VALUE",
                    dest="kafkalite_overrides",
                    help="Kafka property for the kafkalite fixture brokers (repeatable)")
    parser.addini("kafkalite_overrides", type="linelist", default=[],
                  help="Kafka properties (key=value, one per line) for the kafkalite fixture brokers")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafkalite_cluster(brokers=3, overrides=None, own_zookeeper=False, "
                                       "**kwargs): the kafkalite_cluster fixture's arguments for this test "
                                       "(kafkalite.testing.Cluster's)")
    # A malformed override is a usage error of the run, reported before any test starts.
    configured_overrides(config)


def _parse(items: list[str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"{where}: expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def configured_overrides(config: pytest.Config) -> dict[str, str]:
    """The ini option's overrides, then the command line's on top."""
    return {**_parse(config.getini("kafkalite_overrides"), "kafkalite_overrides"),
            **_parse(config.getoption("kafkalite_overrides") or [], "--kafkalite-override")}


@pytest.fixture(scope="session")
def kafkalite_broker(pytestconfig: pytest.Config) -> Iterator[Broker]:
    """A kafkalite broker shared by the whole test session (its own port and temp dir).

    Tests sharing it should use topic names of their own. A test may `restart()` it, or
    `kill()` and then `restart()` it; one that leaves it stopped breaks the tests after it, so
    crash tests are better served by `kafkalite_broker_factory`.
    """
    broker = Broker(configured_overrides(pytestconfig))
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def kafkalite_bootstrap(kafkalite_broker: Broker) -> str:
    """`host:port` of the session broker, for a client's `bootstrap_servers`."""
    return kafkalite_broker.bootstrap_servers


@pytest.fixture
def kafkalite_broker_factory(pytestconfig: pytest.Config) -> Iterator[Callable[..., Broker]]:
    """Start extra brokers for this test: `factory(overrides=None, **kwargs) -> Broker` (started;
    arguments as `kafkalite.testing.Broker`, on top of the configured default overrides).
    All are closed when the test ends, whether it passed or not."""
    defaults = configured_overrides(pytestconfig)
    made: list[Broker] = []

    def factory(overrides: Optional[dict[str, Any]] = None, **kwargs: Any) -> Broker:
        broker = Broker({**defaults, **(overrides or {})}, **kwargs)
        made.append(broker)
        return broker.start()

    try:
        yield factory
    finally:
        for broker in made:
            broker.close()


@pytest.fixture(scope="session")
def kafkalite_zookeeper() -> Iterator["ZooKeeperServer"]:
    """A ZooKeeper (Debian's, on a free port) shared by the session's kafkalite clusters, each
    under a chroot of its own; `.connect_string` is its "127.0.0.1:port"."""
    from kafkalite.tools.local_zookeeper import ZooKeeperServer

    server = ZooKeeperServer(die_with_parent=True)
    try:
        server.start()
        yield server
    finally:
        server.close()


class _ClusterMaker:
    """Makes started clusters on the session's ZooKeeper (or their own) and closes them all."""

    def __init__(self, request: pytest.FixtureRequest, defaults: dict[str, str]) -> None:
        self.request = request
        self.defaults = defaults
        self.made: list[Cluster] = []

    def __call__(self, brokers: int = 3, overrides: Optional[dict[str, Any]] = None, *,
                 own_zookeeper: bool = False, **kwargs: Any) -> Cluster:
        if not own_zookeeper and "zookeeper" not in kwargs:
            # requested only now: a test with its own ZooKeeper starts no shared one
            kwargs["zookeeper"] = self.request.getfixturevalue("kafkalite_zookeeper").connect_string
        cluster = Cluster(brokers, {**self.defaults, **(overrides or {})}, **kwargs)
        self.made.append(cluster)
        return cluster.start()

    def close(self) -> None:
        for cluster in reversed(self.made):
            cluster.close()


@pytest.fixture
def kafkalite_cluster_factory(request: pytest.FixtureRequest,
                              pytestconfig: pytest.Config) -> Iterator[Callable[..., Cluster]]:
    """Start clusters for this test: `factory(brokers=3, overrides=None, *, own_zookeeper=False,
    **kwargs) -> Cluster` (started; keyword arguments as `kafkalite.testing.Cluster`, overrides on
    top of the configured defaults). All are closed when the test ends, whether it passed or not."""
    maker = _ClusterMaker(request, configured_overrides(pytestconfig))
    try:
        yield maker
    finally:
        maker.close()


@pytest.fixture
def kafkalite_cluster(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Iterator[Cluster]:
    """A started 3-broker kafkalite cluster in ZooKeeper mode (broker ids 0, 1, 2) for this test,
    on the session's ZooKeeper under a chroot of its own; closed when the test ends.
    `@pytest.mark.kafkalite_cluster(brokers=..., overrides=..., own_zookeeper=..., **kwargs)`
    changes it."""
    marker = request.node.get_closest_marker("kafkalite_cluster")
    args: tuple[Any, ...] = marker.args if marker is not None else ()
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    maker = _ClusterMaker(request, configured_overrides(pytestconfig))
    try:
        yield maker(*args, **kwargs)
    finally:
        maker.close()
