"""pytest plugin (entry point `pytest11`): real kafkalite brokers as fixtures.

- `kafkalite_broker` (session): one `kafkalite.testing.Broker` for the whole run.
- `kafkalite_bootstrap` (session): its `bootstrap_servers`, e.g. "127.0.0.1:40181".
- `kafkalite_broker_factory` (function): `factory(overrides=None, **kwargs) -> Broker`, started;
  every broker it made is closed when the test ends.

Default overrides for all of them: the ini option `kafkalite_overrides` (one `key=value` per
line) and the command-line option `--kafkalite-override key=value` (repeatable, wins).

Only fixtures and options are defined here (nothing autouse), so loading the plugin costs a test
run nothing unless a test asks for a broker.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

import pytest

from kafkalite.testing import Broker


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkalite", "kafkalite test brokers")
    group.addoption("--kafkalite-override", action="append", default=[], metavar="KEY=VALUE",
                    dest="kafkalite_overrides",
                    help="Kafka property for the kafkalite fixture brokers (repeatable)")
    parser.addini("kafkalite_overrides", type="linelist", default=[],
                  help="Kafka properties (key=value, one per line) for the kafkalite fixture brokers")


def pytest_configure(config: pytest.Config) -> None:
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
