"""kafkalite against Apache Kafka 3.9, request by request.

Each corpus case (tests/differential/corpus) runs its setup and its request over raw sockets on
the session's Kafka broker (`kafka_oracle`) and on a kafkalite broker started once for this
module with the same server.properties; the decoded answers must agree field by field, outside
a short list of allowed differences (compare.GLOBAL_ALLOWED, plus each case's own). Where one
side closes the connection the other must too.
"""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.differential.compare import GLOBAL_ALLOWED, differences
from tests.differential.corpus import all_cases
from tests.differential.framework import Case, Session, broker_like, run_case, unique_names

CASES = all_cases()

@pytest.fixture(scope="module")
def kafka(kafka_oracle) -> Iterator[Session]:
    session = Session("kafka", kafka_oracle.bootstrap_servers)
    yield session
    session.close()


@pytest.fixture(scope="module")
def lite(kafka_oracle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with broker_like(kafka_oracle.properties, tmp_path_factory.mktemp("differential")) as broker:
        session = Session("kafkalite", broker.bootstrap_servers)
        yield session
        session.close()


def compare(case: Case, kafka: Session, lite: Session) -> list[str]:
    names = unique_names(case.name)
    expected = run_case(kafka, case, names)
    actual = run_case(lite, case, names)
    if expected.kind != actual.kind:
        return [f"kafka: {expected.kind} {expected.response or ''}; kafkalite: {actual.kind} {actual.response or ''}"]
    allowed = {**GLOBAL_ALLOWED, **case.allow}
    found = list(differences(expected.summary(), actual.summary(), allowed))
    for i, (k, l) in enumerate(zip(expected.followups, actual.followups)):
        found += [f"then[{i}] {d}" for d in differences(k, l, allowed)]
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_same_answer_as_kafka(case: Case, kafka: Session, lite: Session) -> None:
    found = compare(case, kafka, lite)
    assert not found, f"{case.name} ({case.api_key} v{case.version}):\n  " + "\n  ".join(found)


# --- ApiVersions: the advertised ranges ---------------------------------------------------------

# Where the advertised ranges differ, and why (docs/compatibility.md, "Differential results").
# Only versions both brokers advertise are compared by the corpus.
NEWER = "kafkalite also serves the Kafka 4 version, for Kafka 4 clients"
RANGE_DIFFERENCES: dict[int, tuple[tuple[int, int], tuple[int, int], str]] = {
    # api key: (Kafka 3.9's range, kafkalite's range, why)
    0: ((0, 11), (0, 13), NEWER),
    1: ((0, 17), (0, 18), NEWER),
    2: ((0, 9), (0, 10), NEWER),
    3: ((0, 12), (0, 13), NEWER),
    8: ((0, 9), (1, 10), NEWER + "; v0 stores offsets in ZooKeeper in Kafka 3.9, not implemented"),
    9: ((0, 9), (1, 10), NEWER + "; v0 reads offsets from ZooKeeper in Kafka 3.9, not implemented"),
    15: ((0, 5), (0, 6), NEWER),
    35: ((0, 4), (0, 5), NEWER),
    60: ((0, 1), (0, 2), NEWER),
}

# APIs Apache Kafka 3.9 advertises (ZooKeeper mode) that kafkalite does not implement; see
# docs/compatibility.md, "Not yet implemented".
KAFKA_ONLY_APIS = frozenset({
    17, 36,              # SaslHandshake, SaslAuthenticate
    29, 30, 31,          # DescribeAcls, CreateAcls, DeleteAcls
    34,                  # AlterReplicaLogDirs
    38, 39, 40, 41,      # delegation tokens
    48, 49, 50, 51,      # client quotas, SCRAM credentials
    57, 58,              # UpdateFeatures, Envelope
    67, 68, 69,          # AllocateProducerIds (inter-broker), ConsumerGroupHeartbeat, ConsumerGroupDescribe
})


def advertised(session: Session) -> dict[int, tuple[int, int]]:
    outcome = session.exchange(18, 3, {"client_software_name": "differential", "client_software_version": "1"}, {})
    assert outcome.response is not None and outcome.response["error_code"] == 0
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in outcome.response["api_keys"]}


def common_versions(kafka_ranges: dict[int, tuple[int, int]],
                    lite_ranges: dict[int, tuple[int, int]]) -> set[tuple[int, int]]:
    return {(key, v) for key in kafka_ranges.keys() & lite_ranges.keys()
            for v in range(max(kafka_ranges[key][0], lite_ranges[key][0]),
                           min(kafka_ranges[key][1], lite_ranges[key][1]) + 1)}


def test_advertised_ranges_differ_only_where_documented(kafka: Session, lite: Session) -> None:
    kafka_ranges, lite_ranges = advertised(kafka), advertised(lite)
    assert set(kafka_ranges) - set(lite_ranges) == KAFKA_ONLY_APIS
    assert set(lite_ranges) <= set(kafka_ranges), "kafkalite advertises an API Kafka 3.9 lacks"
    differing = {key: (kafka_ranges[key], lite_ranges[key]) for key in lite_ranges
                 if kafka_ranges[key] != lite_ranges[key]}
    assert differing == {key: (k, l) for key, (k, l, _) in RANGE_DIFFERENCES.items()}


# Versions compared by another differential module rather than this corpus.
COMPARED_ELSEWHERE: dict[tuple[int, int], str] = {
    **{(0, v): "Produce v0-2 (message formats 0/1): test_message_format.py" for v in range(0, 3)},
    **{(1, v): "Fetch v0-3 (down-conversion): test_message_format.py" for v in range(0, 4)},
}


def test_corpus_covers_every_version_both_advertise(kafka: Session, lite: Session) -> None:
    """At least one case per (api, version) both brokers advertise."""
    covered = {(c.api_key, c.version) for c in CASES} | set(COMPARED_ELSEWHERE)
    missing = common_versions(advertised(kafka), advertised(lite)) - covered
    assert not missing, f"no differential case for (api key, version): {sorted(missing)}"
