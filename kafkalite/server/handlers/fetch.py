"""Fetch (key 1), v0-18: long-poll reads through the replica manager, incremental fetch sessions
from v7, topic ids from v13. v0-3 get the stored batches down-converted to message format 0
(v0-1) or 1 (v2-3) as Kafka 3.x's KafkaApis.maybeConvertFetchedData does."""
from __future__ import annotations

import time
import uuid
from typing import Optional

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

from kafkalite.log.errors import UnsupportedCompressionTypeError
from kafkalite.log.log import FetchDataInfo
from kafkalite.log.legacy_records import MAGIC_V0, MAGIC_V1, lazy_down_convert
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.produce_response import NodeEndpoint
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_selector import ClientMetadata
from kafkalite.replica.results import FetchPartitionRequest, FetchPartitionResult
from kafkalite.server.current_leader import current_leader
from kafkalite.server.fetch_session import (CachedPartition, FetchSessionError, INVALID_SESSION_ID,
                                            PartitionKey, RequestedPartition)
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.metadata import ZERO_UUID
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 1
MIN_VERSION, MAX_VERSION = 0, 18
LAST_HARD_MAX_BYTES_VERSION = 2     # v0-2: no "at least one batch" beyond the byte limits
LAST_DOWN_CONVERSION_VERSION = 3    # v0-3 read message format 0/1
FIRST_ZSTD_VERSION = 10             # older fetchers cannot read zstd
FIRST_CURRENT_LEADER_VERSION = 16   # KIP-951 leader hints
_LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def down_conversion_magic(version: int) -> int | None:
    """The message format a Fetch version reads, when it is older than the stored v2."""
    if version <= 1:
        return MAGIC_V0
    if version <= LAST_DOWN_CONVERSION_VERSION:
        return MAGIC_V1
    return None


FIRST_CLIENT_METADATA_VERSION = 11   # rack id: KafkaApis builds ClientMetadata from v11
FIRST_DIVERGING_EPOCH_VERSION = 12   # last_fetched_epoch in, diverging_epoch out


def _records_of(r: FetchPartitionResult) -> bytes | FetchDataInfo:
    if r.data_bytes is None and r.data is not None:
        return r.data
    return r.records()


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache
    replica_manager = services.replica_manager
    sessions = services.fetch_sessions
    fetch_max_bytes = services.config.fetch_max_bytes

    def convert_for_old_fetcher(v: int, tp: TopicPartition, fetch_offset: int,
                                r: FetchPartitionResult) -> tuple[FetchPartitionResult, bool]:
        """KafkaApis.maybeConvertFetchedData: a zstd topic is UNSUPPORTED_COMPRESSION_TYPE below
        v10; v0-3 get message format 0/1 (UNSUPPORTED_VERSION if message.downconversion.enable
        is false), the error and offsets of the read kept. The flag: the records are null, as in
        Kafka's FetchResponse.partitionResponse for those refusals."""
        partition = replica_manager.get_partition(tp)
        if partition is None:
            return r, False
        config = partition.log.config
        if config.compression_type == "zstd":
            return FetchPartitionResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, aborted_transactions=[]), True
        magic = down_conversion_magic(v)
        if magic is None:
            return r, False
        if not config.message_downconversion_enable:
            return FetchPartitionResult(ErrorCode.UNSUPPORTED_VERSION, aborted_transactions=[]), True
        try:
            r.data_bytes = lazy_down_convert(r.records(), magic, fetch_offset)
        except UnsupportedCompressionTypeError:
            return FetchPartitionResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, aborted_transactions=[]), True
        return r, False

    async def handle(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
        v = ctx.api_version
        Resp = FetchResponse[v]
        uses_topic_ids = v >= 13
        replica_id = req.replica_state.replica_id if (v >= 15 and req.replica_state is not None) else \
            (req.replica_id if v < 15 else -1)
        requested: list[RequestedPartition] = []
        for t in req.topics:
            if uses_topic_ids:
                tid = t.topic_id or ZERO_UUID
                name = cache.topic_name(tid) or ""
            else:
                tid, name = ZERO_UUID, t.topic
            for p in t.partitions:
                requested.append(RequestedPartition((tid, name, p.partition), p.fetch_offset,
                                                    p.partition_max_bytes,
                                                    p.current_leader_epoch if v >= 9 else -1,
                                                    p.log_start_offset,
                                                    p.last_fetched_epoch if v >= FIRST_DIVERGING_EPOCH_VERSION else -1))
        forgotten: list[PartitionKey] = []
        for f in (req.forgotten_topics_data or []) if v >= 7 else []:
            if uses_topic_ids:
                tid = f.topic_id or ZERO_UUID
                name = cache.topic_name(tid) or ""
            else:
                tid, name = ZERO_UUID, f.topic
            forgotten += [(tid, name, p) for p in f.partitions]

        now = _now_ms()
        session_id = req.session_id if v >= 7 else 0
        epoch = req.session_epoch if v >= 7 else -1
        try:
            fctx = sessions.new_context(session_id, epoch, requested, forgotten, uses_topic_ids, now)
        except FetchSessionError as e:
            return Resp(throttle_time_ms=0, error_code=e.code, session_id=INVALID_SESSION_ID, responses=[])

        # Partitions with an unknown topic id / name answer with an error and are not read.
        errors: dict[PartitionKey, ErrorCode] = {}
        to_read: list[tuple[TopicPartition, FetchPartitionRequest]] = []
        keys_read: list[PartitionKey] = []
        for cp in fctx.partitions:
            tid, name, partition = cp.key
            if uses_topic_ids and not name:
                errors[cp.key] = ErrorCode.UNKNOWN_TOPIC_ID
            elif (info := cache.topic(name)) is None or partition not in info.partitions:
                # KafkaApis checks the partition against the metadata cache before reading
                errors[cp.key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                to_read.append((TopicPartition(name, partition),
                                FetchPartitionRequest(cp.fetch_offset, cp.max_bytes, cp.current_leader_epoch,
                                                      cp.log_start_offset, cp.last_fetched_epoch)))
                keys_read.append(cp.key)
        max_wait = req.max_wait_ms if not errors else 0
        # KafkaApis builds ClientMetadata from v11 (the rack id): the replica selector's input
        client_metadata = ClientMetadata(req.rack_id or "", ctx.client_id or "", ctx.connection.client_host,
                                         "User:ANONYMOUS", ctx.listener_name) \
            if v >= FIRST_CLIENT_METADATA_VERSION and replica_id < 0 else None
        # KafkaApis caps a fetch at the broker's fetch.max.bytes (min.bytes follows)
        max_bytes = min(req.max_bytes, fetch_max_bytes)
        results = await replica_manager.fetch_messages(
            max_wait, min(req.min_bytes, max_bytes), max_bytes, req.isolation_level, to_read,
            min_one_message=v > LAST_HARD_MAX_BYTES_VERSION,
            # Kafka's FetchParams.fetchOnlyLeader: a consumer sending client metadata (v11+) may read a follower
            fetch_only_leader=replica_id >= 0 or v < FIRST_CLIENT_METADATA_VERSION,
            replica_id=replica_id, client_metadata=client_metadata) if to_read else []
        by_key: dict[PartitionKey, FetchPartitionResult] = {k: r for k, (_tp, r) in zip(keys_read, results)}
        null_records: set[PartitionKey] = set()
        if v < FIRST_ZSTD_VERSION:
            for (tp, info), k in zip(to_read, keys_read):
                by_key[k], is_null = convert_for_old_fetcher(v, tp, info.fetch_offset, by_key[k])
                if is_null:
                    null_records.add(k)
        for k, code in errors.items():
            # KafkaApis' FetchResponse.partitionResponse: an empty (not null) aborted list
            by_key[k] = FetchPartitionResult(code, aborted_transactions=[])

        # Shape the response for the context.
        included: list[tuple[CachedPartition, FetchPartitionResult]] = []
        if fctx.kind == "incremental":
            session = fctx.session
            assert session is not None
            for cp in list(session.partitions.values()):
                r = by_key.get(cp.key)
                if r is None:
                    continue
                # a moved last stable offset (a transaction decided) is news for a read_committed
                # consumer even when nothing else changed
                lso_moved = cp.last_stable_offset != r.last_stable_offset
                if cp.maybe_update_response(r.error, r.high_watermark, r.last_stable_offset,
                                            r.log_start_offset, r.size > 0,
                                            preferred_read_replica=r.preferred_read_replica,
                                            diverging_epoch=r.diverging_epoch is not None) or lso_moved:
                    included.append((cp, r))
                    if r.size > 0:
                        # fairness (KIP-227): partitions that returned data go to the back
                        session.partitions.move_to_end(cp.key)
            response_session_id = session.session_id
        else:
            for cp in fctx.partitions:
                r = by_key[cp.key]
                cp.maybe_update_response(r.error, r.high_watermark, r.last_stable_offset,
                                         r.log_start_offset, r.size > 0)
                included.append((cp, r))
            response_session_id = INVALID_SESSION_ID
            if fctx.kind == "full" and v >= 7:
                response_session_id = sessions.maybe_create(fctx.partitions, uses_topic_ids, now)

        T = Resp.FetchableTopicResponse
        P = T.PartitionData
        leaders: dict[int, NodeEndpoint] = {}

        def leader_hint(key: PartitionKey, error: int) -> dict:
            """KIP-951, Fetch v16+: the current leader of a partition answered NOT_LEADER_OR_FOLLOWER
            or FENCED_LEADER_EPOCH (left out when unknown, as Kafka's generated code does)."""
            if v < FIRST_CURRENT_LEADER_VERSION or error not in _LEADER_HINT_ERRORS:
                return {}
            leader = current_leader(replica_manager, cache, TopicPartition(key[1], key[2]), ctx.listener_name,
                                    leaders)
            if leader == (-1, -1):
                return {}
            return {"current_leader": P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])}

        topics: list = []
        last_key: Optional[tuple[uuid.UUID, str]] = None
        for cp, r in included:
            tid, name, partition = cp.key
            if (tid, name) != last_key:
                topics.append(T(topic_id=tid, partitions=[]) if uses_topic_ids else T(topic=name, partitions=[]))
                last_key = (tid, name)
            topics[-1].partitions.append(P(
                partition_index=partition, error_code=r.error, high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
                aborted_transactions=None if r.aborted_transactions is None else [
                    P.AbortedTransaction(producer_id=pid, first_offset=first)
                    for pid, first in r.aborted_transactions],
                # a tagged field: left out (None) unless the follower must truncate
                diverging_epoch=P.EpochEndOffset(epoch=r.diverging_epoch[0], end_offset=r.diverging_epoch[1])
                if r.diverging_epoch is not None else None,
                preferred_read_replica=r.preferred_read_replica,
                # the log's FetchDataInfo when nothing read the bytes yet: the response encoder
                # (server/fetch_response.py) leaves them in the segment files for sendfile
                records=None if cp.key in null_records else _records_of(r),
                **leader_hint(cp.key, r.error)))
        # the bytes sent (down-converted for v0-3), as Kafka counts after maybeConvertFetchedData
        replica_manager.broker_topic_stats.record_bytes_out(
            replica_id >= 0, [(cp.key[1], r.size if r.data_bytes is None else len(r.data_bytes))
                              for cp, r in included])
        # KIP-951 (v16+): the endpoints of the leaders named above; as Kafka's generated code, an
        # empty list is not written
        hinted = {"node_endpoints": [Resp.NodeEndpoint(node_id=n, host=h, port=p, rack=rack)
                                     for n, h, p, rack in (leaders[i] for i in sorted(leaders))]} if leaders else {}
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=response_session_id,
                    responses=topics, **hinted)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
