"""MetadataCache.update_metadata with Kafka 3.9's ZkMetadataCache semantics (partition states
accumulate, leader -2 deletes, topic ids replaced or forgotten, brokers and controller replaced),
the partition metadata Metadata answers per listener, the listeners, and the replica manager's
controller-epoch guard in front of it. A property test checks any sequence of updates against a
plain model."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.cluster.metadata_cache import (LEADER_DURING_DELETE, ZERO_UUID, BrokerEndpoint, BrokerInfo,
                                              MetadataCache, MetadataChange, PartitionInfo, PartitionMetadata,
                                              UpdateMetadataPartitionState)
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.replica_manager import ReplicaManager

ID_A = uuid.UUID("aaaaaaaa-0000-0000-0000-000000000001")
ID_B = uuid.UUID("bbbbbbbb-0000-0000-0000-000000000002")


def broker(broker_id: int, *listeners: str, rack: str | None = None) -> BrokerInfo:
    names = listeners or ("PLAINTEXT",)
    return BrokerInfo(broker_id, tuple(BrokerEndpoint(n, f"h{broker_id}", 9000 + 10 * broker_id + i)
                                       for i, n in enumerate(names)), rack)


def ps(topic: str, partition: int, leader: int, leader_epoch: int = 0, replicas: tuple[int, ...] = (1, 2, 3),
       isr: tuple[int, ...] | None = None, offline: tuple[int, ...] = (), zk_version: int = 0,
       controller_epoch: int = 1) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(topic, partition, controller_epoch, leader, leader_epoch,
                                        replicas if isr is None else isr, zk_version, replicas, offline)


BROKERS = [broker(1), broker(2), broker(3)]


def test_partitions_accumulate_and_brokers_are_replaced() -> None:
    c = MetadataCache("c", broker_id=1)
    assert c.update_metadata(1, 1, BROKERS, [ps("a", 0, 1), ps("a", 1, 2)], {"a": ID_A}) == []
    assert c.update_metadata(2, 2, BROKERS[:2], [ps("a", 2, 3, leader_epoch=4, zk_version=6)], {"a": ID_A}) == []
    t = c.topic("a")
    assert t is not None and (t.name, t.topic_id, t.is_internal) == ("a", ID_A, False)
    assert sorted(t.partitions) == [0, 1, 2]
    assert t.partitions[2] == PartitionInfo(2, 3, 4, (1, 2, 3), (1, 2, 3), (), 1, 6)
    assert sorted(c.brokers) == [1, 2] and c.controller_id == 2
    assert (c.topic_name(ID_A), c.topic_id("a")) == ("a", ID_A)
    # an update with brokers only keeps every partition
    c.update_metadata(3, 3, BROKERS, [], {})
    assert sorted(c.topic("a").partitions) == [0, 1, 2] and c.controller_id == 3
    # a negative controller id: no controller
    c.update_metadata(-1, 3, BROKERS, [], {})
    assert c.controller_id == -1


def test_deletion_sentinel_removes_partitions_then_the_topic() -> None:
    c = MetadataCache()
    c.update_metadata(1, 1, BROKERS, [ps("a", 0, 1), ps("a", 1, 2), ps("b", 0, 3)], {"a": ID_A, "b": ID_B})
    deleted = c.update_metadata(1, 1, BROKERS, [ps("a", 1, LEADER_DURING_DELETE)], {"a": ID_A})
    assert deleted == [TopicPartition("a", 1)]
    assert sorted(c.topic("a").partitions) == [0] and c.topic_id("a") == ID_A
    deleted = c.update_metadata(1, 1, BROKERS, [ps("a", 0, LEADER_DURING_DELETE), ps("x", 5, LEADER_DURING_DELETE)],
                                {"a": ID_A})
    assert deleted == [TopicPartition("a", 0), TopicPartition("x", 5)]
    assert not c.contains("a") and c.topic_name(ID_A) is None and c.topic_names() == ["b"]
    # deleted then re-created in one request: not reported deleted (Kafka's LinkedHashSet.remove)
    assert c.update_metadata(1, 1, BROKERS, [ps("b", 0, LEADER_DURING_DELETE), ps("b", 0, 1)], {"b": ID_B}) == []
    assert c.topic("b").partitions[0].leader == 1


def test_topic_ids_replaced_and_forgotten() -> None:
    c = MetadataCache()
    c.update_metadata(1, 1, BROKERS, [ps("a", 0, 1)], {"a": ID_A})
    # UpdateMetadata v5-6 has no topic ids: zero, and the cache forgets the id, not the partitions
    c.update_metadata(1, 1, BROKERS, [ps("a", 0, 2)], {"a": ZERO_UUID})
    t = c.topic("a")
    assert t is not None and t.topic_id == ZERO_UUID and c.topic_name(ID_A) is None
    assert t.partitions[0].leader == 2
    c.update_metadata(1, 1, BROKERS, [], {"a": ID_B})
    assert c.topic("a").topic_id == ID_B and c.topic_name(ID_B) == "a"


def test_listeners_hear_each_change() -> None:
    c = MetadataCache()
    changes: list[MetadataChange] = []
    c.add_listener(changes.append)
    c.update_metadata(1, 1, BROKERS, [ps("a", 0, 1), ps("b", 0, 1)], {"a": ID_A, "b": ID_B})
    c.update_metadata(1, 1, BROKERS, [ps("a", 0, LEADER_DURING_DELETE)], {"a": ID_A})
    c.update_metadata(2, 2, BROKERS, [], {})
    assert changes == [
        MetadataChange(frozenset({"a", "b"}), (), True),
        MetadataChange(frozenset({"a"}), (TopicPartition("a", 0),), False),
        MetadataChange(frozenset(), (), True),
    ]


def test_a_failing_listener_does_not_stop_the_others() -> None:
    c = MetadataCache()
    seen: list[MetadataChange] = []

    def bad(_change: MetadataChange) -> None:
        raise ValueError("boom")
    c.add_listener(bad)
    c.add_listener(seen.append)
    c.update_metadata(1, 1, BROKERS, [ps("a", 0, 1)], {"a": ID_A})
    assert len(seen) == 1 and c.contains("a")


def test_partition_metadata_per_listener() -> None:
    c = MetadataCache()
    brokers = [broker(1, "PLAINTEXT", "INTERNAL"), broker(2, "PLAINTEXT"), broker(3, "PLAINTEXT", "INTERNAL")]
    c.update_metadata(1, 1, brokers, [
        ps("a", 0, 1, leader_epoch=3),
        ps("a", 1, 4, leader_epoch=5, replicas=(4, 1), isr=(4, 1), offline=(4,)),     # leader 4 is dead
        ps("a", 2, 2, replicas=(2, 3)),                                             # 2 lacks INTERNAL
        ps("a", 3, -1, leader_epoch=7, replicas=(4,), offline=(4,)),
    ], {"a": ID_A})
    assert c.partition_metadata("a", "PLAINTEXT") == [
        PartitionMetadata(ErrorCode.NONE, 0, 1, 3, (1, 2, 3), (1, 2, 3), ()),
        PartitionMetadata(ErrorCode.LEADER_NOT_AVAILABLE, 1, -1, 5, (4, 1), (4, 1), (4,)),
        PartitionMetadata(ErrorCode.NONE, 2, 2, 0, (2, 3), (2, 3), ()),
        PartitionMetadata(ErrorCode.LEADER_NOT_AVAILABLE, 3, -1, 7, (4,), (4,), (4,)),
    ]
    internal = c.partition_metadata("a", "INTERNAL", error_unavailable_listeners=True)
    assert internal is not None
    assert [(m.error, m.leader_id) for m in internal] == [
        (ErrorCode.NONE, 1), (ErrorCode.LEADER_NOT_AVAILABLE, -1), (ErrorCode.LISTENER_NOT_FOUND, -1),
        (ErrorCode.LEADER_NOT_AVAILABLE, -1)]
    assert c.partition_metadata("a", "INTERNAL")[2].error == ErrorCode.LEADER_NOT_AVAILABLE
    # Metadata v0: replicas and ISR only the brokers alive on the listener
    v0 = c.partition_metadata("a", "INTERNAL", error_unavailable_endpoints=True)
    assert v0 is not None
    assert v0[0] == PartitionMetadata(ErrorCode.REPLICA_NOT_AVAILABLE, 0, 1, 3, (1, 3), (1, 3), ())
    assert v0[1] == PartitionMetadata(ErrorCode.LEADER_NOT_AVAILABLE, 1, -1, 5, (1,), (1,), (4,))
    assert c.partition_metadata("nope", "PLAINTEXT") is None


def test_embedded_controller_path_keeps_ids_consistent() -> None:
    c = MetadataCache()
    changes: list[MetadataChange] = []
    c.add_listener(changes.append)
    from kafkalite.cluster.metadata_cache import TopicInfo
    c.update_topic(TopicInfo("a", ID_A, False, {0: PartitionInfo(0, 1, 0, (1,), (1,))}))
    c.remove_topic("a")
    assert not c.contains("a") and c.topic_name(ID_A) is None
    assert changes == [MetadataChange(frozenset({"a"}), (), False),
                       MetadataChange(frozenset({"a"}), (TopicPartition("a", 0),), False)]


def test_replica_manager_refuses_an_old_controller(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    lm.startup()
    cache = MetadataCache()
    rm = ReplicaManager(1, lm, cache)
    try:
        assert rm.maybe_update_metadata_cache(1, 5, BROKERS, [ps("a", 0, 1)], {"a": ID_A}) == []
        assert rm.controller_epoch == 5
        with pytest.raises(KafkaApiError) as e:
            rm.maybe_update_metadata_cache(2, 4, BROKERS[:1], [ps("a", 0, LEADER_DURING_DELETE)], {})
        assert e.value.code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert cache.contains("a") and len(cache.brokers) == 3 and cache.controller_id == 1
        assert rm.maybe_update_metadata_cache(2, 5, BROKERS, [ps("a", 0, LEADER_DURING_DELETE)], {}) == \
            [TopicPartition("a", 0)]
    finally:
        rm.shutdown()
        lm.shutdown()


# -- property: any sequence of updates equals a plain model ---------------------------------------
TOPICS = ["a", "b", "c"]
IDS = [ZERO_UUID, ID_A, ID_B]

update_st = st.tuples(
    st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 3), st.sampled_from([LEADER_DURING_DELETE, -1, 1, 2]),
                       st.integers(0, 5)), max_size=6),
    st.dictionaries(st.sampled_from(TOPICS), st.sampled_from(IDS), max_size=3))


@settings(max_examples=200, deadline=None)
@given(st.lists(update_st, max_size=8))
def test_updates_match_a_model(updates: list) -> None:
    c = MetadataCache()
    partitions: dict[tuple[str, int], tuple[int, int]] = {}
    ids: dict[str, uuid.UUID] = {}
    for states, topic_ids in updates:
        deleted_model: list[TopicPartition] = []
        for name, tid in topic_ids.items():
            ids.pop(name, None)
            if tid != ZERO_UUID:
                ids[name] = tid
        for topic, p, leader, epoch in states:
            tp = TopicPartition(topic, p)
            if leader == LEADER_DURING_DELETE:
                had_topic = any(t == topic for t, _ in partitions)
                partitions.pop((topic, p), None)
                if tp not in deleted_model:
                    deleted_model.append(tp)
                if had_topic and not any(t == topic for t, _ in partitions):
                    ids.pop(topic, None)
            else:
                partitions[(topic, p)] = (leader, epoch)
                if tp in deleted_model:
                    deleted_model.remove(tp)
        deleted = c.update_metadata(1, 1, BROKERS, [ps(t, p, leader, epoch) for t, p, leader, epoch in states],
                                    topic_ids)
        assert deleted == deleted_model
        live_topics = sorted({t for t, _ in partitions})
        assert sorted(c.topic_names()) == live_topics
        for topic in live_topics:
            info = c.topic(topic)
            assert info is not None
            assert {p: (i.leader, i.leader_epoch) for p, i in info.partitions.items()} == \
                {p: v for (t, p), v in partitions.items() if t == topic}
            assert info.topic_id == ids.get(topic, ZERO_UUID)
        for tid in (ID_A, ID_B):
            owners = [n for n, i in ids.items() if i == tid]
            # two names with one id is a broken request: any of them may answer
            assert c.topic_name(tid) == (owners[0] if len(owners) == 1 else c.topic_name(tid))
            assert (c.topic_name(tid) is None) == (not owners)
