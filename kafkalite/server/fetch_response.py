"""Fetch responses encoded around the record bytes left in the segment files.

The Fetch handler builds kafka-python's FetchResponse object as for any API, except that a
partition's ``records`` may be the log's :class:`FetchDataInfo` instead of bytes. This encoder
writes exactly what kafka-python's codec writes for that version (the tests compare them byte
for byte), with each FetchDataInfo's slices as :class:`FileRegion` parts between the envelope's
bytes, so that the socket server can ``sendfile`` them (or copy them once, for small responses).
"""
from __future__ import annotations

import struct
import uuid
from typing import Any, Optional

from kafkalite.log.log import FetchDataInfo
from kafkalite.network.send import FileRegion, Part, ResponseSend
from kafkalite.protocol.wire import I16 as _I16, I32 as _I32, I64 as _I64
from kafkalite.protocol.wire import write_array_len as _array_len
from kafkalite.protocol.wire import write_string as _string
from kafkalite.protocol.wire import write_uvarint as _uvarint

FIRST_FLEXIBLE_VERSION = 12

_PARTITION_HEAD = struct.Struct(">ihq")           # partition_index, error_code, high_watermark
_PRODUCER_AND_OFFSET = struct.Struct(">qq")
_EPOCH_END_OFFSET = struct.Struct(">iq")
_SEPARATE_PART_BYTES = 4096


class UnsupportedShape(Exception):
    """A field this encoder does not write is set: the caller falls back to the generic codec."""


def _records_len(buf: bytearray, n: Optional[int], flexible: bool) -> None:
    """A nullable (compact from v12) bytes length."""
    if flexible:
        _uvarint(buf, 0 if n is None else n + 1)
    else:
        buf += _I32.pack(-1 if n is None else n)


def _flush(parts: list[Part], buf: bytearray) -> bytearray:
    if buf:
        parts.append(buf)
        return bytearray()
    return buf


def _diverging_epoch_tag(p: Any) -> bytes:
    """Tag 0, written whenever the handler set it (it does only when the follower diverges)."""
    de = getattr(p, "diverging_epoch", None)
    if de is None:
        return b""
    body = _EPOCH_END_OFFSET.pack(de.epoch, de.end_offset) + b"\x00"
    out = bytearray()
    _uvarint(out, 0)            # tag 0
    _uvarint(out, len(body))
    return bytes(out + body)


def encode_fetch_response(resp: Any, version: int, correlation_id: int) -> ResponseSend:
    """The framed response (size prefix, header, body) as envelope bytes and file regions."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    if version >= 16 and getattr(resp, "node_endpoints", None):
        raise UnsupportedShape("node_endpoints")
    parts: list[Part] = []
    buf = bytearray(4)          # the size prefix, filled in at the end
    buf += _I32.pack(correlation_id)
    if flexible:
        buf.append(0)           # response header v1: no tagged fields
    if version >= 1:
        buf += _I32.pack(resp.throttle_time_ms)
    if version >= 7:
        buf += _I16.pack(resp.error_code)
        buf += _I32.pack(resp.session_id)
    topics = resp.responses or []
    _array_len(buf, len(topics), flexible)
    for t in topics:
        if version >= 13:
            tid = t.topic_id
            buf += (tid.bytes if isinstance(tid, uuid.UUID) else bytes(16) if tid is None else bytes(tid))
        else:
            _string(buf, t.topic, flexible)
        partitions = t.partitions or []
        _array_len(buf, len(partitions), flexible)
        for p in partitions:
            if flexible and (getattr(p, "current_leader", None) is not None
                             or getattr(p, "snapshot_id", None) is not None):
                raise UnsupportedShape("current_leader / snapshot_id")
            buf += _PARTITION_HEAD.pack(p.partition_index, p.error_code, p.high_watermark)
            if version >= 4:
                buf += _I64.pack(p.last_stable_offset)
            if version >= 5:
                buf += _I64.pack(p.log_start_offset)
            if version >= 4:
                aborted = p.aborted_transactions
                _array_len(buf, None if aborted is None else len(aborted), flexible)
                for a in aborted or ():
                    buf += _PRODUCER_AND_OFFSET.pack(a.producer_id, a.first_offset)
                    if flexible:
                        buf.append(0)
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            records = p.records
            if isinstance(records, FetchDataInfo):
                located = records.located_slices()
                records = records.read_bytes() if not located and records.size else located
            if isinstance(records, list):
                _records_len(buf, sum(s.size for s, _f, _t in records), flexible)
                for s, f, n in records:
                    buf = _flush(parts, buf)
                    parts.append(FileRegion(s.fd, s.position, s.size, f, n))
            elif records is None:
                _records_len(buf, None, flexible)
            else:
                _records_len(buf, len(records), flexible)
                if len(records) >= _SEPARATE_PART_BYTES:   # already in memory: no second copy
                    buf = _flush(parts, buf)
                    parts.append(records)
                else:
                    buf += records
            if flexible:
                tag = _diverging_epoch_tag(p)
                if tag:
                    buf.append(1)
                    buf += tag
                else:
                    buf.append(0)
        if flexible:
            buf.append(0)
    if flexible:
        buf.append(0)
    _flush(parts, buf)
    send = ResponseSend(parts)
    first = parts[0]
    assert isinstance(first, bytearray)     # the envelope always starts the response
    _I32.pack_into(first, 0, send.size - 4)
    return send
