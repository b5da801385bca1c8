"""Produce (key 0), v0-13. From v3 one record batch of magic 2 per partition; v0-2 may carry
magic 0/1 message sets, converted to one v2 batch before the append as Kafka 3.x's LogValidator
does (the log holds magic 2 only), or magic 2 batches (one per partition).

acks=0 gets no response; but if any partition failed, Kafka closes the connection so that the
client notices, and so do we."""
from __future__ import annotations

import struct
import time
from typing import Callable, Optional

from kafkalite.config.log_config import LogConfig
from kafkalite.log.append_policy import CODECS
from kafkalite.log.errors import InvalidRecordError, LogError
from kafkalite.log.legacy_records import convert_to_batch, is_legacy
from kafkalite.log.record_batch import CREATE_TIME, LOG_APPEND_TIME, split_batches
from kafkalite.network.socket_server import CloseConnection
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.protocol.produce_request import ProduceRequestData
from kafkalite.protocol.produce_response import FIRST_CURRENT_LEADER_VERSION, NodeEndpoint, encode_produce_response
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.results import ProducePartitionResult
from kafkalite.server.current_leader import current_leader
from kafkalite.server.encoded_response import EncodedResponse
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.metadata import ZERO_UUID
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import append_refused
from kafkalite.server.txn_verification import (TransactionVerifier, produce_error, produce_operation,
                                               transactional_producer)

API_KEY = 0
MIN_VERSION, MAX_VERSION = 0, 13
LAST_LEGACY_VERSION = 2     # the last version that may carry magic 0/1 message sets

_MAGIC_OFFSET = 16
_ATTRIBUTES_OFFSET = 21
_LENGTH = struct.Struct(">i")
_ZSTD = 4
_TRANSACTIONAL_MASK = 0x10
# a partition's records as the request decoder hands them on (a slice of the frame), or bytes
Records = bytes | memoryview


# LegacyRecord.RECORD_OVERHEAD_V0: the smallest size a batch header may declare
_MIN_RECORD_OVERHEAD = 14


def first_batch_corruption(records: Optional[Records]) -> Optional[str]:
    """Kafka's ByteBufferLogInputStream.nextBatchSize on a partition's first batch, which
    RequestUtils.hasTransactionalRecords reads before anything else in handleProduceRequest: a
    declared size below the minimum or an unknown magic throws CorruptRecordException there, and
    the whole request is answered with CORRUPT_MESSAGE and that message."""
    if not records or len(records) < 12:
        return None
    size = _LENGTH.unpack_from(records, 8)[0]
    if size < _MIN_RECORD_OVERHEAD:
        return f"Record size {size} is less than the minimum record overhead ({_MIN_RECORD_OVERHEAD})"
    if len(records) <= _MAGIC_OFFSET:
        return None
    magic = struct.unpack_from(">b", records, _MAGIC_OFFSET)[0]
    if magic < 0 or magic > 2:
        return f"Invalid magic found in record: {magic}"
    return None


def validate_records(version: int, records: Optional[Records]) -> Optional[tuple[ErrorCode, str]]:
    """Kafka's ProduceRequest.validateRecords: exactly one magic-2 batch per partition. A batch
    cut short is no batch at all (Kafka's batch iterator stops before it)."""
    if not records or len(records) < 17 or 12 + _LENGTH.unpack_from(records, 8)[0] > len(records):
        return ErrorCode.INVALID_RECORD, (f"Produce requests with version {version} must have at least "
                                          "one record batch per partition")
    if records[_MAGIC_OFFSET] != 2:
        return ErrorCode.INVALID_RECORD, (f"Produce requests with version {version} are only allowed to "
                                          "contain record batches with magic version 2")
    if version < 7 and len(records) > _ATTRIBUTES_OFFSET + 1 and \
            _LENGTH.unpack_from(b"\0\0" + records[_ATTRIBUTES_OFFSET:_ATTRIBUTES_OFFSET + 2])[0] & 0x7 == _ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, ("Produce requests with version "
                                                        f"{version} are not allowed to use ZStandard compression")
    batch_size = 12 + _LENGTH.unpack_from(records, 8)[0]
    rest = len(records) - batch_size
    # A second batch is there when a whole one follows the first (Kafka's batch iterator rule).
    if batch_size > 12 and rest >= 12 and 12 + _LENGTH.unpack_from(records, batch_size + 8)[0] <= rest:
        return ErrorCode.INVALID_RECORD, (f"Produce requests with version {version} are only allowed to "
                                          "contain exactly one record batch per partition")
    return None


def convert_legacy_records(records: Optional[Records], config: LogConfig, now_ms: int) -> Optional[Records]:
    """What a Produce v0-2 partition appends: a magic 0/1 message set becomes one v2 batch under
    the topic's rules; magic 2 data must be one batch (LogValidator's "Compressed outer record has
    more than one batch"). Raises the log's Kafka-mapped errors."""
    if not is_legacy(records):
        if records and len(split_batches(records)[0]) > 1:
            raise InvalidRecordError("Compressed outer record has more than one batch")
        return records
    assert records is not None
    return convert_to_batch(
        records, max_message_bytes=config.max_message_bytes, compacted=config.compact,
        timestamp_type=LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" else CREATE_TIME,
        before_max_ms=config.effective_timestamp_before_max_ms,
        after_max_ms=config.effective_timestamp_after_max_ms,
        target_codec=CODECS.get(config.compression_type), now_ms=now_ms)


def first_batch_is_transactional(records: Optional[Records]) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords looks at each partition's first batch."""
    if not records or len(records) < _ATTRIBUTES_OFFSET + 2 or records[_MAGIC_OFFSET] != 2:
        return False
    return bool(records[_ATTRIBUTES_OFFSET + 1] & _TRANSACTIONAL_MASK)


def make(services: BrokerServices) -> ApiSpec:
    cache = services.metadata_cache
    replica_manager = services.replica_manager
    verifier = TransactionVerifier(services.live_config, replica_manager, services.transaction_coordinator, cache,
                                   getattr(services, "add_partitions_to_txn_manager", None), services.broker_id)

    async def verify_transaction(v: int, transactional_id: Optional[str], entries: dict[TopicPartition, Records],
                                 producers: dict[TopicPartition, tuple[int, int]],
                                 fail: Callable[[TopicPartition, ProducePartitionResult], None]) -> None:
        """KIP-890: refuse (and drop from `entries`) the transactional batches (`producers`: their
        partitions' producer id and epoch, one producer) whose partition is not in the producer's
        ongoing transaction. Called right before append_records: the verification's last step and
        the append happen with no await in between."""
        op = produce_operation(v)
        if not verifier.applies(transactional_id, op):
            return
        assert transactional_id is not None
        [(pid, epoch)] = set(producers.values())
        failed = await verifier.verify_before_append(transactional_id, pid, epoch, producers, op)
        for tp, e in failed.items():
            code, message = produce_error(e, op)
            fail(tp, ProducePartitionResult(code, error_message=message))
            del entries[tp]

    async def handle(ctx: RequestContext, req: ProduceRequestData) -> Optional[EncodedResponse]:
        v = ctx.api_version
        acks = req.acks
        errors: dict[tuple[str, object], dict[int, ProducePartitionResult]] = {}
        entries: dict[TopicPartition, Records] = {}
        slots: dict[TopicPartition, tuple[dict[int, ProducePartitionResult], int]] = {}
        order: list[tuple[object, str, object, list[int]]] = []   # (topic key, name, id, partitions)
        # Transactional records need a transactional id (Kafka authorizes the write to it first and
        # answers every partition with this error otherwise); an empty id or a transactional id on
        # plain records is let through, as Kafka does without an authorizer.
        corruption = next((m for t in req.topic_data for p in t.partition_data
                           if (m := first_batch_corruption(p.records)) is not None), None)
        if corruption is not None:
            raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, corruption)
        txn_id_error = req.transactional_id is None and any(
            first_batch_is_transactional(p.records) for t in req.topic_data for p in t.partition_data)
        for t in req.topic_data:
            if v >= 13:
                tid = t.topic_id
                name = cache.topic_name(tid) if tid is not None else None
                key: object = tid
            else:
                tid, name, key = None, t.name, t.name
            indices = [p.index for p in t.partition_data]
            order.append((key, name, tid, indices))
            errs = errors.setdefault((name or "", key), {})
            for p in t.partition_data:
                if txn_id_error:
                    errs[p.index] = ProducePartitionResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    continue
                if acks not in (-1, 0, 1):
                    errs[p.index] = ProducePartitionResult(ErrorCode.INVALID_REQUIRED_ACKS)
                    continue
                if name is None:
                    errs[p.index] = ProducePartitionResult(ErrorCode.UNKNOWN_TOPIC_ID)
                    continue
                if not cache.contains(name):
                    errs[p.index] = ProducePartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                if append_refused(name, ctx.client_id):
                    # Kafka's ReplicaManager sets no custom message here
                    errs[p.index] = ProducePartitionResult(ErrorCode.INVALID_TOPIC_EXCEPTION)
                    continue
                records = p.records
                if v <= LAST_LEGACY_VERSION:
                    partition = replica_manager.get_partition(TopicPartition(name, p.index))
                    if partition is not None:   # otherwise the append answers UNKNOWN_TOPIC_OR_PARTITION
                        try:
                            records = convert_legacy_records(records, partition.log.config, time.time_ns() // 1_000_000)
                        except LogError as e:
                            errs[p.index] = ProducePartitionResult(ErrorCode(e.error_code), error_message=str(e))
                            continue
                else:
                    invalid = validate_records(v, records)
                    if invalid is not None:
                        # KafkaApis answers these with the error code alone
                        errs[p.index] = ProducePartitionResult(invalid[0])
                        continue
                tp = TopicPartition(name, p.index)
                entries[tp] = records
                slots[tp] = (errs, p.index)
        producers = {tp: pe for tp, r in entries.items() if (pe := transactional_producer(r)) is not None}
        if len(set(producers.values())) > 1:
            # Kafka refuses the whole request (InvalidPidMappingException from handleProduceAppend).
            entries.clear()
            for key, name, _tid, indices in order:
                errors[(name or "", key)].update(
                    (idx, ProducePartitionResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)) for idx in indices)
        elif producers:
            def fail(tp: TopicPartition, result: ProducePartitionResult) -> None:
                errs_of, idx = slots[tp]
                errs_of[idx] = result

            await verify_transaction(v, req.transactional_id, entries, producers, fail)
        appended = await replica_manager.append_records(req.timeout_ms, acks, entries) if entries else {}

        if acks == 0:
            if any(r.error != ErrorCode.NONE for e in errors.values() for r in e.values()) or \
                    any(r.error != ErrorCode.NONE for r in appended.values()):
                raise CloseConnection("error in an acks=0 produce request")
            return None

        unknown = ProducePartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        topics = []
        leaders: dict[int, NodeEndpoint] = {}
        for key, name, tid, indices in order:
            errs = errors[(name or "", key)]
            parts = []
            for idx in indices:
                r = errs.get(idx) or appended.get(TopicPartition(name or "", idx)) or unknown
                leader = None
                if r.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and v >= FIRST_CURRENT_LEADER_VERSION:
                    leader = current_leader(replica_manager, cache, TopicPartition(name or "", idx),
                                            ctx.listener_name, leaders)
                parts.append((idx, r.error, r.base_offset, r.log_append_time, r.log_start_offset, r.record_errors,
                              r.error_message if r.error != ErrorCode.NONE else None, leader))
            topics.append((tid if tid is not None else ZERO_UUID, parts) if v >= 13 else (name, parts))
        return EncodedResponse(*encode_produce_response(v, topics, 0, [leaders[i] for i in sorted(leaders)]))

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
