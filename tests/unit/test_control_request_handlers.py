"""The LeaderAndIsr (0-7), StopReplica (0-4) and UpdateMetadata (0-8) handlers over a real
replica manager and metadata cache: each version's request layout decoded as Kafka reads it,
broker-epoch fencing, stale controller epochs, and the response layout per version (every
response goes through encode/decode at its version)."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, PartitionInfo
from kafkalite.config.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.network.socket_server import ConnectionInfo
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.header import RequestHeader
from kafkalite.protocol.inter_broker import (LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest,
                                             StopReplicaResponse, UpdateMetadataRequest, UpdateMetadataResponse)
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.server.broker_epoch import STALE_BROKER_EPOCH, BrokerEpoch
from kafkalite.server.handlers import leader_and_isr, stop_replica, update_metadata
from kafkalite.server.request_context import RequestContext

CONFIG = LogConfig(segment_index_bytes=64 * 1024)
ME, OTHER = 1, 2
MY_EPOCH = 100
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
CONN = ConnectionInfo("c", "PLAINTEXT", "127.0.0.1", 1)


@pytest.fixture
def services(tmp_path: Path) -> Iterator[SimpleNamespace]:
    lm = LogManager([tmp_path], CONFIG)
    lm.startup()
    cache = MetadataCache("cluster", ME)
    cache.update_brokers([BrokerInfo(b, (BrokerEndpoint("PLAINTEXT", "h", 9000 + b),)) for b in (ME, OTHER)], OTHER)
    rm = ReplicaManager(ME, lm, cache)
    yield SimpleNamespace(replica_manager=rm, metadata_cache=cache, log_manager=lm,
                          broker_epoch=BrokerEpoch(MY_EPOCH), topic_log_config=lambda _topic: CONFIG)
    rm.shutdown()
    lm.shutdown()


def call(make: Any, services: SimpleNamespace, api_key: int, v: int, req: Any, resp_cls: Any) -> Any:
    """Encode the request at v, decode it as the broker would, handle it, and round-trip the answer."""
    decoded = type(req)[v].decode(req.encode(), version=v)
    spec = make(services)
    ctx = RequestContext(RequestHeader(api_key, v, 7, "controller"), CONN)
    resp = asyncio.run(spec.handler(ctx, decoded))
    return resp_cls[v].decode(resp.encode(), version=v)


# -- LeaderAndIsr -------------------------------------------------------------------------------
def lisr_request(v: int, *, controller_epoch: int = 1, broker_epoch: int = MY_EPOCH, leader: int = ME,
                 leader_epoch: int = 0, partitions: tuple[int, ...] = (0,), topic_id: uuid.UUID = TOPIC_ID,
                 kraft: bool = False) -> Any:
    R = LeaderAndIsrRequest[v]
    T = R.LeaderAndIsrTopicState
    P = T.LeaderAndIsrPartitionState if v >= 2 else R.LeaderAndIsrPartitionState
    states = [P(topic_name="t", partition_index=p, controller_epoch=controller_epoch, leader=leader,
                leader_epoch=leader_epoch, isr=[ME, OTHER], partition_epoch=0, replicas=[ME, OTHER],
                adding_replicas=[], removing_replicas=[], is_new=True, leader_recovery_state=0) for p in partitions]
    return R(controller_id=OTHER, is_k_raft_controller=kraft, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, request_type=0, ungrouped_partition_states=states if v < 2 else [],
             topic_states=[T(topic_name="t", topic_id=topic_id, partition_states=states)] if v >= 2 else [],
             live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=b, host_name="h", port=9000 + b) for b in (ME, OTHER)])


def lisr(services: SimpleNamespace, v: int, **kw: Any) -> Any:
    return call(leader_and_isr.make, services, 4, v, lisr_request(v, **kw), LeaderAndIsrResponse)


def flat(resp: Any) -> tuple[int, list[tuple]]:
    """(top error, [(topic name or id, partition, error)]) whatever the version."""
    if resp.version < 5:
        return resp.error_code, [(p.topic_name, p.partition_index, p.error_code) for p in resp.partition_errors]
    return resp.error_code, [(t.topic_id, p.partition_index, p.error_code) for t in resp.topics
                             for p in t.partition_errors]


@pytest.mark.parametrize("v", range(8))
def test_leader_and_isr_each_version(services: SimpleNamespace, v: int) -> None:
    key = TOPIC_ID if v >= 5 else "t"
    assert flat(lisr(services, v, partitions=(0, 1))) == (0, [(key, 0, 0), (key, 1, 0)])
    p = services.replica_manager.get_partition(TopicPartition("t", 0))
    assert p is not None and p.is_leader and p.leader_epoch == 0
    # topic ids travel from v5: before, the log has none
    assert p.log.topic_id == (TOPIC_ID if v >= 5 else None)
    # the same epoch again is stale for each partition
    assert flat(lisr(services, v, partitions=(0,))) == (0, [(key, 0, ErrorCode.STALE_CONTROLLER_EPOCH)])
    # a newer epoch makes this broker a follower
    assert flat(lisr(services, v, leader=OTHER, leader_epoch=1)) == (0, [(key, 0, 0)])
    assert not p.is_leader and p.leader_id == OTHER


@pytest.mark.parametrize("v", [2, 5, 7])
def test_leader_and_isr_broker_epoch_fencing(services: SimpleNamespace, v: int) -> None:
    key = TOPIC_ID if v >= 5 else "t"
    assert flat(lisr(services, v, broker_epoch=MY_EPOCH - 1, partitions=(0, 1))) == \
        (STALE_BROKER_EPOCH, [(key, 0, STALE_BROKER_EPOCH), (key, 1, STALE_BROKER_EPOCH)])
    assert services.replica_manager.partitions == {}
    # -1: the sender does not check; newer than ours: the controller saw our registration first
    assert flat(lisr(services, v, broker_epoch=-1)) == (0, [(key, 0, 0)])
    assert flat(lisr(services, v, broker_epoch=MY_EPOCH + 1, leader_epoch=1)) == (0, [(key, 0, 0)])


def test_leader_and_isr_stale_controller_epoch(services: SimpleNamespace) -> None:
    assert flat(lisr(services, 7, controller_epoch=5)) == (0, [(TOPIC_ID, 0, 0)])
    assert flat(lisr(services, 7, controller_epoch=4, leader_epoch=3, partitions=(0, 1))) == \
        (ErrorCode.STALE_CONTROLLER_EPOCH, [(TOPIC_ID, 0, ErrorCode.STALE_CONTROLLER_EPOCH),
                                            (TOPIC_ID, 1, ErrorCode.STALE_CONTROLLER_EPOCH)])
    assert services.replica_manager.get_partition(TopicPartition("t", 0)).leader_epoch == 0


def test_leader_and_isr_from_a_kraft_controller(services: SimpleNamespace) -> None:
    assert flat(lisr(services, 7, kraft=True)) == (ErrorCode.UNKNOWN_SERVER_ERROR,
                                                    [(TOPIC_ID, 0, ErrorCode.UNKNOWN_SERVER_ERROR)])


# -- UpdateMetadata -----------------------------------------------------------------------------
def um_request(v: int, *, controller_epoch: int = 1, broker_epoch: int = MY_EPOCH,
               partitions: list[tuple[int, int]] | None = None, security_protocol: int = 0) -> Any:
    R = UpdateMetadataRequest[v]
    B = R.UpdateMetadataBroker
    T = R.UpdateMetadataTopicState
    P = T.UpdateMetadataPartitionState if v >= 5 else R.UpdateMetadataPartitionState
    states = [P(topic_name="t", partition_index=p, controller_epoch=controller_epoch, leader=leader, leader_epoch=3,
                isr=[ME, OTHER], zk_version=4, replicas=[ME, OTHER], offline_replicas=[OTHER])
              for p, leader in (partitions if partitions is not None else [(0, ME), (1, OTHER)])]
    brokers = [B(id=b, v0_host=f"h{b}", v0_port=9000 + b, rack="r1" if b == ME else None, endpoints=[
        B.UpdateMetadataEndpoint(port=9000 + b, host=f"h{b}", listener="INTERNAL", security_protocol=security_protocol)])
        for b in (ME, OTHER)]
    return R(controller_id=OTHER, is_k_raft_controller=False, request_type=0, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, ungrouped_partition_states=states if v < 5 else [],
             topic_states=[T(topic_name="t", topic_id=TOPIC_ID, partition_states=states)] if v >= 5 else [],
             live_brokers=brokers)


def um(services: SimpleNamespace, v: int, **kw: Any) -> int:
    return call(update_metadata.make, services, 6, v, um_request(v, **kw), UpdateMetadataResponse).error_code


@pytest.mark.parametrize("v", range(9))
def test_update_metadata_each_version(services: SimpleNamespace, v: int) -> None:
    assert um(services, v, security_protocol=1) == 0
    cache: MetadataCache = services.metadata_cache
    assert cache.controller_id == OTHER and sorted(cache.brokers) == [ME, OTHER]
    listener = "PLAINTEXT" if v == 0 else ("SSL" if v < 3 else "INTERNAL")
    protocol = 0 if v == 0 else 1
    assert cache.brokers[ME] == BrokerInfo(ME, (BrokerEndpoint(listener, "h1", 9001, protocol),),
                                           "r1" if v >= 2 else None)
    t = cache.topic("t")
    assert t is not None and t.topic_id == (TOPIC_ID if v >= 7 else uuid.UUID(int=0))
    offline = (OTHER,) if v >= 4 else ()
    assert t.partitions == {0: PartitionInfo(0, ME, 3, (ME, OTHER), (ME, OTHER), offline, 1, 4),
                            1: PartitionInfo(1, OTHER, 3, (ME, OTHER), (ME, OTHER), offline, 1, 4)}
    # leader -2: deleted
    assert um(services, v, partitions=[(1, -2)]) == 0
    assert sorted(cache.topic("t").partitions) == [0]


@pytest.mark.parametrize("v", [5, 8])
def test_update_metadata_fencing(services: SimpleNamespace, v: int) -> None:
    assert um(services, v, broker_epoch=MY_EPOCH - 1) == STALE_BROKER_EPOCH
    assert services.metadata_cache.topic("t") is None
    assert um(services, v, controller_epoch=3) == 0
    # an older controller: Kafka's ControllerMovedException, answered STALE_CONTROLLER_EPOCH
    assert um(services, v, controller_epoch=2, partitions=[(0, -2)]) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert sorted(services.metadata_cache.topic("t").partitions) == [0, 1]


# -- StopReplica --------------------------------------------------------------------------------
def sr_request(v: int, partitions: list[tuple[int, int, bool]], *, controller_epoch: int = 1,
               broker_epoch: int = MY_EPOCH) -> Any:
    R = StopReplicaRequest[v]
    delete = any(d for _p, _e, d in partitions)
    TS = R.StopReplicaTopicState
    return R(controller_id=OTHER, is_k_raft_controller=False, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, delete_partitions=delete,
             ungrouped_partitions=[R.StopReplicaPartitionV0(topic_name="t", partition_index=p)
                                   for p, _e, _d in partitions] if v == 0 else [],
             topics=[R.StopReplicaTopicV1(name="t", partition_indexes=[p for p, _e, _d in partitions])]
             if 1 <= v <= 2 else [],
             topic_states=[TS(topic_name="t", partition_states=[
                 TS.StopReplicaPartitionState(partition_index=p, leader_epoch=e, delete_partition=d)
                 for p, e, d in partitions])] if v >= 3 else [])


def sr(services: SimpleNamespace, v: int, partitions: list[tuple[int, int, bool]], **kw: Any) -> tuple[int, list]:
    resp = call(stop_replica.make, services, 5, v, sr_request(v, partitions, **kw), StopReplicaResponse)
    return resp.error_code, [(p.topic_name, p.partition_index, p.error_code) for p in resp.partition_errors]


@pytest.mark.parametrize("v", range(5))
def test_stop_replica_each_version(services: SimpleNamespace, v: int) -> None:
    lisr(services, 7, leader_epoch=3, partitions=(0, 1))
    dirs = {p: services.replica_manager.partitions[TopicPartition("t", p)].log.dir for p in (0, 1)}
    # before v3 there is no leader epoch: nothing is fenced
    expected = ErrorCode.FENCED_LEADER_EPOCH if v >= 3 else ErrorCode.NONE
    assert sr(services, v, [(0, 2, True), (1, -2, True)]) == (0, [("t", 0, expected), ("t", 1, 0)])
    assert dirs[0].exists() == (v >= 3) and not dirs[1].exists()
    assert services.log_manager.get_log(TopicPartition("t", 1)) is None


def test_stop_replica_fencing(services: SimpleNamespace) -> None:
    lisr(services, 7, controller_epoch=3)
    assert sr(services, 4, [(0, -2, True)], broker_epoch=MY_EPOCH - 1) == (STALE_BROKER_EPOCH, [])
    assert sr(services, 4, [(0, -2, True)], controller_epoch=2) == (ErrorCode.STALE_CONTROLLER_EPOCH, [])
    assert services.replica_manager.get_partition(TopicPartition("t", 0)) is not None
    assert sr(services, 4, [(0, -2, True)], controller_epoch=3) == (0, [("t", 0, 0)])
    assert services.replica_manager.get_partition(TopicPartition("t", 0)) is None
