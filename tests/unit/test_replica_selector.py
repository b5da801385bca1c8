"""KIP-392 replica selection: replica.selector.class, RackAwareReplicaSelector and the leader's
choice of a preferred read replica (Kafka's ReplicaManager.findPreferredReadReplica), over a real
MetadataCache and a real leader Partition with its log in a temp dir."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.log_config import LogConfig
from kafkalite.config.server_config import KafkaConfig
from kafkalite.log.log import Log
from kafkalite.log.record_batch import build_batch
from kafkalite.replica.partition import Partition
from kafkalite.replica.replica_selector import (NO_NODE, RACK_AWARE_REPLICA_SELECTOR, STARTUP_FAILURE,
                                                ClassNotFoundException, ClientMetadata, Node, PartitionView,
                                                RackAwareReplicaSelector, ReplicaView, create_replica_selector,
                                                find_preferred_read_replica, partition_replica_endpoints,
                                                preferred_read_replica_of)

TP = TopicPartition("t", 0)
LEADER, F1, F2, F3 = 1, 2, 3, 4
NOW = 1_000_000


def client(rack: str = "") -> ClientMetadata:
    return ClientMetadata(rack_id=rack, client_id="consumer-1", client_address="/127.0.0.1", principal="User:ANONYMOUS",
                          listener_name="PLAINTEXT")


def node(broker_id: int, rack: str | None) -> Node:
    return Node(broker_id, f"b{broker_id}", 9092, rack)


# -- replica.selector.class ------------------------------------------------------------------------

def test_selector_class_default_is_leader_only_and_only_kafkas_rack_aware_class_loads() -> None:
    assert KafkaConfig().replica_selector_class is None
    assert create_replica_selector(None) is None
    configured = KafkaConfig.model_validate({"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    assert isinstance(create_replica_selector(configured.replica_selector_class), RackAwareReplicaSelector)
    for name in ("RackAwareReplicaSelector", "org.apache.kafka.common.replica.rackawarereplicaselector",
                 "com.example.ClosestReplicaSelector", ""):
        with pytest.raises(ClassNotFoundException) as e:
            create_replica_selector(name)
        assert str(e.value) == f"java.lang.ClassNotFoundException: {name}"
        assert e.value.class_name == name
    assert STARTUP_FAILURE == "Fatal error during KafkaServer startup. Prepare to shutdown"


# -- RackAwareReplicaSelector -------------------------------------------------------------------------

def test_rack_aware_selector() -> None:
    leader = ReplicaView(node(LEADER, "r1"), 100, 0)
    f1 = ReplicaView(node(F1, "r2"), 90, 50)
    f2 = ReplicaView(node(F2, "r2"), 95, 500)
    f3 = ReplicaView(node(F3, None), 100, 0)
    view = PartitionView(frozenset({leader, f1, f2, f3}), leader)
    s = RackAwareReplicaSelector()
    assert s.select(TP, client(""), view) is leader           # no client rack
    assert s.select(TP, client("r9"), view) is leader         # nobody in the client's rack
    assert s.select(TP, client("r1"), view) is leader         # the leader is in it
    assert s.select(TP, client("r2"), view) is f2             # the highest log end offset in r2
    # equal log end offsets: the more recently caught up, then the higher broker id
    g1, g2 = ReplicaView(node(F1, "r2"), 95, 10), ReplicaView(node(F2, "r2"), 95, 20)
    assert s.select(TP, client("r2"), PartitionView(frozenset({leader, g1, g2}), leader)) is g1
    h1, h2 = ReplicaView(node(F1, "r2"), 95, 10), ReplicaView(node(F2, "r2"), 95, 10)
    assert s.select(TP, client("r2"), PartitionView(frozenset({leader, h1, h2}), leader)) is h2


# -- findPreferredReadReplica ----------------------------------------------------------------------

@dataclass(frozen=True)
class Follower:
    log_end_offset: int
    log_start_offset: int
    last_caught_up_time_ms: int


RACKS = {LEADER: "r1", F1: "r2", F2: "r2", F3: "r3"}
ENDPOINTS = {b: node(b, r) for b, r in RACKS.items()}


def preferred(fetch_offset: int, followers: dict[int, Follower], isr: set[int], rack: str = "r2",
              replica_id: int = -1, leader_id_if_local: int | None = LEADER,
              endpoints: dict[int, Node] = ENDPOINTS) -> int | None:
    return find_preferred_read_replica(RackAwareReplicaSelector(), TP, client(rack), replica_id, fetch_offset, NOW,
                                       leader_id_if_local, 100, isr, followers, endpoints)


def test_preferred_read_replica_is_an_in_sync_follower_holding_the_offset() -> None:
    caught_up = Follower(100, 0, NOW)
    assert preferred(50, {F1: caught_up, F2: Follower(80, 0, NOW - 5000), F3: caught_up},
                     {LEADER, F1, F2, F3}) == F1
    # F1 out of the (committed) ISR: F2, though it lags, holds offset 50
    assert preferred(50, {F1: caught_up, F2: Follower(80, 0, NOW - 5000)}, {LEADER, F2}) == F2
    # F2 has not reached the fetch offset yet, F1 is out of the ISR: the leader (None)
    assert preferred(90, {F1: caught_up, F2: Follower(80, 0, NOW - 5000)}, {LEADER, F2}) is None
    # the fetch offset equal to a follower's log end offset still counts
    assert preferred(80, {F2: Follower(80, 0, NOW)}, {LEADER, F2}) == F2
    # F2 deleted the offset (log start past it)
    assert preferred(50, {F2: Follower(100, 60, NOW)}, {LEADER, F2}) is None
    assert preferred(60, {F2: Follower(100, 60, NOW)}, {LEADER, F2}) == F2


def test_no_preferred_read_replica_for_followers_non_leaders_other_racks_or_unreachable_replicas() -> None:
    followers = {F1: Follower(100, 0, NOW), F2: Follower(100, 0, NOW)}
    isr = {LEADER, F1, F2}
    assert preferred(50, followers, isr) == F2                             # same LEO and catch-up: higher id
    assert preferred(50, followers, isr, replica_id=F3) is None            # a follower's own fetch
    assert preferred(50, followers, isr, leader_id_if_local=None) is None  # not the leader here
    assert preferred(50, followers, isr, rack="r1") is None                # the leader's rack
    assert preferred(50, followers, isr, rack="") is None                  # no client rack
    assert preferred(50, followers, isr, rack="r3") is None                # F3 not a candidate
    assert find_preferred_read_replica(None, TP, client("r2"), -1, 50, NOW, LEADER, 100, isr, followers,
                                       ENDPOINTS) is None                  # replica.selector.class unset
    # a replica without an endpoint on the client's listener has no rack to match
    assert preferred(50, followers, isr, endpoints={LEADER: ENDPOINTS[LEADER], F1: ENDPOINTS[F1]}) == F1
    assert NO_NODE.is_empty and not ENDPOINTS[F1].is_empty


class _EmptyEndpointSelector:
    """Picks the first non-leader replica whatever its endpoint, like a custom selector might."""

    def select(self, tp: TopicPartition, client_metadata: ClientMetadata, view: PartitionView) -> ReplicaView | None:
        return next(r for r in view.replicas if r != view.leader)

    def configure(self, configs: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_selected_replica_without_endpoint_is_not_sent() -> None:
    assert find_preferred_read_replica(_EmptyEndpointSelector(), TP, client("r2"), -1, 50, NOW, LEADER, 100,
                                       {LEADER, F1}, {F1: Follower(100, 0, NOW)}, {LEADER: ENDPOINTS[LEADER]}) is None
    assert find_preferred_read_replica(_EmptyEndpointSelector(), TP, client("r2"), -1, 50, NOW, LEADER, 100,
                                       {LEADER, F1}, {F1: Follower(100, 0, NOW)}, ENDPOINTS) == F1


# -- over the metadata cache and a real leader partition ----------------------------------------------

def _cache() -> MetadataCache:
    cache = MetadataCache(broker_id=LEADER)
    cache.update_brokers([BrokerInfo(b, (BrokerEndpoint("PLAINTEXT", f"h{b}", 9000 + b),
                                         BrokerEndpoint("INTERNAL", f"i{b}", 9100 + b)), RACKS[b])
                          for b in (LEADER, F1, F2)] +
                         [BrokerInfo(F3, (BrokerEndpoint("INTERNAL", "i4", 9104),), "r2")], LEADER)
    cache.update_topic(TopicInfo("t", uuid.UUID(int=1), False, {
        0: PartitionInfo(0, LEADER, 1, (LEADER, F1, F2, F3, 5), (LEADER, F1, F2, F3))}))
    return cache


def test_partition_replica_endpoints_are_the_live_replicas_on_the_listener() -> None:
    cache = _cache()
    assert partition_replica_endpoints(cache, TP, "PLAINTEXT") == {
        LEADER: Node(LEADER, "h1", 9001, "r1"), F1: Node(F1, "h2", 9002, "r2"), F2: Node(F2, "h3", 9003, "r2")}
    assert sorted(partition_replica_endpoints(cache, TP, "INTERNAL")) == [LEADER, F1, F2, F3]  # 5 is not alive
    assert partition_replica_endpoints(cache, TopicPartition("t", 1), "PLAINTEXT") == {}


def test_preferred_read_replica_of_a_leader_partition(tmp_path: Path) -> None:
    cache = _cache()
    log = Log.open(tmp_path / "t-0", LogConfig())
    p = Partition(TP, uuid.UUID(int=1), log, LEADER)
    p.make_leader(1, [LEADER, F1, F2, F3], [LEADER, F1, F2, F3], partition_epoch=0, controller_epoch=1)
    p.append_records_to_leader(build_batch([(None, b"v%d" % i, NOW) for i in range(10)]), 1, NOW)
    # F1 has 6 records, F2 all 10, F3 (r2 too, but not on PLAINTEXT) all 10
    assert p.update_follower_fetch_state(F1, 6, 0, NOW, 10)
    assert p.update_follower_fetch_state(F2, 10, 0, NOW, 10)
    assert p.update_follower_fetch_state(F3, 10, 0, NOW, 10)
    selector = create_replica_selector(RACK_AWARE_REPLICA_SELECTOR)
    assert preferred_read_replica_of(p, selector, client("r2"), -1, 5, NOW, cache) == F2
    assert preferred_read_replica_of(p, selector, client("r1"), -1, 5, NOW, cache) is None
    assert preferred_read_replica_of(p, selector, None, -1, 5, NOW, cache) is None          # Fetch < v11
    assert preferred_read_replica_of(p, None, client("r2"), -1, 5, NOW, cache) is None      # no selector
    assert preferred_read_replica_of(p, selector, client("r2"), F3, 5, NOW, cache) is None  # follower fetch
    p.make_follower(F1, 2, [LEADER, F1, F2, F3], [F1, F2, F3], partition_epoch=1, controller_epoch=1)
    assert preferred_read_replica_of(p, selector, client("r2"), -1, 5, NOW, cache) is None  # not the leader
