from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from tests.harness import BrokerProcess


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
