"""ReplicaStateMachine: each replica (partition, broker) moves between New, Online, Offline and the
deletion states (Kafka's ZkReplicaStateMachine). Going Offline removes the replica from the ISR
(leader -1 if it led; the last ISR member is kept, so the ISR never becomes empty), with the
partition state znode written conditionally, and stops the replica on its broker."""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import replace

from kafkalite.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.controller.controller_context import ControllerContext, PartitionAndReplica
from kafkalite.controller.states import (LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaState, is_valid_replica_transition,
                                         remove_replica_from_isr)
from kafkalite.controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.slices import SliceClock

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkalite.state.change.logger")


class ReplicaStateMachine:
    def __init__(self, controller_id: int, context: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch) -> None:
        self.controller_id = controller_id
        self.context = context
        self.zk = zk
        self.batch = batch

    async def startup(self) -> None:
        ctx = self.context
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        for topic, assignments in ctx.partition_assignments.items():
            for p in sorted(assignments):
                tp = TopicPartition(topic, p)
                for r in assignments[p].replicas:
                    replica = PartitionAndReplica(topic, p, r)
                    if ctx.is_replica_online(r, tp):
                        ctx.replica_states[replica] = ReplicaState.OnlineReplica
                        online.append(replica)
                    else:
                        # replicas on dead brokers can't be deleted now: ineligible until they return
                        ctx.replica_states[replica] = ReplicaState.ReplicaDeletionIneligible
                        offline.append(replica)
        await self.handle_state_changes(online, ReplicaState.OnlineReplica)
        await self.handle_state_changes(offline, ReplicaState.OfflineReplica)

    async def handle_state_changes(self, replicas: list[PartitionAndReplica], target: ReplicaState) -> None:
        if not replicas:
            return
        self.batch.new_batch()
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = defaultdict(list)
            for r in replicas:
                by_broker[r.replica].append(r)
            for broker_id, rs in by_broker.items():
                await self._do_handle_state_changes(broker_id, rs, target)
            await self.batch.send_requests_to_brokers_in_slices(self.context.epoch)
        except ControllerMovedError:
            self.batch.clear()
            raise
        except Exception:
            log.exception("Error while moving some replicas to %s state", target.name)
            self.batch.clear()

    async def _do_handle_state_changes(self, replica_id: int, replicas: list[PartitionAndReplica],
                                       target: ReplicaState) -> None:
        ctx = self.context
        clock = SliceClock()     # a replica per step: thousands in a CreateTopics or a failover
        valid = []
        for r in replicas:
            await clock.tick()
            current = ctx.replica_states.setdefault(r, ReplicaState.NonExistentReplica)
            if is_valid_replica_transition(current, target):
                valid.append(r)
            else:
                state_change_log.error("Controller %d epoch %d failed to change state for replica %d of partition "
                                       "%s from %s to %s: invalid transition", self.controller_id, ctx.epoch,
                                       replica_id, r.tp, current.name, target.name)
        if target == ReplicaState.NewReplica:
            for r in valid:
                await clock.tick()
                leadership = ctx.leadership(r.tp)
                if leadership is not None:
                    if leadership.leader_and_isr.leader == replica_id:
                        state_change_log.error("Replica %d for partition %s cannot be moved to NewReplica state as "
                                               "it is being requested to become leader", replica_id, r.tp)
                        continue
                    self.batch.add_leader_and_isr_request_for_brokers(
                        [replica_id], r.tp, leadership, ctx.partition_full_replica_assignment(r.tp), is_new=True)
                ctx.replica_states[r] = ReplicaState.NewReplica
        elif target == ReplicaState.OnlineReplica:
            recipient = [replica_id]
            for r in valid:
                await clock.tick()
                tp = TopicPartition(r.topic, r.partition)
                if ctx.replica_states[r] == ReplicaState.NewReplica:
                    assignment = ctx.partition_full_replica_assignment(tp)
                    if replica_id not in assignment.replicas:
                        log.error("Adding replica (%d) that is not part of the assignment %s", replica_id, assignment)
                        ctx.update_partition_replica_assignment(
                            tp, replace(assignment, replicas=assignment.replicas + (replica_id,)))
                else:
                    leadership = ctx.leadership(tp)
                    if leadership is not None:
                        self.batch.add_leader_and_isr_request_for_brokers(
                            recipient, tp, leadership, ctx.partition_full_replica_assignment(tp), is_new=False)
                ctx.replica_states[r] = ReplicaState.OnlineReplica
        elif target == ReplicaState.OfflineReplica:
            for r in valid:
                self.batch.add_stop_replica_request_for_brokers([replica_id], r.tp, delete=False)
            with_leadership = [r for r in valid if ctx.leadership(r.tp) is not None]
            without = [r for r in valid if ctx.leadership(r.tp) is None]
            updated = await self._remove_replicas_from_isr(replica_id, [r.tp for r in with_leadership])
            for tp, leadership in updated.items():
                state_change_log.info("Partition %s state changed to %s after removing replica %d from the ISR as "
                                      "part of transition to OfflineReplica", tp, leadership, replica_id)
                if not ctx.is_topic_queued_for_deletion(tp.topic):
                    recipients = [b for b in ctx.partition_replica_assignment(tp) if b != replica_id]
                    self.batch.add_leader_and_isr_request_for_brokers(
                        recipients, tp, leadership, ctx.partition_full_replica_assignment(tp), is_new=False)
                ctx.replica_states[PartitionAndReplica(tp.topic, tp.partition, replica_id)] = ReplicaState.OfflineReplica
            for r in without:
                self.batch.add_update_metadata_request_for_brokers(sorted(ctx.live_or_shutting_down_broker_ids), {r.tp})
                ctx.replica_states[r] = ReplicaState.OfflineReplica
        elif target == ReplicaState.ReplicaDeletionStarted:
            for r in valid:
                ctx.replica_states[r] = ReplicaState.ReplicaDeletionStarted
                self.batch.add_stop_replica_request_for_brokers([replica_id], r.tp, delete=True)
        elif target in (ReplicaState.ReplicaDeletionIneligible, ReplicaState.ReplicaDeletionSuccessful):
            for r in valid:
                ctx.replica_states[r] = target
        elif target == ReplicaState.NonExistentReplica:
            for r in valid:
                ctx.update_partition_replica_assignment(
                    r.tp, ctx.partition_full_replica_assignment(r.tp).remove_replica(replica_id))
                ctx.replica_states.pop(r, None)

    async def _remove_replicas_from_isr(self, replica_id: int, partitions: list[TopicPartition]
                                        ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        ctx = self.context
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = partitions
        while remaining:
            current = await self.zk.get_partition_states(remaining)
            adjusted: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                state = current.get(tp)
                if state is None:
                    if not ctx.is_topic_queued_for_deletion(tp.topic):
                        state_change_log.error("Failed to change state of replica %d for partition %s since the "
                                               "leader and isr path in zookeeper is empty", replica_id, tp)
                    continue
                lai = state.leader_and_isr
                shrunk = remove_replica_from_isr(lai, replica_id)
                if shrunk is None:
                    leadership = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
                    ctx.put_leadership(tp, leadership)
                    results[tp] = leadership
                    continue
                adjusted[tp] = shrunk
            if not adjusted:
                break
            update = await self.zk.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            remaining = update.partitions_to_retry
            for tp, r in update.finished.items():
                if isinstance(r, LeaderAndIsr):
                    leadership = LeaderIsrAndControllerEpoch(r, ctx.epoch)
                    ctx.put_leadership(tp, leadership)
                    results[tp] = leadership
                else:
                    state_change_log.error("Controller %d epoch %d failed to change state for replica %d of "
                                           "partition %s to OfflineReplica: %s", self.controller_id, ctx.epoch,
                                           replica_id, tp, r)
        return results
