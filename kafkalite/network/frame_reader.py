"""Request frames read from the socket with as few copies as the frame sizes allow.

A Kafka request is a 4-byte big-endian size and that many bytes. asyncio's StreamReader copies
every byte twice in user space (appended to its buffer, then sliced out by ``readexactly``),
after the event loop's own ``recv`` into a new ``bytes``. Here the socket is read with
``BufferedProtocol``: the kernel writes straight into our buffers.

- Small frames (the common case: many per ``recv``) land in a staging buffer and are copied out
  once, each into a ``bytearray`` of its own.
- A frame that cannot fit in the staging buffer gets a buffer of its exact size as soon as its
  size prefix is known; what the staging buffer already holds of it is copied there, and the
  rest is received straight into it — a produce of a megabyte is never copied in user space.

Every frame is a new object that nobody else writes to, so a handler may keep views of it.
A size prefix that is negative or above ``socket.request.max.bytes`` ends the stream after the
frames before it (the connection is closed before any of that frame is read into memory).
"""
from __future__ import annotations

import asyncio
import struct
from collections import deque
from typing import Callable, Optional, Union, cast

SIZE_PREFIX = 4
_SIZE = struct.Struct(">i")
# Big enough for many small requests per recv; a frame larger than this is read into a
# buffer of its own (and never copied).
STAGING_BYTES = 64 * 1024
# Read ahead of the request being handled up to this many bytes of complete frames, then
# stop reading the socket until the handler caught up (StreamReader's limit was 1 MiB).
READ_AHEAD_BYTES = 1 << 20


class FrameSizeError(Exception):
    """A size prefix outside [0, max_request_bytes]: the connection is closed."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class FrameAssembler:
    """The pure part: buffers to receive into, and the frames they complete, in order.

    ``get_buffer()`` returns where the next received bytes go; ``buffer_updated(n)`` says how
    many arrived there. Complete frames (``bytearray``), or a :class:`FrameSizeError` after
    the last good frame, appear in ``frames``; nothing more is accepted after an error."""

    __slots__ = ("max_request_bytes", "frames", "queued_bytes", "failed", "_stage", "_start", "_end",
                 "_frame", "_filled")

    def __init__(self, max_request_bytes: int, staging_bytes: int = STAGING_BYTES) -> None:
        if staging_bytes < SIZE_PREFIX:
            raise ValueError("the staging buffer must hold a size prefix")
        self.max_request_bytes = max_request_bytes
        self.frames: deque[Union[bytearray, FrameSizeError]] = deque()
        self.queued_bytes = 0               # bytes of the complete frames in ``frames``
        self.failed = False
        self._stage = bytearray(staging_bytes)
        self._start = 0                     # unparsed bytes are _stage[_start:_end]
        self._end = 0
        self._frame: Optional[bytearray] = None     # a large frame being received in place
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        return memoryview(self._stage)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.failed:
            return
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled == len(frame):
                self._frame = None
                self._push(frame)
            return
        self._end += nbytes
        self._parse()

    def _push(self, frame: bytearray) -> None:
        self.frames.append(frame)
        self.queued_bytes += len(frame)

    def _parse(self) -> None:
        stage, start, end = self._stage, self._start, self._end
        while end - start >= SIZE_PREFIX:
            size = _SIZE.unpack_from(stage, start)[0]
            if size < 0 or size > self.max_request_bytes:
                self.failed = True
                self.frames.append(FrameSizeError(size))
                self._start = self._end = 0
                return
            body = start + SIZE_PREFIX
            if end - body >= size:
                self._push(stage[body:body + size])
                start = body + size
                continue
            if SIZE_PREFIX + size > len(stage):
                # never fits in staging: its own buffer, the rest received straight into it
                frame = bytearray(size)
                have = end - body
                frame[:have] = stage[body:end]
                self._frame, self._filled = frame, have
                start = end = 0
            elif body + size > len(stage):
                # fits once moved to the front
                stage[:end - start] = stage[start:end]
                start, end = 0, end - start
            break
        if start == end:
            start = end = 0
        elif end - start < SIZE_PREFIX and start:
            # a partial size prefix: to the front, so the rest of it always has room
            stage[:end - start] = stage[start:end]
            start, end = 0, end - start
        self._start, self._end = start, end


class FrameProtocol(asyncio.BufferedProtocol):
    """One connection's protocol: frames for :meth:`read_frame`, reading paused while more
    than ``READ_AHEAD_BYTES`` wait, and :meth:`drain` for the writer side (the transport's
    write buffer flow control). ``on_connected`` is called with the protocol once the
    transport exists."""

    def __init__(self, max_request_bytes: int, on_connected: Callable[["FrameProtocol"], None],
                 read_ahead_bytes: int = READ_AHEAD_BYTES) -> None:
        self.assembler = FrameAssembler(max_request_bytes)
        self.transport: Optional[asyncio.Transport] = None
        self._on_connected = on_connected
        self._read_ahead = read_ahead_bytes
        self._loop = asyncio.get_running_loop()
        self._frame_waiter: Optional[asyncio.Future[None]] = None
        self._reading_paused = False
        self._eof = False
        self._lost = False
        self._lost_exc: Optional[BaseException] = None
        self._writing_paused = False
        self._drain_waiters: deque[asyncio.Future[None]] = deque()

    # -- asyncio protocol callbacks ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport has a Transport's methods without deriving from it
        self.transport = cast(asyncio.Transport, transport)
        self._on_connected(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.assembler.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        a = self.assembler
        a.buffer_updated(nbytes)
        if a.frames:
            self._wake_reader()
        # complete frames only: the frame being received must be read whole to make progress
        if (a.failed or a.queued_bytes > self._read_ahead) and not self._reading_paused \
                and self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        return True     # keep the transport for the responses still to be written

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self._lost = True
        self._lost_exc = exc
        self._eof = True
        self._wake_reader()
        while self._drain_waiters:
            w = self._drain_waiters.popleft()
            if not w.done():
                w.set_exception(ConnectionResetError("Connection lost"))

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        while self._drain_waiters:
            w = self._drain_waiters.popleft()
            if not w.done():
                w.set_result(None)

    # -- for the connection's task ---------------------------------------------------------------
    async def read_frame(self) -> bytearray:
        """The next request frame. Raises FrameSizeError for a bad size prefix and
        asyncio.IncompleteReadError when the peer closed (mid-frame or between frames)."""
        a = self.assembler
        while not a.frames:
            if self._eof:
                raise asyncio.IncompleteReadError(b"", None)
            waiter = self._loop.create_future()
            self._frame_waiter = waiter
            try:
                await waiter
            finally:
                self._frame_waiter = None
        item = a.frames.popleft()
        if isinstance(item, FrameSizeError):
            raise item
        a.queued_bytes -= len(item)
        if self._reading_paused and not self._lost and not a.failed and a.queued_bytes <= self._read_ahead // 2:
            self._reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        return item

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if not self._writing_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _wake_reader(self) -> None:
        w = self._frame_waiter
        if w is not None and not w.done():
            w.set_result(None)
