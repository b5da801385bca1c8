"""Kafka's wire primitives as small appending writers, for the encoders that write a response
without kafka-python's objects (Fetch around file regions, Produce answers, Metadata topic
entries, the Metadata handler's array counts). Classic versions use int16/int32 length prefixes
with -1 for null; flexible versions the unsigned-varint "compact" forms, length + 1 with 0 for
null."""
from __future__ import annotations

import struct
from typing import Optional

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def write_uvarint(buf: bytearray, value: int) -> None:
    while value >= 0x80:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


def write_string(buf: bytearray, s: Optional[str], flexible: bool) -> None:
    """A (nullable) string: int16 length, or compact from the first flexible version."""
    if s is None:
        if flexible:
            buf.append(0)
        else:
            buf += I16.pack(-1)
        return
    b = s.encode("utf-8")
    if flexible:
        write_uvarint(buf, len(b) + 1)
    else:
        buf += I16.pack(len(b))
    buf += b


def write_array_len(buf: bytearray, n: Optional[int], flexible: bool) -> None:
    """A (nullable) array's element count: int32, or compact from the first flexible version."""
    if flexible:
        write_uvarint(buf, 0 if n is None else n + 1)
    else:
        buf += I32.pack(-1 if n is None else n)
