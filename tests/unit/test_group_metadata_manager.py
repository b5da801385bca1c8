"""GroupMetadataManager against real components: LogManager on tmp_path, ReplicaManager,
MetadataCache, with this broker leading every partition of the topics it creates (what the
controller makes of a one-broker cluster) — plus the offset-expiration rule
(offsets.retention.minutes, KIP-211) as a pure function."""
from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.record.memory_records import MemoryRecords

from kafkalite.config.log_config import LogConfig
import json
import uuid

from kafkalite.cluster.topic_record import NewTopic, TopicRecord, TopicResult, new_kafka_uuid
from kafkalite.config.topic_config import topic_log_config, validate_topic_log_config
from kafkalite.coordinator.group import records
from kafkalite.coordinator.group.group_metadata_manager import (
    GroupLoadError, GroupMetadataManager, expired_offsets, expired_offsets_of, group_append_error,
    offset_append_error, subscribed_topics)
from kafkalite.coordinator.group.types import (GROUP_METADATA_TOPIC_NAME, GroupSnapshot,
                                               LoadedPartition, MemberSnapshot, OffsetAndMetadata)
from kafkalite.log.log_manager import LogManager
from kafkalite.log.producer_state import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import build_batch
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.cluster.metadata_cache import (BrokerEndpoint, BrokerInfo, MetadataCache, PartitionInfo,
                                              TopicInfo)

OFFSETS_PARTITIONS = 50
T0 = 1_700_000_000_000
# Small preallocated indexes: 50 partitions x 2 indexes of the 10 MiB default is slow to set up.
LOG_CONFIG = LogConfig(segment_index_bytes=64 * 1024)


class OneBrokerTopics:
    """What GroupMetadataManager asks of the controller about its topic, on a one-broker cluster:
    the topic's record, the live brokers, and its creation with this broker leading every
    partition (as the controller's LeaderAndIsr makes it). Records persist in the log dir, so a
    reopened broker leads them again at the next leader epoch."""

    live_brokers = [0]
    alone = True   # the embedded broker: internal topics reduced to the live brokers

    def __init__(self, log_dir: Path, replica_manager: ReplicaManager, cache: MetadataCache) -> None:
        self.path = log_dir / "test-topics.json"
        self.replica_manager = replica_manager
        self.cache = cache
        self.records: dict[str, TopicRecord] = {}
        self.epochs: dict[str, int] = {}
        if self.path.exists():
            for t in json.loads(self.path.read_text()):
                record = TopicRecord(t["name"], uuid.UUID(t["id"]),
                                     {int(p): r for p, r in t["assignment"].items()}, t["configs"])
                self._lead(record, t["epoch"] + 1)

    def _lead(self, record: TopicRecord, epoch: int) -> None:
        self.records[record.name] = record
        self.epochs[record.name] = epoch
        cfg = topic_log_config(LOG_CONFIG, record.configs)
        for p in record.assignment:
            self.replica_manager.become_leader(TopicPartition(record.name, p), record.topic_id, epoch, [0], [0], cfg)
        self.cache.update_topic(TopicInfo(record.name, record.topic_id, record.name.startswith("__"), {
            p: PartitionInfo(p, 0, epoch, (0,), (0,)) for p in record.assignment}))
        self.path.write_text(json.dumps([
            {"name": r.name, "id": str(r.topic_id), "assignment": r.assignment, "configs": r.configs,
             "epoch": self.epochs[r.name]} for r in self.records.values()]))

    def topic_record(self, name: str) -> Optional[TopicRecord]:
        return self.records.get(name)

    def create_topics(self, topics: list[NewTopic], validate_only: bool) -> list[TopicResult]:
        out = []
        for t in topics:
            if t.name in self.records:
                out.append(TopicResult(t.name, ErrorCode.TOPIC_ALREADY_EXISTS))
                continue
            configs, cfg = validate_topic_log_config(LOG_CONFIG, t.configs)
            record = TopicRecord(t.name, new_kafka_uuid(), {p: [0] for p in range(t.num_partitions)}, configs)
            self._lead(record, 0)
            out.append(TopicResult(t.name, ErrorCode.NONE, None, record, cfg))
        return out


class Broker:
    """The storage half of a broker, started as KafkaServer.startup does."""

    def __init__(self, log_dir: Path, *, lock_dirs: bool = True) -> None:
        self.log_dir = log_dir
        self.log_manager = LogManager([log_dir], LOG_CONFIG, lock_dirs=lock_dirs)
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(0, self.log_manager)
        self.cache = MetadataCache("test-cluster")
        self.cache.update_brokers([BrokerInfo(0, (BrokerEndpoint("PLAINTEXT", "localhost", 9092),))], 0)
        self.controller = OneBrokerTopics(log_dir, self.replica_manager, self.cache)

    def manager(self, num_partitions: int = OFFSETS_PARTITIONS, *, replication_factor: int = 3,
                segment_bytes: int = 100 * 1024 * 1024, **kw: Any) -> GroupMetadataManager:
        kw.setdefault("clock_ms", lambda: T0)
        return GroupMetadataManager(0, num_partitions, self.replica_manager, self.controller,
                                    replication_factor=replication_factor,
                                    segment_bytes=segment_bytes, commit_timeout_ms=5000, **kw)

    def offsets_log(self, partition: int):
        p = self.replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
        assert p is not None
        return p.log

    def shutdown(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    async def guarded() -> Any:
        return await asyncio.wait_for(fn(), timeout=30)
    return asyncio.run(guarded())


def subscription(*topics: str) -> bytes:
    return ConsumerProtocolSubscription(topics=list(topics), user_data=None, owned_partitions=[],
                                        generation_id=-1, rack_id=None).encode(version=3)


def group(group_id: str, generation: int = 1, members: int = 1, *, topics: tuple[str, ...] = ("t",),
          state_ts: int = T0) -> GroupSnapshot:
    ms = tuple(MemberSnapshot(f"{group_id}-m{i}", None, "client", "/127.0.0.1", 300000, 45000,
                              subscription(*topics), b"\x00\x00assignment") for i in range(members))
    return GroupSnapshot(group_id, "consumer", generation, "range" if ms else None,
                         ms[0].member_id if ms else None, state_ts, ms)


def same_partition_groups(n: int, count: int, prefix: str = "g") -> list[str]:
    """``count`` group ids that all map to one offsets partition."""
    by_partition: dict[int, list[str]] = {}
    i = 0
    while True:
        gid = f"{prefix}-{i}"
        ids = by_partition.setdefault(records.partition_for(gid, n), [])
        ids.append(gid)
        if len(ids) == count:
            return ids
        i += 1


# -- the topic ---------------------------------------------------------------------------------------

def test_ensure_offsets_topic_creates_compacted_partitions(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager(segment_bytes=1048576)
            assert b.controller.topic_record(GROUP_METADATA_TOPIC_NAME) is None
            assert m.ensure_offsets_topic() is False          # created now: not there before
            record = b.controller.topic_record(GROUP_METADATA_TOPIC_NAME)
            assert record is not None and record.num_partitions == OFFSETS_PARTITIONS
            # offsets.topic.replication.factor 3 on a one-broker cluster: capped to 1
            assert all(r == [0] for r in record.assignment.values())
            assert record.configs == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
            for p in range(OFFSETS_PARTITIONS):
                partition = b.replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, p))
                assert partition is not None and partition.is_leader
                assert partition.log.config.cleanup_policy == "compact"
                assert partition.log.config.segment_bytes == 1048576
            topic = b.cache.topic(GROUP_METADATA_TOPIC_NAME)
            assert topic is not None and topic.is_internal and len(topic.partitions) == OFFSETS_PARTITIONS
            topic_id = record.topic_id
            assert m.ensure_offsets_topic() is True           # second call: exists, unchanged
            assert b.controller.topic_record(GROUP_METADATA_TOPIC_NAME).topic_id == topic_id
        finally:
            b.shutdown()
    run(body)


def test_partition_count_of_an_existing_topic_wins_over_the_config(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            [res] = b.controller.create_topics([NewTopic(GROUP_METADATA_TOPIC_NAME, 3, 1)], False)
            assert res.error == ErrorCode.NONE
            m = b.manager(num_partitions=50)
            assert m.num_partitions == 3
            assert m.ensure_offsets_topic() is True
            for gid in ("a", "console-consumer-1", "polygenelubricants"):
                assert m.partition_for(gid) == records.partition_for(gid, 3)
                assert m.topic_partition_for(gid) == TopicPartition(GROUP_METADATA_TOPIC_NAME,
                                                                    records.partition_for(gid, 3))
        finally:
            b.shutdown()
    run(body)


# -- storing and loading -------------------------------------------------------------------------------

def test_store_then_load_returns_exactly_what_was_stored(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager()
            m.ensure_offsets_topic()
            g1, g2 = same_partition_groups(OFFSETS_PARTITIONS, 2)
            snap = group(g1, generation=4, members=2)
            assert await m.store_group(snap) == ErrorCode.NONE
            offs = {("t", 0): OffsetAndMetadata(10, 3, "first", T0),
                    ("t", 1): OffsetAndMetadata(20, -1, "", T0 + 1),
                    ("u", 0): OffsetAndMetadata(5, 1, "ünïcode ✓", T0 + 2, T0 + 1000)}
            assert await m.store_offsets(g1, offs) == {k: ErrorCode.NONE for k in offs}
            # a group that only commits offsets (no group metadata record)
            assert await m.store_offsets(g2, {("t", 0): OffsetAndMetadata(7, 0, "x", T0)}) == \
                {("t", 0): ErrorCode.NONE}
            p = m.partition_for(g1)
            loaded = m.load_partition(p)
            assert loaded.groups == {g1: snap}
            assert loaded.offsets == {
                g1: {("t", 0): OffsetAndMetadata(10, 3, "first", T0),
                     ("t", 1): OffsetAndMetadata(20, -1, "", T0 + 1),
                     # v1 value (expire timestamp) has no leader epoch, as in Kafka
                     ("u", 0): OffsetAndMetadata(5, -1, "ünïcode ✓", T0 + 2, T0 + 1000)},
                g2: {("t", 0): OffsetAndMetadata(7, 0, "x", T0)}}
            assert loaded.pending_transactional_offsets == {}
            # nothing else anywhere else
            for other in range(OFFSETS_PARTITIONS):
                if other != p:
                    assert m.load_partition(other) == LoadedPartition()
            # 3 appends: one batch each, one record per key; exact offsets
            lg = b.offsets_log(p)
            assert lg.log_end_offset == 1 + 3 + 1
        finally:
            b.shutdown()
    run(body)


def test_records_on_disk_are_kafka_layouts(tmp_path: Path) -> None:
    """What a tool reading the topic sees: CreateTime records with Kafka's key/value bytes."""
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager()
            m.ensure_offsets_topic()
            snap = group("tool-check")
            await m.store_group(snap)
            o = OffsetAndMetadata(42, 2, "meta", T0)
            await m.store_offsets("tool-check", {("t", 3): o})
            lg = b.offsets_log(m.partition_for("tool-check"))
            mr = MemoryRecords(lg.read(0, 1 << 20).read_bytes())
            recs = []
            while (batch := mr.next_batch()) is not None:
                assert batch.magic == 2 and not batch.is_transactional and batch.producer_id == -1
                assert batch.compression_type == 0
                recs.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
            assert recs == [
                (0, T0, records.group_metadata_key("tool-check"), records.group_metadata_value(snap)),
                (1, T0, records.offset_commit_key("tool-check", "t", 3), records.offset_commit_value(o))]
            assert recs[1][2][:2] == b"\x00\x01" and recs[1][3][:2] == b"\x00\x03"
            assert recs[0][2][:2] == b"\x00\x02" and recs[0][3][:2] == b"\x00\x03"
        finally:
            b.shutdown()
    run(body)


def test_overwrites_and_tombstones(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager()
            m.ensure_offsets_topic()
            gid = "overwrite-group"
            p = m.partition_for(gid)
            await m.store_group(group(gid, generation=1))
            newer = group(gid, generation=2, members=3)
            await m.store_group(newer)
            await m.store_offsets(gid, {("t", 0): OffsetAndMetadata(1, 0, "a", T0),
                                        ("t", 1): OffsetAndMetadata(1, 0, "a", T0),
                                        ("t", 2): OffsetAndMetadata(1, 0, "a", T0)})
            await m.store_offsets(gid, {("t", 0): OffsetAndMetadata(99, 1, "b", T0 + 5)})
            loaded = m.load_partition(p)
            assert loaded.groups == {gid: newer}
            assert loaded.offsets[gid][("t", 0)] == OffsetAndMetadata(99, 1, "b", T0 + 5)
            # OffsetDelete-style: offsets only
            assert await m.store_tombstones(gid, [("t", 1)], group=False) == ErrorCode.NONE
            loaded = m.load_partition(p)
            assert loaded.groups == {gid: newer}
            assert set(loaded.offsets[gid]) == {("t", 0), ("t", 2)}
            # DeleteGroups-style: the rest of the offsets and the group
            assert await m.store_tombstones(gid, [("t", 0), ("t", 2)], group=True) == ErrorCode.NONE
            assert m.load_partition(p) == LoadedPartition()
            # a group tombstone alone leaves the offsets (a simple consumer can keep them)
            await m.store_group(newer)
            await m.store_offsets(gid, {("t", 0): OffsetAndMetadata(5, 0, "", T0)})
            await m.store_tombstones(gid, [], group=True)
            loaded = m.load_partition(p)
            assert loaded.groups == {} and loaded.offsets == {gid: {("t", 0): OffsetAndMetadata(5, 0, "", T0)}}
            # a commit after the tombstone brings the key back
            await m.store_group(newer)
            assert m.load_partition(p).groups == {gid: newer}
            # nothing to write: no append at all
            end = b.offsets_log(p).log_end_offset
            assert await m.store_tombstones(gid, [], group=False) == ErrorCode.NONE
            assert b.offsets_log(p).log_end_offset == end
        finally:
            b.shutdown()
    run(body)


def _expected_state(m: GroupMetadataManager) -> dict[int, LoadedPartition]:
    return {p: m.load_partition(p) for p in range(m.num_partitions)}


async def _populate(m: GroupMetadataManager) -> None:
    m.ensure_offsets_topic()
    for i in range(12):
        gid = f"restart-group-{i}"
        await m.store_group(group(gid, generation=i + 1, members=i % 3))
        await m.store_offsets(gid, {("t", p): OffsetAndMetadata(100 * i + p, i, f"m{p}", T0 + p)
                                    for p in range(4)})
    await m.store_tombstones("restart-group-3", [("t", 0)], group=True)


def test_reload_after_clean_restart(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        await _populate(b.manager())
        before = _expected_state(b.manager())
        assert sum(len(lp.groups) for lp in before.values()) == 11
        assert sum(len(o) for lp in before.values() for o in lp.offsets.values()) == 12 * 4 - 1
        b.shutdown()

        b2 = Broker(tmp_path)                # reopen: logs, metadata store, controller start-up
        try:
            m2 = b2.manager()
            assert m2.ensure_offsets_topic() is True
            assert _expected_state(m2) == before
            # and it keeps working after the restart
            assert await m2.store_offsets("restart-group-3", {("t", 0): OffsetAndMetadata(1, 0, "", T0)}) \
                == {("t", 0): ErrorCode.NONE}
        finally:
            b2.shutdown()
    run(body)


def test_reload_after_unclean_stop(tmp_path: Path) -> None:
    """No shutdown: no clean-shutdown marker, so the reopened logs go through recovery."""
    async def body() -> None:
        b = Broker(tmp_path, lock_dirs=False)
        await _populate(b.manager())
        before = _expected_state(b.manager())
        b.replica_manager.shutdown()         # stop timers only; logs are left as a crash leaves them
        b2 = Broker(tmp_path, lock_dirs=False)
        try:
            assert not (tmp_path / ".kafka_cleanshutdown").exists()
            assert _expected_state(b2.manager()) == before
        finally:
            b2.shutdown()
    run(body)


def test_load_with_a_tiny_buffer_reads_batch_by_batch(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager()
            await _populate(m)
            expected = _expected_state(m)
            tiny = b.manager(load_buffer_size=1)     # minOneMessage: one batch per read
            assert _expected_state(tiny) == expected
        finally:
            b.shutdown()
    run(body)


# -- transactional commits, foreign records ---------------------------------------------------------------

def _append_raw(b: Broker, partition: int, batch: bytes) -> None:
    p = b.replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
    p.log.append_as_leader(batch, p.leader_epoch, T0, origin=ORIGIN_COORDINATOR)


def _control(producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)             # version, coordinator epoch
    return build_batch([(key, value, T0)], producer_id=producer_id, producer_epoch=0,
                       transactional=True, control=True)


def _txn(producer_id: int, gid: str, offs: dict[tuple[str, int], OffsetAndMetadata]) -> bytes:
    return build_batch([(records.offset_commit_key(gid, t, p), records.offset_commit_value(o), T0)
                        for (t, p), o in offs.items()],
                       producer_id=producer_id, producer_epoch=0, base_sequence=0, transactional=True)


def test_transactional_offset_commits_count_once_committed(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager(num_partitions=1)
            m.ensure_offsets_topic()
            o = lambda n: OffsetAndMetadata(n, 0, "", T0)  # noqa: E731
            await m.store_offsets("g", {("t", 0): o(1), ("t", 1): o(1)})           # offsets 0-1
            _append_raw(b, 0, _txn(7, "g", {("t", 0): o(70), ("t", 2): o(72)}))     # 2-3
            _append_raw(b, 0, _txn(8, "g", {("t", 0): o(80)}))                      # 4
            await m.store_offsets("g", {("t", 2): o(2)})                            # 5: newer than 7's
            _append_raw(b, 0, _txn(9, "h", {("t", 0): o(90)}))                      # 6
            _append_raw(b, 0, _control(7, commit=True))                             # 7
            _append_raw(b, 0, _control(8, commit=False))                            # 8
            loaded = m.load_partition(0)
            assert loaded.offsets == {"g": {("t", 0): o(70),   # 7's commit (record 2) beats record 0
                                            ("t", 1): o(1),
                                            ("t", 2): o(2)}}   # record 5 beats 7's record 3
            assert loaded.pending_transactional_offsets == {9: {"h": {("t", 0): o(90)}}}
        finally:
            b.shutdown()
    run(body)


def test_unknown_record_types_are_skipped_and_garbage_fails_the_load(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager(num_partitions=1)
            m.ensure_offsets_topic()
            await m.store_offsets("g", {("t", 0): OffsetAndMetadata(1, 0, "", T0)})
            # A KIP-848 consumer-group record (type 3) and a client-style record whose key is
            # plain text (b"he" -> type 0x6865): both of types this coordinator does not own.
            _append_raw(b, 0, build_batch([(b"\x00\x03\x00\x01g", b"\x00\x00\x00\x00\x00\x05", T0),
                                           (b"hello", b"world", T0)]))
            await m.store_offsets("g", {("t", 1): OffsetAndMetadata(2, 0, "", T0)})
            assert m.load_partition(0).offsets == {"g": {("t", 0): OffsetAndMetadata(1, 0, "", T0),
                                                         ("t", 1): OffsetAndMetadata(2, 0, "", T0)}}
            # An offset key with a value that is not an OffsetCommitValue: Kafka fails the load.
            _append_raw(b, 0, build_batch([(records.offset_commit_key("g", "t", 2), b"\x00\x09junk", T0)]))
            with pytest.raises(GroupLoadError, match="offset 4"):
                m.load_partition(0)
        finally:
            b.shutdown()
    run(body)


def test_record_without_key_fails_the_load(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager(num_partitions=1)
            m.ensure_offsets_topic()
            _append_raw(b, 0, build_batch([(None, b"v", T0)]))
            with pytest.raises(GroupLoadError, match="no key"):
                m.load_partition(0)
        finally:
            b.shutdown()
    run(body)


# -- errors ------------------------------------------------------------------------------------------------

def test_not_coordinator_without_the_partition(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager(num_partitions=4)
            offs = {("t", 0): OffsetAndMetadata(1, 0, "", T0)}
            # before the topic exists (Kafka: no local log -> NOT_COORDINATOR)
            assert await m.store_group(group("g")) == ErrorCode.NOT_COORDINATOR
            assert await m.store_offsets("g", offs) == {("t", 0): ErrorCode.NOT_COORDINATOR}
            assert await m.store_tombstones("g", [("t", 0)], group=True) == ErrorCode.NOT_COORDINATOR
            assert m.load_partition(m.partition_for("g")) == LoadedPartition()
            m.ensure_offsets_topic()
            # this broker made a follower of the partition: the append is refused
            p = b.replica_manager.get_partition(m.topic_partition_for("g"))
            p.leader_id = 1
            assert await m.store_group(group("g")) == ErrorCode.NOT_COORDINATOR
            assert await m.store_offsets("g", offs) == {("t", 0): ErrorCode.NOT_COORDINATOR}
            assert p.log.log_end_offset == 0
        finally:
            b.shutdown()
    run(body)


def test_too_large_appends_map_like_kafka(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            [res] = b.controller.create_topics([NewTopic(
                GROUP_METADATA_TOPIC_NAME, 1, 1,
                configs={"cleanup.policy": "compact", "max.message.bytes": "1000"})], False)
            assert res.error == ErrorCode.NONE
            m = b.manager()
            many = {("topic-with-a-long-name", p): OffsetAndMetadata(p, 0, "", T0) for p in range(40)}
            assert await m.store_offsets("g", many) == {k: ErrorCode.INVALID_COMMIT_OFFSET_SIZE for k in many}
            big = group("g", members=20)
            assert await m.store_group(big) == ErrorCode.UNKNOWN_SERVER_ERROR
            assert b.offsets_log(0).log_end_offset == 0
            assert await m.store_offsets("g", {("t", 0): OffsetAndMetadata(1, 0, "", T0)}) == \
                {("t", 0): ErrorCode.NONE}
        finally:
            b.shutdown()
    run(body)


def test_offset_metadata_too_large_is_not_written(tmp_path: Path) -> None:
    async def body() -> None:
        b = Broker(tmp_path)
        try:
            m = b.manager(num_partitions=1, max_metadata_size=10)
            m.ensure_offsets_topic()
            offs = {("t", 0): OffsetAndMetadata(1, 0, "x" * 10, T0),
                    ("t", 1): OffsetAndMetadata(2, 0, "x" * 11, T0),
                    # 5 emoji = 10 UTF-16 units (20 UTF-8 bytes): Kafka counts String.length()
                    ("t", 2): OffsetAndMetadata(3, 0, "🙂" * 5, T0)}
            assert await m.store_offsets("g", offs) == {("t", 0): ErrorCode.NONE,
                                                        ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
                                                        ("t", 2): ErrorCode.NONE}
            assert m.load_partition(0).offsets == {"g": {("t", 0): offs[("t", 0)], ("t", 2): offs[("t", 2)]}}
            only_bad = {("t", 1): offs[("t", 1)]}
            assert await m.store_offsets("g", only_bad) == {("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
            assert b.offsets_log(0).log_end_offset == 2
            assert await m.store_offsets("g", {}) == {}
        finally:
            b.shutdown()
    run(body)


@pytest.mark.parametrize("append_error, for_group, for_offsets", [
    (ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE,
     ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT),
    (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
    (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
    (ErrorCode.INVALID_FETCH_SIZE, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
    (ErrorCode.CORRUPT_MESSAGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.CORRUPT_MESSAGE),
])
def test_error_mapping(append_error: ErrorCode, for_group: ErrorCode, for_offsets: ErrorCode) -> None:
    assert group_append_error(append_error) == for_group
    assert offset_append_error(append_error) == for_offsets


# -- offsets.retention.minutes -------------------------------------------------------------------------------

RET = 1000
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def offs(ts: int, **kw: int) -> dict[tuple[str, int], OffsetAndMetadata]:
    return {A0: OffsetAndMetadata(1, -1, "", ts, kw.get("a0_expire", -1)),
            A1: OffsetAndMetadata(2, -1, "", ts + 100),
            B0: OffsetAndMetadata(3, -1, "", ts + 200)}


def test_simple_consumer_offsets_expire_retention_after_their_commit() -> None:
    o = offs(0)
    kw = dict(protocol_type=None, group_empty=True, group_stable=False)
    assert expired_offsets(o, 999, RET, **kw) == {}
    assert expired_offsets(o, 1000, RET, **kw) == {A0: o[A0]}            # >= retention
    assert expired_offsets(o, 1199, RET, **kw) == {A0: o[A0], A1: o[A1]}
    assert expired_offsets(o, 1200, RET, **kw) == o
    assert expired_offsets(o, 5000, RET, pending={A1}, **kw) == {A0: o[A0], B0: o[B0]}
    assert expired_offsets(o, 5000, RET, protocol_type="", group_empty=True, group_stable=False) == o


def test_empty_group_offsets_expire_retention_after_the_group_became_empty() -> None:
    o = offs(0)
    kw = dict(protocol_type="consumer", group_empty=True, group_stable=False)
    # became empty at 500: every offset expires together at 1500, whatever its commit time
    assert expired_offsets(o, 1499, RET, current_state_timestamp=500, **kw) == {}
    assert expired_offsets(o, 1500, RET, current_state_timestamp=500, **kw) == o
    # no state timestamp (GroupMetadataValue v0/v1): per commit timestamp
    assert expired_offsets(o, 1100, RET, current_state_timestamp=-1, **kw) == {A0: o[A0], A1: o[A1]}
    # any protocol type: the rule is about being empty
    assert expired_offsets(o, 1500, RET, protocol_type="connect", group_empty=True, group_stable=False,
                           current_state_timestamp=500) == o


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    o = offs(0)
    kw = dict(protocol_type="consumer", group_empty=False, group_stable=True)
    assert expired_offsets(o, 10_000, RET, subscribed=frozenset({"a"}), **kw) == {B0: o[B0]}
    assert expired_offsets(o, 1199, RET, subscribed=frozenset({"a"}), **kw) == {}
    assert expired_offsets(o, 10_000, RET, subscribed=frozenset({"a", "b"}), **kw) == {}
    assert expired_offsets(o, 10_000, RET, subscribed=frozenset(), **kw) == o
    # subscriptions unknown, rebalancing, or another protocol type: nothing expires
    assert expired_offsets(o, 10_000, RET, subscribed=None, **kw) == {}
    assert expired_offsets(o, 10_000, RET, protocol_type="consumer", group_empty=False,
                           group_stable=False, subscribed=frozenset({"a"})) == {}
    assert expired_offsets(o, 10_000, RET, protocol_type="connect", group_empty=False,
                           group_stable=True, subscribed=frozenset()) == {}


def test_explicit_expire_timestamp_overrides_retention() -> None:
    # An OffsetCommit v1-v4 retention time (stored in OffsetCommitValue v1) expires at that time.
    o = offs(0, a0_expire=300)
    kw = dict(protocol_type=None, group_empty=True, group_stable=False)
    assert expired_offsets(o, 299, RET, **kw) == {}
    assert expired_offsets(o, 300, RET, **kw) == {A0: o[A0]}
    o2 = offs(0, a0_expire=5000)
    assert expired_offsets(o2, 1200, RET, **kw) == {A1: o2[A1], B0: o2[B0]}


def test_expired_offsets_of_a_loaded_group() -> None:
    o = offs(0)
    # offsets without group metadata: simple consumer
    assert expired_offsets_of(None, o, 1000, RET) == {A0: o[A0]}
    # a loaded group with members is Stable; it subscribes to "a"
    stable = group("g", members=2, topics=("a",), state_ts=0)
    assert expired_offsets_of(stable, o, 10_000, RET) == {B0: o[B0]}
    assert expired_offsets_of(stable, o, 10_000, RET, stable=False) == {}
    # an empty group (as Kafka writes it after the last member leaves), empty since 800
    empty = GroupSnapshot("g", "consumer", 5, None, None, 800)
    assert expired_offsets_of(empty, o, 1799, RET) == {}
    assert expired_offsets_of(empty, o, 1800, RET) == o


def test_subscribed_topics() -> None:
    assert subscribed_topics("consumer", "range", [subscription("a", "b"), subscription("c")]) == \
        frozenset({"a", "b", "c"})
    v0 = ConsumerProtocolSubscription(topics=["x"], user_data=b"u").encode(version=0)
    assert subscribed_topics("consumer", "range", [v0]) == frozenset({"x"})
    # a future version: still read with the v0 prefix
    assert subscribed_topics("consumer", "range", [b"\x00\x09" + v0[2:] + b"more"]) == frozenset({"x"})
    assert subscribed_topics("consumer", "range", []) == frozenset()
    assert subscribed_topics("consumer", None, [v0]) is None
    assert subscribed_topics("connect", "default", [v0]) is None
    assert subscribed_topics("", None, []) is None
    assert subscribed_topics("consumer", "range", [b"\xff\xff" + v0[2:]]) is None     # bad version
    assert subscribed_topics("consumer", "range", [v0[:5]]) is None                  # truncated
