"""A handler that fails inside a real broker process is answered, not a dropped connection.

Kafka's KafkaApis catches any Throwable from a handler, logs "Unexpected error handling request"
at ERROR and answers request.getErrorResponse(e): UNKNOWN_SERVER_ERROR (-1) in that API's layout,
and the connection keeps serving. The broker here is started by tests/support/faulty_broker.py,
a test-only launcher whose wrapped handlers raise for requests with one client id; every test
sends such a request, checks the exact error response, then sends the same request with another
client id on the SAME connection and sees it served.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.consumer import JoinGroupRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest

from tests.harness import BrokerProcess
from tests.integration.groups_util import find_coordinator
from tests.integration.util import RawClient, Rec, build_batch, create_topic, parse_records, wait_until
from tests.support.faulty_broker import FAULT_CLIENT_ID, FAULT_MESSAGE

LAUNCHER = Path(__file__).resolve().parents[1] / "support" / "faulty_broker.py"
TOPIC = "faults"
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_SERVER_ERROR_MESSAGE = "The server experienced an unexpected error when processing the request."


class FaultyBroker(BrokerProcess):
    """The harness's broker process, launched through the fault-injecting launcher."""

    def command(self) -> list[str]:
        args = super().command()
        assert args[1:3] == ["-m", "kafkalite"]
        return [sys.executable, str(LAUNCHER)] + args[3:]


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyBroker]:
    b = FaultyBroker(log_dir=tmp_path_factory.mktemp("faulty") / "logs",
                     overrides={"num.partitions": "1", "auto.create.topics.enable": "false",
                                "group.initial.rebalance.delay.ms": "0"})
    b.start()
    create_topic(b.bootstrap_servers, TOPIC)
    try:
        yield b
    finally:
        b.close()


def faulted(c: RawClient, req: Any) -> Any:
    """`req` sent with the fault-injecting client id: the handler raises inside the broker."""
    normal = c.client_id
    c.client_id = FAULT_CLIENT_ID
    try:
        return c.request(req)
    finally:
        c.client_id = normal


def error_logged(b: BrokerProcess, api_name: str, version: int) -> list[str]:
    """The broker's ERROR line for the failed request and the traceback after it."""
    lines = b.stderr_lines
    for i, line in enumerate(lines):
        if f"Unexpected error handling request {api_name} v{version} " in line and FAULT_CLIENT_ID in line:
            return lines[i:i + 40]
    return []


def assert_logged(b: BrokerProcess, api_name: str, version: int, api_key: int) -> None:
    block = wait_until(lambda: error_logged(b, api_name, version), what=f"{api_name} error logged")
    assert "ERROR" in block[0]
    assert "Traceback (most recent call last):" in block[1]
    assert f"RuntimeError: {FAULT_MESSAGE} in api {api_key} v{version}" in block


def test_produce_answered_and_nothing_appended(faulty: FaultyBroker) -> None:
    batch = build_batch([Rec(b"k", b"first")])
    with RawClient(faulty.bootstrap_servers) as c:
        normal = c.client_id
        c.client_id = FAULT_CLIENT_ID
        p = c.produce(TOPIC, 0, batch, version=9)
        assert (p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset,
                p.record_errors, p.error_message) == (0, UNKNOWN_SERVER_ERROR, -1, -1, -1, [], None)
        c.client_id = normal
        # the same connection serves the next request: the faulted batch was never appended
        p = c.produce(TOPIC, 0, build_batch([Rec(b"k", b"second")]), version=9)
        assert (p.error_code, p.base_offset) == (0, 0)
        parsed, hw = c.fetch_all(TOPIC, 0)
        assert hw == 1 and [(r.offset, r.value) for r in parsed.records] == [(0, b"second")]
    assert_logged(faulty, "Produce", 9, 0)


def test_acks_0_produce_closes_the_connection(faulty: FaultyBroker) -> None:
    # ProduceRequest.getErrorResponse is null for acks=0: Kafka closes the connection
    with RawClient(faulty.bootstrap_servers, client_id=FAULT_CLIENT_ID) as c:
        c.produce(TOPIC, 0, build_batch([Rec(b"k", b"lost")]), acks=0, version=9)
        assert c.wait_closed(timeout=5.0)
    with RawClient(faulty.bootstrap_servers) as c:
        _parsed, hw = c.fetch_all(TOPIC, 0)
        assert hw == 1


def test_fetch_every_partition_carries_the_error(faulty: FaultyBroker) -> None:
    with RawClient(faulty.bootstrap_servers) as c:
        resp = faulted(c, c.fetch_request(TOPIC, 0, 0, version=12))
        assert (resp.error_code, resp.session_id) == (UNKNOWN_SERVER_ERROR, 0)
        (t,) = resp.responses
        (p,) = t.partitions
        assert (t.topic, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                p.log_start_offset, p.aborted_transactions) == (TOPIC, 0, UNKNOWN_SERVER_ERROR, -1, -1, -1, None)
        assert not p.records
        pd = c.fetch(TOPIC, 0, 0, version=12)
        assert pd.error_code == 0 and pd.high_watermark >= 1 and parse_records(pd.records).records
    assert_logged(faulty, "Fetch", 12, 1)


def test_metadata_echoes_topics(faulty: FaultyBroker) -> None:
    with RawClient(faulty.bootstrap_servers) as c:
        req = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        resp = faulted(c, req)
        assert (resp.brokers, resp.controller_id, resp.cluster_id) == ([], -1, None)
        assert [(t.name, t.error_code, t.is_internal, t.partitions) for t in resp.topics] == \
            [(TOPIC, UNKNOWN_SERVER_ERROR, False, [])]
        ok = c.metadata([TOPIC], version=12)
        assert [b.node_id for b in ok.brokers] == [0] and ok.topics[0].error_code == 0
    assert_logged(faulty, "Metadata", 12, 3)


def test_join_group(faulty: FaultyBroker) -> None:
    req = JoinGroupRequest[9](
        group_id="g-fault", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    with RawClient(faulty.bootstrap_servers) as c:
        find_coordinator(c, "g-fault")
        resp = faulted(c, req)
        assert (resp.error_code, resp.generation_id, resp.protocol_type, resp.protocol_name, resp.leader,
                resp.member_id, resp.members) == (UNKNOWN_SERVER_ERROR, -1, None, None, "", "", [])
        # served on the same connection: a new member is told its id (KIP-394)
        resp = c.request(req)
        assert resp.error_code == 79 and resp.member_id.startswith(c.client_id + "-")
    assert_logged(faulty, "JoinGroup", 9, 11)


def test_find_coordinator_per_key(faulty: FaultyBroker) -> None:
    req = FindCoordinatorRequest[4](key_type=0, coordinator_keys=["ga", "gb"])
    with RawClient(faulty.bootstrap_servers) as c:
        resp = faulted(c, req)
        assert [(k.key, k.error_code, k.error_message, k.node_id, k.host, k.port) for k in resp.coordinators] \
            == [(key, UNKNOWN_SERVER_ERROR, UNKNOWN_SERVER_ERROR_MESSAGE, -1, "", -1) for key in ("ga", "gb")]
        find_coordinator(c, "ga")
        resp = c.request(req)
        assert [(k.key, k.error_code, k.node_id) for k in resp.coordinators] == [("ga", 0, 0), ("gb", 0, 0)]
    assert_logged(faulty, "FindCoordinator", 4, 10)


def test_offset_fetch_per_group(faulty: FaultyBroker) -> None:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    req = OffsetFetchRequest[8](groups=[G(group_id="g1", topics=None), G(group_id="g2", topics=None)],
                                require_stable=False)
    with RawClient(faulty.bootstrap_servers) as c:
        find_coordinator(c, "g1")
        find_coordinator(c, "g2")
        resp = faulted(c, req)
        assert [(g.group_id, g.error_code, g.topics) for g in resp.groups] == \
            [("g1", UNKNOWN_SERVER_ERROR, []), ("g2", UNKNOWN_SERVER_ERROR, [])]
        resp = c.request(req)
        assert [(g.group_id, g.error_code, g.topics) for g in resp.groups] == [("g1", 0, []), ("g2", 0, [])]
    assert_logged(faulty, "OffsetFetch", 8, 9)


def test_describe_configs_with_errors_default_message(faulty: FaultyBroker) -> None:
    R = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest[4](resources=[R(resource_type=2, resource_name=TOPIC,
                                                 configuration_keys=["cleanup.policy"])],
                                    include_synonyms=False, include_documentation=False)
    with RawClient(faulty.bootstrap_servers) as c:
        resp = faulted(c, req)
        assert [(r.resource_type, r.resource_name, r.error_code, r.error_message, r.configs)
                for r in resp.results] == [(2, TOPIC, UNKNOWN_SERVER_ERROR, UNKNOWN_SERVER_ERROR_MESSAGE, [])]
        resp = c.request(req)
        (r,) = resp.results
        assert r.error_code == 0 and [(x.name, x.value) for x in r.configs] == [("cleanup.policy", "delete")]
    assert_logged(faulty, "DescribeConfigs", 4, 32)


def test_init_producer_id(faulty: FaultyBroker) -> None:
    req = InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                   producer_id=-1, producer_epoch=-1)
    with RawClient(faulty.bootstrap_servers) as c:
        resp = faulted(c, req)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (UNKNOWN_SERVER_ERROR, -1, -1)
        resp = c.request(req)
        assert resp.error_code == 0 and resp.producer_id >= 0 and resp.producer_epoch == 0
    assert_logged(faulty, "InitProducerId", 4, 22)


def test_many_faults_on_one_connection(faulty: FaultyBroker) -> None:
    """Failures do not accumulate: one connection alternates failing and served requests."""
    with RawClient(faulty.bootstrap_servers) as c:
        for i in range(20):
            p = (faulted if i % 2 == 0 else RawClient.request)(c, c.fetch_request(TOPIC, 0, 0, version=12))
            assert p.error_code == (UNKNOWN_SERVER_ERROR if i % 2 == 0 else 0)
    assert faulty.proc is not None and faulty.proc.poll() is None
