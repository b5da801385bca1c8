"""The rebalance purgatory's operations (Kafka's DelayedJoin, InitialDelayedJoin, DelayedSync).

DelayedJoin waits, under the group's join key, until every known member has rejoined or the
rebalance timeout passes; then the coordinator completes the join phase (members that did not
rejoin are dropped). InitialDelayedJoin is used when an Empty group starts rebalancing: it holds
the first JoinGroup for `group.initial.rebalance.delay.ms` and extends the wait by that much
again each time a new member arrives, up to the rebalance timeout, so a group starting many
consumers at once settles in one rebalance. DelayedSync waits, under the group's sync key, for a
SyncGroup from every member of the new generation; members that never send one are removed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Hashable

from kafkalite.purgatory import DelayedOperation, DelayedOperationPurgatory

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata import GroupMetadata


def join_key(group_id: str) -> Hashable:
    return ("join", group_id)


def sync_key(group_id: str) -> Hashable:
    return ("sync", group_id)


class DelayedJoin(DelayedOperation):
    __slots__ = ("coordinator", "group")

    def __init__(self, coordinator: "GroupCoordinator", group: "GroupMetadata", rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        pass  # on_complete already ran the join phase with whoever rejoined


class InitialDelayedJoin(DelayedJoin):
    __slots__ = ("purgatory", "configured_rebalance_delay_ms", "remaining_ms")

    def __init__(self, coordinator: "GroupCoordinator", purgatory: DelayedOperationPurgatory,
                 group: "GroupMetadata", configured_rebalance_delay_ms: int, delay_ms: int,
                 remaining_ms: int) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_rebalance_delay_ms = configured_rebalance_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False  # only the delay ends the initial wait

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_rebalance_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self.purgatory, group, self.configured_rebalance_delay_ms,
                                   delay, remaining),
                [join_key(group.group_id)])
        else:
            super().on_complete()


class DelayedSync(DelayedOperation):
    __slots__ = ("coordinator", "group", "generation_id")

    def __init__(self, coordinator: "GroupCoordinator", group: "GroupMetadata", generation_id: int,
                 rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)
