"""GroupMetadataManager: the group coordinator's storage in the `__consumer_offsets` topic.

Kafka's GroupMetadataManager duties, without the live group state (the coordinator keeps that):
which partition holds a group, creating the compacted topic on first use, appending group
metadata / committed offsets / tombstones through the replica manager, replaying a partition's
log when this broker becomes its leader, and the offset-expiration rule of
``offsets.retention.minutes`` (KIP-211).

Records are built and read by :mod:`kafkalite.coordinator.group.records` in Kafka's layouts, so
a Kafka broker or a tool reading the topic sees what it expects.
"""
from __future__ import annotations

import io
import logging
import struct
import time
from collections.abc import Iterable, Mapping
from typing import AbstractSet, Callable, Optional

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from kafkalite.cluster.topic_record import NewTopic
from kafkalite.coordinator.group import records
from kafkalite.coordinator.group.records import (GroupKey, OffsetKey, RecordDecodeError,
                                                 UnknownRecordTypeError)
from kafkalite.coordinator.group.types import (GROUP_METADATA_TOPIC_NAME, GroupSnapshot,
                                               LoadedPartition, OffsetAndMetadata)
from kafkalite.coordinator.internal_topics import internal_topic_replication_factor
from kafkalite.log.errors import LogError
from kafkalite.log.log import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, build_batch,
                                        decode_records)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
DEFAULT_LOAD_BUFFER_SIZE = 5 * 1024 * 1024     # offsets.load.buffer.size
DEFAULT_MAX_METADATA_SIZE = 4096               # offset.metadata.max.bytes

# Control record keys: int16 version, int16 type (ControlRecordType).
_CONTROL_ABORT = 0
_CONTROL_COMMIT = 1
_INT16 = struct.Struct(">h")

TopicPartitionKey = tuple[str, int]


class GroupLoadError(RuntimeError):
    """A record of the offsets partition could not be read; Kafka fails the load likewise."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _java_length(s: str) -> int:
    """String.length(): UTF-16 code units (offset.metadata.max.bytes is checked against it)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


# -- error mapping (Kafka's GroupMetadataManager.storeGroup / storeOffsets) ---------------------

def group_append_error(error: ErrorCode) -> ErrorCode:
    """The JoinGroup/SyncGroup error for a failed group-metadata append (storeGroup)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error == ErrorCode.REQUEST_TIMED_OUT:
        # The ISR did not acknowledge in time: the members rejoin.
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                 ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def offset_append_error(error: ErrorCode) -> ErrorCode:
    """The OffsetCommit error for a failed offsets append (storeOffsets); others pass through."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                 ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


# -- offset expiration (offsets.retention.minutes, KIP-211) ------------------------------------

def subscribed_topics(protocol_type: Optional[str], protocol_name: Optional[str],
                      subscriptions: Iterable[bytes]) -> Optional[frozenset[str]]:
    """The topics a classic group's members subscribe to, or None when the coordinator cannot
    know them (Kafka's computeSubscribedTopics): only for the "consumer" protocol type, parsing
    each member's ConsumerProtocolSubscription with the v0 layout every version starts with."""
    if not protocol_type or protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    subs = list(subscriptions)
    if not subs:
        return frozenset()
    if protocol_name is None:
        return None
    topics: set[str] = set()
    try:
        for raw in subs:
            topics.update(_subscription_topics_v0(raw))
    except (ValueError, IndexError) as e:
        log.warning("Failed to parse the consumer protocol %s subscriptions: %s; the coordinator "
                    "is not aware of the subscribed topics", protocol_name, e)
        return None
    return frozenset(topics)


def _subscription_topics_v0(data: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription of any version, read with the v0 layout (an
    int16 version >= 0, then the topics), as Kafka does so newer versions need no change."""
    if len(data) < 2:
        raise ValueError("subscription too short")
    (version,) = _INT16.unpack_from(data)
    if version < 0:
        raise ValueError(f"Unsupported subscription version: {version}")
    try:
        sub = ConsumerProtocolSubscription.decode(io.BytesIO(data[2:]), version=0, header=False)
    except (struct.error, UnicodeDecodeError, TypeError) as e:
        raise ValueError(f"invalid subscription: {e}") from e
    if sub.topics is None or any(t is None for t in sub.topics):
        raise ValueError("null topics in subscription")
    return list(sub.topics)


def expired_offsets(offsets: Mapping[TopicPartitionKey, OffsetAndMetadata], now_ms: int,
                    retention_ms: int, *, protocol_type: Optional[str], group_empty: bool,
                    group_stable: bool, current_state_timestamp: int = -1,
                    subscribed: Optional[AbstractSet[str]] = None,
                    pending: AbstractSet[TopicPartitionKey] = frozenset()
                    ) -> dict[TopicPartitionKey, OffsetAndMetadata]:
    """The offsets of one classic group that ``offsets.retention.minutes`` expires now (Kafka's
    GroupMetadata.removeExpiredOffsets / ClassicGroup.offsetExpirationCondition).

    * group with a protocol type and Empty: retention counts from when the group became empty
      (``current_state_timestamp``), or from each commit when that is unknown (-1);
    * "consumer" group that is Stable and whose subscriptions are known: offsets of topics it no
      longer subscribes to expire ``retention`` after their commit;
    * no protocol type (offsets-only "simple" consumers): retention after each commit;
    * otherwise (rebalancing, or unknown subscriptions) nothing expires.

    A commit that carried an explicit expire timestamp (OffsetCommitValue v1) expires at that
    time instead. Partitions with a commit in flight (``pending``) never expire.
    """
    if protocol_type:
        if group_empty:
            def base(o: OffsetAndMetadata) -> int:
                return current_state_timestamp if current_state_timestamp != -1 else o.commit_timestamp
            keep_topics: AbstractSet[str] = frozenset()
        elif protocol_type == CONSUMER_PROTOCOL_TYPE and subscribed is not None and group_stable:
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
            keep_topics = subscribed
        else:
            return {}
    else:
        def base(o: OffsetAndMetadata) -> int:
            return o.commit_timestamp
        keep_topics = frozenset()

    out: dict[TopicPartitionKey, OffsetAndMetadata] = {}
    for tp, o in offsets.items():
        if tp[0] in keep_topics or tp in pending:
            continue
        if o.expire_timestamp != -1:
            expired = now_ms >= o.expire_timestamp
        else:
            expired = now_ms - base(o) >= retention_ms
        if expired:
            out[tp] = o
    return out


def expired_offsets_of(group: Optional[GroupSnapshot],
                       offsets: Mapping[TopicPartitionKey, OffsetAndMetadata], now_ms: int,
                       retention_ms: int, *, stable: Optional[bool] = None,
                       pending: AbstractSet[TopicPartitionKey] = frozenset()
                       ) -> dict[TopicPartitionKey, OffsetAndMetadata]:
    """:func:`expired_offsets` for a group known by its snapshot (None: offsets without group
    metadata, i.e. a simple consumer). A loaded group with members is Stable, as Kafka
    loads it; ``stable`` overrides that for a live group that is rebalancing."""
    if group is None:
        return expired_offsets(offsets, now_ms, retention_ms, protocol_type=None,
                               group_empty=True, group_stable=False, pending=pending)
    empty = group.is_empty
    return expired_offsets(
        offsets, now_ms, retention_ms, protocol_type=group.protocol_type or None,
        group_empty=empty, group_stable=(not empty) if stable is None else stable,
        current_state_timestamp=group.current_state_timestamp,
        subscribed=subscribed_topics(group.protocol_type, group.protocol_name,
                                     (m.subscription for m in group.members)),
        pending=pending)


# -- the manager ---------------------------------------------------------------------------------

class GroupMetadataManager:
    def __init__(self, broker_id: int, num_partitions: int, replica_manager, controller, *,
                 replication_factor: int, segment_bytes: int, commit_timeout_ms: int,
                 required_acks: int = -1, max_metadata_size: int = DEFAULT_MAX_METADATA_SIZE,
                 load_buffer_size: int = DEFAULT_LOAD_BUFFER_SIZE,
                 clock_ms: Callable[[], int] = _now_ms) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.controller = controller
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes
        self.commit_timeout_ms = commit_timeout_ms
        self.required_acks = required_acks
        self.max_metadata_size = max_metadata_size
        self.load_buffer_size = load_buffer_size
        self._clock_ms = clock_ms
        # Kafka reads the partition count of an existing topic, not the config: groups must keep
        # mapping to the partition that holds them if offsets.topic.num.partitions changes.
        existing = controller.topic_record(GROUP_METADATA_TOPIC_NAME)
        self.num_partitions = existing.num_partitions if existing is not None else num_partitions

    # -- partitioning -------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return records.partition_for(group_id, self.num_partitions)

    def topic_partition_for(self, group_id: str) -> TopicPartition:
        return TopicPartition(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

    def is_local(self, partition: int) -> bool:
        """Whether this broker has the partition's log (Kafka's getMagic is defined)."""
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        return self.replica_manager.get_partition(tp) is not None

    # -- the topic ----------------------------------------------------------------------------
    def ensure_offsets_topic(self) -> bool:
        """Create `__consumer_offsets` if it does not exist; return whether it existed before.

        FindCoordinator answers COORDINATOR_NOT_AVAILABLE when this returns False, as Kafka does
        the first time it creates the topic (the client retries). The replication factor is
        offsets.topic.replication.factor as configured: with fewer live brokers the creation
        fails (INVALID_REPLICATION_FACTOR, logged) and is tried again at the next request, as in
        Kafka; only the embedded single broker reduces it to the live brokers."""
        if self.controller.topic_record(GROUP_METADATA_TOPIC_NAME) is not None:
            return True
        rf = internal_topic_replication_factor(self.replication_factor, self.controller)
        result = self.controller.create_topics([NewTopic(
            GROUP_METADATA_TOPIC_NAME, num_partitions=self.num_partitions, replication_factor=rf,
            configs={"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)})],
            validate_only=False)[0]
        if result.error == ErrorCode.NONE:
            log.info("Created %s with %d partitions", GROUP_METADATA_TOPIC_NAME, self.num_partitions)
        elif result.error != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.error("Could not create %s: %s %s", GROUP_METADATA_TOPIC_NAME,
                      result.error.name, result.message)
        return False

    # -- writes -------------------------------------------------------------------------------
    async def _append(self, tp: TopicPartition, batch: bytes, required_acks: int) -> ErrorCode:
        return (await self._append_at(tp, batch, required_acks))[0]

    async def _append_at(self, tp: TopicPartition, batch: bytes, required_acks: int
                         ) -> tuple[ErrorCode, int]:
        """(error, base offset of the appended batch). The coordinator's own writes: Kafka's
        AppendOrigin.COORDINATOR (no client-only validation, no sequence checks)."""
        results = await self.replica_manager.append_records(self.commit_timeout_ms, required_acks,
                                                            {tp: batch}, origin=ORIGIN_COORDINATOR)
        return results[tp].error, results[tp].base_offset

    async def store_group(self, snapshot: GroupSnapshot) -> ErrorCode:
        """Append the group's metadata record (after a rebalance completes, or for a new or
        emptied group); the coordinator answers SyncGroup/JoinGroup with the returned code."""
        tp = self.topic_partition_for(snapshot.group_id)
        if self.replica_manager.get_partition(tp) is None:
            return ErrorCode.NOT_COORDINATOR
        key = records.group_metadata_key(snapshot.group_id)
        value = records.group_metadata_value(snapshot)
        error = await self._append(tp, build_batch([(key, value, self._clock_ms())]),
                                   self.required_acks)
        if error != ErrorCode.NONE:
            log.debug("Metadata of group %s generation %d failed to append: %s",
                      snapshot.group_id, snapshot.generation, error.name)
        return group_append_error(error)

    async def store_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartitionKey, OffsetAndMetadata]
                            ) -> dict[TopicPartitionKey, ErrorCode]:
        """Append committed offsets in one batch; the per-partition OffsetCommit error codes.

        Offsets whose metadata is longer than offset.metadata.max.bytes (counted in UTF-16
        units, as Kafka does) are not written and get OFFSET_METADATA_TOO_LARGE."""
        return (await self.store_offsets_at(group_id, offsets))[0]

    async def store_offsets_at(self, group_id: str,
                               offsets: Mapping[TopicPartitionKey, OffsetAndMetadata], *,
                               producer_id: int = NO_PRODUCER_ID,
                               producer_epoch: int = NO_PRODUCER_EPOCH
                               ) -> tuple[dict[TopicPartitionKey, ErrorCode], int]:
        """:meth:`store_offsets`, also for a transactional offset commit (TxnOffsetCommit:
        ``producer_id`` >= 0), and the base offset of the appended batch (-1 if none).

        A transactional commit is one transactional batch carrying the producer's id and epoch,
        base sequence 0 as Kafka writes it (sequences are not checked for the coordinator's
        writes); the log checks the epoch (a fenced producer gets INVALID_PRODUCER_EPOCH) and
        the batch counts only once a COMMIT marker follows it."""
        valid = {tp: o for tp, o in offsets.items()
                 if _java_length(o.metadata) <= self.max_metadata_size}
        if not valid:
            return {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets}, -1
        tp_log = self.topic_partition_for(group_id)
        if self.replica_manager.get_partition(tp_log) is None:
            return {tp: ErrorCode.NOT_COORDINATOR for tp in offsets}, -1
        now = self._clock_ms()
        transactional = producer_id != NO_PRODUCER_ID
        batch = build_batch([(records.offset_commit_key(group_id, t, p),
                              records.offset_commit_value(o), now)
                             for (t, p), o in valid.items()],
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=0 if transactional else NO_SEQUENCE,
                            transactional=transactional)
        error, base_offset = await self._append_at(tp_log, batch, self.required_acks)
        if error != ErrorCode.NONE:
            log.debug("Offset commit of group %s failed to append: %s", group_id, error.name)
        mapped = offset_append_error(error)
        return ({tp: (mapped if tp in valid else ErrorCode.OFFSET_METADATA_TOO_LARGE)
                 for tp in offsets}, base_offset if error == ErrorCode.NONE else -1)

    async def store_tombstones(self, group_id: str, offsets: Iterable[TopicPartitionKey],
                               group: bool) -> ErrorCode:
        """Append tombstones for the group's offsets and, if ``group``, its metadata (DeleteGroups,
        OffsetDelete, offset expiration). Like Kafka's cleanupGroupMetadata this does not wait
        for replicas (acks=0): a lost tombstone is written again by the next cleanup. Kafka
        writes the group tombstone only for a group with a generation above 0 — the caller's
        choice. Returns the storeGroup-mapped error, for logging (Kafka ignores it)."""
        tp_log = self.topic_partition_for(group_id)
        if self.replica_manager.get_partition(tp_log) is None:
            return ErrorCode.NOT_COORDINATOR
        now = self._clock_ms()
        tombstones: list[tuple[Optional[bytes], Optional[bytes], int]] = [
            (records.offset_commit_key(group_id, t, p), None, now) for t, p in offsets]
        if group:
            tombstones.append((records.group_metadata_key(group_id), None, now))
        if not tombstones:
            return ErrorCode.NONE
        error = await self._append(tp_log, build_batch(tombstones), 0)
        if error != ErrorCode.NONE:
            log.error("Failed to append %d tombstones for group %s to %s: %s",
                      len(tombstones), group_id, tp_log, error.name)
        return group_append_error(error)

    # -- loading ------------------------------------------------------------------------------
    def load_partition(self, partition: int) -> LoadedPartition:
        """Replay the partition's log from its start to its end (Kafka reads to the log end
        offset: a leader keeps everything it has) into the latest group metadata and committed
        offset per key. Tombstones remove; transactional offset commits count once their COMMIT
        marker is read (aborted ones are dropped; still-open ones are returned as pending).

        Synchronous and file-bound: run it off the event loop, or at start-up. Memory: one read
        of ``load_buffer_size`` (or one larger batch) at a time, plus the state itself."""
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        p = self.replica_manager.get_partition(tp)
        if p is None:
            log.warning("Attempted to load offsets and group metadata from %s, but found no log", tp)
            return LoadedPartition()
        return load_log(p.log, tp, self.load_buffer_size)


def load_log(log_, tp: TopicPartition, load_buffer_size: int = DEFAULT_LOAD_BUFFER_SIZE
             ) -> LoadedPartition:
    """:meth:`GroupMetadataManager.load_partition` on a Log (also usable on a log opened alone)."""
    state = _LoadState(tp)
    batches = log_.iter_batches(load_buffer_size)
    while True:
        try:
            item = next(batches, None)
        except LogError as e:
            raise GroupLoadError(f"Reading {tp} failed: {e}") from e
        if item is None:
            break
        # A first batch beginning before the log start offset is replayed whole, as Kafka does.
        state.replay_batch(*item)
    return state.result()


class _LoadState:
    """Latest record per key while replaying; record offsets decide between a transactional
    commit and a plain one, as in Kafka's OffsetMetadataManager."""

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.groups: dict[str, GroupSnapshot] = {}
        self.offsets: dict[OffsetKey, tuple[int, OffsetAndMetadata]] = {}
        self.pending: dict[int, dict[OffsetKey, tuple[int, OffsetAndMetadata]]] = {}

    def replay_batch(self, batch: memoryview, header) -> None:
        try:
            recs = decode_records(batch, header)
        except LogError as e:
            raise GroupLoadError(f"Corrupt batch at offset {header.base_offset} of {self.tp}: {e}") from e
        if header.is_control:
            self._replay_control(recs, header.producer_id)
            return
        producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
        for r in recs:
            if r.key is None:
                raise GroupLoadError(f"Record at offset {r.offset} of {self.tp} has no key")
            try:
                key = records.decode_key(r.key)
                if isinstance(key, OffsetKey):
                    self._replay_offset(key, records.decode_offset_value(r.value), r.offset,
                                        producer_id)
                else:
                    self._replay_group(key, records.decode_group_value(key.group, r.value))
            except UnknownRecordTypeError as e:
                # Records of the newer group protocols: Kafka's loader skips them too.
                log.warning("Unknown record type %d at offset %d of %s; ignoring it",
                            e.record_type, r.offset, self.tp)
            except RecordDecodeError as e:
                raise GroupLoadError(
                    f"Deserializing the record at offset {r.offset} of {self.tp} failed: {e}") from e

    def _replay_control(self, recs, producer_id: int) -> None:
        if not recs or recs[0].key is None or len(recs[0].key) < 4:
            return
        control_type = int.from_bytes(recs[0].key[2:4], "big", signed=True)
        pending = self.pending.pop(producer_id, None)
        if control_type != _CONTROL_COMMIT or not pending:
            return
        for key, (record_offset, value) in pending.items():
            current = self.offsets.get(key)
            # Keep the most recent commit whichever way it came (plain or transactional).
            if current is None or current[0] < record_offset:
                self.offsets[key] = (record_offset, value)

    def _replay_offset(self, key: OffsetKey, value: Optional[OffsetAndMetadata], record_offset: int,
                       producer_id: int) -> None:
        if producer_id != NO_PRODUCER_ID:
            txn = self.pending.setdefault(producer_id, {})
            if value is None:
                txn.pop(key, None)
            else:
                txn[key] = (record_offset, value)
            return
        if value is None:
            self.offsets.pop(key, None)
            for txn in self.pending.values():   # a tombstone also drops pending commits
                txn.pop(key, None)
        else:
            self.offsets[key] = (record_offset, value)

    def _replay_group(self, key: GroupKey, value: Optional[GroupSnapshot]) -> None:
        if value is None:
            self.groups.pop(key.group, None)
        else:
            self.groups[key.group] = value

    def result(self) -> LoadedPartition:
        out = LoadedPartition(groups=dict(self.groups))
        for key, (off, value) in self.offsets.items():
            out.offsets.setdefault(key.group, {})[(key.topic, key.partition)] = value
            out.offset_record_offsets.setdefault(key.group, {})[(key.topic, key.partition)] = off
        for producer_id, txn in self.pending.items():
            if not txn:
                continue
            by_group = out.pending_transactional_offsets.setdefault(producer_id, {})
            offs_by_group = out.pending_transactional_record_offsets.setdefault(producer_id, {})
            for key, (off, value) in txn.items():
                by_group.setdefault(key.group, {})[(key.topic, key.partition)] = value
                offs_by_group.setdefault(key.group, {})[(key.topic, key.partition)] = off
        return out


__all__ = ["GroupMetadataManager", "GroupLoadError", "expired_offsets", "expired_offsets_of",
           "subscribed_topics", "group_append_error", "offset_append_error", "load_log"]
