"""KIP-951's leader hints: Kafka's KafkaApis.getCurrentLeader, shared by Produce (v10+) and Fetch
(v16+). A partition answered NOT_LEADER_OR_FOLLOWER (Fetch: or FENCED_LEADER_EPOCH) carries the
leader and epoch this broker knows, and the response lists those leaders' endpoints, so that a
client moves to the new leader without a metadata round trip."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalite.protocol.produce_response import NodeEndpoint

if TYPE_CHECKING:
    from kafkalite.cluster.metadata_cache import MetadataCache
    from kafkalite.replica.partition import TopicPartition
    from kafkalite.replica.replica_manager import ReplicaManager


def current_leader(replica_manager: "ReplicaManager", cache: "MetadataCache", tp: "TopicPartition",
                   listener_name: str, endpoints: dict[int, NodeEndpoint]) -> tuple[int, int]:
    """(leader id, leader epoch) from the broker's own replica of `tp`, else its metadata cache,
    else (-1, -1); the leader's endpoint on `listener_name` goes into `endpoints` when the leader
    is alive and has that listener (Kafka's getAliveBrokerNode)."""
    partition = replica_manager.get_partition(tp)
    if partition is not None:
        leader_id, leader_epoch = partition.leader_id, partition.leader_epoch
    else:
        info = cache.partition_info(tp)
        leader_id, leader_epoch = (info.leader, info.leader_epoch) if info is not None else (-1, -1)
    endpoint = cache.alive_endpoint(leader_id, listener_name)
    if endpoint is not None:
        endpoints[leader_id] = (leader_id, endpoint.host, endpoint.port, cache.brokers[leader_id].rack)
    return leader_id, leader_epoch
