"""Request header decoding (v1 and flexible v2) — pure functions over the frame bytes.

The header precedes every request body; its version depends on whether the (api, version) is
flexible, which only the API's message spec knows, so the caller passes `flexible`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


class MalformedHeaderError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_api(frame: memoryview | bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without decoding the rest."""
    if len(frame) < 8:
        raise MalformedHeaderError("frame shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, correlation_id


def read_unsigned_varint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedHeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedHeaderError("varint too long")


def decode_request_header(frame: memoryview | bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode the header; return it and the offset where the body starts."""
    if len(frame) < _FIXED.size:
        raise MalformedHeaderError("frame shorter than a request header")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    pos = _FIXED.size
    client_id: str | None = None
    if client_len >= 0:  # client_id is a plain (non-compact) nullable string even in header v2
        end = pos + client_len
        if end > len(frame):
            raise MalformedHeaderError("client_id runs past the frame")
        try:
            client_id = bytes(frame[pos:end]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedHeaderError("client_id is not UTF-8") from e
        pos = end
    elif client_len != -1:
        raise MalformedHeaderError("negative client_id length")
    if flexible:
        num_tags, pos = read_unsigned_varint(frame, pos)
        for _ in range(num_tags):
            _tag, pos = read_unsigned_varint(frame, pos)
            size, pos = read_unsigned_varint(frame, pos)
            pos += size
            if pos > len(frame):
                raise MalformedHeaderError("tagged field runs past the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos
