"""AlterPartitionManager against a real 3-broker cluster: this test process plays the leader of a
partition (its broker id and broker epoch) and asks the real controller to shrink the ISR. The
controller writes the state znode conditionally on the partition epoch (its zkVersion) and answers
with what it wrote; a change made with an older partition epoch gets INVALID_UPDATE_VERSION; a
request sent to a broker that is not the controller (NOT_CONTROLLER) goes again to the controller."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.server_config import KafkaConfig
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.alter_partition_manager import (AlterPartitionManager, LeaderAndIsr,
                                                       controller_endpoint_from)
from tests.cluster.util import (NONE, assignment, broker_czxid, controller_epoch, controller_znode,
                                create_topic_with_assignment,
                                metadata, partition_state, unique, wait_metadata, zookeeper)

pytestmark = pytest.mark.cluster

LISTENER = "PLAINTEXT"


def _cache_from(broker: Any, controller_id: int) -> MetadataCache:
    """The brokers as `broker`'s Metadata lists them, with `controller_id` as the controller."""
    cache = MetadataCache(broker_id=-1)
    cache.update_brokers([BrokerInfo(b.node_id, (BrokerEndpoint(LISTENER, b.host, b.port),), b.rack)
                          for b in metadata(broker, []).brokers], controller_id)
    return cache


def test_isr_shrink_through_the_controller(make_cluster: Any) -> None:
    cluster = make_cluster(3)
    topic = unique("alter-isr")
    leader, f1, f2 = sorted(cluster.brokers)
    assert create_topic_with_assignment(cluster.broker(leader), topic, {0: [leader, f1, f2]}) == NONE
    wait_metadata(cluster, [leader, f1, f2], {topic: {0: (NONE, leader, 0, [leader, f1, f2], [leader, f1, f2], [])}},
                  30, "the topic everywhere")
    with zookeeper(cluster) as zk:
        state, partition_epoch = partition_state(zk, topic, 0)
        _, topic_id = assignment(zk, topic)
        epoch = broker_czxid(zk, leader)
        ctl_epoch, _ = controller_epoch(zk)
        controller_id = controller_znode(zk)
    assert epoch is not None and controller_id is not None
    assert state == {"controller_epoch": ctl_epoch, "leader": leader, "version": 1, "leader_epoch": 0,
                     "isr": [leader, f1, f2]}
    not_controller = next(b for b in sorted(cluster.brokers) if b != controller_id)
    tp = TopicPartition(topic, 0)
    # first aimed at a broker that is not the controller: NOT_CONTROLLER, sent again
    cache = _cache_from(cluster.broker(leader), not_controller)

    async def alter() -> tuple[LeaderAndIsr, int, BaseException | None]:
        manager = AlterPartitionManager(leader, lambda: epoch, controller_endpoint_from(cache, LISTENER),
                                        KafkaConfig())
        manager.start()
        try:
            shrunk = manager.submit(tp, topic_id, LeaderAndIsr(leader, 0, (leader, f1), 0, partition_epoch), ctl_epoch)
            while manager.requests_sent < 2:
                await asyncio.sleep(0.01)
            assert not shrunk.done()
            cache.update_brokers(list(cache.brokers.values()), controller_id)
            result = await asyncio.wait_for(shrunk, 30)
            sent = manager.requests_sent
            # the same partition epoch again (now stale) with another ISR
            stale = manager.submit(tp, topic_id, LeaderAndIsr(leader, 0, (leader,), 0, partition_epoch), ctl_epoch)
            error = await asyncio.wait_for(asyncio.gather(stale, return_exceptions=True), 30)
            return result, sent, error[0]
        finally:
            await manager.shutdown()

    result, sent, stale_error = asyncio.run(alter())
    assert result == LeaderAndIsr(leader, 0, (leader, f1), 0, partition_epoch + 1)
    assert sent >= 3  # at least two NOT_CONTROLLER answers, then the controller's
    assert isinstance(stale_error, KafkaApiError) and stale_error.code == ErrorCode.INVALID_UPDATE_VERSION
    with zookeeper(cluster) as zk:
        assert partition_state(zk, topic, 0) == (
            {"controller_epoch": ctl_epoch, "leader": leader, "version": 1, "leader_epoch": 0, "isr": [leader, f1]},
            partition_epoch + 1)
    # the controller told every broker (UpdateMetadata)
    wait_metadata(cluster, [leader, f1, f2], {topic: {0: (NONE, leader, 0, [leader, f1, f2], [leader, f1], [])}},
                  30, "the shrunk ISR everywhere")
