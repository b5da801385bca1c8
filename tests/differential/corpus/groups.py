"""The classic group coordinator: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8),
OffsetFetch (9), DeleteGroups (42), OffsetDelete (47). Every case first waits until both
brokers have a coordinator for its group."""
from __future__ import annotations

import struct
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


def _string(value: str) -> bytes:
    return struct.pack(">h", len(value)) + value.encode()


def subscription(v: Vars) -> bytes:
    """ConsumerProtocolSubscription v0: the case's topic, null user data (Kafka parses the
    "consumer" subscriptions when a generation starts)."""
    return struct.pack(">hi", 0, 1) + _string(v["topic"]) + b"\xff\xff\xff\xff"


def assignment(v: Vars) -> bytes:
    """ConsumerProtocolAssignment v0: partition 0 of the case's topic, null user data."""
    return struct.pack(">hi", 0, 1) + _string(v["topic"]) + struct.pack(">ii", 1, 0) + b"\xff\xff\xff\xff"


METADATA = subscription
ASSIGNMENT = assignment
READY = coordinator_ready()


def _join(version: int, member_id: Any = "", session_timeout_ms: int = 6000, protocol_type: str = "consumer",
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


def _sync(member_id: Any = None, generation: Any = None, assignments: bool = True,
          group_instance_id: str | None = None) -> dict:
    member_id = Var("member_id") if member_id is None else member_id
    return {"group_id": "{group}", "generation_id": Var("generation_id") if generation is None else generation,
            "member_id": member_id, "group_instance_id": group_instance_id, "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": member_id, "assignment": ASSIGNMENT}] if assignments else []}


def stable_steps(group_instance_id: str | None = None) -> list[Step]:
    """A one-member group, Stable: joined (saves member_id, generation_id) and synced."""
    return [READY, *join_steps(group_instance_id=group_instance_id),
            Step(SYNC_GROUP, 5, _sync(group_instance_id=group_instance_id), until=lambda r: r["error_code"] == 0)]


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

# Every subscription and assignment here is valid ConsumerProtocol bytes: Kafka 3.9 parses a
# "consumer" group's subscriptions when a generation starts (GroupMetadata.computeSubscribedTopics),
# and garbage there throws out of the join completion and leaves the group in PreparingRebalance
# until the new-member timeout (5 minutes) — see docs/compatibility.md, "Differential results".
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

# --- Completed rebalances: a one-member group joined (generation 1) and, mostly, synced (Stable).
# Each case has its own group (unique_names), so no case waits on another's members. A second
# member (a follower) is not compared: its JoinGroup would wait for the first member to rejoin,
# which a single connection per broker cannot send while it waits.
STABLE = stable_steps()
STATIC = "i-1"
STATIC_STABLE = stable_steps(group_instance_id=STATIC)


def _next_generation(v: Vars) -> int:
    return v["generation_id"] + 1


def _previous_generation(v: Vars) -> int:
    return v["generation_id"] - 1


def who(response: dict, variables: Vars) -> dict:
    """Member ids differ per broker; who is who must not: whether the answer names the joining
    member as leader, and whether it kept the member id the setup saved."""
    if "member_id" not in response:
        return response
    return {**response, "leader_is_member": response.get("leader") == response["member_id"],
            "member_id_kept": response["member_id"] == variables.get("member_id")}


def _describe() -> dict:
    return {"groups": ["{group}"], "include_authorized_operations": True}


CASES += [
    # the whole JoinGroup flow: v0-3 join at once, v4+ after MEMBER_ID_REQUIRED
    Case(f"join_group_v{v}_completed", JOIN_GROUP, v, _join(v, Var("member_id") if v >= 4 else ""),
         setup=[READY, Step(JOIN_GROUP, v, _join(v), save={"member_id": "member_id"})] if v >= 4 else [READY],
         allow=MEMBER_IDS, project=who, then=[Step(DESCRIBE_GROUPS, 5, _describe())])
    for v in range(0, 10)
] + [
    Case("join_group_v9_leader_rejoins_stable", JOIN_GROUP, 9, _join(9, Var("member_id")), setup=STABLE,
         allow=MEMBER_IDS, project=who, then=[Step(DESCRIBE_GROUPS, 5, _describe())]),
    Case("join_group_v9_rejoin_completing_rebalance", JOIN_GROUP, 9, _join(9, Var("member_id")),
         setup=[READY, *join_steps()], allow=MEMBER_IDS, project=who),
] + [
    Case(f"join_group_v{v}_static_member", JOIN_GROUP, v, _join(v, group_instance_id=STATIC), setup=[READY],
         allow=MEMBER_IDS, project=who, then=[Step(DESCRIBE_GROUPS, 5, _describe())])
    for v in range(5, 10)
] + [
    Case(f"join_group_v{v}_static_member_rejoins", JOIN_GROUP, v, _join(v, group_instance_id=STATIC),
         setup=STATIC_STABLE, allow=MEMBER_IDS, project=who, then=[Step(DESCRIBE_GROUPS, 5, _describe())])
    for v in range(5, 10)
] + [
    Case("join_group_v9_static_member_rejoins_with_its_id", JOIN_GROUP, 9,
         _join(9, Var("member_id"), group_instance_id=STATIC), setup=STATIC_STABLE, allow=MEMBER_IDS, project=who),
] + [
    Case(f"sync_group_v{v}_leader", SYNC_GROUP, v, _sync(), setup=[READY, *join_steps()],
         allow=MEMBER_IDS, then=[Step(DESCRIBE_GROUPS, 5, _describe())])
    for v in range(0, 6)
] + [
    Case("sync_group_v5_static_leader", SYNC_GROUP, 5, _sync(group_instance_id=STATIC),
         setup=[READY, *join_steps(group_instance_id=STATIC)], allow=MEMBER_IDS),
    Case("sync_group_v5_stable_again", SYNC_GROUP, 5, _sync(), setup=STABLE, allow=MEMBER_IDS),
    Case("sync_group_v5_illegal_generation", SYNC_GROUP, 5, _sync(generation=_next_generation),
         setup=[READY, *join_steps()], allow=MEMBER_IDS),
    Case("sync_group_v5_inconsistent_protocol", SYNC_GROUP, 5, {**_sync(), "protocol_name": "roundrobin"},
         setup=[READY, *join_steps()], allow=MEMBER_IDS),
] + [
    Case(f"heartbeat_v{v}_stable", HEARTBEAT, v, _heartbeat(), setup=STABLE) for v in range(0, 5)
] + [
    Case(f"heartbeat_v{v}_illegal_generation", HEARTBEAT, v, _heartbeat(generation=_next_generation),
         setup=STABLE) for v in range(0, 5)
] + [
    Case("heartbeat_v4_completing_rebalance", HEARTBEAT, 4, _heartbeat(), setup=[READY, *join_steps()]),
    Case("heartbeat_v4_stable_unknown_member", HEARTBEAT, 4, _heartbeat(member_id=NOBODY), setup=STABLE),
    Case("heartbeat_v4_static_member", HEARTBEAT, 4, {**_heartbeat(), "group_instance_id": STATIC},
         setup=STATIC_STABLE),
] + [
    Case(f"leave_group_v{v}_member", LEAVE_GROUP, v, _leave(v), setup=STABLE, allow=MEMBER_IDS,
         then=[Step(DESCRIBE_GROUPS, 5, _describe())])
    for v in range(0, 6)
] + [
    Case("leave_group_v5_static_member", LEAVE_GROUP, 5,
         {"group_id": "{group}", "members": [{"member_id": "", "group_instance_id": STATIC, "reason": None}]},
         setup=STATIC_STABLE, allow=MEMBER_IDS, then=[Step(DESCRIBE_GROUPS, 5, _describe())]),
] + [
    Case(f"describe_groups_v{v}_stable", DESCRIBE_GROUPS, v, _describe(), setup=STABLE, allow=MEMBER_IDS)
    for v in range(0, 6)
] + [
    Case("describe_groups_v5_completing_rebalance", DESCRIBE_GROUPS, 5, _describe(),
         setup=[READY, *join_steps()], allow=MEMBER_IDS),
    Case("describe_groups_v5_static_stable", DESCRIBE_GROUPS, 5, _describe(), setup=STATIC_STABLE,
         allow=MEMBER_IDS),
] + [
    Case(f"list_groups_v{v}_stable", LIST_GROUPS, v, {"states_filter": [], "types_filter": []}, setup=STABLE,
         project=own_groups) for v in range(0, 6)
] + [
    Case("list_groups_v4_stable_filter", LIST_GROUPS, 4, {"states_filter": ["Stable"]}, setup=STABLE,
         project=own_groups),
    Case("list_groups_v4_completing_rebalance", LIST_GROUPS, 4, {"states_filter": []},
         setup=[READY, *join_steps()], project=own_groups),
] + [
    Case(f"offset_commit_v{v}_member", OFFSET_COMMIT, v,
         _commit(v, generation=Var("generation_id"), member_id=Var("member_id")),
         setup=[READY, *create_topic(partitions=2), *STABLE], then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))])
    for v in range(1, 10)
] + [
    Case(f"offset_commit_v{v}_stale_generation", OFFSET_COMMIT, v,
         _commit(v, generation=_previous_generation, member_id=Var("member_id")),
         setup=[READY, *create_topic(partitions=2), *STABLE], then=[Step(OFFSET_FETCH, 8, _fetch_offsets(8))])
    for v in (1, 5, 8, 9)
] + [
    Case("offset_commit_v8_stable_unknown_member", OFFSET_COMMIT, 8,
         _commit(8, generation=Var("generation_id"), member_id=NOBODY),
         setup=[READY, *create_topic(partitions=2), *STABLE]),
    Case("offset_commit_v8_completing_rebalance", OFFSET_COMMIT, 8,
         _commit(8, generation=Var("generation_id"), member_id=Var("member_id")),
         setup=[READY, *create_topic(partitions=2), *join_steps()]),
    Case("offset_commit_v8_stable_no_generation", OFFSET_COMMIT, 8, _commit(8),
         setup=[READY, *create_topic(partitions=2), *STABLE]),
    Case("offset_fetch_v8_stable_member", OFFSET_FETCH, 8, _fetch_offsets(8),
         setup=[READY, *create_topic(partitions=2), *STABLE,
                Step(OFFSET_COMMIT, 8, _commit(8, generation=Var("generation_id"), member_id=Var("member_id")))]),
    Case("delete_groups_v2_stable", DELETE_GROUPS, 2, {"groups_names": ["{group}"]}, setup=STABLE),
]
