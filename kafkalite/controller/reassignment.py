"""Partition reassignment, as Kafka's controller does it (KafkaController.onPartitionReassignment
and the ZooKeeper /admin/reassign_partitions and AlterPartitionReassignments paths).

A reassignment to target replicas TRS from origin replicas ORS first writes RS = ORS + TRS with
the adding (TRS - ORS) and removing (ORS - TRS) replicas to /brokers/topics/<t>, bumps the leader
epoch and tells every replica, and starts the new replicas. It completes once every target replica
is in the ISR (checked again whenever the leader's AlterPartition changes it): the assignment
becomes TRS, the leader moves if it is not in TRS, and the removed replicas go Offline and are
deleted on their brokers. Until then the topic cannot be deleted.

A new replica joins the ISR only by replicating from the leader, so until replication exists
(issue 12) a reassignment that adds a broker stays in progress; one whose targets are already in
the ISR (reordering, or dropping replicas) completes at once.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.controller.controller_context import PartitionAndReplica
from kafkalite.controller.election import ReassignPartitionLeaderElectionStrategy
from kafkalite.controller.states import LeaderIsrAndControllerEpoch, PartitionState, ReplicaState
from kafkalite.controller.zk import znodes
from kafkalite.controller.zk.kafka_zk_client import ControllerMovedError
from kafkalite.controller.zk.znodes import ReplicaAssignment
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)

ApiError = tuple[ErrorCode, Optional[str]]
NONE: ApiError = (ErrorCode.NONE, None)


def scala_buffer(values: Sequence[int]) -> str:
    """How Kafka renders a replica list taken from the request (a Scala ArrayBuffer: KafkaApis
    maps the request's java.util.List, and reassignTo's ++/distinct/diff keep that type)."""
    return "ArrayBuffer(" + ", ".join(map(str, values)) + ")"


def scala_int_set(values: set[int]) -> str:
    """ControllerContext.liveBrokerIds as Scala renders it: a Set whose order is the broker
    epochs' hash map order, ascending for the small ids clusters use."""
    return "Set(" + ", ".join(map(str, sorted(values))) + ")"


def validate_target_replicas(replicas: list[int], current: ReplicaAssignment,
                             live_broker_ids: set[int]) -> Optional[ApiError]:
    """KafkaController.validateReplicas: Kafka's refusals of a target replica list."""
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
            f"Duplicate replica ids in partition reassignment replica list: {scala_buffer(replicas)}"
    if any(r < 0 for r in replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {scala_buffer(replicas)}"
    adding = current.reassign_to(replicas).adding_replicas
    if not set(adding) <= live_broker_ids:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
            f"Replica assignment has brokers that are not alive. Replica list: {scala_buffer(adding)}, "
            f"live broker list: {scala_int_set(live_broker_ids)}")
    return None


def build_reassignment(current: ReplicaAssignment, target: Optional[list[int]]) -> Optional[ReplicaAssignment]:
    """KafkaController.maybeBuildReassignment: None target cancels (back to the origin replicas);
    cancelling when nothing is in progress is None (NO_REASSIGNMENT_IN_PROGRESS)."""
    if current.is_being_reassigned:
        return current.reassign_to(target if target is not None else list(current.origin_replicas))
    return current.reassign_to(target) if target is not None else None


class ReassignmentManager:
    def __init__(self, controller: "KafkaController") -> None:
        self.controller = controller

    @property
    def context(self):  # type: ignore[no-untyped-def]
        return self.controller.context

    # -- the ways in -------------------------------------------------------------------------
    async def api_reassign(self, requested: dict[TopicPartition, Optional[list[int]]]
                           ) -> dict[TopicPartition, ApiError]:
        """AlterPartitionReassignments (the controller is active)."""
        ctx = self.context
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            current = ctx.partition_full_replica_assignment(tp)
            error = validate_target_replicas(target, current, ctx.live_broker_ids) if target is not None else None
            if error is not None:
                results[tp] = error
                continue
            built = build_reassignment(current, target)
            if built is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                to_reassign[tp] = built
        # the latest reassignment, API or ZooKeeper, wins: drop these from /admin/reassign_partitions
        await self._maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in to_reassign)
        results.update(await self._maybe_trigger(to_reassign))
        return results

    def list_reassignments(self, partitions: Optional[list[TopicPartition]]) -> dict[TopicPartition, ReplicaAssignment]:
        ctx = self.context
        candidates = partitions if partitions is not None else sorted(ctx.partitions_being_reassigned)
        return {tp: a for tp in candidates if (a := ctx.partition_full_replica_assignment(tp)).is_being_reassigned}

    async def process_zk_reassignment(self) -> set[TopicPartition]:
        """/admin/reassign_partitions written by an operator's tool; returns the partitions started."""
        zk = self.controller.zk
        if not await zk.reassign_partitions_in_progress():
            return set()
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in (await zk.get_partition_reassignment()).items():
            tp = TopicPartition(*tp)
            built = build_reassignment(self.context.partition_full_replica_assignment(tp), list(target))
            if built is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                to_reassign[tp] = built
        results.update(await self._maybe_trigger(to_reassign))
        failed = {tp for tp, (code, _) in results.items() if code != ErrorCode.NONE}
        if failed:
            log.warning("Failed reassignment through zk with the following errors: %s",
                        {str(tp): results[tp] for tp in failed})
            await self._maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in failed)
        return set(results) - failed

    async def resume(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        ctx = self.context
        for tp in sorted(ctx.partitions_being_reassigned):
            assignment = ctx.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                await self.on_partition_reassignment(tp, assignment)

    async def maybe_complete(self, tp: TopicPartition) -> None:
        """The ISR of a reassigning partition changed: complete it if every target is in sync."""
        if tp not in self.context.partitions_being_reassigned:
            return
        assignment = self.context.partition_full_replica_assignment(tp)
        if await self._is_complete(tp, assignment):
            log.info("Target replicas %s have all caught up with the leader for reassigning partition %s",
                     list(assignment.target_replicas), tp)
            await self.on_partition_reassignment(tp, assignment)

    # -- the algorithm -------------------------------------------------------------------------
    async def _maybe_trigger(self, reassignments: dict[TopicPartition, ReplicaAssignment]
                             ) -> dict[TopicPartition, ApiError]:
        ctx = self.context
        out: dict[TopicPartition, ApiError] = {}
        for tp, reassignment in reassignments.items():
            if ctx.is_topic_queued_for_deletion(tp.topic):
                log.info("Skipping reassignment of %s since the topic is currently being deleted", tp)
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif not ctx.partition_replica_assignment(tp):
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            else:
                try:
                    await self.on_partition_reassignment(tp, reassignment)
                    out[tp] = NONE
                except ControllerMovedError:
                    raise
                except Exception:
                    log.exception("Error completing reassignment of partition %s", tp)
                    out[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        return out

    async def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        c = self.controller
        ctx = self.context
        c.topic_deletion.mark_topic_ineligible_for_deletion({tp.topic}, "topic reassignment in progress")
        await self._update_current_reassignment(tp, reassignment)
        adding = [PartitionAndReplica(tp.topic, tp.partition, r) for r in reassignment.adding_replicas]
        if not await self._is_complete(tp, reassignment):
            # A1: every replica of ORS + TRS learns the new assignment at a new leader epoch
            await self._update_leader_epoch_and_send(tp, reassignment)
            # A2: the adding replicas start (as followers; they join the ISR by replicating)
            for r in adding:
                await c.replica_sm.handle_state_changes([r], ReplicaState.NewReplica)
            return
        # B1-B8: the targets are in sync
        await c.replica_sm.handle_state_changes(adding, ReplicaState.OnlineReplica)
        completed = ReplicaAssignment(reassignment.target_replicas)
        ctx.update_partition_replica_assignment(tp, completed)
        await self._move_leader_if_required(tp, completed)
        await self._stop_removed_replicas(tp, list(reassignment.removing_replicas))
        await self._write_assignment(tp, completed)
        await self._remove_from_reassigning(tp, completed)
        c.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), {tp})
        await c.topic_deletion.resume_deletion_for_topics({tp.topic})
        log.info("Completed reassignment of partition %s to replicas %s", tp, list(completed.replicas))

    async def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        states = await self.controller.zk.get_partition_states([tp])
        state = states.get(tp)
        return state is not None and set(assignment.target_replicas) <= set(state.leader_and_isr.isr)

    async def _update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            await self._write_assignment(tp, reassignment)
            ctx.update_partition_replica_assignment(tp, reassignment)
            # a reassignment replacing one in progress may leave adding replicas unneeded
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                await self._stop_removed_replicas(tp, unneeded)
        ctx.partitions_being_reassigned.add(tp)

    async def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        partitions = dict(ctx.partition_assignments.get(tp.topic, {}))
        partitions[tp.partition] = assignment
        await self.controller.zk.set_topic_assignment(tp.topic, ctx.topic_ids.get(tp.topic), partitions,
                                                      ctx.epoch_zk_version)

    async def _update_leader_epoch_and_send(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        c = self.controller
        updated = await self._update_leader_epoch(tp)
        if updated is None:
            log.error("Failed to send LeaderAndIsr with new replica assignment %s to leader for partition being "
                      "reassigned %s", list(assignment.replicas), tp)
            return
        c.batch.new_batch()
        # is_new only for the replicas this reassignment adds: an origin replica on an offline
        # log dir must not be silently recreated in a good one, a new replica may be
        c.batch.add_leader_and_isr_request_for_brokers(list(assignment.origin_replicas), tp, updated, assignment,
                                                       is_new=False)
        c.batch.add_leader_and_isr_request_for_brokers(list(assignment.adding_replicas), tp, updated, assignment,
                                                       is_new=True)
        c.batch.send_requests_to_brokers(ctx.epoch)

    async def _update_leader_epoch(self, tp: TopicPartition) -> Optional[LeaderIsrAndControllerEpoch]:
        """The same leader and ISR at leader epoch + 1 (followers of the old epoch are fenced)."""
        ctx = self.context
        zk = self.controller.zk
        while True:
            state = (await zk.get_partition_states([tp])).get(tp)
            if state is None:
                return None
            if state.controller_epoch > ctx.epoch:
                log.error("Aborted leader epoch update for partition %s since the LeaderAndIsr path was already "
                          "written by another controller with epoch %d", tp, state.controller_epoch)
                return None
            update = await zk.update_leader_and_isr({tp: state.leader_and_isr.new_epoch()}, ctx.epoch,
                                                    ctx.epoch_zk_version)
            written = update.finished.get(tp)
            if written is not None and not isinstance(written, Exception):
                leadership = LeaderIsrAndControllerEpoch(written, ctx.epoch)
                ctx.put_leadership(tp, leadership)
                return leadership
            if written is not None:
                return None

    async def _move_leader_if_required(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        leadership = ctx.leadership(tp)
        leader = leadership.leader_and_isr.leader if leadership is not None else -1
        if leader not in assignment.replicas:
            log.info("Leader %d for partition %s being reassigned, is not in the new list of replicas %s. "
                     "Re-electing leader", leader, tp, ",".join(map(str, assignment.replicas)))
            await self.controller.partition_sm.handle_state_changes(
                [tp], PartitionState.OnlinePartition, ReassignPartitionLeaderElectionStrategy())
        elif ctx.is_replica_online(leader, tp):
            log.info("Leader %d for partition %s being reassigned, is already in the new list of replicas %s and "
                     "is alive", leader, tp, ",".join(map(str, assignment.replicas)))
            await self._update_leader_epoch_and_send(tp, assignment)
        else:
            log.info("Leader %d for partition %s being reassigned, is already in the new list of replicas %s but "
                     "is dead", leader, tp, ",".join(map(str, assignment.replicas)))
            await self.controller.partition_sm.handle_state_changes(
                [tp], PartitionState.OnlinePartition, ReassignPartitionLeaderElectionStrategy())

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: list[int]) -> None:
        """Removed replicas leave the ISR, are stopped and their logs deleted."""
        sm = self.controller.replica_sm
        replicas = [PartitionAndReplica(tp.topic, tp.partition, r) for r in removed]
        await sm.handle_state_changes(replicas, ReplicaState.OfflineReplica)
        await sm.handle_state_changes(replicas, ReplicaState.ReplicaDeletionStarted)
        await sm.handle_state_changes(replicas, ReplicaState.ReplicaDeletionSuccessful)
        await sm.handle_state_changes(replicas, ReplicaState.NonExistentReplica)

    async def _remove_from_reassigning(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        await self._maybe_remove_from_zk_reassignment(
            lambda t, replicas: t == tp and tuple(replicas) == tuple(assignment.replicas))
        self.context.partitions_being_reassigned.discard(tp)

    async def _maybe_remove_from_zk_reassignment(
            self, should_remove: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        zk = self.controller.zk
        if not await zk.reassign_partitions_in_progress():
            return
        current = {TopicPartition(*tp): tuple(r) for tp, r in (await zk.get_partition_reassignment()).items()}
        remaining = {tp: r for tp, r in current.items() if not should_remove(tp, r)}
        if len(remaining) == len(current):
            return
        if not remaining:
            log.info("No more partitions need to be reassigned. Deleting zk path %s", znodes.REASSIGN_PARTITIONS_PATH)
            await zk.delete_partition_reassignment(self.context.epoch_zk_version)
        else:
            await zk.set_or_create_partition_reassignment(remaining, self.context.epoch_zk_version)
