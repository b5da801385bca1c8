"""The classic group coordinator: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8),
OffsetFetch (9), DeleteGroups (42), OffsetDelete (47). Every case first waits until both
brokers have a coordinator for its group."""
from __future__ import annotations

from typing import Any

from tests.differential.corpus.steps import coordinator_ready, create_topic, produce
from tests.differential.framework import Case, Step, Var, Vars

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 8, 9, 42, 47

# Kafka names a member "<client id>-<UUID>": the id differs, its presence must not.
MEMBER_IDS = {
    "member_id": "member ids carry a random UUID",
    "leader": "member ids carry a random UUID",
    "members[*].member_id": "member ids carry a random UUID",
    "groups[*].members[*].member_id": "member ids carry a random UUID",
}
METADATA = b"\x00\x03subscription-bytes"
ASSIGNMENT = b"\x00\x03assignment-bytes"
READY = coordinator_ready()


def _join(version: int, member_id: Any = "", session_timeout_ms: int = 10000, protocol_type: str = "consumer",
          protocols: list | None = None, group_instance_id: str | None = None) -> dict:
    return {"group_id": "{group}", "session_timeout_ms": session_timeout_ms, "rebalance_timeout_ms": 10000,
            "member_id": member_id, "group_instance_id": group_instance_id, "protocol_type": protocol_type,
            "protocols": protocols if protocols is not None else [{"name": "range", "metadata": METADATA}],
            "reason": "differential"}


def join_steps(version: int = 9, group_instance_id: str | None = None) -> list[Step]:
    """A one-member group through JoinGroup (twice from v4: MEMBER_ID_REQUIRED first); saves
    member_id and generation_id."""
    first = Step(JOIN_GROUP, version, _join(version, group_instance_id=group_instance_id),
                 save={"member_id": "member_id"})
    second = Step(JOIN_GROUP, version, _join(version, Var("member_id"), group_instance_id=group_instance_id),
                  until=lambda r: r["error_code"] == 0, save={"generation_id": "generation_id"})
    return [first, second] if version >= 4 and group_instance_id is None else \
        [Step(JOIN_GROUP, version, _join(version, group_instance_id=group_instance_id),
              until=lambda r: r["error_code"] == 0,
              save={"member_id": "member_id", "generation_id": "generation_id"})]


def _sync(member_id: Any = None, generation: Any = None, assignments: bool = True) -> dict:
    member_id = Var("member_id") if member_id is None else member_id
    return {"group_id": "{group}", "generation_id": Var("generation_id") if generation is None else generation,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": member_id, "assignment": ASSIGNMENT}] if assignments else []}


def stable_steps() -> list[Step]:
    return [READY, *join_steps(), Step(SYNC_GROUP, 5, _sync(), until=lambda r: r["error_code"] == 0)]


def _heartbeat(member_id: Any = None, generation: Any = None) -> dict:
    return {"group_id": "{group}", "generation_id": Var("generation_id") if generation is None else generation,
            "member_id": Var("member_id") if member_id is None else member_id, "group_instance_id": None}


def _leave(version: int, member_id: Any = None) -> dict:
    member_id = Var("member_id") if member_id is None else member_id
    if version >= 3:
        return {"group_id": "{group}", "members": [{"member_id": member_id, "group_instance_id": None,
                                                   "reason": "differential"}]}
    return {"group_id": "{group}", "member_id": member_id}


def _commit(version: int, offset: int = 3, partition: int = 0, topic: str = "{topic}", generation: int = -1,
            member_id: str = "", metadata: str | None = "meta") -> dict:
    return {"group_id": "{group}", "generation_id_or_member_epoch": generation, "member_id": member_id,
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [{
                "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                "commit_timestamp": -1, "committed_metadata": metadata}]}]}


def commit_step(offset: int = 3) -> Step:
    return Step(OFFSET_COMMIT, 8, _commit(8, offset),
                until=lambda r: r["topics"][0]["partitions"][0]["error_code"] == 0)


def _fetch_offsets(version: int, topics: list | None = None, require_stable: bool = False) -> dict:
    topics = [{"name": "{topic}", "partition_indexes": [0, 1]}] if topics is None else topics
    if version >= 8:
        return {"groups": [{"group_id": "{group}", "member_id": None, "member_epoch": -1, "topics": topics}],
                "require_stable": require_stable}
    return {"group_id": "{group}", "topics": topics, "require_stable": require_stable}


def _find(version: int, key: str = "{group}", key_type: int = 0) -> dict:
    if version >= 4:
        return {"key_type": key_type, "coordinator_keys": [key]}
    return {"key": key, "key_type": key_type}


def own_groups(response: dict, variables: Vars) -> dict:
    """ListGroups lists every group of the broker: keep the case's own."""
    return {**response, "groups": [g for g in response["groups"] if g["group_id"] == variables["group"]]}


COMMITTED = [READY, *create_topic(partitions=2), produce(), commit_step()]
# An Empty group that exists (it has committed offsets) and has no members.
EMPTY_GROUP = COMMITTED
NOBODY = "nobody"

# Cases that need a completed rebalance (JoinGroup answered with a generation) are not in the
# corpus: the session's Kafka 3.9 broker (ZooKeeper mode, group.initial.rebalance.delay.ms=0)
# leaves a first JoinGroup in PreparingRebalance until the 5-minute new-member timeout, so the
# group APIs are compared on what answers at once: MEMBER_ID_REQUIRED, unknown members and
# groups, invalid timeouts and protocols, Empty groups with committed offsets.
CASES = [
    Case(f"find_coordinator_v{v}", FIND_COORDINATOR, v, _find(v), setup=[READY]) for v in range(0, 7)
] + [
    Case("find_coordinator_v6_share_key_type", FIND_COORDINATOR, 6, _find(6, key_type=2), setup=[READY]),
    Case("find_coordinator_v3_unknown_key_type", FIND_COORDINATOR, 3, _find(3, key_type=5), setup=[READY]),
    Case("find_coordinator_v4_no_keys", FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": []}),
] + [
    Case(f"join_group_v{v}_unknown_member", JOIN_GROUP, v, _join(v, NOBODY), setup=EMPTY_GROUP, allow=MEMBER_IDS)
    for v in range(0, 10)
] + [
    Case(f"join_group_v{v}_member_id_required", JOIN_GROUP, v, _join(v), setup=[READY], allow=MEMBER_IDS)
    for v in range(4, 10)
] + [
    Case("join_group_v9_session_timeout_too_small", JOIN_GROUP, 9, _join(9, session_timeout_ms=10),
         setup=[READY], allow=MEMBER_IDS),
    Case("join_group_v9_session_timeout_too_large", JOIN_GROUP, 9, _join(9, session_timeout_ms=1_800_001),
         setup=[READY], allow=MEMBER_IDS),
    Case("join_group_v9_empty_protocol_type", JOIN_GROUP, 9, _join(9, protocol_type=""), setup=[READY],
         allow=MEMBER_IDS),
    Case("join_group_v9_no_protocols", JOIN_GROUP, 9, _join(9, protocols=[]), setup=[READY], allow=MEMBER_IDS),
    Case("join_group_v9_empty_group_id", JOIN_GROUP, 9, {**_join(9), "group_id": ""}, allow=MEMBER_IDS),
    Case("join_group_v9_unknown_static_member_id", JOIN_GROUP, 9, _join(9, NOBODY, group_instance_id="i-1"),
         setup=EMPTY_GROUP, allow=MEMBER_IDS),
] + [
    Case(f"sync_group_v{v}_unknown_member", SYNC_GROUP, v, _sync(member_id=NOBODY, generation=1),
         setup=EMPTY_GROUP) for v in range(0, 6)
] + [
    Case("sync_group_v5_unknown_group", SYNC_GROUP, 5, _sync(member_id=NOBODY, generation=1), setup=[READY]),
    Case("sync_group_v5_empty_group_id", SYNC_GROUP, 5, {**_sync(member_id=NOBODY, generation=1), "group_id": ""}),
] + [
    Case(f"heartbeat_v{v}_unknown_member", HEARTBEAT, v, _heartbeat(member_id=NOBODY, generation=1),
         setup=EMPTY_GROUP) for v in range(0, 5)
] + [
    Case("heartbeat_v4_unknown_group", HEARTBEAT, 4, _heartbeat(member_id=NOBODY, generation=1), setup=[READY]),
    Case("heartbeat_v4_generation_minus_one", HEARTBEAT, 4, _heartbeat(member_id="", generation=-1),
         setup=EMPTY_GROUP),
] + [
    Case(f"leave_group_v{v}_unknown_member", LEAVE_GROUP, v, _leave(v, NOBODY), setup=EMPTY_GROUP)
    for v in range(0, 6)
] + [
    Case("leave_group_v1_unknown_group", LEAVE_GROUP, 1, _leave(1, NOBODY), setup=[READY]),
    Case("leave_group_v4_unknown_group", LEAVE_GROUP, 4, _leave(4, NOBODY), setup=[READY]),
    Case("leave_group_v5_static_member_unknown", LEAVE_GROUP, 5,
         {"group_id": "{group}", "members": [{"member_id": "", "group_instance_id": "i-1", "reason": None}]},
         setup=EMPTY_GROUP),
] + [
    Case(f"describe_groups_v{v}_empty", DESCRIBE_GROUPS, v,
         {"groups": ["{group}"], "include_authorized_operations": True}, setup=EMPTY_GROUP) for v in range(0, 6)
] + [
    Case(f"describe_groups_v{v}_unknown", DESCRIBE_GROUPS, v,
         {"groups": ["{group}"], "include_authorized_operations": False}, setup=[READY]) for v in (0, 5)
] + [
    Case(f"list_groups_v{v}", LIST_GROUPS, v, {"states_filter": [], "types_filter": []}, setup=EMPTY_GROUP,
         project=own_groups) for v in range(0, 6)
] + [
    Case("list_groups_v4_state_filter", LIST_GROUPS, 4, {"states_filter": ["empty"]}, setup=EMPTY_GROUP,
         project=own_groups),
    Case("list_groups_v4_other_state", LIST_GROUPS, 4, {"states_filter": ["Stable"]}, setup=EMPTY_GROUP,
         project=own_groups),
    Case("list_groups_v5_type_filter", LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]},
         setup=EMPTY_GROUP, project=own_groups),
    Case("list_groups_v5_consumer_type_filter", LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]},
         setup=EMPTY_GROUP, project=own_groups),
] + [
    Case(f"offset_commit_v{v}", OFFSET_COMMIT, v, _commit(v), setup=[READY, *create_topic(partitions=2)],
         then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))])
    for v in range(1, 10)
] + [
    Case("offset_commit_v1_explicit_commit_timestamp", OFFSET_COMMIT, 1,
         {**_commit(1), "topics": [{"name": "{topic}", "partitions": [{
             "partition_index": 0, "committed_offset": 7, "commit_timestamp": 1_000_000, "committed_metadata": "x"}]}]},
         setup=[READY, *create_topic(partitions=2)], then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))]),
    Case("offset_commit_v1_unknown_member", OFFSET_COMMIT, 1, _commit(1, generation=1, member_id=NOBODY),
         setup=EMPTY_GROUP),
    Case("offset_commit_v8_unknown_topic", OFFSET_COMMIT, 8, _commit(8, topic="{topic2}"), setup=[READY]),
    Case("offset_commit_v8_unknown_partition", OFFSET_COMMIT, 8, _commit(8, partition=7),
         setup=[READY, *create_topic()]),
    Case("offset_commit_v8_metadata_too_large", OFFSET_COMMIT, 8, _commit(8, metadata="m" * 5000),
         setup=[READY, *create_topic()]),
    Case("offset_commit_v8_negative_offset", OFFSET_COMMIT, 8, _commit(8, offset=-5),
         setup=[READY, *create_topic()], then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))]),
    Case("offset_commit_v8_null_metadata", OFFSET_COMMIT, 8, _commit(8, metadata=None),
         setup=[READY, *create_topic()], then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))]),
    Case("offset_commit_v8_generation_of_missing_group", OFFSET_COMMIT, 8, _commit(8, generation=3, member_id="m"),
         setup=[READY, *create_topic()]),
    Case("offset_commit_v9_generation_of_missing_group", OFFSET_COMMIT, 9, _commit(9, generation=3, member_id="m"),
         setup=[READY, *create_topic()]),
    Case("offset_commit_v8_empty_group_with_generation", OFFSET_COMMIT, 8,
         _commit(8, generation=9, member_id=NOBODY), setup=EMPTY_GROUP),
    Case("offset_commit_v8_invalid_topic_name", OFFSET_COMMIT, 8, _commit(8, topic="bad/name"), setup=[READY]),
] + [
    Case(f"offset_fetch_v{v}", OFFSET_FETCH, v, _fetch_offsets(v), setup=COMMITTED) for v in range(1, 10)
] + [
    Case(f"offset_fetch_v{v}_all_topics", OFFSET_FETCH, v, _fetch_offsets(v) | (
        {"groups": [{"group_id": "{group}", "member_id": None, "member_epoch": -1, "topics": None}]}
        if v >= 8 else {"topics": None}), setup=COMMITTED) for v in (2, 7, 8)
] + [
    Case("offset_fetch_v7_unknown_group", OFFSET_FETCH, 7, _fetch_offsets(7), setup=[READY, *create_topic()]),
    Case("offset_fetch_v8_unknown_topic", OFFSET_FETCH, 8,
         _fetch_offsets(8, topics=[{"name": "{topic2}", "partition_indexes": [0]}]), setup=COMMITTED),
    Case("offset_fetch_v7_require_stable", OFFSET_FETCH, 7, _fetch_offsets(7, require_stable=True),
         setup=COMMITTED),
] + [
    Case(f"delete_groups_v{v}", DELETE_GROUPS, v, {"groups_names": ["{group}"]}, setup=COMMITTED)
    for v in range(0, 3)
] + [
    Case("delete_groups_v2_unknown", DELETE_GROUPS, 2, {"groups_names": ["{group}"]}, setup=[READY]),
    Case("offset_delete_v0", OFFSET_DELETE, 0,
         {"group_id": "{group}", "topics": [{"name": "{topic}", "partitions": [{"partition_index": 0}]}]},
         setup=COMMITTED, then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))]),
    Case("offset_delete_v0_unknown_group", OFFSET_DELETE, 0,
         {"group_id": "{group}", "topics": [{"name": "{topic}", "partitions": [{"partition_index": 0}]}]},
         setup=[READY]),
    Case("offset_delete_v0_unknown_topic", OFFSET_DELETE, 0,
         {"group_id": "{group}", "topics": [{"name": "{topic2}", "partitions": [{"partition_index": 0}]}]},
         setup=COMMITTED),
]
