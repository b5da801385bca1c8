"""Kafka-level ZooKeeper operations (Kafka 3.9's KafkaZkClient) over a ZNodeStore.

Controller fencing as Kafka does it: every write a controller makes names the zkVersion of
/controller_epoch it read when it was elected (`expected_controller_epoch_zk_version`); the
write is then a multi of CheckOp(/controller_epoch, that version) and the write itself, and a
failed check raises ControllerMovedError: a newer controller has been elected since, so this
one must resign. -1 means "no check" (writes that are not the controller's).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence, Union

from kafkalite.slices import gather_in_slices
from kafkalite.controller.zk import znodes
from kafkalite.controller.zk.znode_store import (BadVersionError, CheckOp, CreateOp, DeleteOp,
                                                 MultiError, NodeExistsError, NoNodeError, Op,
                                                 OpResult, SetDataOp, StoreError, ZNodeStore,
                                                 ZnStat)
from kafkalite.controller.zk.znodes import (BrokerRegistration, FeatureZNode, LeaderAndIsr,
                                            LeaderIsrAndControllerEpoch, ProducerIdsBlock,
                                            ReplicaAssignment, TopicAssignment, TopicPartition)

log = logging.getLogger(__name__)

MATCH_ANY_VERSION = -1      # ZkVersion.MatchAnyVersion
UNKNOWN_VERSION = -2        # ZkVersion.UnknownVersion: the node does not exist


class ControllerMovedError(Exception):
    """Kafka's ControllerMovedException: another broker is (or became) the controller."""


class ProducerIdsExhaustedError(Exception):
    pass


@dataclass
class UpdateLeaderAndIsrResult:
    """Per partition: the written LeaderAndIsr (partition_epoch = the state znode's new
    zkVersion) or the error; partitions whose state znode changed meanwhile (BadVersion) are to
    be re-read and retried."""
    finished: dict[TopicPartition, Union[LeaderAndIsr, Exception]] = field(default_factory=dict)
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


def _now_ms() -> int:
    return int(time.time() * 1000)


class KafkaZkClient:
    def __init__(self, store: ZNodeStore) -> None:
        self.store = store
        # the session that last registered our ephemeral broker node (Kafka's KAFKA-7165 guard)
        self._registration_session_id = -1

    # ---- fenced writes ---------------------------------------------------------------------

    async def _fenced(self, op: Op, expected_controller_epoch_zk_version: int) -> OpResult:
        """`op` alone, or with the /controller_epoch zkVersion check in one multi."""
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            results = await self.store.multi([op])
            return results[0]
        if expected_controller_epoch_zk_version < 0:
            raise ValueError(f"Expected controller epoch zkVersion "
                             f"{expected_controller_epoch_zk_version} should be non-negative or "
                             f"equal to {MATCH_ANY_VERSION}")
        try:
            results = await self.store.multi(
                [CheckOp(znodes.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version), op])
        except MultiError as e:
            if e.failed_index == 0 and isinstance(e, BadVersionError):
                raise ControllerMovedError(
                    f"Controller epoch zkVersion check fails. Expected zkVersion = "
                    f"{expected_controller_epoch_zk_version}") from None
            raise
        return results[1]

    async def _fenced_all(self, ops: Sequence[Op], expected: int) -> list[Union[OpResult, StoreError]]:
        """Many fenced writes pipelined; per-op result or StoreError. ControllerMovedError is
        raised as soon as any op reports it."""
        results = await gather_in_slices([self._fenced(op, expected) for op in ops], return_exceptions=True)
        for r in results:
            if isinstance(r, ControllerMovedError):
                raise r
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, StoreError):
                raise r
        return list(results)  # type: ignore[arg-type]

    # ---- generic ---------------------------------------------------------------------------

    async def path_exists(self, path: str) -> bool:
        return await self.store.exists(path) is not None

    async def get_data_and_version(self, path: str) -> tuple[Optional[bytes], int]:
        """The node's data (None when it has none or does not exist) and zkVersion
        (UNKNOWN_VERSION when it does not exist)."""
        try:
            data, stat = await self.store.get(path)
        except NoNodeError:
            return None, UNKNOWN_VERSION
        return (data or None), stat.version

    async def get_data_and_stat(self, path: str) -> tuple[Optional[bytes], Optional[ZnStat]]:
        try:
            data, stat = await self.store.get(path)
        except NoNodeError:
            return None, None
        return (data or None), stat

    async def get_children(self, path: str) -> list[str]:
        try:
            return await self.store.children(path)
        except NoNodeError:
            return []

    async def conditional_update_path(self, path: str, data: bytes,
                                      expected_version: int) -> tuple[bool, int]:
        """(True, new zkVersion), or (False, UNKNOWN_VERSION) when the version did not match
        or the node does not exist."""
        try:
            stat = await self.store.set(path, data, expected_version)
        except (BadVersionError, NoNodeError):
            return False, UNKNOWN_VERSION
        return True, stat.version

    async def create_recursive(self, path: str, data: bytes = b"",
                               throw_if_path_exists: bool = True) -> None:
        """Create `path` with its missing parents; NodeExistsError only when asked for."""
        try:
            await self.store.create(path, data, make_parents=True)
        except NodeExistsError:
            if throw_if_path_exists:
                raise

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        await self.create_recursive(path, b"", throw_if_path_exists=False)

    async def create_top_level_paths(self) -> None:
        for path in znodes.PERSISTENT_ZK_PATHS:
            await self.make_sure_persistent_path_exists(path)

    async def delete_recursive(self, path: str,
                               expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> bool:
        """Delete `path` and everything below it (each delete fenced); False when absent.
        Siblings are deleted pipelined, as `_fenced_all` writes: one after the other, the 2,000
        znodes of a 1,000-partition topic took 50 s on the local store, which persists once per
        write it was waiting for (concurrent writes share one persist)."""
        try:
            kids = await self.store.children(path)
        except NoNodeError:
            return False
        results = await gather_in_slices(
            [self.delete_recursive(f"{path.rstrip('/')}/{kid}", expected_controller_epoch_zk_version)
             for kid in kids], return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:   # a newer controller's fence first, as _fenced_all
            raise next((e for e in errors if isinstance(e, ControllerMovedError)), errors[0])
        try:
            await self._fenced(DeleteOp(path), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass
        return True

    async def delete_path(self, path: str, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION,
                          recursive: bool = True) -> None:
        if recursive:
            await self.delete_recursive(path, expected_controller_epoch_zk_version)
            return
        try:
            await self._fenced(DeleteOp(path), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass

    # ---- cluster id, broker sequence id ----------------------------------------------------

    async def get_cluster_id(self) -> Optional[str]:
        data, _ = await self.get_data_and_version(znodes.CLUSTER_ID_PATH)
        return None if data is None else znodes.decode_cluster_id(data)

    async def get_or_create_cluster_id(self, proposed_cluster_id: Optional[str] = None) -> str:
        """The cluster id in /cluster/id, created from `proposed_cluster_id` (a new random Kafka
        Uuid when None) if there is none yet."""
        existing = await self.get_cluster_id()
        if existing is not None:
            return existing
        proposed = proposed_cluster_id or znodes.uuid_to_kafka_string(_random_kafka_uuid())
        try:
            await self.create_recursive(znodes.CLUSTER_ID_PATH, znodes.encode_cluster_id(proposed))
            return proposed
        except NodeExistsError:
            cid = await self.get_cluster_id()
            if cid is None:
                raise StoreError("Failed to get cluster id from Zookeeper. This can happen if "
                                 "/cluster/id is deleted from Zookeeper.") from None
            return cid

    async def generate_broker_sequence_id(self) -> int:
        """The new zkVersion of /brokers/seqid (1, 2, ...): Kafka's generated broker ids."""
        while True:
            try:
                return (await self.store.set(znodes.BROKER_SEQUENCE_ID_PATH, b"")).version
            except NoNodeError:
                await self.make_sure_persistent_path_exists(znodes.BROKER_SEQUENCE_ID_PATH)

    # ---- brokers ---------------------------------------------------------------------------

    async def register_broker(self, registration: BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid)."""
        path = znodes.broker_id_path(registration.broker_id)
        stat = await self._checked_ephemeral_create(path, znodes.encode_broker_registration(registration))
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                 registration.broker_id, path,
                 ",".join(e.connection_string for e in registration.endpoints), stat.czxid)
        return stat.czxid

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> ZnStat:
        # created empty then set at version 0 in one multi, as Kafka does (zkVersion ends at 1)
        try:
            results = await self.store.multi([CreateOp(path, b"", ephemeral=True),
                                              SetDataOp(path, data, 0)])
            stat = results[1]
            assert isinstance(stat, ZnStat)
        except NodeExistsError:
            stat = await self._get_after_node_exists(path, data)
        self._registration_session_id = self.store.session_id
        return stat

    async def _get_after_node_exists(self, path: str, data: bytes) -> ZnStat:
        try:
            _, stat = await self.store.get(path)
        except NoNodeError:
            log.info("The ephemeral node at %s went away while reading it, creating it again", path)
            return await self._checked_ephemeral_create(path, data)
        owner, session = stat.ephemeral_owner, self.store.session_id
        if owner == self._registration_session_id and session != self._registration_session_id:
            # our own node from an expired session that ZooKeeper has not removed yet
            log.info("Ephemeral %s is owned by our previous session 0x%x; re-creating it with "
                     "session 0x%x", path, owner, session)
            try:
                await self.store.delete(path)
            except NoNodeError:
                pass
            return await self._checked_ephemeral_create(path, data)
        if owner != session:
            raise NodeExistsError(
                f"Error while creating ephemeral at {path}, node already exists and owner "
                f"'0x{owner:x}' does not match current session '0x{session:x}'")
        return stat

    async def update_broker_info(self, registration: BrokerRegistration) -> None:
        await self.store.set(znodes.broker_id_path(registration.broker_id),
                             znodes.encode_broker_registration(registration))

    async def get_sorted_broker_list(self) -> list[int]:
        return sorted(int(c) for c in await self.get_children(znodes.BROKER_IDS_PATH))

    async def get_broker(self, broker_id: int) -> Optional[BrokerRegistration]:
        data, _ = await self.get_data_and_version(znodes.broker_id_path(broker_id))
        return None if data is None else znodes.decode_broker_registration(broker_id, data)

    async def get_all_brokers(self) -> dict[int, tuple[BrokerRegistration, int]]:
        """Every registered broker with its broker epoch (czxid), by id."""
        ids = await self.get_sorted_broker_list()
        reads = await asyncio.gather(*(self.get_data_and_stat(znodes.broker_id_path(b)) for b in ids))
        out: dict[int, tuple[BrokerRegistration, int]] = {}
        for broker_id, (data, stat) in zip(ids, reads):
            if data is not None and stat is not None:
                out[broker_id] = (znodes.decode_broker_registration(broker_id, data), stat.czxid)
        return out

    # ---- controller ------------------------------------------------------------------------

    async def get_controller_id(self) -> Optional[int]:
        data, _ = await self.get_data_and_version(znodes.CONTROLLER_PATH)
        return None if data is None else znodes.decode_controller(data).broker_id

    async def get_controller_epoch(self) -> Optional[tuple[int, int]]:
        """(controller epoch, zkVersion of /controller_epoch), None before the first election."""
        data, stat = await self.get_data_and_stat(znodes.CONTROLLER_EPOCH_PATH)
        if stat is None:
            return None
        return znodes.decode_controller_epoch(data or b""), stat.version

    async def _maybe_create_controller_epoch_znode(self) -> tuple[int, int]:
        try:
            await self.store.create(znodes.CONTROLLER_EPOCH_PATH,
                                    znodes.encode_controller_epoch(znodes.INITIAL_CONTROLLER_EPOCH))
            return znodes.INITIAL_CONTROLLER_EPOCH, znodes.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExistsError:
            current = await self.get_controller_epoch()
            if current is None:
                raise StoreError(f"{znodes.CONTROLLER_EPOCH_PATH} existed before but goes away "
                                 f"while trying to read it") from None
            return current

    async def register_controller_and_increment_epoch(self, controller_id: int) -> tuple[int, int]:
        """Create the ephemeral /controller and bump /controller_epoch in one multi; returns
        (new controller epoch, its zkVersion). ControllerMovedError when another broker won."""
        timestamp = _now_ms()
        current = await self.get_controller_epoch()
        cur_epoch, cur_zk_version = current if current is not None else \
            await self._maybe_create_controller_epoch_znode()
        new_epoch = cur_epoch + 1
        try:
            results = await self.store.multi([
                CreateOp(znodes.CONTROLLER_PATH, znodes.encode_controller(
                    znodes.ControllerRegistration(controller_id, timestamp)), ephemeral=True),
                SetDataOp(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(new_epoch),
                          cur_zk_version)])
            stat = results[1]
            assert isinstance(stat, ZnStat)
            return new_epoch, stat.version
        except (NodeExistsError, BadVersionError):
            return await self._check_controller_and_epoch(controller_id, new_epoch)

    async def _check_controller_and_epoch(self, controller_id: int, new_epoch: int) -> tuple[int, int]:
        # the multi may have succeeded before a lost connection made us retry it
        current_controller = await self.get_controller_id()
        if current_controller is None:
            raise ControllerMovedError(
                f"The ephemeral node at {znodes.CONTROLLER_PATH} went away while checking whether "
                f"the controller election succeeds. Aborting controller startup procedure")
        if current_controller == controller_id:
            epoch = await self.get_controller_epoch()
            if epoch is None:
                raise StoreError(f"{znodes.CONTROLLER_EPOCH_PATH} existed before but goes away "
                                 f"while trying to read it")
            if epoch[0] == new_epoch:
                return epoch
        raise ControllerMovedError("Controller moved to another broker. Aborting controller "
                                   "startup procedure")

    async def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        await self.delete_path(znodes.CONTROLLER_PATH, expected_controller_epoch_zk_version,
                               recursive=False)

    # ---- topics and partitions -------------------------------------------------------------

    async def get_all_topics(self) -> set[str]:
        return set(await self.get_children(znodes.TOPICS_PATH))

    async def topic_exists(self, topic: str) -> bool:
        return await self.path_exists(znodes.topic_path(topic))

    async def create_topic_assignment(self, topic: str, topic_id: Optional[uuid.UUID],
                                      assignment: Mapping[int, Sequence[int]]) -> None:
        """Create /brokers/topics/<t> (NodeExistsError when the topic exists)."""
        await self.create_recursive(znodes.topic_path(topic), znodes.encode_topic_assignment(
            topic_id, {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}))

    async def set_topic_assignment(self, topic: str, topic_id: Optional[uuid.UUID],
                                   assignment: Mapping[int, ReplicaAssignment],
                                   expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> None:
        await self._fenced(SetDataOp(znodes.topic_path(topic),
                                     znodes.encode_topic_assignment(topic_id, assignment)),
                           expected_controller_epoch_zk_version)

    async def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """The assignment (with topic id, adding/removing replicas) of each existing topic."""
        names = list(topics)
        reads = await asyncio.gather(*(self.get_data_and_stat(znodes.topic_path(t)) for t in names))
        return {t: znodes.decode_topic_assignment(t, data)
                for t, (data, stat) in zip(names, reads) if stat is not None}

    async def get_topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID]:
        return {t: a.topic_id for t, a in (await self.get_topic_assignments(topics)).items()
                if a.topic_id is not None}

    async def get_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The state of each partition that has one; partition_epoch = the znode's zkVersion."""
        tps = [TopicPartition(*tp) for tp in partitions]
        reads = await self.store.get_many([znodes.topic_partition_state_path(tp.topic, tp.partition)
                                           for tp in tps])
        # a failover reads thousands of states, most of them the same bytes (one leader, epoch
        # and ISR): each distinct content is parsed once, then given each znode's version
        decoded: dict[bytes, LeaderIsrAndControllerEpoch] = {}
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, read in zip(tps, reads):
            if read is None or not read[0]:
                continue
            data, stat = read
            state = decoded.get(data)
            if state is None:
                state = decoded[data] = znodes.decode_partition_state(data, stat.version)
            out[tp] = znodes.partition_state_with_version(state, stat.version)
        return out

    async def create_partition_states(
            self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
            expected_controller_epoch_zk_version: int) -> dict[TopicPartition, Optional[StoreError]]:
        """Create the state znodes (and their /partitions parents); per partition None when
        created, else the error (NodeExistsError when a state was there already)."""
        tps = [TopicPartition(*tp) for tp in states]
        expected = expected_controller_epoch_zk_version
        await self._fenced_all([CreateOp(znodes.topic_partitions_path(t))
                                for t in dict.fromkeys(tp.topic for tp in tps)], expected)
        await self._fenced_all([CreateOp(znodes.topic_partition_path(tp.topic, tp.partition))
                                for tp in tps], expected)
        results = await self._fenced_all(
            [CreateOp(znodes.topic_partition_state_path(tp.topic, tp.partition),
                      znodes.encode_partition_state(states[tp])) for tp in tps], expected)
        return {tp: (r if isinstance(r, StoreError) else None) for tp, r in zip(tps, results)}

    async def update_leader_and_isr(self, leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
                                    controller_epoch: int,
                                    expected_controller_epoch_zk_version: int) -> UpdateLeaderAndIsrResult:
        """Write each partition's state conditional on its zkVersion (its partition_epoch)."""
        tps = [TopicPartition(*tp) for tp in leader_and_isrs]
        results = await self._fenced_all([
            SetDataOp(znodes.topic_partition_state_path(tp.topic, tp.partition),
                      znodes.encode_partition_state(
                          LeaderIsrAndControllerEpoch(leader_and_isrs[tp], controller_epoch)),
                      leader_and_isrs[tp].partition_epoch) for tp in tps],
            expected_controller_epoch_zk_version)
        out = UpdateLeaderAndIsrResult()
        for tp, r in zip(tps, results):
            if isinstance(r, BadVersionError):
                out.partitions_to_retry.append(tp)
            elif isinstance(r, StoreError):
                out.finished[tp] = r
            else:
                assert isinstance(r, ZnStat)
                out.finished[tp] = leader_and_isrs[tp].with_partition_epoch(r.version)
        return out

    async def delete_topic_znode(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        await self.delete_recursive(znodes.topic_path(topic), expected_controller_epoch_zk_version)

    async def delete_topic_configs(self, topics: Iterable[str],
                                   expected_controller_epoch_zk_version: int) -> None:
        await self._fenced_all([DeleteOp(znodes.config_entity_path(znodes.CONFIG_TYPE_TOPIC, t))
                                for t in topics], expected_controller_epoch_zk_version)

    # ---- topic deletion --------------------------------------------------------------------

    async def create_delete_topic_path(self, topic: str) -> None:
        await self.create_recursive(znodes.delete_topic_path(topic))

    async def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return await self.path_exists(znodes.delete_topic_path(topic))

    async def get_topic_deletions(self) -> list[str]:
        return await self.get_children(znodes.DELETE_TOPICS_PATH)

    async def delete_topic_deletions(self, topics: Iterable[str],
                                     expected_controller_epoch_zk_version: int) -> None:
        await self._fenced_all([DeleteOp(znodes.delete_topic_path(t)) for t in topics],
                               expected_controller_epoch_zk_version)

    # ---- configs ---------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        data, _ = await self.get_data_and_version(znodes.config_entity_path(entity_type, entity_name))
        return znodes.decode_entity_config(data)

    async def get_entities_configs(self, entity_type: str,
                                   entity_names: Iterable[str]) -> dict[str, dict[str, str]]:
        names = list(entity_names)
        reads = await asyncio.gather(*(self.get_entity_configs(entity_type, n) for n in names))
        return dict(zip(names, reads))

    async def set_or_create_entity_configs(self, entity_type: str, entity_name: str,
                                           config: Mapping[str, str]) -> None:
        """Replace the entity's config overrides (last writer wins, as in Kafka)."""
        path = znodes.config_entity_path(entity_type, entity_name)
        data = znodes.encode_entity_config(config)
        try:
            await self.store.set(path, data)
        except NoNodeError:
            try:
                await self.create_recursive(path, data)
            except NodeExistsError:
                await self.store.set(path, data)

    async def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return await self.get_children(znodes.config_entity_type_path(entity_type))

    async def create_config_change_notification(self, entity_path: str) -> str:
        """A sequential /config/changes/config_change_<seq> naming e.g. "topics/<t>"; returns
        the created path."""
        await self.make_sure_persistent_path_exists(znodes.CONFIG_CHANGES_PATH)
        return await self.store.create(
            f"{znodes.CONFIG_CHANGES_PATH}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change(entity_path), sequential=True)

    async def get_config_change_notifications(self) -> list[str]:
        """The notification node names, oldest first."""
        return sorted(c for c in await self.get_children(znodes.CONFIG_CHANGES_PATH)
                      if c.startswith(znodes.CONFIG_CHANGE_PREFIX))

    async def get_config_change_notification(self, name: str) -> Optional[tuple[str, ZnStat]]:
        """(entity path, stat) of one notification node, None when it was purged."""
        data, stat = await self.get_data_and_stat(f"{znodes.CONFIG_CHANGES_PATH}/{name}")
        if data is None or stat is None:
            return None
        return znodes.decode_config_change(data), stat

    async def delete_config_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            await self.delete_path(f"{znodes.CONFIG_CHANGES_PATH}/{name}", recursive=False)

    # ---- reassignment, preferred replica election ------------------------------------------

    async def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        data, _ = await self.get_data_and_version(znodes.REASSIGN_PARTITIONS_PATH)
        if data is None:
            return {}
        try:
            return znodes.decode_reassignment(data)
        except znodes.ZNodeDecodeError as e:
            log.warning("Ignoring partition reassignment due to invalid json: %s", e)
            return {}

    async def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
        await self.create_recursive(znodes.REASSIGN_PARTITIONS_PATH,
                                    znodes.encode_reassignment(reassignment))

    async def set_or_create_partition_reassignment(
            self, reassignment: Mapping[TopicPartition, Sequence[int]],
            expected_controller_epoch_zk_version: int) -> None:
        data = znodes.encode_reassignment(reassignment)
        try:
            await self._fenced(SetDataOp(znodes.REASSIGN_PARTITIONS_PATH, data),
                               expected_controller_epoch_zk_version)
        except NoNodeError:
            await self._fenced(CreateOp(znodes.REASSIGN_PARTITIONS_PATH, data),
                               expected_controller_epoch_zk_version)

    async def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        await self.delete_path(znodes.REASSIGN_PARTITIONS_PATH, expected_controller_epoch_zk_version)

    async def reassign_partitions_in_progress(self) -> bool:
        return await self.path_exists(znodes.REASSIGN_PARTITIONS_PATH)

    async def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        await self.create_recursive(znodes.PREFERRED_REPLICA_ELECTION_PATH,
                                    znodes.encode_preferred_replica_election(partitions))

    async def get_preferred_replica_election(self) -> set[TopicPartition]:
        data, _ = await self.get_data_and_version(znodes.PREFERRED_REPLICA_ELECTION_PATH)
        return set() if data is None else znodes.decode_preferred_replica_election(data)

    async def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        await self.delete_path(znodes.PREFERRED_REPLICA_ELECTION_PATH,
                               expected_controller_epoch_zk_version, recursive=False)

    # ---- ISR change and log dir event notifications ----------------------------------------

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        return await self.store.create(
            f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{znodes.ISR_CHANGE_PREFIX}",
            znodes.encode_isr_change_notification(partitions), sequential=True)

    async def get_all_isr_change_notifications(self) -> list[str]:
        """Sequence numbers of the pending ISR change notifications."""
        return sorted(znodes.sequence_number(c, znodes.ISR_CHANGE_PREFIX)
                      for c in await self.get_children(znodes.ISR_CHANGE_NOTIFICATION_PATH))

    async def get_partitions_from_isr_change_notifications(self, sequence_numbers: Iterable[str]
                                                           ) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for seq in sequence_numbers:
            data, _ = await self.get_data_and_version(
                f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{znodes.ISR_CHANGE_PREFIX}{seq}")
            if data is not None:
                out |= znodes.decode_isr_change_notification(data)
        return out

    async def delete_isr_change_notifications(self, sequence_numbers: Optional[Iterable[str]],
                                              expected_controller_epoch_zk_version: int) -> None:
        """Delete the given notifications (all of them when None)."""
        seqs = list(sequence_numbers) if sequence_numbers is not None else \
            await self.get_all_isr_change_notifications()
        results = await self._fenced_all(
            [DeleteOp(f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{znodes.ISR_CHANGE_PREFIX}{s}")
             for s in seqs], expected_controller_epoch_zk_version)
        _raise_unless_absent(results)

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        return await self.store.create(
            f"{znodes.LOG_DIR_EVENT_NOTIFICATION_PATH}/{znodes.LOG_DIR_EVENT_PREFIX}",
            znodes.encode_log_dir_event(broker_id), sequential=True)

    async def get_all_log_dir_event_notifications(self) -> list[str]:
        return sorted(znodes.sequence_number(c, znodes.LOG_DIR_EVENT_PREFIX)
                      for c in await self.get_children(znodes.LOG_DIR_EVENT_NOTIFICATION_PATH))

    async def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        out = []
        for seq in sequence_numbers:
            data, _ = await self.get_data_and_version(
                f"{znodes.LOG_DIR_EVENT_NOTIFICATION_PATH}/{znodes.LOG_DIR_EVENT_PREFIX}{seq}")
            if data is not None:
                out.append(znodes.decode_log_dir_event(data))
        return out

    async def delete_log_dir_event_notifications(self, sequence_numbers: Optional[Iterable[str]],
                                                 expected_controller_epoch_zk_version: int) -> None:
        seqs = list(sequence_numbers) if sequence_numbers is not None else \
            await self.get_all_log_dir_event_notifications()
        results = await self._fenced_all(
            [DeleteOp(f"{znodes.LOG_DIR_EVENT_NOTIFICATION_PATH}/{znodes.LOG_DIR_EVENT_PREFIX}{s}")
             for s in seqs], expected_controller_epoch_zk_version)
        _raise_unless_absent(results)

    # ---- producer ids ----------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int,
                                         block_size: int = znodes.PRODUCER_ID_BLOCK_SIZE) -> ProducerIdsBlock:
        """The next block after the one in /latest_producer_id_block, claimed with a write
        conditional on the zkVersion read: concurrent allocators retry, never overlap."""
        while True:
            data, version = await self.get_data_and_version(znodes.PRODUCER_ID_BLOCK_PATH)
            if version == UNKNOWN_VERSION:
                await self.make_sure_persistent_path_exists(znodes.PRODUCER_ID_BLOCK_PATH)
                continue
            if data is None:
                block = ProducerIdsBlock(broker_id, 0, block_size)
            else:
                current = znodes.decode_producer_id_block(data)
                if current.last_producer_id > (1 << 63) - 1 - block_size:
                    raise ProducerIdsExhaustedError("Have exhausted all producerIds.")
                block = ProducerIdsBlock(broker_id, current.next_block_first_id, block_size)
            ok, _ = await self.conditional_update_path(
                znodes.PRODUCER_ID_BLOCK_PATH, znodes.encode_producer_id_block(block), version)
            if ok:
                return block

    # ---- features --------------------------------------------------------------------------

    async def get_feature(self) -> Optional[tuple[FeatureZNode, int]]:
        """(/feature, its zkVersion), None when absent."""
        data, stat = await self.get_data_and_stat(znodes.FEATURE_PATH)
        if data is None or stat is None:
            return None
        return znodes.decode_feature(data), stat.version

    async def create_feature_znode(self, node: FeatureZNode) -> None:
        await self.store.create(znodes.FEATURE_PATH, znodes.encode_feature(node))

    async def update_feature_znode(self, node: FeatureZNode) -> int:
        return (await self.store.set(znodes.FEATURE_PATH, znodes.encode_feature(node))).version

    async def delete_feature_znode(self) -> None:
        await self.delete_path(znodes.FEATURE_PATH, recursive=False)


def _raise_unless_absent(results: Sequence[object]) -> None:
    for r in results:
        if isinstance(r, StoreError) and not isinstance(r, NoNodeError):
            raise r


def _random_kafka_uuid() -> uuid.UUID:
    # Kafka's Uuid.randomUuid never returns the zero/one sentinels nor ids printed with a leading '-'
    while True:
        u = uuid.uuid4()
        if u.int > 1 and not znodes.uuid_to_kafka_string(u).startswith("-"):
            return u
