"""The "kafkalite ready" gate (cluster_member.wait_for_initial_metadata): alone, ready once the
controller is idle and every partition it leads is in the metadata cache; woken by the cache
update that completes it (a listener, removed afterwards), giving up after its timeout."""
from __future__ import annotations

import asyncio
import logging
import types

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, UpdateMetadataPartitionState
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.server.cluster_member import wait_for_initial_metadata


def controller(partitions: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        broker_id=0, is_active=True, events=types.SimpleNamespace(current_event=None, queue_size=0),
        context=types.SimpleNamespace(partition_leadership={TopicPartition("t", p): None for p in range(partitions)}))


def update(cache: MetadataCache, partitions: range) -> None:
    cache.update_metadata(0, 1, [BrokerInfo(0, (BrokerEndpoint("PLAINTEXT", "h", 1),))],
                          [UpdateMetadataPartitionState("t", p, 1, 0, 0, (0,), 0, (0,)) for p in partitions])


def test_ready_with_the_update_that_completes_the_leadership() -> None:
    async def run() -> list[str]:
        cache = MetadataCache("c", 0)
        steps: list[str] = []
        waiter = asyncio.create_task(wait_for_initial_metadata(controller(3), cache, alone=True, timeout_s=10))
        await asyncio.sleep(0.02)
        update(cache, range(2))          # two of three partitions: not yet
        await asyncio.sleep(0.02)
        steps.append(f"after 2: done={waiter.done()}")
        update(cache, range(2, 3))
        await asyncio.sleep(0)           # the next loop iteration runs the woken gate
        await asyncio.sleep(0)
        steps.append(f"after 3: done={waiter.done()}")
        await waiter
        steps.append(f"listeners left {len(cache._listeners)}")
        return steps
    assert asyncio.run(run()) == ["after 2: done=False", "after 3: done=True", "listeners left 0"]


def test_gives_up_after_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    cache = MetadataCache("c", 0)
    with caplog.at_level(logging.WARNING, logger="kafkalite.server.cluster_member"):
        asyncio.run(wait_for_initial_metadata(controller(1), cache, alone=True, timeout_s=0.05))
    assert [r.getMessage() for r in caplog.records] == [
        "Started before the controller's metadata arrived; serving what is known so far"]
    assert cache._listeners == []
