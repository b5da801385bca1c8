"""KafkaController: the ZooKeeper-mode controller every broker runs and one of them activates
(Kafka's KafkaController).

Every broker registers itself under /brokers/ids (its broker epoch is that znode's czxid) and
competes for the ephemeral /controller znode. The winner bumps /controller_epoch and becomes the
active controller: it loads the cluster from ZooKeeper into its ControllerContext, watches broker,
topic, deletion and election znodes, and drives the partition and replica state machines, telling
brokers what changed with LeaderAndIsr / UpdateMetadata / StopReplica. Every event — a watch
firing, an API request (ControlledShutdown, AlterPartition, ElectLeaders), a session expiry, the
periodic leader rebalance — is processed in order by one event task, and every write of an
active controller is conditional on the /controller_epoch zkVersion it won, so a controller that
lost its place can never write over its successor.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional, Union

from kafkalite.cluster.metadata_cache import BrokerInfo
from kafkalite.controller.channel_manager import (ControllerBrokerRequestBatch, ControllerChannelManager,
                                                 OwnBrokerHandler)
from kafkalite.controller.controller_context import ControllerContext, PartitionAndReplica, ReplicaAssignment
from kafkalite.controller.election import (ControlledShutdownPartitionLeaderElectionStrategy,
                                           OfflinePartitionLeaderElectionStrategy,
                                           PreferredReplicaPartitionLeaderElectionStrategy,
                                           preferred_replica_partition_leader_election)
from kafkalite.controller.event_manager import ControllerEvent, ControllerEventManager
from kafkalite.controller.partition_state_machine import PartitionStateMachine, StateChangeFailedError
from kafkalite.controller.reassignment import ReassignmentManager
from kafkalite.controller.replica_state_machine import ReplicaStateMachine
from kafkalite.controller.states import (NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState,
                                         PartitionState, ReplicaState)
from kafkalite.controller.topic_deletion import TopicDeletionManager
from kafkalite.controller.zk import znodes
from kafkalite.controller.broker_registration import broker_info_of
from kafkalite.controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from kafkalite.controller.zk.znodes import FEATURE_STATUS_ENABLED, BrokerRegistration, FeatureZNode
from kafkalite.controller.zk.znode_store import ZkState, ZNodeStore
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.slices import SliceClock
from kafkalite.cluster.topic_partition import TopicPartition

log = logging.getLogger(__name__)

UNKNOWN_BROKER_EPOCH = -1
ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1


@dataclass(frozen=True)
class ControllerConfig:
    broker_id: int
    delete_topic_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    unclean_leader_election_enable: bool = False
    inter_broker_listener: str = "PLAINTEXT"
    controller_socket_timeout_ms: int = 30000
    # the delay before the first automatic rebalance check after failover (Kafka: 5 s)
    first_rebalance_check_delay_ms: int = 5000
    # how this broker's own controller reaches it (its bound inter-broker listener, over loopback)
    own_address: Optional[tuple[str, int]] = None
    # the own broker's request handler, called directly instead of over loopback (channel_manager)
    own_broker_handler: Optional[OwnBrokerHandler] = None


# an election's outcome per partition: the new leader, or Kafka's error code and message
ElectionOutcome = dict[TopicPartition, Union[int, tuple[ErrorCode, Optional[str]]]]


class KafkaController:
    def __init__(self, config: ControllerConfig, registration: BrokerRegistration, store: ZNodeStore, zk: KafkaZkClient,
                 on_broker_epoch: Optional[Callable[[int], None]] = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.registration = registration
        self.store = store
        self.zk = zk
        self.context = ControllerContext()
        self.events = ControllerEventManager(self.broker_id)
        self.channel = ControllerChannelManager(self.broker_id, config.inter_broker_listener,
                                                config.controller_socket_timeout_ms,
                                                own_address=config.own_address,
                                                own_broker_handler=config.own_broker_handler)
        self.batch = ControllerBrokerRequestBatch(
            self.broker_id, self.context, self.channel, config.inter_broker_listener,
            on_stop_replica_response=self._on_stop_replica_response,
            on_leader_and_isr_response=self._on_leader_and_isr_response)
        self.partition_sm = PartitionStateMachine(self.broker_id, self.context, zk, self.batch,
                                                  self._unclean_leader_election_enable)
        self.replica_sm = ReplicaStateMachine(self.broker_id, self.context, zk, self.batch)
        self.topic_deletion = TopicDeletionManager(self.broker_id, self.context, self.replica_sm,
                                                   self.partition_sm, self, config.delete_topic_enable)
        self.reassignment = ReassignmentManager(self)
        self.active_controller_id = -1
        self.broker_epoch = -1
        self._on_broker_epoch = on_broker_epoch
        self._watched_topics: set[str] = set()
        self._rebalance_task: Optional[asyncio.Task[None]] = None
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    async def register_broker(self) -> int:
        """KafkaServer's registration before the controller starts: the broker epoch."""
        self.broker_epoch = await self.zk.register_broker(self.registration)
        if self._on_broker_epoch is not None:
            self._on_broker_epoch(self.broker_epoch)
        return self.broker_epoch

    def startup(self) -> None:
        self.store.add_state_listener(self._on_zk_state)
        self.events.start()
        self._started = True
        self.events.put(_Event("Startup", self._process_startup))

    async def shutdown(self) -> None:
        """Stop the event task; resign if active (the znodes go with the session, closed by the owner)."""
        await self.events.close()
        if self.is_active:
            await self._on_controller_resignation()
        self.active_controller_id = -1
        await self.channel.shutdown()

    def _on_zk_state(self, state: ZkState) -> None:
        if state == ZkState.EXPIRED:
            log.info("[Controller id=%d] ZooKeeper session expired", self.broker_id)
            self.events.clear_and_put(_Event("Expire", self._process_expire))
        elif state == ZkState.CONNECTED and self._started:
            # a new session after expiry: register again, then compete for the controller again
            self.events.put(_Event("RegisterBrokerAndReelect", self._process_register_broker_and_reelect))

    # -- election -----------------------------------------------------------------------------
    async def _process_startup(self) -> None:
        self.store.watch_data(znodes.CONTROLLER_PATH, self._on_controller_change)
        await self._elect()

    def _on_controller_change(self) -> None:
        self.events.put(_Event("Reelect", self._process_reelect))

    async def _process_reelect(self) -> None:
        await self._maybe_resign()
        await self._elect()

    async def _process_expire(self) -> None:
        self.active_controller_id = -1
        await self._on_controller_resignation()

    async def _process_register_broker_and_reelect(self) -> None:
        await self.register_broker()
        await self._process_reelect()

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = await self._current_controller_id()
        if was_active and not self.is_active:
            await self._on_controller_resignation()

    async def _current_controller_id(self) -> int:
        cid = await self.zk.get_controller_id()
        return -1 if cid is None else cid

    async def _elect(self) -> None:
        self.active_controller_id = await self._current_controller_id()
        if self.active_controller_id != -1:
            log.debug("Broker %d has been elected as the controller, so stopping the election process.",
                      self.active_controller_id)
            return
        try:
            epoch, epoch_zk_version = await self.zk.register_controller_and_increment_epoch(self.broker_id)
        except ControllerMovedError:
            await self._maybe_resign()
            if self.active_controller_id != -1:
                log.debug("Broker %d was elected as controller instead of broker %d",
                          self.active_controller_id, self.broker_id)
            else:
                log.warning("A controller has been elected but just resigned, this will result in another round "
                            "of election")
            return
        except Exception:
            log.exception("Error while electing or becoming controller on broker %d. Trigger controller movement "
                          "immediately", self.broker_id)
            await self._trigger_controller_move()
            return
        self.context.epoch = epoch
        self.context.epoch_zk_version = epoch_zk_version
        self.active_controller_id = self.broker_id
        log.info("%d successfully elected as the controller. Epoch incremented to %d and epoch zk version is now %d",
                 self.broker_id, epoch, epoch_zk_version)
        try:
            await self._on_controller_failover()
        except ControllerMovedError:
            log.info("Controller moved while failing over on broker %d", self.broker_id)
            await self._maybe_resign()
        except Exception:
            log.exception("Error while failing over to controller on broker %d", self.broker_id)
            await self._trigger_controller_move()

    async def _trigger_controller_move(self) -> None:
        await self._on_controller_resignation()
        self.active_controller_id = -1
        try:
            await self.zk.delete_controller(self.context.epoch_zk_version)
        except Exception:
            log.exception("could not delete /controller while moving the controller")

    # -- failover and resignation ---------------------------------------------------------------
    async def _on_controller_failover(self) -> None:
        ctx = self.context
        log.info("Registering handlers")
        self.store.watch_children(znodes.BROKER_IDS_PATH, lambda: self._put("BrokerChange", self._process_broker_change))
        self.store.watch_children(znodes.TOPICS_PATH, lambda: self._put("TopicChange", self._process_topic_change))
        self.store.watch_children(znodes.DELETE_TOPICS_PATH,
                                  lambda: self._put("TopicDeletion", self._process_topic_deletion))
        self.store.watch_data(znodes.PREFERRED_REPLICA_ELECTION_PATH,
                              lambda: self._put("ZkPreferredReplicaElection", self._process_zk_preferred_election))
        self.store.watch_data(znodes.REASSIGN_PARTITIONS_PATH,
                              lambda: self._put("ZkPartitionReassignment", self._process_zk_reassignment))
        await self._enable_feature_versioning()
        log.info("Initializing controller context")
        await self._initialize_controller_context()
        log.info("Fetching topic deletions in progress")
        to_delete, ineligible = await self._fetch_topic_deletions_in_progress()
        log.info("Initializing topic deletion manager")
        await self.topic_deletion.init(to_delete, ineligible)
        log.info("Sending update metadata request")
        self.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), set())
        await self.replica_sm.startup()
        await self.partition_sm.startup()
        log.info("Ready to serve as the new controller with epoch %d", ctx.epoch)
        # reassignments written to ZooKeeper while there was no controller, then the API ones
        resumed = await self.reassignment.process_zk_reassignment()
        await self.reassignment.resume(lambda tp, _a: tp not in resumed)
        await self.topic_deletion.try_topic_deletion()
        await self._process_zk_preferred_election()
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance(self.config.first_rebalance_check_delay_ms)

    async def _enable_feature_versioning(self) -> None:
        """/feature as a Kafka 3.9 controller leaves it: version 2, enabled, no finalized features."""
        if await self.zk.get_feature() is None:
            await self.zk.create_feature_znode(FeatureZNode(version=2, status=FEATURE_STATUS_ENABLED, features={}))

    async def _initialize_controller_context(self) -> None:
        ctx = self.context
        brokers = await self._live_brokers()
        ctx.set_live_brokers(brokers)
        log.info("Initialized broker epochs cache: %s", dict(sorted(ctx.live_broker_epochs.items())))
        topics = await self.zk.get_all_topics()
        await self._load_topics(topics)
        ctx.shutting_down_broker_ids.clear()
        for b in sorted(ctx.live_brokers):
            self.channel.add_broker(ctx.live_brokers[b])

    async def _live_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        return {b: (broker_info_of(reg), epoch) for b, (reg, epoch) in (await self.zk.get_all_brokers()).items()}

    async def _load_topics(self, topics: set[str]) -> dict[str, dict[int, ReplicaAssignment]]:
        """Read new topics' ids, assignments and partition states into the context."""
        ctx = self.context
        added: dict[str, dict[int, ReplicaAssignment]] = {}
        if not topics:
            return added
        assignments = await self.zk.get_topic_assignments(topics)
        clock = SliceClock()     # a CreateTopics of thousands of partitions: other clients go on
        for topic, ta in assignments.items():
            ctx.add_topic(topic, ta.topic_id)
            self._watch_partition_modifications(topic)
            added[topic] = {}
            for p, a in ta.partitions.items():
                tp = TopicPartition(topic, p)
                ctx.update_partition_replica_assignment(tp, a)
                if a.is_being_reassigned:
                    ctx.partitions_being_reassigned.add(tp)
                added[topic][p] = a
                await clock.tick()
        states = await self.zk.get_partition_states(
            [TopicPartition(t, p) for t, ps in added.items() for p in ps])
        for tp, leadership in states.items():
            ctx.put_leadership(tp, leadership)
            await clock.tick()
        return added

    def _watch_partition_modifications(self, topic: str) -> None:
        if topic not in self._watched_topics:
            self._watched_topics.add(topic)
            self.store.watch_data(znodes.topic_path(topic),
                                  lambda t=topic: self._put(f"PartitionModifications({t})",
                                                            lambda: self._process_partition_modifications(t)))

    def mute_partition_modifications(self, topic: str) -> None:
        if topic in self._watched_topics:
            self._watched_topics.discard(topic)
            self.store.unwatch(znodes.topic_path(topic))

    async def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        ctx = self.context
        to_delete = set(await self.zk.get_topic_deletions())
        # only topics queued for deletion can be ineligible: the others' replicas are not looked at
        ineligible = {tp.topic for tp, a in ctx.iter_topic_partitions(to_delete)
                      if any(not ctx.is_replica_online(r, tp) for r in a.replicas)}
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        ineligible = (ineligible | reassigning) & to_delete
        log.info("List of topics to be deleted: %s", ",".join(sorted(to_delete)))
        log.info("List of topics ineligible for deletion: %s", ",".join(sorted(ineligible)))
        return to_delete, ineligible

    async def _on_controller_resignation(self) -> None:
        log.debug("Resigning")
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        for topic in list(self._watched_topics):
            self.mute_partition_modifications(topic)
        for path in (znodes.BROKER_IDS_PATH, znodes.TOPICS_PATH, znodes.DELETE_TOPICS_PATH,
                     znodes.PREFERRED_REPLICA_ELECTION_PATH, znodes.REASSIGN_PARTITIONS_PATH):
            self.store.unwatch(path)
        await self.channel.shutdown()
        self.batch.clear()
        self.context.reset()
        log.info("Resigned")

    def _put(self, name: str, fn: Callable[[], Awaitable[None]]) -> None:
        self.events.put(_Event(name, fn))

    # -- requests to brokers ------------------------------------------------------------------
    def send_update_metadata_request(self, broker_ids: list[int], partitions: set[TopicPartition]) -> None:
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
        self.batch.send_requests_to_brokers(self.context.epoch)

    def _on_stop_replica_response(self, broker_id: int, response, deleting: frozenset[TopicPartition]) -> None:
        """Kafka's stopReplicaPartitionDeleteResponseCallback: the partitions this request deleted,
        of topics whose deletion is in progress (a replica in ReplicaDeletionStarted)."""
        errors: dict[TopicPartition, int] = {}
        for pe in response.partition_errors:
            tp = TopicPartition(pe.topic_name, pe.partition_index)
            if tp in deleting and self.context.is_any_replica_in_state(pe.topic_name,
                                                                       ReplicaState.ReplicaDeletionStarted):
                errors[tp] = pe.error_code
        if errors:
            top = response.error_code
            self._put("TopicDeletionStopReplicaResponseReceived",
                      lambda: self._process_stop_replica_response(broker_id, top, errors))

    def _on_leader_and_isr_response(self, broker_id: int, response) -> None:
        if response.error_code != ErrorCode.NONE:
            log.error("Received error %s in LeaderAndIsr response from broker %d",
                      ErrorCode(response.error_code).name, broker_id)
            return
        names = self.context.topic_names()
        errors = [(pe.topic_name, pe.partition_index, pe.error_code) for pe in response.partition_errors]
        errors += [(names[t.topic_id], pe.partition_index, pe.error_code)
                   for t in response.topics if t.topic_id in names for pe in t.partition_errors]
        # the partitions answered without error only matter while some of this broker's replicas
        # are offline (a restart's answer names 10,000 of them)
        had_offline = bool(self.context.replicas_on_offline_dirs.get(broker_id))
        offline = {TopicPartition(t, p) for t, p, e in errors if e == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {TopicPartition(t, p) for t, p, e in errors if e == ErrorCode.NONE} if had_offline else set()
        if offline or had_offline:
            self._put("LeaderAndIsrResponseReceived",
                      lambda: self._process_leader_and_isr_response(broker_id, offline, online))

    async def _process_leader_and_isr_response(self, broker_id: int, offline: set[TopicPartition],
                                               online: set[TopicPartition]) -> None:
        """Kafka's processLeaderAndIsrResponseReceived: replicas whose logs the broker could not
        create or open (KAFKA_STORAGE_ERROR) go offline, so their partitions elect elsewhere or
        show no leader."""
        if not self.is_active:
            return
        ctx = self.context
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        new = current - previous
        if new:
            log.info("Mark replicas %s on broker %d as offline",
                     ",".join(map(str, sorted(new, key=_tp_key))), broker_id)
            await self._on_replicas_become_offline(
                [PartitionAndReplica(tp.topic, tp.partition, broker_id) for tp in sorted(new, key=_tp_key)])

    async def _process_stop_replica_response(self, broker_id: int, top_error: int,
                                             errors: dict[TopicPartition, int]) -> None:
        if not self.is_active:
            return
        in_error = set(errors) if top_error != ErrorCode.NONE else {tp for tp, e in errors.items() if e != ErrorCode.NONE}
        if in_error:
            await self.topic_deletion.fail_replica_deletion(
                [PartitionAndReplica(tp.topic, tp.partition, broker_id) for tp in sorted(in_error, key=_tp_key)])
        deleted = set(errors) - in_error
        if deleted:
            await self.topic_deletion.complete_replica_deletion(
                [PartitionAndReplica(tp.topic, tp.partition, broker_id) for tp in sorted(deleted, key=_tp_key)])

    # -- DeletionClient -----------------------------------------------------------------------
    async def delete_topic_znodes(self, topic: str) -> None:
        epoch_zk_version = self.context.epoch_zk_version
        await self.zk.delete_topic_znode(topic, epoch_zk_version)
        await self.zk.delete_topic_configs([topic], epoch_zk_version)
        await self.zk.delete_topic_deletions([topic], epoch_zk_version)

    async def delete_topic_deletion_znodes(self, topics: set[str]) -> None:
        await self.zk.delete_topic_deletions(topics, self.context.epoch_zk_version)

    # -- broker membership --------------------------------------------------------------------
    async def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        current = await self._live_brokers()
        known = ctx.live_or_shutting_down_broker_ids
        new = sorted(set(current) - known)
        dead = sorted(known - set(current))
        bounced = sorted(b for b in set(current) & known if current[b][1] > ctx.live_broker_epochs[b])
        log.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                 ",".join(map(str, new)), ",".join(map(str, dead)), ",".join(map(str, bounced)),
                 ",".join(map(str, sorted(current))))
        for b in new:
            self.channel.add_broker(current[b][0])
        for b in bounced:
            await self.channel.remove_broker(b)
            self.channel.add_broker(current[b][0])
        for b in dead:
            await self.channel.remove_broker(b)
        if new:
            ctx.add_live_brokers({b: current[b] for b in new})
            await self._on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            await self._on_broker_failure(bounced)
            ctx.add_live_brokers({b: current[b] for b in bounced})
            await self._on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            await self._on_broker_failure(dead)

    async def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.context
        log.info("New broker startup callback for %s", ",".join(map(str, new_brokers)))
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = sorted(ctx.live_or_shutting_down_broker_ids - set(new_brokers))
        # existing brokers learn about the new ones; the new ones get every partition's state
        self.send_update_metadata_request(existing, set())
        with_leaders = {tp for tp in ctx.partition_leadership if not ctx.is_topic_queued_for_deletion(tp.topic)}
        self.send_update_metadata_request(new_brokers, with_leaders)
        replicas = ctx.replicas_on_brokers(set(new_brokers))
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.OnlineReplica)
        await self.partition_sm.trigger_online_partition_state_change()
        new = set(new_brokers)
        await self.reassignment.resume(lambda _tp, a: any(r in new for r in a.target_replicas))
        to_delete = {r.topic for r in replicas if ctx.is_topic_queued_for_deletion(r.topic)}
        if to_delete:
            await self.topic_deletion.resume_deletion_for_topics(to_delete)

    async def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.context
        log.info("Broker failure callback for %s", ",".join(map(str, dead_brokers)))
        for b in dead_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        were_shutting_down = [b for b in dead_brokers if b in ctx.shutting_down_broker_ids]
        ctx.shutting_down_broker_ids -= set(dead_brokers)
        if were_shutting_down:
            log.info("Removed %s from list of shutting down brokers.", were_shutting_down)
        await self._on_replicas_become_offline(ctx.replicas_on_brokers(set(dead_brokers)))

    async def _on_replicas_become_offline(self, offline: list[PartitionAndReplica]) -> None:
        ctx = self.context
        for_deletion = [r for r in offline if ctx.is_topic_queued_for_deletion(r.topic)]
        not_for_deletion = [r for r in offline if not ctx.is_topic_queued_for_deletion(r.topic)]
        offline_leader = [tp for tp, l in ctx.partition_leadership.items()
                          if not ctx.is_replica_online(l.leader_and_isr.leader, tp)
                          and not ctx.is_topic_queued_for_deletion(tp.topic)]
        await self.partition_sm.handle_state_changes(sorted(offline_leader, key=_tp_key), PartitionState.OfflinePartition)
        results = await self.partition_sm.trigger_online_partition_state_change()
        await self.replica_sm.handle_state_changes(not_for_deletion, ReplicaState.OfflineReplica)
        if for_deletion:
            await self.topic_deletion.fail_replica_deletion(for_deletion)
        if not not_for_deletion and all(isinstance(r, Exception) for r in results.values()):
            # nothing changed a leader or ISR: tell the brokers about the dead broker(s) directly
            self.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), set())

    # -- topics -------------------------------------------------------------------------------
    async def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        topics = await self.zk.get_all_topics()
        new_topics = topics - ctx.all_topics
        deleted = ctx.all_topics - topics
        for t in deleted:
            self.mute_partition_modifications(t)
            ctx.remove_topic(t)
        added = await self._load_topics(new_topics)
        # Kafka's two lines name every new partition: ~1-2 ms each for 1,000 partitions, so the
        # loop serves others between them and the work around them
        await asyncio.sleep(0)
        log.info("New topics: [%s], deleted topics: [%s], new partition replica assignment [%s]",
                 ",".join(sorted(new_topics)), ",".join(sorted(deleted)),
                 {t: {p: list(a.replicas) for p, a in ps.items()} for t, ps in added.items()})
        new_partitions = [TopicPartition(t, p) for t, ps in sorted(added.items()) for p in sorted(ps)]
        if new_partitions:
            await asyncio.sleep(0)
            await self._on_new_partition_creation(new_partitions)

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        log.info("New partition creation callback for %s", ",".join(map(str, partitions)))
        await asyncio.sleep(0)
        ctx = self.context
        await self.partition_sm.handle_state_changes(partitions, PartitionState.NewPartition)
        await self.replica_sm.handle_state_changes(ctx.replicas_for_partitions(partitions), ReplicaState.NewReplica)
        await self.partition_sm.handle_state_changes(partitions, PartitionState.OnlinePartition, OfflinePartitionLeaderElectionStrategy(False))
        await self.replica_sm.handle_state_changes(ctx.replicas_for_partitions(partitions), ReplicaState.OnlineReplica)

    async def _process_partition_modifications(self, topic: str) -> None:
        if not self.is_active or topic not in self.context.all_topics:
            return
        ctx = self.context
        assignments = await self.zk.get_topic_assignments({topic})
        ta = assignments.get(topic)
        if ta is None:
            return
        to_add = {p: a for p, a in ta.partitions.items()
                  if not ctx.partition_replica_assignment(TopicPartition(topic, p))}
        if ctx.is_topic_queued_for_deletion(topic):
            if to_add:
                log.warning("Skipping adding partitions %s for topic %s since it is currently being deleted",
                            sorted(to_add), topic)
                current = {p: a for p, a in ctx.partition_assignments.get(topic, {}).items()}
                await self.zk.set_topic_assignment(topic, ctx.topic_ids[topic], current, ctx.epoch_zk_version)
            else:
                log.info("Ignoring partition change during topic deletion as no new partitions are added")
            return
        if to_add:
            log.info("New partitions to be added %s", {p: list(a.replicas) for p, a in to_add.items()})
            for p, a in to_add.items():
                ctx.update_partition_replica_assignment(TopicPartition(topic, p), a)
            await self._on_new_partition_creation([TopicPartition(topic, p) for p in sorted(to_add)])

    async def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        to_delete = set(await self.zk.get_topic_deletions())
        non_existent = to_delete - ctx.all_topics
        if non_existent:
            log.warning("Ignoring request to delete non-existing topics %s", ",".join(sorted(non_existent)))
            await self.zk.delete_topic_deletions(non_existent, ctx.epoch_zk_version)
        to_delete -= non_existent
        if not self.config.delete_topic_enable:
            if to_delete:
                log.info("Removing %s since delete topic is disabled", sorted(to_delete))
                await self.zk.delete_topic_deletions(to_delete, ctx.epoch_zk_version)
            return
        if to_delete:
            log.info("Starting topic deletion for topics %s", ",".join(sorted(to_delete)))
            reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
            for t in to_delete & reassigning:
                self.topic_deletion.mark_topic_ineligible_for_deletion({t}, "topic reassignment in progress")
            await self.topic_deletion.enqueue_topics_for_deletion(to_delete)

    # -- controlled shutdown ------------------------------------------------------------------
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        """ControlledShutdown from a broker: move leadership off it; the partitions it still leads."""
        future: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            try:
                remaining = await self._do_controlled_shutdown(broker_id, broker_epoch)
                _resolve(future, (ErrorCode.NONE, remaining))
            except KafkaApiError as e:
                _resolve(future, (e.code, []))
            except ControllerMovedError:
                _resolve(future, (ErrorCode.STALE_CONTROLLER_EPOCH, []))
            except Exception:
                log.exception("controlled shutdown of broker %d failed", broker_id)
                _resolve(future, (ErrorCode.UNKNOWN_SERVER_ERROR, []))
        # Kafka fails a pre-empted or misdirected ControlledShutdown with ControllerMovedException,
        # which clients see as STALE_CONTROLLER_EPOCH
        self.events.put(_Event("ControlledShutdown", process,
                               lambda: _resolve(future, (ErrorCode.STALE_CONTROLLER_EPOCH, []))))
        return await future

    async def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self.context
        if not self.is_active:
            raise KafkaApiError(ErrorCode.STALE_CONTROLLER_EPOCH,
                                "Controller moved to another broker. Aborting controlled shutdown")
        if broker_epoch != UNKNOWN_BROKER_EPOCH:
            if broker_id not in ctx.live_broker_epochs:
                # Kafka looks the epoch up with Map.apply: an unknown broker with an epoch is a
                # NoSuchElementException, answered as UNKNOWN_SERVER_ERROR
                raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            cached = ctx.live_broker_epochs[broker_id]
            if broker_epoch < cached:
                msg = (f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
                       f"{broker_id}. Current broker epoch is {cached}.")
                log.info(msg)
                raise KafkaApiError(ErrorCode.STALE_BROKER_EPOCH, msg)
        log.info("Shutting down broker %d", broker_id)
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise KafkaApiError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist.")
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [tp for tp in ctx.partitions_on_broker(broker_id)
                     if len(ctx.partition_replica_assignment(tp)) > 1 and ctx.leadership(tp) is not None
                     and not ctx.is_topic_queued_for_deletion(tp.topic)]
        led = sorted((tp for tp in to_act_on if ctx.leadership(tp).leader_and_isr.leader == broker_id), key=_tp_key)  # type: ignore[union-attr]
        followed = sorted((tp for tp in to_act_on if tp not in set(led)), key=_tp_key)
        await self.partition_sm.handle_state_changes(led, PartitionState.OnlinePartition, ControlledShutdownPartitionLeaderElectionStrategy())
        self.batch.new_batch()
        for tp in followed:
            self.batch.add_stop_replica_request_for_brokers([broker_id], tp, delete=False)
        await self.batch.send_requests_to_brokers_in_slices(ctx.epoch)
        await self.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, broker_id) for tp in followed], ReplicaState.OfflineReplica)
        return sorted(ctx.partition_leaders_on_broker(broker_id), key=_tp_key)

    # -- AlterPartition -----------------------------------------------------------------------
    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              changes: dict[TopicPartition, LeaderAndIsr]
                              ) -> tuple[ErrorCode, dict[TopicPartition, Union[ErrorCode, LeaderAndIsr]]]:
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        async def process() -> None:
            try:
                _resolve(future, await self._do_alter_partition(broker_id, broker_epoch, changes))
            except ControllerMovedError:
                _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))
        self.events.put(_Event("AlterPartitionReceived", process, lambda: _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))))
        return await future

    async def _do_alter_partition(self, broker_id: int, broker_epoch: int,
                                  changes: dict[TopicPartition, LeaderAndIsr]
                                  ) -> tuple[ErrorCode, dict[TopicPartition, Union[ErrorCode, LeaderAndIsr]]]:
        ctx = self.context
        if not self.is_active:
            return ErrorCode.NOT_CONTROLLER, {}
        cached = ctx.live_broker_epochs.get(broker_id)
        if cached is None:
            log.info("Ignoring AlterPartition due to unknown broker %d", broker_id)
            return ErrorCode.STALE_BROKER_EPOCH, {}
        if cached != broker_epoch:
            log.info("Ignoring AlterPartition due to stale broker epoch %d and local broker epoch %d for broker %d",
                     broker_epoch, cached, broker_id)
            return ErrorCode.STALE_BROKER_EPOCH, {}
        responses: dict[TopicPartition, Union[ErrorCode, LeaderAndIsr]] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, new in changes.items():
            leadership = ctx.leadership(tp)
            if leadership is None:
                responses[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = leadership.leader_and_isr
            if new.leader_epoch != current.leader_epoch:
                responses[tp] = ErrorCode.FENCED_LEADER_EPOCH
            elif new.partition_epoch < current.partition_epoch:
                responses[tp] = ErrorCode.INVALID_UPDATE_VERSION
            elif new.equals_allow_stale_partition_epoch(current):
                responses[tp] = current
            elif new.leader_recovery_state == LeaderRecoveryState.RECOVERING and len(new.isr) > 1:
                responses[tp] = ErrorCode.INVALID_REQUEST
            elif current.leader_recovery_state == LeaderRecoveryState.RECOVERED and \
                    new.leader_recovery_state == LeaderRecoveryState.RECOVERING:
                responses[tp] = ErrorCode.INVALID_REQUEST
            elif set(new.isr) - ctx.live_broker_ids:
                log.info("Rejecting AlterPartition request from node %d for %s because it specified ineligible "
                         "replicas %s in the new ISR %s.", broker_id, tp, sorted(set(new.isr) - ctx.live_broker_ids),
                         list(new.isr))
                responses[tp] = ErrorCode.INELIGIBLE_REPLICA
            else:
                adjusted[tp] = new
        if adjusted:
            update = await self.zk.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            bad_version = update.partitions_to_retry
            for tp, r in update.finished.items():
                if isinstance(r, LeaderAndIsr):
                    ctx.put_leadership(tp, LeaderIsrAndControllerEpoch(r, ctx.epoch))
                    responses[tp] = r
                else:
                    log.error("Failed to update ISR to %s for partition %s: %s", adjusted[tp], tp, r)
                    responses[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
            for tp in bad_version:
                log.info("Failed to update ISR to %s for partition %s, bad ZK version.", adjusted[tp], tp)
                responses[tp] = ErrorCode.INVALID_UPDATE_VERSION
        self.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), set(changes))
        for tp, r in responses.items():
            if isinstance(r, LeaderAndIsr) and tp in ctx.partitions_being_reassigned:
                # the ISR moved: a reassignment waiting for its targets may be complete now
                self._put(f"PartitionReassignmentIsrChange({tp})",
                          lambda tp=tp: self._process_reassignment_isr_change(tp))
        return ErrorCode.NONE, responses

    async def _process_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if self.is_active:
            await self.reassignment.maybe_complete(tp)

    # -- reassignment -------------------------------------------------------------------------
    async def _process_zk_reassignment(self) -> None:
        if self.is_active:
            await self.reassignment.process_zk_reassignment()

    async def alter_partition_reassignments(self, requested: dict[TopicPartition, Optional[list[int]]]
                                            ) -> tuple[ErrorCode, dict[TopicPartition, tuple[ErrorCode, Optional[str]]]]:
        """AlterPartitionReassignments: a target replica list per partition (None cancels)."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if not self.is_active:
                _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))
                return
            try:
                _resolve(future, (ErrorCode.NONE, await self.reassignment.api_reassign(requested)))
            except ControllerMovedError:
                _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))
        self.events.put(_Event("ApiPartitionReassignment", process,
                               lambda: _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))))
        return await future

    async def list_partition_reassignments(self, partitions: Optional[list[TopicPartition]]
                                           ) -> tuple[ErrorCode, dict[TopicPartition, ReplicaAssignment]]:
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if not self.is_active:
                _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))
                return
            _resolve(future, (ErrorCode.NONE, self.reassignment.list_reassignments(partitions)))
        self.events.put(_Event("ListPartitionReassignments", process,
                               lambda: _resolve(future, (ErrorCode.NOT_CONTROLLER, {}))))
        return await future

    # -- leader elections ---------------------------------------------------------------------
    async def elect_leaders(self, partitions: Optional[set[TopicPartition]], election_type: int) -> ElectionOutcome:
        """ElectLeaders from an admin client (None: every partition, as Kafka's null topic list)."""
        future: asyncio.Future[ElectionOutcome] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if not self.is_active:
                _resolve(future, {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions or ()})
                return
            targets = set(self.context.all_partitions()) if partitions is None else partitions
            _resolve(future, await self._process_replica_leader_election(targets, election_type, admin=True))
        self.events.put(_Event("ReplicaLeaderElection", process,
                               lambda: _resolve(future, {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions or ()})))
        return await future

    async def _process_replica_leader_election(self, partitions: set[TopicPartition], election_type: int,
                                               admin: bool, auto: bool = False) -> ElectionOutcome:
        ctx = self.context
        known_all = set(ctx.all_partitions())
        unknown = {tp for tp in partitions if tp not in known_all}
        known = partitions - unknown
        for tp in sorted(unknown, key=_tp_key):
            log.info("Skipping replica leader election (%s) for partition %s by %s since it doesn't exist.",
                     "PREFERRED" if election_type == ELECTION_PREFERRED else "UNCLEAN", tp,
                     "AdminClientTriggered" if admin else "ZkTriggered")
        being_deleted = {tp for tp in known if ctx.is_topic_queued_for_deletion(tp.topic)}
        live = known - being_deleted
        electable: list[TopicPartition] = []
        already_valid: list[TopicPartition] = []
        for tp in sorted(live, key=_tp_key):
            leadership = ctx.leadership(tp)
            leader = leadership.leader_and_isr.leader if leadership is not None else NO_LEADER
            if election_type == ELECTION_PREFERRED:
                needed = leader != ctx.partition_replica_assignment(tp)[0]
            else:
                needed = leader == NO_LEADER or leader not in ctx.live_broker_ids
            (electable if needed else already_valid).append(tp)
        outcome: ElectionOutcome = {}
        if electable:
            strategy = PreferredReplicaPartitionLeaderElectionStrategy() if election_type == ELECTION_PREFERRED \
                else OfflinePartitionLeaderElectionStrategy(allow_unclean=admin)
            log.info("Starting replica leader election (%s) for partitions %s triggered by %s",
                     "PREFERRED" if election_type == ELECTION_PREFERRED else "UNCLEAN", ",".join(map(str, electable)),
                     "AdminClientTriggered" if admin else ("AutoTriggered" if auto else "ZkTriggered"))
            results = await self.partition_sm.handle_state_changes(electable, PartitionState.OnlinePartition, strategy)
            for tp, r in results.items():
                if isinstance(r, LeaderAndIsr):
                    outcome[tp] = r.leader
                elif isinstance(r, StateChangeFailedError):
                    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == ELECTION_PREFERRED \
                        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                    outcome[tp] = (code, str(r))
                elif isinstance(r, ControllerMovedError):
                    outcome[tp] = (ErrorCode.NOT_CONTROLLER, None)
                else:
                    outcome[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        for tp in already_valid:
            # Kafka's ApiError(ELECTION_NOT_NEEDED) carries the error's default message
            outcome[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        for tp in being_deleted:
            outcome[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
        for tp in unknown:
            outcome[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        return outcome

    async def _process_zk_preferred_election(self) -> None:
        """/admin/preferred_replica_election written by an operator's tool."""
        if not self.is_active:
            return
        if not await self.zk.path_exists(znodes.PREFERRED_REPLICA_ELECTION_PATH):
            return
        partitions = await self.zk.get_preferred_replica_election()
        try:
            await self._process_replica_leader_election(set(partitions), ELECTION_PREFERRED, admin=False)
        finally:
            await self.zk.delete_preferred_replica_election(self.context.epoch_zk_version)

    # -- automatic leader rebalance -----------------------------------------------------------
    def _schedule_auto_leader_rebalance(self, delay_ms: int) -> None:
        async def wait_then_put() -> None:
            await asyncio.sleep(delay_ms / 1000)
            self._rebalance_task = None
            self._put("AutoPreferredReplicaLeaderElection", self._process_auto_preferred_election)
        self._rebalance_task = asyncio.get_running_loop().create_task(wait_then_put(), name="auto-leader-rebalance")

    async def _process_auto_preferred_election(self) -> None:
        if not self.is_active:
            return
        try:
            log.info("Processing automatic preferred replica leader election")
            await self._check_and_trigger_auto_leader_rebalance()
        finally:
            if self.is_active:
                self._schedule_auto_leader_rebalance(self.config.leader_imbalance_check_interval_seconds * 1000)

    async def _check_and_trigger_auto_leader_rebalance(self) -> None:
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, a in ctx.iter_topic_partitions():
            if not ctx.is_topic_queued_for_deletion(tp.topic) and a.replicas:
                by_preferred.setdefault(a.replicas[0], []).append(tp)
        for preferred, tps in sorted(by_preferred.items()):
            not_preferred = [tp for tp in tps if (l := ctx.leadership(tp)) is not None
                             and l.leader_and_isr.leader != preferred]
            ratio = len(not_preferred) / len(tps)
            if ratio > self.config.leader_imbalance_per_broker_percentage / 100:
                candidates = {tp for tp in not_preferred if tp.topic in ctx.all_topics and
                              not ctx.is_topic_queued_for_deletion(tp.topic) and self._can_preferred_replica_lead(tp)}
                if candidates:
                    await self._process_replica_leader_election(candidates, ELECTION_PREFERRED, admin=False, auto=True)

    def _can_preferred_replica_lead(self, tp: TopicPartition) -> bool:
        ctx = self.context
        assignment = ctx.partition_replica_assignment(tp)
        live = {r for r in assignment if ctx.is_replica_online(r, tp)}
        leadership = ctx.leadership(tp)
        isr = leadership.leader_and_isr.isr if leadership is not None else ()
        return preferred_replica_partition_leader_election(list(assignment), list(isr), live) is not None

    # -- topic config changes -----------------------------------------------------------------
    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """A topic's unclean.leader.election.enable turned true (Kafka's TopicConfigHandler calls
        enableTopicUncleanLeaderElection on every broker; only the active controller acts): its
        offline partitions get another election, which may now pick an out-of-sync replica."""
        if self.is_active:
            self._put("TopicUncleanLeaderElectionEnable",
                      lambda: self._process_topic_unclean_leader_election_enable(topic))

    async def _process_topic_unclean_leader_election_enable(self, topic: str) -> None:
        if not self.is_active:
            return
        log.info("Unclean leader election has been enabled for topic %s", topic)
        await self.partition_sm.trigger_online_partition_state_change(topic)

    # -- settings -----------------------------------------------------------------------------
    async def _unclean_leader_election_enable(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable: its override in ZooKeeper, else the broker's."""
        configs = await self.zk.get_entity_configs("topics", topic)
        value = configs.get("unclean.leader.election.enable")
        if value is not None:
            return value.strip().lower() == "true"
        return self.config.unclean_leader_election_enable


class _Event(ControllerEvent):
    def __init__(self, name: str, fn: Callable[[], Awaitable[None]],
                 on_preempt: Optional[Callable[[], None]] = None) -> None:
        self.name = name
        self._fn = fn
        self._on_preempt = on_preempt

    async def process(self) -> None:
        await self._fn()

    def preempt(self) -> None:
        if self._on_preempt is not None:
            self._on_preempt()


def _resolve(future: asyncio.Future, value: object) -> None:
    if not future.done():
        future.set_result(value)


def _tp_key(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition
