"""Replica assignment for topic creation and partition addition, as Kafka 3.9 does it in
ZooKeeper mode (AdminUtils.assignReplicasToBrokers, AdminZkClient's validation and
createNewPartitionsAssignment, ZkAdminManager's CreatePartitions checks).

Pure functions over broker ids and racks; every failure is an `AssignmentError` carrying the
Kafka error code and Kafka's exact message, so a handler answers with `kafka_error_of(e)`.

Two orderings matter and are the caller's to supply:
- CreateTopics: Kafka passes the metadata cache's live brokers (hash order of its LongMap); with a
  random start index any order gives the same distribution, so pass them sorted by id.
- CreatePartitions: Kafka reads the registered brokers from ZooKeeper and sorts them by id
  (`broker_metadatas` does this).
"""
from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from kafkalite.protocol.errors import ErrorCode, KafkaApiError


# --------------------------------------------------------------------------------------------
# Errors (Kafka's exception classes, by their error codes)
# --------------------------------------------------------------------------------------------

class AssignmentError(KafkaApiError):
    """An assignment or validation failure; `code` and `message` are what Kafka answers."""

    code_of_class: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(self.code_of_class, message)


class InvalidPartitionsError(AssignmentError):
    code_of_class = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(AssignmentError):
    code_of_class = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(AssignmentError):
    code_of_class = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class BrokerNotAvailableError(AssignmentError):
    code_of_class = ErrorCode.BROKER_NOT_AVAILABLE


class AdminOperationError(AssignmentError):
    """Kafka's AdminOperationException: not an ApiException, so clients see
    UNKNOWN_SERVER_ERROR without the message (kafka_error_of drops it); the message is for logs."""
    code_of_class = ErrorCode.UNKNOWN_SERVER_ERROR


# --------------------------------------------------------------------------------------------
# Brokers
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BrokerMetadata:
    id: int
    rack: Optional[str] = None


class RackAwareMode(enum.Enum):
    """kafka.admin.RackAwareMode: ENFORCED refuses a partly racked cluster, SAFE falls back to
    rack-unaware for it, DISABLED ignores racks."""
    DISABLED = "disabled"
    ENFORCED = "enforced"
    SAFE = "safe"


NOT_ALL_BROKERS_HAVE_RACKS = ("Not all brokers have rack information. Add --disable-rack-aware in command line"
                              " to make replica assignment without rack information.")
NOT_ALL_BROKERS_HAVE_RACKS_FOR_ASSIGNMENT = ("Not all brokers have rack information for replica rack aware "
                                             "assignment.")


def broker_metadatas(brokers: Iterable[BrokerMetadata],
                     rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED) -> list[BrokerMetadata]:
    """AdminZkClient.getBrokerMetadatas: the brokers sorted by id, racks kept or dropped by mode.
    Raises AdminOperationError when ENFORCED and only some brokers have a rack (CreatePartitions
    in ZooKeeper mode calls this with ENFORCED)."""
    brokers = list(brokers)
    with_rack = [b for b in brokers if b.rack is not None]
    if rack_aware_mode is RackAwareMode.ENFORCED and with_rack and len(with_rack) < len(brokers):
        raise AdminOperationError(NOT_ALL_BROKERS_HAVE_RACKS)
    if rack_aware_mode is RackAwareMode.DISABLED or (
            rack_aware_mode is RackAwareMode.SAFE and len(with_rack) < len(brokers)):
        brokers = [BrokerMetadata(b.id, None) for b in brokers]
    return sorted(brokers, key=lambda b: b.id)


# --------------------------------------------------------------------------------------------
# AdminUtils.assignReplicasToBrokers
# --------------------------------------------------------------------------------------------

def replica_index(first_replica_index: int, second_replica_shift: int, replica_index_: int,
                  n_brokers: int) -> int:
    """Index of a follower: never the first replica's index (the shift is 1..n-1)."""
    shift = 1 + (second_replica_shift + replica_index_) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """One broker of each rack in turn (racks in name order, brokers of a rack in id order):
    {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} -> [0, 3, 1, 5, 4, 2]."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    positions = [0] * len(queues)
    rack_index = 0
    while len(result) < len(broker_racks):
        if positions[rack_index] < len(queues[rack_index]):
            result.append(queues[rack_index][positions[rack_index]])
            positions[rack_index] += 1
        rack_index = (rack_index + 1) % len(queues)
    return result


def assign_replicas_to_brokers(brokers: Sequence[BrokerMetadata], n_partitions: int,
                               replication_factor: int, fixed_start_index: int = -1,
                               start_partition_id: int = -1,
                               rng: Optional[random.Random] = None) -> dict[int, list[int]]:
    """Partition id -> replicas (first = preferred leader). Rack-unaware unless some broker has a
    rack, then rack-aware (and every broker must have one). A negative `fixed_start_index` draws
    the start index and the replica shift at random (two draws, as Kafka does); a non-negative
    one uses it for both. Partition ids start at max(0, start_partition_id)."""
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    if all(b.rack is None for b in brokers):
        return _assign_rack_unaware(n_partitions, replication_factor, [b.id for b in brokers],
                                    fixed_start_index, start_partition_id, rng)
    return _assign_rack_aware(n_partitions, replication_factor, brokers, fixed_start_index,
                              start_partition_id, rng)


def _start_and_shift(fixed_start_index: int, n_brokers: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start_index = rng.randrange(n_brokers)
    return start_index, rng.randrange(n_brokers)


def _assign_rack_unaware(n_partitions: int, replication_factor: int, broker_list: list[int],
                         fixed_start_index: int, start_partition_id: int,
                         rng: random.Random) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index, next_replica_shift = _start_and_shift(fixed_start_index, n, rng)
    assignment: dict[int, list[int]] = {}
    partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        # each full round of first replicas shifts the followers, so the same broker sets do
        # not repeat
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        replicas = [broker_list[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[replica_index(first, next_replica_shift, j, n)])
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


def _assign_rack_aware(n_partitions: int, replication_factor: int, brokers: Sequence[BrokerMetadata],
                       fixed_start_index: int, start_partition_id: int,
                       rng: random.Random) -> dict[int, list[int]]:
    broker_racks: dict[int, str] = {}
    for b in brokers:
        if b.rack is None:
            raise AdminOperationError(NOT_ALL_BROKERS_HAVE_RACKS_FOR_ASSIGNMENT)
        broker_racks[b.id] = b.rack
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    start_index, next_replica_shift = _start_and_shift(fixed_start_index, n, rng)
    assignment: dict[int, list[int]] = {}
    partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _j in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, next_replica_shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # prefer a rack without a replica until every rack has one, and a broker without
                # a replica until every broker has one
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and \
                        (broker not in brokers_with_replicas or len(brokers_with_replicas) == n):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


# --------------------------------------------------------------------------------------------
# Validation of explicit assignments
# --------------------------------------------------------------------------------------------

def _scala_seq(values: Sequence[int], name: str) -> str:
    return f"{name}({', '.join(map(str, values))})"


def validate_topic_create_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """The assignment checks of AdminZkClient.validateTopicCreate (CreateTopics; Kafka does not
    check for unknown brokers here). The duplicate message shows the whole assignment as Scala
    prints the HashMap of ArrayBuffers that CreateTopics builds."""
    if len({len(r) for r in assignment.values()}) != 1:
        raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            shown = ", ".join(f"{p} -> {_scala_seq(r, 'ArrayBuffer')}"
                              for p, r in _scala_int_hash_map_order(assignment))
            raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: HashMap({shown})")
    size = len(assignment)
    # Kafka's check exactly: the non-negative ids must sum to 0+1+..+(n-1)
    if sum(p for p in assignment if p >= 0) != size * (size - 1) // 2:
        raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")


def _scala_int_hash_map_order(assignment: Mapping[int, Sequence[int]]) -> list[tuple[int, Sequence[int]]]:
    """Iteration order of the scala.collection.mutable.HashMap[Int, _] that CreateTopics fills:
    by bucket (improved hash masked by the table size: 16, doubled whenever the next insert would
    reach 0.75 load), and within a bucket by signed improved hash."""
    table = 16
    for count in range(1, len(assignment) + 1):
        if count >= table * 0.75:
            table *= 2

    def improved(p: int) -> int:
        h = p & 0xFFFFFFFF
        h ^= h >> 16
        return h - (1 << 32) if h & 0x80000000 else h

    return sorted(assignment.items(), key=lambda kv: (improved(kv[0]) & (table - 1), improved(kv[0])))


def validate_replica_assignment(assignment: Mapping[int, Sequence[int]], expected_replication_factor: int,
                                available_broker_ids: Iterable[int]) -> None:
    """AdminZkClient.validateReplicaAssignment (CreatePartitions with explicit assignments):
    per partition in the given order, empty, duplicate and unavailable brokers; then partitions
    whose replication factor differs from partition 0's. Broker id lists are shown in the order
    given (Scala prints sets of more than 4 ids in hash order, which this does not mimic)."""
    available = list(dict.fromkeys(available_broker_ids))
    available_set = set(available)
    for partition_id, replicas in assignment.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(
                f"Cannot have replication factor of 0 for partition id {partition_id}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition_id}.")
        if not set(replicas) <= available_set:
            raise BrokerNotAvailableError(
                f"Some brokers specified for partition id {partition_id} are not available. "
                f"Specified brokers: {', '.join(map(str, replicas))}, "
                f"available brokers: {', '.join(map(str, available))}.")
    bad = sorted((p, len(r)) for p, r in assignment.items() if len(r) != expected_replication_factor)
    if bad:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has "
            f"{expected_replication_factor} while partitions [{', '.join(str(p) for p, _ in bad)}] have "
            f"replication factors [{', '.join(str(n) for _, n in bad)}], respectively.")


# --------------------------------------------------------------------------------------------
# CreatePartitions
# --------------------------------------------------------------------------------------------

def check_partition_increase(old_num_partitions: int, new_num_partitions: int) -> int:
    """ZkAdminManager.createPartitions' count check; returns the increment."""
    increment = new_num_partitions - old_num_partitions
    if increment < 0:
        raise InvalidPartitionsError(f"Topic currently has {old_num_partitions} partitions, which is higher "
                                     f"than the requested {new_num_partitions}.")
    if increment == 0:
        raise InvalidPartitionsError(f"Topic already has {old_num_partitions} partitions.")
    return increment


def explicit_new_partitions(existing_num_partitions: int, increment: int,
                            assignments: Sequence[Sequence[int]],
                            all_broker_ids: Iterable[int]) -> dict[int, list[int]]:
    """ZkAdminManager.createPartitions' checks of the request's assignments (unknown brokers,
    then their count), numbered from the existing partition count."""
    known = set(all_broker_ids)
    unknown = [b for b in dict.fromkeys(b for r in assignments for b in r) if b not in known]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(assignments) != increment:
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {increment} but {len(assignments)} assignments provided.")
    return {existing_num_partitions + i: list(r) for i, r in enumerate(assignments)}


def new_partitions_assignment(topic: str, existing_assignment: Mapping[int, Sequence[int]],
                              all_brokers: Sequence[BrokerMetadata], num_partitions: int,
                              replica_assignment: Optional[Mapping[int, Sequence[int]]] = None,
                              rng: Optional[random.Random] = None) -> dict[int, list[int]]:
    """AdminZkClient.createNewPartitionsAssignment: the assignment of the new partitions only.
    Without an explicit assignment the new partitions continue the round robin from the broker
    that leads partition 0 (start index = first broker with id >= it), with partition 0's
    replication factor."""
    if 0 not in existing_assignment:
        raise AdminOperationError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing. "
            f"Assignment: {dict(existing_assignment)}")
    partition0 = list(existing_assignment[0])
    if not partition0:  # Kafka fails on partition 0's head here; report it as an admin failure
        raise AdminOperationError(f"Partition 0 of topic '{topic}' has no replicas.")
    partitions_to_add = num_partitions - len(existing_assignment)
    if partitions_to_add <= 0:
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. Topic {topic} currently has "
            f"{len(existing_assignment)} partitions, {num_partitions} would not be an increase.")
    if replica_assignment is not None:
        validate_replica_assignment(replica_assignment, len(partition0), [b.id for b in all_brokers])
        return {p: list(r) for p, r in replica_assignment.items()}
    start_index = next((i for i, b in enumerate(all_brokers) if b.id >= partition0[0]), -1)
    return assign_replicas_to_brokers(all_brokers, partitions_to_add, len(partition0),
                                      max(0, start_index), len(existing_assignment), rng)
