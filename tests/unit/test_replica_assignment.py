"""Replica assignment and assignment validation: Kafka 3.9's AdminUtils examples (its doc comment
and AdminRackAwareTest's fixed cases), the messages and codes of AdminZkClient and
ZkAdminManager, and hypothesis properties of both algorithms."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.controller.replica_assignment import (
    NOT_ALL_BROKERS_HAVE_RACKS, NOT_ALL_BROKERS_HAVE_RACKS_FOR_ASSIGNMENT, AdminOperationError,
    AssignmentError, BrokerMetadata, BrokerNotAvailableError, InvalidPartitionsError,
    InvalidReplicaAssignmentError, InvalidReplicationFactorError, RackAwareMode,
    assign_replicas_to_brokers, broker_metadatas, check_partition_increase, explicit_new_partitions,
    new_partitions_assignment, rack_alternated_broker_list, replica_index,
    validate_replica_assignment, validate_topic_create_assignment)
from kafkalite.protocol.errors import ErrorCode, kafka_error_of


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def racked(mapping: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, r) for i, r in mapping.items()]


# --------------------------------------------------------------------------------------------
# Kafka's documented examples
# --------------------------------------------------------------------------------------------

def test_rack_unaware_doc_example_five_brokers_ten_partitions() -> None:
    # AdminUtils' table: first replicas round robin, followers with an increasing shift
    assignment = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, 0, 0)
    assert assignment == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }
    # the table read per broker: broker 0 holds p0, p5 first, p4, p8 second, p3, p7 third
    for position, expected in ((0, {0, 5}), (1, {4, 8}), (2, {3, 7})):
        assert {p for p, r in assignment.items() if r[position] == 0} == expected


def test_rack_alternated_list_doc_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    without_5 = {k: v for k, v in racks.items() if k != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]
    assert rack_alternated_broker_list({0: "r1", 1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r2",
                                        6: "r3", 7: "r3", 8: "r3"}) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_doc_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(racked(racks), 7, 3, 0, 0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2],  # followers shifted after the first round, not 0,3,1 again
    }


def test_broker_order_given_is_the_round_robin_order() -> None:
    assert assign_replicas_to_brokers(brokers(7, 3, 5), 3, 2, 0, 0) == {0: [7, 3], 1: [3, 5], 2: [5, 7]}


def test_start_partition_id_numbers_from_it_and_shifts_only_on_later_rounds() -> None:
    # as Kafka: the follower shift grows only when a round starts inside this call, so adding
    # partitions 8..11 does not reproduce a 12-partition creation's 8..11
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 4, 3, 0, 8) == {
        8: [3, 4, 0], 9: [4, 0, 1], 10: [0, 2, 3], 11: [1, 3, 4]}


def test_random_start_uses_the_given_rng_with_two_draws() -> None:
    draws = random.Random(42)
    start, shift = draws.randrange(4), draws.randrange(4)
    assignment = assign_replicas_to_brokers(brokers(0, 1, 2, 3), 4, 2, rng=random.Random(42))
    assert assignment == {p: [(start + p) % 4, (start + p + 1 + shift % 3) % 4] for p in range(4)}


def test_single_broker_replication_factor_one() -> None:
    assert assign_replicas_to_brokers(brokers(5), 3, 1) == {0: [5], 1: [5], 2: [5]}


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_partitions,rf,n_brokers,error,code,message", [
    (0, 1, 1, InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    (-3, 0, 1, InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    (1, 0, 1, InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0."),
    (1, -1, 3, InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0."),
    (3, 4, 3, InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 4 larger than available brokers: 3."),
    (1, 1, 0, InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 1 larger than available brokers: 0."),
])
def test_assignment_errors(n_partitions: int, rf: int, n_brokers: int, error: type, code: ErrorCode,
                           message: str) -> None:
    with pytest.raises(error) as e:
        assign_replicas_to_brokers(brokers(*range(n_brokers)), n_partitions, rf)
    assert (e.value.code, e.value.message) == (code, message)
    assert kafka_error_of(e.value) == (int(code), message)


def test_partly_racked_cluster_in_assignment_is_an_admin_failure() -> None:
    # CreateTopics passes the live brokers as they are: the rack-aware path finds a broker
    # without a rack and fails with AdminOperationException -> UNKNOWN_SERVER_ERROR, no message
    with pytest.raises(AdminOperationError) as e:
        assign_replicas_to_brokers([BrokerMetadata(0, "a"), BrokerMetadata(1)], 1, 1)
    assert e.value.message == NOT_ALL_BROKERS_HAVE_RACKS_FOR_ASSIGNMENT
    assert NOT_ALL_BROKERS_HAVE_RACKS_FOR_ASSIGNMENT == \
        "Not all brokers have rack information for replica rack aware assignment."
    assert kafka_error_of(e.value) == (int(ErrorCode.UNKNOWN_SERVER_ERROR), None)


def test_broker_metadatas_modes() -> None:
    mixed = [BrokerMetadata(2, "b"), BrokerMetadata(0), BrokerMetadata(1, "a")]
    with pytest.raises(AdminOperationError) as e:
        broker_metadatas(mixed)
    assert e.value.message == NOT_ALL_BROKERS_HAVE_RACKS == (
        "Not all brokers have rack information. Add --disable-rack-aware in command line"
        " to make replica assignment without rack information.")
    assert broker_metadatas(mixed, RackAwareMode.SAFE) == brokers(0, 1, 2)
    assert broker_metadatas(mixed, RackAwareMode.DISABLED) == brokers(0, 1, 2)
    full = [BrokerMetadata(2, "b"), BrokerMetadata(1, "a")]
    assert broker_metadatas(full) == [BrokerMetadata(1, "a"), BrokerMetadata(2, "b")]
    assert broker_metadatas(full, RackAwareMode.SAFE) == [BrokerMetadata(1, "a"), BrokerMetadata(2, "b")]
    assert broker_metadatas(brokers(3, 1)) == brokers(1, 3)


# AdminZkClientTest.testManualReplicaAssignment's bad assignments, with Kafka's messages
@pytest.mark.parametrize("assignment,message", [
    ({0: [0, 0]}, "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(0, 0))"),
    ({0: [0, 1], 1: [0]}, "All partitions should have the same number of replicas"),
    ({1: [1, 2], 2: [1, 2]}, "partitions should be a consecutive 0-based integer sequence"),
    ({0: [1, 2], 3: [1, 2]}, "partitions should be a consecutive 0-based integer sequence"),
    ({-1: [1, 2], 1: [1, 2], 2: [1, 2], 4: [1, 2]}, "partitions should be a consecutive 0-based integer sequence"),
    ({1: [2, 3], 0: [1, 1]},
     "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(1, 1), 1 -> ArrayBuffer(2, 3))"),
])
def test_validate_topic_create_assignment_errors(assignment: dict[int, list[int]], message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        validate_topic_create_assignment(assignment)
    assert kafka_error_of(e.value) == (int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), message)


def test_duplicate_message_follows_scala_hash_map_order() -> None:
    # 12 entries grow the table to 32 buckets: still ascending for small ids
    assignment = {p: [1, 2] for p in range(12)}
    assignment[5] = [1, 1]
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        validate_topic_create_assignment(assignment)
    assert e.value.message == "Duplicate replica assignment found: HashMap(" + ", ".join(
        f"{p} -> ArrayBuffer({'1, 1' if p == 5 else '1, 2'})" for p in range(12)) + ")"
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        validate_topic_create_assignment({16: [3, 4], -1: [4, 5], 0: [5, 6], 1: [6, 7], 2: [7, 7]})
    # 16, -1 and 0 share bucket 0 of 16; -1's improved hash 0xFFFF0000 is negative, so it comes first
    assert e.value.message == ("Duplicate replica assignment found: HashMap(-1 -> ArrayBuffer(4, 5), "
                               "0 -> ArrayBuffer(5, 6), 16 -> ArrayBuffer(3, 4), 1 -> ArrayBuffer(6, 7), "
                               "2 -> ArrayBuffer(7, 7))")


def test_validate_topic_create_assignment_accepts_good_ones() -> None:
    validate_topic_create_assignment({0: [0, 1, 2], 1: [1, 2, 3]})
    validate_topic_create_assignment({1: [9], 0: [8]})   # unknown brokers are not checked here


@pytest.mark.parametrize("assignment,error,message", [
    ({3: []}, InvalidReplicaAssignmentError, "Cannot have replication factor of 0 for partition id 3."),
    ({3: [1, 2, 1]}, InvalidReplicaAssignmentError,
     "Duplicate brokers not allowed in replica assignment: 1, 2, 1 for partition id 3."),
    ({3: [1, 7]}, BrokerNotAvailableError,
     "Some brokers specified for partition id 3 are not available. Specified brokers: 1, 7, "
     "available brokers: 0, 1, 2."),
    ({3: [1], 4: [0, 1], 5: [2]}, InvalidReplicaAssignmentError,
     "Inconsistent replication factor between partitions, partition 0 has 2 while partitions [3, 5] have "
     "replication factors [1, 1], respectively."),
])
def test_validate_replica_assignment(assignment: dict[int, list[int]], error: type, message: str) -> None:
    with pytest.raises(error) as e:
        validate_replica_assignment(assignment, 2, [0, 1, 2])
    assert e.value.message == message
    assert kafka_error_of(e.value)[1] == message


def test_broker_not_available_code() -> None:
    with pytest.raises(AssignmentError) as e:
        validate_replica_assignment({1: [5]}, 1, [0])
    assert e.value.code == ErrorCode.BROKER_NOT_AVAILABLE


# --------------------------------------------------------------------------------------------
# CreatePartitions
# --------------------------------------------------------------------------------------------

def test_check_partition_increase() -> None:
    assert check_partition_increase(3, 5) == 2
    with pytest.raises(InvalidPartitionsError) as e:
        check_partition_increase(3, 2)
    assert e.value.message == "Topic currently has 3 partitions, which is higher than the requested 2."
    with pytest.raises(InvalidPartitionsError) as e:
        check_partition_increase(3, 3)
    assert e.value.message == "Topic already has 3 partitions."


def test_explicit_new_partitions() -> None:
    assert explicit_new_partitions(2, 2, [[1, 0], [0, 2]], [0, 1, 2]) == {2: [1, 0], 3: [0, 2]}
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        explicit_new_partitions(2, 2, [[7, 0], [9, 7]], [0, 1, 2])
    assert e.value.message == "Unknown broker(s) in replica assignment: 7, 9."
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        explicit_new_partitions(2, 2, [[1, 0]], [0, 1, 2])
    assert e.value.message == "Increasing the number of partitions by 2 but 1 assignments provided."


def test_new_partitions_continue_from_partition_zero_leader() -> None:
    all_brokers = brokers(0, 1, 2, 3, 4)
    existing = assign_replicas_to_brokers(all_brokers, 3, 2, 2, 0)  # partition 0 led by broker 2
    added = new_partitions_assignment("t", existing, all_brokers, 8)
    # start index = index of the first broker with id >= 2, partition ids from 3
    assert added == assign_replicas_to_brokers(all_brokers, 5, 2, 2, 3)
    assert sorted(added) == [3, 4, 5, 6, 7]
    assert [added[p][0] for p in range(3, 8)] == [0, 1, 2, 3, 4]


def test_new_partitions_start_index_when_leader_is_gone() -> None:
    # partition 0's leader (9) is above every live id: indexWhere gives -1, max(0, -1) = 0
    added = new_partitions_assignment("t", {0: [9]}, brokers(1, 4), 3)
    assert added == {1: [4], 2: [1]}


def test_new_partitions_explicit_and_errors() -> None:
    all_brokers = brokers(0, 1, 2)
    assert new_partitions_assignment("t", {0: [0, 1]}, all_brokers, 2, {1: [2, 0]}) == {1: [2, 0]}
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        new_partitions_assignment("t", {0: [0, 1]}, all_brokers, 2, {1: [2]})
    assert e.value.message == ("Inconsistent replication factor between partitions, partition 0 has 2 while "
                               "partitions [1] have replication factors [1], respectively.")
    with pytest.raises(InvalidReplicationFactorError) as e:
        new_partitions_assignment("t", {0: [0, 1, 2]}, brokers(0, 1), 2)
    assert e.value.message == "Replication factor: 3 larger than available brokers: 2."
    with pytest.raises(AdminOperationError) as e:
        new_partitions_assignment("t", {1: [0]}, all_brokers, 3)
    assert e.value.message.startswith(
        "Unexpected existing replica assignment for topic 't', partition id 0 is missing. Assignment: ")
    with pytest.raises(InvalidPartitionsError) as e:
        new_partitions_assignment("t", {0: [0], 1: [1]}, all_brokers, 2)
    assert e.value.message == ("The number of partitions for a topic can only be increased. Topic t currently "
                               "has 2 partitions, 2 would not be an increase.")


def test_replica_index_never_hits_the_first_replica() -> None:
    for n in range(2, 8):
        for first in range(n):
            for shift in range(3 * n):
                assert all(replica_index(first, shift, j, n) != first for j in range(n))


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

@st.composite
def unaware_case(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    rf = draw(st.integers(1, len(ids)))
    n = draw(st.integers(1, 60))
    start = draw(st.integers(-1, len(ids) - 1))
    first_partition = draw(st.integers(-1, 30))
    return ids, n, rf, start, first_partition


@settings(max_examples=300, deadline=None)
@given(unaware_case(), st.integers(0, 2**32))
def test_rack_unaware_properties(case: tuple[list[int], int, int, int, int], seed: int) -> None:
    ids, n, rf, start, first_partition = case
    assignment = assign_replicas_to_brokers(brokers(*ids), n, rf, start, first_partition, random.Random(seed))
    first_id = max(0, first_partition)
    assert sorted(assignment) == list(range(first_id, first_id + n))
    for replicas in assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1


@st.composite
def aware_case(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int]:
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    racks = {b: draw(st.sampled_from(["r1", "r2", "r3", "r4"])) for b in ids}
    rf = draw(st.integers(1, len(ids)))
    n = draw(st.integers(1, 40))
    start = draw(st.integers(-1, len(ids) - 1))
    return racks, n, rf, start


@settings(max_examples=300, deadline=None)
@given(aware_case(), st.integers(0, 2**32))
def test_rack_aware_properties(case: tuple[dict[int, str], int, int, int], seed: int) -> None:
    racks, n, rf, start = case
    assignment = assign_replicas_to_brokers(racked(racks), n, rf, start, 0, random.Random(seed))
    assert sorted(assignment) == list(range(n))
    num_racks = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(racks)
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)
    # leaders go round robin over the rack-alternated list
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 100), st.sampled_from("abc"), min_size=1, max_size=15))
def test_rack_alternated_list_is_a_permutation_alternating_racks(racks: dict[int, str]) -> None:
    order = rack_alternated_broker_list(racks)
    assert sorted(order) == sorted(racks)
    # the first len(distinct racks) brokers are one per rack
    k = len(set(racks.values()))
    assert len({racks[b] for b in order[:k]}) == k
