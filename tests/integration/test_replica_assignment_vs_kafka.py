"""kafkalite.controller.replica_assignment against Apache Kafka 3.9 in ZooKeeper mode (the
session's `kafka_oracle`, one broker, id 0): for each bad CreateTopics / CreatePartitions request,
the error code and message Kafka answers equal those of the error our pure functions raise for
the same input (what the cluster controller will answer through `kafka_error_of`)."""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator, Optional

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest

from kafkalite.controller.replica_assignment import (
    AssignmentError, BrokerMetadata, assign_replicas_to_brokers, broker_metadatas, check_partition_increase,
    explicit_new_partitions, new_partitions_assignment, validate_topic_create_assignment)
from kafkalite.protocol.errors import kafka_error_of
from tests.integration.util import RawClient, create_topic


@pytest.fixture(scope="module")
def kafka(kafka_oracle: Any) -> Iterator[RawClient]:
    with RawClient(kafka_oracle.bootstrap_servers) as c:
        yield c


def ours(call: Callable[[], object]) -> tuple[int, Optional[str]]:
    try:
        call()
    except AssignmentError as e:
        return kafka_error_of(e)
    return 0, None


def kafka_create_topic(c: RawClient, *, num_partitions: int = -1, replication_factor: int = -1,
                       assignments: Optional[dict[int, list[int]]] = None) -> tuple[int, Optional[str]]:
    T = CreateTopicsRequest.CreatableTopic
    topic = T(name=f"ra-{uuid.uuid4().hex[:10]}", num_partitions=num_partitions,
              replication_factor=replication_factor,
              assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                           for p, b in (assignments or {}).items()], configs=[])
    resp = c.request(CreateTopicsRequest[c.version_for(CreateTopicsRequest)](
        topics=[topic], timeout_ms=10000, validate_only=True))
    t = resp.topics[0]
    return t.error_code, t.error_message


CREATE_TOPICS_ASSIGNMENTS = [
    {0: [0, 0]},
    {0: [0], 2: [0]},
    {1: [0], 2: [0]},
    {0: [0], 1: []},
    {-1: [0], 1: [0], 2: [0], 4: [0]},
    {p: [0, 0] for p in range(13)},
    {16: [0, 0], -1: [0, 0], 0: [0, 0], 1: [0, 0], 2: [0, 0]},
    {0: [0], 1: [0]},
    {0: [7]},   # unknown brokers are not checked by CreateTopics in ZooKeeper mode
]


@pytest.mark.parametrize("assignment", CREATE_TOPICS_ASSIGNMENTS)
def test_create_topics_explicit_assignment(kafka: RawClient, assignment: dict[int, list[int]]) -> None:
    assert kafka_create_topic(kafka, assignments=assignment) == ours(
        lambda: validate_topic_create_assignment(assignment))


@pytest.mark.parametrize("num_partitions,replication_factor", [(1, 2), (0, 1), (1, 0), (3, 5), (2, 1)])
def test_create_topics_generated_assignment(kafka: RawClient, num_partitions: int, replication_factor: int) -> None:
    assert kafka_create_topic(kafka, num_partitions=num_partitions, replication_factor=replication_factor) == ours(
        lambda: assign_replicas_to_brokers([BrokerMetadata(0)], num_partitions, replication_factor))


def kafka_create_partitions(c: RawClient, topic: str, count: int,
                            assignments: Optional[list[list[int]]]) -> tuple[int, Optional[str]]:
    T = CreatePartitionsRequest.CreatePartitionsTopic
    resp = c.request(CreatePartitionsRequest[c.version_for(CreatePartitionsRequest)](topics=[
        T(name=topic, count=count,
          assignments=None if assignments is None else [T.CreatePartitionsAssignment(broker_ids=b)
                                                        for b in assignments])],
        timeout_ms=10000, validate_only=True))
    r = resp.results[0]
    return r.error_code, r.error_message


def our_create_partitions(existing: dict[int, list[int]], count: int,
                          assignments: Optional[list[list[int]]]) -> None:
    """ZkAdminManager.createPartitions' order of checks over our functions."""
    brokers = broker_metadatas([BrokerMetadata(0)])
    increment = check_partition_increase(len(existing), count)
    explicit = None if assignments is None else explicit_new_partitions(
        len(existing), increment, assignments, [b.id for b in brokers])
    new_partitions_assignment("t", existing, brokers, count, explicit)


@pytest.mark.parametrize("count,assignments", [
    (3, [[0], [5]]),
    (3, [[0]]),
    (3, [[0, 0], [0]]),
    (3, [[0], []]),
    (2, [[0, 0]]),
    (1, None),
    (0, None),
    (3, None),
    (3, [[0], [0]]),
])
def test_create_partitions(kafka_oracle: Any, kafka: RawClient, count: int,
                           assignments: Optional[list[list[int]]]) -> None:
    topic = "ra-partitions"
    if kafka.metadata([topic]).topics[0].error_code != 0:
        create_topic(kafka_oracle.bootstrap_servers, topic, 1)
    assert kafka_create_partitions(kafka, topic, count, assignments) == ours(
        lambda: our_create_partitions({0: [0]}, count, assignments))
