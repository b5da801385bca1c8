"""The group coordinator loads a `__consumer_offsets` partition when this broker becomes its
leader and unloads it when it stops being the leader (Kafka's onElection / onResignation). A load
still running when the partition is resigned and elected again must neither install its older
view nor end the newer load: only the latest election's load counts."""
from __future__ import annotations

import asyncio
from typing import Any

from kafkalite.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator, OffsetConfig
from kafkalite.coordinator.group.types import LoadedPartition, OffsetAndMetadata


class SlowStorage:
    """One partition; each load returns the offsets of its own group once released."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, asyncio.Event]] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    def load_partition(self, partition: int) -> Any:
        group = f"group-of-load-{len(self.loads)}"
        release = asyncio.Event()
        self.loads.append((group, release))

        async def load() -> LoadedPartition:
            await release.wait()
            return LoadedPartition(offsets={group: {("t", 0): OffsetAndMetadata(7)}},
                                   offset_record_offsets={group: {("t", 0): 0}})
        return load()


async def _until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition not met")


def test_only_the_latest_election_installs_its_load() -> None:
    async def body() -> None:
        storage = SlowStorage()
        c = GroupCoordinator(0, GroupConfig(), OffsetConfig(), storage)  # type: ignore[arg-type]
        c.startup(enable_metadata_expiration=False)
        try:
            c.on_election(0)
            await _until(lambda: len(storage.loads) == 1)
            c.on_resignation(0)
            c.on_election(0)
            await _until(lambda: len(storage.loads) == 2)
            (old_group, old_release), (new_group, new_release) = storage.loads
            old_release.set()        # the first load ends first: its view is stale
            await asyncio.sleep(0.05)
            assert (c.loading_partitions, c.owned_partitions, sorted(c.groups)) == ({0}, set(), [])
            new_release.set()
            await _until(lambda: not c.loading_partitions)
            assert (c.owned_partitions, sorted(c.groups)) == ({0}, [new_group])
            c.on_resignation(0)
            assert (c.loading_partitions, c.owned_partitions, sorted(c.groups)) == (set(), set(), [])
        finally:
            await c.shutdown()
    asyncio.run(body())
