"""Consumer groups end to end with confluent-kafka (librdkafka): the eager `range` and the
incremental `cooperative-sticky` protocols, and static membership (KIP-345)."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from tests.harness import BrokerProcess
from tests.integration.groups_util import (GROUP_BROKER_OVERRIDES, Fleet, assert_exactly_once,
                                           assert_no_concurrent_ownership, assert_no_problems, first_offsets,
                                           make_topic, offset_fetch, produce_phase, run_close_and_resume,
                                           run_sigkill, wait_committed, wait_consumed, wait_stable)
from tests.integration.groups_util import fleet  # noqa: F401 - the pytest fixture

ASSIGNORS = ["range", "cooperative-sticky"]


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_OVERRIDES)


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_three_members_close_and_new_member_resumes(group_broker: BrokerProcess, fleet: Fleet, topic_name: str,
                                                    assignor: str) -> None:
    run_close_and_resume(fleet, group_broker.bootstrap_servers, "confluent", topic_name, assignor=assignor,
                         cooperative=assignor == "cooperative-sticky")


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_sigkilled_member_partitions_move_after_session_timeout(group_broker: BrokerProcess, fleet: Fleet,
                                                                 topic_name: str, assignor: str) -> None:
    run_sigkill(fleet, group_broker.bootstrap_servers, "confluent", topic_name, assignor=assignor)


def test_static_member_restart_gets_its_partitions_back_without_rebalance(
        group_broker: BrokerProcess, fleet: Fleet, topic_name: str) -> None:
    """A member with group.instance.id is SIGKILLed and restarted within the session timeout: the
    coordinator replaces the old member id, hands the new process the old assignment, and the
    other members see no rebalance at all -- not at the restart, not when the old session would
    have expired."""
    bs = group_broker.bootstrap_servers
    session_ms = 6000
    partitions = range(6)
    make_topic(bs, topic_name, 6)
    group = "g-" + topic_name
    expected = produce_phase(bs, topic_name, partitions, 20)

    def spawn(i: int, name: str):
        return fleet.spawn("confluent", bs, topic_name, group, name, instance_id=f"static-{i}",
                           session_timeout_ms=session_ms, assignor="range")
    members = []
    for i in range(3):  # one at a time, so static-0 is the leader and the restarted one is not
        members.append(spawn(i, f"static-{i}"))
        wait_stable(members, partitions, settle=0.3)
    owners = wait_stable(members, partitions)
    wait_consumed(members, expected)
    for m in members:
        wait_committed(m)

    others, victim = members[:2], members[2]
    vparts = owners[victim.client_id]
    events_before = {m.client_id: m.rebalance_event_count() for m in others}
    t_kill = victim.kill()
    back = spawn(2, "static-2-restarted")
    got = back.wait_event(lambda e: e["ev"] == "assigned" and e["assignment"], session_ms / 1000, "its assignment")
    assert set(got["assignment"]) == vparts, (got, owners)
    assert got["t"] - t_kill < session_ms / 1000, "the restarted static member was not back within the session"

    # Past the old member's session deadline: still no rebalance anywhere.
    time.sleep(max(0.0, t_kill + session_ms / 1000 + 1.5 - time.monotonic()))
    assert {m.client_id: m.rebalance_event_count() for m in others} == events_before, (
        "the other members rebalanced:\n" + fleet.describe())
    assert {m.client_id: m.assignment for m in others} == {m.client_id: owners[m.client_id] for m in others}
    assert back.assignment == vparts and back.rebalance_event_count() == 1

    t_more = time.monotonic()
    more = produce_phase(bs, topic_name, partitions, 20)
    expected |= more
    everyone = members + [back]
    wait_consumed(everyone, expected)
    assert first_offsets(back, t_kill) == {p: 20 for p in vparts}
    assert {(p, o) for p, o, _ in back.consumed()} == {(p, o) for p, o in more if p in vparts}
    for m in others:
        assert {p for p, _, _ in m.consumed(t_more)} == owners[m.client_id]
    assert_exactly_once(everyone, topic_name, expected)
    assert_no_concurrent_ownership(everyone)
    assert_no_problems(everyone)
    for m in others + [back]:
        wait_committed(m)
    assert offset_fetch(bs, group, topic_name, partitions) == {p: (40, "") for p in partitions}
