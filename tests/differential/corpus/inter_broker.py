"""The controller <-> broker APIs a single ZooKeeper-mode broker serves: LeaderAndIsr (4),
StopReplica (5), UpdateMetadata (6), ControlledShutdown (7), AlterPartition (56), and the admin
API ElectLeaders (43), every version both brokers advertise.

The shared oracle serves every other case, so nothing here may change either broker's real state:
the controller requests carry a stale controller epoch (0: controller epochs start at 1) or a
stale broker epoch (1: below any registration czxid), ControlledShutdown names an unknown broker
or the broker itself with a stale epoch, AlterPartition a stale or unknown broker epoch, and
ElectLeaders asks only for elections that are not needed. A follow-up Metadata request shows the
case's topic kept its leaders and leader epochs. The broker's own id, host and port and the
topic id are per-broker variables saved by setup steps.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

from tests.differential.corpus.steps import create_topic
from tests.differential.framework import Case, Step, Var, Vars

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
ELECT_LEADERS, ALTER_PARTITION, METADATA = 43, 56, 3

STALE_CONTROLLER_EPOCH = 0   # Kafka's controller epochs start at 1
NO_BROKER_EPOCH = -1         # "not checked", as a controller from before KIP-380 sends
STALE_BROKER_EPOCH = 1       # below any broker registration's czxid
UNKNOWN_BROKER = 99
PREFERRED, UNCLEAN = 0, 1
UNKNOWN_TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-00000000beef")

# The broker as it describes itself (each broker has its own port; both have id 0).
THIS_BROKER = Step(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False},
                   save={"broker_id": "brokers.0.node_id", "host": "brokers.0.host", "port": "brokers.0.port",
                         "controller_id": "controller_id"})


def _setup(partitions: int = 2) -> list[Step]:
    return [THIS_BROKER, *create_topic(partitions=partitions)]


# What the case's topic looks like afterwards: the same leaders, leader epochs and ISR on both.
UNCHANGED = Step(METADATA, 12, {"topics": [{"name": "{topic}"}], "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": False,
                                "include_topic_authorized_operations": False})


def _partition_state(partition: int, controller_epoch: int, *, for_update_metadata: bool = False,
                     topic: str = "{topic}") -> dict[str, Any]:
    """A LeaderAndIsr or UpdateMetadata partition state naming this broker leader at epoch 0 (the
    fields a version lacks are left out by the encoder)."""
    state: dict[str, Any] = {"topic_name": topic, "partition_index": partition, "controller_epoch": controller_epoch,
                             "leader": Var("broker_id"), "leader_epoch": 0, "isr": [Var("broker_id")],
                             "replicas": [Var("broker_id")]}
    if for_update_metadata:
        return {**state, "zk_version": 0, "offline_replicas": []}
    return {**state, "partition_epoch": 0, "adding_replicas": [], "removing_replicas": [], "is_new": False,
            "leader_recovery_state": 0}


def leader_and_isr(version: int, controller_epoch: int, broker_epoch: int, partitions: int = 2) -> dict[str, Any]:
    states = [_partition_state(p, controller_epoch) for p in range(partitions)]
    body: dict[str, Any] = {"controller_id": Var("controller_id"), "is_k_raft_controller": False,
                            "controller_epoch": controller_epoch, "broker_epoch": broker_epoch, "request_type": 0,
                            "live_leaders": [{"broker_id": Var("broker_id"), "host_name": Var("host"),
                                              "port": Var("port")}]}
    if version < 2:
        body["ungrouped_partition_states"] = states
    else:
        body["topic_states"] = [{"topic_name": "{topic}", "topic_id": Var("topic_id"), "partition_states": states}]
    return body


def stop_replica(version: int, controller_epoch: int, broker_epoch: int, partitions: int = 2) -> dict[str, Any]:
    body: dict[str, Any] = {"controller_id": Var("controller_id"), "is_k_raft_controller": False,
                            "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
                            "delete_partitions": True}
    if version == 0:
        body["ungrouped_partitions"] = [{"topic_name": "{topic}", "partition_index": p} for p in range(partitions)]
    elif version < 3:
        body["topics"] = [{"name": "{topic}", "partition_indexes": list(range(partitions))}]
    else:
        body["topic_states"] = [{"topic_name": "{topic}", "partition_states": [
            {"partition_index": p, "leader_epoch": 0, "delete_partition": True} for p in range(partitions)]}]
    return body


def update_metadata(version: int, controller_epoch: int, broker_epoch: int, partitions: int = 2) -> dict[str, Any]:
    states = [_partition_state(p, controller_epoch, for_update_metadata=True) for p in range(partitions)]
    body: dict[str, Any] = {
        "controller_id": Var("controller_id"), "is_k_raft_controller": False, "request_type": 0,
        "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
        "live_brokers": [{"id": Var("broker_id"), "v0_host": Var("host"), "v0_port": Var("port"),
                          "endpoints": [{"port": Var("port"), "host": Var("host"), "listener": "PLAINTEXT",
                                         "security_protocol": 0}], "rack": None}]}
    if version < 5:
        body["ungrouped_partition_states"] = states
    else:
        body["topic_states"] = [{"topic_name": "{topic}", "topic_id": Var("topic_id"), "partition_states": states}]
    return body


def alter_partition(version: int, broker_id: Any, broker_epoch: int, topic_id: Any = None) -> dict[str, Any]:
    partition = {"partition_index": 0, "leader_epoch": 0, "new_isr": [Var("broker_id")],
                 "new_isr_with_epochs": [{"broker_id": Var("broker_id"), "broker_epoch": NO_BROKER_EPOCH}],
                 "leader_recovery_state": 0, "partition_epoch": 0}
    topic = {"topic_name": "{topic}", "topic_id": Var("topic_id") if topic_id is None else topic_id,
             "partitions": [partition]}
    return {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": [topic]}


def elect(election_type: int, topic_partitions: Any) -> dict[str, Any]:
    return {"election_type": election_type, "topic_partitions": topic_partitions, "timeout_ms": 10000}


def _header(api_key: int, version: int, corr: int = 77, flexible: bool = False) -> bytes:
    client_id = b"differential"
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    return header + (b"\x00" if flexible else b"")   # no tagged fields


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def controlled_shutdown_v0(v: Vars) -> bytes:
    """ControlledShutdown v0 goes with request header v0: no client id."""
    return _frame(struct.pack(">hhi", CONTROLLED_SHUTDOWN, 0, 78) + struct.pack(">i", UNKNOWN_BROKER))


def _truncated(api_key: int, version: int, body: bytes, flexible: bool = False):
    return lambda v: _frame(_header(api_key, version, flexible=flexible) + body)


def _own_topic(response: dict, variables: Vars) -> dict:
    """ElectLeaders over every partition answers about every topic of the (shared) broker:
    keep the case's own."""
    return {**response, "replica_election_results": [
        r for r in response["replica_election_results"] if r["topic"] == variables["topic"]]}


CASES = [
    # LeaderAndIsr: the broker epoch is checked first (v2+), then the controller epoch
    *[Case(f"leader_and_isr_v{v}_stale_controller_epoch", LEADER_AND_ISR, v,
           leader_and_isr(v, STALE_CONTROLLER_EPOCH, NO_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(0, 8)],
    *[Case(f"leader_and_isr_v{v}_stale_broker_epoch", LEADER_AND_ISR, v,
           leader_and_isr(v, STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(2, 8)],
    Case("leader_and_isr_v4_unknown_topic_stale_controller_epoch", LEADER_AND_ISR, 4,
         {**leader_and_isr(4, STALE_CONTROLLER_EPOCH, NO_BROKER_EPOCH, partitions=1),
          "topic_states": [{"topic_name": "{topic2}", "partition_states": [
              _partition_state(0, STALE_CONTROLLER_EPOCH, topic="{topic2}")]}]},
         setup=[THIS_BROKER]),
    Case("leader_and_isr_v7_truncated", LEADER_AND_ISR, 7,
         raw=_truncated(LEADER_AND_ISR, 7, struct.pack(">iib", 0, 0, 0) + b"\x00\x00", flexible=True)),
    Case("leader_and_isr_v1_truncated", LEADER_AND_ISR, 1,
         raw=_truncated(LEADER_AND_ISR, 1, struct.pack(">iii", 0, 0, 3) + b"\x00\x05ab")),

    # StopReplica (with delete): refused before any partition is looked at
    *[Case(f"stop_replica_v{v}_stale_controller_epoch", STOP_REPLICA, v,
           stop_replica(v, STALE_CONTROLLER_EPOCH, NO_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(0, 5)],
    *[Case(f"stop_replica_v{v}_stale_broker_epoch", STOP_REPLICA, v,
           stop_replica(v, STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(1, 5)],
    Case("stop_replica_v4_truncated", STOP_REPLICA, 4,
         raw=_truncated(STOP_REPLICA, 4, struct.pack(">iiq", 0, 0, -1), flexible=True)),

    # UpdateMetadata
    *[Case(f"update_metadata_v{v}_stale_controller_epoch", UPDATE_METADATA, v,
           update_metadata(v, STALE_CONTROLLER_EPOCH, NO_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(0, 9)],
    *[Case(f"update_metadata_v{v}_stale_broker_epoch", UPDATE_METADATA, v,
           update_metadata(v, STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(5, 9)],
    Case("update_metadata_v8_truncated", UPDATE_METADATA, 8,
         raw=_truncated(UPDATE_METADATA, 8, struct.pack(">ib", 0, 0), flexible=True)),

    # ControlledShutdown: unknown broker id (-1 or no epoch: BROKER_NOT_AVAILABLE; an epoch:
    # UNKNOWN_SERVER_ERROR), or this broker with a stale epoch (refused before anything moves)
    Case("controlled_shutdown_v0_unknown_broker", CONTROLLED_SHUTDOWN, 0, raw=controlled_shutdown_v0),
    Case("controlled_shutdown_v1_unknown_broker", CONTROLLED_SHUTDOWN, 1, {"broker_id": UNKNOWN_BROKER}),
    *[Case(f"controlled_shutdown_v{v}_unknown_broker_no_epoch", CONTROLLED_SHUTDOWN, v,
           {"broker_id": UNKNOWN_BROKER, "broker_epoch": NO_BROKER_EPOCH}) for v in (2, 3)],
    *[Case(f"controlled_shutdown_v{v}_unknown_broker_with_epoch", CONTROLLED_SHUTDOWN, v,
           {"broker_id": UNKNOWN_BROKER, "broker_epoch": 5}) for v in (2, 3)],
    *[Case(f"controlled_shutdown_v{v}_stale_broker_epoch", CONTROLLED_SHUTDOWN, v,
           {"broker_id": Var("broker_id"), "broker_epoch": STALE_BROKER_EPOCH}, setup=_setup(), then=[UNCHANGED])
      for v in (2, 3)],
    Case("controlled_shutdown_v3_truncated", CONTROLLED_SHUTDOWN, 3,
         raw=_truncated(CONTROLLED_SHUTDOWN, 3, struct.pack(">i", UNKNOWN_BROKER) + b"\x00\x00", flexible=True)),

    # AlterPartition: the broker epoch must equal the registered one (-1 included)
    *[Case(f"alter_partition_v{v}_stale_broker_epoch", ALTER_PARTITION, v,
           alter_partition(v, Var("broker_id"), STALE_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in range(0, 4)],
    *[Case(f"alter_partition_v{v}_no_broker_epoch", ALTER_PARTITION, v,
           alter_partition(v, Var("broker_id"), NO_BROKER_EPOCH), setup=_setup(), then=[UNCHANGED])
      for v in (0, 3)],
    *[Case(f"alter_partition_v{v}_unknown_broker", ALTER_PARTITION, v,
           alter_partition(v, UNKNOWN_BROKER, 5), setup=_setup(), then=[UNCHANGED]) for v in (1, 3)],
    Case("alter_partition_v2_unknown_topic_id_stale_broker_epoch", ALTER_PARTITION, 2,
         alter_partition(2, Var("broker_id"), STALE_BROKER_EPOCH, topic_id=UNKNOWN_TOPIC_ID), setup=[THIS_BROKER]),
    Case("alter_partition_v3_truncated", ALTER_PARTITION, 3,
         raw=_truncated(ALTER_PARTITION, 3, struct.pack(">iq", 0, 1) + b"\x05", flexible=True)),

    # ElectLeaders: only elections that are not needed (RF 1: the leader is the preferred replica)
    Case("elect_leaders_v0_preferred_not_needed", ELECT_LEADERS, 0,
         elect(PREFERRED, [{"topic": "{topic}", "partitions": [0]}]), setup=create_topic(), then=[UNCHANGED]),
    *[Case(f"elect_leaders_v{v}_preferred_not_needed", ELECT_LEADERS, v,
           elect(PREFERRED, [{"topic": "{topic}", "partitions": [0]}]), setup=create_topic(), then=[UNCHANGED])
      for v in (1, 2)],
    *[Case(f"elect_leaders_v{v}_unclean_leader_alive", ELECT_LEADERS, v,
           elect(UNCLEAN, [{"topic": "{topic}", "partitions": [0]}]), setup=create_topic(), then=[UNCHANGED])
      for v in (1, 2)],
    *[Case(f"elect_leaders_v{v}_unknown_topic", ELECT_LEADERS, v,
           elect(PREFERRED, [{"topic": "{topic}", "partitions": [0]}])) for v in (0, 1, 2)],
    Case("elect_leaders_v2_unknown_partition", ELECT_LEADERS, 2,
         elect(PREFERRED, [{"topic": "{topic}", "partitions": [3]}]), setup=create_topic()),
    Case("elect_leaders_v2_unclean_unknown_partition", ELECT_LEADERS, 2,
         elect(UNCLEAN, [{"topic": "{topic}", "partitions": [7]}]), setup=create_topic()),
    Case("elect_leaders_v2_no_partitions", ELECT_LEADERS, 2, elect(PREFERRED, [])),
    # null: every partition of every topic; those needing no election are left out of the answer
    *[Case(f"elect_leaders_v{v}_all_partitions", ELECT_LEADERS, v, elect(PREFERRED, None),
           setup=create_topic(partitions=2), project=_own_topic, then=[UNCHANGED]) for v in (0, 1, 2)],
    Case("elect_leaders_v2_truncated", ELECT_LEADERS, 2,
         raw=_truncated(ELECT_LEADERS, 2, b"\x00\x05\x02", flexible=True)),
    Case("elect_leaders_v1_bad_election_type", ELECT_LEADERS, 1,
         elect(5, [{"topic": "{topic}", "partitions": [0]}]), setup=create_topic()),
]
