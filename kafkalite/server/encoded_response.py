"""A response whose body was encoded ahead of time (e.g. Metadata for all topics, encoded once per
metadata change and shared by every request until the next one). The network layer frames it
with the request's correlation id; the bytes are the same as encoding the response object."""
from __future__ import annotations

import struct
from dataclasses import dataclass

_EMPTY_TAGGED_FIELDS = b"\x00"


@dataclass(frozen=True)
class EncodedResponse:
    body: bytes
    flexible: bool      # the API version uses response header v1 (correlation id + tagged fields)

    def frame(self, correlation_id: int) -> bytes:
        header = struct.pack(">i", correlation_id) + (_EMPTY_TAGGED_FIELDS if self.flexible else b"")
        return struct.pack(">i", len(header) + len(self.body)) + header + self.body


def encode_body(response: object, api_version: int) -> EncodedResponse:
    """Encode `response` (a kafka-python response object) without header and frame."""
    response.API_VERSION = api_version  # type: ignore[attr-defined]
    body = response.encode(header=False, framed=False)  # type: ignore[attr-defined]
    return EncodedResponse(bytes(body), bool(response.flexible_version_q(api_version)))  # type: ignore[attr-defined]
