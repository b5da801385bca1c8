"""Produce (0) v3-11, Fetch (1) v4-17, ListOffsets (2), OffsetForLeaderEpoch (23): data in and
out, idempotence, and the hostile batches (bad CRC, wrong magic, truncated records, duplicate
sequence numbers, fenced epochs, out-of-range offsets). Produce v0-2 / Fetch v0-3 (message
formats 0 and 1) are owned elsewhere and not in this corpus yet."""
from __future__ import annotations

import struct
import uuid
from typing import Any

from tests.differential.corpus.steps import (BASE_TS, create_topic, idempotent_records, init_producer,
                                             produce, records)
from tests.differential.framework import Case, Step, Var
from tests.integration.util import BATCH_CRC_OFFSET

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 23
UNKNOWN_ID = uuid.UUID("00000000-0000-0000-0000-0000000000ef")


def _produce(batch: Any, version: int, partition: int = 0, acks: int = -1, topic: str = "{topic}",
             transactional_id: str | None = None) -> dict:
    topic_field = {"topic_id": Var("topic_id")} if version >= 13 else {"name": topic}
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{**topic_field, "partition_data": [{"index": partition, "records": batch}]}]}


def _fetch(version: int, offset: int = 0, partition: int = 0, topic: str = "{topic}", max_bytes: int = 1 << 20,
           isolation_level: int = 0, log_start_offset: int = -1, current_leader_epoch: int = -1,
           topic_id: Any = None) -> dict:
    topic_field = {"topic_id": topic_id or Var("topic_id")} if version >= 13 else {"topic": topic}
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{**topic_field, "partitions": [{
                "partition": partition, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": log_start_offset,
                "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _list_offsets(timestamp: int, partition: int = 0, topic: str = "{topic}", isolation_level: int = 0,
                  current_leader_epoch: int = -1) -> dict:
    return {"replica_id": -1, "isolation_level": isolation_level, "timeout_ms": 5000,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                       "current_leader_epoch": current_leader_epoch,
                                                       "timestamp": timestamp}]}]}


def _list_offsets_v0(timestamp: int, max_num_offsets: int = 10, partition: int = 0) -> dict:
    return {"replica_id": -1, "topics": [{"name": "{topic}", "partitions": [{
        "partition_index": partition, "timestamp": timestamp, "max_num_offsets": max_num_offsets}]}]}


def _leader_epoch(leader_epoch: int, partition: int = 0, current: int = -1, topic: str = "{topic}") -> dict:
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": leader_epoch}]}]}


def fetch_step(version: int = 12, offset: int = 0) -> Step:
    return Step(FETCH, version, _fetch(version, offset))


def _corrupt_crc(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[BATCH_CRC_OFFSET] ^= 0xFF
    return bytes(b)


def _magic(batch: bytes, magic: int) -> bytes:
    b = bytearray(batch)
    b[16] = magic
    return bytes(b)


def _truncated(batch: bytes, keep: int) -> bytes:
    return batch[:keep]


def _length_field(batch: bytes, delta: int) -> bytes:
    b = bytearray(batch)
    (length,) = struct.unpack_from(">i", b, 8)
    struct.pack_into(">i", b, 8, length + delta)
    return bytes(b)


BATCH = records(b"one", b"two", b"three")
TOPIC = create_topic()
TOPIC_WITH_DATA = [*create_topic(), produce(batch=records(b"a", b"b", b"c", b"d", b"e"))]

CASES = [
    Case(f"produce_v{v}", PRODUCE, v, _produce(BATCH, v), setup=TOPIC, then=[fetch_step()])
    for v in range(3, 12)
] + [
    Case(f"fetch_v{v}", FETCH, v, _fetch(v, offset=1), setup=TOPIC_WITH_DATA) for v in range(4, 18)
] + [
    Case(f"fetch_v{v}_offset_out_of_range", FETCH, v, _fetch(v, offset=99), setup=TOPIC_WITH_DATA)
    for v in (4, 11, 12, 17)
] + [
    Case(f"list_offsets_v{v}_{name}", LIST_OFFSETS, v, _list_offsets(ts), setup=TOPIC_WITH_DATA)
    for v in range(1, 10) for name, ts in (("earliest", -2), ("latest", -1), ("by_time", BASE_TS + 15))
] + [
    Case(f"list_offsets_v{v}_max_timestamp", LIST_OFFSETS, v, _list_offsets(-3), setup=TOPIC_WITH_DATA)
    for v in (6, 7, 9)
] + [
    Case(f"list_offsets_v{v}_earliest_local", LIST_OFFSETS, v, _list_offsets(-4), setup=TOPIC_WITH_DATA)
    for v in (7, 8, 9)
] + [
    Case(f"list_offsets_v{v}_latest_tiered", LIST_OFFSETS, v, _list_offsets(-5), setup=TOPIC_WITH_DATA)
    for v in (8, 9)
] + [
    Case(f"offset_for_leader_epoch_v{v}", OFFSET_FOR_LEADER_EPOCH, v, _leader_epoch(0),
         setup=TOPIC_WITH_DATA) for v in range(0, 5)
] + [
    Case(f"offset_for_leader_epoch_v{v}_unknown_partition", OFFSET_FOR_LEADER_EPOCH, v,
         _leader_epoch(0, partition=4), setup=TOPIC) for v in (0, 1)
] + [
    # --- produce: refusals and hostile batches -----------------------------------------------
    Case("produce_v9_unknown_topic", PRODUCE, 9, _produce(BATCH, 9, topic="{topic2}"), setup=TOPIC),
    Case("produce_v9_unknown_partition", PRODUCE, 9, _produce(BATCH, 9, partition=5), setup=TOPIC),
    Case("produce_v9_negative_partition", PRODUCE, 9, _produce(BATCH, 9, partition=-1), setup=TOPIC),
    Case("produce_v9_invalid_topic_name", PRODUCE, 9, _produce(BATCH, 9, topic="bad/name")),
    Case("produce_v9_bad_crc", PRODUCE, 9, _produce(_corrupt_crc(BATCH), 9), setup=TOPIC, then=[fetch_step()]),
    Case("produce_v9_magic_1_in_v3_plus", PRODUCE, 9, _produce(_magic(BATCH, 1), 9), setup=TOPIC),
    Case("produce_v9_magic_3", PRODUCE, 9, _produce(_magic(BATCH, 3), 9), setup=TOPIC),
    Case("produce_v9_truncated_batch", PRODUCE, 9, _produce(_truncated(BATCH, 40), 9), setup=TOPIC),
    Case("produce_v9_truncated_records", PRODUCE, 9, _produce(_truncated(BATCH, len(BATCH) - 5), 9),
         setup=TOPIC),
    Case("produce_v9_length_field_too_short", PRODUCE, 9, _produce(_length_field(BATCH, -4), 9), setup=TOPIC),
    Case("produce_v9_empty_records", PRODUCE, 9, _produce(b"", 9), setup=TOPIC),
    Case("produce_v9_two_batches", PRODUCE, 9, _produce(BATCH + records(b"x"), 9), setup=TOPIC,
         then=[fetch_step()]),
    Case("produce_v9_acks_2", PRODUCE, 9, _produce(BATCH, 9, acks=2), setup=TOPIC),
    Case("produce_v9_acks_0", PRODUCE, 9, _produce(BATCH, 9, acks=0), setup=TOPIC, then=[fetch_step()]),
    Case("produce_v9_acks_1", PRODUCE, 9, _produce(BATCH, 9, acks=1), setup=TOPIC),
    Case("produce_v9_not_enough_replicas", PRODUCE, 9, _produce(BATCH, 9),
         setup=create_topic(configs={"min.insync.replicas": "2"})),
    Case("produce_v9_transactional_id_without_transaction", PRODUCE, 9,
         _produce(BATCH, 9, transactional_id="{txn}"), setup=TOPIC),
    Case("produce_v9_internal_topic", PRODUCE, 9, _produce(BATCH, 9, topic="__consumer_offsets"),
         setup=[Step(10, 3, {"key": "{group}", "key_type": 0}, until=lambda r: r["error_code"] == 0)]),
    # --- idempotence ----------------------------------------------------------------------------
    Case("produce_v9_idempotent_duplicate_sequence", PRODUCE, 9, _produce(idempotent_records(b"a", b"b"), 9),
         setup=[*TOPIC, init_producer(), produce(batch=idempotent_records(b"a", b"b"))],
         then=[fetch_step()]),
    Case("produce_v9_idempotent_sequence_gap", PRODUCE, 9,
         _produce(idempotent_records(b"c", base_sequence=5), 9),
         setup=[*TOPIC, init_producer(), produce(batch=idempotent_records(b"a", b"b"))]),
    Case("produce_v9_idempotent_first_sequence_not_zero", PRODUCE, 9,
         _produce(idempotent_records(b"c", base_sequence=3), 9), setup=[*TOPIC, init_producer()]),
    Case("produce_v9_idempotent_fenced_epoch", PRODUCE, 9,
         _produce(idempotent_records(b"c", base_sequence=2, epoch_delta=-1), 9),
         setup=[*TOPIC, init_producer(), produce(batch=idempotent_records(b"a", b"b", epoch_delta=1))]),
    Case("produce_v9_idempotent_newer_epoch_nonzero_sequence", PRODUCE, 9,
         _produce(idempotent_records(b"c", base_sequence=7, epoch_delta=1), 9),
         setup=[*TOPIC, init_producer(), produce(batch=idempotent_records(b"a", b"b"))]),
    Case("produce_v9_unknown_producer_id", PRODUCE, 9,
         _produce(records(b"z", producer_id=987654321, producer_epoch=0, base_sequence=0), 9), setup=TOPIC),
    # --- fetch: refusals ------------------------------------------------------------------------
    Case("fetch_v12_unknown_topic", FETCH, 12, _fetch(12, topic="{topic2}"), setup=TOPIC),
    Case("fetch_v12_unknown_partition", FETCH, 12, _fetch(12, partition=4), setup=TOPIC),
    Case("fetch_v13_unknown_topic_id", FETCH, 13, _fetch(13, topic_id=UNKNOWN_ID), setup=TOPIC),
    Case("fetch_v12_negative_offset", FETCH, 12, _fetch(12, offset=-1), setup=TOPIC_WITH_DATA),
    Case("fetch_v12_at_log_end", FETCH, 12, _fetch(12, offset=5), setup=TOPIC_WITH_DATA),
    Case("fetch_v12_tiny_max_bytes", FETCH, 12, _fetch(12, max_bytes=10), setup=TOPIC_WITH_DATA),
    Case("fetch_v12_fenced_leader_epoch", FETCH, 12, _fetch(12, current_leader_epoch=99), setup=TOPIC_WITH_DATA),
    Case("fetch_v12_old_leader_epoch", FETCH, 12, _fetch(12, current_leader_epoch=-2), setup=TOPIC_WITH_DATA),
    Case("fetch_v12_read_committed", FETCH, 12, _fetch(12, isolation_level=1), setup=TOPIC_WITH_DATA),
    Case("fetch_v12_invalid_topic_name", FETCH, 12, _fetch(12, topic="bad/name")),
    # --- list offsets / leader epochs: refusals --------------------------------------------------
    Case("list_offsets_v0_latest", LIST_OFFSETS, 0, _list_offsets_v0(-1), setup=TOPIC_WITH_DATA),
    Case("list_offsets_v0_earliest", LIST_OFFSETS, 0, _list_offsets_v0(-2), setup=TOPIC_WITH_DATA),
    Case("list_offsets_v0_latest_one", LIST_OFFSETS, 0, _list_offsets_v0(-1, max_num_offsets=1),
         setup=TOPIC_WITH_DATA),
    Case("list_offsets_v0_long_ago", LIST_OFFSETS, 0, _list_offsets_v0(1000), setup=TOPIC_WITH_DATA),
    Case("list_offsets_v0_in_the_future", LIST_OFFSETS, 0, _list_offsets_v0(BASE_TS + 10 * 3_600_000),
         setup=TOPIC_WITH_DATA),
    Case("list_offsets_v0_segments", LIST_OFFSETS, 0, _list_offsets_v0(-1),
         setup=[*create_topic(configs={"segment.bytes": "120"}), produce(batch=records(b"a" * 40)),
                produce(batch=records(b"b" * 40)), produce(batch=records(b"c" * 40))]),
    Case("list_offsets_v0_empty_log", LIST_OFFSETS, 0, _list_offsets_v0(-1), setup=TOPIC),
    Case("list_offsets_v0_max_timestamp_unsupported", LIST_OFFSETS, 0, _list_offsets_v0(-3), setup=TOPIC),
    Case("list_offsets_v0_unknown_partition", LIST_OFFSETS, 0, _list_offsets_v0(-1, partition=3), setup=TOPIC),
    Case("list_offsets_v7_unknown_topic", LIST_OFFSETS, 7, _list_offsets(-1, topic="{topic2}"), setup=TOPIC),
    Case("list_offsets_v7_unknown_partition", LIST_OFFSETS, 7, _list_offsets(-1, partition=9), setup=TOPIC),
    Case("list_offsets_v7_future_timestamp", LIST_OFFSETS, 7, _list_offsets(BASE_TS + 10**9),
         setup=TOPIC_WITH_DATA),
    Case("list_offsets_v7_fenced_leader_epoch", LIST_OFFSETS, 7, _list_offsets(-1, current_leader_epoch=50),
         setup=TOPIC_WITH_DATA),
    Case("list_offsets_v7_negative_timestamp", LIST_OFFSETS, 7, _list_offsets(-9), setup=TOPIC_WITH_DATA),
    Case("list_offsets_v5_read_committed", LIST_OFFSETS, 5, _list_offsets(-1, isolation_level=1),
         setup=TOPIC_WITH_DATA),
    Case("offset_for_leader_epoch_v4_future_epoch", OFFSET_FOR_LEADER_EPOCH, 4, _leader_epoch(7),
         setup=TOPIC_WITH_DATA),
    Case("offset_for_leader_epoch_v4_fenced_current", OFFSET_FOR_LEADER_EPOCH, 4, _leader_epoch(0, current=9),
         setup=TOPIC_WITH_DATA),
    Case("offset_for_leader_epoch_v4_unknown_topic", OFFSET_FOR_LEADER_EPOCH, 4, _leader_epoch(0, topic="{topic2}")),
    Case("offset_for_leader_epoch_v4_unknown_partition", OFFSET_FOR_LEADER_EPOCH, 4, _leader_epoch(0, partition=3),
         setup=TOPIC),
    Case("offset_for_leader_epoch_v4_empty_log", OFFSET_FOR_LEADER_EPOCH, 4, _leader_epoch(0), setup=TOPIC),
]
