"""Consumer groups end to end with aiokafka: three members in subprocesses over a six-partition
topic (see groups_util for what every scenario proves)."""
from __future__ import annotations

from typing import Callable

import pytest

from tests.harness import BrokerProcess
from tests.integration.groups_util import (GROUP_BROKER_OVERRIDES, Fleet, run_close_and_resume, run_sigkill)
from tests.integration.groups_util import fleet  # noqa: F401 - the pytest fixture


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_OVERRIDES)


def test_three_members_close_and_new_member_resumes(group_broker: BrokerProcess, fleet: Fleet,
                                                    topic_name: str) -> None:
    run_close_and_resume(fleet, group_broker.bootstrap_servers, "aiokafka", topic_name)


def test_sigkilled_member_partitions_move_after_session_timeout(group_broker: BrokerProcess, fleet: Fleet,
                                                                 topic_name: str) -> None:
    run_sigkill(fleet, group_broker.bootstrap_servers, "aiokafka", topic_name)
