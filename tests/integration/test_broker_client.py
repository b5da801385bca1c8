"""BrokerConnection (kafkalite/network/broker_client.py) against a kafkalite broker process:
exact answers to ApiVersions, Metadata and CreateTopics, a stopped broker, reconnecting after a
restart. (Timeouts, wrong correlation ids and close() against in-process fake servers are in
tests/unit/test_broker_client.py.)"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kafkalite.network.broker_client import BrokerConnection
from tests.harness import BrokerProcess
from tests.integration.util import RawClient

TOPIC_ALREADY_EXISTS = 36


def _create_topic(name: str, partitions: int) -> Any:
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=1,
                                         assignments=[], configs=[])],
                               timeout_ms=10000, validate_only=False)


def _metadata(name: str) -> Any:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                           allow_auto_topic_creation=False)


def test_api_versions_metadata_create_topics(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap_servers) as raw:
        advertised = raw.api_versions()

    async def run() -> None:
        conn = BrokerConnection("127.0.0.1", broker.port, client_id="controller-test")
        try:
            # v3: flexible request header v2; the response header stays v0 for ApiVersions
            v3 = await conn.send(ApiVersionsRequest(client_software_name="kafkalite",
                                                    client_software_version="test"), 3)
            assert v3.version == 3 and v3.error_code == 0
            assert {k.api_key: (k.min_version, k.max_version) for k in v3.api_keys} == advertised
            assert advertised[18] == (0, 4)
            v0 = await conn.send(ApiVersionsRequest(), 0)
            assert v0.version == 0 and v0.error_code == 0
            assert {k.api_key: (k.min_version, k.max_version) for k in v0.api_keys} == advertised

            created = await conn.send(_create_topic(topic_name, 2), 7)
            assert len(created.topics) == 1
            result = created.topics[0]
            assert (result.name, result.error_code, result.error_message, result.num_partitions,
                    result.replication_factor) == (topic_name, 0, None, 2, 1)
            assert result.topic_id is not None

            md = await conn.send(_metadata(topic_name), 12)
            assert [(b.node_id, b.host, b.port) for b in md.brokers] == \
                [(md.controller_id, "127.0.0.1", broker.port)]
            (topic,) = md.topics
            assert (topic.error_code, topic.name, topic.topic_id, topic.is_internal) == \
                (0, topic_name, result.topic_id, False)
            node = md.controller_id
            assert [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes,
                     p.isr_nodes) for p in sorted(topic.partitions, key=lambda p: p.partition_index)] \
                == [(0, 0, node, 0, [node], [node]), (1, 0, node, 0, [node], [node])]

            md1 = await conn.send(_metadata(topic_name), 1)  # non-flexible request/response headers
            assert md1.version == 1
            assert [(t.name, t.error_code, len(t.partitions)) for t in md1.topics] == [(topic_name, 0, 2)]

            again = await conn.send(_create_topic(topic_name, 2), 5)
            assert [(t.name, t.error_code) for t in again.topics] == [(topic_name, TOPIC_ALREADY_EXISTS)]

            # concurrent sends on one connection are serialised: every caller gets its own answer
            answers = await asyncio.gather(*(conn.send(_metadata(topic_name), v) for v in range(1, 13)))
            assert [a.version for a in answers] == list(range(1, 13))
            assert all([t.name for t in a.topics] == [topic_name] for a in answers)
        finally:
            await conn.close()

    asyncio.run(run())


def test_stopped_broker_then_restart(fresh_broker: BrokerProcess) -> None:
    port = fresh_broker.port
    assert port is not None

    async def send(conn: BrokerConnection) -> Any:
        return await conn.send(ApiVersionsRequest(), 0)

    async def before_stop(conn: BrokerConnection) -> None:
        assert (await send(conn)).error_code == 0
        assert conn.connected

    async def while_stopped(conn: BrokerConnection) -> None:
        with pytest.raises(ConnectionError):  # the open connection breaks
            await send(conn)
        assert not conn.connected
        with pytest.raises(ConnectionError):  # a new one is refused
            await send(conn)

    async def after_restart(conn: BrokerConnection) -> None:
        assert (await send(conn)).error_code == 0  # reconnected lazily on this send
        assert conn.connected
        await conn.close()
        with pytest.raises(ConnectionError):
            await send(conn)

    # one event loop per phase: the broker is stopped/restarted synchronously in between
    loop = asyncio.new_event_loop()
    try:
        conn = BrokerConnection("127.0.0.1", port, client_id="controller-test",
                                request_timeout_ms=10000)
        loop.run_until_complete(before_stop(conn))
        fresh_broker.stop()
        loop.run_until_complete(while_stopped(conn))
        fresh_broker.start()
        assert fresh_broker.port == port
        loop.run_until_complete(after_restart(conn))
    finally:
        loop.close()
