"""Consumer groups end to end with kafka-python 3: three members in subprocesses over a
six-partition topic (see groups_util for what every scenario proves)."""
from __future__ import annotations

from typing import Callable

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.harness import BrokerProcess
from tests.integration.groups_util import (GROUP_BROKER_OVERRIDES, Fleet, make_topic, offset_fetch,
                                           run_close_and_resume, run_sigkill)
from tests.integration.groups_util import fleet  # noqa: F401 - the pytest fixture
from tests.integration.util import wait_until


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_OVERRIDES)


def test_in_process_consumer_joins_consumes_and_commits(group_broker: BrokerProcess, topic_name: str) -> None:
    """The smoke test: KafkaConsumer(group_id=...) subscribes, gets all partitions, reads, commits."""
    bs = group_broker.bootstrap_servers
    make_topic(bs, topic_name, 3)
    p = KafkaProducer(bootstrap_servers=bs, request_timeout_ms=10000, max_block_ms=10000)
    for i in range(30):
        p.send(topic_name, value=f"v{i}".encode(), partition=i % 3)
    p.flush(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bs, group_id="smoke", enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                      request_timeout_ms=20000)
    try:
        assert c.partitions_for_topic(topic_name) == {0, 1, 2}  # see groups_util: metadata before joining
        c.subscribe([topic_name])
        got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        def poll() -> bool:
            for tp, recs in c.poll(timeout_ms=200).items():
                got[tp.partition].extend(r.value for r in recs)
            return sum(map(len, got.values())) >= 30
        wait_until(poll, 20, interval=0, what="30 records through the group")
        assert c.assignment() == {TopicPartition(topic_name, i) for i in range(3)}
        assert got == {q: [f"v{i}".encode() for i in range(q, 30, 3)] for q in range(3)}
        c.commit()
        assert {q: c.committed(TopicPartition(topic_name, q)) for q in range(3)} == {0: 10, 1: 10, 2: 10}
    finally:
        c.close(autocommit=False)
    assert offset_fetch(bs, "smoke", topic_name, range(3)) == {q: (10, "") for q in range(3)}


def test_three_members_close_and_new_member_resumes(group_broker: BrokerProcess, fleet: Fleet,
                                                    topic_name: str) -> None:
    run_close_and_resume(fleet, group_broker.bootstrap_servers, "kafka-python", topic_name)


def test_sigkilled_member_partitions_move_after_session_timeout(group_broker: BrokerProcess, fleet: Fleet,
                                                                 topic_name: str) -> None:
    run_sigkill(fleet, group_broker.bootstrap_servers, "kafka-python", topic_name)
