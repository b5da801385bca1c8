"""Responses made of encoded bytes and file regions, sent with ``sendfile`` or copied.

A Fetch response's record bytes stay in the segment files: the response is a list of parts,
``bytes`` (the envelope: header, per-partition fields, length prefixes) and :class:`FileRegion`
(a byte range of an open segment file). On a plaintext socket the regions go to the socket with
``os.sendfile``; a small response is cheaper to copy once into one buffer and ``write()``.

A region promises ``size`` bytes as they were when the log read them. The segment file counts
its truncations; every region is checked after all of the file bytes have been sent and before
the response's last byte leaves, so a truncation (even one followed by new appends at the same
positions) racing the send closes the connection with the response incomplete: the client never
sees other bytes than the ones the read promised. A deleted segment stays readable: the region's
owner keeps its descriptor open.
"""
from __future__ import annotations

import os
import select
import socket
from dataclasses import dataclass
from typing import Protocol, Sequence, Union


class TruncationCounted(Protocol):
    """The owner of a region's descriptor: it keeps the descriptor open and counts truncations."""
    truncations: int


@dataclass(slots=True)
class FileRegion:
    fd: int
    position: int
    size: int
    owner: TruncationCounted
    truncations: int        # the owner's count when the bytes were read (located)

    def intact(self) -> bool:
        return self.owner.truncations == self.truncations


Part = Union[bytes, bytearray, memoryview, FileRegion]


class RegionChangedError(ConnectionError):
    """A file region no longer holds the bytes promised: the connection must close."""


class ResponseSend:
    """A framed response: ``parts`` in order, ``size`` bytes in all, ``file_bytes`` of them in files."""

    __slots__ = ("parts", "size", "file_bytes")

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts
        self.size = sum(p.size if isinstance(p, FileRegion) else len(p) for p in parts)
        self.file_bytes = sum(p.size for p in parts if isinstance(p, FileRegion))

    def regions(self) -> list[FileRegion]:
        return [p for p in self.parts if isinstance(p, FileRegion)]

    def check_intact(self) -> None:
        for r in self.regions():
            if not r.intact():
                raise RegionChangedError(f"segment file truncated under a {r.size}-byte region "
                                         f"at position {r.position} being sent")

    def materialize(self) -> bytearray:
        """The whole response in one buffer: file bytes read straight into it (one copy)."""
        buf = bytearray(self.size)
        mv = memoryview(buf)
        pos = 0
        for p in self.parts:
            if isinstance(p, FileRegion):
                end = pos + p.size
                while pos < end:
                    n = os.preadv(p.fd, [mv[pos:end]], p.position + p.size - (end - pos))
                    if n <= 0:
                        raise RegionChangedError(f"segment file shorter than a {p.size}-byte region "
                                                 f"at position {p.position}")
                    pos += n
            else:
                n = len(p)
                mv[pos:pos + n] = p
                pos += n
        self.check_intact()
        return buf

    def for_sendfile(self) -> list[Part]:
        """The parts to send, arranged so that the last one is bytes held in memory: when the
        response ends with a region, its last byte is read now and sent after the check."""
        parts = list(self.parts)
        last = parts[-1] if parts else b""
        if isinstance(last, FileRegion):
            tail = os.pread(last.fd, 1, last.position + last.size - 1)
            if len(tail) != 1:
                raise RegionChangedError("segment file shorter than the region being sent")
            parts[-1] = FileRegion(last.fd, last.position, last.size - 1, last.owner, last.truncations)
            parts.append(tail)
        return parts


def _wait_writable(poller: select.poll) -> None:
    while not poller.poll(1000):
        pass


def send_blocking(sock: socket.socket, parts: Sequence[Part], closing: list[bool]) -> None:
    """Send ``parts`` (from :meth:`ResponseSend.for_sendfile`) on a non-blocking socket, waiting
    in ``poll`` when it is full: run in a worker thread while the event loop leaves the socket's
    sending side alone. Envelope bytes followed by file bytes go with MSG_MORE so a header does
    not leave in a packet of its own. ``closing[0]`` set by the loop stops the send."""
    fd = sock.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if isinstance(part, FileRegion):
            offset, end = part.position, part.position + part.size
            while offset < end:
                if closing[0]:
                    raise ConnectionAbortedError("connection closing")
                try:
                    n = os.sendfile(fd, part.fd, offset, end - offset)
                except BlockingIOError:
                    _wait_writable(poller)
                    continue
                if n == 0:
                    raise RegionChangedError(f"segment file shorter than a {part.size}-byte region "
                                             f"at position {part.position}")
                offset += n
        else:
            if i == last:
                # every file byte has left: were they still the bytes the log read?
                for r in parts:
                    if isinstance(r, FileRegion) and not r.intact():
                        raise RegionChangedError("segment file truncated under a region being sent")
            mv = memoryview(part)
            flags = 0 if i == last else socket.MSG_MORE
            while mv:
                if closing[0]:
                    raise ConnectionAbortedError("connection closing")
                try:
                    n = sock.send(mv, flags)
                except BlockingIOError:
                    _wait_writable(poller)
                    continue
                mv = mv[n:]
