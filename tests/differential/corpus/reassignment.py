"""Partition reassignment: AlterPartitionReassignments (45) v0 and ListPartitionReassignments (46)
v0 on a single broker (id 0, as the oracle's broker.id).

Only requests that leave the shared broker as they found it: Kafka's refusals (empty, duplicate
or negative replica lists, brokers that are not alive, unknown partitions, cancelling when nothing
is in progress), a reassignment to the replicas a partition already has (it completes at once,
with one leader epoch bump, as Kafka's onPartitionReassignment does), listings with nothing in
progress, and malformed frames. Reassignments that stay in progress need more brokers: see
tests/cluster/test_reassignment.py.
"""
from __future__ import annotations

import struct
from typing import Any, Optional, Sequence

from tests.differential.corpus.steps import METADATA, create_topic
from tests.differential.framework import Case, Step, Vars

ALTER, LIST = 45, 46

Parts = Sequence[tuple[int, Optional[list[int]]]]


def _alter(parts: Parts, topic: str = "{topic}", *more: tuple[str, Parts]) -> dict:
    topics = [(topic, parts), *more]
    return {"timeout_ms": 15000, "topics": [
        {"name": name, "partitions": [{"partition_index": p, "replicas": r} for p, r in ps]} for name, ps in topics]}


def _list(topics: Optional[Sequence[tuple[str, list[int]]]]) -> dict:
    return {"timeout_ms": 15000, "topics": None if topics is None else
            [{"name": name, "partition_indexes": ps} for name, ps in topics]}


def _sorted(response: dict, _variables: Vars) -> dict:
    """Kafka groups the per-partition results in hash maps (KafkaApis: `groupBy(_._1.topic)`), so
    their order is not defined: compare them by topic name and partition index."""
    return {**response, "responses": sorted(
        ({**t, "partitions": sorted(t["partitions"], key=lambda p: p["partition_index"])}
         for t in response["responses"]), key=lambda t: t["name"])}


def _leader_epoch_at_least(epoch: int):  # type: ignore[no-untyped-def]
    return lambda r: all(p["leader_epoch"] >= epoch for t in r["topics"] for p in t["partitions"])


def _metadata_after(epoch: int) -> Step:
    """Metadata once the reassignment's leader epoch has reached this broker's cache (the
    controller's UpdateMetadata is asynchronous); the exact epoch and replicas are compared."""
    return Step(METADATA, 12, {"topics": [{"name": "{topic}"}], "allow_auto_topic_creation": False},
                until=_leader_epoch_at_least(epoch))


def _list_all() -> Step:
    return Step(LIST, 0, _list(None))


# -- malformed frames (request header v2: flexible versions) ---------------------------------------

def _header_v2(api_key: int, version: int, corr: int = 77, client_id: bytes = b"hostile") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + b"\x00"


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _raw(data: bytes) -> Any:
    return lambda _v: data


# timeout, then a compact array announcing 2 topics (uvarint 3) and nothing after it
TRUNCATED_ALTER = _frame(_header_v2(ALTER, 0) + struct.pack(">i", 15000) + b"\x03")
# timeout, one topic whose compact name claims 20 bytes (uvarint 21) of which 3 arrive
TRUNCATED_ALTER_NAME = _frame(_header_v2(ALTER, 0) + struct.pack(">i", 15000) + b"\x02" + b"\x15abc")
# timeout only: the nullable topics array is missing
TRUNCATED_LIST = _frame(_header_v2(LIST, 0) + struct.pack(">i", 15000))
# a version Kafka 3.9 does not know (v1 arrived with Kafka 4.0's AllowReplicationFactorChange)
ALTER_V1 = _frame(_header_v2(ALTER, 1) + struct.pack(">i", 15000) + b"\x01\x01\x00")


CASES = [
    # -- refusals (KafkaController.validateReplicas) ----------------------------------------------
    Case("alter_partition_reassignments_v0_empty_replicas", ALTER, 0, _alter([(0, [])]), setup=create_topic()),
    Case("alter_partition_reassignments_v0_duplicate_replicas", ALTER, 0, _alter([(0, [0, 0])]),
         setup=create_topic()),
    Case("alter_partition_reassignments_v0_negative_broker", ALTER, 0, _alter([(0, [0, -3])]),
         setup=create_topic()),
    Case("alter_partition_reassignments_v0_dead_broker", ALTER, 0, _alter([(0, [5])]), setup=create_topic()),
    Case("alter_partition_reassignments_v0_dead_brokers_with_live_one", ALTER, 0, _alter([(0, [6, 0, 5])]),
         setup=create_topic()),
    # validation comes before the partition is looked up
    Case("alter_partition_reassignments_v0_unknown_topic_dead_broker", ALTER, 0, _alter([(0, [7])])),
    Case("alter_partition_reassignments_v0_unknown_topic", ALTER, 0, _alter([(0, [0])])),
    Case("alter_partition_reassignments_v0_unknown_partition", ALTER, 0, _alter([(3, [0])]), setup=create_topic()),
    Case("alter_partition_reassignments_v0_negative_partition", ALTER, 0, _alter([(-1, [0])]),
         setup=create_topic()),
    # null replicas: cancel, and there is nothing to cancel
    Case("alter_partition_reassignments_v0_cancel_none_in_progress", ALTER, 0, _alter([(0, None)]),
         setup=create_topic()),
    Case("alter_partition_reassignments_v0_cancel_unknown_topic", ALTER, 0, _alter([(0, None)])),
    # the same partition twice: the last entry counts (KafkaApis builds a Map)
    Case("alter_partition_reassignments_v0_partition_twice", ALTER, 0, _alter([(0, [0, 0]), (0, [])]),
         setup=create_topic()),
    Case("alter_partition_reassignments_v0_no_topics", ALTER, 0, {"timeout_ms": 15000, "topics": []}),
    Case("alter_partition_reassignments_v0_topic_without_partitions", ALTER, 0, _alter([]), setup=create_topic()),
    Case("alter_partition_reassignments_v0_mixed", ALTER, 0,
         _alter([(0, []), (1, None), (4, [0]), (2, [-1])], "{topic}", ("{topic2}", [(0, [0]), (1, [9])])),
         setup=create_topic(partitions=3), project=_sorted),
    # -- a reassignment to the current replicas: completes at once ---------------------------------
    # (onPartitionReassignment phase B: the leader stays and its epoch is bumped once; nothing
    # is left in progress)
    Case("alter_partition_reassignments_v0_to_current_replicas", ALTER, 0, _alter([(0, [0])]),
         setup=create_topic(), then=[_metadata_after(1), _list_all()]),
    Case("alter_partition_reassignments_v0_to_current_replicas_twice", ALTER, 0, _alter([(0, [0]), (1, [0])]),
         setup=[*create_topic(partitions=2), Step(ALTER, 0, _alter([(0, [0]), (1, [0])]))],
         then=[_metadata_after(2), _list_all()], project=_sorted),
    # -- listings with nothing in progress ---------------------------------------------------------
    Case("list_partition_reassignments_v0_all", LIST, 0, _list(None)),
    Case("list_partition_reassignments_v0_unknown_partitions", LIST, 0, _list([("{topic}", [0, 1]),
                                                                                ("{topic2}", [5])])),
    Case("list_partition_reassignments_v0_existing_not_reassigning", LIST, 0, _list([("{topic}", [0, 7])]),
         setup=create_topic()),
    Case("list_partition_reassignments_v0_no_topics", LIST, 0, _list([])),
    Case("list_partition_reassignments_v0_topic_without_partitions", LIST, 0, _list([("{topic}", [])]),
         setup=create_topic()),
    # -- malformed frames ------------------------------------------------------------------------
    Case("alter_partition_reassignments_v0_truncated", ALTER, 0, raw=_raw(TRUNCATED_ALTER)),
    Case("alter_partition_reassignments_v0_truncated_name", ALTER, 0, raw=_raw(TRUNCATED_ALTER_NAME)),
    Case("alter_partition_reassignments_v1_unsupported", ALTER, 0, raw=_raw(ALTER_V1)),
    Case("list_partition_reassignments_v0_truncated", LIST, 0, raw=_raw(TRUNCATED_LIST)),
]
