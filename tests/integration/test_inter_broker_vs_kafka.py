"""What Apache Kafka 3.9 (the session's `kafka_oracle`: one ZooKeeper-mode broker, id 0, which is
also the active controller) answers to inter-broker requests that it must refuse, sent with our
message classes through BrokerConnection at the versions Kafka 3.9 brokers use between
themselves (IBP 3.9). kafkalite's broker and controller are to answer the same.

Observed on Kafka 3.9.1 (and read in its KafkaApis / ReplicaManager / KafkaController):
- A broker epoch of -1 skips the broker-epoch check; any other epoch below the broker's
  registration czxid is STALE_BROKER_EPOCH (77), checked before the controller epoch.
- A controller epoch below the broker's latest known one (>= 1 once the controller has sent it
  anything): LeaderAndIsr -> STALE_CONTROLLER_EPOCH (11) at the top and for every partition;
  StopReplica -> 11 at the top, no partition errors; UpdateMetadata -> 11 (ReplicaManager throws
  ControllerMovedException, which Errors maps to STALE_CONTROLLER_EPOCH).
- ControlledShutdown, handled by the controller itself: an unknown broker id with epoch -1 (or
  none: v0-v1, where v0 has request header v0, without client id) -> BROKER_NOT_AVAILABLE (8);
  an unknown id with any other epoch -> UNKNOWN_SERVER_ERROR (-1)
  (the controller's broker-epoch map lookup throws); a known id with a stale epoch -> 77.
- AlterPartition, handled by the controller itself: a broker id with a different broker epoch
  than registered (stale, -1, or an unknown broker id) -> top-level 77, no topics.
None of these change the broker's state: the topic keeps its leaders afterwards.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kafkalite.network.broker_client import BrokerConnection
from kafkalite.protocol.inter_broker import (
    IBP_3_9_VERSIONS, AlterPartitionRequest, ControlledShutdownRequest, LeaderAndIsrRequest,
    StopReplicaRequest, UpdateMetadataRequest)

UNKNOWN_SERVER_ERROR = -1
NONE = 0
BROKER_NOT_AVAILABLE = 8
STALE_CONTROLLER_EPOCH = 11
TOPIC_ALREADY_EXISTS = 36
INVALID_REPLICATION_FACTOR = 38
STALE_BROKER_EPOCH = 77

STALE_CONTROLLER = 0  # Kafka's controller epochs start at 1
NO_BROKER_EPOCH = -1  # "not checked", as an old controller would send
STALE_BROKER_EPOCH_VALUE = 1  # below any real registration czxid

T = TypeVar("T")


def _run(oracle: Any, body: Callable[[BrokerConnection], Awaitable[T]]) -> T:
    async def go() -> T:
        conn = BrokerConnection(oracle.host, oracle.port, client_id="kafkalite-inter-broker-test")
        try:
            return await body(conn)
        finally:
            await conn.close()

    return asyncio.run(go())


def _topic_metadata(name: str) -> Any:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                           allow_auto_topic_creation=False)


@pytest.fixture(scope="module")
def oracle_topic(kafka_oracle: Any) -> Iterator[tuple[Any, str, uuid.UUID]]:
    """A two-partition topic of this module's own on the oracle, led by broker 0."""
    name = "inter-broker-" + uuid.uuid4().hex[:8]

    async def create(conn: BrokerConnection) -> uuid.UUID:
        T_ = CreateTopicsRequest.CreatableTopic
        deadline = time.monotonic() + 60
        while True:  # right after start-up the metadata cache may not list broker 0 yet
            created = await conn.send(CreateTopicsRequest(
                topics=[T_(name=name, num_partitions=2, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=30000, validate_only=False), 7)
            code = created.topics[0].error_code
            if code in (NONE, TOPIC_ALREADY_EXISTS):
                break
            assert code == INVALID_REPLICATION_FACTOR and time.monotonic() < deadline, created
            await asyncio.sleep(0.2)
        while True:
            md = await conn.send(_topic_metadata(name), 12)
            topic = md.topics[0]
            if topic.error_code == NONE and sorted(p.leader_id for p in topic.partitions) == [0, 0]:
                return topic.topic_id
            assert time.monotonic() < deadline, md
            await asyncio.sleep(0.1)

    topic_id = _run(kafka_oracle, create)
    assert topic_id is not None
    yield kafka_oracle, name, topic_id


def _update_metadata(oracle: Any, topic: str, topic_id: uuid.UUID, controller_epoch: int,
                     broker_epoch: int) -> Any:
    TopicState = UpdateMetadataRequest.UpdateMetadataTopicState
    Broker = UpdateMetadataRequest.UpdateMetadataBroker
    return UpdateMetadataRequest(
        controller_id=oracle.broker_id, is_k_raft_controller=False,
        controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=[TopicState(topic_name=topic, topic_id=topic_id, partition_states=[
            TopicState.UpdateMetadataPartitionState(
                partition_index=p, controller_epoch=controller_epoch, leader=oracle.broker_id,
                leader_epoch=0, isr=[oracle.broker_id], zk_version=0, replicas=[oracle.broker_id],
                offline_replicas=[]) for p in (0, 1)])],
        live_brokers=[Broker(id=oracle.broker_id, endpoints=[Broker.UpdateMetadataEndpoint(
            port=oracle.port, host=oracle.host, listener="PLAINTEXT", security_protocol=0)], rack=None)])


def _leader_and_isr(oracle: Any, topic: str, topic_id: uuid.UUID, controller_epoch: int,
                    broker_epoch: int) -> Any:
    TopicState = LeaderAndIsrRequest.LeaderAndIsrTopicState
    return LeaderAndIsrRequest(
        controller_id=oracle.broker_id, is_k_raft_controller=False,
        controller_epoch=controller_epoch, broker_epoch=broker_epoch, request_type=0,
        topic_states=[TopicState(topic_name=topic, topic_id=topic_id, partition_states=[
            TopicState.LeaderAndIsrPartitionState(
                partition_index=p, controller_epoch=controller_epoch, leader=oracle.broker_id,
                leader_epoch=0, isr=[oracle.broker_id], partition_epoch=0,
                replicas=[oracle.broker_id], adding_replicas=[], removing_replicas=[],
                is_new=False, leader_recovery_state=0) for p in (0, 1)])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
            broker_id=oracle.broker_id, host_name=oracle.host, port=oracle.port)])


def _stop_replica(oracle: Any, topic: str, controller_epoch: int, broker_epoch: int) -> Any:
    TopicState = StopReplicaRequest.StopReplicaTopicState
    return StopReplicaRequest(
        controller_id=oracle.broker_id, is_k_raft_controller=False,
        controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=[TopicState(topic_name=topic, partition_states=[
            TopicState.StopReplicaPartitionState(partition_index=p, leader_epoch=0,
                                                 delete_partition=True) for p in (0, 1)])])


def _alter_partition(topic_id: uuid.UUID, broker_id: int, broker_epoch: int) -> Any:
    Topic = AlterPartitionRequest.TopicData
    Partition = Topic.PartitionData
    return AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch, topics=[Topic(
        topic_id=topic_id, partitions=[Partition(
            partition_index=0, leader_epoch=0,
            new_isr_with_epochs=[Partition.BrokerState(broker_id=0, broker_epoch=-1)],
            leader_recovery_state=0, partition_epoch=0)])])


def test_kafka_advertises_the_inter_broker_versions(kafka_oracle: Any) -> None:
    async def body(conn: BrokerConnection) -> dict[int, tuple[int, int]]:
        resp = await conn.send(ApiVersionsRequest(), 0)
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    advertised = _run(kafka_oracle, body)
    assert {k: advertised[k] for k in IBP_3_9_VERSIONS} == \
        {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3), 56: (0, 3)}
    assert {k: v for k, (_, v) in advertised.items() if k in IBP_3_9_VERSIONS} == IBP_3_9_VERSIONS


def test_update_metadata_v8_refused(oracle_topic: tuple[Any, str, uuid.UUID]) -> None:
    oracle, topic, topic_id = oracle_topic

    async def body(conn: BrokerConnection) -> list[tuple[int, int]]:
        out = []
        for controller_epoch, broker_epoch in ((STALE_CONTROLLER, NO_BROKER_EPOCH),
                                               (STALE_CONTROLLER, STALE_BROKER_EPOCH_VALUE),
                                               (1, STALE_BROKER_EPOCH_VALUE)):
            resp = await conn.send(_update_metadata(oracle, topic, topic_id, controller_epoch,
                                                    broker_epoch), 8)
            out.append((resp.version, resp.error_code))
        return out

    assert _run(oracle, body) == [(8, STALE_CONTROLLER_EPOCH), (8, STALE_BROKER_EPOCH),
                                  (8, STALE_BROKER_EPOCH)]


def test_leader_and_isr_v7_refused(oracle_topic: tuple[Any, str, uuid.UUID]) -> None:
    oracle, topic, topic_id = oracle_topic

    async def body(conn: BrokerConnection) -> list[Any]:
        out = []
        for broker_epoch in (NO_BROKER_EPOCH, STALE_BROKER_EPOCH_VALUE):
            resp = await conn.send(_leader_and_isr(oracle, topic, topic_id, STALE_CONTROLLER,
                                                   broker_epoch), 7)
            out.append((resp.error_code, [(t.topic_id, [(p.partition_index, p.error_code)
                                                        for p in t.partition_errors])
                                          for t in resp.topics]))
        return out

    assert _run(oracle, body) == [
        (STALE_CONTROLLER_EPOCH, [(topic_id, [(0, STALE_CONTROLLER_EPOCH), (1, STALE_CONTROLLER_EPOCH)])]),
        (STALE_BROKER_EPOCH, [(topic_id, [(0, STALE_BROKER_EPOCH), (1, STALE_BROKER_EPOCH)])]),
    ]


def test_stop_replica_v4_refused(oracle_topic: tuple[Any, str, uuid.UUID]) -> None:
    oracle, topic, _ = oracle_topic

    async def body(conn: BrokerConnection) -> list[Any]:
        out = []
        for broker_epoch in (NO_BROKER_EPOCH, STALE_BROKER_EPOCH_VALUE):
            resp = await conn.send(_stop_replica(oracle, topic, STALE_CONTROLLER, broker_epoch), 4)
            out.append((resp.error_code, resp.partition_errors))
        return out

    assert _run(oracle, body) == [(STALE_CONTROLLER_EPOCH, []), (STALE_BROKER_EPOCH, [])]


def test_controlled_shutdown_v3_refused(oracle_topic: tuple[Any, str, uuid.UUID]) -> None:
    oracle, _, _ = oracle_topic

    async def body(conn: BrokerConnection) -> list[tuple[int, list[Any]]]:
        out = []
        # broker 0 is the oracle itself: only ever with a stale epoch, which is refused before
        # the controller starts moving anything
        for broker_id, broker_epoch in ((99, NO_BROKER_EPOCH), (99, 5), (0, STALE_BROKER_EPOCH_VALUE)):
            resp = await conn.send(ControlledShutdownRequest(broker_id=broker_id,
                                                             broker_epoch=broker_epoch), 3)
            out.append((resp.error_code, resp.remaining_partitions))
        return out

    assert _run(oracle, body) == [(BROKER_NOT_AVAILABLE, []), (UNKNOWN_SERVER_ERROR, []),
                                  (STALE_BROKER_EPOCH, [])]


def test_controlled_shutdown_v0_header_and_v1(oracle_topic: tuple[Any, str, uuid.UUID]) -> None:
    """v0 goes with request header v0 (no client id); Kafka reads it and, with no broker epoch
    before v2, answers an unknown broker id as at -1."""
    oracle, _, _ = oracle_topic

    async def body(conn: BrokerConnection) -> list[tuple[int, int, list[Any]]]:
        out = []
        for version in (0, 1, 2):
            resp = await conn.send(ControlledShutdownRequest(broker_id=99), version)
            out.append((resp.version, resp.error_code, resp.remaining_partitions))
        return out

    assert _run(oracle, body) == [(0, BROKER_NOT_AVAILABLE, []), (1, BROKER_NOT_AVAILABLE, []),
                                  (2, BROKER_NOT_AVAILABLE, [])]


def test_alter_partition_v3_refused(oracle_topic: tuple[Any, str, uuid.UUID]) -> None:
    oracle, topic, topic_id = oracle_topic

    async def body(conn: BrokerConnection) -> list[Any]:
        out = []
        for broker_id, broker_epoch in ((0, STALE_BROKER_EPOCH_VALUE), (0, NO_BROKER_EPOCH), (99, 5)):
            resp = await conn.send(_alter_partition(topic_id, broker_id, broker_epoch), 3)
            out.append((resp.throttle_time_ms, resp.error_code, resp.topics))
        # nothing moved: both partitions still led by broker 0 with their first leader epoch
        md = await conn.send(_topic_metadata(topic), 12)
        out.append(sorted((p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.isr_nodes)
                          for p in md.topics[0].partitions))
        return out

    assert _run(oracle, body) == [
        (0, STALE_BROKER_EPOCH, []), (0, STALE_BROKER_EPOCH, []), (0, STALE_BROKER_EPOCH, []),
        [(0, NONE, 0, 0, [0]), (1, NONE, 0, 0, [0])],
    ]
