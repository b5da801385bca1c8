"""DelayedHeartbeat: a member's session deadline, parked in the heartbeat purgatory under
(group, member). Each heartbeat (or anything proving the member alive) completes the current one
and parks a new one, so a member that goes quiet is expired by the timing wheel after
`session.timeout.ms` — nothing polls. Pending members (given an id with MEMBER_ID_REQUIRED) get
one too, completed when they join."""
from __future__ import annotations

from typing import TYPE_CHECKING, Hashable

from kafkalite.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata import GroupMetadata


def member_key(group_id: str, member_id: str) -> Hashable:
    return ("member", group_id, member_id)


class DelayedHeartbeat(DelayedOperation):
    __slots__ = ("coordinator", "group", "member_id", "is_pending")

    def __init__(self, coordinator: "GroupCoordinator", group: "GroupMetadata", member_id: str,
                 is_pending: bool, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(self.group, self.member_id, self.is_pending,
                                                       self.force_complete)

    def on_complete(self) -> None:
        pass  # nothing to answer: completion only means "this deadline no longer applies"

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)
