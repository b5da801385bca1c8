"""Metadata (key 3): brokers, controller, cluster id, topics with partitions, leaders, ISR and
topic ids; auto-creates topics as Kafka does when allowed."""
from __future__ import annotations

import functools
import uuid
from typing import Optional

from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

from kafkalite.cluster.metadata_cache import TopicInfo
from kafkalite.cluster.topic_record import NewTopic
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.metadata_response import encode_metadata_topic
from kafkalite.protocol.wire import write_array_len
from kafkalite.server.encoded_response import EncodedResponse, encode_body
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import (GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, is_internal,
                                               topic_name_error)

API_KEY = 3
MIN_VERSION, MAX_VERSION = 0, 13

# With no authorizer Kafka reports every operation the resource type supports.
# (the codec takes a bitfield as the set of its bit positions; None means "omitted", INT32_MIN)
TOPIC_AUTHORIZED_OPERATIONS = frozenset({3, 4, 5, 6, 7, 8, 10, 11})
CLUSTER_AUTHORIZED_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})
AUTHORIZED_OPERATIONS_OMITTED = None
ZERO_UUID = uuid.UUID(int=0)


def topics_array_tail(v: int) -> int:
    """Bytes after the topics array in a Metadata response body: cluster authorized operations
    (v8-10), the top-level error code (v13+), the tagged fields (v9+, none written)."""
    return (4 if 8 <= v <= 10 else 0) + (2 if v >= 13 else 0) + (1 if v >= 9 else 0)


def array_count(n: int, flexible: bool) -> bytes:
    """An array's length prefix: INT32, or in flexible versions the unsigned varint n + 1."""
    out = bytearray()
    write_array_len(out, n, flexible)
    return bytes(out)


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache

    def topic_metadata_on(listener_name: str, v: int, Resp: type, name: Optional[str],
                          topic_id: Optional[uuid.UUID], include_ops: bool, error: ErrorCode = ErrorCode.NONE):
        T = Resp.MetadataResponseTopic
        info = cache.topic(name) if name is not None else None
        ops = TOPIC_AUTHORIZED_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED
        if info is None:
            return T(error_code=error, name=name, topic_id=topic_id or ZERO_UUID,
                     is_internal=bool(name and is_internal(name)), partitions=[], authorized_operations=ops)
        P = T.MetadataResponsePartition
        # Kafka's ZkMetadataCache.getTopicMetadata: a leader not alive on the request's listener is
        # LEADER_NOT_AVAILABLE (LISTENER_NOT_FOUND from v6 when only the listener is missing); v0
        # lists only the replicas alive on the listener (REPLICA_NOT_AVAILABLE when some are not)
        metas = cache.partition_metadata(info.name, listener_name, error_unavailable_endpoints=v == 0,
                                         error_unavailable_listeners=v >= 6) or []
        parts = [P(error_code=m.error, partition_index=m.partition, leader_id=m.leader_id,
                   leader_epoch=m.leader_epoch, replica_nodes=list(m.replicas), isr_nodes=list(m.isr),
                   offline_replicas=list(m.offline_replicas))
                 for m in metas]
        return T(error_code=ErrorCode.NONE, name=info.name, topic_id=info.topic_id,
                 is_internal=info.is_internal, partitions=parts, authorized_operations=ops)

    def topic_entry(listener_name: str, v: int, info: TopicInfo, include_ops: bool) -> bytes:
        """An existing topic's entry as topic_metadata_on would answer it, encoded directly."""
        metas = cache.partition_metadata(info.name, listener_name, error_unavailable_endpoints=v == 0,
                                         error_unavailable_listeners=v >= 6) or []
        return encode_metadata_topic(
            v, ErrorCode.NONE, info.name, info.topic_id, info.is_internal,
            [(m.error, m.partition, m.leader_id, m.leader_epoch, m.replicas, m.isr, m.offline_replicas)
             for m in metas],
            TOPIC_AUTHORIZED_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED)

    def brokers_on(listener_name: str, Resp: type) -> list:
        brokers = []
        for b in cache.alive_brokers():
            ep = b.endpoint(listener_name)
            if ep is not None:
                brokers.append(Resp.MetadataResponseBroker(node_id=b.broker_id, host=ep.host, port=ep.port,
                                                           rack=b.rack))
        return brokers

    def response(ctx: RequestContext, req: MetadataRequest, topics: list) -> MetadataResponse:
        v = ctx.api_version
        Resp = MetadataResponse[v]
        kwargs = dict(throttle_time_ms=0, brokers=brokers_on(ctx.listener_name, Resp), cluster_id=cache.cluster_id,
                      controller_id=cache.controller_id, topics=topics, error_code=ErrorCode.NONE)
        if 8 <= v <= 10:
            kwargs["authorized_operations"] = (CLUSTER_AUTHORIZED_OPERATIONS
                                                       if req.include_cluster_authorized_operations
                                                       else AUTHORIZED_OPERATIONS_OMITTED)
        return Resp(**kwargs)

    # The answer for all topics depends only on the cache, the version, the listener and the
    # flags: encoded once per metadata change (10,000 partitions take tens of ms to build and
    # encode) and shared by every such request until the next change.
    all_topics_cache: dict[tuple, EncodedResponse] = {}
    all_topics_generation = [-1]

    def all_topics_response(ctx: RequestContext, req: MetadataRequest, include_ops: bool) -> EncodedResponse:
        v = ctx.api_version
        if all_topics_generation[0] != cache.generation:
            all_topics_cache.clear()
            all_topics_generation[0] = cache.generation
        cluster_ops = bool(req.include_cluster_authorized_operations) if 8 <= v <= 10 else False
        key = (ctx.listener_name, v, include_ops, cluster_ops)
        encoded = all_topics_cache.get(key)
        if encoded is None:
            encoded = all_topics_cache[key] = assemble_all_topics(ctx, req, include_ops)
        return encoded

    # After a change only the topics it touched are encoded again: each topic's entry is kept
    # per (listener, version, flag) with the TopicInfo it was made from (the cache replaces a
    # topic's TopicInfo when it changes), all dropped when the live brokers change (leaders'
    # availability). The body is the envelope of an empty answer with the entries spliced in.
    # Requests naming topics that all exist are answered the same way: clients waiting for
    # leaders (or a producer refreshing its topics) ask for a 10,000-partition topic every few ms.
    topic_entries: dict[tuple[str, int, bool], dict[str, tuple[TopicInfo, bytes]]] = {}
    brokers_seen: list[dict] = [{}]

    def spliced(ctx: RequestContext, req: MetadataRequest, include_ops: bool, names: list[str],
                prune: bool) -> EncodedResponse:
        """The answer for existing topics `names`, in that order, from their encoded entries
        (encoding those missing or stale). `prune`: `names` are all the topics, so entries of
        deleted topics are dropped."""
        v = ctx.api_version
        if cache.brokers != brokers_seen[0]:
            topic_entries.clear()
            brokers_seen[0] = dict(cache.brokers)
        envelope = encode_body(response(ctx, req, []), v)
        flexible = envelope.flexible
        tail = topics_array_tail(v)
        head = len(envelope.body) - tail - len(array_count(0, flexible))
        key = (ctx.listener_name, v, include_ops)
        entries = topic_entries.get(key, {})
        kept: dict[str, tuple[TopicInfo, bytes]] = {}
        for name in names:
            info = cache.topic(name)
            if info is None:
                continue
            hit = entries.get(name)
            if hit is None or hit[0] is not info:
                hit = (info, topic_entry(ctx.listener_name, v, info, include_ops))
            kept[name] = hit
        if prune:
            topic_entries[key] = kept
        else:
            entries.update(kept)
            if len(entries) > 2 * cache.topic_count() + 16:
                # only named answers since the last all-topics one: drop what changed or went
                entries = {n: e for n, e in entries.items() if cache.topic(n) is e[0]}
            topic_entries[key] = entries
        body = b"".join([envelope.body[:head], array_count(len(kept), flexible),
                         *(entry for _info, entry in kept.values()), envelope.body[len(envelope.body) - tail:]])
        return EncodedResponse(body, flexible)

    def assemble_all_topics(ctx: RequestContext, req: MetadataRequest, include_ops: bool) -> EncodedResponse:
        return spliced(ctx, req, include_ops, cache.topic_names(), prune=True)

    async def handle(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse | EncodedResponse:
        v = ctx.api_version
        topic_metadata = functools.partial(topic_metadata_on, ctx.listener_name, v)
        Resp = MetadataResponse[v]
        include_ops = bool(req.include_topic_authorized_operations) if v >= 8 else False
        allow_auto_create = (req.allow_auto_topic_creation if v >= 4 else True) and \
            services.config.auto_create_topics_enable
        topics = []
        if req.topics is None or (v == 0 and len(req.topics) == 0):
            return all_topics_response(ctx, req, include_ops)
        named = [t.name for t in req.topics]
        if named and all(n is not None and cache.contains(n) for n in named):
            # every topic known: each answered as in an all-topics answer, once per request
            return spliced(ctx, req, include_ops, list(dict.fromkeys(named)), prune=False)
        else:
            to_create: list[str] = []
            unknown_ids, names = [], []
            for t in req.topics:
                name, tid = t.name, (t.topic_id if v >= 10 else None)
                if name is None and tid is not None and tid != ZERO_UUID:
                    name = cache.topic_name(tid)
                    if name is None:
                        unknown_ids.append(topic_metadata(Resp, None, tid, include_ops, ErrorCode.UNKNOWN_TOPIC_ID))
                        continue
                if name is None:
                    unknown_ids.append(topic_metadata(Resp, None, None, include_ops, ErrorCode.INVALID_REQUEST))
                    continue
                names.append(name)
            # Kafka's order: unknown topic ids, the requested topics that exist, then the others
            # (with auto-creation: invalid names before the created ones); each name once, as
            # Kafka collects them in a set (insertion-ordered up to 4 names).
            names = list(dict.fromkeys(names))
            existing = [n for n in names if cache.contains(n)]
            missing = [n for n in names if not cache.contains(n)]
            if allow_auto_create:
                missing.sort(key=lambda n: topic_name_error(n) is None)
            topics = unknown_ids + [topic_metadata(Resp, n, None, include_ops) for n in existing]
            for name in missing:
                if topic_name_error(name) is not None:
                    topics.append(topic_metadata(Resp, name, None, include_ops, ErrorCode.INVALID_TOPIC_EXCEPTION))
                elif allow_auto_create and name in (GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME):
                    # Kafka's AutoTopicCreationManager creates an internal topic as its coordinator
                    # would (own partition count, replication factor and configs), and only when
                    # auto-creation is allowed: otherwise UNKNOWN_TOPIC_OR_PARTITION, below.
                    topics.append(topic_metadata(Resp, name, None, include_ops, ErrorCode.LEADER_NOT_AVAILABLE))
                    if name == GROUP_METADATA_TOPIC_NAME:
                        services.group_metadata_manager.ensure_offsets_topic()
                    else:
                        services.transaction_coordinator.ensure_topic()
                elif allow_auto_create and not is_internal(name):
                    to_create.append(name)
                    # Kafka (ZooKeeper mode) answers a topic it just created with LEADER_NOT_AVAILABLE;
                    # the client retries and finds the leader.
                    topics.append(topic_metadata(Resp, name, None, include_ops, ErrorCode.LEADER_NOT_AVAILABLE))
                else:
                    topics.append(topic_metadata(Resp, name, None, include_ops, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            if to_create:
                # as Kafka's AutoTopicCreationManager: timeout 0, no waiting for the leaders
                results = await services.admin_manager.create_topics(
                    [NewTopic(n) for n in dict.fromkeys(to_create)], validate_only=False, timeout_ms=0)
                failed = {r.name: r.error for r in results
                          if r.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS,
                                             ErrorCode.REQUEST_TIMED_OUT)}
                for t in topics:
                    if t.name in failed:
                        t.error_code = failed[t.name]
        return response(ctx, req, topics)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
