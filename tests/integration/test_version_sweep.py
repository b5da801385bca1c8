"""Every advertised version of every API, over a real socket, with exact answers.

Clients pick the newest version both sides support, so the client tests exercise the top of each
range; this sweep covers the rest: each (api, version) the broker advertises gets a well-formed
request built by kafka-python's codec at exactly that version, and the answer is checked."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, parse_legacy_records, parse_records, wait_until

# recent timestamps (within retention.ms, or the retention check deletes them, as in Kafka)
BASE_TS = (int(time.time()) - 3600) * 1000

EXPECTED_RANGES = {
    0: (0, 13),    # Produce (v0-2: message formats 0/1, tests/integration/test_message_format.py)
    1: (0, 18),    # Fetch (v0-3: down-converted to message formats 0/1)
    2: (0, 10),    # ListOffsets
    3: (0, 13),    # Metadata
    18: (0, 4),    # ApiVersions
    19: (0, 7),    # CreateTopics
    20: (0, 6),    # DeleteTopics
    22: (0, 5),    # InitProducerId
    23: (0, 4),    # OffsetForLeaderEpoch
    # group coordinator: every version is swept in tests/unit/test_group_coordinator.py
    8: (1, 10),    # OffsetCommit
    9: (1, 10),    # OffsetFetch
    10: (0, 6),    # FindCoordinator
    11: (0, 9),    # JoinGroup
    12: (0, 4),    # Heartbeat
    13: (0, 5),    # LeaveGroup
    14: (0, 5),    # SyncGroup
    15: (0, 6),    # DescribeGroups
    16: (0, 5),    # ListGroups
    42: (0, 2),    # DeleteGroups
    47: (0, 0),    # OffsetDelete
    # configs and admin
    32: (0, 4),    # DescribeConfigs
    33: (0, 2),    # AlterConfigs
    44: (0, 1),    # IncrementalAlterConfigs
    37: (0, 3),    # CreatePartitions
    21: (0, 2),    # DeleteRecords
    60: (0, 2),    # DescribeCluster
    35: (0, 5),    # DescribeLogDirs
    # transactions: every version is swept in test_version_sweep_txn.py
    24: (0, 5),    # AddPartitionsToTxn
    25: (0, 4),    # AddOffsetsToTxn
    26: (0, 4),    # EndTxn
    27: (0, 1),    # WriteTxnMarkers
    28: (0, 4),    # TxnOffsetCommit
    61: (0, 0),    # DescribeProducers
    # the controller's APIs: the embedded broker is its own controller (tests/cluster/, the
    # differential corpus inter_broker.py)
    4: (0, 7),     # LeaderAndIsr
    5: (0, 4),     # StopReplica
    6: (0, 8),     # UpdateMetadata
    7: (0, 3),     # ControlledShutdown
    43: (0, 2),    # ElectLeaders
    45: (0, 0),    # AlterPartitionReassignments
    46: (0, 0),    # ListPartitionReassignments
    56: (0, 3),    # AlterPartition
    65: (0, 0),    # DescribeTransactions
    66: (0, 1),    # ListTransactions
}


def versions(api_key: int) -> list[int]:
    lo, hi = EXPECTED_RANGES[api_key]
    return list(range(lo, hi + 1))


@pytest.fixture(scope="module")
def client(broker: BrokerProcess):
    with RawClient(broker.bootstrap_servers) as c:
        yield c


def _create(c: RawClient, name: str, partitions: int = 1, version: int = 7):
    T = CreateTopicsRequest.CreatableTopic
    resp = c.request(CreateTopicsRequest[version](
        topics=[T(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False))
    return resp.topics[0]


def _topic_id(c: RawClient, name: str) -> uuid.UUID:
    resp = c.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                         allow_auto_topic_creation=False))
    return resp.topics[0].topic_id


def test_api_versions_advertises_exactly_the_implemented_ranges(client: RawClient) -> None:
    for v in versions(18):
        kwargs = {"client_software_name": "sweep", "client_software_version": "1.0"} if v >= 3 else {}
        resp = client.request(ApiVersionsRequest[v](**kwargs))
        assert resp.error_code == 0
        got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert got == EXPECTED_RANGES


def test_api_versions_v3_rejects_invalid_software_name(client: RawClient) -> None:
    # Kafka answers in the request's (v3) layout; kafka-python would decode any error answer as
    # v0, so read the fixed prefix by hand: header v0 (correlation id), then the error code.
    corr = client.send(ApiVersionsRequest[3](client_software_name="-bad name-", client_software_version="1"),
                       expect_response=False)
    frame = client.recv_frame()
    assert int.from_bytes(frame[0:4], "big") == corr
    assert int.from_bytes(frame[4:6], "big", signed=True) == 42  # INVALID_REQUEST


@pytest.mark.parametrize("v", versions(19))
def test_create_topics_each_version(client: RawClient, v: int) -> None:
    name = f"sweep-create-{v}-{uuid.uuid4().hex[:6]}"
    r = _create(client, name, 2, version=v)
    assert r.error_code == 0 and r.name == name
    if v >= 5:
        assert r.num_partitions == 2 and r.replication_factor == 1
        configs = {c.name: c.value for c in r.configs}
        assert configs["cleanup.policy"] == "delete"
        sources = {c.name: c.config_source for c in r.configs}
        # as DescribeConfigs reports them: set in the packaged server.properties -> STATIC_BROKER_CONFIG (4),
        # untouched -> DEFAULT_CONFIG (5)
        assert sources["segment.bytes"] == 4 and sources["cleanup.policy"] == 5
    if v >= 7:
        assert r.topic_id == _topic_id(client, name) and r.topic_id.int != 0
    again = _create(client, name, 2, version=v)
    assert again.error_code == 36  # TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("v", versions(3))
def test_metadata_each_version(broker: BrokerProcess, client: RawClient, v: int) -> None:
    name = f"sweep-md-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 3).error_code == 0
    kwargs = {"allow_auto_topic_creation": False} if v >= 4 else {}
    resp = client.request(MetadataRequest[v](topics=[MetadataRequest.MetadataRequestTopic(name=name)], **kwargs))
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(0, "127.0.0.1", broker.port)]
    (t,) = resp.topics
    assert t.error_code == 0 and t.name == name
    assert sorted((p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) for p in t.partitions) == \
        [(i, 0, [0], [0]) for i in range(3)]
    if v >= 1:
        assert resp.controller_id == 0 and t.is_internal is False
    if v >= 2:
        assert resp.cluster_id
    if v >= 7:
        assert all(p.leader_epoch >= 0 for p in t.partitions)
    if v >= 10:
        assert t.topic_id.int != 0
    # an unknown topic without auto-creation
    missing = client.request(MetadataRequest[v](topics=[MetadataRequest.MetadataRequestTopic(name=name + "-none")],
                                                **kwargs))
    expected = 3 if v >= 4 else 5   # v<4 always auto-creates: LEADER_NOT_AVAILABLE on first sight
    assert missing.topics[0].error_code == expected


@pytest.mark.parametrize("v", versions(0))
def test_produce_and_fetch_each_produce_version(client: RawClient, v: int) -> None:
    name = f"sweep-produce-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 1).error_code == 0
    P = ProduceRequest.TopicProduceData
    batch = build_batch([Rec(b"k", b"v%d" % v), Rec(None, b"second")])
    topic_kwargs = {"topic_id": _topic_id(client, name)} if v >= 13 else {"name": name}
    for expected_base in (0, 2):
        resp = client.request(ProduceRequest[v](
            transactional_id=None, acks=-1, timeout_ms=5000,
            topic_data=[P(partition_data=[P.PartitionProduceData(index=0, records=batch)], **topic_kwargs)]))
        (pr,) = resp.responses[0].partition_responses
        assert pr.error_code == 0 and pr.base_offset == expected_base
        if v >= 5:
            assert pr.log_start_offset == 0
    pd = client.fetch(name, 0, 0, version=12)
    assert [(r.offset, r.key, r.value) for r in parse_records(pd.records).records] == \
        [(0, b"k", b"v%d" % v), (1, None, b"second"), (2, b"k", b"v%d" % v), (3, None, b"second")]


@pytest.mark.parametrize("v", versions(1))
def test_fetch_each_version(client: RawClient, v: int) -> None:
    name = f"sweep-fetch-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 1).error_code == 0
    assert client.produce(name, 0, build_batch([Rec(b"a", b"1"), Rec(b"b", b"2")]), version=12).error_code == 0
    T = FetchRequest.FetchTopic
    tkw = {"topic_id": _topic_id(client, name)} if v >= 13 else {"topic": name}
    resp = client.request(FetchRequest[v](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[T(partitions=[T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=1,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=1 << 20)], **tkw)],
        forgotten_topics_data=[], rack_id=""))
    if v >= 7:
        assert resp.error_code == 0 and resp.session_id == 0
    (t,) = resp.responses
    if v >= 13:
        assert t.topic_id == tkw["topic_id"]
    else:
        assert t.topic == name
    (p,) = t.partitions
    assert p.error_code == 0 and p.high_watermark == 2
    if v >= 4:
        assert p.last_stable_offset == 2
    if v >= 5:
        assert p.log_start_offset == 0
    if v >= 4:
        recs = parse_records(p.records).records
        # whole batches are served: the batch holding offset 1 starts at 0
        assert [(r.offset, r.value) for r in recs] == [(0, b"1"), (1, b"2")]
    else:
        # down-converted to magic 0 (v0-1) or 1 (v2-3), one message per record of the uncompressed
        # batch, those before the fetch offset left out; padded to the stored batch's size
        magic = 1 if v >= 2 else 0
        got = [(m.offset, m.magic, m.key, m.value) for m in parse_legacy_records(p.records)]
        assert got == [(1, magic, b"b", b"2")]
    if v >= 13:
        unknown = client.request(FetchRequest[v](
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[T(topic_id=uuid.uuid4(), partitions=[T.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1024)])],
            forgotten_topics_data=[], rack_id=""))
        assert unknown.responses[0].partitions[0].error_code == 100  # UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("v", versions(2))
def test_list_offsets_each_version(client: RawClient, v: int) -> None:
    name = f"sweep-lo-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 1).error_code == 0
    recs = [Rec(b"k", b"x%d" % i, timestamp=BASE_TS + 10 * i) for i in range(5)]
    assert client.produce(name, 0, build_batch(recs), version=12).error_code == 0
    T = ListOffsetsRequest.ListOffsetsTopic

    def ask(ts: int):
        resp = client.request(ListOffsetsRequest[v](
            replica_id=-1, isolation_level=0, timeout_ms=5000,
            topics=[T(name=name, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                   timestamp=ts)])]))
        return resp.topics[0].partitions[0]

    if v == 0:   # old-style offsets: segment boundaries (one segment here) and the log end, newest first
        def ask_v0(ts: int, max_num: int = 10):
            p = client.request(ListOffsetsRequest[0](replica_id=-1, topics=[T(name=name, partitions=[
                T.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=max_num)])]))
            p = p.topics[0].partitions[0]
            return p.error_code, list(p.old_style_offsets)

        assert [ask_v0(-1), ask_v0(-1, 1), ask_v0(-2), ask_v0(1000), ask_v0(-3)] == \
            [(0, [5, 0]), (0, [5]), (0, [0]), (0, []), (35, [])]
        return
    assert (ask(-2).error_code, ask(-2).offset) == (0, 0)
    assert (ask(-1).error_code, ask(-1).offset) == (0, 5)
    p = ask(BASE_TS + 15)
    assert (p.error_code, p.offset, p.timestamp) == (0, 2, BASE_TS + 20)
    p = ask(BASE_TS + 3_600_000)
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)
    if v >= 7:
        p = ask(-3)
        assert (p.error_code, p.offset, p.timestamp) == (0, 4, BASE_TS + 40)
    else:
        assert ask(-3).error_code == 35  # UNSUPPORTED_VERSION
    if v >= 8:
        assert ask(-4).offset == 0


@pytest.mark.parametrize("v", versions(20))
def test_delete_topics_each_version(client: RawClient, v: int) -> None:
    name = f"sweep-del-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 1).error_code == 0
    if v >= 6:
        tid = _topic_id(client, name)
        req = DeleteTopicsRequest[v](topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=tid)],
                                     timeout_ms=5000)
    else:
        req = DeleteTopicsRequest[v](topic_names=[name], timeout_ms=5000)
    (r,) = client.request(req).responses
    assert r.error_code == 0 and r.name == name
    md = client.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=False))
    assert md.topics[0].error_code == 3
    if v >= 6:
        again = client.request(req).responses[0]
        assert again.error_code == 100  # UNKNOWN_TOPIC_ID
    else:
        assert client.request(req).responses[0].error_code == 3


@pytest.mark.parametrize("v", versions(22))
def test_init_producer_id_each_version(client: RawClient, v: int) -> None:
    seen = set()
    for _ in range(3):
        r = client.request(InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=60000))
        assert r.error_code == 0 and r.producer_epoch == 0 and r.producer_id >= 0
        seen.add(r.producer_id)
    assert len(seen) == 3
    # transactional ids: test_version_sweep_txn.py::test_init_producer_id_transactional_each_version


def test_metadata_naming_the_offsets_topic_creates_it(fresh_broker: BrokerProcess) -> None:
    """Only where auto-creation is allowed, as Kafka 3.9's AutoTopicCreationManager."""
    with RawClient(fresh_broker.bootstrap_servers) as c:
        refused = c.request(MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")], allow_auto_topic_creation=False))
        assert (refused.topics[0].error_code, refused.topics[0].is_internal) == (3, True)  # UNKNOWN_TOPIC_OR_PARTITION
        first = c.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")],
                                              allow_auto_topic_creation=True))
        assert first.topics[0].error_code == 5   # LEADER_NOT_AVAILABLE: just created

        def created() -> Any:
            again = c.request(MetadataRequest[12](
                topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")], allow_auto_topic_creation=False))
            (t,) = again.topics
            return t if t.error_code == 0 else None
        # the controller creates it asynchronously, as Kafka's does
        t = wait_until(created, what="__consumer_offsets created")
        assert t.is_internal is True and len(t.partitions) == 50


@pytest.mark.parametrize("v", versions(23))
def test_offset_for_leader_epoch_each_version_across_a_restart(tmp_path, v: int) -> None:
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest as R

    b = BrokerProcess(log_dir=tmp_path / "logs").start()
    try:
        name = "epochs"
        with RawClient(b.bootstrap_servers) as c:
            assert _create(c, name, 1).error_code == 0
            assert c.produce(name, 0, build_batch([Rec(b"k", b"a")] * 3), version=12).error_code == 0
        # A lone broker's restart keeps the leader epoch, as in Kafka: its new controller finds the
        # partition's leader (itself) alive again, so no election happens.
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            assert c.produce(name, 0, build_batch([Rec(b"k", b"b")] * 2), version=12).error_code == 0

            def ask(leader_epoch: int, current: int = -1):
                T = R.OffsetForLeaderTopic
                kw = {"replica_id": -1} if v >= 3 else {}
                resp = c.request(R[v](topics=[T(topic=name, partitions=[T.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=current, leader_epoch=leader_epoch)])], **kw))
                p = resp.topics[0].partitions[0]
                return p.error_code, p.leader_epoch, p.end_offset

            if v == 0:   # v0 answers end offsets only (the decoder's default for the epoch is -1)
                assert [ask(0), ask(1), ask(7)] == [(0, -1, 5), (0, -1, -1), (0, -1, -1)]
            else:
                assert ask(0) == (0, 0, 5)        # the latest epoch ends at the log end
                assert ask(1) == (0, -1, -1)      # an epoch newer than any known
                assert ask(7) == (0, -1, -1)
            if v >= 2:   # the client's current leader epoch is sent from v2
                assert ask(0, current=0) == (0, 0, 5)
                assert ask(0, current=5)[0] == 75  # UNKNOWN_LEADER_EPOCH: newer than the broker's
            T = R.OffsetForLeaderTopic
            kw = {"replica_id": -1} if v >= 3 else {}
            resp = c.request(R[v](topics=[T(topic="no-such-topic", partitions=[T.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])], **kw))
            assert resp.topics[0].partitions[0].error_code == 3
        assert (b.log_dir / f"{name}-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    finally:
        b.close()


# -- configs and admin APIs ------------------------------------------------------------------------

def _describe_topic(c: RawClient, name: str, v: int = 4, keys=None, synonyms: bool = True, docs: bool = False):
    from kafka.protocol.admin import DescribeConfigsRequest as DC
    kw = {"include_documentation": docs} if v >= 3 else {}
    resp = c.request(DC[v](resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=name,
                                                                 configuration_keys=keys)],
                           include_synonyms=synonyms, **kw))
    (r,) = resp.results
    return r


@pytest.mark.parametrize("v", versions(32))
def test_describe_configs_each_version(client: RawClient, v: int) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest as DC
    name = f"sweep-dc-{v}-{uuid.uuid4().hex[:6]}"
    assert client.create_topic(name, 1, configs={"retention.ms": "3600000"}).error_code == 0
    r = _describe_topic(client, name, v, keys=["retention.ms", "cleanup.policy", "no.such.key"], docs=True)
    assert (r.error_code, r.error_message, r.resource_type, r.resource_name) == (0, "", 2, name)
    got = {e.name: e for e in r.configs}
    assert sorted(got) == ["cleanup.policy", "retention.ms"]
    ret, cp = got["retention.ms"], got["cleanup.policy"]
    if v == 0:   # no sources or synonyms; IsDefault is never set by Kafka's ConfigHelper
        assert [(e.value, e.is_default, e.read_only, e.synonyms) for e in (ret, cp)] == \
            [("3600000", False, False, []), ("delete", False, False, [])]
    else:
        assert (ret.value, ret.config_source, ret.read_only, ret.is_sensitive) == ("3600000", 1, False, False)
        assert [(s.name, s.value, s.source) for s in ret.synonyms] == [("retention.ms", "3600000", 1)]
        assert (cp.value, cp.config_source) == ("delete", 5)
        assert [(s.name, s.value, s.source) for s in cp.synonyms] == [("log.cleanup.policy", "delete", 5)]
    if v >= 3:
        assert (ret.config_type, cp.config_type) == (5, 7)          # LONG, LIST
        assert ret.documentation.startswith("How long a segment is kept")
    # without synonyms asked for, none are sent; every topic config is listed without keys
    r = _describe_topic(client, name, v, synonyms=False)
    assert len(r.configs) == 36 and all(e.synonyms == [] for e in r.configs)
    if v >= 3:
        assert all(e.documentation is None for e in r.configs)
    assert _describe_topic(client, name + "-missing", v).error_code == 3      # UNKNOWN_TOPIC_OR_PARTITION
    bad = _describe_topic(client, "bad/name", v)
    assert (bad.error_code, bad.error_message) == (17, "Topic name is invalid: 'bad/name' contains one or more "
                                                       "characters other than ASCII alphanumerics, '.', '_' and '-'")
    kw = {"include_documentation": False} if v >= 3 else {}
    resp = client.request(DC[v](resources=[
        DC.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=["num.partitions"]),
        DC.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
        DC.DescribeConfigsResource(resource_type=4, resource_name="7", configuration_keys=None)],
        include_synonyms=True, **kw))
    broker, default, other = resp.results
    (np_,) = broker.configs
    if v == 0:
        assert (broker.error_code, np_.name, np_.value, np_.is_default, np_.read_only, np_.synonyms) == \
            (0, "num.partitions", "3", False, True, [])
    else:
        assert (broker.error_code, np_.name, np_.value, np_.config_source, np_.read_only) == \
            (0, "num.partitions", "3", 4, True)
        assert [(s.name, s.value, s.source) for s in np_.synonyms] == \
            [("num.partitions", "3", 4), ("num.partitions", "1", 5)]
    assert (default.error_code, default.error_message, default.configs) == (0, "", [])   # no dynamic defaults set
    assert (other.error_code, other.error_message) == (42, "Unexpected broker id, expected 0 or empty string, "
                                                           "but received 7")


@pytest.mark.parametrize("v", versions(33))
def test_alter_configs_each_version(client: RawClient, v: int) -> None:
    from kafka.protocol.admin import AlterConfigsRequest as AC
    name = f"sweep-ac-{v}-{uuid.uuid4().hex[:6]}"
    assert client.create_topic(name, 1, configs={"retention.ms": "3600000"}).error_code == 0
    R = AC.AlterConfigsResource

    def alter(configs: dict, rtype: int = 2, rname: str = name, validate_only: bool = False):
        resp = client.request(AC[v](resources=[R(resource_type=rtype, resource_name=rname, configs=[
            R.AlterableConfig(name=k, value=val) for k, val in configs.items()])], validate_only=validate_only))
        (r,) = resp.responses
        assert (r.resource_type, r.resource_name) == (rtype, rname)
        return r.error_code, r.error_message

    assert alter({"segment.ms": "60000"}, validate_only=True) == (0, None)
    assert {e.name: e.value for e in _describe_topic(client, name).configs}["segment.ms"] == "604800000"
    assert alter({"segment.ms": "60000"}) == (0, None)
    got = {e.name: (e.value, e.config_source) for e in _describe_topic(client, name).configs}
    # the whole set is replaced: retention.ms falls back to the broker default
    assert (got["segment.ms"], got["retention.ms"]) == (("60000", 1), ("604800000", 5))
    # Kafka 3.9's ZkAdminManager names the resource (checked in tests/differential)
    assert alter({"segment.ms": "0"}) == (40, f"Invalid config value for resource ConfigResource(type=TOPIC, "
                                              f"name='{name}'): Invalid value 0 for configuration segment.ms: "
                                              "Value must be at least 1")
    assert alter({"no.such.config": "1"}) == (40, "Unknown topic config name: no.such.config")
    assert alter({"segment.ms": "1"}, rname=name + "-missing") == (3, f"The topic '{name}-missing' does not exist.")
    assert alter({"num.partitions": "5"}, rtype=4, rname="0") == (
        42, "Cannot update these configs dynamically: Set(num.partitions)")
    # a dynamic broker config: validated only, then set and cleared (the whole set is replaced)
    assert alter({"log.cleaner.backoff.ms": "20000"}, rtype=4, rname="0", validate_only=True) == (0, None)
    assert alter({"log.cleaner.backoff.ms": "-1"}, rtype=4, rname="0") == (
        42, "Invalid value -1 for configuration log.cleaner.backoff.ms: Value must be at least 0")
    assert alter({"log.cleaner.backoff.ms": "20000"}, rtype=4, rname="0") == (0, None)
    assert alter({}, rtype=4, rname="0") == (0, None)


@pytest.mark.parametrize("v", versions(44))
def test_incremental_alter_configs_each_version(client: RawClient, v: int) -> None:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as IAC
    name = f"sweep-iac-{v}-{uuid.uuid4().hex[:6]}"
    assert client.create_topic(name, 1, configs={"retention.ms": "3600000"}).error_code == 0
    R = IAC.AlterConfigsResource

    def alter(ops: list, rtype: int = 2, rname: str = name):
        resp = client.request(IAC[v](resources=[R(resource_type=rtype, resource_name=rname, configs=[
            R.AlterableConfig(name=k, config_operation=op, value=val) for k, op, val in ops])], validate_only=False))
        (r,) = resp.responses
        return r.error_code, r.error_message

    assert alter([("cleanup.policy", 2, "compact"), ("segment.bytes", 0, "100000")]) == (0, None)
    got = {e.name: (e.value, e.config_source) for e in _describe_topic(client, name).configs}
    # incremental: retention.ms stays
    assert (got["cleanup.policy"], got["segment.bytes"], got["retention.ms"]) ==         (("delete,compact", 1), ("100000", 1), ("3600000", 1))
    assert alter([("cleanup.policy", 3, "delete"), ("retention.ms", 1, None)]) == (0, None)
    got = {e.name: (e.value, e.config_source) for e in _describe_topic(client, name).configs}
    assert (got["cleanup.policy"], got["retention.ms"]) == (("compact", 1), ("604800000", 5))
    assert alter([("retention.ms", 2, "5")]) == (40, "Config value append is not allowed for config key: retention.ms")
    assert alter([("retention.ms", 0, None)]) == (42, "Null value not supported for : retention.ms")
    assert alter([("log.retention.hours", 0, "1")], rtype=4, rname="0") == (
        42, "Cannot update these configs dynamically: Set(log.retention.hours)")
    assert alter([("log.retention.ms", 2, "1")], rtype=4, rname="0") == (
        40, "Config value append is not allowed for config key: log.retention.ms")
    assert alter([("log.cleaner.backoff.ms", 0, "20000")], rtype=4, rname="") == (0, None)
    assert alter([("log.cleaner.backoff.ms", 1, None)], rtype=4, rname="") == (0, None)


@pytest.mark.parametrize("v", versions(37))
def test_create_partitions_each_version(client: RawClient, v: int) -> None:
    from kafka.protocol.admin import CreatePartitionsRequest as CP
    name = f"sweep-cp-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 1).error_code == 0
    T = CP.CreatePartitionsTopic

    def grow(count: int, assignments=None, validate_only: bool = False):
        resp = client.request(CP[v](topics=[T(name=name, count=count, assignments=assignments)],
                                    timeout_ms=5000, validate_only=validate_only))
        (r,) = resp.results
        assert r.name == name
        return r.error_code, r.error_message

    assert grow(3, validate_only=True) == (0, None)
    assert grow(3, assignments=[T.CreatePartitionsAssignment(broker_ids=[0])] * 2) == (0, None)
    md = client.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=False))
    assert sorted((p.partition_index, p.leader_id) for p in md.topics[0].partitions) == [(0, 0), (1, 0), (2, 0)]
    assert grow(2) == (37, "Topic currently has 3 partitions, which is higher than the requested 2.")
    assert grow(3) == (37, "Topic already has 3 partitions.")


@pytest.mark.parametrize("v", versions(21))
def test_delete_records_each_version(client: RawClient, v: int) -> None:
    from kafka.protocol.admin import DeleteRecordsRequest as DR
    name = f"sweep-dr-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 1).error_code == 0
    assert client.produce(name, 0, build_batch([Rec(b"k", b"%d" % i) for i in range(5)]), version=12).error_code == 0
    T = DR.DeleteRecordsTopic

    def delete(offset: int, partition: int = 0):
        resp = client.request(DR[v](topics=[T(name=name, partitions=[
            T.DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=5000))
        (t,) = resp.topics
        (p,) = t.partitions
        assert (t.name, p.partition_index) == (name, partition)
        return p.error_code, p.low_watermark

    assert delete(3) == (0, 3)
    assert client.list_offset(name, 0, -2).offset == 3
    assert delete(2) == (0, 3)        # never moves backwards
    assert delete(6) == (1, -1)       # above the high watermark: OFFSET_OUT_OF_RANGE
    assert delete(-1) == (0, 5)       # -1: up to the high watermark
    assert delete(0, partition=4) == (3, -1)


@pytest.mark.parametrize("v", versions(60))
def test_describe_cluster_each_version(broker: BrokerProcess, client: RawClient, v: int) -> None:
    from kafka.protocol.admin import DescribeClusterRequest as DCR
    kw = {"endpoint_type": 1} if v >= 1 else {}
    if v >= 2:
        kw["include_fenced_brokers"] = False
    r = client.request(DCR[v](include_cluster_authorized_operations=True, **kw))
    assert (r.error_code, r.error_message, r.controller_id) == (0, None, 0)
    assert r.cluster_id == client.request(MetadataRequest[12](topics=[], allow_auto_topic_creation=False)).cluster_id
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [(0, "127.0.0.1", broker.port, None)]
    assert r.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    if v >= 2:
        assert r.brokers[0].is_fenced is False
    r = client.request(DCR[v](include_cluster_authorized_operations=False, **kw))
    assert r.authorized_operations is None                 # INT32_MIN: not asked for
    if v >= 1:
        kw["endpoint_type"] = 2
        r = client.request(DCR[v](include_cluster_authorized_operations=False, **kw))
        assert (r.error_code, r.error_message, r.brokers) == (
            114, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER", [])
        kw["endpoint_type"] = 9
        assert client.request(DCR[v](include_cluster_authorized_operations=False, **kw)).error_code == 115


@pytest.mark.parametrize("v", versions(35))
def test_describe_log_dirs_each_version(broker: BrokerProcess, client: RawClient, v: int) -> None:
    from kafka.protocol.admin import DescribeLogDirsRequest as DL
    name = f"sweep-dl-{v}-{uuid.uuid4().hex[:6]}"
    assert _create(client, name, 2).error_code == 0
    batch = build_batch([Rec(b"k", b"v" * 100)])
    assert client.produce(name, 1, batch, version=12).error_code == 0
    T = DL.DescribableLogDirTopic
    resp = client.request(DL[v](topics=[T(topic=name, partitions=[0, 1, 7])]))
    if v >= 3:
        assert resp.error_code == 0
    (d,) = resp.results
    assert (d.error_code, d.log_dir) == (0, str(broker.log_dir.absolute()))
    (t,) = d.topics
    assert t.name == name
    assert [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key) for p in t.partitions] ==         [(0, 0, 0, False), (1, len(batch), 0, False)]
    if v >= 4:
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
    if v >= 5:
        assert d.is_cordoned is False
    everything = client.request(DL[v](topics=None)).results[0]
    assert {(t.name, p.partition_index) for t in everything.topics for p in t.partitions} >= {(name, 0), (name, 1)}
