"""TopicDeletionManager: deletes topics queued under /admin/delete_topics (Kafka's
TopicDeletionManager).

A queued topic's partitions go Offline then NonExistent, every broker learns by UpdateMetadata
(leader -2: being deleted) to stop serving it, and each live replica gets StopReplica with delete.
When every replica has answered the deletion succeeded, the topic's znodes go. A replica on a
dead broker makes the topic ineligible until that broker returns; deletion then resumes, so a
deletion always completes once every replica's broker is back."""
from __future__ import annotations

import logging
from typing import Protocol

from kafkalite.controller.controller_context import ControllerContext, PartitionAndReplica
from kafkalite.controller.partition_state_machine import PartitionStateMachine
from kafkalite.controller.replica_state_machine import ReplicaStateMachine
from kafkalite.controller.states import PartitionState, ReplicaState
from kafkalite.cluster.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class DeletionClient(Protocol):
    """What the deletion manager asks of the controller."""

    def send_update_metadata_request(self, broker_ids: list[int], partitions: set[TopicPartition]) -> None: ...

    def mute_partition_modifications(self, topic: str) -> None: ...

    async def delete_topic_znodes(self, topic: str) -> None: ...

    async def delete_topic_deletion_znodes(self, topics: set[str]) -> None: ...


class TopicDeletionManager:
    def __init__(self, controller_id: int, context: ControllerContext, replica_sm: ReplicaStateMachine,
                 partition_sm: PartitionStateMachine, client: DeletionClient, delete_topic_enable: bool) -> None:
        self.controller_id = controller_id
        self.context = context
        self.replica_sm = replica_sm
        self.partition_sm = partition_sm
        self.client = client
        self.enabled = delete_topic_enable

    async def init(self, topics_to_be_deleted: set[str], topics_ineligible: set[str]) -> None:
        log.info("Initializing manager with initial deletions: %s, initial ineligible deletions: %s",
                 sorted(topics_to_be_deleted), sorted(topics_ineligible))
        if self.enabled:
            self.context.topics_to_be_deleted |= topics_to_be_deleted
            self.context.topics_ineligible_for_deletion |= topics_ineligible & topics_to_be_deleted
        elif topics_to_be_deleted:
            # deletion disabled: the requests are dropped, as Kafka drops them
            await self.client.delete_topic_deletion_znodes(topics_to_be_deleted)

    async def try_topic_deletion(self) -> None:
        if self.enabled:
            await self.resume_deletions()

    async def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if self.enabled:
            self.context.topics_to_be_deleted |= topics
            await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: set[str]) -> None:
        if not self.enabled:
            return
        to_resume = topics & self.context.topics_to_be_deleted
        self.context.topics_ineligible_for_deletion -= to_resume
        if to_resume:
            await self.resume_deletions()

    async def fail_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        if not self.enabled:
            return
        log.debug("Deletion failed for replicas %s. Halting deletion for topics %s", replicas,
                  sorted({r.topic for r in replicas}))
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.ReplicaDeletionIneligible)
        self.mark_topic_ineligible_for_deletion({r.topic for r in replicas}, "replica deletion failure")
        await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.ReplicaDeletionSuccessful)
        await self.resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: set[str], reason: str) -> None:
        if self.enabled:
            halted = self.context.topics_to_be_deleted & topics
            self.context.topics_ineligible_for_deletion |= halted
            if halted:
                log.info("Halted deletion of topics %s due to %s", ",".join(sorted(halted)), reason)

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return self.enabled and topic in self.context.topics_ineligible_for_deletion

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return self.enabled and self.context.is_any_replica_in_state(topic, ReplicaState.ReplicaDeletionStarted)

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (topic in self.context.topics_to_be_deleted and not self.is_topic_deletion_in_progress(topic)
                and not self.is_topic_ineligible_for_deletion(topic))

    async def resume_deletions(self) -> None:
        ctx = self.context
        retry: set[str] = set()
        eligible: set[str] = set()
        for topic in sorted(ctx.topics_to_be_deleted):
            if ctx.are_all_replicas_in_state(topic, ReplicaState.ReplicaDeletionSuccessful):
                await self._complete_delete_topic(topic)
                log.info("Deletion of topic %s successfully completed", topic)
                continue
            if not ctx.is_any_replica_in_state(topic, ReplicaState.ReplicaDeletionStarted) and \
                    ctx.is_any_replica_in_state(topic, ReplicaState.ReplicaDeletionIneligible):
                retry.add(topic)
            if self.is_topic_eligible_for_deletion(topic):
                log.info("Deletion of topic %s (re)started", topic)
                eligible.add(topic)
        if retry:
            failed = [r for t in sorted(retry) for r in ctx.replicas_in_state(t, ReplicaState.ReplicaDeletionIneligible)]
            ctx.topics_ineligible_for_deletion -= retry
            await self.replica_sm.handle_state_changes(failed, ReplicaState.OfflineReplica)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self.context
        unseen = topics - ctx.topics_with_deletion_started
        if unseen:
            partitions = [tp for t in sorted(unseen) for tp in ctx.partitions_for_topic(t)]
            await self.partition_sm.handle_state_changes(partitions, PartitionState.OfflinePartition)
            await self.partition_sm.handle_state_changes(partitions, PartitionState.NonExistentPartition)
            ctx.topics_with_deletion_started |= unseen
        all_partitions = {tp for t in topics for tp in ctx.partitions_for_topic(t)}
        # brokers stop serving the topics before their replicas are deleted
        self.client.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), all_partitions)
        await self._on_partition_deletion(sorted(all_partitions, key=lambda tp: (tp.topic, tp.partition)))

    async def _on_partition_deletion(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        for replica in ctx.replicas_for_partitions(partitions):
            if not ctx.is_replica_online(replica.replica, replica.tp):
                dead.append(replica)
            elif ctx.replica_states.get(replica) != ReplicaState.ReplicaDeletionSuccessful:
                retry.append(replica)
        await self.replica_sm.handle_state_changes(dead, ReplicaState.ReplicaDeletionIneligible)
        await self.replica_sm.handle_state_changes(retry, ReplicaState.OfflineReplica)
        await self.replica_sm.handle_state_changes(retry, ReplicaState.ReplicaDeletionStarted)
        if dead:
            self.mark_topic_ineligible_for_deletion({r.topic for r in dead}, "offline replicas")

    async def _complete_delete_topic(self, topic: str) -> None:
        ctx = self.context
        self.client.mute_partition_modifications(topic)
        await self.replica_sm.handle_state_changes(ctx.replicas_in_state(topic, ReplicaState.ReplicaDeletionSuccessful),
                                                   ReplicaState.NonExistentReplica)
        await self.client.delete_topic_znodes(topic)
        ctx.remove_topic(topic)
