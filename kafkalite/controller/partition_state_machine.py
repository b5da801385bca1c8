"""PartitionStateMachine: moves partitions between NonExistent, New, Online and Offline, electing
leaders (with the strategy the caller names) and writing each partition's state znode
conditionally on the controller epoch's zkVersion and the znode's own version (Kafka's
ZkPartitionStateMachine). Every change is queued on the request batch as LeaderAndIsr to the
replicas and UpdateMetadata to every broker, sent once per call."""
from __future__ import annotations

import logging
from typing import Awaitable, Callable, Optional, Union

from kafkalite.controller import election
from kafkalite.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.controller.controller_context import ControllerContext
from kafkalite.controller.election import (OfflinePartitionLeaderElectionStrategy, PartitionLeaderElectionStrategy,
                                           failed_election_message, initial_leader_and_isr)
from kafkalite.controller.states import (LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionState,
                                         invalid_partition_transition_message, is_valid_partition_transition)
from kafkalite.controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.slices import SliceClock, log_in_slices

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkalite.state.change.logger")


class StateChangeFailedError(Exception):
    pass


ElectionResult = dict[TopicPartition, Union[Exception, LeaderAndIsr]]


class PartitionStateMachine:
    def __init__(self, controller_id: int, context: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch,
                 unclean_leader_election_enable: Callable[[str], Awaitable[bool]]) -> None:
        self.controller_id = controller_id
        self.context = context
        self.zk = zk
        self.batch = batch
        # the topic's effective unclean.leader.election.enable (topic override, else the broker's)
        self.unclean_leader_election_enable = unclean_leader_election_enable

    async def startup(self) -> None:
        ctx = self.context
        for tp in ctx.all_partitions():
            leadership = ctx.leadership(tp)
            if leadership is None:
                ctx.partition_states[tp] = PartitionState.NewPartition
            elif ctx.is_replica_online(leadership.leader_and_isr.leader, tp):
                ctx.partition_states[tp] = PartitionState.OnlinePartition
            else:
                ctx.partition_states[tp] = PartitionState.OfflinePartition
        await self.trigger_online_partition_state_change()

    async def trigger_online_partition_state_change(self, topic: Optional[str] = None) -> ElectionResult:
        """Elect leaders for every New or Offline partition (of `topic`) not queued for deletion."""
        ctx = self.context
        partitions = [tp for tp in ctx.partitions_in_states(PartitionState.OfflinePartition, PartitionState.NewPartition)
                      if (topic is None or tp.topic == topic) and not ctx.is_topic_queued_for_deletion(tp.topic)]
        return await self.handle_state_changes(partitions, PartitionState.OnlinePartition, OfflinePartitionLeaderElectionStrategy(False))

    async def handle_state_changes(self, partitions: list[TopicPartition], target: PartitionState,
                                   strategy: Optional[PartitionLeaderElectionStrategy] = None) -> ElectionResult:
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            result = await self._do_handle_state_changes(partitions, target, strategy)
            await self.batch.send_requests_to_brokers_in_slices(self.context.epoch)
            return result
        except ControllerMovedError:
            self.batch.clear()
            raise
        except Exception as e:
            log.exception("Error while moving some partitions to %s state", target.name)
            self.batch.clear()
            return {tp: e for tp in partitions}

    async def _do_handle_state_changes(self, partitions: list[TopicPartition], target: PartitionState,
                                       strategy: Optional[PartitionLeaderElectionStrategy]) -> ElectionResult:
        ctx = self.context
        valid: list[TopicPartition] = []
        for tp in partitions:
            current = ctx.partition_states.setdefault(tp, PartitionState.NonExistentPartition)
            if is_valid_partition_transition(current, target):
                valid.append(tp)
            else:
                state_change_log.error("Controller %d epoch %d failed to change state for partition %s from %s to %s: %s",
                                       self.controller_id, ctx.epoch, tp, current, target,
                                       invalid_partition_transition_message(str(tp), current, target))
        if target == PartitionState.NewPartition:
            changed = []
            for tp in valid:
                changed.append((tp, ctx.partition_states[tp].name, list(ctx.partition_replica_assignment(tp))))
                ctx.partition_states[tp] = PartitionState.NewPartition
            await log_in_slices(state_change_log, logging.INFO,
                                "Changed partition %s state from %s to NewPartition with assigned replicas %s", changed)
            return {}
        if target == PartitionState.OnlinePartition:
            uninitialized = [tp for tp in valid if ctx.partition_states[tp] == PartitionState.NewPartition]
            to_elect = [tp for tp in valid if ctx.partition_states[tp] in (PartitionState.OfflinePartition, PartitionState.OnlinePartition)]
            if uninitialized:
                initialized = []
                for tp in await self._initialize_leader_and_isr(uninitialized):
                    initialized.append((tp, ctx.leadership(tp).leader_and_isr))  # type: ignore[union-attr]
                    ctx.partition_states[tp] = PartitionState.OnlinePartition
                await log_in_slices(state_change_log, logging.INFO,
                                    "Changed partition %s from NewPartition to OnlinePartition with state %s",
                                    initialized)
            if not to_elect:
                return {}
            if strategy is None:
                raise ValueError("Election strategy is a required field when the target state is OnlinePartition")
            results = await self._elect_leader_for_partitions(to_elect, strategy)
            elected = []
            for tp, r in results.items():
                if isinstance(r, LeaderAndIsr):
                    elected.append((tp, ctx.partition_states[tp].name, r))
                    ctx.partition_states[tp] = PartitionState.OnlinePartition
            await log_in_slices(state_change_log, logging.INFO,
                                "Changed partition %s from %s to OnlinePartition with state %s", elected)
            return results
        for tp in valid:   # Offline, NonExistent
            ctx.partition_states[tp] = target
        return {}

    async def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """New -> Online: the first live replica leads, the live replicas are the ISR."""
        ctx = self.context
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        # in slices: a CreateTopics of 1,000 partitions made each loop one 2-4 ms step
        clock = SliceClock()
        for tp in partitions:
            await clock.tick()
            replicas = ctx.partition_replica_assignment(tp)
            initial = initial_leader_and_isr(replicas, {r for r in replicas if ctx.is_replica_online(r, tp)})
            if initial is None:
                state_change_log.error(
                    "Controller %d epoch %d encountered error during state change of partition %s from New to "
                    "Online, assigned replicas are [%s], live brokers are [%s]. No assigned replica is alive.",
                    self.controller_id, ctx.epoch, tp, ",".join(map(str, ctx.partition_replica_assignment(tp))),
                    ",".join(map(str, sorted(ctx.live_broker_ids))))
                continue
            states[tp] = LeaderIsrAndControllerEpoch(initial, ctx.epoch)
        if not states:
            return []
        created = await self.zk.create_partition_states(states, ctx.epoch_zk_version)
        done = []
        for tp, error in created.items():
            await clock.tick()
            if error is not None:
                state_change_log.error("Controller %d epoch %d failed to change state for partition %s from "
                                       "NewPartition to OnlinePartition: %s", self.controller_id, ctx.epoch, tp, error)
                continue
            leadership = states[tp]
            ctx.put_leadership(tp, leadership)
            self.batch.add_leader_and_isr_request_for_brokers(
                list(leadership.leader_and_isr.isr), tp, leadership, ctx.partition_full_replica_assignment(tp),
                is_new=True)
            done.append(tp)
        return done

    async def _elect_leader_for_partitions(self, partitions: list[TopicPartition],
                                           strategy: PartitionLeaderElectionStrategy) -> ElectionResult:
        remaining = partitions
        finished: ElectionResult = {}
        while remaining:
            done, retry = await self._do_elect_leader_for_partitions(remaining, strategy)
            for tp, r in done.items():
                if isinstance(r, Exception):
                    state_change_log.error("Controller %d epoch %d failed to change state for partition %s from %s "
                                           "to OnlinePartition: %s", self.controller_id, self.context.epoch, tp,
                                           self.context.partition_states[tp].name, r)
            finished.update(done)
            remaining = retry
            if remaining:
                log.info("Retrying leader election with strategy %s for partitions %s", strategy,
                         ",".join(map(str, remaining)))
        return finished

    async def _do_elect_leader_for_partitions(
            self, partitions: list[TopicPartition], strategy: PartitionLeaderElectionStrategy
    ) -> tuple[ElectionResult, list[TopicPartition]]:
        ctx = self.context
        failed: ElectionResult = {}
        try:
            current = await self.zk.get_partition_states(partitions)
        except Exception as e:
            return {tp: e for tp in partitions}, []
        valid: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            state = current.get(tp)
            if state is None:
                failed[tp] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {tp} in "
                    f"{ctx.partition_states[tp].name} state")
            elif state.controller_epoch > ctx.epoch:
                failed[tp] = StateChangeFailedError(
                    f"Aborted leader election for partition {tp} since the LeaderAndIsr path was already written "
                    f"by another controller. This probably means that the current controller {self.controller_id} "
                    f"went through a soft failure and another controller was elected with epoch "
                    f"{state.controller_epoch}.")
            else:
                valid[tp] = state.leader_and_isr
        if not valid:
            return failed, []
        elected: dict[TopicPartition, tuple[LeaderAndIsr, list[int]]] = {}
        for tp, lai in valid.items():
            assignment = ctx.partition_full_replica_assignment(tp)
            online = {r for r in assignment.replicas if ctx.is_replica_online(r, tp)}
            topic_unclean = False
            if isinstance(strategy, OfflinePartitionLeaderElectionStrategy) and not strategy.allow_unclean \
                    and not any(r in online for r in lai.isr):
                # only read the topic's config when no ISR member is left (Kafka reads it from ZooKeeper)
                topic_unclean = await self.unclean_leader_election_enable(tp.topic)
            result = election.elect(
                strategy, assignment.replicas, lai, online, topic_unclean_leader_election_enable=topic_unclean,
                target_replicas=assignment.target_replicas, shutting_down_broker_ids=ctx.shutting_down_broker_ids,
                live_or_shutting_down={r for r in assignment.replicas
                                       if ctx.is_replica_online(r, tp, include_shutting_down=True)})
            if result.leader_and_isr is None:
                failed[tp] = StateChangeFailedError(failed_election_message(str(tp), strategy))
            else:
                if result.unclean:
                    log.warning("Unclean leader election: partition %s gets leader %d, which was not in the ISR %s",
                                tp, result.leader_and_isr.leader, list(lai.isr))
                elected[tp] = (result.leader_and_isr, list(result.live_replicas))
        if not elected:
            return failed, []
        update = await self.zk.update_leader_and_isr({tp: lai for tp, (lai, _) in elected.items()},
                                                     ctx.epoch, ctx.epoch_zk_version)
        finished, retry = update.finished, update.partitions_to_retry
        for tp, r in finished.items():
            if isinstance(r, LeaderAndIsr):
                leadership = LeaderIsrAndControllerEpoch(r, ctx.epoch)
                ctx.put_leadership(tp, leadership)
                self.batch.add_leader_and_isr_request_for_brokers(
                    elected[tp][1], tp, leadership, ctx.partition_full_replica_assignment(tp), is_new=False)
        return {**finished, **failed}, retry
