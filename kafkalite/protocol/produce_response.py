"""ProduceResponse (key 0), v0-13, written straight to bytes.

A producer spreading over many partitions sends one small Produce request per partition
(librdkafka does), so the answer's cost is paid per request: building kafka-python's response
objects and encoding them took ~25 us, a quarter of the broker's time per such request. This
writes the same bytes as kafka-python's codec for every version (a property test compares them)
from plain tuples.

From v10 (KIP-951) a partition may carry its current leader and epoch (tagged field 0), and the
response the endpoints of those leaders (tagged field 0 at the top); as Kafka's generated code
does, a leader of (-1, -1) and an empty endpoint list are not written.
"""
from __future__ import annotations

import struct
import uuid
from typing import Optional, Sequence, Union

from kafkalite.protocol.wire import I32, I64, write_array_len, write_string, write_uvarint

FIRST_FLEXIBLE_VERSION = 9

_PARTITION_HEAD = struct.Struct(">ihq")     # index, error_code, base_offset
_I64_PAIR = struct.Struct(">qq")
_NO_TAGGED_FIELDS = 0
_NO_LEADER = (-1, -1)
_LEADER_ID_AND_EPOCH = struct.Struct(">iib")    # leader_id, leader_epoch, no tagged fields
# one tagged field, tag 0, of 9 bytes: a LeaderIdAndEpoch
_CURRENT_LEADER_TAG = bytes([1, 0, _LEADER_ID_AND_EPOCH.size])
FIRST_CURRENT_LEADER_VERSION = 10


# (index, error_code, base_offset, log_append_time_ms, log_start_offset, record_errors,
# error_message, current_leader); record_errors are (batch_index, message) pairs, current_leader
# (leader_id, leader_epoch) or None
PartitionAnswer = tuple[int, int, int, int, int, Sequence[tuple[int, Optional[str]]], Optional[str],
                        Optional[tuple[int, int]]]
# (node_id, host, port, rack)
NodeEndpoint = tuple[int, str, int, Optional[str]]
TopicKey = Union[str, uuid.UUID]    # the name up to v12, the topic id from v13


def encode_produce_response(version: int, topics: Sequence[tuple[TopicKey, Sequence[PartitionAnswer]]],
                            throttle_time_ms: int = 0, node_endpoints: Sequence[NodeEndpoint] = ()
                            ) -> tuple[bytes, bool]:
    """The response body (no header, no size prefix) and whether the version is flexible (its
    response header carries tagged fields)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    buf = bytearray()
    write_array_len(buf, len(topics), flexible)
    for key, partitions in topics:
        if version >= 13:
            buf += key.bytes    # type: ignore[union-attr]
        else:
            write_string(buf, key, flexible)  # type: ignore[arg-type]
        write_array_len(buf, len(partitions), flexible)
        for index, error, base_offset, append_time, log_start, record_errors, message, leader in partitions:
            buf += _PARTITION_HEAD.pack(index, error, base_offset)
            if version >= 5:
                buf += _I64_PAIR.pack(append_time, log_start)
            elif version >= 2:
                buf += I64.pack(append_time)
            if version >= 8:
                write_array_len(buf, len(record_errors), flexible)
                for batch_index, batch_message in record_errors:
                    buf += I32.pack(batch_index)
                    write_string(buf, batch_message, flexible)
                    if flexible:
                        buf.append(_NO_TAGGED_FIELDS)
                write_string(buf, message, flexible)
            if flexible:
                if leader is not None and leader != _NO_LEADER and version >= FIRST_CURRENT_LEADER_VERSION:
                    buf += _CURRENT_LEADER_TAG
                    buf += _LEADER_ID_AND_EPOCH.pack(leader[0], leader[1], _NO_TAGGED_FIELDS)
                else:
                    buf.append(_NO_TAGGED_FIELDS)
        if flexible:
            buf.append(_NO_TAGGED_FIELDS)
    if version >= 1:
        buf += I32.pack(throttle_time_ms)
    if flexible:
        if node_endpoints and version >= FIRST_CURRENT_LEADER_VERSION:
            field = bytearray()
            write_array_len(field, len(node_endpoints), True)
            for node_id, host, port, rack in node_endpoints:
                field += I32.pack(node_id)
                write_string(field, host, True)
                field += I32.pack(port)
                write_string(field, rack, True)
                field.append(_NO_TAGGED_FIELDS)
            buf += bytes([1, 0])        # one tagged field, tag 0
            write_uvarint(buf, len(field))
            buf += field
        else:
            buf.append(_NO_TAGGED_FIELDS)
    return bytes(buf), flexible
