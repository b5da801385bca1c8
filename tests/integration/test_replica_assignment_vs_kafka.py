"""kafkalite.controller.replica_assignment against Apache Kafka 3.9 in ZooKeeper mode (the
session's `kafka_oracle`, one broker, id 0): for each bad CreateTopics / CreatePartitions request,
the error code and message Kafka answers equal those of the error our pure functions raise for
the same input (what the cluster controller will answer through `kafka_error_of`). And the
assignment algorithm itself: Kafka's AdminUtils (from the oracle's jars, run by a small Java
program) and ours give the same assignment or the same error on thousands of random cases, with
and without racks."""
from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path
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


# --------------------------------------------------------------------------------------------
# The algorithm itself: Kafka's AdminUtils run on the same random cases (tests/java/AssignReplicasCheck.java)
# --------------------------------------------------------------------------------------------

JAVA_ERRORS = {"InvalidPartitionsException": "InvalidPartitionsError",
               "InvalidReplicationFactorException": "InvalidReplicationFactorError",
               "AdminOperationException": "AdminOperationError"}


def _random_case(rng: random.Random) -> tuple[int, int, int, int, list[BrokerMetadata]]:
    ids = rng.sample(range(0, 40), rng.randint(1, 10))
    shape = rng.random()
    racks = ["r1", "r2", "r3", "r4"][:rng.randint(1, 4)]
    if shape < 0.4:
        brokers = [BrokerMetadata(i) for i in ids]
    elif shape < 0.95:
        brokers = [BrokerMetadata(i, rng.choice(racks)) for i in ids]
    else:   # some brokers without a rack
        brokers = [BrokerMetadata(i, rng.choice(racks + [None])) for i in ids]
    n_partitions = rng.randint(-1, 30)
    rf = rng.randint(-1, len(ids) + 1)
    return n_partitions, rf, rng.randint(0, 2 * len(ids)), rng.randint(-1, 40), brokers


def _our_answer(case: tuple[int, int, int, int, list[BrokerMetadata]]) -> str:
    n_partitions, rf, start, first_partition, brokers = case
    try:
        assignment = assign_replicas_to_brokers(brokers, n_partitions, rf, start, first_partition)
    except AssignmentError as e:
        return f"ERR {type(e).__name__} {e.message}"
    return ";".join(f"{p}={','.join(map(str, r))}" for p, r in sorted(assignment.items()))


def test_assignment_equals_kafkas_admin_utils(tmp_path: Any) -> None:
    from tests.support.kafka_oracle import kafka_jars

    if shutil.which("java") is None:
        pytest.fail("needs Java (scripts/test.sh installs a JDK)")
    rng = random.Random(20261125)
    cases = [_random_case(rng) for _ in range(3000)]
    lines = [f"{n} {rf} {start} {first} " + ",".join(f"{b.id}:{b.rack or '-'}" for b in brokers)
             for n, rf, start, first, brokers in cases]
    source = Path(__file__).resolve().parents[1] / "java" / "AssignReplicasCheck.java"
    r = subprocess.run(["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", ":".join(map(str, kafka_jars())),
                        str(source)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    theirs = r.stdout.splitlines()
    assert len(theirs) == len(cases)
    for line, case, answer in zip(lines, cases, theirs):
        for java_name, our_name in JAVA_ERRORS.items():
            answer = answer.replace(f"ERR {java_name} ", f"ERR {our_name} ")
        assert _our_answer(case) == answer, f"case {line}"
    outcomes = Counter(a.split(" ")[1] if a.startswith("ERR") else "ok" for a in theirs)
    assert outcomes["ok"] > 1500 and len(outcomes) == 4, outcomes
