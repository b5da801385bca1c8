"""Metadata for all topics is encoded once per metadata change and shared: the cached answer must
be byte-identical to the response built and encoded per request (as before the cache), for every
version, listener and flag, and must follow every change of the metadata cache."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from kafkalite.cluster.metadata_cache import (BrokerEndpoint, BrokerInfo, MetadataCache,
                                              UpdateMetadataPartitionState)
from kafkalite.network.socket_server import ConnectionInfo
from kafkalite.protocol.header import RequestHeader
from kafkalite.server.encoded_response import EncodedResponse
from kafkalite.server.handlers import metadata
from kafkalite.server.kafka_apis import _encode
from kafkalite.server.request_context import RequestContext

CORRELATION_ID = 4242
TOPIC_OPS = metadata.TOPIC_AUTHORIZED_OPERATIONS
CLUSTER_OPS = metadata.CLUSTER_AUTHORIZED_OPERATIONS


def broker(b: int, listeners: tuple[str, ...] = ("PLAINTEXT", "INTERNAL")) -> BrokerInfo:
    return BrokerInfo(b, tuple(BrokerEndpoint(name, f"h{b}", 9000 + 10 * b + i) for i, name in enumerate(listeners)),
                      rack=f"r{b}" if b % 2 else None)


def state(topic: str, p: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]
          ) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(topic, p, 1, leader, 5 + p, isr, 3, replicas, offline_replicas=(3,) if p == 2 else ())


@pytest.fixture
def cache() -> MetadataCache:
    c = MetadataCache("cluster-x", 1)
    states = [state("alpha", p, 1 + p % 2, (1, 2), (1, 2)) for p in range(3)]
    states += [state("beta", 0, 3, (3, 1), (3,)),            # leader not alive: LEADER_NOT_AVAILABLE
               state("__consumer_offsets", 0, 1, (1,), (1,)),
               state("gamma", 1, 2, (2, 3, 1), (2, 1)),       # v0: replica 3 not alive
               state("gamma", 0, 1, (1,), (1,))]
    c.update_metadata(2, 1, [broker(1), broker(2)], states,
                      {"alpha": uuid.UUID(int=7), "beta": uuid.UUID(int=8), "gamma": uuid.UUID(int=0)})
    return c


def services_for(cache: MetadataCache) -> SimpleNamespace:
    return SimpleNamespace(metadata_cache=cache, config=SimpleNamespace(auto_create_topics_enable=False))


def request(v: int, include_topic_ops: bool, include_cluster_ops: bool) -> Any:
    return MetadataRequest[v](topics=[] if v == 0 else None, allow_auto_topic_creation=False,
                              include_cluster_authorized_operations=include_cluster_ops,
                              include_topic_authorized_operations=include_topic_ops)


def handle(spec: Any, v: int, req: Any, listener: str) -> Any:
    decoded = MetadataRequest[v].decode(req.encode(), version=v)
    ctx = RequestContext(RequestHeader(3, v, CORRELATION_ID, "client"), ConnectionInfo("c", listener, "127.0.0.1", 1))
    return asyncio.run(spec.handler(ctx, decoded))


def reference(cache: MetadataCache, v: int, listener: str, topic_ops: bool, cluster_ops: bool,
              names: list[str] | None = None) -> bytes:
    """The response built and encoded per request, as the handler did before the cache (for
    all topics, or for `names`, all existing)."""
    Resp = MetadataResponse[v]
    T = Resp.MetadataResponseTopic
    P = T.MetadataResponsePartition
    topics = []
    for name in cache.topic_names() if names is None else names:
        info = cache.topic(name)
        assert info is not None
        metas = cache.partition_metadata(name, listener, error_unavailable_endpoints=v == 0,
                                         error_unavailable_listeners=v >= 6) or []
        topics.append(T(error_code=0, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
                        authorized_operations=TOPIC_OPS if topic_ops and v >= 8 else None,
                        partitions=[P(error_code=m.error, partition_index=m.partition, leader_id=m.leader_id,
                                      leader_epoch=m.leader_epoch, replica_nodes=list(m.replicas),
                                      isr_nodes=list(m.isr), offline_replicas=list(m.offline_replicas))
                                    for m in metas]))
    brokers = [Resp.MetadataResponseBroker(node_id=b.broker_id, host=ep.host, port=ep.port, rack=b.rack)
               for b in cache.alive_brokers() for ep in [b.endpoint(listener)] if ep is not None]
    kwargs: dict[str, Any] = dict(throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
                                  controller_id=cache.controller_id, topics=topics, error_code=0)
    if 8 <= v <= 10:
        kwargs["authorized_operations"] = CLUSTER_OPS if cluster_ops else None
    resp = Resp(**kwargs)
    encoded = _encode(resp, v, CORRELATION_ID)
    assert encoded is not None
    return encoded


@pytest.mark.parametrize("v", range(14))
@pytest.mark.parametrize("listener", ["PLAINTEXT", "INTERNAL", "MISSING"])
def test_cached_answer_is_byte_identical(cache: MetadataCache, v: int, listener: str) -> None:
    spec = metadata.make(services_for(cache))   # type: ignore[arg-type]
    for topic_ops in (False, True):
        for cluster_ops in (False, True):
            first = handle(spec, v, request(v, topic_ops, cluster_ops), listener)
            assert isinstance(first, EncodedResponse)
            expected = reference(cache, v, listener, topic_ops, cluster_ops)
            assert _encode(first, v, CORRELATION_ID) == expected
            # a second request is answered from the cache: the very same encoded body
            again = handle(spec, v, request(v, topic_ops, cluster_ops), listener)
            assert again is first
            decoded = MetadataResponse[v].decode(expected[4:], header=True)
            assert sorted(t.name for t in decoded.topics) == ["__consumer_offsets", "alpha", "beta", "gamma"]


def test_every_cache_change_is_seen(cache: MetadataCache) -> None:
    spec = metadata.make(services_for(cache))   # type: ignore[arg-type]
    v = 12
    before = handle(spec, v, request(v, False, False), "PLAINTEXT")
    # a new topic
    cache.update_metadata(2, 1, [broker(1), broker(2)], [state("delta", 0, 2, (2,), (2,))], {"delta": uuid.UUID(int=9)})
    after_create = handle(spec, v, request(v, False, False), "PLAINTEXT")
    assert after_create is not before
    assert _encode(after_create, v, CORRELATION_ID) == reference(cache, v, "PLAINTEXT", False, False)
    names = [t.name for t in MetadataResponse[v].decode(_encode(after_create, v, CORRELATION_ID)[4:],
                                                        header=True).topics]
    assert sorted(names) == ["__consumer_offsets", "alpha", "beta", "delta", "gamma"]
    # a broker leaves: the leaders it had become unavailable
    cache.update_metadata(1, 2, [broker(1)], [])
    after_broker = handle(spec, v, request(v, False, False), "PLAINTEXT")
    resp = MetadataResponse[v].decode(_encode(after_broker, v, CORRELATION_ID)[4:], header=True)
    assert resp.controller_id == 1 and [b.node_id for b in resp.brokers] == [1]
    alpha = next(t for t in resp.topics if t.name == "alpha")
    assert [(p.partition_index, p.error_code, p.leader_id) for p in alpha.partitions] == [(0, 0, 1), (1, 5, -1), (2, 0, 1)]
    # a deletion (leader -2) removes the topic from the answer
    cache.update_metadata(1, 2, [broker(1)], [state("delta", 0, -2, (2,), (2,))])
    after_delete = handle(spec, v, request(v, False, False), "PLAINTEXT")
    assert _encode(after_delete, v, CORRELATION_ID) == reference(cache, v, "PLAINTEXT", False, False)
    assert "delta" not in [t.name for t in MetadataResponse[v].decode(
        _encode(after_delete, v, CORRELATION_ID)[4:], header=True).topics]


def test_named_topics_are_answered_per_request(cache: MetadataCache) -> None:
    spec = metadata.make(services_for(cache))   # type: ignore[arg-type]
    v = 12
    req = MetadataRequest[v](topics=[MetadataRequest[v].MetadataRequestTopic(name=n, topic_id=uuid.UUID(int=0))
                                     for n in ("beta", "nope")],
                             allow_auto_topic_creation=False, include_topic_authorized_operations=True)
    resp = handle(spec, v, req, "PLAINTEXT")
    assert not isinstance(resp, EncodedResponse)
    assert [(t.name, t.error_code) for t in resp.topics] == [("beta", 0), ("nope", 3)]
    assert [(p.partition_index, p.error_code, p.leader_id) for p in resp.topics[0].partitions] == [(0, 5, -1)]


def named_request(v: int, names: list[str], include_topic_ops: bool) -> Any:
    R = MetadataRequest[v]
    if v >= 10:
        topics = [R.MetadataRequestTopic(name=n, topic_id=uuid.UUID(int=0)) for n in names]
    else:
        topics = [R.MetadataRequestTopic(name=n) for n in names]
    return R(topics=topics, allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
             include_topic_authorized_operations=include_topic_ops)


@pytest.mark.parametrize("v", range(1, 14))
@pytest.mark.parametrize("listener", ["PLAINTEXT", "MISSING"])
def test_named_existing_topics_are_spliced_byte_identical(cache: MetadataCache, v: int, listener: str) -> None:
    """A request naming only existing topics is answered from the same per-topic entries, in the
    request's order, each name once; a change of one topic is seen at the next request."""
    spec = metadata.make(services_for(cache))   # type: ignore[arg-type]
    for topic_ops in (False, True):
        names = ["gamma", "alpha", "gamma", "beta"]
        first = handle(spec, v, named_request(v, names, topic_ops), listener)
        assert isinstance(first, EncodedResponse)
        assert _encode(first, v, CORRELATION_ID) == reference(cache, v, listener, topic_ops, True,
                                                              ["gamma", "alpha", "beta"])
        decoded = MetadataResponse[v].decode(_encode(first, v, CORRELATION_ID)[4:], header=True)
        assert [t.name for t in decoded.topics] == ["gamma", "alpha", "beta"]
    # alpha's partition 1 gets a new leader: the next answer has it, byte-identical again
    cache.update_metadata(2, 1, [broker(1), broker(2)], [state("alpha", 1, 1, (1, 2), (1,))], {})
    answer = _encode(handle(spec, v, named_request(v, ["alpha"], True), listener), v, CORRELATION_ID)
    assert answer == reference(cache, v, listener, True, True, ["alpha"])
    alpha = MetadataResponse[v].decode(answer[4:], header=True).topics[0]
    if listener == "PLAINTEXT":
        assert [(p.partition_index, p.leader_id, list(p.isr_nodes)) for p in alpha.partitions] == \
            [(0, 1, [1, 2]), (1, 1, [1]), (2, 1, [1, 2])]


@pytest.mark.parametrize("v", [0, 5, 9, 12, 13])
def test_many_topics_spliced_after_partial_changes(cache: MetadataCache, v: int) -> None:
    """Entries reused from earlier answers and new ones spliced together, past 127 topics (a
    two-byte array count in flexible versions): still byte-identical."""
    spec = metadata.make(services_for(cache))   # type: ignore[arg-type]
    brokers = [broker(1), broker(2)]
    cache.update_metadata(2, 1, brokers, [state(f"t{i}", p, 1 + (i + p) % 2, (1, 2), (1, 2))
                                          for i in range(150) for p in range(2)], {})
    assert _encode(handle(spec, v, request(v, True, True), "PLAINTEXT"), v, CORRELATION_ID) == \
        reference(cache, v, "PLAINTEXT", True, True)
    # one topic changes leader, one is deleted, one is added: the rest are reused
    cache.update_metadata(2, 1, brokers, [state("t3", 0, 2, (1, 2), (2,)), state("t7", 0, -2, (1, 2), (1, 2)),
                                          state("t7", 1, -2, (1, 2), (1, 2)), state("t200", 0, 1, (1,), (1,))], {})
    answer = _encode(handle(spec, v, request(v, True, True), "PLAINTEXT"), v, CORRELATION_ID)
    assert answer == reference(cache, v, "PLAINTEXT", True, True)
    names = {t.name for t in MetadataResponse[v].decode(answer[4:], header=True).topics}
    assert "t7" not in names and "t200" in names and len(names) == 4 + 150
