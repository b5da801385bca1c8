"""The classic group coordinator (Kafka's GroupCoordinator, ZooKeeper-mode broker).

Membership: JoinGroup / SyncGroup / Heartbeat / LeaveGroup drive each group through
Empty → PreparingRebalance → CompletingRebalance → Stable (→ Dead). Waiting JoinGroup and
SyncGroup requests are callbacks kept on the members and completed by the coordinator or by the
delayed operations of the rebalance purgatory (DelayedJoin, InitialDelayedJoin, DelayedSync);
session timeouts are DelayedHeartbeats in the heartbeat purgatory. Offsets: OffsetCommit /
OffsetFetch / OffsetDelete / DeleteGroups against the group's in-memory cache, persisted through
the storage layer (`__consumer_offsets`), which is also what a partition is loaded from when this
broker becomes its leader.

Everything runs on the event loop; a storage write is the only await, and every callback after
it re-checks the group's state and generation, as Kafka's append callbacks do.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Optional, Protocol

from kafkalite.coordinator.group.delayed_heartbeat import DelayedHeartbeat, member_key
from kafkalite.coordinator.group.delayed_join import (DelayedJoin, DelayedSync, InitialDelayedJoin, join_key,
                                                      sync_key)
from kafkalite.coordinator.group.group_metadata import (DEAD_GROUP_SUMMARY, EMPTY_GROUP_SUMMARY, CommitRecord,
                                                        NEW_MEMBER_JOIN_TIMEOUT_MS, UNKNOWN_MEMBER_ID,
                                                        GroupMetadata, GroupOverview, GroupState, GroupSummary,
                                                        JoinCallback, JoinGroupResult, MemberMetadata, scala_option,
                                                        SyncCallback, SyncGroupResult, TopicPartitionKey,
                                                        generate_member_id, group_from_snapshot,
                                                        java_string_length, offsets_only_group,
                                                        protocol_names)
from kafkalite.coordinator.group.types import GroupSnapshot, LoadedPartition, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.purgatory import DelayedOperationPurgatory

log = logging.getLogger(__name__)

EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

INVALID_OFFSET = -1
NO_METADATA = ""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupStorage(Protocol):
    """What the coordinator needs of the `__consumer_offsets` storage layer."""

    def partition_for(self, group_id: str) -> int: ...

    async def store_group(self, snapshot: GroupSnapshot) -> ErrorCode: ...

    async def store_offsets(self, group_id: str, offsets: dict[TopicPartitionKey, OffsetAndMetadata]
                            ) -> dict[TopicPartitionKey, ErrorCode]: ...

    async def store_offsets_at(self, group_id: str, offsets: dict[TopicPartitionKey, OffsetAndMetadata], *,
                               producer_id: int = -1, producer_epoch: int = -1
                               ) -> tuple[dict[TopicPartitionKey, ErrorCode], int]: ...

    async def store_tombstones(self, group_id: str, offsets: Iterable[TopicPartitionKey], group: bool) -> Any: ...

    def load_partition(self, partition: int) -> LoadedPartition | Awaitable[LoadedPartition]: ...


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000


@dataclass(frozen=True)
class OffsetConfig:
    max_metadata_size: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_interval_ms: int = 600_000


@dataclass(frozen=True)
class OffsetFetchPartitionData:
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode


@dataclass(frozen=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: Optional[str]
    error: ErrorCode


@dataclass(frozen=True)
class LeaveGroupResult:
    error: ErrorCode
    members: tuple[LeaveMemberResponse, ...]


@dataclass(frozen=True)
class MemberIdentity:
    member_id: str
    group_instance_id: Optional[str] = None
    reason: Optional[str] = None


# APIs whose group id may be empty: offsets for "" are allowed for backward compatibility, and
# DescribeGroups / DeleteGroups must be able to see and remove such a group.
_EMPTY_GROUP_ID_ALLOWED = frozenset({"OffsetCommit", "OffsetFetch", "DescribeGroups", "DeleteGroups"})


class GroupCoordinator:
    def __init__(self, broker_id: int, group_config: GroupConfig, offset_config: OffsetConfig,
                 storage: GroupStorage, time_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.broker_id = broker_id
        self.group_config = group_config
        self.offset_config = offset_config
        self.storage = storage
        self.time_ms = time_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        # partition -> the load current for it: a load started before a resignation and a new
        # election must not install its (older) view nor end the newer load (Kafka runs loads and
        # unloads in order on one scheduler thread)
        self._current_load: dict[int, object] = {}
        self.is_active = False
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = DelayedOperationPurgatory("Heartbeat")
        self.rebalance_purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory("Rebalance")
        self._tasks: set[asyncio.Task[Any]] = set()
        self._expiration_task: Optional[asyncio.Task[None]] = None
        # producer id -> groups with transactional offsets of it pending (Kafka's openGroupsForProducer)
        self.open_groups_for_producer: dict[int, set[str]] = {}
        # transaction ends seen while their `__consumer_offsets` partition was loading: applied to
        # what the load installs (the load may have read the offsets but not the marker)
        self._txn_completions_while_loading: dict[int, list[tuple[int, bool]]] = {}

    # ==== lifecycle ==================================================================================

    def startup(self, enable_metadata_expiration: bool = True) -> None:
        self.is_active = True
        if enable_metadata_expiration and self.offset_config.retention_check_interval_ms < 2**62:
            self._expiration_task = asyncio.get_running_loop().create_task(
                self._expiration_loop(), name="group-metadata-expiration")

    async def shutdown(self) -> None:
        """Stop answering; waiting JoinGroup/SyncGroup requests get NOT_COORDINATOR (so clients
        move on promptly instead of holding the broker's shutdown), background tasks end."""
        self.is_active = False
        for group in list(self.groups.values()):
            self._on_group_unloaded(group)
        self.groups.clear()
        self.owned_partitions.clear()
        self.loading_partitions.clear()
        self._current_load.clear()
        tasks = list(self._tasks)
        if self._expiration_task is not None:
            tasks.append(self._expiration_task)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self.heartbeat_purgatory.shutdown()
        self.rebalance_purgatory.shutdown()

    def _spawn(self, coro: Awaitable[Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task %s failed", task.get_name(), exc_info=task.exception())

    # ==== partition ownership and loading ===========================================================

    def partition_for(self, group_id: str) -> int:
        return self.storage.partition_for(group_id)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def group_not_exists(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return self.is_group_local(group_id) and (group is None or group.is_(DEAD))

    def on_election(self, partition: int) -> None:
        """This broker leads `__consumer_offsets`-`partition`: load its groups and offsets.
        Until the load finishes, requests for its groups get COORDINATOR_LOAD_IN_PROGRESS."""
        if partition in self.loading_partitions:
            return
        self.loading_partitions.add(partition)
        token = self._current_load[partition] = object()
        self._spawn(self._load_partition(partition, token), f"load-offsets-partition-{partition}")

    async def _load_partition(self, partition: int, token: object) -> None:
        started = time.monotonic()

        def current() -> bool:   # not resigned (nor re-elected) meanwhile
            return self._current_load.get(partition) is token and partition in self.loading_partitions
        try:
            # replaying a log reads files: off the loop, as Kafka loads on its scheduler thread
            # (nothing appends to a partition while it loads: its groups answer LOAD_IN_PROGRESS)
            result = await asyncio.to_thread(self.storage.load_partition, partition)
            loaded: LoadedPartition = await result if inspect.isawaitable(result) else result  # type: ignore[assignment]
            if current():
                self._install_loaded(loaded)
                for producer_id, commit in self._txn_completions_while_loading.pop(partition, []):
                    self._complete_txn_for_partitions(producer_id, {partition}, commit)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("failed to load __consumer_offsets partition %d", partition)
        finally:
            if current():
                self._txn_completions_while_loading.pop(partition, None)
                self._current_load.pop(partition, None)
                self.loading_partitions.discard(partition)
                self.owned_partitions.add(partition)
                log.info("loaded __consumer_offsets partition %d in %.1f ms", partition,
                         (time.monotonic() - started) * 1000)

    def _install_loaded(self, loaded: LoadedPartition) -> None:
        now = self.time_ms()
        # transactional offsets still waiting for their marker: group -> producer id -> records
        pending: dict[str, dict[int, dict[TopicPartitionKey, CommitRecord]]] = {}
        for producer_id, by_group in loaded.pending_transactional_offsets.items():
            record_offsets = loaded.pending_transactional_record_offsets.get(producer_id, {})
            for group_id, offsets in by_group.items():
                ro = record_offsets.get(group_id, {})
                pending.setdefault(group_id, {})[producer_id] = {
                    tp: CommitRecord(om, ro.get(tp)) for tp, om in offsets.items()}
        for group_id, snapshot in loaded.groups.items():
            group = group_from_snapshot(snapshot, loaded.offsets.get(group_id, {}), now,
                                        loaded.offset_record_offsets.get(group_id))
            self._add_loaded_group(group, pending.get(group_id))
        # groups with offsets (committed or pending) but no group metadata record
        for group_id in list(loaded.offsets) + [g for g in pending if g not in loaded.offsets]:
            if group_id not in loaded.groups:
                group = offsets_only_group(group_id, loaded.offsets.get(group_id, {}), now,
                                           loaded.offset_record_offsets.get(group_id))
                self._add_loaded_group(group, pending.get(group_id))

    def _add_loaded_group(self, group: GroupMetadata,
                          pending_txn: Optional[dict[int, dict[TopicPartitionKey, CommitRecord]]] = None) -> None:
        if group.group_id in self.groups:
            log.debug("group %s already cached; loaded state ignored", group.group_id)
            return
        for producer_id, records in (pending_txn or {}).items():
            group.pending_transactional_offset_commits[producer_id] = dict(records)
            self.open_groups_for_producer.setdefault(producer_id, set()).add(group.group_id)
        self.groups[group.group_id] = group
        self._on_group_loaded(group)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.group_config.max_size:
            self._prepare_rebalance(group, f"Freshly-loaded group is over capacity ({self.group_config.max_size}). "
                                           "Rebalancing in order to give a chance for consumers to commit offsets")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_resignation(self, partition: int) -> None:
        """No longer the leader of `partition`: unload its groups (their waiting requests get
        NOT_COORDINATOR)."""
        self.loading_partitions.discard(partition)
        self._current_load.pop(partition, None)
        self.owned_partitions.discard(partition)
        self._txn_completions_while_loading.pop(partition, None)
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) == partition:
                self._on_group_unloaded(group)
                del self.groups[group_id]
                for producer_id in group.active_producers:
                    self._remove_producer_group(producer_id, group_id)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(DEAD, self.time_ms())
        if previous is PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinGroupResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))
        elif previous in (STABLE, COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
                self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member.member_id))
        self._remove_sync_expiration(group)

    # ==== validation ================================================================================

    def _validate_group_status(self, group_id: Optional[str], api: str) -> Optional[ErrorCode]:
        if group_id is None or (group_id == "" and api not in _EMPTY_GROUP_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: Optional[str],
                                 operation: str) -> Optional[ErrorCode]:
        """`group_instance_id`, if given, must map to `member_id`; `member_id` must be a member."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("%s: member %s of static instance %s is fenced by %s", operation, member_id,
                         group_instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _get_or_maybe_create_group(self, group_id: str, create: bool) -> Optional[GroupMetadata]:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, self.time_ms())
        return group

    # ==== JoinGroup =================================================================================

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.group_config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING_REBALANCE):
            # awaiting members, not the group size: the size may exceed a lowered max.size, and
            # counting the awaiting ones sheds the last members to rejoin
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or \
                group.num_awaiting < max_size
        return group.has(member_id) or group.size < max_size

    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                          require_known_member_id: bool, support_skipping_assignment: bool, client_id: str,
                          client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                          protocol_type: str, protocols: list[tuple[str, bytes]], callback: JoinCallback,
                          reason: Optional[str] = None) -> None:
        error = self._validate_group_status(group_id, "JoinGroup")
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        if not (self.group_config.min_session_timeout_ms <= session_timeout_ms
                <= self.group_config.max_session_timeout_ms):
            callback(JoinGroupResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        # a group is created only for a member without id; a member id for a group that does not
        # exist is unknown
        group = self._get_or_maybe_create_group(group_id, is_unknown_member)
        if group is None:
            callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        join_reason = reason if reason is not None else "not provided"
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._do_new_member_join_group(group, group_instance_id, require_known_member_id,
                                           support_skipping_assignment, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                           callback, join_reason)
        else:
            self._do_current_member_join_group(group, member_id, group_instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                               protocols, callback, join_reason)
        if group.is_(PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    async def join_group(self, *args: Any, **kwargs: Any) -> JoinGroupResult:
        """handle_join_group, awaiting the (possibly delayed) result."""
        return await _await_callback(lambda cb: self.handle_join_group(*args, callback=cb, **kwargs))

    def _do_new_member_join_group(self, group: GroupMetadata, group_instance_id: Optional[str],
                                  require_known_member_id: bool, support_skipping_assignment: bool,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                  callback: JoinCallback, reason: str) -> None:
        if group.is_(DEAD):
            # removed meanwhile (migrated or deleted): let the member find the coordinator again
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, protocol_names(protocols)):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = generate_member_id(client_id, group_instance_id)
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info("static member %s of group %s rejoins with an unknown member id in state %s; "
                         "replacing %s by %s", group_instance_id, group.group_id, group.state, old_member_id,
                         new_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, group_instance_id,
                                                         protocols, rebalance_timeout_ms, session_timeout_ms,
                                                         callback, reason, support_skipping_assignment)
            else:
                self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id,
                                               group_instance_id, client_id, client_host, protocol_type,
                                               protocols, group, callback, reason)
        elif require_known_member_id:
            # KIP-394: hand out the id and make the member come back with it, so a client that
            # retries JoinGroup after a timeout does not leave a ghost member behind
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinGroupResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id, None,
                                           client_id, client_host, protocol_type, protocols, group, callback,
                                           reason)

    def _do_current_member_join_group(self, group: GroupMetadata, member_id: str, group_instance_id: Optional[str],
                                      client_id: str, client_host: str, rebalance_timeout_ms: int,
                                      session_timeout_ms: int, protocol_type: str,
                                      protocols: list[tuple[str, bytes]], callback: JoinCallback,
                                      reason: str) -> None:
        if group.is_(DEAD):
            callback(JoinGroupResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, protocol_names(protocols)):
            callback(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                # a pending member is always dynamic (Kafka raises IllegalStateException here)
                log.error("JoinGroup with group instance id %s for pending member %s", group_instance_id, member_id)
                callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_SERVER_ERROR))
                return
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, member_id, None, client_id,
                                           client_host, protocol_type, protocols, group, callback, reason)
            return
        error = self._validate_current_member(group, member_id, group_instance_id, "join-group")
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              f"Member {member_id} joining group during {state}; client reason: {reason}",
                                              callback)
        elif state is COMPLETING_REBALANCE:
            if member.matches(protocols):
                # the member missed the JoinGroup response: answer again for this generation
                callback(JoinGroupResult(
                    member_id, ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                    group.leader_or_empty, False,
                    group.current_member_metadata() if group.is_leader(member_id) else ()))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms,
                                                  f"Updating metadata for member {member_id} during {state}; "
                                                  f"client reason: {reason}", callback)
        elif state is STABLE:
            if group.is_leader(member_id):
                # the leader may rejoin to have the assignment redone (e.g. topic metadata changed)
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms,
                                                  f"Leader {member_id} re-joining group during {state}; "
                                                  f"client reason: {reason}", callback)
            elif not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms,
                                                  f"Updating metadata for member {member_id} during {state}; "
                                                  f"client reason: {reason}", callback)
            else:
                callback(JoinGroupResult(member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                                         group.protocol_name, group.leader_or_empty, False, ()))
        else:
            log.warning("member %s rejoins group %s in unexpected state %s", member_id, group.group_id, state)
            callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(self, rebalance_timeout_ms: int, session_timeout_ms: int, member_id: str,
                                  group_instance_id: Optional[str], client_id: str, client_host: str,
                                  protocol_type: str, protocols: list[tuple[str, bytes]], group: GroupMetadata,
                                  callback: JoinCallback, reason: str) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        # lets InitialDelayedJoin extend its wait while a brand-new group is filling up
        if group.is_(PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member parked in JoinGroup cannot heartbeat and a muted socket hides disconnects:
        # time the join out instead, or retried joins would pile up defunct members.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id} with group instance id "
                                             f"{scala_option(group_instance_id)}; client reason: {reason}")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            group_instance_id: str, protocols: list[tuple[str, bytes]],
                                            rebalance_timeout_ms: int, session_timeout_ms: int,
                                            callback: JoinCallback, reason: str,
                                            support_skipping_assignment: bool) -> None:
        current_leader = group.leader_or_empty
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # the old id's heartbeat expires harmlessly (no such member any more); the new id gets one
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        old_protocols = member.supported_protocols
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        state = group.state
        if state is STABLE:
            # no rebalance unless the group's protocol would change; persist the new member id
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def on_stored(error: ErrorCode) -> None:
                    if error != ErrorCode.NONE:
                        log.warning("failed to persist static member %s of group %s: %s", group_instance_id,
                                    group.group_id, error.name)
                        # revert: the old member id is the one on disk
                        group.update_member(member, old_protocols, old_rebalance_timeout_ms,
                                            old_session_timeout_ms, None)
                        if group.has(new_member_id):
                            old = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                            self._complete_and_schedule_next_heartbeat_expiration(group, old)
                        callback(JoinGroupResult(UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type,
                                                 group.protocol_name, current_leader, False, ()))
                    elif support_skipping_assignment:
                        # JoinGroup v9+: the leader learns it leads but must not reassign (the
                        # group is stable; a new assignment would be ignored)
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join_callback(member, JoinGroupResult(
                            new_member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                            group.protocol_name, group.leader_or_empty, is_leader,
                            group.current_member_metadata() if is_leader else ()))
                    else:
                        # older clients: name the old leader id so the rejoined leader does not
                        # believe it leads and run a pointless assignment
                        group.maybe_invoke_join_callback(member, JoinGroupResult(
                            new_member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                            group.protocol_name, current_leader, False, ()))
                self._store_group(group, assignment, on_stored)
            else:
                self._maybe_prepare_rebalance(group, f"Group's selectedProtocol will change because static member "
                                                     f"{member.member_id} with instance id {group_instance_id} "
                                                     f"joined with change of protocol; client reason: {reason}")
        elif state is COMPLETING_REBALANCE:
            # the leader may already be assigning with the old member id: start over
            self._prepare_rebalance(group, f"Updating metadata for static member {member.member_id} "
                                           f"with instance id {group_instance_id}; client reason: {reason}")
        elif state is PREPARING_REBALANCE:
            pass  # joins the rebalance in progress
        else:
            raise RuntimeError(f"group {group.group_id} in state {state} when static member {group_instance_id} "
                               "rejoins")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, reason: str, callback: JoinCallback) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        # members waiting for their assignment must rejoin instead
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        if group.is_(EMPTY):
            delay = self.group_config.initial_rebalance_delay_ms
            op: DelayedJoin = InitialDelayedJoin(self, self.rebalance_purgatory, group, delay, delay,
                                                 max(group.rebalance_timeout_ms - delay, 0))
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(PREPARING_REBALANCE, self.time_ms())
        log.info("Preparing to rebalance group %s in state %s with old generation %d "
                 "(__consumer_offsets-%d) (reason: %s)", group.group_id, group.state, group.generation_id,
                 self.partition_for(group.group_id), reason)
        self.rebalance_purgatory.try_complete_else_watch(op, [join_key(group.group_id)])

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # a new member may time out while its JoinGroup is parked: answer it before removing it,
        # with UNKNOWN_MEMBER_ID so that a live client simply joins again
        group.maybe_invoke_join_callback(member, JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    # -- the join phase's completion (DelayedJoin) -------------------------------------------------

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        return force_complete() if group.has_all_members_joined() else False

    def on_complete_join(self, group: GroupMetadata) -> None:
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static_member]:
            log.info("group %s removed dynamic member %s which did not rejoin", group.group_id, failed.member_id)
            group.remove(failed.member_id)
            self._remove_heartbeat_for_leaving_member(group, failed.member_id)
        if group.is_(DEAD):
            log.info("group %s is dead, skipping rebalance stage", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin are left: wait again until their sessions
            # expire or they come back
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(DelayedJoin(self, group, group.rebalance_timeout_ms),
                                                             [join_key(group.group_id)])
            return
        group.init_next_generation(self.time_ms())
        if group.is_(EMPTY):
            log.info("Group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                     group.generation_id, self.partition_for(group.group_id))

            def on_stored(error: ErrorCode) -> None:
                if error != ErrorCode.NONE:
                    # no member depends on it; an older generation reloads and times out
                    log.warning("failed to write empty metadata for group %s: %s", group.group_id, error.name)

            self._store_group(group, {}, on_stored)
            return
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members", group.group_id,
                 group.generation_id, self.partition_for(group.group_id), group.size)
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            result = JoinGroupResult(member.member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                                     group.protocol_name, group.leader_or_empty, False,
                                     group.current_member_metadata() if is_leader else ())
            group.maybe_invoke_join_callback(member, result)
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    # -- the sync phase's deadline (DelayedSync) ---------------------------------------------------

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms), [sync_key(group.group_id)])

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def try_complete_pending_sync(self, group: GroupMetadata, generation_id: int,
                                  force_complete: Callable[[], bool]) -> bool:
        if generation_id != group.generation_id or group.state in (DEAD, EMPTY, PREPARING_REBALANCE):
            return force_complete()
        return force_complete() if group.has_received_sync_from_all_members() else False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id:
            log.error("sync expiration of group %s for old generation %d (now %d)", group.group_id, generation_id,
                      group.generation_id)
            return
        if group.state in (DEAD, EMPTY, PREPARING_REBALANCE):
            log.error("sync expiration of group %s after it moved to %s", group.group_id, group.state)
            return
        if not group.has_received_sync_from_all_members():
            pending = sorted(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self._remove_heartbeat_for_leaving_member(group, member_id)
            log.info("group %s removed members which did not send SyncGroup: %s", group.group_id, pending)
            self._prepare_rebalance(group, f"Removing HashSet({', '.join(pending)}) on pending sync request expiration")

    # ==== SyncGroup ==================================================================================

    def handle_sync_group(self, group_id: str, generation: int, member_id: str, protocol_type: Optional[str],
                          protocol_name: Optional[str], group_instance_id: Optional[str],
                          group_assignment: dict[str, bytes], callback: SyncCallback) -> None:
        error = self._validate_group_status(group_id, "SyncGroup")
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance's state was lost with the reload: make the member rejoin (older
            # clients do not expect COORDINATOR_LOAD_IN_PROGRESS here)
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self.groups.get(group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        self._do_sync_group(group, generation, member_id, protocol_type, protocol_name, group_instance_id,
                            group_assignment, callback)

    async def sync_group(self, *args: Any, **kwargs: Any) -> SyncGroupResult:
        return await _await_callback(lambda cb: self.handle_sync_group(*args, callback=cb, **kwargs))

    def _validate_sync_group(self, group: GroupMetadata, generation_id: int, member_id: str,
                             protocol_type: Optional[str], protocol_name: Optional[str],
                             group_instance_id: Optional[str]) -> Optional[ErrorCode]:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and group.protocol_type != protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and group.protocol_name != protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _do_sync_group(self, group: GroupMetadata, generation_id: int, member_id: str, protocol_type: Optional[str],
                       protocol_name: Optional[str], group_instance_id: Optional[str],
                       group_assignment: dict[str, bytes], callback: SyncCallback) -> None:
        error = self._validate_sync_group(group, generation_id, member_id, protocol_type, protocol_name,
                                          group_instance_id)
        if error is not None:
            callback(SyncGroupResult(error))
            return
        state = group.state
        if state is EMPTY:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is PREPARING_REBALANCE:
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is COMPLETING_REBALANCE:
            group.get(member_id).awaiting_sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader %s for group %s for generation %d. The group has %d "
                         "members, %d of which are static.",
                         member_id, group.group_id, group.generation_id, group.size, len(group.static_members))
                # members the leader left out get an empty assignment
                assignment = {m: bytes(group_assignment.get(m, b"")) for m in group.members}

                def on_stored(error: ErrorCode) -> None:
                    # a member may have joined meanwhile: act only on the same generation
                    if group.is_(COMPLETING_REBALANCE) and generation_id == group.generation_id:
                        if error != ErrorCode.NONE:
                            self._reset_and_propagate_assignment_error(group, error)
                            self._maybe_prepare_rebalance(group, f"Error {error.name} when storing group "
                                                                 f"assignment during SyncGroup (member: {member_id})")
                        else:
                            self._set_and_propagate_assignment(group, assignment)
                            group.transition_to(STABLE, self.time_ms())

                self._store_group(group, assignment, on_stored)
        elif state is STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
        else:
            raise RuntimeError(f"sync in unexpected state {state} of group {group.group_id}")

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncGroupResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                                     member.assignment)
            if group.maybe_invoke_sync_callback(member, result):
                # a session may have expired while the member waited for the leader or the write;
                # that expiry was ignored, so its deadline starts now
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # ==== Heartbeat ==================================================================================

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                         generation_id: int) -> ErrorCode:
        error = self._validate_group_status(group_id, "Heartbeat")
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # still loading: answer blindly
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        state = group.state
        if state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        if state is PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        # CompletingRebalance: members may heartbeat between their JoinGroup and SyncGroup
        return ErrorCode.NONE

    def _complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                               timeout_ms: int) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key])

    def _add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms), [member_key(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))

    def try_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool,
                               force_complete: Callable[[], bool]) -> bool:
        if group.is_(DEAD):
            return force_complete()
        if is_pending:
            return force_complete() if group.has(member_id) else False
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_(DEAD):
            log.info("heartbeat expiration of member %s after group %s was unloaded or deleted", member_id,
                     group.group_id)
        elif is_pending:
            log.info("pending member %s of group %s removed after session timeout", member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)
        elif not group.has(member_id):
            log.debug("member %s already removed from group %s", member_id, group.group_id)
        else:
            member = group.get(member_id)
            if not member.has_satisfied_heartbeat():
                log.info("member %s of group %s has failed, removing it from the group", member_id, group.group_id)
                self._remove_member_and_update_group(group, member,
                                                     f"removing member {member_id} on heartbeat expiration")

    # ==== LeaveGroup =================================================================================

    def handle_leave_group(self, group_id: str, leaving_members: list[MemberIdentity]) -> LeaveGroupResult:
        error = self._validate_group_status(group_id, "LeaveGroup")
        if error is not None:
            return LeaveGroupResult(error, ())
        group = self.groups.get(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NONE, tuple(
                LeaveMemberResponse(m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
                for m in leaving_members))
        if group.is_(DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, ())
        responses = []
        for leaving in leaving_members:
            responses.append(LeaveMemberResponse(leaving.member_id, leaving.group_instance_id,
                                                 self._leave_one(group, leaving)))
        return LeaveGroupResult(ErrorCode.NONE, tuple(responses))

    def _leave_one(self, group: GroupMetadata, leaving: MemberIdentity) -> ErrorCode:
        reason = leaving.reason if leaving.reason is not None else "not provided"
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            # administrative removal of a static member by its instance id
            current = group.current_static_member_id(leaving.group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_current_member_from_group(group, current, reason)
            return ErrorCode.NONE
        if group.is_pending_member(leaving.member_id):
            self._remove_pending_member_and_update_group(group, leaving.member_id)
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, leaving.member_id))
            log.info("pending member %s left group %s", leaving.member_id, group.group_id)
            return ErrorCode.NONE
        error = self._validate_current_member(group, leaving.member_id, leaving.group_instance_id, "leave-group")
        if error is not None:
            return error
        self._remove_current_member_from_group(group, leaving.member_id, reason)
        return ErrorCode.NONE

    def _remove_current_member_from_group(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(group, member, f"Removing member {member_id} on LeaveGroup; "
                                                            f"client reason: {reason}")
        self._remove_heartbeat_for_leaving_member(group, member_id)
        log.info("Member %r has left group %s through explicit `LeaveGroup`; client reason: %s", member,
                 group.group_id, reason)

    # ==== OffsetCommit ===============================================================================

    async def handle_commit_offsets(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                                    generation_id: int, offsets: dict[TopicPartitionKey, OffsetAndMetadata],
                                    api_version: int = 8) -> dict[TopicPartitionKey, ErrorCode]:
        def all_(error: ErrorCode) -> dict[TopicPartitionKey, ErrorCode]:
            return {tp: error for tp in offsets}

        error = self._validate_group_status(group_id, "OffsetCommit")
        if error is not None:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # not using Kafka's group management: a "simple" group is created by the commit
                log.info("creating simple consumer group %s via manual offset commit", group_id)
                group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, self.time_ms())
            else:
                # a member of a generation that no longer exists: ILLEGAL_GENERATION as Kafka 3.9's
                # GroupCoordinator answers at every version it serves; v10 exists only in Kafka 4,
                # whose coordinator says GROUP_ID_NOT_FOUND
                return all_(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 10 else ErrorCode.ILLEGAL_GENERATION)
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return all_(error)
        state = group.state
        if state is COMPLETING_REBALANCE:
            # a valid member of the new generation that has not synced yet: let it finish the rebalance
            return all_(ErrorCode.REBALANCE_IN_PROGRESS)
        if state in (STABLE, PREPARING_REBALANCE):
            # commits keep the session alive; during PreparingRebalance the heartbeat answer tells
            # the member about the rebalance
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        return await self._store_offsets(group, offsets)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: Optional[str], is_transactional: bool = False
                                ) -> Optional[ErrorCode]:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            # admin client or a consumer without group management: allowed while nobody is a member
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id,
                                                  "txn-offset-commit" if is_transactional else "offset-commit")
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not is_transactional and not group.is_(EMPTY):
            # only members may commit to a group that has members; TxnOffsetCommit before v3
            # carries no member id or generation, so it is exempt (as in Kafka)
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _metadata_fits(self, om: OffsetAndMetadata) -> bool:
        return java_string_length(om.metadata) <= self.offset_config.max_metadata_size

    async def _store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartitionKey, OffsetAndMetadata]
                             ) -> dict[TopicPartitionKey, ErrorCode]:
        filtered = {tp: om for tp, om in offsets.items() if self._metadata_fits(om)}
        if not filtered:
            return {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets}
        group.prepare_offset_commit(filtered)
        try:
            errors, base_offset = await self.storage.store_offsets_at(group.group_id, filtered)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("storing offsets of group %s failed", group.group_id)
            errors, base_offset = {tp: ErrorCode.UNKNOWN_SERVER_ERROR for tp in filtered}, -1
        if not group.is_(DEAD):
            for tp, om in filtered.items():
                if errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE:
                    group.on_offset_commit_append(tp, om, base_offset if base_offset >= 0 else None)
                else:
                    group.fail_pending_offset_write(tp, om)
        return {tp: (ErrorCode(errors.get(tp, ErrorCode.NONE)) if tp in filtered
                     else ErrorCode.OFFSET_METADATA_TOO_LARGE) for tp in offsets}

    # ==== TxnOffsetCommit and transaction completion =================================================

    async def handle_txn_commit_offsets(self, group_id: str, transactional_id: str, producer_id: int,
                                        producer_epoch: int, member_id: str, group_instance_id: Optional[str],
                                        generation_id: int, offsets: dict[TopicPartitionKey, OffsetAndMetadata]
                                        ) -> dict[TopicPartitionKey, ErrorCode]:
        """Kafka's handleTxnCommitOffsets: the offsets are written to `__consumer_offsets` as a
        transactional batch of the producer and held pending until the transaction's marker is
        written (handle_txn_completion). A group that does not exist yet is created, empty."""
        def all_(error: ErrorCode) -> dict[TopicPartitionKey, ErrorCode]:
            return {tp: error for tp in offsets}

        error = self._validate_group_status(group_id, "TxnOffsetCommit")
        if error is not None:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, self.time_ms())
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id,
                                             is_transactional=True)
        if error is not None:
            return all_(error)
        log.debug("TxnOffsetCommit of %s (producer %d epoch %d) for group %s: %s", transactional_id,
                  producer_id, producer_epoch, group_id, offsets)
        return await self._store_txn_offsets(group, producer_id, producer_epoch, offsets)

    async def _store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                                 offsets: dict[TopicPartitionKey, OffsetAndMetadata]
                                 ) -> dict[TopicPartitionKey, ErrorCode]:
        filtered = {tp: om for tp, om in offsets.items() if self._metadata_fits(om)}
        if not filtered:
            return {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets}
        group_id = group.group_id
        self.open_groups_for_producer.setdefault(producer_id, set()).add(group_id)
        group.prepare_txn_offset_commit(producer_id, filtered)
        try:
            errors, base_offset = await self.storage.store_offsets_at(
                group_id, filtered, producer_id=producer_id, producer_epoch=producer_epoch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("storing transactional offsets of group %s failed", group_id)
            errors, base_offset = {tp: ErrorCode.UNKNOWN_SERVER_ERROR for tp in filtered}, -1
        if not group.is_(DEAD):
            for tp, om in filtered.items():
                if errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE and base_offset >= 0:
                    group.on_txn_offset_commit_append(producer_id, tp, CommitRecord(om, base_offset))
                else:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
            if not group.has_pending_offset_commits_from_producer(producer_id):
                self._remove_producer_group(producer_id, group_id)
        return {tp: (ErrorCode(errors.get(tp, ErrorCode.NONE)) if tp in filtered
                     else ErrorCode.OFFSET_METADATA_TOO_LARGE) for tp in offsets}

    def handle_txn_completion(self, producer_id: int, offsets_partitions: Iterable[int], commit: bool) -> None:
        """The COMMIT/ABORT markers of `producer_id`'s transaction are in these `__consumer_offsets`
        partitions: a commit materialises the producer's pending offsets of their groups, an abort
        drops them (Kafka's scheduleHandleTxnCompletion / handleTxnCompletion)."""
        partitions = set(offsets_partitions)
        for p in partitions & self.loading_partitions:
            self._txn_completions_while_loading.setdefault(p, []).append((producer_id, commit))
        self._complete_txn_for_partitions(producer_id, partitions, commit)

    def _complete_txn_for_partitions(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        for group_id in list(self.open_groups_for_producer.get(producer_id, ())):
            if self.partition_for(group_id) not in partitions:
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(DEAD):
                log.info("group %s is gone after the transaction marker of producer %d was written",
                         group_id, producer_id)
            else:
                changed = group.complete_pending_txn_offset_commit(producer_id, commit)
                log.debug("transaction of producer %d %s for group %s; offsets of %s installed", producer_id,
                          "committed" if commit else "aborted", group_id, changed)
            self._remove_producer_group(producer_id, group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.open_groups_for_producer[producer_id]

    # ==== OffsetFetch ================================================================================

    def handle_fetch_offsets(self, group_id: str, require_stable: bool,
                             partitions: Optional[list[TopicPartitionKey]] = None
                             ) -> tuple[ErrorCode, dict[TopicPartitionKey, OffsetFetchPartitionData]]:
        """Offsets of `partitions` (None: every committed partition). Answered whatever the group's
        state, since offsets-only groups have no membership at all."""
        error = self._validate_group_status(group_id, "OffsetFetch")
        if error is not None:
            return error, {}
        none = OffsetFetchPartitionData(INVALID_OFFSET, -1, NO_METADATA, ErrorCode.NONE)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.NONE, {tp: none for tp in (partitions or [])}
        tps = partitions if partitions is not None else list(group.offsets)
        out: dict[TopicPartitionKey, OffsetFetchPartitionData] = {}
        for tp in tps:
            if require_stable and group.has_pending_offset_commits_for(tp):
                out[tp] = OffsetFetchPartitionData(INVALID_OFFSET, -1, NO_METADATA, ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            om = group.offset(tp)
            out[tp] = none if om is None else OffsetFetchPartitionData(om.offset, om.leader_epoch, om.metadata,
                                                                        ErrorCode.NONE)
        return ErrorCode.NONE, out

    # ==== DescribeGroups / ListGroups ================================================================

    def handle_describe_group(self, group_id: str, api_version: int = 5
                              ) -> tuple[ErrorCode, Optional[str], GroupSummary]:
        error = self._validate_group_status(group_id, "DescribeGroups")
        if error is not None:
            return error, None, EMPTY_GROUP_SUMMARY
        group = self.groups.get(group_id)
        if group is None:
            if api_version >= 6:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", DEAD_GROUP_SUMMARY
            return ErrorCode.NONE, None, DEAD_GROUP_SUMMARY
        return ErrorCode.NONE, None, group.summary()

    def handle_list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                           ) -> tuple[ErrorCode, list[GroupOverview]]:
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading else ErrorCode.NONE
        state_filter = {s.lower() for s in states}
        type_filter = {t.lower() for t in types}
        # every group of this coordinator is a classic group; any other type matches none
        if type_filter and "classic" not in type_filter:
            return error, []
        groups = [g.overview() for g in self.groups.values()
                  if not state_filter or str(g.state).lower() in state_filter]
        return error, groups

    # ==== DeleteGroups / OffsetDelete / expiration ===================================================

    async def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, "DeleteGroups")
            if error is not None:
                errors[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(DEAD):
                errors[group_id] = (ErrorCode.GROUP_ID_NOT_FOUND if self.group_not_exists(group_id)
                                    else ErrorCode.NOT_COORDINATOR)
            elif group.is_(EMPTY):
                group.transition_to(DEAD, self.time_ms())
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            for g in eligible:
                for producer_id in g.active_producers:
                    self._remove_producer_group(producer_id, g.group_id)
            removed = await self._cleanup_group_metadata(
                eligible, lambda g: g.remove_all_offsets_and_pending_txn_offsets())
            log.info("deleted groups %s; %d offsets removed", [g.group_id for g in eligible], removed)
            for g in eligible:
                errors[g.group_id] = ErrorCode.NONE
        return errors

    async def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartitionKey]
                                    ) -> tuple[ErrorCode, dict[TopicPartitionKey, ErrorCode]]:
        error = self._validate_group_status(group_id, "OffsetDelete")
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return (ErrorCode.GROUP_ID_NOT_FOUND if self.group_not_exists(group_id) else ErrorCode.NOT_COORDINATOR), {}
        partition_errors: dict[TopicPartitionKey, ErrorCode] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            # a live consumer group keeps the offsets of the topics it consumes
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    partition_errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            removed = await self._cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            for tp in eligible:
                partition_errors[tp] = ErrorCode.NONE
            log.info("deleted offsets %s of group %s; %d removed", eligible, group_id, removed)
        return ErrorCode.NONE, partition_errors

    async def _cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                                      selector: Callable[[GroupMetadata], dict[TopicPartitionKey, OffsetAndMetadata]]
                                      ) -> int:
        """Remove the offsets `selector` picks; a group left Empty without offsets dies. Tombstones
        (offsets, and the group's record if it died) go to the log."""
        removed_total = 0
        writes = []
        now = self.time_ms()
        for group in list(groups):
            removed = selector(group)
            group_removed = False
            if group.is_(EMPTY) and not group.has_offsets():
                group.transition_to(DEAD, now)
            if group.is_(DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                # generation 0: the group only ever stored offsets, it has no metadata record
                group_removed = group.generation_id > 0
            removed_total += len(removed)
            if removed or group_removed:
                writes.append(self._write_tombstones(group.group_id, list(removed), group_removed))
        if writes:
            await asyncio.gather(*writes)
        return removed_total

    async def _write_tombstones(self, group_id: str, offsets: list[TopicPartitionKey], group: bool) -> None:
        # as Kafka, no acknowledgement is awaited beyond the local append: a lost tombstone is
        # written again by the next expiration run
        try:
            await self.storage.store_tombstones(group_id, offsets, group)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("writing tombstones of group %s failed", group_id)

    async def expire_group_metadata(self) -> int:
        """One run of the offsets-retention task (`offsets.retention.check.interval.ms`)."""
        now = self.time_ms()
        retention = self.offset_config.retention_ms
        removed = await self._cleanup_group_metadata(list(self.groups.values()),
                                                     lambda g: g.remove_expired_offsets(now, retention))
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    async def _expiration_loop(self) -> None:
        interval = self.offset_config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_group_metadata()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group metadata expiration failed")

    # ==== storage helpers ============================================================================

    def _store_group(self, group: GroupMetadata, assignment: dict[str, bytes],
                     on_done: Callable[[ErrorCode], None]) -> None:
        snapshot = group.snapshot(assignment)  # now: the group changes while the write is in flight

        async def write() -> None:
            try:
                error = await self.storage.store_group(snapshot)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("storing group %s failed", group.group_id)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
            on_done(ErrorCode(error))

        self._spawn(write(), f"store-group-{group.group_id}")


async def _await_callback(start: Callable[[Callable[[Any], None]], None]) -> Any:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def complete(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    start(complete)
    return await future
