"""Groups across broker restarts: committed offsets (with their metadata strings) survive a
SIGKILL of the broker, and a running group keeps consuming exactly once across a clean restart."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from tests.harness import BrokerProcess
from tests.integration.groups_util import (GROUP_BROKER_OVERRIDES, NONE, Fleet, assert_exactly_once,
                                           assert_no_concurrent_ownership, assert_no_problems, first_offsets,
                                           last_commit_metadata, make_topic, offset_commit_simple,
                                           offset_fetch, produce_phase, wait_committed, wait_consumed,
                                           wait_stable)
from tests.integration.groups_util import fleet  # noqa: F401 - the pytest fixture


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_OVERRIDES)


def test_committed_offsets_with_metadata_survive_broker_sigkill(group_broker: BrokerProcess, fleet: Fleet,
                                                                topic_name: str) -> None:
    bs = group_broker.bootstrap_servers
    partitions = range(6)
    make_topic(bs, topic_name, 6)
    group = "g-" + topic_name
    expected = produce_phase(bs, topic_name, partitions, 20)
    members = [fleet.spawn("kafka-python", bs, topic_name, group, f"kp-{i}", commit_metadata=f"meta \u00e9 {i}")
               for i in range(3)]
    wait_stable(members, partitions)
    wait_consumed(members, expected)
    for m in members:
        wait_committed(m)
        m.close()
    meta_of = last_commit_metadata(members)
    want = {p: (20, meta_of[p]) for p in partitions}
    assert offset_fetch(bs, group, topic_name, partitions) == want
    # A simple-consumer commit (no group membership) with a long metadata string, right before the crash.
    simple = "simple-" + topic_name
    long_meta = "x" * 1000 + "\u2603"
    assert offset_commit_simple(bs, simple, topic_name, {p: (p + 1, long_meta) for p in partitions}) == \
        {p: NONE for p in partitions}

    group_broker.kill()
    group_broker.start()
    assert offset_fetch(bs, group, topic_name, partitions) == want
    assert offset_fetch(bs, simple, topic_name, partitions) == {p: (p + 1, long_meta) for p in partitions}

    # A new member resumes exactly at the committed offsets.
    t_new = time.monotonic()
    latest = produce_phase(bs, topic_name, partitions, 20)
    newcomer = fleet.spawn("kafka-python", bs, topic_name, group, "kp-after-crash")
    wait_stable([newcomer], partitions, settle=0.3)
    wait_consumed([newcomer], latest)
    assert first_offsets(newcomer, t_new) == {p: 20 for p in partitions}
    assert_exactly_once(members + [newcomer], topic_name, expected | latest)
    assert_no_problems(members + [newcomer])


# Every broker start bumps the partitions' leader epoch (as Kafka's controller does when they come
# back online); kafka-python 3 then validates its positions with OffsetsForLeaderEpoch (API 23).
@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_running_group_survives_clean_broker_restart(group_broker: BrokerProcess, fleet: Fleet, topic_name: str,
                                                     client: str) -> None:
    bs = group_broker.bootstrap_servers
    partitions = range(6)
    make_topic(bs, topic_name, 6)
    group = "g-" + topic_name
    expected = produce_phase(bs, topic_name, partitions, 20)
    members = [fleet.spawn(client, bs, topic_name, group, f"{client}-{i}", session_timeout_ms=10000)
               for i in range(3)]
    wait_stable(members, partitions)
    wait_consumed(members, expected)
    for m in members:
        wait_committed(m)
    before = offset_fetch(bs, group, topic_name, partitions)
    assert before == {p: (20, "") for p in partitions}

    assert group_broker.restart().port == int(bs.rsplit(":", 1)[1])
    assert offset_fetch(bs, group, topic_name, partitions) == before

    expected |= produce_phase(bs, topic_name, partitions, 20)
    wait_consumed(members, expected, timeout=20)
    owners = wait_stable(members, partitions)
    assert sorted(len(s) for s in owners.values()) == [2, 2, 2]
    for m in members:
        wait_committed(m)
    assert offset_fetch(bs, group, topic_name, partitions) == {p: (40, "") for p in partitions}
    assert_exactly_once(members, topic_name, expected)
    assert_no_concurrent_ownership(members)
    assert_no_problems(members)
    for m in members:
        m.close()
