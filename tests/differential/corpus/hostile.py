"""Hostile frames over raw sockets: what Kafka closes the connection on, kafkalite must close it
on too; what Kafka answers, kafkalite must answer the same way."""
from __future__ import annotations

import struct

from tests.differential.corpus.steps import create_topic, records
from tests.differential.corpus.produce_fetch import fetch_step
from tests.differential.framework import Case, Vars
from tests.integration.util import BATCH_CRC_OFFSET, uvarint

METADATA, PRODUCE, FETCH, API_VERSIONS, LIST_OFFSETS = 3, 0, 1, 18, 2


def _header(api_key: int, version: int, corr: int = 99, client_id: bytes = b"hostile") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _raw(data: bytes):
    return lambda v: data


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _acks0_corrupt_produce(v: Vars) -> bytes:
    batch = bytearray(records(b"x"))
    batch[BATCH_CRC_OFFSET] ^= 0xFF
    body = (struct.pack(">h", -1) + struct.pack(">hi", 0, 5000) + struct.pack(">i", 1) + _string(v["topic"])
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(batch)) + bytes(batch))
    return _frame(_header(PRODUCE, 3) + body)


def _produce_v7(topics: bytes) -> bytes:
    """Produce v7, no transactional id, acks=1; `topics` from the topic array's count on."""
    return _frame(_header(PRODUCE, 7) + struct.pack(">h", -1) + struct.pack(">hi", 1, 5000) + topics)


def _produce_v9(topic: str, partition_tags: bytes, topic_tags: bytes, top_tags: bytes,
                transactional_id: bytes = b"") -> bytes:
    """Produce v9 (flexible: header v2, compact fields) of one record batch to partition 0."""
    batch = records(b"tagged")
    name = topic.encode()
    txn = uvarint(len(transactional_id) + 1) + transactional_id if transactional_id else b"\x00"
    body = (txn + struct.pack(">hi", 1, 5000) + uvarint(2) + uvarint(len(name) + 1) + name + uvarint(2)
            + struct.pack(">i", 0) + uvarint(len(batch) + 1) + batch + partition_tags + topic_tags + top_tags)
    return _frame(_header(PRODUCE, 9) + b"\x00" + body)


# unknown tagged fields (tags 5 and 600): skipped by both
_UNKNOWN_TAGS = uvarint(2) + uvarint(5) + uvarint(3) + b"abc" + uvarint(600) + uvarint(0)


def _own_topic(response: dict, variables: Vars) -> dict:
    """An all-topics Metadata answer lists every test's topics: keep the case's own."""
    return {**response, "topics": [t for t in response["topics"] if t["name"] == variables["topic"]]}


def _metadata_v1(topic_count: int, topics: bytes) -> bytes:
    return _frame(_header(METADATA, 1) + struct.pack(">i", topic_count) + topics)


CASES = [
    Case("hostile_unknown_api_key", 999, 0, raw=_raw(_frame(_header(999, 0)))),
    Case("hostile_unsupported_metadata_version", METADATA, 99, raw=_raw(_frame(_header(METADATA, 99) + b"\x00" * 8))),
    Case("hostile_negative_frame_size", METADATA, 1, raw=_raw(struct.pack(">i", -5) + _header(METADATA, 1))),
    Case("hostile_frame_size_above_limit", METADATA, 1,
         raw=_raw(struct.pack(">i", 0x7FFFFFF0) + _header(METADATA, 1) + b"\x00" * 32)),
    Case("hostile_empty_frame", METADATA, 1, raw=_raw(struct.pack(">i", 0))),
    Case("hostile_header_only", METADATA, 1, raw=_raw(_frame(_header(METADATA, 1)))),
    Case("hostile_truncated_header", METADATA, 1, raw=_raw(_frame(struct.pack(">hh", METADATA, 1)))),
    Case("hostile_client_id_past_frame", METADATA, 1,
         raw=_raw(_frame(struct.pack(">hhih", METADATA, 1, 99, 500) + b"abc"))),
    Case("hostile_array_count_past_frame", METADATA, 1, raw=_raw(_metadata_v1(5, b""))),
    # a null (-1) topic array is "all topics" from v1: compared on the case's own topic
    Case("hostile_null_topic_array_v1", METADATA, 1, raw=_raw(_metadata_v1(-1, b"")), setup=create_topic(),
         project=_own_topic),
    Case("hostile_null_topic_name_v1", METADATA, 1, raw=_raw(_metadata_v1(1, struct.pack(">h", -1)))),
    Case("hostile_string_length_past_frame", METADATA, 1, raw=_raw(_metadata_v1(1, struct.pack(">h", 300) + b"ab"))),
    Case("hostile_trailing_garbage_after_body", METADATA, 1,
         raw=lambda v: _metadata_v1(1, _string(v["topic"]) + b"\xde\xad\xbe\xef"), setup=create_topic()),
    Case("hostile_null_client_id", METADATA, 1,
         raw=lambda v: _frame(struct.pack(">hhih", METADATA, 1, 99, -1) + struct.pack(">i", 1) + _string(v["topic"])),
         setup=create_topic()),
    Case("hostile_flexible_header_bad_tag_count", METADATA, 12,
         raw=_raw(_frame(_header(METADATA, 12) + b"\xff\xff\xff\xff\x0f"))),
    Case("hostile_api_versions_v3_garbage_body", API_VERSIONS, 3,
         raw=_raw(_frame(_header(API_VERSIONS, 3) + b"\x00" + b"\x7f" * 9))),
    Case("hostile_acks0_corrupt_batch", PRODUCE, 3, raw=_acks0_corrupt_produce, setup=create_topic()),
    # an array count below -1 where the schema has no null: Kafka's parser throws, as for -1
    Case("hostile_produce_topic_count_minus_two", PRODUCE, 7, raw=_raw(_produce_v7(struct.pack(">i", -2)))),
    Case("hostile_produce_partition_count_minus_two", PRODUCE, 7,
         raw=lambda v: _produce_v7(struct.pack(">i", 1) + _string(v["topic"]) + struct.pack(">i", -2)),
         setup=create_topic()),
    Case("hostile_produce_tagged_field_past_body", PRODUCE, 9,
         raw=lambda v: _produce_v9(v["topic"], b"\x00", b"\x00", uvarint(1) + uvarint(5) + uvarint(40) + b"short"),
         setup=create_topic()),
    Case("hostile_produce_compact_string_longer_than_int16", PRODUCE, 9,
         raw=lambda v: _produce_v9(v["topic"], b"\x00", b"\x00", b"\x00", transactional_id=b"t" * 0x8000),
         setup=create_topic()),
    Case("produce_unknown_tagged_fields_at_every_level", PRODUCE, 9,
         raw=lambda v: _produce_v9(v["topic"], _UNKNOWN_TAGS, _UNKNOWN_TAGS, _UNKNOWN_TAGS), setup=create_topic(),
         then=[fetch_step()]),
    Case("hostile_list_offsets_truncated", LIST_OFFSETS, 1,
         raw=_raw(_frame(_header(LIST_OFFSETS, 1) + struct.pack(">ii", -1, 1)))),
]
