"""Request header decoding (v1 and flexible v2) — pure functions over the frame bytes.

The header precedes every request body; its version depends on whether the (api, version) is
flexible, which only the API's message spec knows, so the caller passes `flexible`.
Leniency follows Kafka's RequestHeader.parse: a null (any negative length) client id reads as
"", malformed UTF-8 is replaced rather than refused, and a tagged-field count that overflows
int32 to a negative number means "no tagged fields".
"""
from __future__ import annotations

import struct
from typing import NamedTuple

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


class MalformedHeaderError(ValueError):
    pass


class RequestHeader(NamedTuple):
    """A named tuple: one is built per request (a frozen dataclass costs twice as much)."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str  # never None: Kafka treats a null client id as ""


def peek_api(frame: memoryview | bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without decoding the rest."""
    if len(frame) < 8:
        raise MalformedHeaderError("frame shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, correlation_id


def read_unsigned_varint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """Kafka's ByteUtils.readUnsignedVarint: at most 5 bytes, the result wrapped to a Java int
    (so it may come out negative)."""
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedHeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            value &= 0xFFFFFFFF
            return (value - (1 << 32) if value >= 1 << 31 else value), pos
        shift += 7
        if shift > 28:
            raise MalformedHeaderError("varint too long")


_FIXED_V0 = struct.Struct(">hhi")  # header v0: no client id
# Kafka's one header-v0 request still served: ControlledShutdown v0 (its generator special-cases it)
_HEADER_V0_APIS = frozenset({(7, 0)})


def decode_request_header(frame: memoryview | bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode the header; return it and the offset where the body starts."""
    n = len(frame)
    client_len: int | None = None   # None: too short for header v1/v2 (fine for header v0 only)
    if n >= _FIXED.size:
        api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    elif n >= _FIXED_V0.size:
        api_key, api_version, correlation_id = _FIXED_V0.unpack_from(frame, 0)
    else:
        raise MalformedHeaderError("frame shorter than a request header")
    if (api_key, api_version) in _HEADER_V0_APIS:
        return RequestHeader(api_key, api_version, correlation_id, ""), _FIXED_V0.size
    if client_len is None:
        raise MalformedHeaderError("frame shorter than a request header")
    pos = _FIXED.size
    client_id = ""
    if client_len >= 0:  # client_id is a plain (non-compact) nullable string even in header v2
        end = pos + client_len
        if end > n:
            raise MalformedHeaderError("client_id runs past the frame")
        client_id = str(frame[pos:end], "utf-8", "replace")
        pos = end
    if flexible:
        if pos < n and frame[pos] == 0:     # no tagged fields: nearly every request
            pos += 1
        else:
            num_tags, pos = read_unsigned_varint(frame, pos)
            for _ in range(num_tags):  # a negative count reads no fields, as in Kafka
                _tag, pos = read_unsigned_varint(frame, pos)
                size, pos = read_unsigned_varint(frame, pos)
                if size < 0:
                    raise MalformedHeaderError("negative tagged field size")
                pos += size
                if pos > n:
                    raise MalformedHeaderError("tagged field runs past the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos
