"""A response whose body was encoded ahead of time (e.g. Metadata for all topics, encoded once per
metadata change and shared by every request until the next one). The network layer frames it
with the request's correlation id; the bytes are the same as encoding the response object."""
from __future__ import annotations

import struct
from typing import NamedTuple

_SIZE_CORRELATION = struct.Struct(">ii")
_SIZE_CORRELATION_TAGS = struct.Struct(">iiB")


class EncodedResponse(NamedTuple):
    """A named tuple: Produce answers one per request."""
    body: bytes
    flexible: bool      # the API version uses response header v1 (correlation id + tagged fields)

    def frame(self, correlation_id: int) -> bytes:
        body = self.body
        if self.flexible:   # size, correlation id, no tagged fields
            return _SIZE_CORRELATION_TAGS.pack(len(body) + 5, correlation_id, 0) + body
        return _SIZE_CORRELATION.pack(len(body) + 4, correlation_id) + body


def encode_body(response: object, api_version: int) -> EncodedResponse:
    """Encode `response` (a kafka-python response object) without header and frame."""
    response.API_VERSION = api_version  # type: ignore[attr-defined]
    body = response.encode(header=False, framed=False)  # type: ignore[attr-defined]
    return EncodedResponse(bytes(body), bool(response.flexible_version_q(api_version)))  # type: ignore[attr-defined]
